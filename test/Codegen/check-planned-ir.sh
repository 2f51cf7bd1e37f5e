#!/usr/bin/env bash
# Usage: check-planned-ir.sh BIN_DIR TARGET TOL MODEL INPUTS.npz EXPECTED.npz [COMPILE FLAGS...]
# A target's planned IR (`moec compile MODEL --target=TARGET --emit=mlir`, the
# IR its printer prints as source: storage types, legalised views, streams) run
# by the reference interpreter against EXPECTED.npz within TOL (relative and
# absolute, the latter scaled by max(1, max |expected|)). EXPECTED.npz `cast`
# compares with the interpreter's output of the same model compiled without a
# target with $MOEC_CAST_FLAGS instead (the FP8 or MXFP4 cast the plan stores).
# Needs neither nvcc nor a GPU: it checks the codegen policy, not the kernels.
set -euo pipefail
bin=$1 target=$2 tol=$3 model=$4 inputs=$5 expected=$6
shift 6
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [[ $expected == cast ]]; then
  # shellcheck disable=SC2086 # the flags are words
  "$bin/moec" compile "$model" ${MOEC_CAST_FLAGS:?names the cast} -o "$work/cast.mlir"
  "$bin/moec-interp" "$work/cast.mlir" --inputs "$inputs" --outputs "$work/cast.npz"
  expected=$work/cast.npz
fi
"$bin/moec" compile "$model" --target="$target" "$@" --emit=mlir -o "$work/planned.mlir"
"$bin/moec-interp" "$work/planned.mlir" --inputs "$inputs" --expected-outputs "$expected" \
  --rtol "$tol" --atol "$tol" --scale-atol
