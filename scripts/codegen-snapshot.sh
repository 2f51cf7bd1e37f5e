#!/usr/bin/env bash
# Usage: scripts/codegen-snapshot.sh OUT_DIR   (here: MLIR build tree + nvcc, no GPU)
#
# Writes the generated code (model.cu / model.cpp) and manifest of the four
# benchmark shapes (bench/make_block_mlir.py) for every precision the CUDA
# target has (f32, bf16 weights, bf16 weights and outputs, FP8) and for the CPU
# target (f32, FP8) into OUT_DIR/TARGET-VARIANT/MODEL.{cu,cpp,manifest}, so
# that two builds' outputs can be compared byte for byte with `diff -r`: a
# refactoring of the code generator must leave them identical.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/codegen-snapshot.sh OUT_DIR}
build=${BUILD_DIR:-build}
models=${MODELS:-qwen3moe-30b-a3b,mixtral-8x7b,gpt-oss-120b,deepseek-v3}
python=${PYTHON:-.venv/bin/python}
work=$(mktemp -d -t moec-snapshot.XXXXXX)
trap 'rm -rf "$work"' EXIT
variants=(
  "cuda-f32|--target=cuda"
  "cuda-bf16|--target=cuda --expert-weights=bf16"
  "cuda-bf16out|--target=cuda --expert-weights=bf16 --expert-outputs=bf16"
  "cuda-fp8|--target=cuda --fp8 --expert-weights=bf16"
  "cpu-f32|--target=cpu"
  "cpu-fp8|--target=cpu --fp8"
)
for m in ${models//,/ }; do
  "$python" bench/make_block_mlir.py --model "$m" -o "$work/$m.mlir"
  for v in "${variants[@]}"; do
    name=${v%%|*} flags=${v#*|}
    mkdir -p "$out/$name"
    # shellcheck disable=SC2086
    "$build/bin/moec" compile "$work/$m.mlir" $flags --weights=external --max-tokens=8192 \
      -o "$work/$name-$m"
    src=$work/$name-$m/model.cu
    [[ -f $src ]] || src=$work/$name-$m/model.cpp
    cp "$src" "$out/$name/$m.${src##*.}"
    cp "$work/$name-$m/manifest.txt" "$out/$name/$m.manifest"
    rm -rf "${work:?}/$name-$m"
  done
done
# The op comments quote the input path: name it the same in every run.
sed -i "s|$work|SNAPSHOT|g" "$out"/*/*
echo "snapshot of $(find "$out" -type f | wc -l) files in $out"
