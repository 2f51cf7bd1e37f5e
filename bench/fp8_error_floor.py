#!/usr/bin/env python3
"""The error that issue 6's FP8 recipe itself makes, whatever implements it.

The recipe: weights cast to e4m3 with one scale per 128x128 block (amax / 448), rows quantised to e4m3 per token and
128 channels (amax / 448), products accumulated exactly with each K block's two scales applied. Here it is emulated
in float64 (ml_dtypes' e4m3 rounding, nearest even; no accumulation error at all) on one expert of each benchmark
shape, with Gaussian tokens and Gaussian weights of std 1/sqrt(fan in), and compared with the same expert in float64
without quantisation. moec's FP8 output matches this emulation to 1e-7 relative (test/Codegen/check-fp8-artifact.py,
on the CPU and the H200), so what is printed is moec's error too.

Three figures per shape, each as DeepGEMM's diff 1 - 2*sum(xy)/sum(x^2 + y^2) and as relative L2:
  gemm        the gate/up GEMM alone (what DeepGEMM's own test bounds by diff < 1e-3)
  block       the whole expert: gate/up GEMM, SiLU-GLU, h quantised again, down GEMM
  checkpoint  the whole expert when the weights are already e4m3 (the reference uses those weights): only the
              rows' quantisation errs
Usage: fp8_error_floor.py [--tokens 64]   (numpy, ml_dtypes; about a minute)
"""
import argparse

import ml_dtypes
import numpy as np

SHAPES = {"qwen3-30b-a3b": (2048, 768), "mixtral-8x7b": (4096, 14336), "gpt-oss-120b": (2880, 2880),
          "deepseek-v3": (7168, 2048)}


def e4m3(x):
    return x.astype(ml_dtypes.float8_e4m3fn).astype(np.float64)


def quantize_rows(a):
    """Per row, per 128 columns: scale = amax / 448 (1 for an all-zero group); dequantised values."""
    t, k = a.shape
    out = np.empty_like(a)
    for c in range(0, k, 128):
        g = a[:, c:c + 128]
        s = np.abs(g).max(axis=1, keepdims=True) / 448
        s[s == 0] = 1
        out[:, c:c + 128] = e4m3(g / s) * s
    return out


def quantize_blocks(w):
    """Per 128x128 block of w [N, K]: scale = amax / 448; dequantised values."""
    out = np.empty_like(w)
    for r in range(0, w.shape[0], 128):
        for c in range(0, w.shape[1], 128):
            b = w[r:r + 128, c:c + 128]
            s = np.abs(b).max() / 448 or 1.0
            out[r:r + 128, c:c + 128] = e4m3(b / s) * s
    return out


def diff(x, y):
    return 1 - 2 * np.sum(x * y) / np.sum(x * x + y * y)


def rel_l2(x, y):
    return np.linalg.norm(x - y) / np.linalg.norm(y)


def expert(x, gate_up, down, quantize):
    q = quantize_rows if quantize else (lambda a: a)
    y = q(x) @ gate_up.T
    i = gate_up.shape[0] // 2
    h = y[:, :i] / (1 + np.exp(-y[:, :i])) * y[:, i:]
    return q(h) @ down.T, y


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=64)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    print(f"{'shape':15s} {'gemm diff':>10s} {'rel L2':>7s} {'block diff':>11s} {'rel L2':>7s} "
          f"{'checkpoint diff':>16s} {'rel L2':>7s}")
    for name, (h, i) in SHAPES.items():
        x = rng.standard_normal((args.tokens, h))
        gate_up = rng.standard_normal((2 * i, h)) / np.sqrt(h)
        down = rng.standard_normal((h, i)) / np.sqrt(i)
        exact, y_exact = expert(x, gate_up, down, quantize=False)
        gate_up_q, down_q = quantize_blocks(gate_up), quantize_blocks(down)
        fp8, y_fp8 = expert(x, gate_up_q, down_q, quantize=True)
        checkpoint, _ = expert(x, gate_up_q, down_q, quantize=False)
        print(f"{name:15s} {diff(y_fp8, y_exact):10.2e} {rel_l2(y_fp8, y_exact):7.4f} {diff(fp8, exact):11.2e} "
              f"{rel_l2(fp8, exact):7.4f} {diff(fp8, checkpoint):16.2e} {rel_l2(fp8, checkpoint):7.4f}")


if __name__ == "__main__":
    main()
