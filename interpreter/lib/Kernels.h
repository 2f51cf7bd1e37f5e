//===- Kernels.h - the interpreter's op kernels (internal) -----*- C++ -*-===//
//
// A kernel computes the exact (f64) results of one op from its operand
// tensors. The driver (Interpreter.cpp) then rounds each result to its declared
// element type and checks its shape, so kernels neither round nor re-check the
// declared types; they check what the verifier cannot: run-time shapes,
// indices, and attribute values against those shapes.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_INTERPRETER_KERNELS_H
#define MOEC_INTERPRETER_KERNELS_H

#include "moec/Interpreter/Tensor.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace moec::interp::detail {

/// The operands of an op; null where an optional input is absent (the value
/// of onnx.NoValue, or an omitted optional operand of a moe op).
using Operands = llvm::ArrayRef<const Tensor *>;
/// The results a kernel appends, one per op result (a result of type `none`
/// gets an empty placeholder).
using Results = llvm::SmallVectorImpl<Tensor>;

/// Evaluates an op of the `onnx` dialect; an op it does not know is an error.
mlir::LogicalResult evalONNXOp(mlir::Operation *op, Operands operands, Results &results);
/// Evaluates an op of the `moe` dialect (MoEOps.cpp), but for the ops of
/// whole models, which evalModelOp evaluates; `epRank` is
/// InterpretOptions::epRank.
mlir::LogicalResult evalMoEOp(mlir::Operation *op, Operands operands, Results &results,
                              int64_t epRank);

/// The KV cache that moe.attention writes and reads (docs/dialect.md, "Whole
/// models"), one per run of a function: it starts empty and lives until the
/// run ends. One slot per `layer`; a slot holds, per (sequence, position),
/// the key, value and shared-key rows as the op's operands held them.
struct KVCache {
  struct Entry {
    std::vector<double> key, value, keyShared;
  };
  struct Slot {
    /// The columns of the rows the slot holds, fixed by its first writer.
    int64_t keyColumns = 0, valueColumns = 0, sharedColumns = 0;
    std::map<std::pair<int64_t, int64_t>, Entry> entries; // (sequence, position)
    /// Per sequence, the positions written: they fill from 0 without gaps.
    std::map<int64_t, int64_t> lengths;
  };
  std::map<int64_t, Slot> slots; // by layer
};

class RegionRunner;

/// Whether `op` is one of the ops of whole models (ModelOps.cpp):
/// moe.embedding, moe.rms_norm, moe.rotary, moe.attention, and the generic
/// moe.elementwise and moe.reduce_rows (ModelGenericOps.cpp).
bool isModelOp(mlir::Operation *op);
/// Evaluates one of them; moe.attention writes and reads `cache`.
mlir::LogicalResult evalModelOp(mlir::Operation *op, Operands operands, Results &results,
                                KVCache &cache, RegionRunner &regions);
/// moe.elementwise and moe.reduce_rows (ModelGenericOps.cpp); failure without
/// a diagnostic (`handled` false) for any other op.
mlir::LogicalResult evalGenericModelOp(mlir::Operation *op, Operands operands, Results &results,
                                       RegionRunner &regions, bool &handled);

/// The tensor of `value`, one of `op`'s operands; null for an absent optional
/// operand. (The same value twice is the same tensor, so the first match is right.)
inline const Tensor *operandTensor(mlir::Operation *op, Operands in, mlir::Value value) {
  if (!value)
    return nullptr;
  for (mlir::OpOperand &operand : op->getOpOperands())
    if (operand.get() == value)
      return in[operand.getOperandNumber()];
  return nullptr;
}

/// Checks a run-time shape against the expected one; -1 accepts any size.
inline mlir::LogicalResult expectShape(mlir::Operation *op, const Tensor *tensor,
                                       llvm::StringRef name, llvm::ArrayRef<int64_t> expected) {
  if (!tensor)
    return mlir::success();
  bool fits = tensor->rank() == static_cast<int64_t>(expected.size());
  for (size_t d = 0; fits && d < expected.size(); ++d)
    fits = expected[d] < 0 || tensor->dim(d) == expected[d];
  if (fits)
    return mlir::success();
  std::string wanted = "[";
  for (auto [d, size] : llvm::enumerate(expected))
    wanted += (d ? ", " : "") + (size < 0 ? std::string("?") : std::to_string(size));
  return op->emitOpError() << name << " has shape " << formatShape(tensor->shape)
                           << " at run time, expected " << wanted << "]";
}

/// What the kernels of ops with regions need from the driver.
class RegionRunner {
public:
  virtual ~RegionRunner() = default;
  /// Evaluates `block` with its arguments bound to `arguments` (values of the
  /// enclosing blocks stay visible) and returns its terminator's operands.
  virtual mlir::FailureOr<llvm::SmallVector<Tensor>> runBlock(mlir::Block &block,
                                                             llvm::ArrayRef<Tensor> arguments) = 0;
  /// The value computed so far for `value`, or null.
  virtual const Tensor *lookup(mlir::Value value) = 0;
};

/// A block of scalar arith and math ops, compiled once (UpstreamOps.cpp): its
/// value for the block arguments' values, each op's result rounded to its type.
using ScalarBlock = std::function<double(llvm::ArrayRef<double>)>;
mlir::FailureOr<ScalarBlock> compileScalarBlock(mlir::Block &block, RegionRunner &regions);

/// Evaluates an op of the upstream dialects hand-written MoE blocks use
/// (UpstreamOps.cpp): arith, math, scf.for, tensor, linalg.
mlir::LogicalResult evalUpstreamOp(mlir::Operation *op, Operands operands, Results &results,
                                   RegionRunner &regions);

/// The tensor type a value is held as: scalars (integers, index, floats) as
/// rank-0 tensors, anything else unchanged.
inline mlir::Type interpretedType(mlir::Type type) {
  return type.isIntOrIndexOrFloat() ? mlir::RankedTensorType::get({}, type) : type;
}

/// The declared element type of result `index` (the driver has checked that
/// every result type is a ranked tensor of a known element type, or none).
inline ElementType resultElementType(mlir::Operation *op, unsigned index = 0) {
  auto type =
      llvm::dyn_cast<mlir::RankedTensorType>(interpretedType(op->getResult(index).getType()));
  if (!type)
    return ElementType::F32;
  return getElementType(type.getElementType()).value_or(ElementType::F32);
}

/// An optional integer attribute's value, or ONNX's default.
inline int64_t attrOr(mlir::IntegerAttr attr, int64_t fallback) {
  return attr ? attr.getInt() : fallback;
}
/// An optional float attribute's value, or ONNX's default.
inline double attrOr(mlir::FloatAttr attr, double fallback) {
  return attr ? attr.getValueAsDouble() : fallback;
}

/// Checks a result shape that comes from tensor values (Range, Expand, Tile,
/// ConstantOfShape, OneHot): no negative dimension, and at most 2^31 elements,
/// so that a wild shape is an error instead of a failed allocation.
inline mlir::LogicalResult checkResultShape(mlir::Operation *op, llvm::ArrayRef<int64_t> shape) {
  constexpr int64_t kMaxElements = int64_t(1) << 31;
  int64_t count = 1;
  for (int64_t size : shape) {
    if (size < 0)
      return op->emitOpError() << "would make a result of shape " << formatShape(shape)
                               << ", which has a negative dimension";
    if (size != 0 && count > kMaxElements / size)
      return op->emitOpError() << "would make a result of shape " << formatShape(shape)
                               << ", more than the interpreter's 2^31 elements";
    count *= size;
  }
  return mlir::success();
}

/// The elements of an integer operand (shape, axes, K, ...) as int64s.
inline llvm::SmallVector<int64_t> toInt64s(const Tensor &tensor) {
  llvm::SmallVector<int64_t> values;
  values.reserve(tensor.values.size());
  for (double value : tensor.values)
    values.push_back(toInt64(value));
  return values;
}

} // namespace moec::interp::detail

#endif // MOEC_INTERPRETER_KERNELS_H
