#!/usr/bin/env bash
# Usage: bench/python_swap.sh prepare   (here: the build's moec and nvcc, no GPU)
#        bench/python_swap.sh run       (on the H200: one device call, results under $OUT)
#
# The Python package on the GPU machine (docs/python.md), which has torch and
# transformers but no MLIR and no network:
#   prepare  into .device/python-swap: the build backend's wheels (nanobind,
#            scikit-build-core: pure Python), and a moec.blocks cache with every
#            CUDA shape python/tests/test_gpu.py loads, the probe's block
#            (bench/python_swap_probe.py, cuda and cpu) and the Qwen3-30B-A3B
#            block of bench/bench_python_swap.py. Carry .device/python-swap.
#   run      builds and installs the package there (its Python 3.12), then
#            1. loads the probe's CUDA block: `python3 -c "import moec;
#               m = moec.load(...)"` under gdb (or cuda-gdb; else
#               -X faulthandler), then in a fresh process for each way torch
#               can be there first (not imported, imported, is_available(),
#               its context made, made after the load), each run on numpy
#               arrays and torch tensors, with bench/segv_backtrace.c's native
#               backtrace at a crash, symbolized (python-load-diagnose.txt);
#            2. the GPU tests (python-gpu-tests.txt), then the benchmark
#               (python_swap.txt, python_swap.json); where a load crashed as
#               the tests or the benchmark load, no tests and the benchmark
#               without the swap (FORCE=1: all the same).
# One device call, from the repository's root:
#   run(command="bash bench/python_swap.sh run", carry=[".device/python-swap"], timeout_s=600)
set -uo pipefail
cd "$(dirname "$0")/.."
dir=.device/python-swap

# There: the probe's CUDA block loaded as test_gpu.py loads its first one, in
# every way below; the log is $OUT/python-load-diagnose.txt (the debugger's
# whole log beside it). Non-zero when a load or run crashed the way the tests
# or the benchmark will load.
diagnose() {
  local log=$OUT/python-load-diagnose.txt probe=/tmp/moec-probe py crashed=0 rc mode
  py=$(python3 -c 'import sys; print(sys.executable)')
  {
    echo "== python $($py -V 2>&1) at $py; torch $($py -c 'import torch; print(torch.__version__)' 2>&1)"
    echo "== gcc: $(gcc --version 2>&1 | head -1); glibc: $(ldd --version 2>&1 | head -1)"
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1
    echo "== the extension (python/CMakeLists.txt links libstdc++.so.6, never the archive):"
    local so
    so=$(ls "$site"/moec/_moec*.so)
    echo "$so: $(stat -c %s "$so") bytes"
    readelf -d "$so" | grep NEEDED
    echo "g++ -print-file-name=libstdc++.so: $(g++ -print-file-name=libstdc++.so)"
    env | grep -E "^(LDFLAGS|CXXFLAGS|CFLAGS|CXX|CC)=" || echo "(no LDFLAGS, CXXFLAGS, CFLAGS, CXX, CC)"
    grep -E "moec-python|moec runtime" "$OUT/python-wheel.txt"
  } >"$log" 2>&1
  $py bench/python_swap_probe.py --write "$MOEC_CACHE_DIR" "$probe" >>"$log" 2>&1 || {
    echo "the probe's block could not be written"; tail -20 "$log"; return 1; }
  cc -shared -fPIC -O1 -o /tmp/segv_backtrace.so bench/segv_backtrace.c >>"$log" 2>&1
  local code="import moec; m = moec.load('$probe/cuda'); print('loaded', m, flush=True)"
  local dbg
  dbg=$(command -v gdb || command -v cuda-gdb)
  if [ -n "$dbg" ]; then
    echo "== $dbg: python3 -c \"$code\"" >>"$log"
    timeout -k 5 90 "$dbg" -q -batch -ex run -ex bt -ex 'info threads' -ex 'x/8i $pc' \
      -ex 'info registers' -ex 'info proc mappings' --args "$py" -c "$code" \
      >"$OUT/python-load-gdb.txt" 2>&1
    echo "   $dbg exit $?" >>"$log"
    grep -E "SIGSEGV|SIGBUS|SIGABRT|signal|^#|^=>|^\*?\s+[0-9]+\s+Thread|loaded|exited|Error" \
      "$OUT/python-load-gdb.txt" | head -80 >>"$log"
    if grep -qE "received signal|Program terminated with signal" "$OUT/python-load-gdb.txt"; then
      echo "-- the frames, symbolized:" >>"$log"
      $py bench/python_swap_probe.py --symbolize "$OUT/python-load-gdb.txt" >>"$log" 2>&1
    fi
  else
    echo "== python3 -X faulthandler -c \"$code\" (no gdb)" >>"$log"
    timeout -k 5 120 "$py" -X faulthandler -c "$code" >>"$log" 2>&1
    echo "   exit $?" >>"$log"
  fi
  for mode in none available import context after cpu; do
    local art=$probe/cuda torch=$mode
    [ $mode = cpu ] && art=$probe/cpu torch=available
    echo "== probe $art, torch: $torch (with runs)" >>"$log"
    LD_PRELOAD=/tmp/segv_backtrace.so timeout -k 5 120 "$py" -X faulthandler \
      bench/python_swap_probe.py --load "$art" --torch "$torch" --run >/tmp/probe.log 2>&1
    rc=$?
    grep -v -E "^[0-9a-f]+-[0-9a-f]+ " /tmp/probe.log | head -60 >>"$log"
    echo "   exit $rc" >>"$log"
    echo "probe $(basename "$art") torch=$torch: exit $rc"
    if [ $rc -ge 124 ]; then
      # The tests load with torch's CUDA checked (available), the benchmark
      # with its context made (context): a crash there stops the call.
      case $torch in available | context) crashed=1 ;; esac
      if grep -q "=== segv_backtrace" /tmp/probe.log; then
        echo "-- the frames, symbolized:" >>"$log"
        $py bench/python_swap_probe.py --symbolize /tmp/probe.log >>"$log" 2>&1
      fi
    fi
  done
  grep -E "^== |bytes|NEEDED|print-file-name|FLAGS|moec-python|exit|loaded|err|Error|signal" "$log" | head -50
  return $crashed
}

case ${1:-} in
prepare)
  set -e
  py=${PYTHON:-.venv/bin/python}
  export MOEC_COMPILER=${MOEC_COMPILER:-$PWD/${BUILD_DIR:-build}/bin/moec}
  rm -rf "$dir" && mkdir -p "$dir/whl"
  "$py" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
    -d "$dir/whl" nanobind==2.9.2 scikit-build-core==0.11.6
  "$py" python/tests/test_gpu.py --prepare "$dir/cache"
  "$py" bench/python_swap_probe.py --prepare "$dir/cache"
  "$py" bench/bench_python_swap.py --prepare --cache "$dir/cache"
  du -sh "$dir"
  ;;
run)
  site=/tmp/moec-site
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$site" "$dir"/whl/*.whl || exit 1
  export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}
  python3 -m pip wheel -v --no-index --no-build-isolation --no-deps -w /tmp/moec-wheel . \
    >"$OUT/python-wheel.txt" 2>&1 || { tail -30 "$OUT/python-wheel.txt"; exit 1; }
  python3 -m pip install -q --no-index --no-deps --upgrade --target "$site" /tmp/moec-wheel/moec-*.whl || exit 1
  export MOEC_CACHE_DIR=$PWD/$dir/cache
  diagnose
  crashed=$?
  swap=()
  if [ "$crashed" != 0 ] && [ "${FORCE:-0}" != 1 ]; then
    echo "a load crashed (python-load-diagnose.txt): no tests; the benchmark without the swap" \
      "(FORCE=1 runs them all)"
    tests=3 swap=(--no-swap)
  else
    # pytest-xdist's one worker, where there is one: a test that crashes takes
    # its worker down, not the rest of the file.
    xdist=()
    python3 -c "import xdist" 2>/dev/null && xdist=(-p xdist -n 1 --max-worker-restart=20)
    python3 -m pytest -q -rs -p no:cacheprovider "${xdist[@]}" python/tests/test_gpu.py \
      >"$OUT/python-gpu-tests.txt" 2>&1
    tests=$?
    tail -5 "$OUT/python-gpu-tests.txt"
  fi
  PYTHONUNBUFFERED=1 LD_PRELOAD=/tmp/segv_backtrace.so python3 bench/bench_python_swap.py \
    --cache "$MOEC_CACHE_DIR" --json "$OUT/python_swap.json" "${swap[@]}" 2>&1 | tee /tmp/bench.log |
    grep --line-buffered -v -E "^[0-9a-f]+-[0-9a-f]+ " | tee "$OUT/python_swap.txt"
  bench=${PIPESTATUS[0]}
  if grep -q "=== segv_backtrace" /tmp/bench.log; then
    python3 bench/python_swap_probe.py --symbolize /tmp/bench.log 2>&1 | tee -a "$OUT/python_swap.txt"
  fi
  exit $(( tests || bench ))
  ;;
*)
  sed -n '2,15p' "$0"; exit 2
  ;;
esac
