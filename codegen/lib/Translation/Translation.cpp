//===- Translation.cpp - the printers as MLIR translations ----------------===//

#include "moec/Codegen/Translation.h"
#include "moec/Codegen/Emitter.h"

#include "moec/Dialect/MoE/MoEDialect.h"
#include "moec/Dialect/ONNX/ONNXDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
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
  cl::opt<std::string> expertWeights{
      "expert-weights",
      cl::desc("--emit-cuda: 'f32' (default) or 'bf16' (grouped matmul weights stored as bf16)"),
      cl::init("f32"), cl::cat(category)};
  cl::opt<std::string> expertOutputs{
      "expert-outputs",
      cl::desc("--emit-cuda with --expert-weights=bf16: 'f32' (default) or 'bf16' (the experts' "
               "output rows rounded to bf16 before the combine)"),
      cl::init("f32"), cl::cat(category)};
};

llvm::ManagedStatic<EmitOptions> options;

LogicalResult translate(Operation *op, llvm::raw_ostream &os, Target target) {
  auto module = dyn_cast<ModuleOp>(op);
  if (!module)
    return op->emitError("expected a builtin.module");
  auto bad = [&](const Twine &message) { return module.emitError(message); };
  if (options->weights != "embedded" && options->weights != "external")
    return bad("unknown --weights='" + options->weights + "' (embedded, external)");
  if (options->expertWeights != "f32" && options->expertWeights != "bf16")
    return bad("unknown --expert-weights='" + options->expertWeights + "' (f32, bf16)");
  if (options->expertOutputs != "f32" && options->expertOutputs != "bf16")
    return bad("unknown --expert-outputs='" + options->expertOutputs + "' (f32, bf16)");
  if (target == Target::CPU && (options->expertWeights == "bf16" ||
                                options->expertOutputs == "bf16"))
    return bad("--expert-weights and --expert-outputs apply to --emit-cuda (the CPU target "
               "keeps f32)");
  if (options->expertOutputs == "bf16" && options->expertWeights != "bf16")
    return bad("--expert-outputs=bf16 needs --expert-weights=bf16 (the bf16-weight kernels "
               "round their results)");
  EmitterOptions emitterOptions;
  emitterOptions.maxTokens = options->maxTokens;
  emitterOptions.externalWeights = options->weights == "external";
  emitterOptions.bf16ExpertWeights = options->expertWeights == "bf16";
  emitterOptions.bf16ExpertOutputs = options->expertOutputs == "bf16";
  FailureOr<EmittedModule> emitted = emitModule(module, target, emitterOptions);
  if (failed(emitted))
    return failure();
  os << emitted->source;
  return success();
}

void registerDialects(DialectRegistry &registry) {
  registry.insert<moe::MoEDialect, onnx::ONNXDialect, func::FuncDialect, arith::ArithDialect,
                  tensor::TensorDialect>();
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
