// moe.multi_linear with f32 weights (no kernel takes siblings of f32
// weights): each projection is moe.linear's call, on both targets, in order,
// with its own bias.
// RUN: moec-translate --emit-cpp --max-tokens=4 %s | FileCheck %s --check-prefix=CPU
// RUN: moec-translate --emit-cuda --max-tokens=4 %s | FileCheck %s --check-prefix=CUDA
// CPU: // moe.multi_linear
// CPU: linear(pool, in0, T, 16, [[WQ:w[0-9]+]], 16, [[BQ:w[0-9]+]], Epilogue{}, [[Q:v[0-9]+]]);
// CPU-NEXT: linear(pool, in0, T, 16, [[WK:w[0-9]+]], 8, [[BK:w[0-9]+]], Epilogue{}, [[K:v[0-9]+]]);
// CUDA: // moe.multi_linear
// CUDA-NEXT: MOEC_RETURN_IF_ERROR(linear(in0, T, 16, w{{[0-9]+}}, 16, w{{[0-9]+}}, Epilogue{}, v{{[0-9]+}}, stream));
// CUDA-NEXT: MOEC_RETURN_IF_ERROR(linear(in0, T, 16, w{{[0-9]+}}, 8, w{{[0-9]+}}, Epilogue{}, v{{[0-9]+}}, stream));
// CUDA-NOT: linearBF16Siblings
func.func @forward(%x: tensor<?x16xf32> {onnx.name = "x"}) -> (tensor<?x16xf32> {onnx.name = "q"}, tensor<?x8xf32> {onnx.name = "k"}) {
  %wq = arith.constant dense<0.1> : tensor<16x16xf32>
  %wk = arith.constant dense<0.2> : tensor<8x16xf32>
  %bq = arith.constant dense<0.3> : tensor<16xf32>
  %bk = arith.constant dense<0.4> : tensor<8xf32>
  %y:2 = moe.multi_linear %x, %wq, %wk biases(%bq, %bk : tensor<16xf32>, tensor<8xf32>) : tensor<?x16xf32>, tensor<16x16xf32>, tensor<8x16xf32> -> tensor<?x16xf32>, tensor<?x8xf32>
  return %y#0, %y#1 : tensor<?x16xf32>, tensor<?x8xf32>
}
