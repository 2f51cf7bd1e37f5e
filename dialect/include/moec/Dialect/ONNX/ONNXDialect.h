//===- ONNXDialect.h - moec's onnx dialect ---------------------*- C++ -*-===//
//
// Note: this dialect lives in namespace moec::onnx; the ONNX protobuf classes
// live in ::onnx. Code that uses both spells the latter ::onnx.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_DIALECT_ONNX_ONNXDIALECT_H
#define MOEC_DIALECT_ONNX_ONNXDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "moec/Dialect/ONNX/ONNXDialect.h.inc"

#define GET_OP_CLASSES
#include "moec/Dialect/ONNX/ONNXOps.h.inc"

namespace moec::onnx {

/// What the importer needs to know of each operator the dialect holds; the
/// table is generated with the ops (ONNXOpInfo.inc).
struct OpInfo {
  const char *name;
  int sinceVersion;
  int numInputs;
  bool variadicInputs;
  int numOutputs;
  bool variadicOutputs;
  /// Output 0 has input 0's element type (they share a type variable).
  bool sameElementType;
};

/// The operator `name` of the default domain, or null if the dialect lacks it.
const OpInfo *lookupOpInfo(llvm::StringRef name);

/// The kind (ONNX AttributeProto.AttributeType: INT = 2, FLOAT = 1, ...) the
/// dialect declares for attribute `attribute` of operator `op`, or nullopt
/// when the operator has no such attribute.
std::optional<int> lookupAttributeKind(llvm::StringRef op, llvm::StringRef attribute);

/// The range of default-domain opsets whose models the dialect represents.
inline constexpr int kMinOpset = 13;
inline constexpr int kMaxOpset = 21;

} // namespace moec::onnx

#endif // MOEC_DIALECT_ONNX_ONNXDIALECT_H
