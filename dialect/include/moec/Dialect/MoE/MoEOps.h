//===- MoEOps.h - moe dialect operations -----------------------*- C++ -*-===//

#ifndef MOEC_DIALECT_MOE_MOEOPS_H
#define MOEC_DIALECT_MOE_MOEOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "moec/Dialect/MoE/MoEDialect.h"

#define GET_OP_CLASSES
#include "moec/Dialect/MoE/MoEOps.h.inc"

#endif // MOEC_DIALECT_MOE_MOEOPS_H
