#!/usr/bin/env bash
# The README's main command: sets up, builds, and runs moec on example MoE blocks:
#  1. compiles examples/mixtral-block.mlir (written in the moe dialect) to the
#     grouped phase, split over 2 expert-parallel ranks (rank 0 shown);
#  2. compiles a real transformers Mixtral block exported to ONNX
#     (test/fixtures/mixtral/model.onnx) to the grouped phase;
#  3. runs that compiled model in the float64 reference interpreter on the stored
#     inputs and checks it against transformers' stored output;
#  4. compiles the same model ahead of time for the CPU (`--target=cpu`: generated
#     C++ calling the runtime's CPU kernels, compiled to an artifact directory
#     with model.so, weights.bin and manifest.txt; docs/artifact.md) and runs the
#     artifact with moec-run against transformers' output, with a short benchmark.
#  5. compiles a whole model, a tiny random Qwen3-MoE checkpoint made with
#     transformers (config.json + model.safetensors), for the CPU with a KV
#     cache for 2 sequences and generates 16 tokens after each of 2 prompts,
#     checked against transformers' own generate.
# The CUDA target (the GPU machine) follows.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${MOEC_BUILD_DIR:-$root/build}
"$root/scripts/setup.sh"
"$root/scripts/build.sh" >/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "== examples/mixtral-block.mlir, grouped phase, expert-parallel rank 0 of 2"
"$build/bin/moec" compile "$root/examples/mixtral-block.mlir" --ep-size=2 --ep-rank=0

fixture="$root/test/fixtures/mixtral"
echo "== test/fixtures/mixtral/model.onnx (transformers MixtralSparseMoeBlock), grouped phase"
"$build/bin/moec" compile "$fixture/model.onnx" --compile-to=grouped -o "$work/mixtral.mlir"
grep -E "moe\.|func\.func" "$work/mixtral.mlir"

echo "== running it (reference interpreter) against transformers' output"
"$build/bin/moec-interp" "$work/mixtral.mlir" --inputs "$fixture/inputs.npz" \
  --outputs "$work/outputs.npz" --expected-outputs "$fixture/expected.npz" \
  --rtol 1e-5 --atol 1e-6 --scale-atol

echo "== compiling it ahead of time for the CPU (--target=cpu) and running the artifact"
"$build/bin/moec" compile "$fixture/model.onnx" --target=cpu -o "$work/mixtral.cpu"
ls "$work/mixtral.cpu"
"$build/bin/moec-run" "$work/mixtral.cpu" --inputs "$fixture/inputs.npz" \
  --outputs "$work/cpu-outputs.npz" --expected-outputs "$fixture/expected.npz" \
  --rtol 1e-5 --atol 1e-6 --scale-atol --bench 100

model="$root/test/fixtures/models/qwen3_moe"
echo "== a whole model: test/fixtures/models/qwen3_moe/checkpoint (Hugging Face checkpoint)"
"$build/bin/moec" compile "$model/checkpoint" --target=cpu --max-batch=2 --max-seq=64 \
  -o "$work/qwen3.cpu"
echo "== generating 16 tokens after each of 2 prompts, against transformers' generate"
"$build/bin/moec-run" "$work/qwen3.cpu" --inputs "$model/prompt.npz" --generate 16 \
  --outputs "$work/sequences.npz" --expected-outputs "$model/generate.npz" --rtol 0 --atol 0
