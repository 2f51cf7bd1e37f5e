//===- Pipeline.cpp - moec's compilation pipeline ---------------------------===//

#include "moec/Transforms/Pipeline.h"

#include "moec/Transforms/Passes.h"

#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

std::optional<moec::Phase> moec::parsePhase(llvm::StringRef name) {
  return llvm::StringSwitch<std::optional<Phase>>(name)
      .Case("input", Phase::Input)
      .Case("moe", Phase::MoE)
      .Case("grouped", Phase::Grouped)
      .Case("fp8", Phase::FP8)
      .Default(std::nullopt);
}

llvm::StringRef moec::phaseName(Phase phase) {
  switch (phase) {
  case Phase::Input: return "input";
  case Phase::MoE: return "moe";
  case Phase::Grouped: return "grouped";
  case Phase::FP8: return "fp8";
  }
  return "?";
}

void moec::buildPipeline(OpPassManager &pm, const PipelineOptions &options) {
  if (options.stopAfter == Phase::Input)
    return;
  // moe: every MoE block, whatever its form, becomes one moe.layer; a
  // whole-model export around them becomes the step program.
  pm.addPass(createMoERaiseONNX());
  pm.addPass(createMoERaiseONNXModel());
  pm.addPass(createMoERaiseExpertLoops());
  pm.addPass(createCanonicalizerPass());
  if (options.stopAfter == Phase::MoE)
    return;
  // grouped: the sorted grouped-GEMM pipeline.
  pm.addPass(createMoELowerLayer());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  if (options.stopAfter == Phase::FP8 && options.fp8) {
    // fp8: e4m3 experts with 128x128 block scales, rows quantized at run time.
    pm.addPass(createMoEQuantizeExpertsFP8());
    pm.addPass(createCanonicalizerPass());
  }
  // MXFP4 experts (weight-only): e2m1 values, an e8m0 scale per 32 along K.
  if (options.stopAfter == Phase::Grouped && options.mxfp4Experts)
    pm.addPass(createMoEQuantizeExpertsMXFP4());
  addCodegenPolicy(pm, options);
}

bool moec::partitionsExperts(const PipelineOptions &options) {
  // A group of one is the every-rank program too (its rank and all-reduce at
  // run time); one rank's program of a group of one is the plain program.
  return options.epSize > 1 || (options.epSize == 1 && options.epRank < 0);
}

bool moec::castsExpertsBF16(llvm::StringRef expertWeights, llvm::StringRef target) {
  return expertWeights == "bf16" || (expertWeights == "mxfp4" && target == "cuda");
}

void moec::addCodegenPolicy(OpPassManager &pm, const PipelineOptions &options) {
  // The decisions codegen makes today, stated in the IR (docs/pipeline.md,
  // "Codegen policy"); each only when asked for. No canonicalizer after them:
  // it could fold what codegen is meant to read as written.
  if (options.bf16ExpertWeights) {
    MoECastExpertsBF16Options cast;
    cast.outputs = options.bf16ExpertOutputs ? "bf16" : "f32";
    pm.addPass(createMoECastExpertsBF16(cast));
  }
  if (options.legalizeForCodegen) {
    pm.addPass(createMoELegalizeForCodegen());
    pm.addPass(createMoEPlanKVCache({options.maxBatch, options.maxSeq}));
    // A whole model (a function with the plan above) in bf16; blocks as they are.
    if (options.bf16Models) {
      MoECastModelBF16Options cast;
      cast.outputs = options.bf16ExpertOutputs ? "bf16" : "f32";
      cast.cache = options.f32KVCache ? "f32" : "bf16";
      pm.addPass(createMoECastModelBF16(cast));
      pm.addPass(createMoEFuseSiblingLinears());
      pm.addPass(createMoEFuseResidualNorm());
    }
  }
  // Then the ranks' experts, of the weights as they are cast (FP8, MXFP4 and
  // bf16 alike): the casts see constants, and a rank's share of codes and
  // scales is a slice along the experts. One rank's program (ep-rank) drops
  // the other experts' constants, which the canonicalizer erases; the
  // program for every rank leaves nothing dead.
  if (partitionsExperts(options)) {
    pm.addPass(createMoEPartitionExperts({options.epSize, options.epRank}));
    if (options.epRank >= 0)
      pm.addPass(createCanonicalizerPass());
  }
  // The stream plan reads the program as it runs: after the partition.
  if (options.planStreams)
    pm.addPass(createMoEPlanStreams());
}

namespace {
struct PipelineCLOptions : PassPipelineOptions<PipelineCLOptions> {
  Option<std::string> compileTo{*this, "compile-to",
                                llvm::cl::desc("the last phase: input, moe, grouped or fp8"),
                                llvm::cl::init("grouped")};
  Option<int64_t> epSize{*this, "ep-size",
                         llvm::cl::desc("expert-parallel ranks; 0 (default): none, 1: a group "
                                        "of one (the program for every rank)"),
                         llvm::cl::init(0)};
  Option<int64_t> epRank{*this, "ep-rank",
                         llvm::cl::desc("this rank; -1: one program for every rank"),
                         llvm::cl::init(-1)};
  Option<bool> fp8{*this, "fp8", llvm::cl::desc("cast the experts to FP8 (the fp8 phase)"),
                   llvm::cl::init(false)};
  Option<std::string> expertWeights{
      *this, "expert-weights",
      llvm::cl::desc("f32 (default), bf16 (moe-cast-experts-bf16 after the last phase) or "
                     "mxfp4 (moe-quantize-experts-mxfp4 at the end of the grouped phase)"),
      llvm::cl::init("f32")};
  Option<std::string> expertOutputs{
      *this, "expert-outputs",
      llvm::cl::desc("f32 (default) or bf16 (with expert-weights=bf16|mxfp4): the experts' results "
                     "for the combine rounded to bf16"),
      llvm::cl::init("f32")};
  Option<std::string> target{*this, "target",
                             llvm::cl::desc("none (default), cpu or cuda: legalizes for the "
                                            "target's printer; cuda plans the side stream "
                                            "(moe-plan-streams)"),
                             llvm::cl::init("none")};
  Option<std::string> precision{
      *this, "precision",
      llvm::cl::desc("with target=cuda, a whole model: bf16 (default; moe-cast-model-bf16) "
                     "or f32"),
      llvm::cl::init("bf16")};
  Option<std::string> kvCache{*this, "kv-cache",
                              llvm::cl::desc("with precision=bf16: the KV cache's element "
                                             "type, bf16 (default) or f32"),
                              llvm::cl::init("bf16")};
  Option<bool> legalize{*this, "legalize",
                        llvm::cl::desc("moe-legalize-for-codegen after the last phase"),
                        llvm::cl::init(false)};
};
} // namespace

void moec::registerPipeline() {
  PassPipelineRegistration<PipelineCLOptions>(
      "moec-pipeline", "moec's pipeline up to a phase (input, moe, grouped, fp8)",
      [](OpPassManager &pm, const PipelineCLOptions &cl) {
        std::optional<Phase> phase = parsePhase(cl.compileTo);
        // An unknown phase adds nothing here; `moec compile` reports it. The
        // pipeline-options parser has no error channel of its own.
        // fp8=true means the cast: it runs through the fp8 phase.
        Phase stop = phase.value_or(Phase::Grouped);
        if (cl.fp8 && stop == Phase::Grouped)
          stop = Phase::FP8;
        // Unknown spellings of the policy options add nothing either; the
        // policy steps apply only from the grouped phase on.
        bool grouped = stop == Phase::Grouped || stop == Phase::FP8;
        PipelineOptions options{stop, cl.epSize, cl.epRank, cl.fp8};
        options.mxfp4Experts = stop == Phase::Grouped && cl.expertWeights == "mxfp4";
        // (With mxfp4, only where the MXFP4 cast runs: the grouped phase.)
        options.bf16ExpertWeights = grouped && castsExpertsBF16(cl.expertWeights, cl.target) &&
                                    (cl.expertWeights != "mxfp4" || options.mxfp4Experts);
        options.bf16ExpertOutputs = options.bf16ExpertWeights && cl.expertOutputs == "bf16";
        options.planStreams = grouped && cl.target == "cuda";
        options.bf16Models = grouped && cl.target == "cuda" && cl.precision == "bf16";
        options.f32KVCache = cl.kvCache == "f32";
        // A target's printer reads only func, arith, tensor and moe ops.
        options.legalizeForCodegen =
            grouped && (cl.legalize || cl.target == "cpu" || cl.target == "cuda");
        buildPipeline(pm, options);
      });
}
