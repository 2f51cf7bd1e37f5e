//===- MoEDialect.cpp - the moe dialect ------------------------------------===//

#include "moec/Dialect/MoE/MoEDialect.h"
#include "moec/Dialect/MoE/MoEOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"

using namespace mlir;
using namespace moec::moe;

#include "moec/Dialect/MoE/MoEDialect.cpp.inc"
#include "moec/Dialect/MoE/MoEEnums.cpp.inc"

void MoEDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "moec/Dialect/MoE/MoEOps.cpp.inc"
      >();
  registerAttributes();
}
