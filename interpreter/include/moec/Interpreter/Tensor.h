//===- Tensor.h - the reference interpreter's host tensors -----*- C++ -*-===//
//
// Every value the interpreter computes is a Tensor: an element type, a
// concrete shape and the elements as doubles. Holding every element type in
// f64 keeps one code path per op, and f64 arithmetic makes the interpreter a
// reference that real backends (f32 accumulation, other summation orders) are
// compared against. The element type says how a result is rounded once an op
// has computed it: f32, f16, bf16, f8E4M3FN and f4E2M1FN round to nearest even
// (f8 saturates at ±448, f4 at ±6), f8E8M0FNU (MXFP4's scales: powers of two
// from 2^-127 to 2^127) to the nearest power of two, integers truncate toward
// zero and saturate, i1 is 0 or 1.
// So the values that flow between ops are exactly those of the declared types.
//
// Integers are exact in a double up to 2^53. ONNX writes INT64_MAX for "to the
// end" (Slice); it becomes 2^63 here and is clamped like any bound past the end.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_INTERPRETER_TENSOR_H
#define MOEC_INTERPRETER_TENSOR_H

#include "mlir/IR/Types.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace moec::interp {

/// The element types the interpreter rounds to. Signless and signed integers
/// are both signed (ONNX and the moe dialect use signless ones as signed).
enum class ElementType : uint8_t {
  F64,
  F32,
  F16,
  BF16,
  F8E4M3FN,
  F4E2M1FN,
  F8E8M0FNU,
  I1,
  I8,
  I16,
  I32,
  I64,
  U8,
  U16,
  U32,
  U64,
};

/// The interpreter's element type for an MLIR element type; nullopt for the
/// types it does not know (other FP8 formats, complex, 4-bit integers, ...).
std::optional<ElementType> getElementType(mlir::Type type);
/// "f32", "bf16", "i1", "ui8", ... as MLIR spells them.
llvm::StringRef stringify(ElementType type);
bool isFloat(ElementType type);
/// The number nearest to `value` that `type` represents (see the file comment).
double roundTo(ElementType type, double value);
/// The value of an f8E4M3FN byte.
double decodeE4M3FN(uint8_t bits);
/// The value of an f4E2M1FN code (the low nibble of `bits`).
double decodeE2M1FN(uint8_t bits);
/// The value of an f8E8M0FNU byte: 2^(bits - 127), NaN for 0xFF.
double decodeE8M0FNU(uint8_t bits);

/// A double as an index or count: truncated toward zero, saturated to the
/// int64 range, NaN as 0. Kernels check the result against the dimension.
int64_t toInt64(double value);

/// Number of elements of a shape.
int64_t numElementsOf(llvm::ArrayRef<int64_t> shape);
/// "[2, 3]".
std::string formatShape(llvm::ArrayRef<int64_t> shape);

/// A dense row-major tensor whose elements are held as doubles.
struct Tensor {
  ElementType elementType = ElementType::F32;
  llvm::SmallVector<int64_t, 4> shape;
  std::vector<double> values;

  Tensor() = default;
  /// A tensor of `shape` with every element `fill`.
  Tensor(ElementType elementType, llvm::ArrayRef<int64_t> shape, double fill = 0.0);

  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  int64_t numElements() const { return static_cast<int64_t>(values.size()); }
  int64_t dim(int64_t index) const { return shape[index]; }
  /// "f32[2, 3]".
  std::string describe() const;
  /// Rounds every element to `elementType`.
  void round();
};

} // namespace moec::interp

#endif // MOEC_INTERPRETER_TENSOR_H
