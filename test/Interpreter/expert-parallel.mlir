// A program partitioned for every expert-parallel rank (moec compile
// --ep-size=N) runs as the rank --ep-rank names: moe.ep_shard takes that
// rank's experts, moe.sort with ep_size keeps ids [r·L, (r+1)·L), moe.combine
// with ep_size adds its addend on rank 0 alone, and moe.all_reduce yields the
// rank's partial sum. Expected values by hand; then the errors.

// RUN: moec-interp %s --function shard --ep-rank 0 --print | FileCheck %s --check-prefix=SHARD0
// RUN: moec-interp %s --function shard --ep-rank 2 --print | FileCheck %s --check-prefix=SHARD2
// RUN: moec-interp %s --function sort --ep-rank 1 --print | FileCheck %s --check-prefix=SORT1
// RUN: moec-interp %s --function combine --ep-rank 0 --print | FileCheck %s --check-prefix=COMBINE0
// RUN: moec-interp %s --function combine --ep-rank 1 --print | FileCheck %s --check-prefix=COMBINE1
// RUN: not moec-interp %s --function shard 2>&1 | FileCheck %s --check-prefix=NORANK
// RUN: not moec-interp %s --function sort --ep-rank 2 2>&1 | FileCheck %s --check-prefix=BADRANK

// Experts of two values each, 6 of them over 3 ranks: rank r holds experts
// 2r and 2r + 1.
// SHARD0: result0 = tensor<2x2xf32> {{\[}}[0, 1], [10, 11]]
// SHARD2: result0 = tensor<2x2xf32> {{\[}}[40, 41], [50, 51]]
// NORANK: error: 'moe.ep_shard' op is partitioned over 3 expert-parallel ranks and reads its rank at run time; give the rank to run as (moec-interp --ep-rank)
func.func @shard() -> tensor<2x2xf32> {
  %w = arith.constant dense<[[0.0, 1.0], [10.0, 11.0], [20.0, 21.0], [30.0, 31.0], [40.0, 41.0], [50.0, 51.0]]> : tensor<6x2xf32>
  %l = moe.ep_shard %w {ep_size = 3 : i64} : tensor<6x2xf32> -> tensor<2x2xf32>
  return %l : tensor<2x2xf32>
}

// Rank 1 of 2, 4 experts: local ids 2 and 3, as sort.mlir's expert_parallel
// with first_expert = 2. Slots: s0=2 s1=0 s2=3 s3=-1 s4=0 s5=2 s6=7 s7=3.
// SORT1: result0 = tensor<8xi32> [0, 5, 2, 7, 1, 3, 4, 6]
// SORT1: result1 = tensor<2xi32> [2, 4]
// SORT1: result2 = tensor<i32> 4
// BADRANK: error: 'moe.sort' op is partitioned over 2 ranks; rank 2 is not one of them
func.func @sort() -> (tensor<8xi32>, tensor<2xi32>, tensor<i32>) {
  %ids = arith.constant dense<[[2, 0], [3, -1], [0, 2], [7, 3]]> : tensor<4x2xi32>
  %p, %o, %n = moe.sort %ids {num_experts = 2 : i64, ep_size = 2 : i64}
      : tensor<4x2xi32> -> tensor<8xi32>, tensor<2xi32>, tensor<i32>
  return %p, %o, %n : tensor<8xi32>, tensor<2xi32>, tensor<i32>
}

// One token, top-1, its row 2 · 0.5 = 1; the addend 10 counts on rank 0 only,
// and the all-reduce passes the rank's partial sum on.
// COMBINE0: result0 = tensor<1x1xf32> {{\[}}[11]]
// COMBINE1: result0 = tensor<1x1xf32> {{\[}}[1]]
func.func @combine() -> tensor<1x1xf32> {
  %rows = arith.constant dense<[[2.0]]> : tensor<1x1xf32>
  %p = arith.constant dense<[0]> : tensor<1xi32>
  %w = arith.constant dense<[[0.5]]> : tensor<1x1xf32>
  %n = arith.constant dense<1> : tensor<i32>
  %s = arith.constant dense<[[10.0]]> : tensor<1x1xf32>
  %y = moe.combine %rows, %p, %w, %n addend(%s : tensor<1x1xf32>) {ep_size = 2 : i64}
      : tensor<1x1xf32>, tensor<1xi32>, tensor<1x1xf32>, tensor<i32> -> tensor<1x1xf32>
  %r = moe.all_reduce %y {ep_size = 2 : i64} : tensor<1x1xf32>
  return %r : tensor<1x1xf32>
}
