#!/usr/bin/env python3
"""End to end FP8 on the CPU: `moec compile MODEL --fp8 --target=cpu` and
`moec-run`, against the reference interpreter's FP8 output (the same e4m3
casts, emulated in float64) and against the fp32 reference (expected.npz).

Usage: check-fp8-artifact.py BIN_DIR FIXTURE_DIR [MAX_DIFF MAX_REL_L2] [--partial-blocks]
                             [--target cpu|cuda] [--bf16-outputs] [--work DIR]
                             [--phase all|prepare|run]

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
  at most 0.1 % of the elements, each within 1e-2 (relative to max |want|); the
  whole output within relative L2 1e-6 of it (issue 34; the fixtures measure
  1.1-5.5e-7).
* --target cuda: the same artifact on the GPU (FP8 tensor-core kernels) within
  relative L2 1e-2 of the interpreter's FP8 output; exit 77 where there is no
  nvcc or no device. The mma.sync tiles match it to about 1e-7 (issue 6 asked
  for 1e-3). CUTLASS's QGMMA tiles, which run from 16 slots (chooseFP8Tile;
  docs/performance.md), add e4m3 products with about 14 significant bits,
  truncating, before each 128-deep block's scales promote the sum (the
  DeepSeek-V3 report, section 3.3.2): one e4m3 step more or less in a few
  elements of the quantised gate/up result then moves the output by 1e-3 to
  1e-2 (4.2e-3 on deepseek_v3_fp8, whose accuracy against fp32 stays the same
  to three digits; the GPU unit tests allow QGMMA 2^-4 of the RMS per GEMM). A
  wrong scale or block moves it by far more. --bf16-outputs (cuda) compiles the
  artifact with --expert-weights=bf16 --expert-outputs=bf16 as well: the down
  results rounded to bf16 for the combine, a shared expert in bf16 (about 2e-3
  each), held to the same bounds. --phase prepare / run split the
  work between a machine with moec and one with the GPU.
* Against fp32: DeepGEMM's difference 1 - 2·Σxy / (Σx² + Σy²) and the relative
  L2 error within the bounds (default and CI: issue 34's 3.2e-3 and 8e-2, see
  Transforms/check-fp8.py).
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from moe_block import random_tokens, reference, write_block  # noqa: E402
from moec_tools import NO_COMPILER, NO_DEVICE, run_tool  # noqa: E402



def write_partial_blocks_case(work):
    """A block whose K and N are not multiples of 128 (and exceed it)."""
    x, ids, w, gate_up, down = write_block(work, 11, t=9, h=200, i=136, e=3, k=2)
    out = reference(x, ids, w, gate_up, down)
    np.savez(os.path.join(work, "expected.npz"), out=out.astype(np.float32))


def e4m3_values():
    """The 256 e4m3fn codes' values (NaN for 0x7F/0xFF)."""
    values = np.empty(256)
    for code in range(256):
        exponent, mantissa = (code >> 3) & 0xF, code & 7
        if exponent == 0xF and mantissa == 7:
            v = np.nan
        elif exponent == 0:
            v = mantissa * 2.0 ** -9
        else:
            v = (1 + mantissa / 8) * 2.0 ** (exponent - 7)
        values[code] = -v if code & 0x80 else v
    return values


def write_prequantized_case(work):
    """Weights that are already FP8, as a DeepSeek-V3 checkpoint stores them (e4m3
    `weight` + f32 `weight_scale_inv` per 128x128 block), given to moe.layer as
    gate_up/down with gate_up_scales/down_scales: --fp8 must quantise the rows
    only. K = 200, N = 272 (partial blocks).
    The reference multiplies the dequantised weights with the f32 rows."""
    T, H, I, E, K = 9, 200, 136, 3, 2
    rng = np.random.default_rng(13)
    table = e4m3_values()
    finite = np.array([c for c in range(256) if (c & 0x7F) != 0x7F])

    def fp8_weight(n, k):
        codes = rng.choice(finite, size=(E, n, k))
        scales = rng.uniform(1e-4, 3e-4, (E, -(-n // 128), -(-k // 128))).astype(np.float32)
        full = np.repeat(np.repeat(scales, 128, axis=1), 128, axis=2)[:, :n, :k]
        return table[codes], scales, table[codes] * full.astype(np.float64)

    gu_q, gu_s, gu = fp8_weight(2 * I, H)
    dn_q, dn_s, dn = fp8_weight(H, I)
    x, ids, w = random_tokens(rng, T, H, E, K, 0.2)

    def dense(a, ty):
        return "dense<" + np.array2string(np.asarray(a, np.float64), separator=",",
                                          threshold=1 << 30, floatmode="unique").replace(
                                              "\n", "") + f"> : {ty}"
    f8 = "xf8E4M3FN>"
    os.makedirs(work, exist_ok=True)
    with open(os.path.join(work, "model.mlir"), "w") as f:
        gus_t = f"tensor<{E}x{gu_s.shape[1]}x{gu_s.shape[2]}xf32>"
        dns_t = f"tensor<{E}x{dn_s.shape[1]}x{dn_s.shape[2]}xf32>"
        f.write(f"""// Generated by test/Codegen/check-fp8-artifact.py --prequantized.
func.func @block(%x: tensor<?x{H}xf32> {{onnx.name = "x"}},
                 %ids: tensor<?x{K}xi64> {{onnx.name = "ids"}},
                 %w: tensor<?x{K}xf32> {{onnx.name = "w"}})
    -> (tensor<?x{H}xf32> {{onnx.name = "out"}}) {{
  %gu = arith.constant {dense(gu_q, f"tensor<{E}x{2 * I}x{H}{f8}")}
  %gus = arith.constant {dense(gu_s, gus_t)}
  %dn = arith.constant {dense(dn_q, f"tensor<{E}x{H}x{I}{f8}")}
  %dns = arith.constant {dense(dn_s, dns_t)}
  %y = moe.layer %x : tensor<?x{H}xf32> expert_ids(%ids : tensor<?x{K}xi64>)
         expert_weights(%w : tensor<?x{K}xf32>)
         gate_up(%gu : tensor<{E}x{2 * I}x{H}{f8}) down(%dn : tensor<{E}x{H}x{I}{f8})
         gate_up_scales(%gus : {gus_t}) down_scales(%dns : {dns_t})
         {{routing = #moe.routing<softmax_topk>, top_k = {K} : i64,
          activation = #moe.activation<silu>,
          gate_up_layout = #moe.gate_up_layout<concatenated>}} -> tensor<?x{H}xf32>
  return %y : tensor<?x{H}xf32>
}}
""")
    np.savez(os.path.join(work, "inputs.npz"), x=x, ids=ids, w=w)
    out = reference(x, ids, w, gu, dn)
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
    bf16 = ["--expert-weights=bf16", "--expert-outputs=bf16"] if args.bf16_outputs else []
    rc = run_tool([tool("moec"), "compile", model, "--fp8", *bf16, f"--target={args.target}",
                   "-o", artifact], args.target, NO_COMPILER)
    if rc:
        return rc
    with open(os.path.join(artifact, "manifest.txt")) as f:
        if " f8e4m3 " not in f.read():
            sys.exit("the artifact holds no e4m3 weights")
    return 0


def run_and_check(args, fixture, inputs, work):
    run_out = os.path.join(work, "run.npz")
    rc = run_tool([os.path.join(args.bin, "moec-run"), os.path.join(work, "artifact"), "--inputs",
                   inputs, "--outputs", run_out], args.target, NO_DEVICE)
    if rc:
        return rc
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
            ok_interp = (np.all(np.isfinite(got)) and off <= 1e-3 * err.size and err.max() <= 1e-2
                         and rel <= 1e-6)
            bound = f"{off} of {err.size} elements above 1e-5; relative L2 <= 1e-6"
        else:  # the GPU: QGMMA's own accumulation within each 128-deep block (above)
            ok_interp = np.all(np.isfinite(got)) and rel <= 1e-2
            bound = "relative L2 <= 1e-2"
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
    p.add_argument("max_diff", nargs="?", type=float, default=3.2e-3)
    p.add_argument("max_rel_l2", nargs="?", type=float, default=8e-2)
    p.add_argument("--partial-blocks", action="store_true",
                   help="write the partial-blocks case into FIXTURE first")
    p.add_argument("--prequantized", action="store_true",
                   help="write the already-FP8-weights case into FIXTURE first")
    p.add_argument("--target", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--bf16-outputs", action="store_true",
                   help="(cuda) compile with --expert-weights=bf16 --expert-outputs=bf16 too")
    p.add_argument("--work", help="keep the work here (default: a temporary directory)")
    p.add_argument("--phase", choices=["all", "prepare", "run"], default="all",
                   help="prepare needs moec; run needs moec-run and numpy (the GPU machine)")
    args = p.parse_args()
    if args.bf16_outputs and args.target != "cuda":
        p.error("--bf16-outputs needs --target cuda (the CPU target keeps f32)")
    if args.partial_blocks and args.phase != "run":
        write_partial_blocks_case(args.fixture)
    if args.prequantized and args.phase != "run":
        write_prequantized_case(args.fixture)
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
