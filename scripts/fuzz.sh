#!/usr/bin/env bash
# Runs one of moec's libFuzzer targets (docs/fuzzing.md) for a long time:
#   scripts/fuzz.sh TARGET [SECONDS]     TARGET: onnx-import, npz, manifest, bundle,
#                                        safetensors
# (default 600 seconds). The targets are built with clang-22 under ASan and UBSan
# in fuzz/ of $MOEC_BUILD_DIR (default build/; scripts/build.sh makes them where
# clang-22 is installed). New inputs go to $MOEC_FUZZ_DIR/TARGET (default
# /tmp/moec-fuzz), never into the committed seed corpus; a crash leaves crash-*
# there and a non-zero exit. To keep an input, copy it into the corpus and add a
# regression test for it.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${MOEC_BUILD_DIR:-$root/build}
target=${1:?usage: scripts/fuzz.sh onnx-import|npz|manifest|bundle|safetensors [SECONDS]}
seconds=${2:-600}
case $target in
  onnx-import) corpus=$root/test/fuzz/onnx-corpus ;;
  safetensors) corpus=$root/test/fuzz/safetensors-corpus ;;
  npz) corpus=$root/runtime/test/fuzz/npz-corpus ;;
  manifest | bundle) corpus=$root/runtime/test/fuzz/$target-corpus ;;
  *) echo "scripts/fuzz.sh: unknown target '$target'" >&2; exit 2 ;;
esac
"$root/scripts/build.sh" >/dev/null
fuzzer=$build/fuzz/bin/moec-fuzz-$target
if [ ! -x "$fuzzer" ]; then
  echo "scripts/fuzz.sh: $fuzzer was not built (needs clang-22 and libclang-rt-22-dev;" \
       "see $build/configure.log)" >&2
  exit 1
fi
out=${MOEC_FUZZ_DIR:-/tmp/moec-fuzz}/$target
mkdir -p "$out"
cd "$out"
exec "$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
  -print_final_stats=1 -artifact_prefix="$out/" "$out" "$corpus"
