#!/usr/bin/env bash
# Usage: bench/python_swap.sh prepare   (here: the build's moec and nvcc, no GPU)
#        bench/python_swap.sh run       (on the H200: one device call, results under $OUT)
#
# The Python package on the GPU machine (docs/python.md), which has torch and
# transformers but no MLIR and no network:
#   prepare  into .device/python-swap: the build backend's wheels (nanobind,
#            scikit-build-core: pure Python), and a moec.blocks cache with every
#            CUDA shape python/tests/test_gpu.py loads and the Qwen3-30B-A3B
#            block of bench/bench_python_swap.py. Carry .device/python-swap.
#   run      builds and installs the package there (its Python 3.12), runs the
#            GPU tests (python-gpu-tests.txt), then the benchmark
#            (python_swap.txt, python_swap.json).
# One device call, from the repository's root:
#   run(command="bash bench/python_swap.sh run", carry=[".device/python-swap"], timeout_s=600)
set -uo pipefail
cd "$(dirname "$0")/.."
dir=.device/python-swap
case ${1:-} in
prepare)
  set -e
  py=${PYTHON:-.venv/bin/python}
  export MOEC_COMPILER=${MOEC_COMPILER:-$PWD/${BUILD_DIR:-build}/bin/moec}
  rm -rf "$dir" && mkdir -p "$dir/whl"
  "$py" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
    -d "$dir/whl" nanobind==2.9.2 scikit-build-core==0.11.6
  "$py" python/tests/test_gpu.py --prepare "$dir/cache"
  "$py" bench/bench_python_swap.py --prepare --cache "$dir/cache"
  du -sh "$dir"
  ;;
run)
  site=/tmp/moec-site
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$site" "$dir"/whl/*.whl || exit 1
  export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}
  python3 -m pip wheel -q --no-index --no-build-isolation --no-deps -w /tmp/moec-wheel . \
    >"$OUT/python-wheel.txt" 2>&1 || { tail -30 "$OUT/python-wheel.txt"; exit 1; }
  python3 -m pip install -q --no-index --no-deps --upgrade --target "$site" /tmp/moec-wheel/moec-*.whl || exit 1
  export MOEC_CACHE_DIR=$PWD/$dir/cache
  python3 -m pytest -q -rs -p no:cacheprovider python/tests/test_gpu.py >"$OUT/python-gpu-tests.txt" 2>&1
  tests=$?
  tail -5 "$OUT/python-gpu-tests.txt"
  PYTHONUNBUFFERED=1 python3 bench/bench_python_swap.py --cache "$MOEC_CACHE_DIR" \
    --json "$OUT/python_swap.json" 2>&1 | tee "$OUT/python_swap.txt"
  bench=${PIPESTATUS[0]}
  exit $(( tests || bench ))
  ;;
*)
  sed -n '2,15p' "$0"; exit 2
  ;;
esac
