//===- Pipeline.h - moec's compilation pipeline and its phases -*- C++ -*-===//
//
// `moec compile --compile-to=PHASE` stops after PHASE and prints the IR:
//   input    the model as imported (onnx dialect) or parsed
//   moe      every MoE block raised to one moe.layer
//   grouped  moe.layer lowered to route → sort → permute → grouped matmuls →
//            combine (and partitioned across expert-parallel ranks; with
//            --expert-weights=mxfp4 the experts then cast to MXFP4)
//   fp8      the experts' grouped matmuls cast to e4m3 with block scales
//            (only with --fp8)
// After the last phase, for a target (`moec compile --target`), the policy its
// printer reads from the IR: the bf16 storage (moe-cast-experts-bf16), the
// legalisation to func/arith/tensor/moe ops (moe-legalize-for-codegen) and the
// CUDA stream plan (moe-plan-streams).
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
  /// Expert-parallel ranks (moe-partition-experts, after the casts): 0, none;
  /// 1, a group of one, which with epRank -1 is the program for every rank.
  int64_t epSize = 0;
  /// -1: one program for every rank (moe-partition-experts).
  int64_t epRank = -1;
  /// Cast the experts to FP8 (the fp8 phase); stopAfter must then be FP8.
  bool fp8 = false;
  /// Cast the experts to MXFP4 at the end of the grouped phase
  /// (moe-quantize-experts-mxfp4); stopAfter must then be Grouped.
  bool mxfp4Experts = false;
  /// The codegen policy steps below run after the grouped (or fp8) phase
  /// only, and only when asked for; none of them is on by default.
  /// moe-cast-experts-bf16: the CUDA target's --expert-weights=bf16 (and
  /// =mxfp4: the rest of the block) ...
  bool bf16ExpertWeights = false;
  /// ... with --expert-outputs=bf16 (needs bf16ExpertWeights).
  bool bf16ExpertOutputs = false;
  /// moe-cast-model-bf16 (with legalizeForCodegen, after moe-plan-kv-cache):
  /// a whole model's weights, embedding table and KV cache in bf16, the CUDA
  /// target's --precision=bf16 (its default) ...
  bool bf16Models = false;
  /// ... with the KV cache in f32 (--kv-cache=f32).
  bool f32KVCache = false;
  /// moe-plan-streams: the shared expert's side stream (--target=cuda).
  bool planStreams = false;
  /// moe-legalize-for-codegen: only func, arith, tensor and moe ops remain.
  bool legalizeForCodegen = false;
  /// moe-plan-kv-cache (with legalizeForCodegen): a whole model's KV cache,
  /// sequences and positions per sequence.
  int64_t maxBatch = 4;
  int64_t maxSeq = 2048;
};

/// Adds the passes that take a module from the input phase to `options.stopAfter`.
void buildPipeline(mlir::OpPassManager &pm, const PipelineOptions &options);

/// Adds the codegen policy steps that `options` asks for (bf16 storage,
/// legalisation, the experts' partition, stream plan); buildPipeline ends
/// with them.
void addCodegenPolicy(mlir::OpPassManager &pm, const PipelineOptions &options);

/// Whether `options` partition the experts: more than one rank, or a group
/// of one as the program for every rank.
bool partitionsExperts(const PipelineOptions &options);

/// Whether `--expert-weights=WEIGHTS` on `target` runs moe-cast-experts-bf16
/// (PipelineOptions::bf16ExpertWeights): bf16 asks for it; CUDA's MXFP4
/// experts keep the rest of the block as the bf16 build stores it (a shared
/// expert's weights, the rows into the W4A16 kernel), as gpt-oss's
/// checkpoints ship it. The CPU target keeps f32.
bool castsExpertsBF16(llvm::StringRef expertWeights, llvm::StringRef target);

/// Registers `--moec-pipeline="compile-to=PHASE ep-size=N ep-rank=R fp8=B
/// expert-weights=f32|bf16|mxfp4 expert-outputs=f32|bf16 target=none|cpu|cuda
/// precision=bf16|f32 kv-cache=bf16|f32 legalize=B"` for moec-opt
/// (target=cpu|cuda legalizes for the printer; cuda plans the streams too,
/// and stores a whole model as bf16 unless precision=f32).
void registerPipeline();

} // namespace moec

#endif // MOEC_TRANSFORMS_PIPELINE_H
