// `moec-translate --emit-cuda` (no nvcc): the CUDA printer's code for
// Mixtral's block: kernels on one stream (run eagerly or as a CUDA graph
// captured per token count), num_valid and the offsets kept on the device, and
// one host synchronisation at the end. The artifact around it:
// emit-cuda-artifact.mlir.

// RUN: rm -rf %t && mkdir -p %t
// RUN: moec compile %fixtures/mixtral/model.onnx --target=cuda --emit=mlir -o %t/mixtral.mlir
// RUN: moec-translate --emit-cuda --max-tokens=16 %t/mixtral.mlir -o %t/mixtral.cu
// RUN: FileCheck %s --check-prefix=CODE < %t/mixtral.cu
// CODE: const bool inPlace = state.graphs.inPlace(T, callerInputs, 1, callerOutputs, 1);
// A run queued on the caller's stream (moec_run_async) starts after the caller's
// queued work, before the inputs are read, and hands the stream back after the
// outputs are written, instead of the host's wait.
// CODE: if (caller)
// CODE-NEXT: MOEC_RETURN_IF_ERROR(state.model.waitForCaller(*caller));
// CODE-NEXT: if (!inPlace)
// CODE-NEXT: MOEC_CUDA_TRY(cudaMemcpyAsync(in0, inputs[0], sizeof(*in0) * (64 * T), cudaMemcpyDefault, stream));
// CODE: auto compute = [&]() -> Status {
// CODE: MOEC_RETURN_IF_ERROR(linear(in0, T, 64, w0, 8, nullptr, Epilogue{}, v0, stream));
// CODE: MOEC_RETURN_IF_ERROR(route(v0, T, 8, nullptr, Routing{RoutingKind::SoftmaxTopK, 2, true, 1, 1, 0x1p+0f}, v1, v2, stream));
// The sort also writes the inverse permutation (v6), which permute and the
// combine read instead of inverting the permutation again.
// CODE: MOEC_RETURN_IF_ERROR(sortByExpert(v1, 2 * T, 8, 0, v3, v4, v5, v6, sortWorkspace + state.sortOffset[0], state.sortBytes[0], stream));
// CODE-NOT: cudaStreamSynchronize
// CODE: MOEC_RETURN_IF_ERROR(permute(in0, 64, v3, v5, v6, 2 * T, 2, v7, stream));
// CODE-NOT: cudaStreamSynchronize
// CODE: MOEC_RETURN_IF_ERROR(combineRows(v9, v6, 64, v2, T, 2, nullptr, nullptr, v10, stream));
// CODE: MOEC_RETURN_IF_ERROR(inPlace ? state.graphs.run(T, stream, compute, callerInputs, 1, callerOutputs, 1)
// CODE-NEXT: : state.graphs.run(T, stream, compute));
// CODE-NEXT: if (!inPlace)
// CODE-NEXT: MOEC_CUDA_TRY(cudaMemcpyAsync(outputs[0], v10, sizeof(*v10) * (64 * T), cudaMemcpyDefault, stream));
// CODE-NEXT: if (caller)
// CODE-NEXT: return state.model.releaseCaller(*caller);
// CODE: MOEC_CUDA_TRY(cudaStreamSynchronize(stream));
// CODE-NOT: cudaStreamSynchronize
