//===- moec-opt.cpp - moec's pass runner -----------------------------------===//
//
// An mlir-opt for moec: parses the moe dialect and the upstream dialects the
// pipeline is built from (moec/Compiler/InitAllDialects.h), and runs any
// registered pass or pipeline.
//
//===----------------------------------------------------------------------===//

#include "moec/Compiler/InitAllDialects.h"
#include "moec/Transforms/Passes.h"
#include "moec/Transforms/Pipeline.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::registerTransformsPasses();
  moec::registerMoECPasses();
  moec::registerPipeline();

  mlir::DialectRegistry registry;
  moec::registerAllDialects(registry);
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "moec optimizer driver\n", registry));
}
