//===- Compile.h - moec compile as a library ------------------*- C++ -*-===//
//
// What `moec compile` does, callable: import an ONNX model (or parse an .mlir
// file), run the pipeline (moec/Transforms/Pipeline.h) up to a phase, and
// print the IR, or, with a target, write an artifact directory or executable
// (moec/Codegen/ArtifactWriter.h) or print the planned IR. tools/moec is a command line around it;
// registerCompileCLOptions() declares its flags.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_COMPILER_COMPILE_H
#define MOEC_COMPILER_COMPILE_H

#include "moec/Codegen/ArtifactWriter.h"
#include "moec/Transforms/Pipeline.h"

#include "mlir/Support/LLVM.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <string>

namespace mlir {
class MLIRContext;
class PassManager;
} // namespace mlir

namespace llvm::cl {
class OptionCategory;
} // namespace llvm::cl

namespace moec {

/// `moec compile`'s flags. Strings hold the flags' words unchecked (validate()
/// checks them); an unset optional is a flag not given, which for the
/// target-only flags differs from giving their default.
struct CompileOptions {
  /// The model: .onnx is imported, anything else parsed as MLIR.
  std::string inputPath;
  /// -o: the IR's file ("-": stdout), or with a target the artifact
  /// directory (the executable with --emit=exe, the planned IR with
  /// --emit=mlir).
  std::string outputPath = "-";
  /// --compile-to: input, moe, grouped, fp8. Unset: grouped, or fp8 with --fp8.
  std::optional<std::string> compileTo;
  /// --ep-size, --ep-rank: expert parallelism; ep-rank -1 (no --ep-rank): one
  /// program for every rank, which reads its rank at run time. Unset: a
  /// single-device program; --ep-size=1 is a group of one, the program for
  /// every rank of it.
  std::optional<int64_t> epSize;
  int64_t epRank = -1;
  /// --fp8: the experts cast to e4m3 with 128x128 block scales.
  bool fp8 = false;
  /// --target: cpu or cuda writes an artifact; empty prints the IR.
  std::string target;
  /// --max-tokens: the largest token count the artifact accepts, in
  /// [1, 2^24] (moec/runtime/ArtifactFormat.h, kMaxTokensLimit).
  int64_t maxTokens = 8192;
  /// --max-batch, --max-seq: a whole model's KV cache (sequences, positions
  /// each); with a target.
  std::optional<int64_t> maxBatch, maxSeq;
  /// Only with a target:
  /// --runtime-dir: the runtime's install prefix (default: moec's own).
  std::optional<std::string> runtimeDir;
  /// --weights: embedded (default) or external.
  std::optional<std::string> weights;
  /// --emit: artifact (default), exe or mlir.
  std::optional<std::string> emit;
  /// --expert-weights: f32 (default), bf16 (cuda only) or mxfp4 (the
  /// grouped phase; no target or cpu).
  std::optional<std::string> expertWeights;
  /// --random-weights[=SEED]: the flag's text ("" without a value: seed 0);
  /// a checkpoint directory's config.json alone, its weights filled at load.
  std::optional<std::string> randomWeights;
  /// --expert-outputs: f32 (default) or bf16 (cuda with bf16 expert weights).
  std::optional<std::string> expertOutputs;
  /// --precision: a whole model's storage on cuda, bf16 (default there) or
  /// f32 (every target).
  std::optional<std::string> precision;
  /// --kv-cache: with --precision=bf16, the KV cache's rows in bf16 (default)
  /// or f32.
  std::optional<std::string> kvCache;
};

/// Checks the options as `moec compile` does before reading the model; the
/// error's message is the one moec prints after "moec: ".
llvm::Error validate(const CompileOptions &options);

/// --random-weights' seed (validated options), if the flag was given.
std::optional<uint64_t> randomSeedOf(const CompileOptions &options);

/// The pipeline that `options` (validated) runs: with a target, its codegen
/// policy too (bf16 storage, legalisation, for CUDA the stream plan).
PipelineOptions pipelineOptionsFor(const CompileOptions &options);

/// The artifact that `options` (validated, with a target) writes.
codegen::ArtifactOptions artifactOptionsFor(const CompileOptions &options);

/// The error compile() returns for a failure already reported as MLIR
/// diagnostics (by the importer, the parser, a pass or code generation): it
/// has no message of its own to print.
class DiagnosedError : public llvm::ErrorInfo<DiagnosedError> {
public:
  static char ID;
  void log(llvm::raw_ostream &os) const override;
  std::error_code convertToErrorCode() const override;
};

/// Validates `options`, reads the model into `context` (which needs
/// registerAllDialects' dialects), runs the pipeline and prints the IR or
/// writes the artifact (--emit=mlir: prints the planned IR instead).
/// `configurePassManager`, if given, is applied to the pipeline's pass manager
/// first (moec passes applyPassManagerCLOptions).
llvm::Error compile(const CompileOptions &options, mlir::MLIRContext &context,
                    llvm::function_ref<mlir::LogicalResult(mlir::PassManager &)>
                        configurePassManager = {});

/// Declares moec compile's flags (the positional model, -o, --compile-to,
/// --target, ...) in compileCLCategory(); call before parsing the command line.
void registerCompileCLOptions();
/// The category of those flags (what `moec compile --help` lists).
llvm::cl::OptionCategory &compileCLCategory();
/// The options the parsed command line gave.
CompileOptions compileOptionsFromCL();

} // namespace moec

#endif // MOEC_COMPILER_COMPILE_H
