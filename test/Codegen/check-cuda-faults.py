#!/usr/bin/env python3
"""A CUDA error inside a run, through the C API (moec.h): the run fails with a
message naming it, the model is usable for the next run when the context
survived, and reports itself dead at once when not; nothing hangs.

    check-cuda-faults.py LIBMOEC.so ARTIFACT INPUTS.npz

Each case runs in a child process of its own (a lost context is the
process's): MOEC_INJECT_CUDA_FAULT=KIND:2 (runtime/src/cuda/FaultInjection.cu)
fails the second of three runs. Exit 0 when every case behaves, 77 where no
CUDA device answers."""
import ctypes
import os
import subprocess
import sys

import numpy as np


class Tensor(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_int), ("rank", ctypes.c_int32),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("data", ctypes.c_void_p)]


def child(lib_path, artifact, inputs_path):
    """Three runs; prints one line per run: ok CHECKSUM or error MESSAGE."""
    lib = ctypes.CDLL(lib_path)
    lib.moec_load.restype = ctypes.c_void_p
    lib.moec_load.argtypes = [ctypes.c_char_p]
    lib.moec_last_error.restype = ctypes.c_char_p
    lib.moec_run.argtypes = [ctypes.c_void_p, ctypes.POINTER(Tensor), ctypes.c_size_t,
                             ctypes.POINTER(Tensor), ctypes.c_size_t]
    lib.moec_output_name.restype = ctypes.c_char_p
    lib.moec_output_name.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    lib.moec_num_outputs.argtypes = [ctypes.c_void_p]
    model = lib.moec_load(artifact.encode())
    if not model:
        print("load-error", lib.moec_last_error().decode(), flush=True)
        return
    keep = []

    def tensor(name, array):
        shape = (ctypes.c_int64 * array.ndim)(*array.shape)
        keep.append((shape, array))
        return Tensor(name.encode(), 0, array.ndim, shape, array.ctypes.data)

    inputs = {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in np.load(inputs_path).items()}
    tokens = next(iter(inputs.values())).shape
    ins = (Tensor * len(inputs))(*[tensor(k, v) for k, v in inputs.items()])
    outs_np = [np.full(tokens, np.nan, dtype=np.float32) for _ in range(lib.moec_num_outputs(model))]
    outs = (Tensor * len(outs_np))(*[tensor(lib.moec_output_name(model, i).decode(), a)
                                      for i, a in enumerate(outs_np)])
    for _ in range(3):
        for a in outs_np:
            a.fill(np.nan)
        if lib.moec_run(model, ins, len(inputs), outs, len(outs_np)) == 0:
            print("ok", float(sum(np.nansum(np.abs(a)) for a in outs_np)),
                  bool(all(np.isfinite(a).all() for a in outs_np)), flush=True)
        else:
            print("error", lib.moec_last_error().decode(), flush=True)


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        child(*sys.argv[2:])
        return 0
    lib, artifact, inputs = sys.argv[1:4]
    failures = 0

    def case(fault):
        env = dict(os.environ)
        if fault:
            env["MOEC_INJECT_CUDA_FAULT"] = fault
        result = subprocess.run([sys.executable, __file__, "--child", lib, artifact, inputs],
                                env=env, capture_output=True, text=True, timeout=120)
        lines = result.stdout.strip().splitlines()
        print(f"== {fault or 'no fault'} (exit {result.returncode})")
        print("\n".join(lines) or result.stderr[-2000:])
        return result.returncode, lines

    rc, clean = case(None)
    if clean and clean[0].startswith("load-error") and "no CUDA device" in clean[0]:
        return 77
    if rc != 0 or len(clean) != 3 or not all(l.startswith("ok") and l.endswith("True") for l in clean):
        print("FAIL: three clean runs expected")
        return 1
    expected = clean[0]
    rc, launch = case("launch:2")
    if not (rc == 0 and len(launch) == 3 and launch[0] == expected and
            launch[1].startswith("error") and "FaultInjection.cu" in launch[1] and
            launch[2] == expected):
        print("FAIL: a failed launch must fail its run alone; the next run gives the same outputs")
        failures += 1
    rc, lost = case("illegal-address:2")
    if not (rc == 0 and len(lost) == 3 and lost[0] == expected and lost[1].startswith("error") and
            "cudaErrorIllegalAddress" in lost[1] and lost[2].startswith("error") and
            "cannot run again" in lost[2]):
        print("FAIL: a lost context must fail its run and report the model dead after it")
        failures += 1
    print("PASS" if failures == 0 else f"{failures} case(s) failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
