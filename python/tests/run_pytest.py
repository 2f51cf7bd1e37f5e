#!/usr/bin/env python3
"""Runs the package's pytest files as one ctest (test/CMakeLists.txt):

    run_pytest.py TEST_FILE...

Exit 77 (ctest: skipped) when the package is not installed in this Python
(scripts/test.sh installs it), when a file needs torch and it is absent, or for
test_gpu.py without a CUDA device; pytest's 5 (nothing collected) is a failure."""
import importlib.util
import os
import sys


def skip(why):
    print(f"skipped: {why}")
    sys.exit(77)


def main():
    files = sys.argv[1:]
    if importlib.util.find_spec("moec") is None:
        skip("the moec package is not installed in " + sys.executable +
             " (scripts/test.sh installs it; or `pip install .`)")
    names = {os.path.basename(f) for f in files}
    if names & {"test_transformers.py", "test_gpu.py"}:
        for module in ("torch", "transformers"):
            if importlib.util.find_spec(module) is None:
                skip(f"{module} is not installed (scripts/setup.sh installs it)")
    if "test_gpu.py" in names:
        import torch
        if not torch.cuda.is_available():
            skip("no CUDA device")
    import pytest
    status = pytest.main(["-q", "-rs", "-p", "no:cacheprovider", *files])
    sys.exit(1 if status == 5 else int(status))


if __name__ == "__main__":
    main()
