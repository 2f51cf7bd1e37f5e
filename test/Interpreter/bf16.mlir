// The types moe-cast-experts-bf16 writes, run exactly: a bf16 result is
// rounded to bf16 (nearest even) when produced, and a matmul with bf16 weights
// rounds f32 rows to bf16 before it multiplies (the bf16-weight kernels do), so
// storing such rows as bf16 changes no bit.

// RUN: moec-interp %s --function main --print | FileCheck %s

// Rows [1 + 3*2^-8, 0] and [1 + 2^-8, 2^-8] times bf16 weights [1, 1]:
// 1 + 3*2^-8 is a tie and rounds to the even 1 + 2^-6 = 1.015625 (truncation
// would give 1.0078125, no rounding 1.01171875); 1 + 2^-8 is a tie and rounds
// to 1, plus 2^-8 (exact) gives 1.00390625 in the f32 result ...
// CHECK: result0 = tensor<2x1xf32> {{\[\[}}1.015625], [1.00390625]]
// ... and 1.00390625 is a tie again when the result is bf16: 1.
// CHECK: result1 = tensor<2x1xbf16> {{\[\[}}1.015625], [1]]
// moe.linear rounds its f32 input the same way for a bf16 weight.
// CHECK: result2 = tensor<2x1xf32> {{\[\[}}1.015625], [1.00390625]]
// moe.permute into bf16 rows: each element rounded once.
// CHECK: result3 = tensor<2x2xbf16> {{\[\[}}1.015625, 0], [1, 0.00390625]]
// f32 weights: nothing is rounded to bf16.
// CHECK: result4 = tensor<2x1xf32> {{\[\[}}1.01171875], [1.0078125]]
func.func @main() -> (tensor<2x1xf32>, tensor<2x1xbf16>, tensor<2x1xf32>, tensor<2x2xbf16>, tensor<2x1xf32>) {
  %x = arith.constant dense<[[1.01171875, 0.0], [1.00390625, 0.00390625]]> : tensor<2x2xf32>
  %w = arith.constant dense<1.0> : tensor<1x1x2xbf16>
  %w32 = arith.constant dense<1.0> : tensor<1x1x2xf32>
  %wl = arith.constant dense<1.0> : tensor<1x2xbf16>
  %offsets = arith.constant dense<2> : tensor<1xi32>
  %perm = arith.constant dense<[0, 1]> : tensor<2xi32>
  %nvalid = arith.constant dense<2> : tensor<i32>
  %a = moe.grouped_matmul %x, %w, %offsets : tensor<2x2xf32>, tensor<1x1x2xbf16>, tensor<1xi32> -> tensor<2x1xf32>
  %b = moe.grouped_matmul %x, %w, %offsets : tensor<2x2xf32>, tensor<1x1x2xbf16>, tensor<1xi32> -> tensor<2x1xbf16>
  %c = moe.linear %x, %wl : tensor<2x2xf32>, tensor<1x2xbf16> -> tensor<2x1xf32>
  %d = moe.permute %x, %perm, %nvalid {top_k = 1 : i64} : tensor<2x2xf32>, tensor<2xi32>, tensor<i32> -> tensor<2x2xbf16>
  %e = moe.grouped_matmul %x, %w32, %offsets : tensor<2x2xf32>, tensor<1x1x2xf32>, tensor<1xi32> -> tensor<2x1xf32>
  return %a, %b, %c, %d, %e : tensor<2x1xf32>, tensor<2x1xbf16>, tensor<2x1xf32>, tensor<2x2xbf16>, tensor<2x1xf32>
}
