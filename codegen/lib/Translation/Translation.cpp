//===- Translation.cpp - the printers as MLIR translations ----------------===//
//
// The module is printed as it is: the planned IR that `moec compile --target
// ... --emit=mlir` writes (after moe-cast-experts-bf16, moe-legalize-for-codegen
// and, for CUDA, moe-plan-streams). The printers decide nothing of their own.
//
//===----------------------------------------------------------------------===//

#include "moec/Codegen/Translation.h"
#include "moec/Codegen/Emitter.h"

#include "moec/Dialect/MoE/MoEDialect.h"
#include "moec/Dialect/ONNX/ONNXDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Tools/mlir-translate/Translation.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/ManagedStatic.h"

using namespace mlir;
namespace cl = llvm::cl;

namespace moec::codegen {
namespace {

/// The printers' options, constructed by registerEmitTranslations() only.
struct EmitOptions {
  cl::OptionCategory category{"moec --emit-cpp / --emit-cuda options"};
  cl::opt<int64_t> maxTokens{"max-tokens",
                             cl::desc("largest token count the code is planned for"),
                             cl::init(8192), cl::cat(category)};
  cl::opt<std::string> weights{
      "weights",
      cl::desc("'embedded' (default) reads every weight constant's bytes; 'external' plans "
               "weights.bin's layout only"),
      cl::init("embedded"), cl::cat(category)};
};

llvm::ManagedStatic<EmitOptions> options;

LogicalResult translate(Operation *op, llvm::raw_ostream &os, Target target) {
  auto module = dyn_cast<ModuleOp>(op);
  if (!module)
    return op->emitError("expected a builtin.module");
  auto bad = [&](const Twine &message) { return module.emitError(message); };
  if (options->weights != "embedded" && options->weights != "external")
    return bad("unknown --weights='" + options->weights + "' (embedded, external)");
  EmitterOptions emitterOptions;
  emitterOptions.maxTokens = options->maxTokens;
  emitterOptions.externalWeights = options->weights == "external";
  FailureOr<EmittedModule> emitted = emitModule(module, target, emitterOptions);
  if (failed(emitted))
    return failure();
  os << emitted->source;
  return success();
}

void registerDialects(DialectRegistry &registry) {
  // math: the scalar ops of moe.elementwise's body.
  registry.insert<moe::MoEDialect, onnx::ONNXDialect, func::FuncDialect, arith::ArithDialect,
                  math::MathDialect, tensor::TensorDialect>();
}

} // namespace

void registerEmitTranslations() {
  (void)*options; // the options exist from here on
  static TranslateFromMLIRRegistration cpp(
      "emit-cpp", "print the grouped phase as the CPU target's C++ (model.cpp)",
      [](Operation *op, llvm::raw_ostream &os) { return translate(op, os, Target::CPU); },
      registerDialects);
  static TranslateFromMLIRRegistration cuda(
      "emit-cuda", "print the grouped phase as the CUDA target's CUDA C++ (model.cu)",
      [](Operation *op, llvm::raw_ostream &os) { return translate(op, os, Target::CUDA); },
      registerDialects);
}

} // namespace moec::codegen
