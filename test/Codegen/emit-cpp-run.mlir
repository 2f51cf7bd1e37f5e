// Generated code against the reference interpreter on hand-written grouped-phase
// programs: splat and dense weights, moe.linear with bias and a gated epilogue,
// a leading-dimension view, and an output that is an input (copied).

// RUN: rm -rf %t && split-file %s %t
// RUN: moec-interp %t/inputs.mlir --outputs %t/inputs.npz
// RUN: moec-interp %t/model.mlir --inputs %t/inputs.npz --outputs %t/expected.npz
// RUN: moec compile %t/model.mlir --target=cpu -o %t/artifact
// RUN: FileCheck %s --check-prefix=MANIFEST < %t/artifact/manifest.txt
// MANIFEST: input x f32 [1,-1,8]
// MANIFEST: output y f32 [-1,4]
// MANIFEST: output same f32 [1,-1,8]
// MANIFEST: weight constant0 f32 [8,8] 256 256
// MANIFEST: weight constant1 f32 [8] 512 32
// RUN: moec-run %t/artifact --inputs %t/inputs.npz --expected-outputs %t/expected.npz | FileCheck %s
// CHECK-DAG: y [3, 4]: {{.*}}: ok
// CHECK-DAG: same [1, 3, 8]: max abs err 0.00e+00, {{.*}}: ok

//--- model.mlir
func.func @f(%x: tensor<1x?x8xf32> {onnx.name = "x"}) -> (tensor<?x4xf32> {onnx.name = "y"}, tensor<1x?x8xf32> {onnx.name = "same"}) {
  %shape = "onnx.Constant"() <{value = dense<[-1, 8]> : tensor<2xi64>}> : () -> tensor<2xi64>
  %rows = "onnx.Reshape"(%x, %shape) : (tensor<1x?x8xf32>, tensor<2xi64>) -> tensor<?x8xf32>
  %w = arith.constant dense<0.125> : tensor<8x8xf32>
  %b = arith.constant dense<[0.5, -0.5, 1.0, -1.0, 0.25, -0.25, 2.0, -2.0]> : tensor<8xf32>
  %y = moe.linear %rows, %w bias(%b : tensor<8xf32>) {epilogue = #moe.activation<silu>, epilogue_layout = #moe.gate_up_layout<concatenated>} : tensor<?x8xf32>, tensor<8x8xf32> -> tensor<?x4xf32>
  return %y, %x : tensor<?x4xf32>, tensor<1x?x8xf32>
}

//--- inputs.mlir
func.func @inputs() -> (tensor<1x3x8xf32> {onnx.name = "x"}) {
  %x = arith.constant dense<[[[0.1, -0.2, 0.3, -0.4, 0.5, -0.6, 0.7, -0.8], [1.0, 2.0, 3.0, 4.0, -1.0, -2.0, -3.0, -4.0], [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.5]]]> : tensor<1x3x8xf32>
  return %x : tensor<1x3x8xf32>
}
