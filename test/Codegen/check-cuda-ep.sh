#!/usr/bin/env bash
# Usage: check-cuda-ep.sh BIN_DIR RANKS [prepare DIR | run DIR]
# Expert parallelism on GPUs (ctest e2e.cuda.expert-parallel.epN, label `gpu`):
# artifacts of `moec compile --target=cuda --ep-size=RANKS` run as RANKS
# processes (`moec-run ART --ep RANKS`: one GPU each through
# CUDA_VISIBLE_DEVICES, NCCL's all-reduce inside each run's CUDA graph) give
# the plain one-GPU artifact's outputs:
#   - DeepSeek-V3's block (a shared expert on the side stream, counted on rank 0
#     alone) in f32 and with bf16 expert weights, gpt-oss's (biases) in f32;
#     also eagerly (MOEC_CUDA_GRAPHS=0: each all-reduce watched) and queued on
#     the caller's stream (--on-stream);
#   - a whole model (Qwen3-MoE) in f32 and in bf16: its logits, and greedy
#     generations through moec_generate, whose decode steps are CUDA graphs
#     with the all-reduce in them.
# f32 within 1e-5 (relative, --scale-atol), bf16 within its spread (1e-2);
# a group of one (RANKS 1) sums nothing, so there every output must be
# bit-identical. Any "capturing the CUDA graph ... failed" note fails.
# Exits 77 (skipped, saying why) without nvcc, or with fewer than RANKS GPUs.
#
# `prepare DIR` compiles the artifacts into DIR (here: MLIR, nvcc) and `run DIR`
# runs them (there: a GPU, no MLIR); without either, both in a temporary
# directory. MOEC_FIXTURES names test/fixtures (default: beside this script).
set -uo pipefail
bin=$1 ranks=$2 phase=${3:-all}
fixtures=${MOEC_FIXTURES:-$(cd "$(dirname "$0")/../fixtures" && pwd)}
if [[ $phase == all ]]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
else
  work=$4
  mkdir -p "$work"
fi
model_flags=(--max-batch=2 --max-seq=32 --max-tokens=64)

# NAME SOURCE FLAGS...: the plain artifact NAME and the one for RANKS ranks NAME-ep.
compile_pair() {
  local name=$1 source=$2
  shift 2
  for variant in plain ep; do
    local extra=()
    [[ $variant == ep ]] && extra=(--ep-size="$ranks")
    if ! "$bin/moec" compile "$source" --target=cuda "$@" "${extra[@]}" \
      -o "$work/$name-$variant" 2>"$work/compile.err"; then
      cat "$work/compile.err" >&2
      if grep -q "needs CUDA's compiler\|built without CUDA" "$work/compile.err"; then
        echo "SKIP: no nvcc" >&2
        exit 77
      fi
      exit 1
    fi
    rm -f "$work/$name-$variant/model.cu"
  done
}

prepare() {
  compile_pair ds "$fixtures/deepseek_v3/model.onnx"
  compile_pair ds-bf16 "$fixtures/deepseek_v3/model.onnx" --expert-weights=bf16
  compile_pair oss "$fixtures/gpt_oss/model.onnx"
  compile_pair qwen3 "$fixtures/models/qwen3_moe/checkpoint" --precision=f32 "${model_flags[@]}"
  compile_pair qwen3-bf16 "$fixtures/models/qwen3_moe/checkpoint" "${model_flags[@]}"
}

pass=0 fail=0
# NAME TOLERANCE(f32|bf16) INPUTS [moec-run flags...]: the plain artifact's
# outputs, then the RANKS-rank run compared with them.
check() {
  local name=$1 precision=$2 inputs=$3
  shift 3
  local tolerance=(--rtol 1e-5 --atol 1e-6 --scale-atol)
  [[ $precision == bf16 ]] && tolerance=(--rtol 1e-2 --atol 1e-2 --scale-atol)
  [[ $ranks == 1 ]] && tolerance=(--rtol 0 --atol 0)
  [[ $* == *--generate* ]] && tolerance=(--rtol 0 --atol 0) # greedy tokens: identical
  local label="$name on $(basename "$inputs" .npz)${*:+ $*} ($ranks rank(s) vs one GPU)" env=()
  if [[ ${1:-} == eager ]]; then
    env=(MOEC_CUDA_GRAPHS=0)
    shift
  fi
  local rc=0
  env "${env[@]}" "$bin/moec-run" "$work/$name-plain" --inputs "$inputs" "$@" \
    --outputs "$work/$name.npz" >"$work/out.log" 2>&1 || rc=$?
  if [[ $rc -eq 0 ]]; then
    env "${env[@]}" "$bin/moec-run" "$work/$name-ep" --ep "$ranks" --inputs "$inputs" "$@" \
      --expected-outputs "$work/$name.npz" "${tolerance[@]}" >>"$work/out.log" 2>&1 || rc=$?
  fi
  if [[ $rc -eq 0 ]] && grep -q "capturing the CUDA graph" "$work/out.log"; then
    rc=3
  fi
  cat "$work/out.log"
  if [[ $rc -eq 0 ]]; then
    echo "PASS: $label"
    pass=$((pass + 1))
  else
    echo "FAIL: $label (rc=$rc)"
    fail=$((fail + 1))
  fi
}

need_gpus() {
  local gpus=0
  if command -v nvidia-smi >/dev/null 2>&1; then
    gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
  fi
  if [[ $gpus -lt $ranks ]]; then
    echo "SKIP: $ranks expert-parallel ranks need $ranks GPUs; $gpus visible"
    exit 77
  fi
}

run() {
  need_gpus
  for a in ds ds-bf16 oss qwen3 qwen3-bf16; do
    if [[ ! -d $work/$a-ep ]]; then
      echo "FAIL: $work/$a-ep was not prepared"
      exit 1
    fi
  done
  export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
  local ds=$fixtures/deepseek_v3/inputs.npz oss=$fixtures/gpt_oss/inputs.npz
  local prompt=$fixtures/models/qwen3_moe/prompt.npz ragged=$fixtures/models/qwen3_moe/prompt_ragged.npz
  check ds f32 "$ds"
  check ds f32 "$ds" eager
  check ds f32 "$ds" --on-stream
  check ds-bf16 bf16 "$ds"
  check oss f32 "$oss"
  check qwen3 f32 "$prompt"
  check qwen3 f32 "$prompt" --generate 8
  check qwen3 f32 "$ragged" --generate 8
  check qwen3-bf16 bf16 "$prompt"
  check qwen3-bf16 bf16 "$prompt" --generate 8
  echo "EP$ranks SUMMARY pass=$pass fail=$fail"
  [[ $fail -eq 0 ]]
}

case $phase in
prepare) prepare ;;
run) run ;;
all)
  need_gpus
  prepare
  run
  ;;
*)
  sed -n 2,3p "$0"
  exit 2
  ;;
esac
