#!/usr/bin/env bash
# Fuzzes the ONNX importer with libFuzzer (clang-22) under ASan and UBSan.
#   scripts/fuzz-onnx-import.sh [SECONDS]      (default 600)
# The corpus (test/fuzz/onnx-corpus) starts from small models and grows; a crash
# leaves crash-* here and a non-zero exit. Add a regression test for each.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
seconds=${1:-600}
build=${MOEC_FUZZ_BUILD_DIR:-$root/build-fuzz-import}
if ! dpkg-query -W -f='${Status}' libclang-rt-22-dev 2>/dev/null | grep -q "install ok installed"; then
  DEBIAN_FRONTEND=noninteractive ${SUDO:-} apt-get install -y -qq libclang-rt-22-dev >/dev/null
fi
if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMOEC_ENABLE_CUDA=OFF \
    -DMOEC_BUILD_FUZZERS=ON -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 >/dev/null
fi
cmake --build "$build" --target moec-fuzz-onnx-import
corpus="$root/test/fuzz/onnx-corpus"
mkdir -p "$corpus"
"$build/bin/moec-fuzz-onnx-import" -max_total_time="$seconds" -max_len=16384 \
  -rss_limit_mb=4096 -timeout=10 -print_final_stats=1 "$corpus"
