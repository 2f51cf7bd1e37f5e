// `moec compile --compile-to=PHASE` stops after a phase and prints the IR.

// RUN: moec compile %fixtures/mixtral/model.onnx --compile-to=input | FileCheck %s --check-prefix=INPUT
// INPUT: "onnx.GatherND"
// INPUT-NOT: moe.

// RUN: moec compile %fixtures/mixtral/model.onnx --compile-to=moe | FileCheck %s --check-prefix=MOE
// MOE: moe.layer
// MOE-NOT: onnx.GatherND
// MOE-NOT: moe.grouped_matmul

// The default phase is grouped.
// RUN: moec compile %fixtures/mixtral/model.onnx | FileCheck %s --check-prefix=GROUPED
// RUN: moec compile %fixtures/mixtral/model.onnx --compile-to=grouped | FileCheck %s --check-prefix=GROUPED
// GROUPED-NOT: moe.layer
// GROUPED: moe.sort {{.*}} {num_experts = 8 : i64}
// GROUPED-COUNT-2: moe.grouped_matmul
// GROUPED: moe.combine
// GROUPED-NOT: moe.all_reduce

// An .mlir input works as well, and expert parallelism partitions the experts.
// RUN: moec compile %S/../../examples/mixtral-block.mlir --ep-size=2 --ep-rank=1 | FileCheck %s --check-prefix=EP
// EP: moe.sort {{.*}} {first_expert = 4 : i64, num_experts = 4 : i64}
// EP: moe.all_reduce {{.*}} {ep_size = 2 : i64}

// MLIR's pass-manager flags work through the driver.
// RUN: moec compile %fixtures/mixtral/model.onnx --mlir-print-ir-after-all -o /dev/null 2>&1 | FileCheck %s --check-prefix=AFTER-ALL
// AFTER-ALL: IR Dump After MoERaiseONNX (moe-raise-onnx)
// AFTER-ALL: IR Dump After MoELowerLayer (moe-lower-layer)

// --fp8 runs through the fp8 phase: e4m3 experts, rows quantized at run time.
// RUN: moec compile %fixtures/mixtral/model.onnx --fp8 | FileCheck %s --check-prefix=FP8
// RUN: moec compile %fixtures/mixtral/model.onnx --fp8 --compile-to=fp8 | FileCheck %s --check-prefix=FP8
// FP8-COUNT-2: moe.quantize
// FP8: tensor<8x64x40xf8E4M3FN>
// RUN: moec compile %fixtures/mixtral/model.onnx --fp8 --compile-to=grouped | FileCheck %s --check-prefix=FP8-STOPPED
// FP8-STOPPED-NOT: moe.quantize

// Errors: a phase without its flag, unknown phases, bad ranks, bad files.
// RUN: not moec compile %fixtures/mixtral/model.onnx --compile-to=fp8 2>&1 | FileCheck %s --check-prefix=FP8-FLAG
// FP8-FLAG: moec: --compile-to=fp8 needs --fp8
// RUN: not moec compile %fixtures/mixtral/model.onnx --compile-to=codegen 2>&1 | FileCheck %s --check-prefix=CODEGEN
// CODEGEN: moec: --compile-to=codegen: code generation writes an artifact; use --target=cpu -o DIR
// RUN: not moec compile %fixtures/mixtral/model.onnx --compile-to=bogus 2>&1 | FileCheck %s --check-prefix=BOGUS
// BOGUS: moec: unknown phase 'bogus' (input, moe, grouped, fp8)
// RUN: not moec compile %fixtures/mixtral/model.onnx --ep-size=2 --ep-rank=2 2>&1 | FileCheck %s --check-prefix=RANK
// RANK: moec: --ep-rank must be in [0, --ep-size)
// RUN: not moec compile %S/does-not-exist.onnx 2>&1 | FileCheck %s --check-prefix=MISSING
// MISSING: does-not-exist.onnx
// RUN: not moec compile %S/../Import/ONNX/Inputs/truncated.onnx 2>&1 | FileCheck %s --check-prefix=TRUNCATED
// TRUNCATED: error: not a valid ONNX model
// RUN: not moec frobnicate 2>&1 | FileCheck %s --check-prefix=USAGE
// USAGE: usage: moec compile
