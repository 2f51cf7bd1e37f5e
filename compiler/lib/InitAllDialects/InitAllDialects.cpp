//===- InitAllDialects.cpp - the dialects moec's tools read -----------------===//

#include "moec/Compiler/InitAllDialects.h"

#include "moec/Dialect/MoE/MoEDialect.h"
#include "moec/Dialect/ONNX/ONNXDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/DialectRegistry.h"

void moec::registerAllDialects(mlir::DialectRegistry &registry) {
  registry.insert<moe::MoEDialect, onnx::ONNXDialect, mlir::func::FuncDialect,
                  mlir::arith::ArithDialect, mlir::tensor::TensorDialect,
                  // hand-written expert loops (moe-raise-expert-loops)
                  mlir::linalg::LinalgDialect, mlir::math::MathDialect, mlir::scf::SCFDialect>();
}
