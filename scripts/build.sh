#!/usr/bin/env bash
# Configures (once) and builds moec in $MOEC_BUILD_DIR (default: build/).
# Extra arguments go to the first CMake configure, e.g. -DMOEC_ENABLE_CUDA=OFF.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${MOEC_BUILD_DIR:-$root/build}
if [ ! -f "$build/build.ninja" ]; then
  mkdir -p "$build"
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DPython3_EXECUTABLE="$root/.venv/bin/python" "$@" >"$build/configure.log" 2>&1 || {
    cat "$build/configure.log" >&2; exit 1; }
fi
cmake --build "$build"
