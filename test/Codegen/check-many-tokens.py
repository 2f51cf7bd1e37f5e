#!/usr/bin/env python3
"""A compiled artifact at many tokens against the float64 interpreter.

The fixtures hold a few tokens, and some code paths start at a token count:
the kernels choose their tiles by the rows per expert (the wgmma tiles from 32),
the sort its algorithm by the slots, and a shared expert's GEMM runs CUTLASS's
persistent kernel beside the routed chain. This runs a fixture's model on
random tokens (seeded, of the fixture's scale) at each of --tokens with
`moec-run` and compares every output with `moec-interp`'s float64 result:

  max |got - want| <= atol * max(1, max |want|) + rtol * |want|

with 1e-4 / 1e-4 for f32 experts and 1e-2 / 1e-2 with --expert-weights=bf16 in
the compile flags (the fixtures' e2e tolerances, check-cuda-artifact.sh).

  check-many-tokens.py --bin BIN --target cpu|cuda --work DIR --fixture DIR
                       [--tokens 7,512,640] [--phase all|prepare|run]
                       [-- extra moec compile flags]

`prepare` compiles, writes the inputs and the interpreter's outputs (needs moec
and moec-interp); `run` runs and checks (moec-run and numpy only: the GPU
machine); `all` does both. Exit 77 (skipped) for --target=cuda where nvcc or a
device is missing.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from moec_tools import NO_COMPILER, NO_DEVICE, phased_main, run_tool  # noqa: E402


def token_counts(args):
    return [int(t) for t in args.tokens.split(",")]


def prepare(args):
    os.makedirs(args.work, exist_ok=True)
    model = os.path.join(args.fixture, "model.onnx")
    fixture_inputs = np.load(os.path.join(args.fixture, "inputs.npz"))
    rng = np.random.default_rng(512)
    for T in token_counts(args):
        inputs = {}
        for name, value in fixture_inputs.items():
            if value.dtype.kind != "f" or value.ndim < 2:
                return fail(f"{args.fixture}: input '{name}' is not a float tensor of tokens")
            # The token axis is the one before the hidden size ([B, T, H] or [T, H]).
            shape = list(value.shape)
            shape[-2] = T
            if len(shape) == 3:
                shape[0] = 1
            inputs[name] = (rng.standard_normal(shape) * value.std()).astype(value.dtype)
        path = os.path.join(args.work, f"inputs-{T}.npz")
        np.savez(path, **inputs)
        rc = run_tool([os.path.join(args.bin, "moec-interp"), model, f"--inputs={path}",
                       f"--outputs={os.path.join(args.work, f'expected-{T}.npz')}"], "cpu", {})
        if rc:
            return rc
    cmd = [os.path.join(args.bin, "moec"), "compile", model, f"--target={args.target}",
           f"--max-tokens={max(token_counts(args))}", "-o",
           os.path.join(args.work, "artifact")] + args.compile_flags
    return run_tool(cmd, args.target, NO_COMPILER)


def fail(message):
    print("FAIL:", message)
    return 1


def run(args):
    moec_run = os.path.join(args.bin, "moec-run")
    artifact = os.environ.get("MOEC_PREBUILT_ARTIFACT") or os.path.join(args.work, "artifact")
    bf16 = "--expert-weights=bf16" in args.compile_flags
    tol = 1e-2 if bf16 else 1e-4
    failures = 0
    for T in token_counts(args):
        got_path = os.path.join(args.work, f"out-{T}.npz")
        rc = run_tool([moec_run, artifact, "--inputs", os.path.join(args.work, f"inputs-{T}.npz"),
                       "--outputs", got_path], args.target, NO_DEVICE)
        if rc:
            return rc
        got, want = np.load(got_path), np.load(os.path.join(args.work, f"expected-{T}.npz"))
        for name in want.files:
            if name not in got.files or got[name].shape != want[name].shape:
                failures += 1
                shape = got[name].shape if name in got.files else "absent"
                print(f"FAIL: T = {T}, '{name}': {shape}, want {want[name].shape}")
                continue
            g, w = got[name].astype(np.float64), want[name]
            bound = tol * max(1.0, np.abs(w).max()) + tol * np.abs(w)
            excess = np.abs(g - w) - bound
            worst = np.unravel_index(np.argmax(excess), excess.shape)
            if not np.all(np.isfinite(g)) or excess[worst] > 0:
                failures += 1
                print(f"FAIL: T = {T}, '{name}': at {tuple(int(i) for i in worst)} got "
                      f"{g[worst]:.6g}, want {w[worst]:.6g} (tolerance {tol})")
            else:
                rel = np.linalg.norm(g - w) / np.linalg.norm(w)
                print(f"T = {T}, '{name}': ok, relative L2 error {rel:.2e}")
    return 1 if failures else 0


def add_arguments(p):
    p.add_argument("--fixture", required=True)
    p.add_argument("--tokens", default="7,512,640")


if __name__ == "__main__":
    sys.exit(phased_main(__doc__, prepare, run, add_arguments))
