#!/usr/bin/env bash
# The README's test command: on a fresh Debian 12 machine, installs every
# dependency, builds moec and runs every test (lit, GoogleTest, fixture checks,
# the fuzz targets from their corpora). GPU tests report "skipped" where there is
# no GPU. ctest's summary line closes the output.
#   MOEC_SANITIZE=address,undefined scripts/test.sh
# builds and tests in build-sanitize/ instead, all host code under those
# sanitizers (docs/fuzzing.md, "Sanitizer builds").
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
configure=()
if [ -n "${MOEC_SANITIZE:-}" ]; then
  export MOEC_BUILD_DIR=${MOEC_BUILD_DIR:-$root/build-sanitize}
  configure=(-DMOEC_SANITIZE="$MOEC_SANITIZE" -DMOEC_FUZZ_TESTS=OFF)
fi
build=${MOEC_BUILD_DIR:-$root/build}
"$root/scripts/setup.sh"
"$root/scripts/build.sh" "${configure[@]}"
if [ -z "${MOEC_SANITIZE:-}" ]; then
  # The Python package (docs/python.md): its wheel, built as `pip install .`
  # builds it, installed into .venv for the python.* ctests.
  wheels="$build/python-wheel"
  rm -rf "$wheels"
  { "$root/.venv/bin/python" -m pip wheel -q --disable-pip-version-check --no-build-isolation \
      --no-deps -w "$wheels" "$root" &&
    "$root/.venv/bin/python" -m pip install -q --disable-pip-version-check --force-reinstall \
      --no-deps "$wheels"/moec-*.whl; } >"$build/python-wheel.log" 2>&1 || {
    cat "$build/python-wheel.log" >&2; echo "test.sh: building the Python package failed" >&2; exit 1; }
fi
if [ -n "${MOEC_SANITIZE:-}" ]; then
  # The artifacts the tests compile link the instrumented kernels: build them
  # with the same flags (wrappers written by CMake).
  export MOEC_CXX=$build/sanitize/cxx
  [ -x "$build/sanitize/nvcc" ] && export MOEC_NVCC=$build/sanitize/nvcc
  # libMLIR.so is not instrumented: LLVM's BumpPtrAllocator, inlined into
  # moec's instrumented code, poisons its slabs, and libMLIR.so's own copy
  # then writes into them without unpoisoning (false use-after-poison).
  export ASAN_OPTIONS=${ASAN_OPTIONS:-allow_user_poisoning=0:detect_leaks=1}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
fi
log=$(mktemp -t moec-ctest.XXXXXX)
trap 'rm -f "$log"' EXIT
status=0
ctest --test-dir "$build" --output-on-failure -j"$(nproc)" >"$log" 2>&1 || status=$?
cat "$log"
grep -E "tests passed|tests failed" "$log" | tail -n 1
exit "$status"
