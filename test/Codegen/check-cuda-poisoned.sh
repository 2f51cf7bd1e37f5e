#!/usr/bin/env bash
# Usage: check-cuda-poisoned.sh BIN_DIR PYTHON MODEL INPUTS.npz   (ctest label `gpu`)
# No kernel reads what nothing wrote, where compute-sanitizer's initcheck cannot
# tell (CUTLASS's epilogues store rows with TMA, which it does not see):
# `moec compile MODEL --target=cuda $MOEC_COMPILE_FLAGS`, then the artifact run
# on 1024 random tokens (INPUTS.npz's arrays widened: CUTLASS's tiles run from
# 32 rows per expert) twice, the second time on a workspace of NaN bytes
# (MOEC_POISON_WORKSPACE=1); the outputs must be identical bit for bit. Exits
# 77 (skipped) without nvcc or a CUDA device.
set -euo pipefail
bin=$1 python=$2 model=$3 inputs=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# shellcheck disable=SC2086 # the flags are words
if ! "$bin/moec" compile "$model" --target=cuda ${MOEC_COMPILE_FLAGS:-} -o "$work/artifact" \
  2>"$work/compile.err"; then
  cat "$work/compile.err" >&2
  grep -q "needs CUDA's compiler\|built without CUDA" "$work/compile.err" && exit 77
  exit 1
fi
"$python" - "$inputs" "$work/in.npz" <<'PY'
import sys
import numpy as np
rng = np.random.default_rng(0)
inputs = np.load(sys.argv[1])
np.savez(sys.argv[2], **{k: rng.standard_normal(v.shape[:-2] + (1024, v.shape[-1])).astype(v.dtype)
                         for k, v in inputs.items()})
PY
set +e
"$bin/moec-run" "$work/artifact" --inputs "$work/in.npz" --outputs "$work/clean.npz" 2>"$work/run.err"
rc=$?
set -e
cat "$work/run.err" >&2
if [[ $rc -ne 0 ]]; then
  grep -q "no CUDA device answers" "$work/run.err" && exit 77
  exit $rc
fi
MOEC_POISON_WORKSPACE=1 "$bin/moec-run" "$work/artifact" --inputs "$work/in.npz" \
  --expected-outputs "$work/clean.npz" --rtol 0 --atol 0
