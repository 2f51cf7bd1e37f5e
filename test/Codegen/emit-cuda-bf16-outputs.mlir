// --expert-outputs=bf16 (with --expert-weights=bf16): a bf16-weight grouped
// matmul whose result only moe.combine reads writes it as bf16 rows (BF16 *),
// which the combine reads as they are (docs/design.md, "bf16 expert outputs").
// Nothing else changes storage: the router's logits, the shared expert's
// result (combine's addend) and the output stay f32, and a grouped matmul
// result that anything else reads stays f32.

// RUN: rm -rf %t && mkdir -p %t

// Mixtral: the down projection's result v9 is bf16, and combine reads it.
// RUN: moec compile %fixtures/mixtral/model.onnx --target=cuda --expert-weights=bf16 --expert-outputs=bf16 --emit=mlir -o %t/mixtral.mlir
// RUN: moec-translate --emit-cuda --max-tokens=16 %t/mixtral.mlir -o %t/mixtral.cu
// RUN: FileCheck %s --check-prefix=MIXTRAL < %t/mixtral.cu
// MIXTRAL-LABEL: Status run(
// MIXTRAL: float *v0 = reinterpret_cast<float *>(
// MIXTRAL: BF16 *v8 = reinterpret_cast<BF16 *>(
// MIXTRAL: BF16 *v9 = reinterpret_cast<BF16 *>(
// MIXTRAL-NEXT: float *v10 = inPlace ? static_cast<float *>(outputs[0]) : reinterpret_cast<float *>(
// MIXTRAL: MOEC_RETURN_IF_ERROR(groupedMatmulBF16SettledOffsets(v8, 2 * T, 40, w2, 8, 64, v4, nullptr, Epilogue{}, v9, stream));
// MIXTRAL: MOEC_RETURN_IF_ERROR(combineRows(v9, v6, 64, v2, T, 2, nullptr, nullptr, v10, stream));

// Half the bytes of the down rows: 16 slots x 64 columns, 2048 bytes of
// workspace where f32 takes 4096 (the output follows them).
// RUN: moec compile %fixtures/mixtral/model.onnx --target=cuda --expert-weights=bf16 --emit=mlir -o %t/mixtral-f32.mlir
// RUN: moec-translate --emit-cuda --max-tokens=16 %t/mixtral-f32.mlir -o %t/mixtral-f32.cu
// RUN: FileCheck %s --check-prefix=SPAN-BF16 < %t/mixtral.cu
// RUN: FileCheck %s --check-prefix=SPAN-F32 < %t/mixtral-f32.cu
// SPAN-BF16: BF16 *v9 = reinterpret_cast<BF16 *>(workspace + 12800);
// SPAN-BF16-NEXT: float *v10 = inPlace ? static_cast<float *>(outputs[0]) : reinterpret_cast<float *>(workspace + 16896);
// SPAN-F32: float *v9 = reinterpret_cast<float *>(workspace + 12800);
// SPAN-F32-NEXT: float *v10 = inPlace ? static_cast<float *>(outputs[0]) : reinterpret_cast<float *>(workspace + 20992);
// SPAN-F32: MOEC_RETURN_IF_ERROR(combineRows(v9,

// FP8 experts (--fp8, the rest bf16): the down matmul of quantised rows
// writes bf16 rows for the combine; the gate/up result, which is quantised
// again, never leaves the kernel as bf16.
// RUN: moec compile %fixtures/mixtral/model.onnx --target=cuda --fp8 --expert-weights=bf16 --expert-outputs=bf16 --emit=mlir -o %t/mixtral-fp8.mlir
// RUN: moec-translate --emit-cuda --max-tokens=16 %t/mixtral-fp8.mlir -o %t/mixtral-fp8.cu
// RUN: FileCheck %s --check-prefix=FP8 < %t/mixtral-fp8.cu
// FP8-LABEL: Status run(
// FP8: BF16 *v12 = reinterpret_cast<BF16 *>(
// FP8: groupedMatmulFP8QuantizedSettledOffsets(
// FP8: MOEC_RETURN_IF_ERROR(groupedMatmulFP8SettledOffsets(v9, 2 * T, v10, 40, w3, w4, 8, 64, v4, nullptr, Epilogue{}, v12, stream));
// FP8: MOEC_RETURN_IF_ERROR(combineRows(v12, v6, 64, v2, T, 2, nullptr, nullptr, v13, stream));

// DeepSeek-V3: the routed experts' down result v11 is bf16; the shared
// expert's result v1 (linearBF16, combine's addend) and the router's logits v2
// stay f32.
// RUN: moec compile %fixtures/deepseek_v3/model.onnx --target=cuda --expert-weights=bf16 --expert-outputs=bf16 --emit=mlir -o %t/deepseek.mlir
// RUN: moec-translate --emit-cuda --max-tokens=16 %t/deepseek.mlir -o %t/deepseek.cu
// RUN: FileCheck %s --check-prefix=DEEPSEEK < %t/deepseek.cu
// DEEPSEEK-LABEL: Status run(
// DEEPSEEK: float *v1 = reinterpret_cast<float *>(
// DEEPSEEK: float *v2 = reinterpret_cast<float *>(
// DEEPSEEK: BF16 *v11 = reinterpret_cast<BF16 *>(
// DEEPSEEK: MOEC_RETURN_IF_ERROR(linearBF16(v0, T, 24, w1, 64, nullptr, Epilogue{}, v1, side));
// DEEPSEEK: MOEC_RETURN_IF_ERROR(groupedMatmulBF16SettledOffsets(v10, 4 * T, 24, w5, 16, 64, v6, nullptr, Epilogue{}, v11, stream));
// DEEPSEEK: MOEC_RETURN_IF_ERROR(combineRows(v11, v8, 64, v4, T, 4, v1, nullptr, v12, stream));

// A grouped matmul result that the function returns stays f32.
// RUN: moec compile %S/Inputs/grouped-matmul-of-arguments.mlir --target=cuda --expert-weights=bf16 --expert-outputs=bf16 --emit=mlir -o %t/arguments.mlir
// RUN: moec-translate --emit-cuda --max-tokens=16 %t/arguments.mlir -o %t/arguments.cu
// RUN: FileCheck %s --check-prefix=RETURNED < %t/arguments.cu
// RETURNED-NOT: BF16 *
// RETURNED: MOEC_RETURN_IF_ERROR(groupedMatmulBF16(in0, T, 16, w0, 4, 8, in1, nullptr, Epilogue{}, v0, stream));
