// A shared expert (moe.combine's addend, and its gate, computed from the inputs
// alone) runs on the artifact's side stream, beside the routed chain: forked
// before the router, joined right before the combine (docs/design.md, "The
// shared expert beside the routed experts"). Anything else stays on the main
// stream.

// RUN: rm -rf %t && mkdir -p %t
// RUN: moec compile %S/Inputs/shared-expert.mlir --target=cuda --expert-weights=bf16 --emit=mlir -o %t/gated.mlir
// RUN: moec-translate --emit-cuda --max-tokens=16 %t/gated.mlir -o %t/gated.cu
// RUN: FileCheck %s --check-prefix=GATED < %t/gated.cu
// GATED-LABEL: auto compute = [&]() -> Status {
// GATED-NEXT: // The shared expert, on the side stream
// GATED-NEXT: MOEC_RETURN_IF_ERROR(state.model.forkSide());
// GATED-NEXT: cudaStream_t side = state.model.sideStream();
// GATED: MOEC_RETURN_IF_ERROR(linearBF16(in0, T, 16, w0, 16, nullptr, Epilogue{}, v0, side));
// GATED: MOEC_RETURN_IF_ERROR(linearBF16(in0, T, 16, w1, 1, nullptr, Epilogue{}, v1, side));
// GATED-NOT: {{, side\)}}
// GATED: sortByExpert(in1, T, 4, 0, {{.*}}, stream));
// GATED: permute({{.*}}, stream));
// GATED: groupedMatmulBF16SettledOffsets({{.*}}, stream));
// GATED-NEXT: MOEC_RETURN_IF_ERROR(state.model.joinSide());
// GATED-NEXT: // moe.combine
// GATED-NEXT: MOEC_RETURN_IF_ERROR(combineRows({{.*}}, v0, v1, {{.*}}, stream));
// GATED-NOT: {{, side\)}}

// A real export: DeepSeek-V3's shared expert (gate/up, then down).
// RUN: moec compile %fixtures/deepseek_v3/model.onnx --target=cuda --expert-weights=bf16 --emit=mlir -o %t/deepseek.mlir
// RUN: moec-translate --emit-cuda --max-tokens=16 %t/deepseek.mlir -o %t/deepseek.cu
// RUN: FileCheck %s --check-prefix=DEEPSEEK < %t/deepseek.cu
// DEEPSEEK-LABEL: auto compute = [&]() -> Status {
// DEEPSEEK: MOEC_RETURN_IF_ERROR(state.model.forkSide());
// DEEPSEEK: linearBF16(in0, {{.*}}, Epilogue{true, ActivationKind::SiLU, GateUpLayout::Concatenated{{.*}}, [[H:v[0-9]+]], side));
// DEEPSEEK-NEXT: // moe.linear
// DEEPSEEK-NEXT: linearBF16([[H]], {{.*}}, [[SHARED:v[0-9]+]], side));
// DEEPSEEK-NEXT: // moe.linear
// DEEPSEEK-NEXT: MOEC_RETURN_IF_ERROR(linear(in0, {{.*}}, stream));
// DEEPSEEK: MOEC_RETURN_IF_ERROR(state.model.joinSide());
// DEEPSEEK-NEXT: // moe.combine
// DEEPSEEK-NEXT: combineRows({{.*}}, [[SHARED]], nullptr, {{.*}}, stream));

// The shared expert's result is also a result of the function: main stream.
// RUN: moec compile %S/Inputs/shared-expert-returned.mlir --target=cuda --expert-weights=bf16 --emit=mlir -o %t/returned.mlir
// RUN: moec-translate --emit-cuda --max-tokens=16 %t/returned.mlir -o %t/returned.cu
// RUN: FileCheck %s --check-prefix=MAIN < %t/returned.cu
// It reads a projection the routed experts read too: main stream.
// RUN: moec compile %S/Inputs/shared-expert-shared-input.mlir --target=cuda --expert-weights=bf16 --emit=mlir -o %t/shared-input.mlir
// RUN: moec-translate --emit-cuda --max-tokens=16 %t/shared-input.mlir -o %t/shared-input.cu
// RUN: FileCheck %s --check-prefix=MAIN < %t/shared-input.cu
// No shared expert at all: main stream.
// RUN: moec compile %fixtures/mixtral/model.onnx --target=cuda --expert-weights=bf16 --emit=mlir -o %t/mixtral.mlir
// RUN: moec-translate --emit-cuda --max-tokens=16 %t/mixtral.mlir -o %t/mixtral.cu
// RUN: FileCheck %s --check-prefix=MAIN < %t/mixtral.cu
// MAIN-LABEL: auto compute = [&]() -> Status {
// MAIN-NOT: {{, side\)}}
// MAIN: combineRows({{.*}}, stream));
// MAIN-NOT: {{, side\)}}
