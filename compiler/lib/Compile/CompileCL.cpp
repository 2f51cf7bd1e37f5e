//===- CompileCL.cpp - moec compile's command-line flags --------------------===//
//
// The flags are declared when registerCompileCLOptions() is called (not at
// load time), so linking the library into another tool adds none of them.
//
//===----------------------------------------------------------------------===//

#include "moec/Compiler/Compile.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/ManagedStatic.h"

#include <cassert>

namespace cl = llvm::cl;

cl::OptionCategory &moec::compileCLCategory() {
  static cl::OptionCategory category("moec compile options");
  return category;
}

namespace {

/// A flag in moec compile's category.
template <typename T> struct Flag : cl::opt<T> {
  template <typename... Mods>
  explicit Flag(const Mods &...mods) : cl::opt<T>(mods..., cl::cat(moec::compileCLCategory())) {}
};

struct CompileCLOptions {
  Flag<std::string> inputPath{cl::Positional, cl::desc("<model.onnx, model.mlir or a checkpoint directory>"), cl::Required};
  Flag<std::string> outputPath{"o", cl::desc("output file"), cl::init("-")};
  Flag<std::string> compileTo{
      "compile-to", cl::desc("stop after this phase and print the IR: input, moe, grouped, fp8"),
      cl::init("grouped")};
  Flag<int64_t> epSize{"ep-size",
                       cl::desc("expert-parallel ranks (1: a group of one, through the same "
                                "program as N ranks)"),
                       cl::init(1)};
  Flag<int64_t> epRank{"ep-rank",
                       cl::desc("this rank, in [0, ep-size); left out: one artifact that every "
                                "rank loads"),
                       cl::init(-1)};
  Flag<bool> fp8{"fp8",
                 cl::desc("cast the experts to FP8 e4m3 with 128x128 block "
                          "scales (the fp8 phase)"),
                 cl::init(false)};
  Flag<std::string> target{
      "target", cl::desc("generate code for this target and write an artifact (-o): cpu, cuda"),
      cl::init("")};
  Flag<int64_t> maxTokens{"max-tokens",
                          cl::desc("largest token count the artifact accepts (--target)"),
                          cl::init(8192)};
  Flag<int64_t> maxBatch{"max-batch",
                         cl::desc("with --target, a whole model: sequences its KV cache holds "
                                  "(default 4)"),
                         cl::init(4)};
  Flag<int64_t> maxSeq{"max-seq",
                       cl::desc("with --target, a whole model: positions per sequence in its "
                                "KV cache, prompt and generated tokens (default 2048)"),
                       cl::init(2048)};
  Flag<std::string> runtimeDir{
      "runtime-dir",
      cl::desc("with --target: the prefix the runtime is installed under (include/, "
               "lib/libmoec_kernels*.a, bin/moec-run); default: the prefix of this moec"),
      cl::init("")};
  Flag<std::string> weights{
      "weights",
      cl::desc("with --target: 'embedded' writes weights.bin (default); 'external' writes only "
               "its layout (the manifest's weight lines), to be filled elsewhere"),
      cl::init("embedded")};
  Flag<std::string> emit{
      "emit",
      cl::desc("with --target: 'artifact' writes the artifact directory -o DIR (default); 'exe' "
               "writes one executable -o FILE that runs the model with moec-run's flags; 'mlir' "
               "prints the planned IR the target's printer reads (-o FILE, default stdout)"),
      cl::init("artifact")};
  Flag<std::string> randomWeights{
      "random-weights", cl::ValueOptional, cl::value_desc("SEED"),
      cl::desc("a checkpoint directory: read config.json alone and fill every weight at load "
               "(random normals of initializer_range, ones, zeros; docs/artifact.md) from "
               "SEED (default 0); for benchmarks of real shapes without their weights"),
      cl::init("")};
  Flag<std::string> expertWeights{
      "expert-weights",
      cl::desc("'f32' (default); with --target=cuda 'bf16' (grouped matmul weights stored "
               "as bf16, f32 accumulation: half the bytes to stream); 'mxfp4' (the grouped "
               "phase, with or without a target: the experts' constant weights cast to "
               "MXFP4, e2m1 values with an e8m0 scale per 32 along K, rows unquantised; "
               "CUDA multiplies them on the bf16 tensor cores and stores the rest of the "
               "block as 'bf16' does, the router f32)"),
      cl::init("f32")};
  Flag<std::string> expertOutputs{
      "expert-outputs",
      cl::desc("with --target=cuda --expert-weights=bf16|mxfp4 (--fp8 too): 'f32' "
               "(default) or 'bf16' (each "
               "expert's output rows rounded to bf16 before the f32 weighted combine, as "
               "transformers' bf16 block holds them: half the bytes the combine reads)"),
      cl::init("f32")};
  Flag<std::string> precision{
      "precision",
      cl::desc("with --target=cuda, a whole model (a checkpoint or step program with a KV "
               "cache): 'bf16' (default) stores the expert, attention, dense and LM-head "
               "weights, the embedding table and the KV cache in bf16 (the router stays f32; "
               "activations between kernels are f32, the bf16 kernels accumulate in f32); "
               "'f32' keeps every weight f32 (then --expert-weights decides, as for blocks). "
               "Blocks follow --expert-weights either way"),
      cl::init("bf16")};
  Flag<std::string> kvCache{
      "kv-cache",
      cl::desc("with --target=cuda --precision=bf16, a whole model's KV cache: 'bf16' "
               "(default) or 'f32'"),
      cl::init("bf16")};
};

llvm::ManagedStatic<CompileCLOptions> clOptions;

/// The flag's value if it was given on the command line.
std::optional<std::string> given(const cl::opt<std::string> &flag) {
  if (flag.getNumOccurrences() == 0)
    return std::nullopt;
  return flag.getValue();
}

} // namespace

void moec::registerCompileCLOptions() {
  // Make sure the flags are constructed (and so registered).
  *clOptions;
}

moec::CompileOptions moec::compileOptionsFromCL() {
  assert(clOptions.isConstructed() && "registerCompileCLOptions() was not called");
  const CompileCLOptions &flags = *clOptions;
  CompileOptions options;
  options.inputPath = flags.inputPath;
  options.outputPath = flags.outputPath;
  options.compileTo = given(flags.compileTo);
  if (flags.epSize.getNumOccurrences())
    options.epSize = flags.epSize;
  options.epRank = flags.epRank;
  options.fp8 = flags.fp8;
  options.target = flags.target;
  options.maxTokens = flags.maxTokens;
  if (flags.maxBatch.getNumOccurrences())
    options.maxBatch = flags.maxBatch;
  if (flags.maxSeq.getNumOccurrences())
    options.maxSeq = flags.maxSeq;
  options.runtimeDir = given(flags.runtimeDir);
  options.weights = given(flags.weights);
  options.emit = given(flags.emit);
  options.expertWeights = given(flags.expertWeights);
  options.randomWeights = given(flags.randomWeights);
  options.expertOutputs = given(flags.expertOutputs);
  options.precision = given(flags.precision);
  options.kvCache = given(flags.kvCache);
  return options;
}
