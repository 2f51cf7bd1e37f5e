//===- moec.cpp - the moec driver -------------------------------------------===//
//
//   moec compile MODEL.(onnx|mlir) [--compile-to=input|moe|grouped|fp8] [--fp8]
//                [--expert-weights=mxfp4] [--ep-size=N [--ep-rank=R]] [-o OUT.mlir]
//   moec compile MODEL.(onnx|mlir) --target=cpu|cuda -o ARTIFACT [--max-tokens=N]
//   moec compile MODEL.(onnx|mlir) --target=cpu|cuda --emit=exe -o FILE [...]
//   moec compile MODEL.(onnx|mlir) --target=cpu|cuda --emit=mlir [-o FILE] [...]
//
// Imports or parses the model, runs the pipeline up to the requested phase and
// prints the IR; with --target, runs it to the grouped phase and writes an
// artifact directory instead (docs/artifact.md), or with --emit=exe one
// executable that runs it, or with --emit=mlir the planned IR that the
// target's printer reads (moec-translate --emit-cpp/--emit-cuda prints it).
// MLIR's pass-manager flags work here too (--mlir-print-ir-after-all,
// --mlir-timing, ...; listed by --help-hidden).
// The work is moec::compile (moec/Compiler/Compile.h); this is its command line.
//
//===----------------------------------------------------------------------===//

#include "moec/Compiler/Compile.h"
#include "moec/Compiler/InitAllDialects.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"

static const char usage[] =
    "usage: moec compile MODEL.(onnx|mlir) [--compile-to=input|moe|grouped|fp8] [--fp8] "
    "[--expert-weights=mxfp4] [--ep-size=N [--ep-rank=R]] [-o OUT]\n"
    "       moec compile MODEL.(onnx|mlir) --target=cpu|cuda -o ARTIFACT "
    "[--max-tokens=N] [--weights=embedded|external] [--expert-weights=f32|bf16|mxfp4]\n"
    "         [--expert-outputs=f32|bf16] [--precision=bf16|f32] [--kv-cache=bf16|f32] "
    "[--runtime-dir=DIR]\n"
    "       moec compile MODEL.(onnx|mlir) --target=cpu|cuda --emit=exe -o FILE "
    "[...]\n"
    "       moec compile MODEL.(onnx|mlir) --target=cpu|cuda --emit=mlir [-o FILE] "
    "[...]\n";

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  if (argc < 2 || llvm::StringRef(argv[1]) != "compile") {
    llvm::errs() << usage;
    bool help = argc >= 2 && (llvm::StringRef(argv[1]) == "--help" ||
                              llvm::StringRef(argv[1]) == "-h");
    return help ? 0 : 1;
  }
  mlir::registerAsmPrinterCLOptions();
  mlir::registerMLIRContextCLOptions();
  mlir::registerPassManagerCLOptions();
  moec::registerCompileCLOptions();
  // The subcommand word is consumed here; the rest are ordinary flags.
  argv[1] = argv[0];
  // --help lists moec's own options; LLVM's and MLIR's (which still work, e.g.
  // --mlir-print-ir-after-all) are under --help-hidden.
  llvm::cl::HideUnrelatedOptions(moec::compileCLCategory());
  llvm::cl::ParseCommandLineOptions(argc - 1, argv + 1,
                                    "moec compile: ahead-of-time MoE compiler\n");

  mlir::DialectRegistry registry;
  moec::registerAllDialects(registry);
  mlir::MLIRContext context(registry);
  llvm::Error error =
      moec::compile(moec::compileOptionsFromCL(), context, mlir::applyPassManagerCLOptions);
  if (!error)
    return 0;
  // Failures already reported as diagnostics have nothing more to say.
  llvm::handleAllErrors(
      std::move(error), [](const moec::DiagnosedError &) {},
      [](const llvm::ErrorInfoBase &info) { llvm::errs() << "moec: " << info.message() << "\n"; });
  return 1;
}
