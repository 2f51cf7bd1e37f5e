#!/usr/bin/env bash
# Usage: scripts/ep-gpu.sh prepare [DEST]   here (MLIR build tree, nvcc; no GPU)
#        bash DEST/run.sh                    there (a GPU machine without MLIR), from
#                                            the repository's root, $OUT set
#
# Expert parallelism on GPUs without MLIR on the GPU machine. `prepare` builds a
# static moec-run (libstdc++, zlib and cudart inside; NCCL is opened at run
# time), the NCCL communicator's GPU unit tests, and the artifacts of
# test/Codegen/check-cuda-ep.sh for a group of one and of two, and packs them
# with that script into DEST/ep.tar.xz (DEST default: .dev-epgpu, which
# .git/info/exclude must ignore); DEST/run.sh is a copy of this script.
#
# `run` (the default) unpacks DEST/ep.tar.xz and checks, printing PASS, FAIL or
# SKIP per check and logging everything to $OUT/ep-gpu.log (one file):
#   nccl-unit   moec-runtime-nccl-tests (one rank, set-up failures; sums across
#               devices with two GPUs)
#   nccl-found  which NCCL a rank opens without MOEC_NCCL_LIBRARY, and on which GPU
#   ep1         check-cuda-ep.sh with one rank: moec-run --ep 1 through NCCL gives the
#               plain one-GPU artifacts' outputs bit for bit (blocks, a whole model's
#               logits and generations, f32 and bf16, graphs, eager, on a stream)
#   ep2         the same on two GPUs within 1e-5 (f32) / 1e-2 (bf16); SKIP with fewer
#   no-nccl     MOEC_NCCL_LIBRARY naming no file: every rank ends with that error
# and ends with `EP-GPU SUMMARY pass=P fail=F skip=S` (exit status 0 when F=0).
set -uo pipefail
mode=${1:-run}
build=${BUILD_DIR:-build}

case $mode in
prepare)
  set -e
  dest=${2:-.dev-epgpu}
  cuda=${CUDA_HOME:-/usr/local/cuda}
  stage=$(mktemp -d)
  trap 'rm -rf "$stage"' EXIT
  ep=$stage/ep
  mkdir -p "$ep/bin" "$dest"
  # As scripts/gpu-prebuilt.sh's static_tools builds moec-run.
  g++ -O2 -std=c++20 -DMOEC_RUN_WITH_CUDA tools/moec-run/moec-run.cpp tools/moec-run/StreamRun.cpp \
    tools/moec-run/ModelRun.cpp tools/moec-run/ExpertParallel.cpp -Iruntime/include \
    -I"$cuda/include" "$build/lib/libmoec_dist.a" "$build/lib/libmoec_runtime.a" \
    "$build/lib/libmoec_tooling.a" /usr/lib/x86_64-linux-gnu/libz.a "$cuda/lib64/libcudart_static.a" \
    -static-libstdc++ -static-libgcc -ldl -lrt -pthread -o "$ep/bin/moec-run"
  cp "$build/runtime/test/moec-runtime-nccl-tests" "$ep/bin/"
  cp test/Codegen/check-cuda-ep.sh "$ep/"
  test/Codegen/check-cuda-ep.sh "$build/bin" 1 prepare "$ep/art1"
  test/Codegen/check-cuda-ep.sh "$build/bin" 2 prepare "$ep/art2"
  # The plain artifacts are the same for both groups: art2 links art1's.
  for plain in "$ep"/art2/*-plain; do
    rm -rf "$plain"
    ln -s "../art1/$(basename "$plain")" "$plain"
  done
  rm -f "$ep"/art*/compile.err
  tar -cJf "$dest/ep.tar.xz" -C "$stage" ep
  cp "$0" "$dest/run.sh"
  du -sh "$dest/ep.tar.xz"
  ;;
run)
  here=$(cd "$(dirname "$0")" && pwd)
  log=${OUT:-/tmp}/ep-gpu.log
  bash "$0" checks 2>&1 | tee "$log"
  exit "${PIPESTATUS[0]}"
  ;;
checks)
  here=$(cd "$(dirname "$0")" && pwd)
  pass=0 fail=0 skip=0
  tally() { # NAME RC: 0 pass, 77 skip, else fail
    case $2 in
    0) echo "PASS: $1"; pass=$((pass + 1)) ;;
    77) echo "SKIP: $1"; skip=$((skip + 1)) ;;
    *) echo "FAIL: $1 (rc=$2)"; fail=$((fail + 1)) ;;
    esac
  }
  nvidia-smi -L 2>&1 || echo "(no nvidia-smi)"
  rm -rf "$here/ep"
  tar -xJf "$here/ep.tar.xz" -C "$here" || { echo "FAIL: cannot unpack $here/ep.tar.xz"; exit 1; }
  ep=$here/ep B=$here/ep/bin
  export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0} MOEC_DIST_TIMEOUT=${MOEC_DIST_TIMEOUT:-30}
  export MOEC_FIXTURES=${MOEC_FIXTURES:-$PWD/test/fixtures}
  unset MOEC_NCCL_LIBRARY

  echo "== nccl-unit: the NCCL communicator's GPU tests"
  timeout 90 "$B/moec-runtime-nccl-tests" --gtest_brief=1
  tally nccl-unit $?

  echo "== nccl-found: which NCCL a rank opens, on which GPU (MOEC_DIST_VERBOSE=1)"
  if nvidia-smi -L >/dev/null 2>&1; then
    MOEC_DIST_VERBOSE=1 timeout 60 "$B/moec-run" "$ep/art1/ds-ep" --ep 1 \
      --inputs "$MOEC_FIXTURES/deepseek_v3/inputs.npz" 2>&1 | grep -v "^output"
    tally nccl-found "${PIPESTATUS[0]}"
  else
    tally nccl-found 77
  fi

  for ranks in 1 2; do
    echo "== ep$ranks: check-cuda-ep.sh, $ranks rank(s) on $ranks GPU(s) against one GPU"
    timeout 150 "$ep/check-cuda-ep.sh" "$B" $ranks run "$ep/art$ranks"
    tally ep$ranks $?
  done

  echo "== no-nccl: MOEC_NCCL_LIBRARY naming no file is each rank's clear error"
  if nvidia-smi -L >/dev/null 2>&1; then
    MOEC_NCCL_LIBRARY=/nonexistent/libnccl.so.2 timeout 60 "$B/moec-run" "$ep/art1/ds-ep" --ep 1 \
      --inputs "$MOEC_FIXTURES/deepseek_v3/inputs.npz" >"$here/no-nccl.txt" 2>&1
    rc=$?
    cat "$here/no-nccl.txt"
    [[ $rc -eq 2 ]] && grep -q "cannot load NCCL from MOEC_NCCL_LIBRARY=/nonexistent" \
      "$here/no-nccl.txt"
    tally no-nccl $?
  else
    tally no-nccl 77
  fi
  echo "EP-GPU SUMMARY pass=$pass fail=$fail skip=$skip"
  [[ $fail -eq 0 ]]
  ;;
*)
  sed -n 2,5p "$0"
  exit 2
  ;;
esac
