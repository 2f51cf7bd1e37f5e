//===- Compile.cpp - moec compile as a library ------------------------------===//

#include "moec/Compiler/Compile.h"
#include "moec/runtime/ArtifactFormat.h"

#include "moec/Frontends/Checkpoint/Import.h"
#include "moec/Frontends/ONNX/Import.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"

using namespace mlir;

char moec::DiagnosedError::ID = 0;

void moec::DiagnosedError::log(llvm::raw_ostream &os) const {
  os << "failed; the diagnostics say why";
}

std::error_code moec::DiagnosedError::convertToErrorCode() const {
  return llvm::inconvertibleErrorCode();
}

namespace {

llvm::Error fail(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

llvm::Error diagnosed() { return llvm::make_error<moec::DiagnosedError>(); }

/// The phase `options` asks for: --compile-to's, else grouped, or fp8 with
/// --fp8 (the pipeline then runs through the fp8 phase unless told to stop
/// earlier). None for an unknown phase name.
std::optional<moec::Phase> requestedPhase(const moec::CompileOptions &options) {
  if (options.fp8 && !options.compileTo)
    return moec::Phase::FP8;
  return moec::parsePhase(options.compileTo.value_or("grouped"));
}

/// The checks of the flags that only apply with --target.
llvm::Error validateTarget(const moec::CompileOptions &options, moec::Phase phase) {
  const std::string &target = options.target;
  std::string emit = options.emit.value_or("artifact");
  std::string weights = options.weights.value_or("embedded");
  std::string expertWeights = options.expertWeights.value_or("f32");
  std::string expertOutputs = options.expertOutputs.value_or("f32");
  if (target != "cpu" && target != "cuda")
    return fail("unknown target '" + target + "' (cpu, cuda)");
  if (phase != moec::Phase::Grouped && phase != moec::Phase::FP8)
    return fail("--target compiles the grouped (or fp8) phase; drop --compile-to=" +
                options.compileTo.value_or("grouped"));
  if (emit != "artifact" && emit != "exe" && emit != "mlir")
    return fail("unknown --emit='" + emit + "' (artifact, exe, mlir)");
  if (emit == "exe" && weights == "external")
    return fail("--emit=exe needs the weights (drop --weights=external)");
  if (options.outputPath == "-" && emit != "mlir")
    return fail("--target=" + target +
                (emit == "exe" ? " --emit=exe writes an executable; name it with -o FILE"
                               : " writes an artifact directory; name it with -o DIR"));
  if (options.maxTokens < 1)
    return fail("--max-tokens must be at least 1");
  // Top-k (up to 16) slots a token: the kernels index slots in 32 bits, and
  // the workspace's sizes stay far from overflow.
  if (options.maxTokens > moec::rt::artifact::kMaxTokensLimit)
    return fail("--max-tokens=" + std::to_string(options.maxTokens) + " is more than " +
                std::to_string(moec::rt::artifact::kMaxTokensLimit) +
                ", the most an artifact takes (its kernels index token slots in 32 bits)");
  if (options.maxBatch.value_or(1) < 1 || options.maxSeq.value_or(1) < 1)
    return fail("--max-batch and --max-seq must be at least 1");
  if (weights != "embedded" && weights != "external")
    return fail("unknown --weights='" + weights + "' (embedded, external)");
  if (expertWeights != "f32" && expertWeights != "bf16" && expertWeights != "mxfp4")
    return fail("unknown --expert-weights='" + expertWeights + "' (f32, bf16, mxfp4)");
  if (expertWeights == "bf16" && target != "cuda")
    return fail("--expert-weights=bf16 needs --target=cuda (the CPU target keeps f32)");
  if (expertOutputs != "f32" && expertOutputs != "bf16")
    return fail("unknown --expert-outputs='" + expertOutputs + "' (f32, bf16)");
  if (expertOutputs == "bf16" &&
      (target != "cuda" || (expertWeights != "bf16" && expertWeights != "mxfp4")))
    return fail("--expert-outputs=bf16 needs --target=cuda --expert-weights=bf16|mxfp4 (the "
                "bf16-weight and MXFP4 kernels round their results)");
  // A whole model's precision: bf16 on cuda unless asked otherwise; the CPU
  // target computes in f32.
  std::string precision = options.precision.value_or(target == "cuda" ? "bf16" : "f32");
  if (precision != "f32" && precision != "bf16")
    return fail("unknown --precision='" + precision + "' (bf16, f32)");
  if (precision == "bf16" && target != "cuda")
    return fail("--precision=bf16 needs --target=cuda (the CPU target keeps f32)");
  if (options.kvCache) {
    if (*options.kvCache != "f32" && *options.kvCache != "bf16")
      return fail("unknown --kv-cache='" + *options.kvCache + "' (bf16, f32)");
    if (precision != "bf16")
      return fail("--kv-cache applies to --target=cuda --precision=bf16 (an f32 model keeps "
                  "an f32 KV cache)");
  }
  return llvm::Error::success();
}

/// Imports (.onnx) or parses the model. `input` must outlive the module: the
/// importer's weights point into it. Diagnostics quote .mlir inputs' lines
/// through `sourceMgr`.
OwningOpRef<ModuleOp> readModel(std::unique_ptr<llvm::MemoryBuffer> &input,
                                llvm::StringRef path, llvm::SourceMgr &sourceMgr,
                                MLIRContext &context) {
  if (path.ends_with(".onnx"))
    return moec::onnx::importModel(*input, path, context);
  sourceMgr.AddNewSourceBuffer(std::move(input), llvm::SMLoc());
  return parseSourceFile<ModuleOp>(sourceMgr, &context);
}

} // namespace

std::optional<uint64_t> moec::randomSeedOf(const CompileOptions &options) {
  if (!options.randomWeights)
    return std::nullopt;
  uint64_t seed = 0;
  if (!options.randomWeights->empty() && llvm::StringRef(*options.randomWeights).getAsInteger(10, seed))
    return std::nullopt;
  return seed;
}

llvm::Error moec::validate(const CompileOptions &options) {
  if (options.randomWeights) {
    if (!randomSeedOf(options))
      return fail("--random-weights='" + *options.randomWeights +
                  "': SEED must be a decimal integer in [0, 2^64)");
    if (!checkpoint::isCheckpointDirectory(options.inputPath))
      return fail("--random-weights needs a checkpoint directory (one holding config.json), "
                  "not '" + options.inputPath + "'");
    if (options.weights == "external")
      return fail("--random-weights fills the weights at load; --weights=external is for "
                  "weights filled elsewhere");
  }
  std::optional<Phase> phase = requestedPhase(options);
  if (!phase) {
    if (options.compileTo == "codegen")
      return fail("--compile-to=codegen: code generation writes an artifact; use "
                  "--target=cpu -o DIR");
    return fail("unknown phase '" + *options.compileTo + "' (input, moe, grouped, fp8)");
  }
  if (*phase == Phase::FP8 && !options.fp8)
    return fail("--compile-to=fp8 needs --fp8");
  if (options.expertWeights == "mxfp4") {
    if (options.fp8)
      return fail("--expert-weights=mxfp4 and --fp8 are two casts of the experts; choose one");
    if (*phase != Phase::Grouped)
      return fail("--expert-weights=mxfp4 casts the experts at the end of the grouped phase; "
                  "drop --compile-to=" + *options.compileTo);
  }
  if (options.epSize.value_or(1) < 1)
    return fail("--ep-size must be at least 1");
  if (options.epRank < -1 || options.epRank >= options.epSize.value_or(1))
    return fail("--ep-rank must be in [0, --ep-size), or left out for one artifact that "
                "every rank loads");
  if (!options.target.empty())
    return validateTarget(options, *phase);
  if (options.emit)
    return fail("--emit needs --target");
  if (options.runtimeDir)
    return fail("--runtime-dir needs --target");
  if (options.maxBatch || options.maxSeq)
    return fail("--max-batch and --max-seq need --target (they size a whole model's KV cache)");
  if (options.weights)
    return fail("--weights needs --target");
  if (options.expertWeights && *options.expertWeights != "mxfp4")
    return fail("--expert-weights needs --target=cuda (only =mxfp4 works without a target)");
  if (options.expertOutputs)
    return fail("--expert-outputs needs --target=cuda");
  if (options.precision)
    return fail("--precision needs --target");
  if (options.kvCache)
    return fail("--kv-cache needs --target=cuda");
  return llvm::Error::success();
}

moec::PipelineOptions moec::pipelineOptionsFor(const CompileOptions &options) {
  PipelineOptions pipeline;
  pipeline.stopAfter = requestedPhase(options).value_or(Phase::Grouped);
  pipeline.epSize = options.epSize.value_or(0);
  pipeline.epRank = options.epRank;
  pipeline.fp8 = options.fp8;
  pipeline.mxfp4Experts = options.expertWeights == "mxfp4";
  if (!options.target.empty()) {
    // The target's policy, as IR its printer reads (docs/pipeline.md, "Codegen
    // policy").
    pipeline.bf16ExpertWeights =
        castsExpertsBF16(options.expertWeights.value_or("f32"), options.target);
    pipeline.bf16ExpertOutputs = options.expertOutputs == "bf16";
    pipeline.legalizeForCodegen = true;
    pipeline.planStreams = options.target == "cuda";
    pipeline.bf16Models =
        options.target == "cuda" && options.precision.value_or("bf16") == "bf16";
    pipeline.f32KVCache = options.kvCache == "f32";
    pipeline.maxBatch = options.maxBatch.value_or(pipeline.maxBatch);
    pipeline.maxSeq = options.maxSeq.value_or(pipeline.maxSeq);
  }
  return pipeline;
}

moec::codegen::ArtifactOptions moec::artifactOptionsFor(const CompileOptions &options) {
  codegen::ArtifactOptions artifact;
  artifact.target = options.target == "cuda" ? codegen::Target::CUDA : codegen::Target::CPU;
  artifact.outputDir = options.outputPath;
  artifact.maxTokens = options.maxTokens;
  artifact.externalWeights = options.weights == "external";
  artifact.executable = options.emit == "exe";
  artifact.runtimeDir = options.runtimeDir.value_or("");
  return artifact;
}

llvm::Error moec::compile(const CompileOptions &options, MLIRContext &context,
                          llvm::function_ref<LogicalResult(PassManager &)> configurePassManager) {
  if (llvm::Error error = validate(options))
    return error;
  context.loadAllAvailableDialects();

  std::string error;
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  std::unique_ptr<llvm::MemoryBuffer> input;
  OwningOpRef<ModuleOp> module;
  if (checkpoint::isCheckpointDirectory(options.inputPath)) {
    checkpoint::ImportOptions import;
    import.randomSeed = randomSeedOf(options);
    module = checkpoint::importCheckpoint(options.inputPath, context, import);
  } else {
    input = openInputFile(options.inputPath, &error);
    if (!input)
      return fail(error);
    module = readModel(input, options.inputPath, sourceMgr, context);
  }
  if (!module)
    return diagnosed(); // the importer or parser has reported why

  PassManager pm(&context);
  if (configurePassManager && failed(configurePassManager(pm)))
    return diagnosed();
  buildPipeline(pm, pipelineOptionsFor(options));
  if (failed(pm.run(*module)))
    return diagnosed();

  if (!options.target.empty() && options.emit != "mlir")
    return failed(codegen::emitArtifact(*module, artifactOptionsFor(options))) ? diagnosed()
                                                                              : llvm::Error::success();

  std::unique_ptr<llvm::ToolOutputFile> output = openOutputFile(options.outputPath, &error);
  if (!output)
    return fail(error);
  module->print(output->os());
  output->keep();
  return llvm::Error::success();
}
