// The printers read the planned IR (moec compile --target=... --emit=mlir)
// and decide nothing: what the policy passes should have settled, and did
// not, is an error at the op, with no output.
//
// RUN: rm -rf %t && split-file %s %t
// RUN: not moec-translate --emit-cuda %t/onnx-left.mlir -o %t/out 2>&1 | FileCheck %s --check-prefix=ONNX
// ONNX: onnx-left.mlir:2:8: error: cannot generate code for 'onnx.Constant': an onnx op; moe-legalize-for-codegen states the constants and views codegen takes in arith and tensor ops (moec compile --target runs it)
// RUN: not ls %t/out
// RUN: not moec-translate --emit-cpp %t/bf16-weights.mlir 2>&1 | FileCheck %s --check-prefix=CPU
// CPU: bf16-weights.mlir:3:8: error: cannot generate code for 'moe.linear': the weight has element type bf16; the CPU target computes in f32 only
// RUN: moec-translate --emit-cuda %t/bf16-weights.mlir | FileCheck %s --check-prefix=CUDA
// CUDA: linearBF16(in0, T, 16, w0, 16, nullptr, Epilogue{}, v0, stream)
// RUN: not moec-translate --emit-cuda %t/bf16-rows-f32-weights.mlir 2>&1 | FileCheck %s --check-prefix=ROWS
// ROWS: bf16-rows-f32-weights.mlir:5:8: error: cannot generate code for 'moe.linear': the input has element type bf16, which only the bf16-weight matmuls, moe.permute and moe.combine take
// RUN: not moec-translate --emit-cuda %t/bf16-result.mlir 2>&1 | FileCheck %s --check-prefix=RESULT
// RESULT: bf16-result.mlir:3:8: error: cannot generate code for 'moe.linear': a result has element type bf16, which only the bf16-weight matmuls, moe.permute and moe.combine take
// RUN: not moec-translate --emit-cuda %t/stream.mlir 2>&1 | FileCheck %s --check-prefix=STREAM
// STREAM: stream.mlir:3:8: error: cannot generate code for 'moe.linear': moe.stream must be 0 (the main stream) or 1 (the side stream)
// RUN: not moec-translate --emit-cuda %t/dim.mlir 2>&1 | FileCheck %s --check-prefix=DIM
// DIM: dim.mlir:3:8: error: cannot generate code for 'tensor.dim': only the output shape of a view may read a tensor's size

//--- onnx-left.mlir
func.func @f(%x: tensor<?x16xf32>) -> tensor<?x16xf32> {
  %w = "onnx.Constant"() <{value = dense<0.5> : tensor<16x16xf32>}> : () -> tensor<16x16xf32>
  %y = moe.linear %x, %w : tensor<?x16xf32>, tensor<16x16xf32> -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

//--- bf16-weights.mlir
func.func @f(%x: tensor<?x16xf32>) -> tensor<?x16xf32> {
  %w = arith.constant dense<0.5> : tensor<16x16xbf16>
  %y = moe.linear %x, %w : tensor<?x16xf32>, tensor<16x16xbf16> -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

//--- bf16-rows-f32-weights.mlir
func.func @f(%x: tensor<?x16xf32>) -> tensor<?x16xf32> {
  %w1 = arith.constant dense<0.5> : tensor<16x16xbf16>
  %w2 = arith.constant dense<0.5> : tensor<16x16xf32>
  %h = moe.linear %x, %w1 : tensor<?x16xf32>, tensor<16x16xbf16> -> tensor<?x16xbf16>
  %y = moe.linear %h, %w2 : tensor<?x16xbf16>, tensor<16x16xf32> -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

//--- bf16-result.mlir
func.func @f(%x: tensor<?x16xf32>) -> tensor<?x16xf32> {
  %w1 = arith.constant dense<0.5> : tensor<16x16xf32>
  %h = moe.linear %x, %w1 : tensor<?x16xf32>, tensor<16x16xf32> -> tensor<?x16xbf16>
  %w2 = arith.constant dense<0.5> : tensor<16x16xbf16>
  %y = moe.linear %h, %w2 : tensor<?x16xbf16>, tensor<16x16xbf16> -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

//--- stream.mlir
func.func @f(%x: tensor<?x16xf32>) -> tensor<?x16xf32> {
  %w = arith.constant dense<0.5> : tensor<16x16xf32>
  %y = moe.linear %x, %w {moe.stream = 2 : i64} : tensor<?x16xf32>, tensor<16x16xf32> -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

//--- dim.mlir
func.func @f(%x: tensor<?x16xf32>) -> tensor<?x16xf32> {
  %c0 = arith.constant 0 : index
  %d = tensor.dim %x, %c0 : tensor<?x16xf32>
  %e = tensor.empty(%d) : tensor<?x16xf32>
  return %x : tensor<?x16xf32>
}
