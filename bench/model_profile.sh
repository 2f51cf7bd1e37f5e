#!/usr/bin/env bash
# Where a whole model's steps go, for several cells in one device call.
#
#   bench/model_profile.sh MODEL:B:P ...      there (a GPU machine with ncu; the
#                                              .device/real artifacts of
#                                              bench/model_generate.sh prepare)
#
# For each cell, ncu times every kernel of one generation (a prefill of B prompts
# of P tokens, then one decode step: bench/model_profile.py run --new 2) and
# model_profile.py summarises the prefill (step 0) and the decode step (step 1).
# Results: one archive, $OUT/profiles.tar.xz (or bench/results/profile/), of
# p/NAME.csv, p/NAME-prefill.md, p/NAME-decode.md, rewritten after each cell: a
# cell that runs out of time loses only itself, and $OUT holds one file (the
# device returns at most 8). METRICS picks ncu's metrics: "time" (default: gpu__time_duration,
# one pass) or "bytes" (adds dram__bytes_read/write: each kernel's traffic, at a
# replay per kernel, several times slower); CELL_TIMEOUT bounds each cell's ncu
# run (default 150 s).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-bench/results/profile}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out" "$work/p"
[ -d .device/real ] || tar -C .device -xJf .device/real.tar.xz || exit 1
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
[ -n "$ncu" ] || { echo "model_profile.sh: no ncu here" >&2; exit 1; }
metrics=gpu__time_duration.sum
[ "${METRICS:-time}" = bytes ] && metrics=$metrics,dram__bytes_read.sum,dram__bytes_write.sum
status=0
for cell in "$@"; do
  IFS=: read -r model batch prompt <<<"$cell"
  name=$model-b$batch-p$prompt
  echo "== $name ($(date +%T))"
  timeout "${CELL_TIMEOUT:-150}" "$ncu" --clock-control none --csv --page raw --print-units base \
    --metrics "$metrics" --log-file "$work/p/$name.csv" \
    python3 bench/model_profile.py run .device/real/bin/libmoec.so ".device/real/$model" \
    --batch "$batch" --prompt "$prompt" --new 2 >"$work/p/$name.log" 2>&1
  rc=$?
  [ $rc -eq 0 ] || { echo "ncu rc=$rc"; status=1; }
  python3 bench/model_profile.py summary "$work/p/$name.csv" --step 0 >"$work/p/$name-prefill.md" 2>&1
  python3 bench/model_profile.py summary "$work/p/$name.csv" --step -1 >"$work/p/$name-decode.md" 2>&1
  head -12 "$work/p/$name-decode.md" | cut -c1-160
  tar -C "$work" -cJf "$work/profiles.tar.xz" p && mv "$work/profiles.tar.xz" "$out/profiles.tar.xz"
done
exit $status
