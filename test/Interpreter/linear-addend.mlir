// moe.linear (docs/dialect.md, "moe.linear") and moe.combine's addend
// ("moe.combine"): hand-computed.

// RUN: moec-interp %s --function linear --print | FileCheck %s --check-prefix=LINEAR
// RUN: moec-interp %s --function combine_addend --print | FileCheck %s --check-prefix=ADDEND
// RUN: moec-interp %s --function multi_linear --print | FileCheck %s --check-prefix=MULTI

// x · Wᵀ + b: row 0 [1, 3, 5, 1], row 1 [-1, 1, 1, -3]. With a relu epilogue
// on the interleaved layout (g = even columns, u = odd ones): row 0
// [relu(1)·3, relu(5)·1], row 1 [relu(-1)·1, relu(1)·-3].
// LINEAR: result0 = tensor<2x4xf32> {{\[}}[1, 3, 5, 1], [-1, 1, 1, -3]]
// LINEAR: result1 = tensor<2x2xf32> {{\[}}[3, 5], [0, -3]]
func.func @linear() -> (tensor<2x4xf32>, tensor<2x2xf32>) {
  %x = arith.constant dense<[[1.0, 2.0], [-1.0, 0.0]]> : tensor<2x2xf32>
  %w = arith.constant dense<[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [2.0, 0.0]]> : tensor<4x2xf32>
  %b = arith.constant dense<[0.0, 1.0, 2.0, -1.0]> : tensor<4xf32>
  %plain = moe.linear %x, %w bias(%b : tensor<4xf32>) : tensor<2x2xf32>, tensor<4x2xf32> -> tensor<2x4xf32>
  %act = moe.linear %x, %w bias(%b : tensor<4xf32>)
      {epilogue = #moe.activation<relu>, epilogue_layout = #moe.gate_up_layout<interleaved>}
      : tensor<2x2xf32>, tensor<4x2xf32> -> tensor<2x2xf32>
  return %plain, %act : tensor<2x4xf32>, tensor<2x2xf32>
}

// moe.multi_linear: each result is its weight's moe.linear. With the bias
// above, as @linear's first result; the second weight [[0, 1], [3, 0.5],
// [-1, 0]] with bias [1, 0, 0.5] gives row 0 [3, 4, -0.5], row 1 [1, -3, 1.5]
// (bf16 weights, exact here). Without biases, x · Wᵀ alone.
// MULTI: result0 = tensor<2x4xf32> {{\[}}[1, 3, 5, 1], [-1, 1, 1, -3]]
// MULTI: result1 = tensor<2x3xf32> {{\[}}[3, 4, -0.5], [1, -3, 1.5]]
// MULTI: result2 = tensor<2x4xf32> {{\[}}[1, 2, 3, 2], [-1, 0, -1, -2]]
// MULTI: result3 = tensor<2x3xf32> {{\[}}[2, 4, -1], [0, -3, 1]]
func.func @multi_linear() -> (tensor<2x4xf32>, tensor<2x3xf32>, tensor<2x4xf32>, tensor<2x3xf32>) {
  %x = arith.constant dense<[[1.0, 2.0], [-1.0, 0.0]]> : tensor<2x2xf32>
  %w0 = arith.constant dense<[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [2.0, 0.0]]> : tensor<4x2xbf16>
  %w1 = arith.constant dense<[[0.0, 1.0], [3.0, 0.5], [-1.0, 0.0]]> : tensor<3x2xbf16>
  %b0 = arith.constant dense<[0.0, 1.0, 2.0, -1.0]> : tensor<4xf32>
  %b1 = arith.constant dense<[1.0, 0.0, 0.5]> : tensor<3xf32>
  %y:2 = moe.multi_linear %x, %w0, %w1 biases(%b0, %b1 : tensor<4xf32>, tensor<3xf32>)
      : tensor<2x2xf32>, tensor<4x2xbf16>, tensor<3x2xbf16> -> tensor<2x4xf32>, tensor<2x3xf32>
  %z:2 = moe.multi_linear %x, %w0, %w1 : tensor<2x2xf32>, tensor<4x2xbf16>, tensor<3x2xbf16> -> tensor<2x4xf32>, tensor<2x3xf32>
  return %y#0, %y#1, %z#0, %z#1 : tensor<2x4xf32>, tensor<2x3xf32>, tensor<2x4xf32>, tensor<2x3xf32>
}

// Only sorted row 0 (slot 3: token 1, k = 1) is valid. Token 0 has no valid
// slot: it gets exactly its gated addend, sigmoid(0)·[2, 4]; token 1 gets
// 0.25·[2, 2] + sigmoid(0)·[1, 1]. The NaN rows past num_valid are not read.
// ADDEND: result0 = tensor<2x2xf32> {{\[}}[1, 2], [1, 1]]
// Without the gate, the addend is added as it is.
// ADDEND: result1 = tensor<2x2xf32> {{\[}}[2, 4], [1.5, 1.5]]
func.func @combine_addend() -> (tensor<2x2xf32>, tensor<2x2xf32>) {
  %rows = arith.constant dense<[[2.0, 2.0], [0x7FC00000, 0x7FC00000], [0x7FC00000, 1.0], [0x7F800000, 0.0]]> : tensor<4x2xf32>
  %p = arith.constant dense<[3, 0, 1, 2]> : tensor<4xi32>
  %w = arith.constant dense<[[1.0, 1.0], [5.0, 0.25]]> : tensor<2x2xf32>
  %n = arith.constant dense<1> : tensor<i32>
  %addend = arith.constant dense<[[2.0, 4.0], [1.0, 1.0]]> : tensor<2x2xf32>
  %gate = arith.constant dense<0.0> : tensor<2x1xf32>
  %gated = moe.combine %rows, %p, %w, %n addend(%addend : tensor<2x2xf32>) addend_gate(%gate : tensor<2x1xf32>)
      : tensor<4x2xf32>, tensor<4xi32>, tensor<2x2xf32>, tensor<i32> -> tensor<2x2xf32>
  %plain = moe.combine %rows, %p, %w, %n addend(%addend : tensor<2x2xf32>)
      : tensor<4x2xf32>, tensor<4xi32>, tensor<2x2xf32>, tensor<i32> -> tensor<2x2xf32>
  return %gated, %plain : tensor<2x2xf32>, tensor<2x2xf32>
}
