// RUN: moec-opt %s -split-input-file -moe-partition-experts="ep-size=4 ep-rank=1" -verify-diagnostics | FileCheck %s --check-prefix=RANK1
// RUN: moec-opt %s -split-input-file -moe-partition-experts="ep-size=4 ep-rank=0" -verify-diagnostics | FileCheck %s --check-prefix=RANK0
// RUN: moec-opt %s -split-input-file -moe-partition-experts="ep-size=1 ep-rank=0" | FileCheck %s --check-prefix=SINGLE
// RUN: moec-opt %s -split-input-file -moe-partition-experts="ep-size=4" -verify-diagnostics | FileCheck %s --check-prefix=EVERY
// RUN: not moec-opt %s -split-input-file -moe-partition-experts="ep-size=2 ep-rank=2" 2>&1 | FileCheck %s --check-prefix=BADRANK
// RUN: not moec-opt %s -split-input-file -moe-partition-experts="ep-size=2 ep-rank=-2" 2>&1 | FileCheck %s --check-prefix=BADRANK2

// Rank 1 of 4 keeps experts 2 and 3 of 8: the sort maps them to 0 and 1 and
// every other id to the sentinel 2; weights are sliced; the combine is
// all-reduced. Constant weights are sliced at compile time.
// RANK1-LABEL: func.func @lowered_block
// RANK1: %[[P:.*]], %[[OFF:.*]], %[[N:.*]] = moe.sort %{{.*}} {first_expert = 2 : i64, num_experts = 2 : i64} : tensor<?x2xi32> -> tensor<?xi32>, tensor<2xi32>, tensor<i32>
// RANK1: %[[GU:.*]] = tensor.extract_slice %{{.*}}[2, 0, 0] [2, 4, 4] [1, 1, 1] : tensor<8x4x4xf32> to tensor<2x4x4xf32>
// RANK1: %[[B:.*]] = tensor.extract_slice %{{.*}}[2, 0] [2, 4] [1, 1] : tensor<8x4xf32> to tensor<2x4xf32>
// RANK1: moe.grouped_matmul %{{.*}}, %[[GU]], %[[OFF]] bias(%[[B]] : tensor<2x4xf32>)
// RANK1: %[[WD:.*]] = arith.constant dense_resource<experts_slice> : tensor<2x4x2xf32>
// RANK1: moe.grouped_matmul %{{.*}}, %[[WD]], %[[OFF]] : tensor<?x2xf32>, tensor<2x4x2xf32>, tensor<2xi32> -> tensor<?x4xf32>
// RANK1: %[[Y:.*]] = moe.combine %{{.*}}, %[[P]], %{{.*}}, %[[N]] : tensor<?x4xf32>, tensor<?xi32>, tensor<?x2xf32>, tensor<i32> -> tensor<?x4xf32>
// RANK1: %[[R:.*]] = moe.all_reduce %[[Y]] {ep_size = 4 : i64} : tensor<?x4xf32>
// RANK1: return %[[R]]
// experts 2 and 3 of the constant: f32 values 2..3 x 8 elements, 0x40000000 and 0x40400000
// RANK1: experts_slice: "0x4000000000000040
// RANK1-SAME: 0000404000004040"

// RANK0-LABEL: func.func @lowered_block
// RANK0: moe.sort %{{.*}} {num_experts = 2 : i64}
// RANK0: tensor.extract_slice %{{.*}}[0, 0, 0] [2, 4, 4] [1, 1, 1]

// Without ep-rank, one program for every rank: the sort reads the rank at run
// time (ep_size), and every stacked weight, constant or not, passes whole
// through moe.ep_shard, which the loader resolves to the rank's slice.
// EVERY-LABEL: func.func @lowered_block
// EVERY: %[[P:.*]], %[[OFF:.*]], %[[N:.*]] = moe.sort %{{.*}} {ep_size = 4 : i64, num_experts = 2 : i64} : tensor<?x2xi32> -> tensor<?xi32>, tensor<2xi32>, tensor<i32>
// EVERY: %[[GU:.*]] = moe.ep_shard %{{.*}} {ep_size = 4 : i64} : tensor<8x4x4xf32> -> tensor<2x4x4xf32>
// EVERY: %[[B:.*]] = moe.ep_shard %{{.*}} {ep_size = 4 : i64} : tensor<8x4xf32> -> tensor<2x4xf32>
// EVERY: moe.grouped_matmul %{{.*}}, %[[GU]], %[[OFF]] bias(%[[B]] : tensor<2x4xf32>)
// EVERY: %[[WD:.*]] = moe.ep_shard %{{.*}} {ep_size = 4 : i64} : tensor<8x4x2xf32> -> tensor<2x4x2xf32>
// EVERY: moe.grouped_matmul %{{.*}}, %[[WD]], %[[OFF]]
// EVERY: %[[Y:.*]] = moe.combine %{{.*}}, %[[P]], %{{.*}}, %[[N]] : tensor<?x4xf32>
// EVERY: %[[R:.*]] = moe.all_reduce %[[Y]] {ep_size = 4 : i64} : tensor<?x4xf32>
// EVERY: return %[[R]]
// EVERY-NOT: experts_slice

// SINGLE-LABEL: func.func @lowered_block
// SINGLE: moe.sort %{{.*}} {num_experts = 8 : i64}
// SINGLE-NOT: moe.all_reduce
// SINGLE-NOT: tensor.extract_slice
func.func @lowered_block(%x: tensor<?x4xf32>, %ids: tensor<?x2xi32>, %w: tensor<?x2xf32>,
                         %wgu: tensor<8x4x4xf32>, %bgu: tensor<8x4xf32>) -> tensor<?x4xf32> {
  %wd = arith.constant dense<[[[0.0, 0.0], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0]],
                              [[1.0, 1.0], [1.0, 1.0], [1.0, 1.0], [1.0, 1.0]],
                              [[2.0, 2.0], [2.0, 2.0], [2.0, 2.0], [2.0, 2.0]],
                              [[3.0, 3.0], [3.0, 3.0], [3.0, 3.0], [3.0, 3.0]],
                              [[4.0, 4.0], [4.0, 4.0], [4.0, 4.0], [4.0, 4.0]],
                              [[5.0, 5.0], [5.0, 5.0], [5.0, 5.0], [5.0, 5.0]],
                              [[6.0, 6.0], [6.0, 6.0], [6.0, 6.0], [6.0, 6.0]],
                              [[7.0, 7.0], [7.0, 7.0], [7.0, 7.0], [7.0, 7.0]]]> : tensor<8x4x2xf32>
  %p, %off, %n = moe.sort %ids {num_experts = 8 : i64} : tensor<?x2xi32> -> tensor<?xi32>, tensor<8xi32>, tensor<i32>
  %rows = moe.permute %x, %p, %n {top_k = 2 : i64} : tensor<?x4xf32>, tensor<?xi32>, tensor<i32> -> tensor<?x4xf32>
  %h = moe.grouped_matmul %rows, %wgu, %off bias(%bgu : tensor<8x4xf32>)
      {epilogue = #moe.activation<silu>, epilogue_layout = #moe.gate_up_layout<concatenated>}
      : tensor<?x4xf32>, tensor<8x4x4xf32>, tensor<8xi32> -> tensor<?x2xf32>
  %o = moe.grouped_matmul %h, %wd, %off : tensor<?x2xf32>, tensor<8x4x2xf32>, tensor<8xi32> -> tensor<?x4xf32>
  %y = moe.combine %o, %p, %w, %n : tensor<?x4xf32>, tensor<?xi32>, tensor<?x2xf32>, tensor<i32> -> tensor<?x4xf32>
  return %y : tensor<?x4xf32>
}

// -----

// The shared experts are added once: on rank 0, not on the others.
// RANK1-LABEL: func.func @shared_expert_once
// RANK1: %[[Y:.*]] = moe.combine %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : tensor<?x4xf32>
// RANK1: moe.all_reduce %[[Y]]
// RANK0-LABEL: func.func @shared_expert_once
// RANK0: moe.combine %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} addend(%{{.*}} : tensor<?x4xf32>) : tensor<?x4xf32>
// RANK0: moe.all_reduce
// Every rank's program keeps the addend; the combine adds it on rank 0 alone.
// EVERY-LABEL: func.func @shared_expert_once
// EVERY: %[[Y:.*]] = moe.combine %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} addend(%{{.*}} : tensor<?x4xf32>) {ep_size = 4 : i64} : tensor<?x4xf32>
// EVERY: moe.all_reduce %[[Y]]
func.func @shared_expert_once(%o: tensor<?x4xf32>, %p: tensor<?xi32>, %w: tensor<?x2xf32>,
                              %ids: tensor<?x2xi32>, %s: tensor<?x4xf32>) -> tensor<?x4xf32> {
  %perm, %off, %n = moe.sort %ids {num_experts = 8 : i64} : tensor<?x2xi32> -> tensor<?xi32>, tensor<8xi32>, tensor<i32>
  %y = moe.combine %o, %perm, %w, %n addend(%s : tensor<?x4xf32>)
      : tensor<?x4xf32>, tensor<?xi32>, tensor<?x2xf32>, tensor<i32> -> tensor<?x4xf32>
  return %y : tensor<?x4xf32>
}

// -----

func.func @uneven(%ids: tensor<?x2xi32>) -> tensor<?xi32> {
  // expected-error @+1 {{moe-partition-experts: 6 experts do not split evenly over ep-size = 4}}
  %p, %o, %n = moe.sort %ids {num_experts = 6 : i64} : tensor<?x2xi32> -> tensor<?xi32>, tensor<6xi32>, tensor<i32>
  return %p : tensor<?xi32>
}

// -----

func.func @already_partitioned(%ids: tensor<?x2xi32>) -> tensor<?xi32> {
  // expected-error @+1 {{moe-partition-experts: this sort is already partitioned}}
  %p, %o, %n = moe.sort %ids {num_experts = 2 : i64, first_expert = 2 : i64} : tensor<?x2xi32> -> tensor<?xi32>, tensor<2xi32>, tensor<i32>
  return %p : tensor<?xi32>
}

// -----

func.func @offsets_escape(%ids: tensor<?x2xi32>) -> tensor<8xi32> {
  %p, %o, %n = moe.sort %ids {num_experts = 8 : i64} : tensor<?x2xi32> -> tensor<?xi32>, tensor<8xi32>, tensor<i32>
  // expected-error @+1 {{moe-partition-experts: the offsets of a sort may only feed moe.grouped_matmul}}
  return %o : tensor<8xi32>
}

// -----

func.func @partitioned_for_every_rank(%ids: tensor<?x2xi32>) -> tensor<?xi32> {
  // expected-error @+1 {{moe-partition-experts: this sort is already partitioned}}
  %p, %o, %n = moe.sort %ids {num_experts = 2 : i64, ep_size = 4 : i64} : tensor<?x2xi32> -> tensor<?xi32>, tensor<2xi32>, tensor<i32>
  return %p : tensor<?xi32>
}

// BADRANK: error: moe-partition-experts: ep-rank must be in [0, ep-size) or -1 (every rank), got ep-size = 2, ep-rank = 2
// BADRANK2: error: moe-partition-experts: ep-rank must be in [0, ep-size) or -1 (every rank), got ep-size = 2, ep-rank = -2
