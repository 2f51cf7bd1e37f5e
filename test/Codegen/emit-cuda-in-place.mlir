// CUDA artifacts use the caller's buffers in place when every output is a
// kernel's own result and the buffers are device memory (decided at run time
// by GraphCache::inPlace): the input is read where it is, the kernels write the
// outputs where the caller wants them, and the copies through the workspace
// are skipped. Otherwise (an output that is another output, or an input) the
// artifact always copies.

// RUN: rm -rf %t && mkdir -p %t
// RUN: moec compile %s --target=cuda --emit=mlir -o %t/two-results.mlir
// RUN: moec-translate --emit-cuda --max-tokens=4 %t/two-results.mlir -o %t/two-results.cu
// RUN: FileCheck %s < %t/two-results.cu
// RUN: moec compile %S/Inputs/result-returned-twice.mlir --target=cuda --emit=mlir -o %t/twice.mlir
// RUN: moec-translate --emit-cuda --max-tokens=4 %t/twice.mlir -o %t/twice.cu
// RUN: FileCheck %s --check-prefix=COPIES < %t/twice.cu
// RUN: moec compile %S/Inputs/input-returned.mlir --target=cuda --emit=mlir -o %t/input.mlir
// RUN: moec-translate --emit-cuda --max-tokens=4 %t/input.mlir -o %t/input.cu
// RUN: FileCheck %s --check-prefix=COPIES < %t/input.cu

// CHECK-LABEL: Status run(
// CHECK: const CallerBuffer callerInputs[] =
// CHECK-SAME: inputs[0], sizeof(float) * (8 * T)
// CHECK-NEXT: const CallerBuffer callerOutputs[] =
// CHECK-SAME: outputs[0], sizeof(float) * (8 * T)
// CHECK-SAME: outputs[1], sizeof(float) * (16 * T)
// CHECK-NEXT: const bool inPlace = state.graphs.inPlace(T, callerInputs, 1, callerOutputs, 2);
// CHECK-NEXT: float *in0 = inPlace ? static_cast<float *>(const_cast<void *>(inputs[0])) : reinterpret_cast<float *>(workspace + 0);
// CHECK: float *v0 = inPlace ? static_cast<float *>(outputs[0]) : reinterpret_cast<float *>(workspace +
// CHECK: float *v1 = inPlace ? static_cast<float *>(outputs[1]) : reinterpret_cast<float *>(workspace +
// CHECK: if (!inPlace)
// CHECK-NEXT: MOEC_CUDA_TRY(cudaMemcpyAsync(in0, inputs[0], sizeof(*in0) * (8 * T), cudaMemcpyDefault, stream));
// CHECK: MOEC_RETURN_IF_ERROR(linear(in0, T, 8, w0, 8, nullptr, Epilogue{}, v0, stream));
// CHECK: MOEC_RETURN_IF_ERROR(linear(in0, T, 8, w1, 16, nullptr, Epilogue{}, v1, stream));
// CHECK: MOEC_RETURN_IF_ERROR(inPlace ? state.graphs.run(T, stream, compute, callerInputs, 1, callerOutputs, 2)
// CHECK-NEXT: : state.graphs.run(T, stream, compute));
// CHECK-NEXT: if (!inPlace)
// CHECK-NEXT: MOEC_CUDA_TRY(cudaMemcpyAsync(outputs[0], v0,
// CHECK-NEXT: if (!inPlace)
// CHECK-NEXT: MOEC_CUDA_TRY(cudaMemcpyAsync(outputs[1], v1,
// A block generates nothing: no device generation is exported.
// CHECK: MOEC_EXPORT void moec_artifact_reset(void *, int64_t) {}
// CHECK-NOT: moec_artifact_generate

// COPIES-LABEL: Status run(
// COPIES-NOT: CallerBuffer
// COPIES: const bool inPlace = false; // an output is not a kernel's own result
// COPIES-NOT: outputs[{{[0-9]}}]) :
// COPIES: MOEC_RETURN_IF_ERROR(state.graphs.run(T, stream, compute));
// COPIES-NEXT: MOEC_CUDA_TRY(cudaMemcpyAsync(outputs[0],
// COPIES-NEXT: MOEC_CUDA_TRY(cudaMemcpyAsync(outputs[1],

func.func @f(%x: tensor<?x8xf32> {onnx.name = "x"}) -> (tensor<?x8xf32> {onnx.name = "y"}, tensor<?x16xf32> {onnx.name = "z"}) {
  %w0 = arith.constant dense<0.125> : tensor<8x8xf32>
  %w1 = arith.constant dense<0.25> : tensor<16x8xf32>
  %y = moe.linear %x, %w0 : tensor<?x8xf32>, tensor<8x8xf32> -> tensor<?x8xf32>
  %z = moe.linear %x, %w1 : tensor<?x8xf32>, tensor<16x8xf32> -> tensor<?x16xf32>
  return %y, %z : tensor<?x8xf32>, tensor<?x16xf32>
}
