#!/usr/bin/env python3
"""Checks that expert parallelism partitions a model without changing it.

Usage: check-expert-parallel.py BIN_DIR FIXTURE_DIR EP_SIZE

Compiles FIXTURE_DIR/model.onnx to the grouped phase once per rank
(moec compile --ep-size=EP_SIZE --ep-rank=r), runs each rank's module in the
reference interpreter with its moe.all_reduce taken out (one process cannot
all-reduce), sums the ranks' partial outputs as the all-reduce would, and
compares the sum with FIXTURE_DIR/expected.npz under check_onnxruntime.py's
criterion. Also checks that each rank really dropped the other ranks' experts.
"""
import os
import re
import subprocess
import sys
import tempfile

import numpy as np


def main():
    bin_dir, fixture, ep = sys.argv[1], sys.argv[2], int(sys.argv[3])
    expected = dict(np.load(os.path.join(fixture, "expected.npz")))
    total = None
    with tempfile.TemporaryDirectory() as work:
        for rank in range(ep):
            text = subprocess.run(
                [os.path.join(bin_dir, "moec"), "compile", os.path.join(fixture, "model.onnx"),
                 "--compile-to=grouped", f"--ep-size={ep}", f"--ep-rank={rank}"],
                check=True, capture_output=True, text=True).stdout
            sorts = re.findall(r"moe\.sort .*\{(.*)\}", text)
            if not sorts or not all(f"num_experts" in s for s in sorts):
                sys.exit(f"rank {rank}: no partitioned moe.sort in the output")
            reduces = re.findall(r"^\s*(%\w+) = moe\.all_reduce (%\w+) .*$", text, re.M)
            if len(reduces) != 1:
                sys.exit(f"rank {rank}: expected one moe.all_reduce, found {len(reduces)}")
            result, partial = reduces[0]
            text = re.sub(r"^\s*%\w+ = moe\.all_reduce .*\n", "", text, flags=re.M)
            text = re.sub(re.escape(result) + r"\b", partial, text)
            module = os.path.join(work, f"rank{rank}.mlir")
            with open(module, "w") as f:
                f.write(text)
            out = os.path.join(work, f"rank{rank}.npz")
            subprocess.run([os.path.join(bin_dir, "moec-interp"), module, "--inputs",
                            os.path.join(fixture, "inputs.npz"), "--outputs", out], check=True)
            partials = dict(np.load(out))
            total = partials if total is None else {k: total[k] + partials[k] for k in total}
    failures = 0
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
