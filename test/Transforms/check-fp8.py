#!/usr/bin/env python3
"""Checks a model compiled with FP8 experts against the float reference.

Usage: check-fp8.py BIN_DIR FIXTURE_DIR [MAX_DIFF MAX_REL_L2]

Compiles FIXTURE_DIR/model.onnx to the grouped phase, casts the experts to FP8
(moe-quantize-experts-fp8: e4m3 weights with 128x128 block scales, activations
quantized per row in groups of 128), runs it in the reference interpreter (e4m3
emulated exactly), and compares the output with FIXTURE_DIR/expected.npz (the
fp32 reference) with DeepGEMM's difference 1 - 2*sum(x*y) / (sum(x*x) + sum(y*y))
and the relative L2 error, against the given bounds (default: 3.2e-3 and 8e-2,
issue 34's whole-block bounds against fp32).

Why a whole block's bounds are these: e4m3 keeps 3 mantissa bits, so each
quantized operand carries a relative rounding error of about 2.7 % (std); a
block quantizes both operands of two chained matmuls, and the gated activation
multiplies gate and up, so random-init blocks land at 3.5-7.3 % relative L2
(DeepGEMM difference 0.6-2.7e-3) whatever K is (bench/fp8_error_floor.py
emulates the recipe in float64: 4-8 % on small and large shapes). A single FP8
GEMM lands near 3.8 % / 7e-4, which is what issue 6's 1e-3 was written for (its
own test, Float8Kernels.OneGemmWithinDeepGEMMsBoundOfTheUnquantisedProduct in
runtime/test/Float8Test.cpp, measures 6.8-6.9e-4). A wrong scale convention or
layout gives errors of tens of percent, far outside either bound.
"""
import os
import subprocess
import sys
import tempfile

import numpy as np


def main():
    bin_dir, fixture = sys.argv[1], sys.argv[2]
    max_diff = float(sys.argv[3]) if len(sys.argv) > 3 else 3.2e-3
    max_rel_l2 = float(sys.argv[4]) if len(sys.argv) > 4 else 8e-2
    with tempfile.TemporaryDirectory() as work:
        grouped = os.path.join(work, "grouped.mlir")
        fp8 = os.path.join(work, "fp8.mlir")
        out = os.path.join(work, "out.npz")
        subprocess.run([os.path.join(bin_dir, "moec"), "compile", os.path.join(fixture, "model.onnx"),
                        "--compile-to=grouped", "-o", grouped], check=True)
        subprocess.run([os.path.join(bin_dir, "moec-opt"), grouped, "-moe-quantize-experts-fp8",
                        "-o", fp8], check=True)
        with open(fp8) as f:
            text = f.read()
        quantized = text.count("moe.quantize")
        if quantized < 2 or "f8E4M3FN" not in text:
            sys.exit(f"expected the experts' matmuls in FP8, found {quantized} moe.quantize")
        subprocess.run([os.path.join(bin_dir, "moec-interp"), fp8, "--inputs",
                        os.path.join(fixture, "inputs.npz"), "--outputs", out], check=True)
        got = dict(np.load(out))
    failures = 0
    for name, want in np.load(os.path.join(fixture, "expected.npz")).items():
        x, y = got[name].astype(np.float64).ravel(), want.astype(np.float64).ravel()
        diff = 1.0 - 2.0 * np.dot(x, y) / (np.dot(x, x) + np.dot(y, y))
        rel_l2 = np.linalg.norm(x - y) / np.linalg.norm(y)
        ok = diff <= max_diff and rel_l2 <= max_rel_l2
        print(f"{'PASS' if ok else 'FAIL'} {name}: DeepGEMM diff {diff:.3g} (<= {max_diff:g}), "
              f"relative L2 {rel_l2:.3g} (<= {max_rel_l2:g})")
        failures += not ok
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
