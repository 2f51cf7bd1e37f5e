//===- ShapeChecker.h - symbolic shape checks of the moe verifiers -*- C++ -*-===//
//
// Verifiers name the operand and dimension at fault and say what was expected.
// Shapes are checked symbolically: each dimension of each operand is bound to a
// name (T, H, E, I, ...); the first operand to fix a size wins and a later
// disagreement names both operands. Dynamic dimensions bind nothing.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_DIALECT_MOE_SHAPECHECKER_H
#define MOEC_DIALECT_MOE_SHAPECHECKER_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/StringMap.h"

namespace moec::moe::detail {
using namespace mlir;

inline int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// Checks operand and result shapes against symbolic dimension names.
class ShapeChecker {
public:
  explicit ShapeChecker(Operation *op) : op(op) {}

  /// Expects `value` (called `name` in messages) to be a ranked tensor whose
  /// dimensions are `dims`, e.g. {"E", "N", "K"}, and binds each static size.
  LogicalResult expect(Value value, StringRef name, ArrayRef<StringRef> dims) {
    auto type = cast<RankedTensorType>(value.getType());
    if (type.getRank() != static_cast<int64_t>(dims.size())) {
      InFlightDiagnostic diag = op->emitOpError()
                                << name << " must be a rank-" << dims.size()
                                << " tensor [";
      llvm::interleaveComma(dims, diag);
      return diag << "], got " << type;
    }
    for (auto [index, dim] : llvm::enumerate(dims))
      if (failed(bind(dim, type.getDimSize(index), name + " dimension " + Twine(index))))
        return failure();
    return success();
  }

  /// Binds `symbol` to `size`, found at `where` ("hidden dimension 1",
  /// "attribute top_k").
  LogicalResult bind(StringRef symbol, int64_t size, const Twine &where) {
    if (ShapedType::isDynamic(size))
      return success();
    auto [it, inserted] = bound.try_emplace(symbol, size, where.str());
    if (inserted || it->second.first == size)
      return success();
    return op->emitOpError() << where << " (" << symbol << ") is " << size << ", but "
                             << it->second.second << " makes " << symbol << " = "
                             << it->second.first;
  }

  /// The bound size of `symbol`, or dynamic.
  int64_t get(StringRef symbol) const {
    auto it = bound.find(symbol);
    return it == bound.end() ? ShapedType::kDynamic : it->second.first;
  }

  /// Binds `half` to half of `symbol`'s size, which must be even: gated
  /// projections hold gate and up together.
  LogicalResult bindHalf(StringRef symbol, StringRef half, StringRef name,
                         int64_t index) {
    int64_t size = get(symbol);
    if (ShapedType::isDynamic(size))
      return success();
    if (size % 2 != 0)
      return op->emitOpError() << name << " dimension " << index << " (" << symbol
                               << " = " << size
                               << ") must be even: it holds gate and up together";
    return bind(half, size / 2, name + " dimension " + Twine(index) + " / 2");
  }

private:
  Operation *op;
  llvm::StringMap<std::pair<int64_t, std::string>> bound;
};

} // namespace moec::moe::detail

#endif // MOEC_DIALECT_MOE_SHAPECHECKER_H
