// moe.sort (docs/dialect.md, "Sort, sentinel and offsets"): a stable sort of
// the slots s = t*K + k by local id; every non-local id (negative, >= E, or
// another rank's) becomes the sentinel E and sorts last; offsets are
// inclusive ends; num_valid = offsets[E-1]. Expected values by hand.

// RUN: moec-interp %s --function basic --print | FileCheck %s --check-prefix=BASIC
// RUN: moec-interp %s --function expert_parallel --print | FileCheck %s --check-prefix=EP
// RUN: moec-interp %s --function all_sentinel --print | FileCheck %s --check-prefix=NONE
// RUN: moec-interp %s --function stable --print | FileCheck %s --check-prefix=STABLE

// Slots: s0=2 s1=0 s2=5 s3=-1 s4=0 s5=2 with E = 4. Expert 0 owns s1, s4 (in
// slot order); expert 2 owns s0, s5; 5 and -1 are sentinels, last, in slot order.
// BASIC: result0 = tensor<6xi32> [1, 4, 0, 5, 2, 3]
// BASIC: result1 = tensor<4xi32> [2, 2, 4, 4]
// BASIC: result2 = tensor<i32> 4
func.func @basic() -> (tensor<6xi32>, tensor<4xi32>, tensor<i32>) {
  %ids = arith.constant dense<[[2, 0], [5, -1], [0, 2]]> : tensor<3x2xi32>
  %p, %o, %n = moe.sort %ids {num_experts = 4 : i64}
      : tensor<3x2xi32> -> tensor<6xi32>, tensor<4xi32>, tensor<i32>
  return %p, %o, %n : tensor<6xi32>, tensor<4xi32>, tensor<i32>
}

// Rank 1 of 2 with 4 global experts: local ids are 2 and 3 (first_expert = 2,
// E = 2); 0 is another rank's expert, -1 and 7 are garbage. i64 ids.
// Slots: s0=2 s1=0 s2=3 s3=-1 s4=0 s5=2 s6=7 s7=3.
// EP: result0 = tensor<8xi32> [0, 5, 2, 7, 1, 3, 4, 6]
// EP: result1 = tensor<2xi32> [2, 4]
// EP: result2 = tensor<i32> 4
func.func @expert_parallel() -> (tensor<8xi32>, tensor<2xi32>, tensor<i32>) {
  %ids = arith.constant dense<[[2, 0], [3, -1], [0, 2], [7, 3]]> : tensor<4x2xi64>
  %p, %o, %n = moe.sort %ids {num_experts = 2 : i64, first_expert = 2 : i64}
      : tensor<4x2xi64> -> tensor<8xi32>, tensor<2xi32>, tensor<i32>
  return %p, %o, %n : tensor<8xi32>, tensor<2xi32>, tensor<i32>
}

// Nothing local: every row is in the sentinel tail, num_valid = 0.
// NONE: result0 = tensor<4xi32> [0, 1, 2, 3]
// NONE: result1 = tensor<3xi32> [0, 0, 0]
// NONE: result2 = tensor<i32> 0
func.func @all_sentinel() -> (tensor<4xi32>, tensor<3xi32>, tensor<i32>) {
  %ids = arith.constant dense<[[3, -2], [100, -2147483648]]> : tensor<2x2xi32>
  %p, %o, %n = moe.sort %ids {num_experts = 3 : i64}
      : tensor<2x2xi32> -> tensor<4xi32>, tensor<3xi32>, tensor<i32>
  return %p, %o, %n : tensor<4xi32>, tensor<3xi32>, tensor<i32>
}

// Every slot on one expert: stability keeps the slots in ascending order.
// STABLE: result0 = tensor<6xi32> [0, 1, 2, 3, 4, 5]
// STABLE: result1 = tensor<2xi32> [0, 6]
// STABLE: result2 = tensor<i32> 6
func.func @stable() -> (tensor<6xi32>, tensor<2xi32>, tensor<i32>) {
  %ids = arith.constant dense<1> : tensor<2x3xi32>
  %p, %o, %n = moe.sort %ids {num_experts = 2 : i64}
      : tensor<2x3xi32> -> tensor<6xi32>, tensor<2xi32>, tensor<i32>
  return %p, %o, %n : tensor<6xi32>, tensor<2xi32>, tensor<i32>
}
