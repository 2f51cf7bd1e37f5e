//===- moec.cpp - the moec driver -------------------------------------------===//
//
//   moec compile MODEL.(onnx|mlir) [--compile-to=input|moe|grouped|fp8] [--fp8]
//                [--ep-size=N --ep-rank=R] [-o OUT.mlir]
//   moec compile MODEL.(onnx|mlir) --target=cpu|cuda -o ARTIFACT [--max-tokens=N]
//   moec compile MODEL.(onnx|mlir) --target=cpu|cuda --emit=exe -o FILE [...]
//   moec compile MODEL.(onnx|mlir) --target=cpu|cuda --emit=mlir [-o FILE] [...]
//
// Imports or parses the model, runs the pipeline up to the requested phase and
// prints the IR; with --target, runs it to the grouped phase and writes an
// artifact directory instead (docs/artifact.md), or with --emit=exe one
// executable that runs it, or with --emit=mlir the planned IR that the
// target's printer reads (moec-translate --emit-cpp/--emit-cuda prints it). MLIR's pass-manager flags work here too
// (--mlir-print-ir-after-all, --mlir-timing, ...; listed by --help-hidden).
//
//===----------------------------------------------------------------------===//

#include "moec/Codegen/ArtifactWriter.h"
#include "moec/Dialect/MoE/MoEDialect.h"
#include "moec/Frontends/ONNX/Import.h"
#include "moec/Dialect/ONNX/ONNXDialect.h"
#include "moec/Transforms/Pipeline.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"

using namespace mlir;
namespace cl = llvm::cl;

static cl::OptionCategory moecCategory("moec compile options");
static cl::opt<std::string> inputPath(cl::Positional, cl::desc("<model.onnx or model.mlir>"),
                                      cl::Required, cl::cat(moecCategory));
static cl::opt<std::string> outputPath("o", cl::desc("output file"), cl::init("-"), cl::cat(moecCategory));
static cl::opt<std::string> compileTo(
    "compile-to", cl::desc("stop after this phase and print the IR: input, moe, grouped, fp8"),
    cl::init("grouped"), cl::cat(moecCategory));
static cl::opt<int64_t> epSize("ep-size", cl::desc("expert-parallel ranks"), cl::init(1), cl::cat(moecCategory));
static cl::opt<int64_t> epRank("ep-rank", cl::desc("this rank, in [0, ep-size)"), cl::init(0), cl::cat(moecCategory));
static cl::opt<bool> fp8("fp8", cl::desc("cast the experts to FP8 e4m3 with 128x128 block "
                                         "scales (the fp8 phase)"),
                         cl::init(false), cl::cat(moecCategory));
static cl::opt<std::string> target(
    "target", cl::desc("generate code for this target and write an artifact (-o): cpu, cuda"),
    cl::init(""), cl::cat(moecCategory));
static cl::opt<int64_t> maxTokens("max-tokens",
                                  cl::desc("largest token count the artifact accepts (--target)"),
                                  cl::init(8192), cl::cat(moecCategory));

static cl::opt<std::string> runtimeDir(
    "runtime-dir",
    cl::desc("with --target: the prefix the runtime is installed under (include/, "
             "lib/libmoec_kernels*.a, bin/moec-run); default: the prefix of this moec"),
    cl::init(""), cl::cat(moecCategory));

static cl::opt<std::string> weightsMode(
    "weights",
    cl::desc("with --target: 'embedded' writes weights.bin (default); 'external' writes only its "
             "layout (the manifest's weight lines), to be filled elsewhere"),
    cl::init("embedded"), cl::cat(moecCategory));
static cl::opt<std::string> emitKind(
    "emit",
    cl::desc("with --target: 'artifact' writes the artifact directory -o DIR (default); 'exe' "
             "writes one executable -o FILE that runs the model with moec-run's flags; 'mlir' "
             "prints the planned IR the target's printer reads (-o FILE, default stdout)"),
    cl::init("artifact"), cl::cat(moecCategory));
static cl::opt<std::string> expertWeights(
    "expert-weights",
    cl::desc("with --target=cuda: 'f32' (default) or 'bf16' (grouped matmul weights stored as "
             "bf16, f32 accumulation: half the bytes to stream)"),
    cl::init("f32"), cl::cat(moecCategory));

static cl::opt<std::string> expertOutputs(
    "expert-outputs",
    cl::desc("with --target=cuda --expert-weights=bf16: 'f32' (default) or 'bf16' (each "
             "expert's output rows rounded to bf16 before the f32 weighted combine, as "
             "transformers' bf16 block holds them: half the bytes the combine reads)"),
    cl::init("f32"), cl::cat(moecCategory));

static int fail(const llvm::Twine &message) {
  llvm::errs() << "moec: " << message << "\n";
  return 1;
}

static int compile() {
  std::optional<moec::Phase> phase = moec::parsePhase(compileTo);
  if (!phase) {
    if (compileTo == "codegen")
      return fail("--compile-to=codegen: code generation writes an artifact; use "
                  "--target=cpu -o DIR");
    return fail("unknown phase '" + compileTo + "' (input, moe, grouped, fp8)");
  }
  if (*phase == moec::Phase::FP8 && !fp8)
    return fail("--compile-to=fp8 needs --fp8");
  // With --fp8 the pipeline runs through the fp8 phase unless told to stop earlier.
  if (fp8 && compileTo.getNumOccurrences() == 0)
    phase = moec::Phase::FP8;
  if (epSize < 1 || epRank < 0 || epRank >= epSize)
    return fail("--ep-rank must be in [0, --ep-size)");
  if (!target.empty()) {
    if (target != "cpu" && target != "cuda")
      return fail("unknown target '" + target + "' (cpu, cuda)");
    if (*phase != moec::Phase::Grouped && *phase != moec::Phase::FP8)
      return fail("--target compiles the grouped (or fp8) phase; drop --compile-to=" +
                  compileTo);
    if (emitKind != "artifact" && emitKind != "exe" && emitKind != "mlir")
      return fail("unknown --emit='" + emitKind + "' (artifact, exe, mlir)");
    if (emitKind == "exe" && weightsMode == "external")
      return fail("--emit=exe needs the weights (drop --weights=external)");
    if (outputPath == "-" && emitKind != "mlir")
      return fail("--target=" + target.getValue() +
                  (emitKind == "exe" ? " --emit=exe writes an executable; name it with -o FILE"
                                     : " writes an artifact directory; name it with -o DIR"));
    if (maxTokens < 1)
      return fail("--max-tokens must be at least 1");
    if (weightsMode != "embedded" && weightsMode != "external")
      return fail("unknown --weights='" + weightsMode + "' (embedded, external)");
    if (expertWeights != "f32" && expertWeights != "bf16")
      return fail("unknown --expert-weights='" + expertWeights + "' (f32, bf16)");
    if (expertWeights == "bf16" && target != "cuda")
      return fail("--expert-weights=bf16 needs --target=cuda (the CPU target keeps f32)");
    if (expertOutputs != "f32" && expertOutputs != "bf16")
      return fail("unknown --expert-outputs='" + expertOutputs + "' (f32, bf16)");
    if (expertOutputs == "bf16" && (target != "cuda" || expertWeights != "bf16"))
      return fail("--expert-outputs=bf16 needs --target=cuda --expert-weights=bf16 (the "
                  "bf16-weight kernels round their results)");
    if (expertOutputs == "bf16" && fp8)
      return fail("--expert-outputs=bf16 does not apply to --fp8 (FP8 experts' results stay "
                  "f32)");
  } else if (emitKind.getNumOccurrences()) {
    return fail("--emit needs --target");
  } else if (runtimeDir.getNumOccurrences()) {
    return fail("--runtime-dir needs --target");
  } else if (weightsMode.getNumOccurrences()) {
    return fail("--weights needs --target");
  } else if (expertWeights.getNumOccurrences()) {
    return fail("--expert-weights needs --target=cuda");
  } else if (expertOutputs.getNumOccurrences()) {
    return fail("--expert-outputs needs --target=cuda");
  }

  DialectRegistry registry;
  registry.insert<moec::moe::MoEDialect, moec::onnx::ONNXDialect, func::FuncDialect,
                  arith::ArithDialect, tensor::TensorDialect,
                  // hand-written expert loops (moe-raise-expert-loops)
                  linalg::LinalgDialect, math::MathDialect, scf::SCFDialect>();
  MLIRContext context(registry);
  context.loadAllAvailableDialects();

  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> input = openInputFile(inputPath, &error);
  if (!input)
    return fail(error);
  OwningOpRef<ModuleOp> module;
  // For .mlir inputs, diagnostics (the passes', code generation's) quote the
  // source line.
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  if (llvm::StringRef(inputPath).ends_with(".onnx")) {
    module = moec::onnx::importModel(*input, inputPath, context);
  } else {
    sourceMgr.AddNewSourceBuffer(std::move(input), llvm::SMLoc());
    module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  }
  if (!module)
    return 1; // the importer or parser has reported why

  PassManager pm(&context);
  if (failed(applyPassManagerCLOptions(pm)))
    return 1;
  moec::PipelineOptions pipeline{*phase, epSize, epRank, fp8};
  if (!target.empty()) {
    // The target's policy, as IR its printer reads (docs/pipeline.md, "Codegen
    // policy").
    pipeline.bf16ExpertWeights = expertWeights == "bf16";
    pipeline.bf16ExpertOutputs = expertOutputs == "bf16";
    pipeline.legalizeForCodegen = true;
    pipeline.planStreams = target == "cuda";
  }
  moec::buildPipeline(pm, pipeline);
  if (failed(pm.run(*module)))
    return 1;

  if (!target.empty() && emitKind != "mlir") {
    moec::codegen::ArtifactOptions options;
    options.target = target == "cuda" ? moec::codegen::Target::CUDA : moec::codegen::Target::CPU;
    options.outputDir = outputPath;
    options.maxTokens = maxTokens;
    options.externalWeights = weightsMode == "external";
    options.executable = emitKind == "exe";
    options.runtimeDir = runtimeDir;
    return failed(moec::codegen::emitArtifact(*module, options)) ? 1 : 0;
  }

  std::unique_ptr<llvm::ToolOutputFile> output = openOutputFile(outputPath, &error);
  if (!output)
    return fail(error);
  module->print(output->os());
  output->keep();
  return 0;
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  if (argc < 2 || llvm::StringRef(argv[1]) != "compile") {
    llvm::errs() << "usage: moec compile MODEL.(onnx|mlir) [--compile-to=input|moe|grouped|fp8] [--fp8] "
                    "[--ep-size=N --ep-rank=R] [-o OUT]\n"
                    "       moec compile MODEL.(onnx|mlir) --target=cpu|cuda -o ARTIFACT "
                    "[--max-tokens=N] [--weights=embedded|external] [--expert-weights=f32|bf16]\n"
                    "         [--expert-outputs=f32|bf16] [--runtime-dir=DIR]\n"
                    "       moec compile MODEL.(onnx|mlir) --target=cpu|cuda --emit=exe -o FILE "
                    "[...]\n"
                    "       moec compile MODEL.(onnx|mlir) --target=cpu|cuda --emit=mlir [-o FILE] "
                    "[...]\n";
    return argc >= 2 && (llvm::StringRef(argv[1]) == "--help" ||
                         llvm::StringRef(argv[1]) == "-h")
               ? 0
               : 1;
  }
  registerAsmPrinterCLOptions();
  registerMLIRContextCLOptions();
  registerPassManagerCLOptions();
  // The subcommand word is consumed here; the rest are ordinary flags.
  argv[1] = argv[0];
  // --help lists moec's own options; LLVM's and MLIR's (which still work, e.g.
  // --mlir-print-ir-after-all) are under --help-hidden.
  cl::HideUnrelatedOptions(moecCategory);
  cl::ParseCommandLineOptions(argc - 1, argv + 1, "moec compile: ahead-of-time MoE compiler\n");
  return compile();
}
