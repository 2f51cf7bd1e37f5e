//===- ONNXIndexing.cpp - onnx ops driven by index tensors ----------------===//
//
// Gather, GatherElements, GatherND, ScatterElements, ScatterND, OneHot,
// NonZero and Trilu. Negative indices count from the end of their axis, as
// ONNX allows; an index outside [-dim, dim) is an error that names the op,
// the index and the axis (onnxruntime fails such a run as well).
//
//===----------------------------------------------------------------------===//

#include "Indexing.h"
#include "ONNXKernels.h"

#include "moec/Dialect/ONNX/ONNXDialect.h"

#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

using namespace mlir;
using namespace moec::onnx;

namespace moec::interp::detail {
namespace {

/// `value` as an index into an axis of `dim` elements (negative from the end),
/// or nullopt with an error at `op` when it lies outside.
std::optional<int64_t> indexInto(Operation *op, double value, int64_t dim, int64_t axis) {
  int64_t index = toInt64(value);
  if (index < -dim || index >= dim) {
    op->emitOpError() << "index " << index << " is out of range for axis " << axis << " of size "
                      << dim;
    return std::nullopt;
  }
  return index < 0 ? index + dim : index;
}

/// GatherElements/ScatterElements: the flat position in `data` (row-major
/// `strides`) of element `i` of `indices`, whose value replaces its coordinate
/// on `axis`; nullopt with an error at `op` when that value is out of range.
std::optional<int64_t> elementAlongAxis(Operation *op, const Tensor &indices, int64_t i,
                                        const Tensor &data, int64_t axis, const Shape &strides) {
  Shape coords = unravel(i, indices.shape);
  std::optional<int64_t> index = indexInto(op, indices.values[i], data.dim(axis), axis);
  if (!index)
    return std::nullopt;
  coords[axis] = *index;
  int64_t position = 0;
  for (int64_t d = 0; d < data.rank(); ++d)
    position += coords[d] * strides[d];
  return position;
}

/// GatherElements/ScatterElements: `indices` (of data's rank) may be no larger
/// than `data` on every dimension but `axis`.
LogicalResult checkIndicesWithinData(Operation *op, const Tensor &indices, const Tensor &data,
                                     int64_t axis) {
  for (int64_t d = 0; d < data.rank(); ++d)
    if (d != axis && indices.dim(d) > data.dim(d))
      return op->emitOpError() << "indices " << formatShape(indices.shape) << " exceed data "
                               << formatShape(data.shape) << " on axis " << d;
  return success();
}

LogicalResult evalGather(GatherOp op, Operands in, Results &out) {
  const Tensor &data = *in[0], &indices = *in[1];
  std::optional<int64_t> axis = normalizeAxis(attrOr(op.getAxisAttr(), 0), data.rank());
  if (!axis)
    return op.emitOpError() << "axis is out of range for " << formatShape(data.shape);
  Shape shape(data.shape.begin(), data.shape.begin() + *axis);
  shape.append(indices.shape.begin(), indices.shape.end());
  shape.append(data.shape.begin() + *axis + 1, data.shape.end());
  Tensor &result = out.emplace_back(resultElementType(op), shape);
  int64_t dim = data.dim(*axis), count = indices.numElements();
  int64_t outer = productOf(data.shape, 0, *axis);
  int64_t inner = productOf(data.shape, *axis + 1, data.shape.size());
  for (int64_t j = 0; j < count; ++j) {
    std::optional<int64_t> index = indexInto(op, indices.values[j], dim, *axis);
    if (!index)
      return failure();
    for (int64_t o = 0; o < outer; ++o)
      std::copy_n(data.values.begin() + (o * dim + *index) * inner, inner,
                  result.values.begin() + (o * count + j) * inner);
  }
  return success();
}

LogicalResult evalGatherElements(GatherElementsOp op, Operands in, Results &out) {
  const Tensor &data = *in[0], &indices = *in[1];
  std::optional<int64_t> axis = normalizeAxis(attrOr(op.getAxisAttr(), 0), data.rank());
  if (!axis || indices.rank() != data.rank())
    return op.emitOpError() << "indices " << formatShape(indices.shape) << " and axis "
                            << attrOr(op.getAxisAttr(), 0) << " do not fit data "
                            << formatShape(data.shape);
  if (failed(checkIndicesWithinData(op, indices, data, *axis)))
    return failure();
  Tensor &result = out.emplace_back(resultElementType(op), indices.shape);
  Shape strides = stridesOf(data.shape);
  for (int64_t i = 0, e = indices.numElements(); i < e; ++i) {
    std::optional<int64_t> source = elementAlongAxis(op, indices, i, data, *axis, strides);
    if (!source)
      return failure();
    result.values[i] = data.values[*source];
  }
  return success();
}

/// Where GatherND and ScatterND address `data` with the last dimension of
/// `indices`: the offset of each addressed slab, the slab size, and the shape
/// of the index tuples. `batchDims` leading dimensions are shared.
struct NDAddressing {
  std::vector<int64_t> offsets;
  int64_t slab = 1;
  Shape tupleShape;
};

std::optional<NDAddressing> addressND(Operation *op, const Tensor &data, const Tensor &indices,
                                      int64_t batchDims) {
  int64_t depth = indices.rank() > 0 ? indices.shape.back() : 0;
  if (indices.rank() < 1 || batchDims < 0 || batchDims >= indices.rank() ||
      batchDims >= data.rank() || depth < 1 || batchDims + depth > data.rank()) {
    op->emitOpError() << "indices " << formatShape(indices.shape) << " with batch_dims "
                      << batchDims << " do not address data " << formatShape(data.shape);
    return std::nullopt;
  }
  for (int64_t d = 0; d < batchDims; ++d)
    if (indices.dim(d) != data.dim(d)) {
      op->emitOpError() << "batch dimension " << d << " of indices " << formatShape(indices.shape)
                        << " and data " << formatShape(data.shape) << " differ";
      return std::nullopt;
    }
  NDAddressing addressing;
  addressing.tupleShape.assign(indices.shape.begin(), indices.shape.end() - 1);
  addressing.slab = productOf(data.shape, batchDims + depth, data.shape.size());
  Shape strides = stridesOf(data.shape);
  int64_t tuples = numElementsOf(addressing.tupleShape);
  for (int64_t t = 0; t < tuples; ++t) {
    Shape coords = unravel(t, addressing.tupleShape);
    int64_t offset = 0;
    for (int64_t d = 0; d < batchDims; ++d)
      offset += coords[d] * strides[d];
    for (int64_t j = 0; j < depth; ++j) {
      int64_t axis = batchDims + j;
      std::optional<int64_t> index =
          indexInto(op, indices.values[t * depth + j], data.dim(axis), axis);
      if (!index)
        return std::nullopt;
      offset += *index * strides[axis];
    }
    addressing.offsets.push_back(offset);
  }
  return addressing;
}

LogicalResult evalGatherND(GatherNDOp op, Operands in, Results &out) {
  const Tensor &data = *in[0], &indices = *in[1];
  int64_t batchDims = attrOr(op.getBatchDimsAttr(), 0);
  std::optional<NDAddressing> addressing = addressND(op, data, indices, batchDims);
  if (!addressing)
    return failure();
  // Output: indices.shape[:-1] + data.shape[batch_dims + depth:].
  Shape shape = addressing->tupleShape;
  shape.append(data.shape.begin() + batchDims + indices.shape.back(), data.shape.end());
  Tensor &result = out.emplace_back(resultElementType(op), shape);
  int64_t slab = addressing->slab;
  for (auto [t, offset] : llvm::enumerate(addressing->offsets))
    std::copy_n(data.values.begin() + offset, slab, result.values.begin() + t * slab);
  return success();
}

/// The update rule of ScatterElements and ScatterND, or nullopt after an error.
std::optional<double (*)(double, double)> reductionOf(Operation *op,
                                                      std::optional<StringRef> name) {
  StringRef reduction = name.value_or("none");
  if (reduction == "none")
    return [](double, double update) { return update; };
  if (reduction == "add")
    return [](double old, double update) { return old + update; };
  if (reduction == "mul")
    return [](double old, double update) { return old * update; };
  if (reduction == "max")
    return [](double old, double update) { return std::max(old, update); };
  if (reduction == "min")
    return [](double old, double update) { return std::min(old, update); };
  op->emitOpError() << "reduction \"" << reduction << "\" is not none, add, mul, max or min";
  return std::nullopt;
}

LogicalResult evalScatterElements(ScatterElementsOp op, Operands in, Results &out) {
  const Tensor &data = *in[0], &indices = *in[1], &updates = *in[2];
  std::optional<double (*)(double, double)> apply = reductionOf(op, op.getReduction());
  if (!apply)
    return failure();
  std::optional<int64_t> axis = normalizeAxis(attrOr(op.getAxisAttr(), 0), data.rank());
  if (!axis || indices.rank() != data.rank() || indices.shape != updates.shape)
    return op.emitOpError() << "indices " << formatShape(indices.shape) << ", updates "
                            << formatShape(updates.shape) << " and axis "
                            << attrOr(op.getAxisAttr(), 0) << " do not fit data "
                            << formatShape(data.shape);
  if (failed(checkIndicesWithinData(op, indices, data, *axis)))
    return failure();
  Tensor &result = out.emplace_back(data);
  result.elementType = resultElementType(op);
  Shape strides = stridesOf(data.shape);
  for (int64_t i = 0, e = indices.numElements(); i < e; ++i) {
    std::optional<int64_t> target = elementAlongAxis(op, indices, i, data, *axis, strides);
    if (!target)
      return failure();
    result.values[*target] = (*apply)(result.values[*target], updates.values[i]);
  }
  return success();
}

LogicalResult evalScatterND(ScatterNDOp op, Operands in, Results &out) {
  const Tensor &data = *in[0], &indices = *in[1], &updates = *in[2];
  std::optional<double (*)(double, double)> apply = reductionOf(op, op.getReduction());
  if (!apply)
    return failure();
  std::optional<NDAddressing> addressing = addressND(op, data, indices, 0);
  if (!addressing)
    return failure();
  Shape expected = addressing->tupleShape;
  expected.append(data.shape.begin() + indices.shape.back(), data.shape.end());
  if (updates.shape != expected)
    return op.emitOpError() << "updates " << formatShape(updates.shape) << " must be "
                            << formatShape(expected);
  Tensor &result = out.emplace_back(data);
  result.elementType = resultElementType(op);
  int64_t slab = addressing->slab;
  for (auto [t, offset] : llvm::enumerate(addressing->offsets))
    for (int64_t i = 0; i < slab; ++i)
      result.values[offset + i] = (*apply)(result.values[offset + i], updates.values[t * slab + i]);
  return success();
}

LogicalResult evalOneHot(OneHotOp op, Operands in, Results &out) {
  const Tensor &indices = *in[0], &depthTensor = *in[1], &values = *in[2];
  if (depthTensor.numElements() != 1 || values.numElements() != 2)
    return op.emitOpError("'depth' must be a scalar and 'values' hold [off, on]");
  int64_t depth = toInt64(depthTensor.values[0]);
  if (depth < 1)
    return op.emitOpError() << "depth " << depth << " is not positive";
  int64_t rank = indices.rank() + 1;
  std::optional<int64_t> axis = normalizeAxis(attrOr(op.getAxisAttr(), -1), rank);
  if (!axis)
    return op.emitOpError() << "axis is out of range for an output of rank " << rank;
  Shape shape = indices.shape;
  shape.insert(shape.begin() + *axis, depth);
  if (failed(checkResultShape(op, shape)))
    return failure();
  Tensor &result = out.emplace_back(resultElementType(op), shape, values.values[0]);
  int64_t outer = productOf(indices.shape, 0, *axis);
  int64_t inner = productOf(indices.shape, *axis, indices.shape.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      int64_t index = toInt64(indices.values[o * inner + i]);
      if (index < 0)
        index += depth;
      if (index >= 0 && index < depth) // out of range: all "off", as ONNX says
        result.values[(o * depth + index) * inner + i] = values.values[1];
    }
  return success();
}

LogicalResult evalNonZero(NonZeroOp op, Operands in, Results &out) {
  const Tensor &x = *in[0];
  std::vector<int64_t> hits;
  for (int64_t i = 0, e = x.numElements(); i < e; ++i)
    if (x.values[i] != 0.0)
      hits.push_back(i);
  int64_t count = static_cast<int64_t>(hits.size());
  Tensor &result = out.emplace_back(resultElementType(op), ArrayRef<int64_t>{x.rank(), count});
  for (int64_t j = 0; j < count; ++j) {
    Shape coords = unravel(hits[j], x.shape);
    for (int64_t d = 0; d < x.rank(); ++d)
      result.values[d * count + j] = static_cast<double>(coords[d]);
  }
  return success();
}

LogicalResult evalTrilu(TriluOp op, Operands in, Results &out) {
  const Tensor &x = *in[0];
  if (x.rank() < 2)
    return op.emitOpError() << "takes a matrix or a batch of them, got " << formatShape(x.shape);
  int64_t k = 0;
  if (in[1]) {
    if (in[1]->numElements() != 1)
      return op.emitOpError("'k' must be a scalar");
    k = toInt64(in[1]->values[0]);
  }
  bool upper = attrOr(op.getUpperAttr(), 1) != 0;
  Tensor &result = out.emplace_back(x);
  result.elementType = resultElementType(op);
  int64_t rows = x.dim(x.rank() - 2), cols = x.dim(x.rank() - 1);
  for (int64_t i = 0, e = x.numElements(); i < e; ++i) {
    int64_t row = (i / cols) % rows, col = i % cols;
    bool keep = upper ? col - row >= k : col - row <= k;
    if (!keep)
      result.values[i] = 0.0;
  }
  return success();
}

} // namespace

std::optional<LogicalResult> evalONNXIndexing(Operation *op, Operands in, Results &out) {
  using Handled = std::optional<LogicalResult>;
  return llvm::TypeSwitch<Operation *, Handled>(op)
      .Case<GatherOp>([&](GatherOp o) { return evalGather(o, in, out); })
      .Case<GatherElementsOp>([&](GatherElementsOp o) { return evalGatherElements(o, in, out); })
      .Case<GatherNDOp>([&](GatherNDOp o) { return evalGatherND(o, in, out); })
      .Case<ScatterElementsOp>([&](ScatterElementsOp o) { return evalScatterElements(o, in, out); })
      .Case<ScatterNDOp>([&](ScatterNDOp o) { return evalScatterND(o, in, out); })
      .Case<OneHotOp>([&](OneHotOp o) { return evalOneHot(o, in, out); })
      .Case<NonZeroOp>([&](NonZeroOp o) { return evalNonZero(o, in, out); })
      .Case<TriluOp>([&](TriluOp o) { return evalTrilu(o, in, out); })
      .Default([](Operation *) -> Handled { return std::nullopt; });
}

} // namespace moec::interp::detail
