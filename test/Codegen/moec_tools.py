"""Running moec's tools for the end-to-end scripts beside this file (check-sentinels.py,
check-fp8-artifact.py), with ctest's skip convention: a CUDA run on a machine without nvcc
or without a device is skipped (exit 77, SKIP_RETURN_CODE in CMakeLists.txt), not failed."""
import argparse
import subprocess

SKIP = 77

# What a CUDA compile or run prints when the machine lacks what it needs.
NO_COMPILER = {"nvcc": "no CUDA compiler", "without CUDA": "no CUDA compiler"}
NO_DEVICE = {"no CUDA device": "no CUDA device"}


def run_tool(cmd, target, missing):
    """Runs `cmd`: 0 when it succeeds; otherwise prints its stderr and returns SKIP when the
    target is cuda and the stderr names one of `missing` (NO_COMPILER, NO_DEVICE), else 1."""
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode == 0:
        return 0
    print(done.stderr, end="")
    if target == "cuda":
        for marker, why in missing.items():
            if marker in done.stderr:
                print(f"skipped: {why}")
                return SKIP
    return 1


def phased_main(doc, prepare, run, add_arguments=None):
    """The command line of a check split in phases (check-sentinels.py, check-many-tokens.py):
    --bin, --target, --work, --phase all|prepare|run and moec compile's extra flags after
    `--`. `prepare(args)` compiles and writes inputs (needs moec); `run(args)` runs and
    checks (moec-run and numpy only: the GPU machine). Returns the exit code."""
    p = argparse.ArgumentParser(description=doc.split("\n")[0])
    p.add_argument("--bin", required=True)
    p.add_argument("--target", choices=["cpu", "cuda"], required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--phase", choices=["all", "prepare", "run"], default="all")
    if add_arguments:
        add_arguments(p)
    p.add_argument("compile_flags", nargs="*")
    args = p.parse_args()
    if args.phase in ("all", "prepare"):
        rc = prepare(args)
        if rc:
            return rc
    if args.phase in ("all", "run"):
        return run(args)
    return 0
