//===- ONNXShape.cpp - onnx ops that move elements ------------------------===//
//
// Reshape, Squeeze, Unsqueeze, Expand, Concat, Split, Slice, Transpose,
// Flatten, Tile, Shape, Size, ConstantOfShape and Range: ops whose results
// are input elements in another arrangement, or shapes as values.
//
//===----------------------------------------------------------------------===//

#include "Indexing.h"
#include "ONNXKernels.h"

#include "moec/Dialect/ONNX/ONNXDialect.h"
#include "moec/Interpreter/Interpreter.h"

#include "llvm/ADT/TypeSwitch.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace moec::onnx;

namespace moec::interp::detail {
namespace {

/// Calls `fn(coords, linear)` for every element of `shape` in row-major order.
void forEachIndex(ArrayRef<int64_t> shape,
                  llvm::function_ref<void(ArrayRef<int64_t>, int64_t)> fn) {
  int64_t count = numElementsOf(shape);
  Shape coords(shape.size(), 0);
  for (int64_t linear = 0; linear < count; ++linear) {
    fn(coords, linear);
    for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
      if (++coords[d] < shape[d])
        break;
      coords[d] = 0;
    }
  }
}

/// The input unchanged under a new shape (Reshape, Squeeze, Unsqueeze, Flatten).
LogicalResult reshaped(Operation *op, const Tensor &data, ArrayRef<int64_t> shape, Results &out) {
  if (numElementsOf(shape) != data.numElements())
    return op->emitOpError() << "cannot reshape " << formatShape(data.shape) << " ("
                             << data.numElements() << " elements) to " << formatShape(shape);
  Tensor &result = out.emplace_back(data);
  result.shape.assign(shape.begin(), shape.end());
  return success();
}

LogicalResult evalReshape(ReshapeOp op, Operands in, Results &out) {
  const Tensor &data = *in[0];
  SmallVector<int64_t> requested = toInt64s(*in[1]);
  bool allowzero = attrOr(op.getAllowzeroAttr(), 0) != 0;
  Shape shape;
  std::optional<size_t> inferred;
  for (auto [index, size] : llvm::enumerate(requested)) {
    if (size == 0 && !allowzero) {
      // 0 copies the input's dimension at the same index.
      if (static_cast<int64_t>(index) >= data.rank())
        return op.emitOpError() << "shape " << formatShape(requested) << " copies dimension "
                                << index << " (0), which " << formatShape(data.shape) << " lacks";
      shape.push_back(data.dim(index));
    } else if (size == -1) {
      if (inferred)
        return op.emitOpError() << "shape " << formatShape(requested) << " has two -1";
      inferred = index;
      shape.push_back(1);
    } else if (size < 0) {
      return op.emitOpError() << "shape " << formatShape(requested) << " has a negative size";
    } else {
      shape.push_back(size);
    }
  }
  if (inferred) {
    int64_t known = numElementsOf(shape);
    if (known == 0 || data.numElements() % known != 0)
      return op.emitOpError() << "cannot infer the -1 of " << formatShape(requested) << " for "
                              << formatShape(data.shape);
    shape[*inferred] = data.numElements() / known;
  }
  return reshaped(op, data, shape, out);
}

LogicalResult evalSqueeze(SqueezeOp op, Operands in, Results &out) {
  const Tensor &data = *in[0];
  SmallVector<bool> drop(data.rank(), false);
  if (in[1]) {
    for (int64_t axis : toInt64s(*in[1])) {
      std::optional<int64_t> d = normalizeAxis(axis, data.rank());
      if (!d)
        return op.emitOpError() << "axis " << axis << " is out of range for "
                                << formatShape(data.shape);
      if (data.dim(*d) != 1)
        return op.emitOpError() << "squeezes axis " << axis << " of " << formatShape(data.shape)
                                << ", which is not 1";
      drop[*d] = true;
    }
  } else {
    for (int64_t d = 0; d < data.rank(); ++d)
      drop[d] = data.dim(d) == 1;
  }
  Shape shape;
  for (int64_t d = 0; d < data.rank(); ++d)
    if (!drop[d])
      shape.push_back(data.dim(d));
  return reshaped(op, data, shape, out);
}

LogicalResult evalUnsqueeze(UnsqueezeOp op, Operands in, Results &out) {
  const Tensor &data = *in[0];
  SmallVector<int64_t> axes = toInt64s(*in[1]);
  int64_t rank = data.rank() + static_cast<int64_t>(axes.size());
  SmallVector<bool> inserted(rank, false);
  for (int64_t axis : axes) {
    std::optional<int64_t> d = normalizeAxis(axis, rank);
    if (!d || inserted[*d])
      return op.emitOpError() << "axes " << formatShape(axes) << " are out of range or repeat "
                              << "for an output of rank " << rank;
    inserted[*d] = true;
  }
  Shape shape;
  const int64_t *next = data.shape.begin();
  for (int64_t d = 0; d < rank; ++d)
    shape.push_back(inserted[d] ? 1 : *next++);
  return reshaped(op, data, shape, out);
}

LogicalResult evalFlatten(FlattenOp op, Operands in, Results &out) {
  const Tensor &data = *in[0];
  int64_t axis = attrOr(op.getAxisAttr(), 1);
  if (axis < 0)
    axis += data.rank();
  if (axis < 0 || axis > data.rank())
    return op.emitOpError() << "axis " << attrOr(op.getAxisAttr(), 1) << " is out of range for "
                            << formatShape(data.shape);
  int64_t outer = productOf(data.shape, 0, axis);
  int64_t inner = productOf(data.shape, axis, data.shape.size());
  return reshaped(op, data, {outer, inner}, out);
}

/// Expand: a bidirectional broadcast of the input with the given shape.
LogicalResult evalExpand(ExpandOp op, Operands in, Results &out) {
  const Tensor &data = *in[0];
  SmallVector<int64_t> requested = toInt64s(*in[1]);
  std::optional<Shape> shape = broadcastShapes(data.shape, requested);
  if (!shape)
    return op.emitOpError() << "cannot expand " << formatShape(data.shape) << " to "
                            << formatShape(requested);
  if (failed(checkResultShape(op, *shape)))
    return failure();
  Tensor &result = out.emplace_back(resultElementType(op), *shape);
  std::vector<int64_t> map = broadcastIndexMap(data.shape, *shape);
  for (int64_t i = 0, e = result.numElements(); i < e; ++i)
    result.values[i] = data.values[map[i]];
  return success();
}

LogicalResult evalConcat(ConcatOp op, Operands in, Results &out) {
  if (in.empty())
    return op.emitOpError("needs at least one input");
  const Tensor &first = *in[0];
  std::optional<int64_t> axis = normalizeAxis(op.getAxisAttr().getInt(), first.rank());
  if (!axis)
    return op.emitOpError() << "axis " << op.getAxisAttr().getInt() << " is out of range for "
                            << formatShape(first.shape);
  Shape shape = first.shape;
  shape[*axis] = 0;
  for (const Tensor *input : in) {
    bool fits = input->rank() == first.rank();
    for (int64_t d = 0; fits && d < first.rank(); ++d)
      fits = d == *axis || input->dim(d) == first.dim(d);
    if (!fits)
      return op.emitOpError() << "concatenates " << formatShape(input->shape) << " with "
                              << formatShape(first.shape) << " along axis " << *axis;
    shape[*axis] += input->dim(*axis);
  }
  Tensor &result = out.emplace_back(resultElementType(op), shape);
  int64_t outer = productOf(shape, 0, *axis), inner = productOf(shape, *axis + 1, shape.size());
  auto dest = result.values.begin();
  for (int64_t o = 0; o < outer; ++o)
    for (const Tensor *input : in) {
      int64_t block = input->dim(*axis) * inner;
      dest = std::copy_n(input->values.begin() + o * block, block, dest);
    }
  return success();
}

LogicalResult evalSplit(SplitOp op, Operands in, Results &out) {
  const Tensor &data = *in[0];
  std::optional<int64_t> axis = normalizeAxis(attrOr(op.getAxisAttr(), 0), data.rank());
  if (!axis)
    return op.emitOpError() << "axis is out of range for " << formatShape(data.shape);
  int64_t size = data.dim(*axis), count = op.getNumResults();
  SmallVector<int64_t> sizes;
  if (in[1]) {
    sizes = toInt64s(*in[1]);
  } else if (IntegerAttr numOutputs = op.getNumOutputsAttr()) {
    if (numOutputs.getInt() != count)
      return op.emitOpError() << "num_outputs = " << numOutputs.getInt() << ", but the op has "
                              << count << " results";
    // Chunks of ceil(size / n); the last one may be smaller.
    int64_t chunk = (size + count - 1) / count;
    for (int64_t i = 0; i < count; ++i)
      sizes.push_back(std::max<int64_t>(0, std::min(chunk, size - i * chunk)));
  } else {
    if (size % count != 0)
      return op.emitOpError() << "cannot split dimension " << size << " into " << count
                              << " equal parts";
    sizes.assign(count, size / count);
  }
  int64_t total = 0;
  for (int64_t s : sizes)
    total += s;
  if (static_cast<int64_t>(sizes.size()) != count || total != size ||
      llvm::any_of(sizes, [](int64_t s) { return s < 0; }))
    return op.emitOpError() << "split sizes " << formatShape(sizes) << " do not divide axis "
                            << *axis << " of " << formatShape(data.shape) << " into " << count
                            << " parts";
  int64_t outer = productOf(data.shape, 0, *axis);
  int64_t inner = productOf(data.shape, *axis + 1, data.shape.size());
  int64_t begin = 0;
  for (auto [index, part] : llvm::enumerate(sizes)) {
    Shape shape = data.shape;
    shape[*axis] = part;
    Tensor &result = out.emplace_back(resultElementType(op, index), shape);
    auto dest = result.values.begin();
    for (int64_t o = 0; o < outer; ++o)
      dest = std::copy_n(data.values.begin() + (o * size + begin) * inner, part * inner, dest);
    begin += part;
  }
  return success();
}

/// Slice with ONNX's clamping: negative starts and ends count from the end;
/// for a positive step both clamp to [0, dim], for a negative step the start
/// clamps to [0, dim-1] and the end to [-1, dim-1].
LogicalResult evalSlice(SliceOp op, Operands in, Results &out) {
  const Tensor &data = *in[0];
  SmallVector<int64_t> starts = toInt64s(*in[1]), ends = toInt64s(*in[2]);
  size_t n = starts.size();
  SmallVector<int64_t> axes, steps(n, 1);
  if (in[3]) {
    axes = toInt64s(*in[3]);
  } else {
    for (size_t i = 0; i < n; ++i)
      axes.push_back(static_cast<int64_t>(i));
  }
  if (in[4])
    steps = toInt64s(*in[4]);
  if (ends.size() != n || axes.size() != n || steps.size() != n)
    return op.emitOpError() << "starts, ends, axes and steps have different lengths";
  Shape begin(data.rank(), 0), stride(data.rank(), 1), shape = data.shape;
  SmallVector<bool> seen(data.rank(), false);
  for (size_t i = 0; i < n; ++i) {
    std::optional<int64_t> axis = normalizeAxis(axes[i], data.rank());
    if (!axis || seen[*axis])
      return op.emitOpError() << "axis " << axes[i] << " is out of range or repeats for "
                              << formatShape(data.shape);
    seen[*axis] = true;
    int64_t dim = data.dim(*axis), step = steps[i];
    if (step == 0)
      return op.emitOpError() << "step 0 on axis " << axes[i];
    // Clamp first: ends of ±INT64_MAX must not overflow when dim is added.
    int64_t start = std::clamp<int64_t>(starts[i], -dim - 1, dim + 1);
    int64_t end = std::clamp<int64_t>(ends[i], -dim - 1, dim + 1);
    if (start < 0)
      start += dim;
    if (end < 0)
      end += dim;
    int64_t count;
    if (step > 0) {
      start = std::clamp<int64_t>(start, 0, dim);
      end = std::clamp<int64_t>(end, 0, dim);
      count = end > start ? (end - start + step - 1) / step : 0;
    } else if (dim == 0) {
      start = end = 0;
      count = 0;
    } else {
      start = std::clamp<int64_t>(start, 0, dim - 1);
      end = std::clamp<int64_t>(end, -1, dim - 1);
      count = start > end ? (start - end - step - 1) / -step : 0;
    }
    begin[*axis] = start;
    stride[*axis] = step;
    shape[*axis] = count;
  }
  Tensor &result = out.emplace_back(resultElementType(op), shape);
  Shape strides = stridesOf(data.shape);
  forEachIndex(shape, [&](ArrayRef<int64_t> coords, int64_t linear) {
    int64_t source = 0;
    for (size_t d = 0; d < coords.size(); ++d)
      source += (begin[d] + coords[d] * stride[d]) * strides[d];
    result.values[linear] = data.values[source];
  });
  return success();
}

LogicalResult evalTranspose(TransposeOp op, Operands in, Results &out) {
  const Tensor &data = *in[0];
  SmallVector<int64_t> perm;
  if (std::optional<ArrayRef<int64_t>> given = op.getPerm())
    perm.assign(given->begin(), given->end());
  else
    for (int64_t d = data.rank() - 1; d >= 0; --d)
      perm.push_back(d);
  SmallVector<bool> seen(data.rank(), false);
  bool valid = static_cast<int64_t>(perm.size()) == data.rank();
  for (int64_t p : perm) {
    valid = valid && p >= 0 && p < data.rank() && !seen[p];
    if (valid)
      seen[p] = true;
  }
  if (!valid)
    return op.emitOpError() << "perm " << formatShape(perm) << " is no permutation of "
                            << data.rank() << " axes";
  Shape shape;
  for (int64_t p : perm)
    shape.push_back(data.dim(p));
  Tensor &result = out.emplace_back(resultElementType(op), shape);
  Shape strides = stridesOf(data.shape);
  forEachIndex(shape, [&](ArrayRef<int64_t> coords, int64_t linear) {
    int64_t source = 0;
    for (size_t d = 0; d < coords.size(); ++d)
      source += coords[d] * strides[perm[d]];
    result.values[linear] = data.values[source];
  });
  return success();
}

LogicalResult evalTile(TileOp op, Operands in, Results &out) {
  const Tensor &data = *in[0];
  SmallVector<int64_t> repeats = toInt64s(*in[1]);
  if (static_cast<int64_t>(repeats.size()) != data.rank() ||
      llvm::any_of(repeats, [](int64_t r) { return r < 0; }))
    return op.emitOpError() << "repeats " << formatShape(repeats) << " do not fit "
                            << formatShape(data.shape);
  Shape shape;
  for (auto [size, repeat] : llvm::zip(data.shape, repeats))
    shape.push_back(size * repeat);
  if (failed(checkResultShape(op, shape)))
    return failure();
  Tensor &result = out.emplace_back(resultElementType(op), shape);
  Shape strides = stridesOf(data.shape);
  forEachIndex(shape, [&](ArrayRef<int64_t> coords, int64_t linear) {
    int64_t source = 0;
    for (size_t d = 0; d < coords.size(); ++d)
      source += (coords[d] % data.dim(d)) * strides[d];
    result.values[linear] = data.values[source];
  });
  return success();
}

LogicalResult evalShape(ShapeOp op, Operands in, Results &out) {
  const Tensor &data = *in[0];
  int64_t rank = data.rank();
  auto clampIndex = [rank](int64_t i) {
    return std::clamp<int64_t>(i < 0 ? i + rank : i, 0, rank);
  };
  int64_t start = clampIndex(attrOr(op.getStartAttr(), 0));
  int64_t end = clampIndex(attrOr(op.getEndAttr(), rank));
  int64_t count = std::max<int64_t>(0, end - start);
  Tensor &result = out.emplace_back(resultElementType(op), ArrayRef<int64_t>{count});
  for (int64_t i = 0; i < count; ++i)
    result.values[i] = static_cast<double>(data.dim(start + i));
  return success();
}

LogicalResult evalConstantOfShape(ConstantOfShapeOp op, Operands in, Results &out) {
  SmallVector<int64_t> shape = toInt64s(*in[0]);
  if (failed(checkResultShape(op, shape)))
    return failure();
  double fill = 0.0;
  if (ElementsAttr value = op.getValueAttr()) {
    FailureOr<Tensor> tensor = tensorFromAttribute(value, op.getLoc());
    if (failed(tensor))
      return failure();
    if (tensor->numElements() != 1)
      return op.emitOpError("'value' must hold one element");
    fill = tensor->values[0];
  }
  out.emplace_back(resultElementType(op), shape, fill);
  return success();
}

LogicalResult evalRange(RangeOp op, Operands in, Results &out) {
  for (const Tensor *t : in)
    if (t->numElements() != 1)
      return op.emitOpError("start, limit and delta must be scalars");
  double start = in[0]->values[0], limit = in[1]->values[0], delta = in[2]->values[0];
  if (delta == 0.0)
    return op.emitOpError("delta is 0");
  int64_t count = std::max<int64_t>(0, toInt64(std::ceil((limit - start) / delta)));
  if (failed(checkResultShape(op, {count})))
    return failure();
  Tensor &result = out.emplace_back(resultElementType(op), ArrayRef<int64_t>{count});
  for (int64_t i = 0; i < count; ++i)
    result.values[i] = start + static_cast<double>(i) * delta;
  return success();
}

} // namespace

std::optional<LogicalResult> evalONNXShape(Operation *op, Operands in, Results &out) {
  using Handled = std::optional<LogicalResult>;
  return llvm::TypeSwitch<Operation *, Handled>(op)
      .Case<ReshapeOp>([&](ReshapeOp o) { return evalReshape(o, in, out); })
      .Case<SqueezeOp>([&](SqueezeOp o) { return evalSqueeze(o, in, out); })
      .Case<UnsqueezeOp>([&](UnsqueezeOp o) { return evalUnsqueeze(o, in, out); })
      .Case<FlattenOp>([&](FlattenOp o) { return evalFlatten(o, in, out); })
      .Case<ExpandOp>([&](ExpandOp o) { return evalExpand(o, in, out); })
      .Case<ConcatOp>([&](ConcatOp o) { return evalConcat(o, in, out); })
      .Case<SplitOp>([&](SplitOp o) { return evalSplit(o, in, out); })
      .Case<SliceOp>([&](SliceOp o) { return evalSlice(o, in, out); })
      .Case<TransposeOp>([&](TransposeOp o) { return evalTranspose(o, in, out); })
      .Case<TileOp>([&](TileOp o) { return evalTile(o, in, out); })
      .Case<ShapeOp>([&](ShapeOp o) { return evalShape(o, in, out); })
      .Case<SizeOp>([&](SizeOp o) -> Handled {
        out.emplace_back(resultElementType(o), ArrayRef<int64_t>{},
                         static_cast<double>(in[0]->numElements()));
        return success();
      })
      .Case<ConstantOfShapeOp>([&](ConstantOfShapeOp o) { return evalConstantOfShape(o, in, out); })
      .Case<RangeOp>([&](RangeOp o) { return evalRange(o, in, out); })
      .Default([](Operation *) -> Handled { return std::nullopt; });
}

} // namespace moec::interp::detail
