#!/usr/bin/env bash
# Whole models on one GPU, moec against transformers' generate, same device call.
#
#   bench/model_generate.sh prepare [MODELS]   here: MLIR build + nvcc, no GPU
#   bench/model_generate.sh run [MODELS]       there: a GPU machine with torch + transformers
#
# MODELS: names under bench/configs (default "qwen3-30b-a3b mixtral-8x7b"). `prepare`
# compiles each config with random weights (`moec compile CONFIG --random-weights
# --target=cuda`, bf16 by default; gpt-oss-120b and deepseek-v3 with --fp8 experts) into
# .device/real/NAME, builds libmoec.so (the C API, static libstdc++) beside them and packs
# .device/real.tar.xz, the one path to carry. `run` unpacks it, then for each model runs
# transformers (bench/model_generate.py transformers, the config's random bf16 model) and
# moec (bench/model_generate.py moec, the artifact's random fill at load) one after the
# other, each in a process of its own (both do not fit the GPU at once), and prints the
# table (bench/model_generate.py table). Results go to $OUT (or bench/results/). CELLS,
# NEW, REPEATS, BACKENDS and MAX_PREFILL are passed on (see model_generate.py); MAX_BATCH and MAX_SEQ size the
# artifacts' KV cache.
set -uo pipefail
cd "$(dirname "$0")/.."
R=.device/real
mode=${1:-}
shift || true
models=${*:-"qwen3-30b-a3b mixtral-8x7b"}
: "${MAX_BATCH:=64}" "${MAX_SEQ:=4128}" "${MAX_TOKENS:=4096}"

flags_of() { # moec compile's extra flags for a model
  case $1 in
  gpt-oss-120b | deepseek-v3) echo "--fp8" ;;
  *) echo "" ;;
  esac
}

case $mode in
prepare)
  build=${MOEC_BUILD_DIR:-build}
  cuda=${CUDA_HOME:-/usr/local/cuda}
  rm -rf "$R" && mkdir -p "$R/bin" || exit 1
  for m in $models; do
    start=$(date +%s)
    # shellcheck disable=SC2046
    "$build/bin/moec" compile "bench/configs/$m" --random-weights --target=cuda \
      --max-batch="$MAX_BATCH" --max-seq="$MAX_SEQ" --max-tokens="$MAX_TOKENS" $(flags_of "$m") -o "$R/$m" || exit 1
    echo "compiled $m in $(($(date +%s) - start)) s"
  done
  g++ -shared -o "$R/bin/libmoec.so" -Wl,--whole-archive "$build/lib/libmoec_runtime.a" \
    -Wl,--no-whole-archive "$cuda/lib64/libcudart_static.a" -static-libstdc++ -static-libgcc \
    -Wl,--exclude-libs,libstdc++.a -ldl -lrt -pthread || exit 1
  tar -C .device -cJf .device/real.tar.xz real && ls -la .device/real.tar.xz
  ;;
run)
  out=${OUT:-bench/results}
  [ -d "$R" ] || tar -C .device -xJf .device/real.tar.xz || exit 1
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv
  files=()
  for m in $models; do
    extra=(${CELLS:+--cells "$CELLS"} ${NEW:+--new "$NEW"} ${REPEATS:+--repeats "$REPEATS"})
    PYTHONUNBUFFERED=1 python3 bench/model_generate.py moec "$R/bin/libmoec.so" "$R/$m" \
      --name "$m" --out "$out/$m-moec.json" "${extra[@]}" && files+=("$out/$m-moec.json")
    if [ "${SKIP_TRANSFORMERS:-0}" != 1 ]; then
      PYTHONUNBUFFERED=1 python3 bench/model_generate.py transformers "bench/configs/$m" \
        --name "$m" --out "$out/$m-transformers.json" "${extra[@]}" \
        ${BACKENDS:+--backends "$BACKENDS"} ${MAX_PREFILL:+--max-prefill-tokens "$MAX_PREFILL"} && files+=("$out/$m-transformers.json")
    fi
  done
  python3 bench/model_generate.py table "${files[@]}" --configs $(for m in $models; do
    echo "$m=bench/configs/$m"; done) --fp8-experts $(for m in $models; do
    [ -n "$(flags_of "$m")" ] && echo "$m"; done) | tee "$out/model-generate.md"
  ;;
*)
  sed -n 2,17p "$0"
  exit 2
  ;;
esac
