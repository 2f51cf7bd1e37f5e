#!/usr/bin/env bash
# Usage: check-cuda-artifact.sh BIN_DIR MODEL INPUTS.npz EXPECTED.npz [moec-run flags...]
# End to end on a GPU (ctest label `gpu`): `moec compile MODEL --target=cuda`
# writes an artifact (generated code compiled with nvcc to model.so), then
# `moec-run` runs it on INPUTS.npz against EXPECTED.npz within the criterion of
# the CPU tests (check-cpu-artifact.sh). Exits 77 (skipped) where there is no
# nvcc or where no CUDA device answers.
#
# MOEC_COMPILE_FLAGS adds flags to `moec compile` (e.g. --expert-weights=bf16).
#
# With MOEC_PREBUILT_ARTIFACT=DIR the compile step is skipped and DIR is run
# (the artifacts compiled on a machine with MLIR, run on one with a GPU).
# EXPECTED `-` skips the comparison with a reference: only the poisoned-workspace
# run below must agree with the first, bit for bit.
set -euo pipefail
bin=$1 model=$2 inputs=$3 expected=$4
shift 4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
artifact=${MOEC_PREBUILT_ARTIFACT:-$work/artifact}
if [[ -z ${MOEC_PREBUILT_ARTIFACT:-} ]]; then
  # shellcheck disable=SC2086 # the flags are words
  if ! "$bin/moec" compile "$model" --target=cuda ${MOEC_COMPILE_FLAGS:-} -o "$artifact" \
    2>"$work/compile.err"; then
    cat "$work/compile.err" >&2
    if grep -q "needs CUDA's compiler\|built without CUDA" "$work/compile.err"; then
      echo "skipped: no nvcc" >&2
      exit 77
    fi
    exit 1
  fi
fi
reference=(--expected-outputs "$expected" --rtol 1e-5 --atol 1e-6 --scale-atol "$@")
[[ $expected == - ]] && reference=("$@")
set +e
"$bin/moec-run" "$artifact" --inputs "$inputs" --outputs "$work/out.npz" "${reference[@]}" \
  2>"$work/run.err"
rc=$?
set -e
cat "$work/run.err" >&2
if [[ $rc -ne 0 ]] && grep -q "no CUDA device answers" "$work/run.err"; then
  echo "skipped: no CUDA device" >&2
  exit 77
fi
[[ $rc -ne 0 ]] && exit $rc
# The same run on a workspace of NaN bytes (MOEC_POISON_WORKSPACE): bit for bit
# the same outputs, or a kernel read what nothing wrote.
MOEC_POISON_WORKSPACE=1 "$bin/moec-run" "$artifact" --inputs "$inputs" \
  --expected-outputs "$work/out.npz" --rtol 0 --atol 0 "$@"
