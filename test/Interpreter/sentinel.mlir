// The sentinel rules of docs/dialect.md ("Sentinel rows are never computed"):
// invalid ids (>= num_experts, negative) sort into a tail past num_valid that
// moe.permute does not write, moe.grouped_matmul does not compute and
// moe.combine never reads; NaN there cannot leak, and a token whose every slot
// is a sentinel gets an exact zero row. The interpreter fills unwritten rows
// with NaN, so a wrong read would show. Expected values by hand.

// RUN: moec-interp %s --function pipeline --print | FileCheck %s --check-prefix=PIPE
// RUN: moec-interp %s --function combine_nan_rows --print | FileCheck %s --check-prefix=NAN
// RUN: moec-interp %s --function empty_experts --print | FileCheck %s --check-prefix=EMPTY

// T = 3, K = 2, H = 2, E = 2. ids [[1, 7], [9, -3], [0, 1]]: slots s1, s2, s3
// are sentinels; token 1 has no valid slot. Sorted: expert 0 owns s4, expert 1
// owns s0, s5; then the sentinels s1, s2, s3.
// PIPE: result0 = tensor<6xi32> [4, 0, 5, 1, 2, 3]
// PIPE: result1 = tensor<2xi32> [1, 3]
// PIPE: result2 = tensor<i32> 3
// permute: rows of tokens 2, 0, 2, then three rows that were never written.
// PIPE: result3 = tensor<6x2xf32> {{\[}}[5, 6], [1, 2], [5, 6], [nan, nan], [nan, nan], [nan, nan]]
// grouped_matmul: expert 0 is the identity plus bias [0.5, -0.5], expert 1
// diag(2, 3); the tail is not computed.
// PIPE: result4 = tensor<6x2xf32> {{\[}}[5.5, 5.5], [2, 6], [10, 18], [nan, nan], [nan, nan], [nan, nan]]
// combine: t0 = 0.5·[2, 6]; t1 has only sentinel slots (weights 100, rows NaN)
// and is exactly 0; t2 = 0.25·[5.5, 5.5] + 0.75·[10, 18].
// PIPE: result5 = tensor<3x2xf32> {{\[}}[1, 3], [0, 0], [8.875, 14.875]]
func.func @pipeline() -> (tensor<6xi32>, tensor<2xi32>, tensor<i32>, tensor<6x2xf32>,
                          tensor<6x2xf32>, tensor<3x2xf32>) {
  %hidden = arith.constant dense<[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]> : tensor<3x2xf32>
  %ids = arith.constant dense<[[1, 7], [9, -3], [0, 1]]> : tensor<3x2xi32>
  %w = arith.constant dense<[[0.5, 100.0], [100.0, 100.0], [0.25, 0.75]]> : tensor<3x2xf32>
  %weights = arith.constant dense<[[[1.0, 0.0], [0.0, 1.0]], [[2.0, 0.0], [0.0, 3.0]]]> : tensor<2x2x2xf32>
  %bias = arith.constant dense<[[0.5, -0.5], [0.0, 0.0]]> : tensor<2x2xf32>
  %p, %o, %n = moe.sort %ids {num_experts = 2 : i64}
      : tensor<3x2xi32> -> tensor<6xi32>, tensor<2xi32>, tensor<i32>
  %rows = moe.permute %hidden, %p, %n {top_k = 2 : i64}
      : tensor<3x2xf32>, tensor<6xi32>, tensor<i32> -> tensor<6x2xf32>
  %y = moe.grouped_matmul %rows, %weights, %o bias(%bias : tensor<2x2xf32>)
      : tensor<6x2xf32>, tensor<2x2x2xf32>, tensor<2xi32> -> tensor<6x2xf32>
  %out = moe.combine %y, %p, %w, %n
      : tensor<6x2xf32>, tensor<6xi32>, tensor<3x2xf32>, tensor<i32> -> tensor<3x2xf32>
  return %p, %o, %n, %rows, %y, %out : tensor<6xi32>, tensor<2xi32>, tensor<i32>,
      tensor<6x2xf32>, tensor<6x2xf32>, tensor<3x2xf32>
}

// combine alone, with NaN and Inf in the rows past num_valid = 2, where the
// permutation puts token 0's two slots, token 1's second and token 2's first:
// t0 = 0 exactly, t1 = -1·[1, 2], t2 = 0.5·[3, 4].
// NAN: result0 = tensor<3x2xf32> {{\[}}[0, 0], [-1, -2], [1.5, 2]]
func.func @combine_nan_rows() -> tensor<3x2xf32> {
  %rows = arith.constant dense<[[1.0, 2.0], [3.0, 4.0], [0x7FC00000, 0x7F800000],
                                [0x7FC00000, 0x7FC00000], [0xFF800000, 1.0], [0x7FC00000, 0.0]]> : tensor<6x2xf32>
  // Sorted rows 0 and 1 hold slots 2 and 5: token 1, k = 0 and token 2, k = 1.
  %p = arith.constant dense<[2, 5, 0, 1, 3, 4]> : tensor<6xi32>
  %w = arith.constant dense<[[1.0, 1.0], [-1.0, 7.0], [2.0, 0.5]]> : tensor<3x2xf32>
  %n = arith.constant dense<2> : tensor<i32>
  %out = moe.combine %rows, %p, %w, %n
      : tensor<6x2xf32>, tensor<6xi32>, tensor<3x2xf32>, tensor<i32> -> tensor<3x2xf32>
  return %out : tensor<3x2xf32>
}

// Experts that own no rows (offsets repeat) are skipped; rows past the last
// offset are NaN (never computed) even though the sort put valid rows there:
// the grouped matmul trusts the offsets. A relu epilogue on the gated
// concatenated layout: relu(g)·u with g, u the two rows of the expert's
// weights times the row: row 0 (expert 0) relu(3)·4, row 1 (expert 2) relu(-1)·1.
// EMPTY: result0 = tensor<4x1xf32> {{\[}}[12], [0], [nan], [nan]]
func.func @empty_experts() -> tensor<4x1xf32> {
  %rows = arith.constant dense<[[1.0, 2.0], [-1.0, 1.0], [3.0, 3.0], [4.0, 4.0]]> : tensor<4x2xf32>
  // Expert 0: gate row [1, 1], up row [0, 2]; expert 2: gate row [1, 0], up row [1, 2].
  %w = arith.constant dense<[[[1.0, 1.0], [0.0, 2.0]], [[9.0, 9.0], [9.0, 9.0]],
                             [[1.0, 0.0], [1.0, 2.0]]]> : tensor<3x2x2xf32>
  %offsets = arith.constant dense<[1, 1, 2]> : tensor<3xi32>
  %y = moe.grouped_matmul %rows, %w, %offsets
      {epilogue = #moe.activation<relu>, epilogue_layout = #moe.gate_up_layout<concatenated>}
      : tensor<4x2xf32>, tensor<3x2x2xf32>, tensor<3xi32> -> tensor<4x1xf32>
  return %y : tensor<4x1xf32>
}
