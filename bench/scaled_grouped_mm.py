#!/usr/bin/env python3
"""torch._scaled_grouped_mm (FP8 e4m3, row-wise scales) on the benchmark shapes: the
FP8 grouped GEMM PyTorch has on sm90, timed for the experts' two GEMMs only.

transformers 5.17 has no FP8 experts backend that runs offline (its finegrained-FP8
experts need a hub kernel, as the reference measurements of transformers' MoE backends
on the H200 found), so this is the
"where it applies" FP8 comparison of issue 6: gate_up [S, H] x [E, H, 2I] and down
[S, I] x [E, I, H] with random top-k routing (the rows sorted by expert, offsets
cumulative), unit scales (timing only: PyTorch's sm90 path has row-wise scales, not
DeepSeek's 128x128 blocks). Routing, permutation, activation and combine are not
included, so it is a lower bound for a whole FP8 block in PyTorch; moec's FP8 times
(bench_moe.py --fp8-artifacts) include all of them and the host copies.
Timing as bench_moe.py: host time of one synchronised call, L2 flushed before each.

    python3 bench/scaled_grouped_mm.py --tokens 1,16,128,1024   (on the GPU machine)
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_moe  # noqa: E402  (its timing, so that the two scripts measure alike)

SHAPES = {  # E, H, I, top-k
    "qwen3moe-30b-a3b": (128, 2048, 768, 8),
    "mixtral-8x7b": (8, 4096, 14336, 2),
    "gpt-oss-120b": (128, 2880, 2880, 4),
    "deepseek-v3": (256, 7168, 2048, 8),
}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", default=",".join(SHAPES))
    p.add_argument("--tokens", default="1,16,128,1024")
    args = p.parse_args()
    dev = "cuda"
    bench_moe.FLUSH = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.float32, device=dev)
    rows = []
    for name in args.models.split(","):
        E, H, I, k = SHAPES[name]
        gen = torch.Generator(device=dev).manual_seed(0)
        w1 = (torch.randn(E, 2 * I, H, device=dev, generator=gen) * 0.02).to(torch.float8_e4m3fn)
        w2 = (torch.randn(E, H, I, device=dev, generator=gen) * 0.02).to(torch.float8_e4m3fn)
        b1, b2 = w1.transpose(-2, -1), w2.transpose(-2, -1)  # [E, K, N], column-major
        s1 = torch.ones(E, 2 * I, device=dev)
        s2 = torch.ones(E, H, device=dev)
        for T in [int(t) for t in args.tokens.split(",")]:
            ids = torch.stack([torch.randperm(E, device=dev, generator=gen)[:k] for _ in range(T)])
            counts = torch.bincount(ids.flatten(), minlength=E)
            offs = torch.cumsum(counts, 0, dtype=torch.int32)
            S = T * k
            a = torch.randn(S, H, device=dev, generator=gen).to(torch.float8_e4m3fn)
            act = torch.randn(S, I, device=dev, generator=gen).to(torch.float8_e4m3fn)
            sa = torch.ones(S, device=dev)

            def gemms():
                torch._scaled_grouped_mm(a, b1, sa, s1, offs=offs, out_dtype=torch.bfloat16)
                torch._scaled_grouped_mm(act, b2, sa, s2, offs=offs, out_dtype=torch.bfloat16)

            row = dict(model=name, T=T)
            try:
                row["ms"] = bench_moe.time_wall(gemms, target_s=0.3)[0]
            except Exception as e:  # noqa: BLE001
                row["error"] = repr(e)[:200]
            print(json.dumps(row), flush=True)
            rows.append(row)
        del w1, w2, b1, b2
        torch.cuda.empty_cache()
    out = os.environ.get("OUT", "out")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "scaled_grouped_mm.json"), "w") as f:
        json.dump(dict(torch=torch.__version__, gpu=torch.cuda.get_device_name(), rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
