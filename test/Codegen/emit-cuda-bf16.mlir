// REQUIRES: cuda-build
// `moec compile --target=cuda --expert-weights=bf16`: moe.grouped_matmul's
// weights are stored in weights.bin as bf16 (half the bytes; the manifest says
// `bf16`) and multiplied on the tensor cores by groupedMatmulBF16. The rows those
// kernels read (permute's, the gate/up result) are held as bf16 (BF16 *), since
// the kernels round them so anyway; the router, biases, accumulation, the down
// projection's result and the output stay f32. The gate/up weights keep moe's
// concatenated layout in weights.bin and are interleaved on the device when the
// model is created (interleaveGateUp); the kernels are given the interleaved
// layout, whose pairs the prefill GEMM's own epilogue activates.

// RUN: rm -rf %t && mkdir -p %t
// RUN: moec compile %fixtures/mixtral/model.onnx --target=cuda --expert-weights=bf16 --max-tokens=16 -o %t/mixtral
// RUN: moec compile %fixtures/mixtral/model.onnx --target=cuda --expert-weights=bf16 --emit=mlir -o %t/mixtral.mlir
// RUN: moec-translate --emit-cuda --max-tokens=16 %t/mixtral.mlir -o %t/mixtral.cu
// RUN: FileCheck %s --check-prefix=MANIFEST < %t/mixtral/manifest.txt
// MANIFEST: weight gate.weight f32 [8,64] 256 2048
// MANIFEST-NEXT: weight experts.gate_up_proj bf16 [8,80,64] 2304 81920
// MANIFEST-NEXT: weight experts.down_proj bf16 [8,64,40] 84224 40960
// RUN: FileCheck %s --check-prefix=CODE < %t/mixtral.cu
// CODE-LABEL: Status create(
// CODE: MOEC_RETURN_IF_ERROR(state.model.create(weights, weightsBytes, total, plan));
// CODE: MOEC_RETURN_IF_ERROR(interleaveGateUp(state.model.mutableWeights() + 2304, 8, 80, 128, state.model.stream())); // gate/up weights (bf16)
// CODE-NOT: interleaveGateUp
// CODE: MOEC_CUDA_TRY(cudaStreamSynchronize(state.model.stream()));
// CODE-LABEL: Status run(
// CODE: float *v0 = reinterpret_cast<float *>(workspace + 4096);
// CODE: BF16 *v7 = reinterpret_cast<BF16 *>(workspace + 6144);
// CODE-NEXT: const uint16_t *w1 = reinterpret_cast<const uint16_t *>(weights + 2304); // experts.gate_up_proj (bf16)
// CODE-NEXT: BF16 *v8 = reinterpret_cast<BF16 *>(workspace + 10240);
// CODE-NEXT: const uint16_t *w2 = reinterpret_cast<const uint16_t *>(weights + 84224); // experts.down_proj (bf16)
// CODE-NEXT: float *v9 = reinterpret_cast<float *>(workspace + 12800);
// CODE-NEXT: float *v10 = inPlace ? static_cast<float *>(outputs[0]) : reinterpret_cast<float *>(workspace + 20992);
// CODE: MOEC_RETURN_IF_ERROR(linear(in0, T, 64, w0, 8,
// CODE: MOEC_RETURN_IF_ERROR(permute(in0, 64, v3, v5, v6, 2 * T, 2, v7, stream));
// After the permute and after the gate/up matmul, the sort that wrote the
// offsets ran two launches earlier or more: the kernels may stream weights
// before their predecessor completes.
// CODE: MOEC_RETURN_IF_ERROR(groupedMatmulBF16SettledOffsets(v7, 2 * T, 64, w1, 8, 80, v4, nullptr, Epilogue{true, ActivationKind::SiLU, GateUpLayout::Interleaved,
// CODE-SAME: v8, stream));
// CODE: MOEC_RETURN_IF_ERROR(groupedMatmulBF16SettledOffsets(v8, 2 * T, 40, w2, 8, 64, v4, nullptr, Epilogue{}, v9, stream));
// CODE-NOT: groupedMatmul(

// A gate/up bias is interleaved with its weights; the down projection and its
// weights are left alone.
// RUN: moec compile %S/Inputs/concatenated-gate-up-bias.mlir --target=cuda --expert-weights=bf16 --emit=mlir -o %t/bias.mlir
// RUN: moec-translate --emit-cuda --max-tokens=16 %t/bias.mlir -o %t/bias.cu
// RUN: FileCheck %s --check-prefix=BIAS < %t/bias.cu
// BIAS-LABEL: Status create(
// BIAS: interleaveGateUp(state.model.mutableWeights() + 512, 4, 16, 32, state.model.stream())); // gate/up weights (bf16)
// BIAS-NEXT: interleaveGateUp(state.model.mutableWeights() + 2560, 4, 16, 4, state.model.stream())); // gate/up bias
// BIAS-NOT: interleaveGateUp
// BIAS-LABEL: Status run(
// BIAS: const float *w2 = reinterpret_cast<const float *>(weights + 2560); // gate_up_bias
// BIAS: groupedMatmulBF16SettledOffsets(v7, 2 * T, 16, w1, 4, 16, v4, w2, Epilogue{true, ActivationKind::SiLU, GateUpLayout::Interleaved,
// BIAS: groupedMatmulBF16SettledOffsets(v8, 2 * T, 8, w3, 4, 16, v4, nullptr, Epilogue{}, v9, stream));

// Rows and offsets from the caller: the plain kernel, which waits for its
// predecessor before reading the offsets.
// RUN: moec compile %S/Inputs/grouped-matmul-of-arguments.mlir --target=cuda --expert-weights=bf16 --emit=mlir -o %t/arguments.mlir
// RUN: moec-translate --emit-cuda --max-tokens=16 %t/arguments.mlir -o %t/arguments.cu
// RUN: FileCheck %s --check-prefix=ARGUMENTS < %t/arguments.cu
// ARGUMENTS: MOEC_RETURN_IF_ERROR(groupedMatmulBF16(in0, T, 16, w0, 4, 8, in1, nullptr, Epilogue{}, v0, stream));
// ARGUMENTS-NOT: SettledOffsets
// Rows permuted by one sort, offsets from another emitted right before: plain too.
// RUN: moec compile %S/Inputs/grouped-matmul-other-sort.mlir --target=cuda --expert-weights=bf16 --emit=mlir -o %t/other-sort.mlir
// RUN: moec-translate --emit-cuda --max-tokens=16 %t/other-sort.mlir -o %t/other-sort.cu
// RUN: FileCheck %s --check-prefix=OTHER-SORT < %t/other-sort.cu
// OTHER-SORT: MOEC_RETURN_IF_ERROR(sortByExpert(in2, T, 4, 0, v5, v6, v7, v8,
// OTHER-SORT-NEXT: // moe.grouped_matmul
// OTHER-SORT-NEXT: MOEC_RETURN_IF_ERROR(groupedMatmulBF16(v4, T, 16, w0, 4, 8, v6, nullptr, Epilogue{}, v9, stream));

// weights.bin holds the f32 router and the expert weights' bf16 bits (each
// tensor 256-byte aligned); f32 would be 2048 + 2 * (81920 + 40960) bytes of
// tensors.
// RUN: %python -c "import os,sys; print(os.path.getsize(sys.argv[1]))" %t/mixtral/weights.bin | FileCheck %s --check-prefix=SIZE
// SIZE: 125184

// Without the flag the same model keeps f32 weights and the f32 kernel.
// RUN: moec compile %fixtures/mixtral/model.onnx --target=cuda --max-tokens=16 -o %t/f32
// RUN: moec compile %fixtures/mixtral/model.onnx --target=cuda --emit=mlir -o %t/f32.mlir
// RUN: moec-translate --emit-cuda --max-tokens=16 %t/f32.mlir -o %t/f32.cu
// RUN: FileCheck %s --check-prefix=F32 < %t/f32.cu
// F32-NOT: groupedMatmulBF16
// F32-NOT: interleaveGateUp
// F32-NOT: BF16 *
// F32: groupedMatmul(

// The bf16 bits are those of the f32 weights rounded to nearest even; the
// router is byte-identical.
// RUN: %python %S/check-bf16-weights.py %t/f32 %t/mixtral | FileCheck %s --check-prefix=BITS
// BITS-DAG: experts.gate_up_proj: 40960 bf16 values match
// BITS-DAG: experts.down_proj: 20480 bf16 values match

// --weights=external: bench/write_weights.py fills the bf16 weights byte for
// byte as moec would.
// RUN: %python %moec_src/bench/make_block_mlir.py --experts 8 --hidden 64 --inter 40 --top-k 2 -o %t/block.mlir
// RUN: moec compile %t/block.mlir --target=cuda --expert-weights=bf16 -o %t/embedded
// RUN: moec compile %t/block.mlir --target=cuda --expert-weights=bf16 --weights=external -o %t/external
// RUN: FileCheck %s --check-prefix=EXTERNAL < %t/external/manifest.txt
// EXTERNAL: weight gate_up bf16 [8,80,64] 2304 81920
// RUN: %python %moec_src/bench/write_weights.py %t/external --splat router=0.01 --splat gate_up=0.02 --splat down=0.03
// RUN: cmp %t/embedded/weights.bin %t/external/weights.bin

// A shared expert (DeepSeek-V3) is an expert too: its moe.linear weights go bf16
// onto the tensor cores (linearBF16); the router's linear stays f32, since its
// logits choose the experts.
// RUN: moec compile %fixtures/deepseek_v3/model.onnx --target=cuda --expert-weights=bf16 --max-tokens=16 -o %t/deepseek
// RUN: moec compile %fixtures/deepseek_v3/model.onnx --target=cuda --expert-weights=bf16 --emit=mlir -o %t/deepseek.mlir
// RUN: moec-translate --emit-cuda --max-tokens=16 %t/deepseek.mlir -o %t/deepseek.cu
// RUN: FileCheck %s --check-prefix=SHARED-MANIFEST < %t/deepseek/manifest.txt
// (The shared expert is emitted first, on the side stream: emit-cuda-side-stream.mlir.)
// SHARED-MANIFEST-DAG: weight gate.weight f32 [16,64]
// SHARED-MANIFEST-DAG: weight shared_gate_up_weight bf16 [48,64]
// SHARED-MANIFEST-DAG: weight shared_down_weight bf16 [64,24]
// RUN: FileCheck %s --check-prefix=SHARED < %t/deepseek.cu
// SHARED: BF16 *v0 = reinterpret_cast<BF16 *>(
// SHARED: MOEC_RETURN_IF_ERROR(linearBF16(in0, T, 64, w0, 48, nullptr, Epilogue{true, ActivationKind::SiLU, GateUpLayout::Concatenated,
// SHARED: MOEC_RETURN_IF_ERROR(linearBF16(v0, T, 24, w1, 64, nullptr, Epilogue{}, v1, side));
// SHARED: MOEC_RETURN_IF_ERROR(linear(in0, T, 64, w2, 16, nullptr, Epilogue{}, v2, stream));
// SHARED: MOEC_RETURN_IF_ERROR(groupedMatmulBF16SettledOffsets(
// SHARED: MOEC_RETURN_IF_ERROR(groupedMatmulBF16SettledOffsets(

// With --fp8 the experts' gate/up result is quantised by the matmul itself
// (groupedMatmulFP8Quantized: no f32 or bf16 rows between them), and nothing is
// held as bf16 or interleaved.
// RUN: moec compile %fixtures/deepseek_v3/model.onnx --target=cuda --fp8 --emit=mlir -o %t/deepseek-fp8.mlir
// RUN: moec-translate --emit-cuda --max-tokens=16 %t/deepseek-fp8.mlir -o %t/deepseek-fp8.cu
// RUN: FileCheck %s --check-prefix=FP8 < %t/deepseek-fp8.cu
// FP8-NOT: interleaveGateUp
// FP8-NOT: BF16 *
// FP8: groupedMatmulFP8QuantizedSettledOffsets(
// FP8-NOT: quantizeE4M3(
