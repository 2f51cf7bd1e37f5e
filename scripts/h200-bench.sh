#!/usr/bin/env bash
# Usage: scripts/h200-bench.sh prepare          (here: MLIR build tree + nvcc, no GPU)
#        scripts/h200-bench.sh STEP [MODELS]    (on the GPU machine, results under $OUT)
#
# The performance steps of a device session (docs/performance.md), each sized
# to fit one device call (10 minutes, at most 8 result files):
#   prepare  the four bench shapes compiled with --expert-weights=bf16 into
#            .device/bench (bench/prepare.sh; --fp8 ones too), the GPU unit tests
#            and the benchmarks into .device/bin. Carry .device (about 36 MiB).
#   tests    the runtime's GPU unit tests; stops the session's script on failure.
#   bench    bench/bench_moe.py, the same-run table (T = 1..8192) of MODELS (default
#            all four), weights kept, max-autotune from T = 1024: two models a call
#            (BENCH_LIMIT seconds, default 540). The artifacts are
#            --expert-outputs=bf16 ones (art-bf16out) unless ART=art-bf16
#            (prepare builds both). COMPILED overrides bench_moe.py's --compiled
#            (e.g. grouped_mm:max-autotune-no-cudagraphs,grouped_mm:max-autotune).
#            Inductor's cache comes back as inductor-cache.tar.xz and is read
#            from .payload/ when there.
#   load     bench/load_weights.py on gpt-oss-120b and DeepSeek-V3 (after bench,
#            whose weights.bin it reads).
#   fp8      bench/bench_moe.py with the --fp8 artifacts beside the bf16 ones
#            (MODELS: default all four; one or two per call at T = 8192).
#   lowp     bench/bench_moe.py, moec only: the bf16 artifacts beside the --fp8 and
#            the --expert-weights=mxfp4 ones, all three with --expert-outputs=bf16
#            (MODELS: default all four; TOKENS),
#            no transformers configuration (IMPLS= to add eager backends).
#   ncu      one profiled moec call per cell of MODELS (default all four; two
#            models fit one call; TOKENS as for bench) -> ncu.csv, ncu.md
#            (bench/ncu_summary.py). FP8=1: each cell's --fp8 build too (MODEL-fp8);
#            MXFP4=1: its --expert-weights=mxfp4 build (MODEL-mxfp4).
#            Clocks are left alone (--clock-control none).
#   profile  moec's in-graph timeline per cell of MODELS (TOKENS, default 1024):
#            kernels, lengths and gaps in a timed run -> timelines.txt.
#   upload   bench/upload.cpp on a 6.4 GB file in the page cache.
#   cutlass  moec-bench-cutlass-configs: CUTLASS's grouped GEMM alone, weights
#            K- or N-major, bf16 or f32 results, with or without clusters.
#   kernels  moec-bench-grouped-matmul: every tile (mma.sync, the CUTLASS
#            configurations, FP8) at the four shapes, T = 1..8192 (or MODELS as
#            a token list, e.g. 1024,8192).
#   prepare-branches BRANCH...   (here, on a clean tree) the GPU unit tests and
#            the kernel bench of each branch into .device/branches/N (N = 1, 2,
#            ...; about 9 MB each), so that one device call checks several
#            unmerged branches; the checkout returns where it was.
#   branch-tests [TOKENS]   (there) each prepared branch's GPU unit tests, and
#            with TOKENS (e.g. 1024,8192) its kernel bench too.
#   pack NAME   (here, after prepare) .device/bench's artifacts and libmoec.so
#            as .device/pack/NAME.tar.gz (about 10 MB): one per build to compare.
#            Its art-bf16/ holds the table's build (ART, as for bench).
#   ab LABEL=PACK.tar.gz LABEL=PACK.tar.gz ...   (there) an A/B of packs in one
#            process (bench/ab_moe.py: calls interleaved round by round, the
#            first pack's median ratio to each other's with quartiles; bf16, and
#            FP8 where packed) -> ab.txt, ab_moe.json; then the first pack's
#            in-graph timelines at T = 1 (--profile; PROFILE=0 skips) ->
#            timelines.txt. MODELS (default all four), TOKENS (1,16,128) and
#            ROUNDS (60) from the environment.
# Example (one device call): scripts/h200-bench.sh tests && scripts/h200-bench.sh bench
set -uo pipefail
cd "$(dirname "$0")/.."
models=qwen3moe-30b-a3b,mixtral-8x7b,gpt-oss-120b,deepseek-v3
# The table's build: bf16 expert weights and outputs; ART=art-bf16 for f32 outputs.
art=.device/bench/${ART:-art-bf16out} lib=.device/bench/libmoec.so
case ${1:-} in
prepare)
  set -e
  build=${BUILD_DIR:-build}
  EXPERT_WEIGHTS=bf16 bench/prepare.sh $models 8192
  EXPERT_WEIGHTS=bf16 EXPERT_OUTPUTS=bf16 bench/prepare.sh $models 8192
  FP8=1 EXPERT_OUTPUTS=bf16 bench/prepare.sh $models 8192
  MXFP4=1 EXPERT_OUTPUTS=bf16 bench/prepare.sh $models 8192
  mkdir -p .device/bin
  cp "$build/runtime/test/moec-runtime-gpu-tests" "$build/bench/moec-bench-upload" \
    "$build/bench/moec-bench-grouped-matmul" .device/bin/
  # The CUTLASS probe (bench/cutlass_configs.cu) is not built by default.
  if cmake --build "$build" --target moec-bench-cutlass-configs >/dev/null 2>&1; then
    cp "$build/bench/moec-bench-cutlass-configs" .device/bin/
  fi
  du -sh .device
  ;;
tests)
  .device/bin/moec-runtime-gpu-tests >"$OUT/gpu-tests.txt" 2>&1
  rc=$?
  grep -E "FAILED|PASSED|Failure" -A3 "$OUT/gpu-tests.txt" | head -20
  exit $rc
  ;;
bench)
  # Inductor's cache travels between calls: a max-autotune cell compiled in 30-170 s
  # cold and in 1-16 s warm. A call leaves $OUT/inductor-cache.tar.xz; put it
  # in .payload/ (carried) and the next call starts from it.
  cache=/tmp/moec-inductor-cache
  mkdir -p $cache
  [[ -f .payload/inductor-cache.tar.xz ]] && tar -xJf .payload/inductor-cache.tar.xz -C $cache
  TORCHINDUCTOR_CACHE_DIR=$cache timeout "${BENCH_LIMIT:-540}" python3 bench/bench_moe.py \
    --artifacts $art --lib $lib --models "${2:-$models}" --tokens "${TOKENS:-1,16,128,1024,8192}" \
    ${COMPILED+--compiled "$COMPILED"} --rtol 1e-2 --keep-weights >"$OUT/bench.log" 2>&1
  echo "bench rc=$?"
  tar -C $cache -cf - . | xz -T0 -6 >"$OUT/inductor-cache.tar.xz"
  if (($(stat -c %s "$OUT/inductor-cache.tar.xz") > 15 * 1024 * 1024)); then
    # Too large to come back: without triton's kernels (rebuilt from the graphs' source).
    tar -C $cache --exclude=./triton -cf - . | xz -T0 -6 >"$OUT/inductor-cache.tar.xz"
  fi
  du -sh $cache "$OUT/inductor-cache.tar.xz"
  sed -n '/grouped_mm+CG/,$p' "$OUT/bench_moe.md"
  ;;
load)
  for m in gpt-oss-120b deepseek-v3; do
    [[ -f $art/$m/weights.bin ]] && timeout 60 python3 bench/load_weights.py $art/$m $lib
  done 2>&1 | tee "$OUT/load.txt"
  ;;
fp8)
  timeout 540 python3 bench/bench_moe.py --artifacts $art --lib $lib --fp8-artifacts .device/bench/art-fp8 \
    --models "${2:-$models}" --tokens 1,16,128,1024,8192 --rtol 1e-2 --compiled "" \
    >"$OUT/bench.log" 2>&1
  echo "bench rc=$?"
  grep -E "^\| " "$OUT/bench_moe.md" | head -24
  ;;
lowp)
  timeout "${BENCH_LIMIT:-540}" python3 bench/bench_moe.py --artifacts $art --lib $lib \
    --fp8-artifacts .device/bench/art-fp8 --mxfp4-artifacts .device/bench/art-mxfp4 \
    --models "${2:-$models}" --tokens "${TOKENS:-1,16,128,1024,8192}" --rtol 1e-2 \
    --impls "${IMPLS-}" --compiled "" --interleave 0 --target-s "${TARGET_S:-0.3}" \
    >"$OUT/lowp.log" 2>&1
  echo "lowp rc=$?"
  awk '/low-precision/ {f = 1} f && /^\|/ {print; t = 1} f && t && /^$/ {exit}' "$OUT/bench_moe.md"
  ;;
ncu)
  # bench_moe.py writes its (empty) tables under $OUT too: elsewhere, to keep
  # the files that come back few.
  mkdir -p /tmp/moec-ncu-out
  env OUT=/tmp/moec-ncu-out timeout "${NCU_LIMIT:-500}" /usr/local/cuda/bin/ncu --profile-from-start off --clock-control none \
    --csv --page details --log-file "$OUT/ncu.csv" --metrics \
    gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread \
    python3 bench/bench_moe.py --ncu --artifacts $art --lib $lib --models "${2:-$models}" \
    ${FP8:+--fp8-artifacts .device/bench/art-fp8} ${MXFP4:+--mxfp4-artifacts .device/bench/art-mxfp4} \
    --tokens "${TOKENS:-1,16,128,1024,8192}" >"$OUT/ncu-bench.log" 2>&1
  echo "ncu rc=$?"
  python3 bench/ncu_summary.py "$OUT/ncu.csv" "$OUT/ncu-bench.log" >"$OUT/ncu.md"
  grep -c "^### " "$OUT/ncu.md"
  ;;
profile)
  # moec alone (no transformers configuration timed), its in-graph timeline per cell of
  # MODELS at TOKENS (default 1024): each kernel's start, length and the gap before it,
  # on the clock of a timed run (ncu runs each kernel alone, at its own clock).
  timeout "${BENCH_LIMIT:-300}" python3 bench/bench_moe.py --artifacts $art --lib $lib \
    --models "${2:-$models}" --tokens "${TOKENS:-1024}" --rtol 1e-2 --compiled "" --interleave 0 \
    --target-s 0.2 --profile >"$OUT/profile-bench.log" 2>&1
  echo "profile rc=$?"
  python3 bench/ab_summary.py --timelines "$OUT/profile.txt" >"$OUT/timelines.txt"
  grep -E "^(==|span)" "$OUT/timelines.txt"
  ;;
upload)
  dd if=/dev/zero of=/tmp/moec-upload.bin bs=64M count=96 status=none
  cat /tmp/moec-upload.bin >/dev/null # into the page cache
  timeout 200 .device/bin/moec-bench-upload /tmp/moec-upload.bin 16 | tee "$OUT/upload.txt"
  rm -f /tmp/moec-upload.bin
  ;;
kernels)
  timeout 540 .device/bin/moec-bench-grouped-matmul ${2:+"$2"} | tee "$OUT/kernels.txt"
  ;;
cutlass)
  timeout 200 .device/bin/moec-bench-cutlass-configs | tee "$OUT/cutlass-configs.txt"
  ;;
prepare-branches)
  set -e
  build=${BUILD_DIR:-build}
  if ! git diff --quiet || ! git diff --cached --quiet; then
    echo "prepare-branches: commit or stash first (it checks branches out)" >&2
    exit 2
  fi
  start=$(git symbolic-ref -q --short HEAD || git rev-parse HEAD)
  rm -rf .device/branches
  i=0
  for branch in "${@:2}"; do
    i=$((i + 1))
    git checkout -q "$branch"
    cmake --build "$build" --target moec-runtime-gpu-tests moec-bench-grouped-matmul >/dev/null
    mkdir -p .device/branches/$i
    cp "$build/runtime/test/moec-runtime-gpu-tests" "$build/bench/moec-bench-grouped-matmul" \
      .device/branches/$i/
    echo "$branch $(git rev-parse --short HEAD)" >.device/branches/$i/BRANCH
  done
  git checkout -q "$start"
  cmake --build "$build" >/dev/null
  cat .device/branches/*/BRANCH
  du -sh .device
  ;;
branch-tests)
  rc=0
  for dir in .device/branches/*/; do
    i=$(basename "$dir")
    echo "== $(cat "$dir/BRANCH")" | tee -a "$OUT/branches.txt"
    "$dir/moec-runtime-gpu-tests" >"$OUT/tests-$i.txt" 2>&1 || rc=1
    grep -E "^\[  (PASSED|FAILED) " "$OUT/tests-$i.txt" | tee -a "$OUT/branches.txt"
    if [[ -n ${2:-} ]]; then
      timeout 200 "$dir/moec-bench-grouped-matmul" "$2" >"$OUT/kernels-$i.txt" 2>&1
    fi
  done
  exit $rc
  ;;
pack)
  [[ -n ${2:-} ]] || { echo "pack: a NAME" >&2; exit 2; }
  mkdir -p .device/pack
  # The pack's art-bf16/ (what bench/ab_moe.py reads) is the table's build, $art:
  # --expert-outputs=bf16 (ART=art-bf16 for f32 outputs).
  tar -czf ".device/pack/$2.tar.gz" -C .device/bench --transform "s,^${art##*/},art-bf16," \
    "${art##*/}" art-fp8 libmoec.so
  ls -la ".device/pack/$2.tar.gz"
  ;;
ab)
  # bench/ab_moe.py: every pack loaded in one process, calls interleaved round by round.
  shift
  (($# >= 2)) || { echo "ab: LABEL=PACK.tar.gz LABEL=PACK.tar.gz ... (MODELS, TOKENS, ROUNDS from the environment)" >&2; exit 2; }
  rm -rf /tmp/ab && mkdir -p /tmp/ab
  packs=()
  for spec in "$@"; do
    label=${spec%%=*} pack=${spec#*=}
    mkdir -p "/tmp/ab/$label" && tar -xzf "$pack" -C "/tmp/ab/$label" || exit 1
    packs+=("$label=/tmp/ab/$label")
  done
  OUT=$OUT timeout 480 python3 bench/ab_moe.py "${packs[@]}" --models "${MODELS:-$models}" \
    --tokens "${TOKENS:-1,16,128}" --rounds "${ROUNDS:-60}" 2>"$OUT/ab-stderr.txt" | tee "$OUT/ab.txt"
  echo "ab rc=${PIPESTATUS[0]}"
  [[ ${PROFILE:-1} == 0 ]] && exit 0
  first=${packs[0]#*=}
  mkdir -p /tmp/ab/out-profile
  OUT=/tmp/ab/out-profile timeout 120 python3 bench/bench_moe.py --artifacts "$first/art-bf16" \
    --lib "$first/libmoec.so" --models "${MODELS:-$models}" --tokens 1 --rtol 1e-2 --compiled "" \
    --target-s 0.2 --profile >/tmp/ab/out-profile/log.txt 2>&1
  echo "profile rc=$?"
  python3 bench/ab_summary.py --timelines /tmp/ab/out-profile/profile.txt >"$OUT/timelines.txt"
  grep -c "^span" "$OUT/timelines.txt"
  ;;
*)
  sed -n '2,/^# Example/p' "$0"
  exit 2
  ;;
esac
