#!/usr/bin/env python3
"""Where a whole model's step goes: each kernel's own time, from ncu.

Usage:
  ncu --clock-control none --csv --page raw --print-units base \\
      --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum \\
      --log-file ncu.csv \\
      python3 bench/model_profile.py run LIBMOEC.so ARTIFACT [--batch B] [--prompt P] [--new N]
  python3 bench/model_profile.py summary ncu.csv [--step K]

`run` loads the artifact and runs one greedy moec_generate: a prefill of B prompts of P
tokens, then N - 1 decode steps, each a CUDA graph replay (ncu profiles every node of a
graph as a kernel of its own). `summary` cuts the kernels into steps at each step's
embedding kernel and prints, for step K (default: the last, a decode step), every kernel
by name: launches, total and mean µs, the share of the step and, where the log has
dram__bytes_read/write, the DRAM bytes each moved and their rate as a share of the 4.25
TB/s copy ceiling (what a memory-bound kernel is judged by). ncu runs kernels one at a
time, so the sum is the step's time with no gaps and no overlap between kernels; the
step's measured time (bench/model_generate.py) minus this sum is what launches and
dependencies cost.
"""
import argparse
import collections
import csv
import ctypes
import re
import sys


def run(args):
    import numpy as np
    # The C API through ctypes, beside this file.
    from model_generate import I64P as i64p, Sampling, Stats, load_library

    lib = load_library(args.library)
    model = lib.moec_load(args.artifact.encode())
    if not model:
        sys.exit("model_profile.py: " + lib.moec_last_error().decode())
    rng = np.random.default_rng(0)
    ids = np.ascontiguousarray(rng.integers(0, lib.moec_vocab_size(model),
                                            (args.batch, args.prompt)), dtype=np.int64)
    mask = np.ones_like(ids)
    sequences = np.zeros((args.batch, args.prompt + args.new), dtype=np.int64)
    stats = Stats()
    if lib.moec_generate(model, ids.ctypes.data_as(i64p), mask.ctypes.data_as(i64p), args.batch,
                         args.prompt, args.new, ctypes.byref(Sampling(0, 0, 1, 0)),
                         sequences.ctypes.data_as(i64p), ctypes.byref(stats)):
        sys.exit("model_profile.py: " + lib.moec_last_error().decode())
    print(f"model_profile.py: B={args.batch} P={args.prompt} new={args.new} done")


def short(name):
    name = re.sub(r"^void ", "", name)
    for anonymous in ("(anonymous namespace)::", "<unnamed>::", "unnamed>::"):
        name = name.replace(anonymous, "")
    if "cutlass::device_kernel" in name or name.startswith("cutlass"):
        return "CUTLASS " + re.sub(r"<.*", "", name.split("::")[-1])[:40]
    depth, out = 0, []
    for ch in name:  # drop the parameter list, keep template arguments
        if ch == "(" and depth == 0:
            break
        depth += ch == "<"
        depth -= ch == ">"
        out.append(ch)
    name = "".join(out)
    return re.sub(r"^moec::(rt::cuda::)?(device::)?", "", name)[:90]


def kernels(path):
    with open(path, newline="") as f:
        lines = [line for line in f if line.startswith('"')]
    rows = list(csv.DictReader(lines))
    out = []
    for row in rows:
        value = row.get("gpu__time_duration.sum", "")
        try:
            ns = float(value.replace(",", ""))
        except ValueError:
            continue  # the units row
        moved = 0.0
        for metric in ("dram__bytes_read.sum", "dram__bytes_write.sum"):
            try:
                moved += float(row.get(metric, "").replace(",", ""))
            except ValueError:
                pass
        out.append((short(row["Kernel Name"]), ns / 1e3, moved))
    return out


COPY_BYTES_PER_US = 4.25e6  # the measured device-to-device copy, 4.25 TB/s


def summary(args):
    ks = kernels(args.csv)
    steps, current = [], None
    for name, us, moved in ks:
        if re.match(r"(detail::)?embedding\w*Kernel", name):
            current = []
            steps.append(current)
        if current is not None:
            current.append((name, us, moved))
    if not steps:
        sys.exit("model_profile.py: no embedding kernel in the log")
    step = steps[args.step]
    # A step ends at its last sampling kernel; kernels after the final step's logits belong
    # to nothing the step times.
    total = sum(us for _, us, _ in step)
    moved_total = sum(moved for _, _, moved in step)
    by = collections.OrderedDict()
    for name, us, moved in step:
        n, t, b = by.get(name, (0, 0.0, 0.0))
        by[name] = (n + 1, t + us, b + moved)
    print(f"{len(steps)} steps; step {args.step % len(steps)}: {len(step)} kernels, "
          f"{total:.1f} µs in all (kernels one at a time, no gaps)"
          + (f", {moved_total / 1e6:.1f} MB of DRAM traffic, "
             f"{100 * moved_total / total / COPY_BYTES_PER_US:.0f} % of copy over the step"
             if moved_total else "") + "\n")
    # The traffic columns where the log has the DRAM metrics (ncu --metrics ...,dram__bytes_*).
    traffic = moved_total > 0
    print("| kernel | launches | total µs | mean µs | share |"
          + (" DRAM MB | % of copy |" if traffic else ""))
    print("|---|---|---|---|---|" + ("---|---|" if traffic else ""))
    for name, (n, t, b) in sorted(by.items(), key=lambda kv: -kv[1][1]):
        rate = f"{100 * b / t / COPY_BYTES_PER_US:.0f}" if b and t else "—"
        print(f"| `{name}` | {n} | {t:.1f} | {t / n:.2f} | {100 * t / total:.1f} % |"
              + (f" {b / 1e6:.1f} | {rate} |" if traffic else ""))
    short_kernels = sum(1 for _, us, _ in step if us < 5)
    print(f"\nkernels under 5 µs: {short_kernels} of {len(step)}, "
          f"{sum(us for _, us, _ in step if us < 5):.1f} µs")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="mode", required=True)
    r = sub.add_parser("run")
    r.add_argument("library")
    r.add_argument("artifact")
    r.add_argument("--batch", type=int, default=1)
    r.add_argument("--prompt", type=int, default=16)
    r.add_argument("--new", type=int, default=3)
    s = sub.add_parser("summary")
    s.add_argument("csv")
    s.add_argument("--step", type=int, default=-1)
    args = p.parse_args()
    run(args) if args.mode == "run" else summary(args)


if __name__ == "__main__":
    main()
