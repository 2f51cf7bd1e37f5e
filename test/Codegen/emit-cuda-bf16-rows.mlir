// --expert-weights=bf16 holds a value as bf16 rows (BF16 *) only when a
// bf16-weight kernel writes it and every reader is a bf16-weight kernel, which
// would round f32 rows to bf16 anyway (docs/design.md, "bf16 activations").

// RUN: rm -rf %t && mkdir -p %t
// RUN: moec compile %s --target=cuda --expert-weights=bf16 --emit=mlir -o %t/art.mlir
// RUN: moec-translate --emit-cuda --max-tokens=4 %t/art.mlir -o %t/art.cu
// RUN: FileCheck %s < %t/art.cu

// %a: written by linearBF16 (K = 8), read by an f32 linear (K = 12 cannot load
// 8 at a time): f32. %b: written by that f32 linear, read by linearBF16: f32
// (the f32 kernel writes f32 only). %c: linearBF16 to linearBF16: bf16. The
// results stay f32.
// CHECK: float *v0 = reinterpret_cast<float *>(
// CHECK: float *v1 = reinterpret_cast<float *>(
// CHECK: float *v2 = inPlace ? static_cast<float *>(outputs[0]) : reinterpret_cast<float *>(
// CHECK: BF16 *v3 = reinterpret_cast<BF16 *>(
// CHECK: float *v4 = inPlace ? static_cast<float *>(outputs[1]) : reinterpret_cast<float *>(
// CHECK: MOEC_RETURN_IF_ERROR(linearBF16(in0, T, 8, w0, 12, nullptr, Epilogue{}, v0, stream));
// CHECK: MOEC_RETURN_IF_ERROR(linear(v0, T, 12, w1, 16, nullptr, Epilogue{}, v1, stream));
// CHECK: MOEC_RETURN_IF_ERROR(linearBF16(v1, T, 16, w2, 8, nullptr, Epilogue{}, v2, stream));
// CHECK: MOEC_RETURN_IF_ERROR(linearBF16(in0, T, 8, w3, 16, nullptr, Epilogue{}, v3, stream));
// CHECK: MOEC_RETURN_IF_ERROR(linearBF16(v3, T, 16, w4, 8, nullptr, Epilogue{}, v4, stream));

func.func @f(%x: tensor<?x8xf32> {onnx.name = "x"}) -> (tensor<?x8xf32> {onnx.name = "y"}, tensor<?x8xf32> {onnx.name = "z"}) {
  %w0 = arith.constant dense<0.125> : tensor<12x8xf32>
  %w1 = arith.constant dense<0.25> : tensor<16x12xf32>
  %w2 = arith.constant dense<0.5> : tensor<8x16xf32>
  %w3 = arith.constant dense<0.375> : tensor<16x8xf32>
  %w4 = arith.constant dense<0.75> : tensor<8x16xf32>
  %a = moe.linear %x, %w0 : tensor<?x8xf32>, tensor<12x8xf32> -> tensor<?x12xf32>
  %b = moe.linear %a, %w1 : tensor<?x12xf32>, tensor<16x12xf32> -> tensor<?x16xf32>
  %y = moe.linear %b, %w2 : tensor<?x16xf32>, tensor<8x16xf32> -> tensor<?x8xf32>
  %c = moe.linear %x, %w3 : tensor<?x8xf32>, tensor<16x8xf32> -> tensor<?x16xf32>
  %z = moe.linear %c, %w4 : tensor<?x16xf32>, tensor<8x16xf32> -> tensor<?x8xf32>
  return %y, %z : tensor<?x8xf32>, tensor<?x8xf32>
}
