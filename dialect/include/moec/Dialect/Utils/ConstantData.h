//===- ConstantData.h - reading and making weight constants ----*- C++ -*-===//
//
// Passes rearrange weights at compile time (concatenate gate and up, slice an
// expert-parallel rank's experts, transpose). Weights are arith.constant or
// onnx.Constant ops holding dense or dense_resource elements; these helpers
// read their bytes and make new constants without going through per-element
// attributes.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_DIALECT_UTILS_CONSTANTDATA_H
#define MOEC_DIALECT_UTILS_CONSTANTDATA_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"

#include <optional>

namespace moec {

/// Weights filled at load (`moec compile --random-weights`, docs/artifact.md,
/// "Weights filled at load"). The module's `moec.random_seed` (ui64) says its
/// weights are filled so; there a constant with `moec.random_normal` (an f64
/// standard deviation) is a placeholder whose elements are drawn from a
/// normal of that deviation at load and rounded to its element type (a splat
/// of a value no other weight has, so that constant folding never merges two,
/// or a dense_resource without data); any other splat is the constant it
/// says; dense constants are stored.
inline constexpr llvm::StringLiteral kRandomSeedAttr = "moec.random_seed";
inline constexpr llvm::StringLiteral kRandomNormalAttr = "moec.random_normal";

/// The row-major bytes of `value` when it is a constant (arith.constant or
/// onnx.Constant, dense non-splat or dense_resource) of a non-i1 element type.
std::optional<llvm::ArrayRef<char>> getConstantBytes(mlir::Value value);

/// An arith.constant of `type` holding `bytes` (copied into a resource blob
/// named `name`).
mlir::Value makeConstant(mlir::OpBuilder &builder, mlir::Location loc,
                         mlir::RankedTensorType type, llvm::ArrayRef<char> bytes,
                         llvm::StringRef name);

/// Bytes per element of a constant's storage.
int64_t elementBytes(mlir::Type elementType);

/// Element `index` of a constant's raw bytes (getConstantBytes, or a splat's
/// one element) as a float: f32, bf16, f16, f8E4M3FN and 8-bit integers
/// (signless read as signed), all exactly; nullopt for other element types.
std::optional<float> decodeAsFloat(mlir::Type elementType, llvm::ArrayRef<char> bytes,
                                   int64_t index);

} // namespace moec

#endif // MOEC_DIALECT_UTILS_CONSTANTDATA_H
