// REQUIRES: cuda-build
// `moec compile --target=cuda --expert-weights=mxfp4`: MXFP4 experts on the
// GPU. The weights are stored as for the CPU target (manifest f4e2m1, packed,
// beside their f8e8m0 scale bytes: emit-cpp-mxfp4.mlir) and multiplied by
// groupedMatmulMXFP4 (runtime/src/cuda/GroupedMatmulMXFP4.cu: dequantised in
// registers to bf16, bf16 tensor cores), which takes the bf16 kernel's
// arguments with the scales after the codes. The rest of the block is stored
// as --expert-weights=bf16 stores it (moe-cast-experts-bf16): the permuted
// rows and the gate/up results in bf16 (the kernel rounds its rows to bf16
// as it multiplies, so no bit changes), a shared expert's weights in bf16,
// the router's in f32; with --expert-outputs=bf16 the down results are bf16
// too. The gate/up rows keep their layout
// (no interleaveGateUp: the kernel's tiles read either), but each weight's
// codes are re-laid out once on the device when the model is created
// (relayoutMXFP4: the order the kernel decodes fastest, MXFP4Layout.cuh);
// after the permute and after the gate/up matmul the settled-offsets variant.

// RUN: rm -rf %t && split-file %s %t
// RUN: moec compile %fixtures/mixtral/model.onnx --target=cuda --expert-weights=mxfp4 --max-tokens=16 -o %t/mixtral
// RUN: FileCheck %s --check-prefix=MANIFEST < %t/mixtral/manifest.txt
// MANIFEST: weight gate.weight f32 [8,64] 256 2048
// MANIFEST-NEXT: weight experts_e2m1 f4e2m1 [8,80,64] 2304 20480
// MANIFEST-NEXT: weight experts_e8m0_scales f8e8m0 [8,80,2] 22784 1280
// MANIFEST-NEXT: weight experts_e2m1_1 f4e2m1 [8,64,40] 24064 16384
// MANIFEST-NEXT: weight experts_e8m0_scales_1 f8e8m0 [8,64,2] 40448 1024
// RUN: moec compile %fixtures/mixtral/model.onnx --target=cuda --expert-weights=mxfp4 --emit=mlir -o %t/mixtral.mlir
// RUN: moec-translate --emit-cuda --max-tokens=16 %t/mixtral.mlir -o %t/mixtral.cu
// RUN: FileCheck %s --check-prefix=CODE < %t/mixtral.cu
// CODE-LABEL: Status create(
// CODE-NOT: interleaveGateUp
// CODE: MOEC_RETURN_IF_ERROR(relayoutMXFP4(state.model.mutableWeights() + 2304, 20480, state.model.stream())); // MXFP4 codes
// CODE-NEXT: MOEC_RETURN_IF_ERROR(relayoutMXFP4(state.model.mutableWeights() + 24064, 16384, state.model.stream())); // MXFP4 codes
// CODE-NEXT: MOEC_CUDA_TRY(cudaStreamSynchronize(state.model.stream()));
// CODE-NOT: interleaveGateUp
// CODE-LABEL: Status run(
// CODE: BF16 *v7 = reinterpret_cast<BF16 *>(workspace + 6144);
// CODE-NEXT: const uint8_t *w1 = reinterpret_cast<const uint8_t *>(weights + 2304); // experts_e2m1
// CODE-NEXT: const uint8_t *w2 = reinterpret_cast<const uint8_t *>(weights + 22784); // experts_e8m0_scales
// CODE-NEXT: BF16 *v8 = reinterpret_cast<BF16 *>(workspace + 10240);
// CODE-NEXT: const uint8_t *w3 = reinterpret_cast<const uint8_t *>(weights + 24064); // experts_e2m1_1
// CODE-NEXT: const uint8_t *w4 = reinterpret_cast<const uint8_t *>(weights + 40448); // experts_e8m0_scales_1
// CODE-NEXT: float *v9 = reinterpret_cast<float *>(workspace + 12800);
// CODE: MOEC_RETURN_IF_ERROR(permute(in0, 64, v3, v5, v6, 2 * T, 2, v7, stream));
// CODE: MOEC_RETURN_IF_ERROR(groupedMatmulMXFP4SettledOffsets(v7, 2 * T, 64, w1, w2, 8, 80, v4, nullptr, Epilogue{true, ActivationKind::SiLU, GateUpLayout::Concatenated,
// CODE-SAME: v8, stream));
// CODE: MOEC_RETURN_IF_ERROR(groupedMatmulMXFP4SettledOffsets(v8, 2 * T, 40, w3, w4, 8, 64, v4, nullptr, Epilogue{}, v9, stream));
// CODE-NOT: groupedMatmul(
// CODE-NOT: groupedMatmulBF16

// --expert-outputs=bf16: the down results for the combine in bf16.
// RUN: moec compile %fixtures/mixtral/model.onnx --target=cuda --expert-weights=mxfp4 --expert-outputs=bf16 --emit=mlir -o %t/mixtral-out.mlir
// RUN: moec-translate --emit-cuda --max-tokens=16 %t/mixtral-out.mlir -o %t/mixtral-out.cu
// RUN: FileCheck %s --check-prefix=OUTPUTS < %t/mixtral-out.cu
// OUTPUTS: BF16 *v9 = reinterpret_cast<BF16 *>(workspace + 12800);
// OUTPUTS: groupedMatmulMXFP4SettledOffsets(v8, 2 * T, 40, w3, w4, 8, 64, v4, nullptr, Epilogue{}, v9, stream));

// DeepSeek-V3: the shared expert in bf16 (linearBF16), the router in f32.
// RUN: moec compile %fixtures/deepseek_v3/model.onnx --target=cuda --expert-weights=mxfp4 --emit=mlir -o %t/deepseek_v3.mlir
// RUN: moec-translate --emit-cuda --max-tokens=16 %t/deepseek_v3.mlir -o %t/deepseek_v3.cu
// RUN: FileCheck %s --check-prefix=SHARED < %t/deepseek_v3.cu
// SHARED: const uint16_t *w0 = reinterpret_cast<const uint16_t *>(weights + 256); // shared_gate_up_weight (bf16)
// SHARED: const uint16_t *w1 = reinterpret_cast<const uint16_t *>(weights + 6400); // shared_down_weight (bf16)
// SHARED: const float *w2 = reinterpret_cast<const float *>(weights + 9472); // gate.weight
// SHARED: linearBF16(in0, T, 64, w0, 48,
// SHARED: linearBF16(v0, T, 24, w1, 64,
// SHARED: linear(in0, T, 64, w2, 16,
// SHARED: groupedMatmulMXFP4SettledOffsets(

// gpt-oss: biases and the clamped SwiGLU on interleaved gate/up rows, as given.
// RUN: moec compile %fixtures/gpt_oss/model.onnx --target=cuda --expert-weights=mxfp4 --emit=mlir -o %t/gpt_oss.mlir
// RUN: moec-translate --emit-cuda --max-tokens=16 %t/gpt_oss.mlir -o %t/gpt_oss.cu
// RUN: FileCheck %s --check-prefix=GPT-OSS < %t/gpt_oss.cu
// GPT-OSS-NOT: interleaveGateUp
// GPT-OSS: groupedMatmulMXFP4SettledOffsets(v7, 2 * T, 64, w2, w3, 8, 80, v4, w4, Epilogue{true, ActivationKind::SiLU, GateUpLayout::Interleaved, 0x1.b3b646p+0f, 0x1p+0f, 0x1.cp+2f}, v8, stream));
// GPT-OSS: groupedMatmulMXFP4SettledOffsets(v8, 2 * T, 40, w5, w6, 8, 64, v4, w7, Epilogue{}, v9, stream));

// gpt-oss's MXFP4 checkpoint as imported (no cast): a whole model's experts.
// RUN: moec compile %fixtures/models/gpt_oss_mxfp4/checkpoint --target=cuda --emit=mlir -o %t/model.mlir
// RUN: moec-translate --emit-cuda %t/model.mlir -o %t/model.cu
// RUN: FileCheck %s --check-prefix=MODEL < %t/model.cu
// MODEL: groupedMatmulMXFP4SettledOffsets({{v[0-9]+}}, 2 * T, 64, {{w[0-9]+}}, {{w[0-9]+}}, 8, 64, {{v[0-9]+}}, {{w[0-9]+}}, Epilogue{true, ActivationKind::SiLU, GateUpLayout::Interleaved,
// MODEL: groupedMatmulMXFP4SettledOffsets({{v[0-9]+}}, 2 * T, 32, {{w[0-9]+}}, {{w[0-9]+}}, 8, 64, {{v[0-9]+}}, {{w[0-9]+}}, Epilogue{}, {{v[0-9]+}}, stream));

// Rows and offsets from the caller: the plain kernel.
// RUN: moec compile %t/k40.mlir --target=cuda --emit=mlir -o %t/k40-planned.mlir
// RUN: moec-translate --emit-cuda --max-tokens=16 %t/k40-planned.mlir -o %t/k40.cu
// RUN: FileCheck %s --check-prefix=ARGUMENTS < %t/k40.cu
// ARGUMENTS: MOEC_RETURN_IF_ERROR(relayoutMXFP4(state.model.mutableWeights() + {{[0-9]+}}, 32, state.model.stream())); // MXFP4 codes
// ARGUMENTS: MOEC_RETURN_IF_ERROR(groupedMatmulMXFP4(in0, T, 40, w0, w1, 1, 1, in1, nullptr, Epilogue{}, v0, stream));
// ARGUMENTS-NOT: SettledOffsets

// K not a multiple of 8 (the kernel loads 16 bytes of a row at a time): an
// error at the op, and no artifact.
// RUN: not moec compile %t/k35.mlir --target=cuda -o %t/a 2>&1 | FileCheck %s --check-prefix=K35
// K35: k35.mlir:4:8: error: cannot generate code for 'moe.grouped_matmul': K = 35 is not a multiple of 8, which the CUDA target's MXFP4 kernel needs
// RUN: not ls %t/a

//--- k40.mlir
func.func @f(%x: tensor<?x40xf32>, %o: tensor<1xi32>) -> tensor<?x1xf32> {
  %w = arith.constant dense<[[[0.5, 6.0, -6.0, -0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -2.0, 0.0, 0.0, 0.0, 0.0, 0.0]]]> : tensor<1x1x40xf4E2M1FN>
  %s = arith.constant dense<[[[1.0, 2.0]]]> : tensor<1x1x2xf8E8M0FNU>
  %0 = moe.grouped_matmul %x, %w, %o weight_scales(%s : tensor<1x1x2xf8E8M0FNU>) : tensor<?x40xf32>, tensor<1x1x40xf4E2M1FN>, tensor<1xi32> -> tensor<?x1xf32>
  return %0 : tensor<?x1xf32>
}

//--- k35.mlir
func.func @f(%x: tensor<?x35xf32>, %o: tensor<1xi32>) -> tensor<?x1xf32> {
  %w = arith.constant dense<[[[0.5, 6.0, -6.0, -0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -2.0]]]> : tensor<1x1x35xf4E2M1FN>
  %s = arith.constant dense<[[[1.0, 2.0]]]> : tensor<1x1x2xf8E8M0FNU>
  %0 = moe.grouped_matmul %x, %w, %o weight_scales(%s : tensor<1x1x2xf8E8M0FNU>) : tensor<?x35xf32>, tensor<1x1x35xf4E2M1FN>, tensor<1xi32> -> tensor<?x1xf32>
  return %0 : tensor<?x1xf32>
}
