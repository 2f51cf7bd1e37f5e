#!/usr/bin/env python3
"""End to end FP8 on the CPU: `moec compile MODEL --fp8 --target=cpu` and
`moec-run`, against the reference interpreter's FP8 output (the same e4m3
casts, emulated in float64) and against the fp32 reference (expected.npz).

Usage: check-fp8-artifact.py BIN_DIR FIXTURE_DIR [MAX_DIFF MAX_REL_L2] [--partial-blocks]
                             [--target cpu|cuda] [--work DIR] [--phase all|prepare|run]

FIXTURE_DIR holds model.onnx (or model.mlir), inputs.npz and expected.npz.
--partial-blocks writes such a case into FIXTURE_DIR first: a moe.layer with
H = 200 and I = 136 (gate_up N = 272), so that K and N span whole 128-blocks
and a partial one, with routing given as inputs and expected.npz computed here
in float64.

* Against the interpreter: max |got - want| <= 1e-5 * max(1, max |want|) per
  output. The artifact computes with the dequantised e4m3 values in f32 and the
  interpreter in float64, so only the sums' rounding differs; a wrong scale,
  block index or e4m3 rounding shows as errors of order 1e-2 or more. As the
  quantised activations feed a second matmul, an f32-versus-float64 difference
  can move a value across an e4m3 rounding boundary: the check allows that for
  at most 0.1 % of the elements, each within 1e-2 (relative to max |want|).
* --target cuda: the same artifact on the GPU (FP8 tensor-core kernels) within
  relative L2 1e-3 of the interpreter's FP8 output (issue 6); exit 77 where
  there is no nvcc or no device. --phase prepare / run split the work between
  a machine with moec and one with the GPU.
* Against fp32: DeepGEMM's difference 1 - 2·Σxy / (Σx² + Σy²) and the relative
  L2 error within the bounds (CI: 5e-3 and 0.1, see Transforms/check-fp8.py).
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from moe_block import layer_mlir, reference  # noqa: E402

SKIP = 77


def write_partial_blocks_case(work):
    """A block whose K and N are not multiples of 128 (and exceed it)."""
    T, H, I, E, K = 9, 200, 136, 3, 2
    rng = np.random.default_rng(11)
    gate_up = rng.normal(0, 0.1, (E, 2 * I, H)).astype(np.float32)
    down = rng.normal(0, 0.1, (E, H, I)).astype(np.float32)
    x = rng.normal(0, 1, (T, H)).astype(np.float32)
    ids = np.stack([rng.permutation(E)[:K] for _ in range(T)]).astype(np.int64)
    w = rng.uniform(0.2, 1.0, (T, K)).astype(np.float32)
    os.makedirs(work, exist_ok=True)
    with open(os.path.join(work, "model.mlir"), "w") as f:
        f.write(layer_mlir(gate_up, down, K))
    out = reference(x, ids, w, gate_up, down)
    np.savez(os.path.join(work, "inputs.npz"), x=x, ids=ids, w=w)
    np.savez(os.path.join(work, "expected.npz"), out=out.astype(np.float32))


def prepare(args, model, inputs, work):
    """Everything that needs moec: the interpreter's FP8 output and the artifact."""
    tool = lambda name: os.path.join(args.bin, name)  # noqa: E731
    fp8 = os.path.join(work, "fp8.mlir")
    subprocess.run([tool("moec"), "compile", model, "--fp8", "-o", fp8], check=True)
    with open(fp8) as f:
        if f.read().count("moe.quantize") < 2:
            sys.exit("expected the experts' matmuls in FP8 (two moe.quantize)")
    subprocess.run([tool("moec-interp"), fp8, "--inputs", inputs, "--outputs",
                    os.path.join(work, "interp.npz")], check=True)
    artifact = os.path.join(work, "artifact")
    done = subprocess.run([tool("moec"), "compile", model, "--fp8", f"--target={args.target}",
                           "-o", artifact], capture_output=True, text=True)
    if done.returncode != 0:
        print(done.stderr, end="")
        if args.target == "cuda" and ("nvcc" in done.stderr or "without CUDA" in done.stderr):
            print("skipped: no CUDA compiler")
            return SKIP
        return 1
    with open(os.path.join(artifact, "manifest.txt")) as f:
        if " f8e4m3 " not in f.read():
            sys.exit("the artifact holds no e4m3 weights")
    return 0


def run_and_check(args, fixture, inputs, work):
    run_out = os.path.join(work, "run.npz")
    done = subprocess.run([os.path.join(args.bin, "moec-run"), os.path.join(work, "artifact"),
                           "--inputs", inputs, "--outputs", run_out], capture_output=True, text=True)
    if done.returncode != 0:
        print(done.stderr, end="")
        if args.target == "cuda" and "no CUDA device" in done.stderr:
            print("skipped: no CUDA device")
            return SKIP
        return 1
    interp, run = dict(np.load(os.path.join(work, "interp.npz"))), dict(np.load(run_out))
    failures = 0
    for name, want32 in np.load(os.path.join(fixture, "expected.npz")).items():
        got = run[name].astype(np.float64)
        want = interp[name].astype(np.float64)
        scale = max(1.0, np.abs(want).max())
        err = np.abs(got - want) / scale
        rel = np.linalg.norm(got - want) / np.linalg.norm(want)
        if args.target == "cpu":
            off = np.count_nonzero(err > 1e-5)
            ok_interp = np.all(np.isfinite(got)) and off <= 1e-3 * err.size and err.max() <= 1e-2
            bound = f"{off} of {err.size} elements above 1e-5"
        else:  # issue 6: the GPU within 1e-3 relative of the CPU FP8 reference
            ok_interp = np.all(np.isfinite(got)) and rel <= 1e-3
            bound = "relative L2 <= 1e-3"
        print(f"{'PASS' if ok_interp else 'FAIL'} {name} vs the interpreter's FP8: max error "
              f"{err.max():.3g} (scaled), relative L2 {rel:.3g}; {bound}")
        x, y = got.ravel(), want32.astype(np.float64).ravel()
        diff = 1.0 - 2.0 * np.dot(x, y) / (np.dot(x, x) + np.dot(y, y))
        rel_l2 = np.linalg.norm(x - y) / np.linalg.norm(y)
        ok_ref = diff <= args.max_diff and rel_l2 <= args.max_rel_l2
        print(f"{'PASS' if ok_ref else 'FAIL'} {name} vs fp32: DeepGEMM diff {diff:.3g} "
              f"(<= {args.max_diff:g}), relative L2 {rel_l2:.3g} (<= {args.max_rel_l2:g})")
        failures += (not ok_interp) + (not ok_ref)
    return 1 if failures else 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("bin")
    p.add_argument("fixture", help="fixture directory, or with --partial-blocks the case's")
    p.add_argument("max_diff", nargs="?", type=float, default=1e-3)
    p.add_argument("max_rel_l2", nargs="?", type=float, default=3e-2)
    p.add_argument("--partial-blocks", action="store_true",
                   help="write the partial-blocks case into FIXTURE first")
    p.add_argument("--target", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--work", help="keep the work here (default: a temporary directory)")
    p.add_argument("--phase", choices=["all", "prepare", "run"], default="all",
                   help="prepare needs moec; run needs moec-run and numpy (the GPU machine)")
    args = p.parse_args()
    if args.partial_blocks and args.phase != "run":
        write_partial_blocks_case(args.fixture)
    model = os.path.join(args.fixture, "model.onnx")
    if not os.path.exists(model):
        model = os.path.join(args.fixture, "model.mlir")
    inputs = os.path.join(args.fixture, "inputs.npz")
    with tempfile.TemporaryDirectory() as temporary:
        work = args.work or temporary
        os.makedirs(work, exist_ok=True)
        if args.phase in ("all", "prepare"):
            rc = prepare(args, model, inputs, work)
            if rc:
                return rc
        if args.phase in ("all", "run"):
            return run_and_check(args, args.fixture, inputs, work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
