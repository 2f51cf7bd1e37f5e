#!/usr/bin/env bash
# Usage: check-cpu-artifact.sh BIN_DIR MODEL INPUTS.npz EXPECTED.npz [moec-run flags...]
# End to end on the CPU: `moec compile MODEL --target=cpu` writes an artifact
# (generated C++ compiled to model.so, weights.bin, manifest.txt), then
# `moec-run` runs it on INPUTS.npz and compares with EXPECTED.npz (the stored
# transformers / onnxruntime / numpy output) within rtol 1e-5 and atol 1e-6
# scaled by max(1, max|expected|), the criterion of check_onnxruntime.py and
# of the pipeline tests.
set -euo pipefail
bin=$1 model=$2 inputs=$3 expected=$4
shift 4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$bin/moec" compile "$model" --target=cpu -o "$work/artifact"
"$bin/moec-run" "$work/artifact" --inputs "$inputs" --outputs "$work/out.npz" \
  --expected-outputs "$expected" --rtol 1e-5 --atol 1e-6 --scale-atol "$@"
# The same run on a workspace of NaN bytes (MOEC_POISON_WORKSPACE): bit for bit
# the same outputs, or a kernel read what nothing wrote.
MOEC_POISON_WORKSPACE=1 "$bin/moec-run" "$work/artifact" --inputs "$inputs" \
  --expected-outputs "$work/out.npz" --rtol 0 --atol 0 "$@"
