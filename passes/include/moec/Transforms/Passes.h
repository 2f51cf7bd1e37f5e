//===- Passes.h - moec's passes --------------------------------*- C++ -*-===//

#ifndef MOEC_TRANSFORMS_PASSES_H
#define MOEC_TRANSFORMS_PASSES_H

#include "moec/Dialect/MoE/MoEDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace moec {

#define GEN_PASS_DECL
#include "moec/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "moec/Transforms/Passes.h.inc"

} // namespace moec

#endif // MOEC_TRANSFORMS_PASSES_H
