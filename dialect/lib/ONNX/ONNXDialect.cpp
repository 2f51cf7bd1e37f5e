//===- ONNXDialect.cpp - moec's onnx dialect ---------------------------------===//

#include "moec/Dialect/ONNX/ONNXDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace moec::onnx;

#include "moec/Dialect/ONNX/ONNXDialect.cpp.inc"

void ONNXDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "moec/Dialect/ONNX/ONNXOps.cpp.inc"
      >();
}

const OpInfo *moec::onnx::lookupOpInfo(llvm::StringRef name) {
  static const OpInfo kOps[] = {
#include "moec/Dialect/ONNX/ONNXOpInfo.inc"
  };
  for (const OpInfo &info : kOps)
    if (name == info.name)
      return &info;
  return nullptr;
}

std::optional<int> moec::onnx::lookupAttributeKind(llvm::StringRef op,
                                                   llvm::StringRef attribute) {
  struct Row {
    const char *op, *attribute;
    int kind;
  };
  static const Row kRows[] = {
#include "moec/Dialect/ONNX/ONNXAttributeKinds.inc"
  };
  for (const Row &row : kRows)
    if (op == row.op && attribute == row.attribute)
      return row.kind;
  return std::nullopt;
}

#define GET_OP_CLASSES
#include "moec/Dialect/ONNX/ONNXOps.cpp.inc"
