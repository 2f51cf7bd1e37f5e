#!/usr/bin/env python3
"""Checks that expert parallelism partitions a model without changing it.

Usage: check-expert-parallel.py BIN_DIR FIXTURE_DIR EP_SIZE

Compiles FIXTURE_DIR/model.onnx to the grouped phase twice over:
- once for every rank (moec compile --ep-size=EP_SIZE: moe.ep_shard and the
  rank read at run time), run in the reference interpreter as each rank r
  (moec-interp --ep-rank r, whose moe.all_reduce yields rank r's partial sum);
- once per rank (--ep-rank=r: rank r's experts sliced at compile time), run the
  same way.
For each rank both partial sums must be identical; their sum over the ranks,
which is what the all-reduce computes, must match FIXTURE_DIR/expected.npz
under check_onnxruntime.py's criterion. Also checks that each program really
dropped the other ranks' experts.
"""
import os
import re
import subprocess
import sys
import tempfile

import numpy as np


def compile_grouped(bin_dir, fixture, ep, rank=None):
    args = [os.path.join(bin_dir, "moec"), "compile", os.path.join(fixture, "model.onnx"),
            "--compile-to=grouped", f"--ep-size={ep}"]
    if rank is not None:
        args.append(f"--ep-rank={rank}")
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout


def run_rank(bin_dir, fixture, work, name, text, rank):
    module = os.path.join(work, f"{name}.mlir")
    with open(module, "w") as f:
        f.write(text)
    out = os.path.join(work, f"{name}.npz")
    subprocess.run([os.path.join(bin_dir, "moec-interp"), module, "--inputs",
                    os.path.join(fixture, "inputs.npz"), "--outputs", out,
                    f"--ep-rank={rank}"], check=True)
    return dict(np.load(out))


def main():
    bin_dir, fixture, ep = sys.argv[1], sys.argv[2], int(sys.argv[3])
    expected = dict(np.load(os.path.join(fixture, "expected.npz")))
    failures = 0
    with tempfile.TemporaryDirectory() as work:
        every = compile_grouped(bin_dir, fixture, ep)
        sorts = re.findall(r"moe\.sort .*\{(.*)\}", every)
        if not sorts or not all(f"ep_size = {ep}" in s for s in sorts):
            sys.exit(f"every-rank program: a moe.sort without ep_size = {ep}")
        if len(re.findall(rf"moe\.ep_shard .*ep_size = {ep}", every)) < 2:
            sys.exit("every-rank program: the expert weights do not pass through moe.ep_shard")
        total = None
        for rank in range(ep):
            text = compile_grouped(bin_dir, fixture, ep, rank)
            sorts = re.findall(r"moe\.sort .*\{(.*)\}", text)
            if not sorts or not all("num_experts" in s for s in sorts):
                sys.exit(f"rank {rank}: no partitioned moe.sort in the output")
            if len(re.findall(r"= moe\.all_reduce ", text)) != 1:
                sys.exit(f"rank {rank}: expected one moe.all_reduce")
            partial = run_rank(bin_dir, fixture, work, f"rank{rank}", text, rank)
            shared = run_rank(bin_dir, fixture, work, f"every{rank}", every, rank)
            for name in partial:
                if not np.array_equal(partial[name], shared[name]):
                    print(f"FAIL {name}: rank {rank} of the every-rank program differs from "
                          f"the rank-{rank} program")
                    failures += 1
            total = partial if total is None else {k: total[k] + partial[k] for k in total}
    for name, want in expected.items():
        got = total[name].astype(np.float64)
        want = want.astype(np.float64)
        tol = 1e-5 * np.abs(want) + 1e-6 * max(1.0, float(np.abs(want).max()))
        ok = bool(np.all(np.abs(got - want) <= tol))
        print(f"{'PASS' if ok else 'FAIL'} {name}: sum of {ep} ranks, max rel err "
              f"{float(np.abs(got - want).max() / np.abs(want).max()):.3g}")
        failures += not ok
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
