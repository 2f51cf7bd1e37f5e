#!/usr/bin/env bash
# Usage: scripts/gpu-random-weights.sh prepare [CONFIG...] (here: MLIR build tree + nvcc, no GPU)
#        scripts/gpu-random-weights.sh run                 (on the GPU machine, without MLIR)
#
# Real configs with random weights (moec compile --random-weights, docs/artifact.md,
# "Weights filled at load"). `prepare` compiles each CONFIG of bench/configs (default
# qwen3-30b-a3b) with --target=cuda into $OUTDIR/art/CONFIG (bf16 experts; --fp8 for
# gpt-oss-120b and deepseek-v3), writes a prompt, builds a moec-run with static
# libstdc++ and zlib and the runtime's GPU unit tests into $OUTDIR/bin, and packs it
# all into $OUTDIR.tar.xz (OUTDIR default .device/random; the artifacts are a few MB:
# their weights are filled on the device). `run` unpacks it and runs the GPU fill
# tests (WeightFillCuda.*: the device's image bit for bit the host's, and the fill
# rate of MOEC_FILL_RATE_GB, default 60) and a generation of 16 tokens from each
# artifact, whose "load:" line is the whole load: context, model.so, the weights'
# fill on the device.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUTDIR:-.device/random}
build=${BUILD:-build}
flags_of() {
  case $1 in
  gpt-oss-120b | deepseek-v3) echo "--fp8" ;;
  *) echo "--expert-weights=bf16" ;;
  esac
}
case ${1:-} in
prepare)
  shift
  configs=${*:-qwen3-30b-a3b}
  rm -rf "$out" && mkdir -p "$out/bin" "$out/art"
  cuda=${CUDA_HOME:-/usr/local/cuda}
  g++ -O2 -std=c++20 -DMOEC_RUN_WITH_CUDA tools/moec-run/moec-run.cpp tools/moec-run/StreamRun.cpp \
    tools/moec-run/ModelRun.cpp tools/moec-run/ExpertParallel.cpp -Iruntime/include \
    -I"$cuda/include" "$build/lib/libmoec_dist.a" "$build/lib/libmoec_runtime.a" \
    "$build/lib/libmoec_tooling.a" /usr/lib/x86_64-linux-gnu/libz.a "$cuda/lib64/libcudart_static.a" \
    -static-libstdc++ -static-libgcc -ldl -lrt -pthread -o "$out/bin/moec-run" || exit 1
  cp "$build/runtime/test/moec-runtime-gpu-tests" "$out/bin/" || exit 1
  for c in $configs; do
    # shellcheck disable=SC2046
    /usr/bin/time -f "$c: compile %e s, %M KB" "$build/bin/moec" compile "bench/configs/$c" \
      --random-weights=1 --target=cuda $(flags_of "$c") --max-batch=4 --max-seq=1024 \
      --max-tokens=1024 -o "$out/art/$c" || exit 1
  done
  python3 -c "
import numpy as np
np.savez('$out/prompt.npz', input_ids=np.arange(1, 65, dtype=np.int64).reshape(2, 32) * 97 % 30000)"
  tar -cJf "$out.tar.xz" "$out" && ls -l "$out.tar.xz"
  ;;
run)
  [[ -d $out ]] || tar -xJf "$out.tar.xz" || exit 1
  MOEC_FILL_RATE_GB=${MOEC_FILL_RATE_GB:-60} "$out/bin/moec-runtime-gpu-tests" \
    --gtest_filter='WeightFillCuda.*'
  rc=$?
  for art in "$out"/art/*; do
    echo "== $(basename "$art")"
    "$out/bin/moec-run" "$art" --inputs "$out/prompt.npz" --generate 16 || rc=1
  done
  exit $rc
  ;;
*)
  sed -n 2,16p "$0"
  exit 2
  ;;
esac
