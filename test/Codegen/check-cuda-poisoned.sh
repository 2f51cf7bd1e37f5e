#!/usr/bin/env bash
# Usage: check-cuda-poisoned.sh BIN_DIR PYTHON MODEL INPUTS.npz   (ctest label `gpu`)
# No kernel reads what nothing wrote, where compute-sanitizer's initcheck cannot
# tell (CUTLASS's epilogues store rows with TMA, which it does not see): the
# artifact of MODEL (check-cuda-artifact.sh, $MOEC_COMPILE_FLAGS) run on 1024
# random tokens (INPUTS.npz's arrays widened: CUTLASS's tiles run from 32 rows
# per expert), then again on a workspace of NaN bytes, must give the same
# outputs bit for bit. Exits 77 (skipped) without nvcc or a CUDA device.
set -euo pipefail
bin=$1 python=$2 model=$3 inputs=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$python" - "$inputs" "$work/in.npz" <<'PY'
import sys
import numpy as np
rng = np.random.default_rng(0)
inputs = np.load(sys.argv[1])
np.savez(sys.argv[2], **{k: rng.standard_normal(v.shape[:-2] + (1024, v.shape[-1])).astype(v.dtype)
                         for k, v in inputs.items()})
PY
"$(dirname "$0")/check-cuda-artifact.sh" "$bin" "$model" "$work/in.npz" -
