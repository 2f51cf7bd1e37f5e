#!/usr/bin/env bash
# Usage: bench/prepare.sh [MODELS] [MAX_TOKENS]   (here: MLIR build tree + nvcc, no GPU)
#
# Compiles each model SHAPE (bench/make_block_mlir.py, splat weights) with
# `moec compile --target=cuda --weights=external` into .device/bench/art/MODEL
# (manifest + model.so, no weights.bin: bench/bench_moe.py fills it on the GPU
# machine from the transformers block's parameters) and links the runtime's C API
# (moec.h) into .device/bench/libmoec.so for ctypes (static libstdc++, exports
# moec_* only). EXPERT_WEIGHTS=bf16 compiles with --expert-weights=bf16 into
# .device/bench/art-bf16 instead; with EXPERT_OUTPUTS=bf16 too (--expert-outputs=bf16)
# into .device/bench/art-bf16out; FP8=1 with --fp8 into .device/bench/art-fp8; MXFP4=1 with
# --expert-weights=mxfp4 into .device/bench/art-mxfp4 (for both, EXPERT_OUTPUTS=bf16 adds
# --expert-outputs=bf16). .device/ is ignored (.git/info/exclude) and carried to the GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
models=${1:-qwen3moe-30b-a3b,mixtral-8x7b}
max_tokens=${2:-8192}
build=${BUILD_DIR:-build}
out=.device/bench
expert_weights=${EXPERT_WEIGHTS:-f32}
art=$out/art
[[ $expert_weights == f32 ]] || art=$out/art-$expert_weights
outputs=()
if [[ ${EXPERT_OUTPUTS:-f32} == bf16 ]]; then
  outputs=(--expert-outputs=bf16)
  art=$out/art-${expert_weights}out
fi
fp8=()
if [[ ${FP8:-0} == 1 ]]; then # FP8 experts (the shared expert bf16): .device/bench/art-fp8
  fp8=(--fp8)
  expert_weights=bf16
  art=$out/art-fp8
fi
if [[ ${MXFP4:-0} == 1 ]]; then # MXFP4 experts (the rest bf16 but the router): .device/bench/art-mxfp4
  expert_weights=mxfp4
  art=$out/art-mxfp4
fi
exclude=$(git rev-parse --git-path info/exclude) # (a worktree's .git is a file)
mkdir -p "$(dirname "$exclude")"
grep -qx '/.device/' "$exclude" 2>/dev/null || echo /.device/ >>"$exclude"
mkdir -p "$art"
for m in ${models//,/ }; do
  python3 bench/make_block_mlir.py --model "$m" -o $out/$m.mlir
  "$build/bin/moec" compile $out/$m.mlir --target=cuda --weights=external "${fp8[@]}" "${outputs[@]}" \
    --expert-weights="$expert_weights" --max-tokens="$max_tokens" -o "$art/$m"
done
syms=$(grep -o 'moec_[a-z_]*(' runtime/include/moec/moec.h | tr -d '(' | sort -u | sed 's/^/-Wl,-u,/')
echo '{ global: moec_*; local: *; };' >$out/libmoec.map
# shellcheck disable=SC2086
g++ -shared -o $out/libmoec.so $syms "$build/lib/libmoec_runtime.a" -static-libstdc++ -static-libgcc \
  -ldl -pthread -Wl,-z,defs -Wl,--version-script=$out/libmoec.map
du -sh $out
