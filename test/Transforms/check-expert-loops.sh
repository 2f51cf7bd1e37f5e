#!/usr/bin/env bash
# Usage: check-expert-loops.sh BIN_DIR CASE_DIR FORM STAGE
# Runs the hand-written expert-loop case CASE_DIR/FORM.mlir (written by
# scripts/fixtures/make_expert_loop_cases.py) at one STAGE and checks with the
# reference interpreter that it still produces CASE_DIR/expected.npz, the
# float64 numpy reference, within check_onnxruntime.py's criterion:
#   input     the hand-written form as it is;
#   raise     after moe-raise-expert-loops, which must leave one moe.layer and
#             no loop or linalg op;
#   lower     after moe-raise-expert-loops and moe-lower-layer (the sorted
#             grouped-GEMM pipeline, no moe.layer left);
#   pipeline  after `moec compile --compile-to=grouped` (the whole pipeline).
set -euo pipefail
bin=$1 dir=$2 form=$3 stage=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
input="$dir/$form.mlir"
program="$work/$stage.mlir"

fail() {
  echo "FAIL ($form, $stage): $*" >&2
  exit 1
}
expect() { grep -q -- "$1" "$program" || fail "no '$1' in the result"; }
reject() { if grep -q -- "$1" "$program"; then fail "'$1' left in the result"; fi; }

case "$stage" in
  input)
    cp "$input" "$program" ;;
  raise)
    "$bin/moec-opt" "$input" -moe-raise-expert-loops -o "$program"
    [ "$(grep -c 'moe.layer' "$program")" = 1 ] || fail "expected exactly one moe.layer"
    expect 'expert_ids('
    expect 'expert_weights('
    reject 'scf.for'
    reject 'linalg.' ;;
  lower | pipeline)
    if [ "$stage" = lower ]; then
      "$bin/moec-opt" "$input" -moe-raise-expert-loops -moe-lower-layer -o "$program"
    else
      "$bin/moec" compile "$input" --compile-to=grouped -o "$program"
    fi
    expect 'moe.sort'
    expect 'moe.combine'
    reject 'moe.layer'
    reject 'moe.route'
    reject 'scf.for'
    reject 'linalg.' ;;
  *)
    fail "unknown stage (input, raise, lower, pipeline)" ;;
esac
"$bin/moec-interp" "$program" --inputs "$dir/$form.inputs.npz" \
  --expected-outputs "$dir/expected.npz" --rtol 1e-5 --atol 1e-6 --scale-atol
