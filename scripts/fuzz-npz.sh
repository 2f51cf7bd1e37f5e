#!/usr/bin/env bash
# Fuzzes the runtime's .npz reader with libFuzzer (clang-22) under ASan and UBSan.
#   scripts/fuzz-npz.sh [SECONDS]      (default 600)
# New inputs that reach new code are added to runtime/test/fuzz/npz-corpus; a crash
# leaves crash-* in the working directory and a non-zero exit.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
seconds=${1:-600}
out=${MOEC_FUZZ_DIR:-$root/build-fuzz}
mkdir -p "$out"
# libFuzzer and the sanitizer runtimes come with clang's runtime package.
if ! dpkg-query -W -f='${Status}' libclang-rt-22-dev 2>/dev/null | grep -q "install ok installed"; then
  DEBIAN_FRONTEND=noninteractive ${SUDO:-} apt-get install -y -qq libclang-rt-22-dev >/dev/null
fi
clang++-22 -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
  -I"$root/runtime/include" "$root/runtime/test/fuzz/FuzzNpz.cpp" \
  "$root/runtime/src/Npz.cpp" "$root/runtime/src/Tensor.cpp" -lz -o "$out/fuzz-npz"
"$out/fuzz-npz" -max_total_time="$seconds" -max_len=65536 -rss_limit_mb=2048 \
  -print_final_stats=1 "$root/runtime/test/fuzz/npz-corpus"
