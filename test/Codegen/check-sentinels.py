#!/usr/bin/env python3
"""Sentinel regression test of a compiled artifact (docs/dialect.md, "Sentinel
rows are never computed"), end to end through `moec compile` and `moec-run`.

A custom router (a moe.layer whose expert ids and routing weights are inputs)
runs twice on the same random tokens:

  A: every id valid;
  B: tokens 1 and 4 get only ids at or above the number of experts (4, 9, 2^40)
     and NaN in their hidden rows and routing weights; token 2 gets one such id
     (its routing weight NaN) beside a valid one.

Checks: in B, rows 1 and 4 are exactly +0.0; every row whose ids did not change
(0, 3, 5, 6) is bit for bit the same as in A; every row matches a float64 numpy
reference that skips invalid slots (token 2: its valid slot only), within the
tolerance of the expert weights' dtype.

  check-sentinels.py --bin BIN --target cpu|cuda --work DIR [--phase all|prepare|run]
                     [-- extra moec compile flags]

`prepare` writes the model and inputs and compiles (needs moec); `run` runs and
checks (needs moec-run and numpy only: the GPU machine); `all` does both. Exit
77 (skipped) for --target=cuda where nvcc or a device is missing.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from moe_block import layer_mlir, random_experts, random_tokens, reference  # noqa: E402
from moec_tools import NO_COMPILER, NO_DEVICE, phased_main, run_tool  # noqa: E402

T, H, I, E, K = 7, 32, 16, 4, 2


def prepare(args):
    rng = np.random.default_rng(7)
    gate_up, down = random_experts(rng, E, H, I, 0.2)
    x, ids_a, w = random_tokens(rng, T, H, E, K, 0.1)
    ids_b, x_b, w_b = ids_a.copy(), x.copy(), w.copy()
    ids_b[1] = [E, 9]
    ids_b[4] = [2 ** 40, E]
    x_b[[1, 4]] = np.nan
    w_b[[1, 4]] = np.nan
    ids_b[2, 1] = E + 3
    w_b[2, 1] = np.nan
    os.makedirs(args.work, exist_ok=True)
    with open(os.path.join(args.work, "model.mlir"), "w") as f:
        f.write(layer_mlir(gate_up, down, K))
    np.savez(os.path.join(args.work, "a.npz"), x=x, ids=ids_a, w=w)
    np.savez(os.path.join(args.work, "b.npz"), x=x_b, ids=ids_b, w=w_b)
    np.savez(os.path.join(args.work, "weights.npz"), gate_up=gate_up, down=down)
    cmd = [os.path.join(args.bin, "moec"), "compile", os.path.join(args.work, "model.mlir"),
           f"--target={args.target}", "--max-tokens=16", "-o",
           os.path.join(args.work, "artifact")] + args.compile_flags
    return run_tool(cmd, args.target, NO_COMPILER)


def run(args):
    moec_run = os.path.join(args.bin, "moec-run")
    artifact = os.environ.get("MOEC_PREBUILT_ARTIFACT") or os.path.join(args.work, "artifact")
    outs = {}
    for case in ("a", "b"):
        out = os.path.join(args.work, f"out_{case}.npz")
        rc = run_tool([moec_run, artifact, "--inputs", os.path.join(args.work, f"{case}.npz"),
                       "--outputs", out], args.target, NO_DEVICE)
        if rc:
            return rc
        outs[case] = np.load(out)["out"]
    inputs = {c: np.load(os.path.join(args.work, f"{c}.npz")) for c in ("a", "b")}
    weights = np.load(os.path.join(args.work, "weights.npz"))
    a, b = outs["a"], outs["b"]
    failures = []
    for t in (1, 4):
        if not (np.all(b[t] == 0) and not np.any(np.signbit(b[t]))):
            failures.append(f"row {t} (only sentinel ids, NaN hidden row) is {b[t][:4]}..., "
                            "not exactly +0")
    for t in (0, 3, 5, 6):
        if a[t].tobytes() != b[t].tobytes():
            failures.append(f"row {t} (ids unchanged) differs from the all-valid run: max diff "
                            f"{np.nanmax(np.abs(a[t] - b[t])):.3g}")
    bf16 = "--expert-weights=bf16" in args.compile_flags
    tol = 2e-2 if bf16 else 1e-5
    for case, got in (("a", a), ("b", b)):
        i = inputs[case]
        want = reference(i["x"], i["ids"], i["w"], weights["gate_up"], weights["down"])
        scale = max(1.0, np.abs(want).max())
        err = np.abs(got - want).max() / scale
        if not np.all(np.isfinite(got)) or err > tol:
            failures.append(f"run {case}: max error {err:.3g} (scaled) against the float64 "
                            f"reference, tolerance {tol}")
        else:
            print(f"run {case}: max scaled error {err:.2e} against float64 (tolerance {tol})")
    for f in failures:
        print("FAIL:", f)
    if not failures:
        print("ok: sentinel rows exactly 0, unchanged rows bit-identical, all rows match float64")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(phased_main(__doc__, prepare, run))
