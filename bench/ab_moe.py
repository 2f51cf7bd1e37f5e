#!/usr/bin/env python3
"""An A/B of moec builds in one process: calls interleaved, so the comparison is paired.

bench_moe.py runs one build per process; between two processes the same build's
decode calls moved by up to 13 % (gpt-oss at T = 1: 0.105 and 0.092 ms for the same
build, 0.111 for the other), more than most changes it was to judge.
Here every build (a pack: DIR with art-bf16/, optionally art-fp8/, and libmoec.so, as
`scripts/h200-bench.sh pack` makes them) is loaded in the same process on the same
random transformers weights, and each round times one call of every build in a
rotating order, each preceded by a 256 MiB write that flushes the L2 (host time of one
synchronised call, as bench_moe.py). A round's ratio NEW / PREV pairs calls made
microseconds apart; the median of those ratios, with its quartiles, is the result.

Each build's output is checked against the first build's (same precision): relative
L2 error <= --rtol, since they compute the same thing; with bf16 experts the first is
also checked against transformers' block run in f32 (<= 1e-2, as bench_moe.py).

    python3 bench/ab_moe.py new=ab/new prev=ab/prev --models deepseek-v3 --tokens 1,16
Prints one line per model, T and precision; writes $OUT/ab_moe.json.
"""
import argparse
import copy
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_moe import DEV, SPECS, Moec, build, moe_weights, out0  # noqa: E402
from write_weights import fp8_expert_weights, read_layout, write_weights  # noqa: E402


def quartiles(values):
    q = statistics.quantiles(values, n=4) if len(values) > 1 else values * 3
    return q[0], statistics.median(values), q[2]


def write_all(name, packs, precision, m, cfg):
    """Each pack's weights.bin for one precision, written once and hard-linked into the
    other packs whose manifest lays the weights out the same way; returns
    {label: artifact dir} of the packs that have this precision."""
    arts = {label: os.path.join(d, "art-" + precision, name) for label, d in packs}
    arts = {k: a for k, a in arts.items() if os.path.exists(os.path.join(a, "manifest.txt"))}
    written = {}  # layout -> weights.bin
    for label, art in arts.items():
        layout = repr(read_layout(art))
        target = os.path.join(art, "weights.bin")
        if os.path.exists(target):
            os.remove(target)
        if layout in written:
            os.link(written[layout], target)
            continue
        with torch.no_grad():
            tensors = moe_weights(name, m, cfg)
            if precision == "fp8":
                tensors = fp8_expert_weights(art, tensors)
            written[layout] = write_weights(art, tensors)
        torch.cuda.empty_cache()
    return arts


def load(packs, arts):
    """{label: Moec} for the packs in `arts`; each weights.bin is removed once loaded
    (DeepSeek-V3's is 22 GB bf16, and the GPU machine's disk holds 64 GB)."""
    builds = {}
    for label, d in packs:
        if label in arts:
            builds[label] = Moec(os.path.join(d, "libmoec.so"), arts[label])
            os.remove(os.path.join(arts[label], "weights.bin"))
    return builds


def measure(name, T, precision, builds, x, ref, flush, args, rows):
    """Checks every build's output, then times `args.rounds` interleaved rounds; prints
    and appends the row; returns whether the checks passed."""
    # One clock for every pack: moec_run_async on torch's stream where each pack's library
    # has it (older libraries lack it) and --clock allows, else moec_run.
    clock = ("async" if args.clock == "auto" and all(b.has_async for b in builds.values())
             else "blocking")

    def call(build):
        (build.run_async if clock == "async" else build.run)()

    H = x.shape[-1]
    xf = x.float().reshape(T, H).contiguous()
    ys = {}
    for label, b in builds.items():
        ys[label] = torch.full((T, H), float("nan"), device=DEV)  # poisoned
        b.bind(xf, ys[label])
        call(b)
        call(b)  # the second call replays the captured graph
    torch.cuda.synchronize()
    labels = list(builds)
    first = ys[labels[0]]
    checks = {label: ((ys[label] - first).norm() / first.norm()).item() for label in labels}
    limits = {label: args.rtol for label in labels}
    if precision == "bf16":
        checks["transformers-f32"] = ((first - ref).norm() / ref.norm()).item()
        limits["transformers-f32"] = 1e-2
    bad = [f"{k} {e:.1e}" for k, e in checks.items() if not e <= limits[k]]
    times = {label: [] for label in labels}
    for r in range(args.rounds):
        for label in labels[r % len(labels):] + labels[:r % len(labels)]:
            flush.zero_()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            call(builds[label])
            torch.cuda.synchronize()
            times[label].append((time.perf_counter() - t0) * 1e3)
    row = dict(model=name, T=T, precision=precision, rounds=args.rounds, clock=clock, checks=checks,
               ms={label: quartiles(times[label]) for label in labels}, ratio={})
    line = f"{name:18s} T={T:<5d} {precision:4s} {clock:8s}" + "".join(
        f" {label} {row['ms'][label][1]:.4f}" for label in labels)
    new = labels[0]
    for label in labels[1:]:
        q = quartiles([a / b for a, b in zip(times[new], times[label])])
        row["ratio"][label] = q
        line += f"  {new}/{label} {q[1]:.3f} [{q[0]:.3f}, {q[2]:.3f}]"
    print(line + ("  CHECK FAILED: " + ", ".join(bad) if bad else ""), flush=True)
    rows.append(row)
    return not bad


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("packs", nargs="+", help="LABEL=DIR, the first is the one compared (NEW)")
    p.add_argument("--models", default=",".join(SPECS))
    p.add_argument("--tokens", default="1,16,128")
    p.add_argument("--rounds", type=int, default=60, help="interleaved rounds per cell")
    p.add_argument("--rtol", type=float, default=1e-3, help="max relative L2 error against the first build")
    p.add_argument("--clock", choices=("auto", "blocking"), default="auto",
                   help="auto: moec_run_async on torch's stream when every pack has it; "
                        "blocking: moec_run (which waits inside) for every pack")
    args = p.parse_args()
    packs = [tuple(s.split("=", 1)) for s in args.packs]
    if len(packs) < 2 or any(len(pk) != 2 for pk in packs):
        p.error("give at least two packs as LABEL=DIR")
    flush = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.float32, device=DEV)
    rows, failed = [], False
    for name in args.models.split(","):
        H = SPECS[name][1]
        m, cfg = build(SPECS[name])
        tokens = [int(t) for t in args.tokens.split(",")]
        # The reference: transformers' eager block in f32 on the same weights, as in
        # bench_moe.py (the bf16 block's router flips near ties: 8e-2 at T = 16).
        mf = copy.deepcopy(m).float()
        inputs, refs = {}, {}
        for T in tokens:
            torch.manual_seed(T)
            inputs[T] = torch.randn(1, T, H, device=DEV, dtype=torch.bfloat16)
            with torch.inference_mode():
                refs[T] = out0(mf(inputs[T].float())).reshape(T, H)
        del mf
        arts = {precision: write_all(name, packs, precision, m, cfg) for precision in ("bf16", "fp8")}
        del m  # one precision's builds at a time in GPU memory: DeepSeek-V3's bf16 experts are 22 GB
        torch.cuda.empty_cache()
        for precision in ("bf16", "fp8"):
            if not arts[precision]:
                continue
            builds = load(packs, arts[precision])
            for T in tokens:
                failed |= not measure(name, T, precision, builds, inputs[T], refs[T], flush, args, rows)
            for b in builds.values():
                b.free()
            del builds
            torch.cuda.empty_cache()
    out = os.environ.get("OUT", "out")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "ab_moe.json"), "w") as f:
        json.dump(rows, f, indent=1)
    return 1 if failed or not rows else 0


if __name__ == "__main__":
    sys.exit(main())
