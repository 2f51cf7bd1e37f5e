// moe.add_rms_norm (moe-fuse-residual-norm) printed for both targets: one
// call of addRmsNorm with the two rows, the weight's groups, epsilon and
// weight_offset, the sum and the normed rows.
// RUN: moec-translate --emit-cpp --max-tokens=4 %s | FileCheck %s --check-prefix=CPU
// RUN: moec-translate --emit-cuda --max-tokens=4 %s | FileCheck %s --check-prefix=CUDA
// CPU: // moe.add_rms_norm
// CPU-NEXT: addRmsNorm(pool, in0, in1, T, 16, [[W:w[0-9]+]], 16, 0x1.0c6f7ap-20f, 0x1p+0f, [[S:v[0-9]+]], [[N:v[0-9]+]]);
// CUDA: // moe.add_rms_norm
// CUDA-NEXT: MOEC_RETURN_IF_ERROR(addRmsNorm(in0, in1, T, 16, [[W:w[0-9]+]], 16, 0x1.0c6f7ap-20f, 0x1p+0f, [[S:v[0-9]+]], [[N:v[0-9]+]], stream));
func.func @forward(%h: tensor<?x16xf32> {onnx.name = "h"}, %a: tensor<?x16xf32> {onnx.name = "a"})
    -> (tensor<?x16xf32> {onnx.name = "sum"}, tensor<?x16xf32> {onnx.name = "normed"}) {
  %w = arith.constant dense<0.5> : tensor<16xf32>
  %s, %n = moe.add_rms_norm %h, %a, %w {epsilon = 1.0e-6 : f64, weight_offset = 1.0 : f64}
      : tensor<?x16xf32>, tensor<?x16xf32>, tensor<16xf32> -> tensor<?x16xf32>, tensor<?x16xf32>
  return %s, %n : tensor<?x16xf32>, tensor<?x16xf32>
}
