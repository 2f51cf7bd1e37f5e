//===- Pipeline.h - moec's compilation pipeline and its phases -*- C++ -*-===//
//
// `moec compile --compile-to=PHASE` stops after PHASE and prints the IR:
//   input    the model as imported (onnx dialect) or parsed
//   moe      every MoE block raised to one moe.layer
//   grouped  moe.layer lowered to route → sort → permute → grouped matmuls →
//            combine (and partitioned across expert-parallel ranks)
// docs/pipeline.md describes each pass.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_TRANSFORMS_PIPELINE_H
#define MOEC_TRANSFORMS_PIPELINE_H

#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringRef.h"

#include <optional>

namespace moec {

enum class Phase { Input, MoE, Grouped };

/// The phase named `name` ("input", "moe", "grouped").
std::optional<Phase> parsePhase(llvm::StringRef name);
llvm::StringRef phaseName(Phase phase);

struct PipelineOptions {
  Phase stopAfter = Phase::Grouped;
  int64_t epSize = 1;
  int64_t epRank = 0;
};

/// Adds the passes that take a module from the input phase to `options.stopAfter`.
void buildPipeline(mlir::OpPassManager &pm, const PipelineOptions &options);

/// Registers `--moec-pipeline="compile-to=PHASE ep-size=N ep-rank=R"` for
/// moec-opt.
void registerPipeline();

} // namespace moec

#endif // MOEC_TRANSFORMS_PIPELINE_H
