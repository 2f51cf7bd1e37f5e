//===- Pipeline.h - moec's compilation pipeline and its phases -*- C++ -*-===//
//
// `moec compile --compile-to=PHASE` stops after PHASE and prints the IR:
//   input    the model as imported (onnx dialect) or parsed
//   moe      every MoE block raised to one moe.layer
//   grouped  moe.layer lowered to route → sort → permute → grouped matmuls →
//            combine (and partitioned across expert-parallel ranks)
//   fp8      the experts' grouped matmuls cast to e4m3 with block scales
//            (only with --fp8)
// docs/pipeline.md describes each pass.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_TRANSFORMS_PIPELINE_H
#define MOEC_TRANSFORMS_PIPELINE_H

#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringRef.h"

#include <optional>

namespace moec {

enum class Phase { Input, MoE, Grouped, FP8 };

/// The phase named `name` ("input", "moe", "grouped", "fp8").
std::optional<Phase> parsePhase(llvm::StringRef name);
llvm::StringRef phaseName(Phase phase);

struct PipelineOptions {
  Phase stopAfter = Phase::Grouped;
  int64_t epSize = 1;
  int64_t epRank = 0;
  /// Cast the experts to FP8 (the fp8 phase); stopAfter must then be FP8.
  bool fp8 = false;
};

/// Adds the passes that take a module from the input phase to `options.stopAfter`.
void buildPipeline(mlir::OpPassManager &pm, const PipelineOptions &options);

/// Registers `--moec-pipeline="compile-to=PHASE ep-size=N ep-rank=R fp8=B"` for
/// moec-opt.
void registerPipeline();

} // namespace moec

#endif // MOEC_TRANSFORMS_PIPELINE_H
