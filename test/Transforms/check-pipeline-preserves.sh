#!/usr/bin/env bash
# Usage: check-pipeline-preserves.sh BIN_DIR FIXTURE_DIR PASSES...
# Imports FIXTURE_DIR/model.onnx, runs moec-opt with PASSES, and checks with the
# reference interpreter that the result still produces FIXTURE_DIR/expected.npz
# (transformers' or numpy's output) within check_onnxruntime.py's criterion.
set -euo pipefail
bin=$1 fixture=$2
shift 2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$bin/moec-translate" --import-onnx "$fixture/model.onnx" -o "$work/imported.mlir"
"$bin/moec-opt" "$work/imported.mlir" "$@" -o "$work/transformed.mlir"
# The passes must have done their work: no per-token weight gather may remain.
if grep -q '"onnx.GatherND"' "$work/transformed.mlir"; then
  echo "FAIL: onnx.GatherND left after $*" >&2
  exit 1
fi
"$bin/moec-interp" "$work/transformed.mlir" --inputs "$fixture/inputs.npz" \
  --expected-outputs "$fixture/expected.npz" --rtol 1e-5 --atol 1e-6 --scale-atol
