//===- Indexing.h - strides, broadcasting and axes for the kernels -*- C++ -*-===//
//
// Shape arithmetic shared by the kernels. Tensors are small in the interpreter's
// use (tests and fixtures), so broadcasting materialises one index map per
// operand: simple to read, and fast enough.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_INTERPRETER_INDEXING_H
#define MOEC_INTERPRETER_INDEXING_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace moec::interp::detail {

using Shape = llvm::SmallVector<int64_t, 4>;

/// Row-major strides of `shape`.
inline Shape stridesOf(llvm::ArrayRef<int64_t> shape) {
  Shape strides(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

/// numpy's broadcast of two shapes (right-aligned; equal dims or 1), or
/// nullopt when they are incompatible.
inline std::optional<Shape> broadcastShapes(llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b) {
  size_t rank = std::max(a.size(), b.size());
  Shape result(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      return std::nullopt;
    result[i] = da == 1 ? db : da;
  }
  return result;
}

/// For each element of `outShape` in row-major order, the row-major index of
/// the element of a tensor of `inShape` that broadcasts to it. `inShape` must
/// broadcast to `outShape`.
inline std::vector<int64_t> broadcastIndexMap(llvm::ArrayRef<int64_t> inShape,
                                              llvm::ArrayRef<int64_t> outShape) {
  size_t rank = outShape.size(), offset = rank - inShape.size();
  Shape inStrides = stridesOf(inShape);
  // The stride of each output dimension in the input: 0 where it broadcasts.
  Shape strides(rank, 0);
  for (size_t i = offset; i < rank; ++i)
    strides[i] = inShape[i - offset] == 1 ? 0 : inStrides[i - offset];
  int64_t count = 1;
  for (int64_t size : outShape)
    count *= size;
  std::vector<int64_t> map(static_cast<size_t>(count));
  Shape counter(rank, 0);
  int64_t index = 0;
  for (int64_t out = 0; out < count; ++out) {
    map[out] = index;
    // Odometer increment, moving `index` along with it.
    for (int64_t d = static_cast<int64_t>(rank) - 1; d >= 0; --d) {
      index += strides[d];
      if (++counter[d] < outShape[d])
        break;
      index -= strides[d] * counter[d];
      counter[d] = 0;
    }
  }
  return map;
}

/// `axis` in [-rank, rank) as an index in [0, rank), or nullopt.
inline std::optional<int64_t> normalizeAxis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return std::nullopt;
  return axis < 0 ? axis + rank : axis;
}

/// The coordinates of row-major `index` in `shape`.
inline Shape unravel(int64_t index, llvm::ArrayRef<int64_t> shape) {
  Shape coords(shape.size(), 0);
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    coords[d] = shape[d] == 0 ? 0 : index % shape[d];
    index = shape[d] == 0 ? 0 : index / shape[d];
  }
  return coords;
}

/// Product of the dims [begin, end) of `shape`.
inline int64_t productOf(llvm::ArrayRef<int64_t> shape, size_t begin, size_t end) {
  int64_t product = 1;
  for (size_t i = begin; i < end; ++i)
    product *= shape[i];
  return product;
}

} // namespace moec::interp::detail

#endif // MOEC_INTERPRETER_INDEXING_H
