// REQUIRES: cuda-build
// An artifact for every rank of a group of one and of two, compiled with
// nvcc (no GPU needed): the manifest names the group, the experts' weights
// are shards (each rank's fill picks its slice). Running them is
// test/Codegen/check-cuda-ep.sh's (ctest e2e.cuda.expert-parallel.*, GPU).

// RUN: rm -rf %t && mkdir -p %t
// RUN: moec compile %fixtures/mixtral/model.onnx --ep-size=1 --target=cuda -o %t/one
// RUN: FileCheck %s --check-prefix=ONE < %t/one/manifest.txt
// ONE: target cuda
// ONE: expert_parallel 1
// ONE: weight experts.gate_up_proj f32 [8,80,64] {{.*}} shard
// ONE: weight experts.down_proj f32 [8,64,40] {{.*}} shard
// RUN: moec compile %fixtures/mixtral/model.onnx --ep-size=2 --expert-weights=bf16 --target=cuda -o %t/two
// RUN: FileCheck %s --check-prefix=TWO < %t/two/manifest.txt
// TWO: expert_parallel 2
// TWO: bf16 [4,80,64] {{.*}} shard
// TWO: bf16 [4,64,40] {{.*}} shard
