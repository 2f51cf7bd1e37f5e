// moe.elementwise (every operand form: [N, C], [N, 1], [C], a scalar) and
// moe.reduce_rows (sum, mean, max) against numpy in float64
// (Inputs/generic.*.npz, made by Inputs/make_generic_inputs.py Inputs).
// RUN: moec-interp %s --function generic --inputs %S/Inputs/generic.inputs.npz --expected-outputs %S/Inputs/generic.expected.npz --rtol 1e-6 --atol 1e-6 | FileCheck %s
// CHECK-DAG: y [3, 4]: max abs err {{.*}}: ok
// CHECK-DAG: s [3, 1]: max abs err {{.*}}: ok
// CHECK-DAG: m [3, 1]: max abs err {{.*}}: ok
// CHECK-DAG: x_max [3, 1]: max abs err {{.*}}: ok
func.func @generic(%x: tensor<?x4xf32> {onnx.name = "x"}, %w: tensor<4xf32> {onnx.name = "w"})
    -> (tensor<?x4xf32> {onnx.name = "y"}, tensor<?x1xf32> {onnx.name = "s"},
        tensor<?x1xf32> {onnx.name = "m"}, tensor<?x1xf32> {onnx.name = "x_max"}) {
  %sq = moe.elementwise %x : tensor<?x4xf32> -> tensor<?x4xf32> {
  ^bb0(%a: f32):
    %p = arith.mulf %a, %a : f32
    moe.yield %p : f32
  }
  %m = moe.reduce_rows <mean> %sq : tensor<?x4xf32> -> tensor<?x1xf32>
  %s = moe.reduce_rows <sum> %x : tensor<?x4xf32> -> tensor<?x1xf32>
  %mx = moe.reduce_rows <max> %x : tensor<?x4xf32> -> tensor<?x1xf32>
  %eps = arith.constant dense<1.0e-5> : tensor<f32>
  // x / sqrt(mean(x²) + eps) · (1 + w), then sigmoid, then max with 0.25.
  %y = moe.elementwise %x, %m, %w, %eps : tensor<?x4xf32>, tensor<?x1xf32>, tensor<4xf32>, tensor<f32> -> tensor<?x4xf32> {
  ^bb0(%a: f32, %b: f32, %c: f32, %e: f32):
    %one = arith.constant 1.0 : f32
    %0 = arith.addf %b, %e : f32
    %1 = math.rsqrt %0 : f32
    %2 = arith.mulf %a, %1 : f32
    %3 = arith.addf %one, %c : f32
    %4 = arith.mulf %2, %3 : f32
    %5 = arith.negf %4 : f32
    %6 = math.exp %5 : f32
    %7 = arith.addf %one, %6 : f32
    %8 = arith.divf %one, %7 : f32
    %q = arith.constant 0.25 : f32
    %9 = arith.maximumf %8, %q : f32
    moe.yield %9 : f32
  }
  return %y, %s, %m, %mx : tensor<?x4xf32>, tensor<?x1xf32>, tensor<?x1xf32>, tensor<?x1xf32>
}
