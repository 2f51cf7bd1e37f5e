//===- ImporterImpl.h - the ONNX importer's shared state -------*- C++ -*-===//
//
// Private to the importer: the state that the default-domain node importer
// (ONNXImporter.cpp) and the com.microsoft handlers (MicrosoftMoE.cpp) share.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_DIALECT_ONNX_IMPORT_IMPORTERIMPL_H
#define MOEC_DIALECT_ONNX_IMPORT_IMPORTERIMPL_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringMap.h"

#include "onnx/onnx_pb.h"

namespace moec::onnx::detail {

/// Alignment of the weight blobs the importer allocates itself: enough for any
/// vector load the kernels make.
inline constexpr size_t kBlobAlignment = 64;

/// The importer's view of one graph being imported.
class GraphImporter {
public:
  GraphImporter(mlir::MLIRContext &context, llvm::StringRef path)
      : context(context), builder(&context), path(path.str()) {}

  mlir::MLIRContext &context;
  mlir::OpBuilder builder;
  std::string path;
  int64_t opset = 0;
  /// SSA values by ONNX name.
  llvm::StringMap<mlir::Value> values;
  /// Values whose defining ops are erased after the graph if nothing uses them.
  llvm::SmallVector<mlir::Value> eraseIfUnused;
  /// Declared types by ONNX name (graph inputs, outputs, value_info).
  llvm::StringMap<const ::onnx::TypeProto *> declaredTypes;

  /// "model.onnx" as a location, and a node's location within it.
  mlir::Location fileLoc();
  mlir::Location nodeLoc(const ::onnx::NodeProto &node);

  /// The value named `name`, or an error naming the node that wanted it.
  mlir::FailureOr<mlir::Value> lookup(const ::onnx::NodeProto &node, llvm::StringRef name);
  /// The declared type of `name`, or an error naming the node that defines it.
  mlir::FailureOr<mlir::Type> declaredType(const ::onnx::NodeProto &node, llvm::StringRef name);
  /// Records a node's outputs; an ONNX name may be assigned only once.
  mlir::LogicalResult defineOutputs(const ::onnx::NodeProto &node, mlir::ValueRange results);
  /// An `onnx.Constant` holding `value`.
  mlir::Value makeConstant(mlir::Location loc, mlir::ElementsAttr value);
  /// An `onnx.Constant` holding a small i64 vector.
  mlir::Value constantI64(mlir::Location loc, llvm::ArrayRef<int64_t> values);
};

/// Converts an ONNX TypeProto (tensors only) to an MLIR tensor type.
mlir::FailureOr<mlir::Type> convertType(const ::onnx::TypeProto &type, mlir::Location loc,
                                        llvm::StringRef what);
/// Converts an ONNX element type code to an MLIR element type.
mlir::FailureOr<mlir::Type> convertElementType(int32_t dtype, mlir::Location loc,
                                               llvm::StringRef what);

/// `name` with bytes outside printable ASCII written as \xNN: names come from
/// the file and end up in messages.
std::string printableName(llvm::StringRef name);

/// The name of an AttributeProto.AttributeType ("INT", "FLOATS", ...).
std::string attributeTypeName(int type);

/// "node 'name' (Op)" or "node 'name' (com.microsoft.Op)", the prefix of every
/// error about a node.
std::string describeNode(const ::onnx::NodeProto &node);

/// Imports a node of the com.microsoft domain (MoE, QMoE).
mlir::LogicalResult importMicrosoftNode(GraphImporter &importer, const ::onnx::NodeProto &node);

/// The integer attribute `name` of `node`, or `fallback`.
int64_t intAttribute(const ::onnx::NodeProto &node, llvm::StringRef name, int64_t fallback);
/// The float attribute `name` of `node`, if present.
std::optional<float> floatAttribute(const ::onnx::NodeProto &node, llvm::StringRef name);
/// The string attribute `name` of `node`, or `fallback`.
std::string stringAttribute(const ::onnx::NodeProto &node, llvm::StringRef name,
                            llvm::StringRef fallback);

} // namespace moec::onnx::detail

#endif // MOEC_DIALECT_ONNX_IMPORT_IMPORTERIMPL_H
