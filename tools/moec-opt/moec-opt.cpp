//===- moec-opt.cpp - moec's pass runner -----------------------------------===//
//
// An mlir-opt for moec: parses the moe dialect and the upstream dialects the
// pipeline is built from, and runs any registered pass or pipeline.
//
//===----------------------------------------------------------------------===//

#include "moec/Dialect/MoE/MoEDialect.h"
#include "moec/Dialect/ONNX/ONNXDialect.h"
#include "moec/Transforms/Passes.h"
#include "moec/Transforms/Pipeline.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::registerTransformsPasses();
  moec::registerMoECPasses();
  moec::registerPipeline();

  mlir::DialectRegistry registry;
  registry.insert<moec::moe::MoEDialect, moec::onnx::ONNXDialect, mlir::arith::ArithDialect,
                  mlir::func::FuncDialect, mlir::linalg::LinalgDialect, mlir::math::MathDialect,
                  mlir::scf::SCFDialect, mlir::tensor::TensorDialect>();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "moec optimizer driver\n", registry));
}
