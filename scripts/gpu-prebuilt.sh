#!/usr/bin/env bash
# Usage: scripts/gpu-prebuilt.sh prepare [SETS]   (here: MLIR build tree + nvcc, no GPU)
#        scripts/gpu-prebuilt.sh run              (on a GPU machine without MLIR)
#        scripts/gpu-prebuilt.sh sanitize [TOOLS]  (there: compute-sanitizer, below)
#        scripts/gpu-prebuilt.sh prepare-models   (here: whole models, below)
#        scripts/gpu-prebuilt.sh models           (there)
#
# SETS (default "f32 loops sentinels fp8 mxfp4 exe", which fits the device machine's 64 MiB
# upload beside the tracked tree): any of f32, bf16, bf16out (--expert-outputs=bf16 too),
# loops, sentinels, many (DeepSeek-V3's fixture at 7-640 tokens), fp8, mxfp4, exe; the
# GPU unit tests and tools always go. `run` reports what was not prepared as skipped.
#
# `prepare` compiles every fixture and expert-loop case with --target=cuda into
# .device/art/NAME and builds a moec-run with static libstdc++ and zlib plus the
# runtime's GPU unit tests into .device/bin; .device/ (ignored through
# .git/info/exclude) is what travels. `run` runs test/Codegen/check-cuda-artifact.sh
# on each prebuilt artifact (f32 and --expert-weights=bf16), the sentinel regression,
# an executable from --emit=exe, the GPU unit tests, a short
# benchmark with and without CUDA graphs and compute-sanitizer memcheck on the unit
# tests and four artifacts (MEMCHECK=0 leaves those two out, for a short call).
#
# `prepare-models` compiles each whole model (test/fixtures/models/FAMILY/checkpoint)
# with --target=cuda into .device/models/FAMILY/{artifact,chunked} (f32, 64 and 4 tokens
# a step) and FAMILY/bf16 (the bf16 default, 64 tokens; its KV cache in
# $MOEC_BF16_KV_CACHE, default bf16) beside moec-run, libmoec.so and the GPU unit tests in .device/models/bin, and
# packs them into .device/models.tar.xz (the one path to carry; `run` and `models`
# unpack it). `models` runs test/fixtures/models/check-model-cuda.sh on each family
# (ctest e2e.cuda.model.*), the GPU unit tests (the whole-model
# kernels first; GTEST_FILTER narrows the rest), the decode step time at batch 1
# and 2 (bench/model_decode.py, steady state, with CUDA graphs and eagerly) and
# compute-sanitizer's memcheck and initcheck on a generation each (QUICK=1: one
# memcheck of a sampled bf16 generation and no eager timing; NO_TIMING=1: no timing). `run` runs the
# model checks too when they are prepared. RUNTIME_DIR (default: the build) names
# another runtime build to link and carry (`cmake -S runtime`: its lib/ and test/).
set -uo pipefail
cd "$(dirname "$0")/.."
fx=test/fixtures L=test/Transforms/Inputs/expert-loops B=.device/bin M=.device/models
fixtures="mixtral qwen3_moe gpt_oss deepseek_v3 ort-moe ort-moe-silu ort-qmoe"
families="mixtral qwen3_moe gpt_oss deepseek_v3" # whole models (test/fixtures/models)
fp8_fixtures="deepseek_v3_fp8 gpt_oss_fp8" # FP8 checkpoints: the CUDA target runs them with --fp8 only
forms="loop loop-concat unrolled"
# moec compile's flags of each build: f32 and bf16 expert weights, and bf16 expert outputs too.
build_flags() {
  case $1 in
  bf16out) echo "--expert-weights=bf16 --expert-outputs=bf16" ;;
  *) echo "--expert-weights=$1" ;;
  esac
}
tally() { # a check's exit code: 0 passed, 77 skipped (ctest's convention), else failed
  case $1 in 0) pass=$((pass + 1)) ;; 77) skip=$((skip + 1)) ;; *) fail=$((fail + 1)) ;; esac
}
static_tools() { # here: moec-run (static libstdc++, zlib, cudart) and libmoec.so into $1
  local build=$2 cuda=${CUDA_HOME:-/usr/local/cuda}
  g++ -O2 -std=c++20 -DMOEC_RUN_WITH_CUDA tools/moec-run/moec-run.cpp tools/moec-run/StreamRun.cpp \
    tools/moec-run/ModelRun.cpp tools/moec-run/ExpertParallel.cpp -Iruntime/include \
    -I"$cuda/include" "$build/lib/libmoec_dist.a" "$build/lib/libmoec_runtime.a" \
    "$build/lib/libmoec_tooling.a" /usr/lib/x86_64-linux-gnu/libz.a "$cuda/lib64/libcudart_static.a" \
    -static-libstdc++ -static-libgcc -ldl -lrt -pthread -o "$1/moec-run"
  # The C API as a shared library, for test/Codegen/check-cuda-faults.py and bench/model_decode.py.
  g++ -shared -o "$1/libmoec.so" -Wl,--whole-archive "$build/lib/libmoec_runtime.a" \
    -Wl,--no-whole-archive -static-libstdc++ -static-libgcc -Wl,--exclude-libs,libstdc++.a -ldl -pthread
}
unpack_models() { # there: .device/models from the carried archive
  if [[ ! -d $M && -f .device/models.tar.xz ]]; then tar -xJf .device/models.tar.xz; fi
  [[ -d $M ]]
}
check_models() { # there: check-model-cuda.sh on each prepared family
  for f in $families; do
    echo "== whole model $f (check-model-cuda.sh)"
    if [[ ! -d $M/$f ]]; then
      echo "absent: not prepared"
      skip=$((skip + 1))
      continue
    fi
    MOEC_PREBUILT_ARTIFACTS=$M/$f timeout 300 test/fixtures/models/check-model-cuda.sh $M/bin \
      $fx/models/$f $fx/models/$f/checkpoint
    local rc=$?
    echo "rc=$rc"
    tally $rc
  done
}
case ${1:-} in
prepare-models)
  set -e
  build=${BUILD_DIR:-build}
  rt=${RUNTIME_DIR:-$build}
  rm -rf $M .device/models.tar.xz
  mkdir -p $M/bin
  exclude=$(git rev-parse --git-path info/exclude)
  mkdir -p "$(dirname "$exclude")"
  grep -qx '/.device/' "$exclude" 2>/dev/null || echo /.device/ >>"$exclude"
  for f in $families; do
    # f32 (--precision=f32), as check-model-cuda.sh compiles them, and the bf16 default.
    for plan in "artifact 64 --precision=f32" "chunked 4 --precision=f32" \
      "bf16 64 --kv-cache=${MOEC_BF16_KV_CACHE:-bf16}"; do
      read -r name tokens flags <<<"$plan"
      # shellcheck disable=SC2086 # the flags are words
      "$build/bin/moec" compile $fx/models/$f/checkpoint --target=cuda --max-batch=2 --max-seq=32 \
        --max-tokens=$tokens $flags --runtime-dir="$rt" -o $M/$f/$name
    done
  done
  # The CPU artifact's sampled generations, which check-model-cuda.sh compares
  # the CUDA artifact's with (test/fixtures/models/sampling-cases.txt).
  for f in $families; do
    "$build/bin/moec" compile $fx/models/$f/checkpoint --target=cpu --max-batch=2 --max-seq=32 \
      -o $M/$f/cpu
    n=0
    while read -r -u 3 flags; do
      [[ -z $flags || $flags == \#* ]] && continue
      n=$((n + 1))
      # shellcheck disable=SC2086 # the flags are words
      "$build/bin/moec-run" $M/$f/cpu --inputs $fx/models/$f/prompt_ragged.npz --generate 16 \
        $flags --outputs $M/$f/sampled-$n.npz >/dev/null
    done 3<$fx/models/sampling-cases.txt
    rm -rf $M/$f/cpu
  done
  rm -f $M/*/*/model.cu
  static_tools $M/bin "$rt"
  cp "$(ls "$rt"/runtime/test/moec-runtime-gpu-tests "$rt"/test/moec-runtime-gpu-tests 2>/dev/null |
    head -1)" $M/bin/
  tar -cJf .device/models.tar.xz $M
  du -sh $M .device/models.tar.xz
  ;;
models)
  nvidia-smi -L
  pass=0 fail=0 skip=0
  unpack_models || { echo "nothing prepared: run prepare-models here first"; exit 2; }
  check_models
  echo "== runtime gpu unit tests (the whole-model kernels first)"
  for filter in "CudaModelKernels*:DeviceKVCache*" "${GTEST_FILTER:--CudaModelKernels*:DeviceKVCache*}"; do
    timeout 240 $M/bin/moec-runtime-gpu-tests --gtest_brief=1 --gtest_filter="$filter" 2>&1 | tail -15
    rc=${PIPESTATUS[0]}
    echo "gpu unit tests $filter: rc=$rc"
    tally $rc
  done
  echo "== decode step time (bench/model_decode.py: CUDA graphs, eager, the host's loop)"
  [[ ${NO_TIMING:-0} == 1 ]] && echo "(NO_TIMING=1: skipped)"
  for f in $([[ ${NO_TIMING:-0} == 1 ]] || echo $families); do
    hows="MOEC_CUDA_GRAPHS=1 MOEC_CUDA_GRAPHS=0 MOEC_DEVICE_GENERATE=0"
    [[ ${QUICK:-0} == 1 ]] && hows="MOEC_CUDA_GRAPHS=1 MOEC_DEVICE_GENERATE=0"
    for how in $hows; do
      echo "-- $f, $how"
      env $how timeout 60 python3 bench/model_decode.py $M/bin/libmoec.so \
        $M/$f/artifact $fx/models/$f/prompt.npz --repeats 4
    done
  done
  echo "== compute-sanitizer on whole-model generations"
  runs=("mixtral memcheck artifact" "deepseek_v3 initcheck artifact"
    "qwen3_moe memcheck artifact --temperature 1 --top-k 9" "gpt_oss memcheck bf16")
  [[ ${QUICK:-0} == 1 ]] && runs=("gpt_oss memcheck bf16 --temperature 1 --top-k 9")
  for run in "${runs[@]}"; do
    read -r f tool art flags <<<"$run"
    # shellcheck disable=SC2086 # the flags are words
    timeout 100 compute-sanitizer --tool $tool --error-exitcode 9 --print-limit 5 $M/bin/moec-run \
      $M/$f/$art --inputs $fx/models/$f/prompt.npz --generate 4 $flags > .device/sanitize.log 2>&1
    rc=$?
    echo "$tool $f $art generate: rc=$rc $(grep -m1 'ERROR SUMMARY' .device/sanitize.log)"
    [[ $rc -ne 0 ]] && grep -v "Host Frame" .device/sanitize.log | head -20
    tally $rc
  done
  echo "MODELS SUMMARY pass=$pass fail=$fail skip=$skip"
  [[ $fail -eq 0 ]]
  ;;
prepare)
  set -e
  build=${BUILD_DIR:-build}
  sets=" ${2:-f32 loops sentinels fp8 mxfp4 exe} "
  want() { [[ $sets == *" $1 "* ]]; }
  rm -rf .device/art .device/bin .device/sentinels-* .device/fp8-* .device/fp8out-* .device/mxfp4-* \
    .device/many-tokens-*
  mkdir -p .device/bin .device/art
  exclude=$(git rev-parse --git-path info/exclude) # (a worktree's .git is a file)
  mkdir -p "$(dirname "$exclude")"
  grep -qx '/.device/' "$exclude" 2>/dev/null || echo /.device/ >>"$exclude"
  for f in $fixtures; do
    if want f32; then "$build/bin/moec" compile $fx/$f/model.onnx --target=cuda -o .device/art/$f; fi
    for w in bf16 bf16out; do
      # shellcheck disable=SC2046 # the flags are words
      if want $w; then "$build/bin/moec" compile $fx/$f/model.onnx --target=cuda $(build_flags $w) -o .device/art/$w-$f; fi
    done
  done
  for form in $forms; do
    if want loops; then "$build/bin/moec" compile $L/$form.mlir --target=cuda -o .device/art/loops-$form; fi
  done
  static_tools $B "$build"
  cp "$build/runtime/test/moec-runtime-gpu-tests" "$build/bench/moec-bench-grouped-matmul" $B/
  # The sentinel regression (test/Codegen/check-sentinels.py), compiled here, run there.
  for w in f32 bf16 bf16out; do
    want sentinels || break
    # shellcheck disable=SC2046 # the flags are words
    .venv/bin/python test/Codegen/check-sentinels.py --bin "$build/bin" --target cuda \
      --work .device/sentinels-$w --phase prepare -- $(build_flags $w)
  done
  # DeepSeek-V3's fixture at 7, 512 and 640 tokens (test/Codegen/check-many-tokens.py):
  # compiled and the interpreter's outputs written here, run and compared there.
  for w in f32 bf16; do
    want many || break
    # shellcheck disable=SC2046 # the flags are words
    .venv/bin/python test/Codegen/check-many-tokens.py --bin "$build/bin" --target cuda \
      --fixture $fx/deepseek_v3 --work .device/many-tokens-$w --phase prepare -- $(build_flags $w)
    rm -f .device/many-tokens-$w/artifact/model.cu
  done
  # FP8 experts on the GPU (test/Codegen/check-fp8-artifact.py): compiled and the
  # interpreter's FP8 output written here, run and compared there.
  for f in $fixtures $fp8_fixtures partial-blocks prequantized; do
    want fp8 || break
    if [[ $f == partial-blocks || $f == prequantized ]]; then case=(.device/fp8-$f/case --$f); else case=($fx/$f); fi
    .venv/bin/python test/Codegen/check-fp8-artifact.py "$build/bin" "${case[0]}" 3.2e-3 8e-2 \
      "${case[@]:1}" --target cuda --work .device/fp8-$f --phase prepare >/dev/null
    # Only what the run phase reads travels (64 MiB in all): not the IR, not model.cu.
    rm -f .device/fp8-$f/fp8.mlir .device/fp8-$f/case/model.mlir .device/fp8-$f/artifact/model.cu
  done
  # ... and with --expert-outputs=bf16 (the rest bf16): bf16 down results for the combine.
  for f in $fixtures; do
    want fp8 || break
    .venv/bin/python test/Codegen/check-fp8-artifact.py "$build/bin" $fx/$f 3.2e-3 8e-2 \
      --bf16-outputs --target cuda --work .device/fp8out-$f --phase prepare >/dev/null
    rm -f .device/fp8out-$f/fp8.mlir .device/fp8out-$f/artifact/model.cu
  done
  # MXFP4 experts on the GPU (test/Codegen/check-mxfp4-artifact.py): the same split;
  # the partial-blocks case is also checked against its float64 emulation.
  for f in $fixtures partial-blocks; do
    want mxfp4 || break
    if [[ $f == partial-blocks ]]; then case=(.device/mxfp4-$f/case --write-block); else case=($fx/$f); fi
    mkdir -p "${case[0]}"
    .venv/bin/python test/Codegen/check-mxfp4-artifact.py "$build/bin" "${case[@]}" --target cuda \
      --work .device/mxfp4-$f --phase prepare >/dev/null
    rm -f .device/mxfp4-$f/mxfp4.mlir .device/mxfp4-$f/case/model.mlir .device/mxfp4-$f/artifact/model.cu
  done
  rm -f .device/art/*/model.cu
  # --emit=exe with the static moec-run above: one file that runs on the GPU machine.
  if want exe; then
    MOEC_RUN=$B/moec-run "$build/bin/moec" compile $fx/mixtral/model.onnx --target=cuda \
      --expert-weights=bf16 --emit=exe -o $B/mixtral-bf16-exe
  fi
  du -sh .device
  ;;
run)
  nvidia-smi -L
  pass=0 fail=0 skip=0

  check() { # name model inputs expected
    echo "== $1"
    local name=$1
    shift
    if [[ ! -d .device/art/$name ]]; then # left out of this upload (64 MiB)
      echo "absent: not prepared"
      skip=$((skip + 1))
      return
    fi
    MOEC_PREBUILT_ARTIFACT=.device/art/$name timeout 120 test/Codegen/check-cuda-artifact.sh $B "$@"
    local rc=$?
    echo "rc=$rc"
    tally $rc
  }
  for f in $fixtures; do check $f $fx/$f/model.onnx $fx/$f/inputs.npz $fx/$f/expected.npz; done
  for w in bf16 bf16out; do # the tolerance of e2e.cuda.bf16{,-outputs}.* (test/Codegen/CMakeLists.txt)
    for f in $fixtures; do
      check $w-$f $fx/$f/model.onnx $fx/$f/inputs.npz $fx/$f/expected.npz --rtol 1e-2 --atol 1e-2 --scale-atol
    done
  done
  for form in $forms; do check loops-$form $L/$form.mlir $L/$form.inputs.npz $L/expected.npz; done
  for f in mixtral deepseek_v3; do # e2e.cuda.on-stream.*: moec_run_async on moec-run's stream
    check $f $fx/$f/model.onnx $fx/$f/inputs.npz $fx/$f/expected.npz --on-stream --bench 3
  done
  for w in f32 bf16 bf16out; do
    if [[ ! -d .device/sentinels-$w ]]; then skip=$((skip + 1)); continue; fi
    echo "== sentinels ($(build_flags $w))"
    # shellcheck disable=SC2046 # the flags are words
    timeout 60 python3 test/Codegen/check-sentinels.py --bin $B --target cuda \
      --work .device/sentinels-$w --phase run -- $(build_flags $w)
    rc=$?
    echo "rc=$rc"
    tally $rc
  done
  for w in f32 bf16; do
    if [[ ! -d .device/many-tokens-$w ]]; then skip=$((skip + 1)); continue; fi
    echo "== many tokens ($(build_flags $w))"
    # shellcheck disable=SC2046 # the flags are words
    timeout 60 python3 test/Codegen/check-many-tokens.py --bin $B --target cuda \
      --fixture $fx/deepseek_v3 --work .device/many-tokens-$w --phase run -- $(build_flags $w)
    rc=$?
    echo "rc=$rc"
    tally $rc
  done
  for f in $fixtures $fp8_fixtures partial-blocks prequantized; do
    if [[ ! -d .device/fp8-$f ]]; then skip=$((skip + 1)); continue; fi
    echo "== fp8 $f"
    if [[ $f == partial-blocks || $f == prequantized ]]; then case=(.device/fp8-$f/case --$f); else case=($fx/$f); fi
    timeout 60 python3 test/Codegen/check-fp8-artifact.py $B "${case[0]}" 3.2e-3 8e-2 "${case[@]:1}" \
      --target cuda --work .device/fp8-$f --phase run
    rc=$?
    echo "rc=$rc"
    tally $rc
  done
  for f in $fixtures; do
    if [[ ! -d .device/fp8out-$f ]]; then skip=$((skip + 1)); continue; fi
    echo "== fp8 $f, bf16 outputs"
    timeout 60 python3 test/Codegen/check-fp8-artifact.py $B $fx/$f 3.2e-3 8e-2 \
      --target cuda --work .device/fp8out-$f --phase run
    rc=$?
    echo "rc=$rc"
    tally $rc
  done
  for f in $fixtures partial-blocks; do
    if [[ ! -d .device/mxfp4-$f ]]; then skip=$((skip + 1)); continue; fi
    echo "== mxfp4 $f"
    if [[ $f == partial-blocks ]]; then case=(.device/mxfp4-$f/case --write-block); else case=($fx/$f); fi
    timeout 60 python3 test/Codegen/check-mxfp4-artifact.py $B "${case[@]}" --target cuda \
      --work .device/mxfp4-$f --phase run
    rc=$?
    echo "rc=$rc"
    tally $rc
  done
  echo "== moec compile --emit=exe (CUDA, bf16 expert weights)"
  if [[ -x $B/mixtral-bf16-exe ]]; then
    timeout 60 $B/mixtral-bf16-exe --inputs $fx/mixtral/inputs.npz --outputs .device/exe-out.npz \
      --expected-outputs $fx/mixtral/expected.npz --rtol 1e-2 --atol 1e-2 --scale-atol
    rc=$?
    echo "rc=$rc"
    case $rc in 0) pass=$((pass + 1)) ;; *) fail=$((fail + 1)) ;; esac
  else
    echo "absent: not prepared"
    skip=$((skip + 1))
  fi
  echo "== CUDA faults inside a run (test/Codegen/check-cuda-faults.py)"
  if [[ -d .device/art/deepseek_v3 ]]; then
    timeout 300 python3 test/Codegen/check-cuda-faults.py $B/libmoec.so .device/art/deepseek_v3 \
      $fx/deepseek_v3/inputs.npz
    rc=$?
    echo "rc=$rc"
    tally $rc
  else
    echo "absent: not prepared (the f32 set)"
    skip=$((skip + 1))
  fi
  unpack_models && check_models
  echo "SUMMARY pass=$pass fail=$fail skip=$skip"
  # Four gtest shards side by side: the GPU is shared, and the float64
  # references of the long tests (CudaFP8Recipe) use the host's other cores.
  echo "== runtime gpu unit tests (four shards)"
  pids=()
  for i in 0 1 2 3; do
    GTEST_TOTAL_SHARDS=4 GTEST_SHARD_INDEX=$i timeout 400 $B/moec-runtime-gpu-tests \
      --gtest_brief=1 >.device/gpu-tests-$i.txt 2>&1 &
    pids+=($!)
  done
  for i in 0 1 2 3; do
    wait "${pids[$i]}"
    rc=$?
    tail -3 .device/gpu-tests-$i.txt
    echo "gpu unit tests shard $i: rc=$rc"
    tally $rc
  done
  echo "SUMMARY with the unit tests: pass=$pass fail=$fail skip=$skip"
  if [[ ${MEMCHECK:-1} == 0 ]]; then # a short call: the checks above and the unit tests only
    echo "memcheck and bench left out (MEMCHECK=0)"
    [[ $fail -eq 0 ]]
    exit
  fi
  echo "== runtime gpu unit tests under compute-sanitizer memcheck"
  # Cuda.FailedCallsNameTheCallAndTheLine makes a failing CUDA call on purpose,
  # which memcheck would count as an error.
  timeout 300 compute-sanitizer --tool memcheck --error-exitcode 9 $B/moec-runtime-gpu-tests \
    --gtest_brief=1 --gtest_filter=-Cuda.FailedCallsNameTheCallAndTheLine 2>&1 | tail -15
  echo "sanitizer gpu unit tests rc=${PIPESTATUS[0]}"
  echo "== bench (CUDA graphs, then eager with MOEC_CUDA_GRAPHS=0)"
  for a in mixtral deepseek_v3; do
    $B/moec-run .device/art/bf16-$a --inputs $fx/$a/inputs.npz --bench 200
    $B/moec-run .device/art/$a --inputs $fx/$a/inputs.npz --bench 200
    $B/moec-run .device/art/$a --inputs $fx/$a/inputs.npz --bench 200 --on-stream
    MOEC_CUDA_GRAPHS=0 $B/moec-run .device/art/$a --inputs $fx/$a/inputs.npz --bench 200
  done
  echo "== eager runs checked too (moec_run, then moec_run_async on moec-run's stream)"
  for how in "" --on-stream; do
    MOEC_CUDA_GRAPHS=0 $B/moec-run .device/art/gpt_oss --inputs $fx/gpt_oss/inputs.npz \
      --expected-outputs $fx/gpt_oss/expected.npz --rtol 1e-5 --atol 1e-6 --scale-atol $how
  done
  echo "== compute-sanitizer memcheck"
  for a in mixtral deepseek_v3; do
    timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 $B/moec-run .device/art/$a \
      --inputs $fx/$a/inputs.npz --expected-outputs $fx/$a/expected.npz --rtol 1e-5 --atol 1e-6 \
      --scale-atol 2>&1 | tail -6
    echo "sanitizer $a rc=${PIPESTATUS[0]}"
  done
  timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 $B/moec-run .device/art/bf16-deepseek_v3 \
    --inputs $fx/deepseek_v3/inputs.npz --expected-outputs $fx/deepseek_v3/expected.npz --rtol 1e-2 \
    --atol 1e-2 --scale-atol 2>&1 | tail -4
  echo "sanitizer bf16-deepseek_v3 rc=${PIPESTATUS[0]}"
  timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 $B/moec-run .device/art/loops-loop \
    --inputs $L/loop.inputs.npz --expected-outputs $L/expected.npz --rtol 1e-5 --atol 1e-6 \
    --scale-atol 2>&1 | tail -4
  echo "sanitizer loops-loop rc=${PIPESTATUS[0]}"
  [[ $fail -eq 0 ]]
  ;;
sanitize)
  # compute-sanitizer's tools (default: memcheck racecheck synccheck initcheck) on
  # one prepared artifact per family and precision (f32, bf16, bf16out, fp8), at the
  # fixture's 7 tokens and at 1024 random tokens (CUTLASS's tiles and the larger
  # sorts run there), and on the runtime's GPU unit tests. Any report fails.
  tools=${2:-memcheck racecheck synccheck initcheck}
  prepared() { # the prepared artifact of precision $1 and family $2
    case $1 in f32) echo .device/art/$2 ;; fp8) echo .device/fp8-$2/artifact ;; *) echo .device/art/$1-$2 ;; esac
  }
  nvidia-smi -L
  pass=0 fail=0 skip=0
  python3 - <<'PY'
import numpy as np
rng = np.random.default_rng(0)
for f in ("mixtral", "qwen3_moe", "gpt_oss", "deepseek_v3"):
    inputs = np.load(f"test/fixtures/{f}/inputs.npz")
    big = {k: rng.standard_normal(v.shape[:-2] + (1024, v.shape[-1])).astype(v.dtype)
           for k, v in inputs.items()}
    np.savez(f".device/in1024-{f}.npz", **big)
PY
  # The poisoned run at 1024 tokens first (MOEC_POISON_WORKSPACE: NaN bytes in the
  # workspace, bit-identical outputs). It stands in for initcheck where CUTLASS's
  # epilogues write rows with TMA stores, which initcheck does not see: it flags
  # every read of them by combineKernel (T x k x H/4 16-byte reads) although the
  # poisoned run shows each was written. There (bf16, bf16out at 1024 tokens)
  # initcheck runs on the poisoned workspace, whose memset it counts as a write,
  # and checks everything else (inputs, weights, outputs, scratch). UNIT=0 leaves
  # the GPU unit tests out (each tool takes minutes on them).
  for f in mixtral qwen3_moe gpt_oss deepseek_v3; do
    for p in f32 bf16 bf16out fp8; do
      a=$(prepared $p $f)
      if [[ ! -d $a ]]; then skip=$((skip + 1)); continue; fi
      $B/moec-run $a --inputs .device/in1024-$f.npz --outputs .device/clean.npz &&
        MOEC_POISON_WORKSPACE=1 $B/moec-run $a --inputs .device/in1024-$f.npz \
          --expected-outputs .device/clean.npz --rtol 0 --atol 0 > .device/sanitize.log 2>&1
      rc=$?
      echo "poisoned $p-$f in1024: rc=$rc $(tail -1 .device/sanitize.log)"
      tally $rc
    done
  done
  for tool in $tools; do
    for f in mixtral qwen3_moe gpt_oss deepseek_v3; do
      for p in f32 bf16 bf16out fp8; do
        a=$(prepared $p $f)
        for in in $fx/$f/inputs.npz .device/in1024-$f.npz; do
          if [[ ! -d $a ]]; then skip=$((skip + 1)); continue; fi
          poison=0
          [[ $tool == initcheck && $in == *in1024* && $p == bf16* ]] && poison=1
          MOEC_POISON_WORKSPACE=$poison timeout 120 compute-sanitizer --tool $tool \
            --error-exitcode 9 --print-limit 5 $B/moec-run $a --inputs $in > .device/sanitize.log 2>&1
          rc=$?
          echo "$tool $p-$f $(basename $in): rc=$rc $(grep -m1 'ERROR SUMMARY' .device/sanitize.log)"
          [[ $rc -ne 0 ]] && grep -v "Host Frame" .device/sanitize.log | head -20
          tally $rc
        done
      done
    done
    [[ ${UNIT:-1} == 0 ]] && continue
    # Cuda.FailedCallsNameTheCallAndTheLine fails a CUDA call on purpose.
    timeout 400 compute-sanitizer --tool $tool --error-exitcode 9 --print-limit 5 \
      $B/moec-runtime-gpu-tests --gtest_brief=1 \
      --gtest_filter=-Cuda.FailedCallsNameTheCallAndTheLine > .device/sanitize.log 2>&1
    rc=$?
    echo "$tool gpu unit tests: rc=$rc $(grep -m1 'ERROR SUMMARY' .device/sanitize.log)"
    [[ $rc -ne 0 ]] && grep -v "Host Frame" .device/sanitize.log | tail -20
    tally $rc
  done
  echo "SANITIZE SUMMARY pass=$pass fail=$fail skip=$skip"
  [[ $fail -eq 0 ]]
  ;;
*)
  sed -n 2,10p "$0"
  exit 2
  ;;
esac
