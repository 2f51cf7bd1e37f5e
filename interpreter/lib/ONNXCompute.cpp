//===- ONNXCompute.cpp - matmuls, softmax, reductions, top-k --------------===//
//
// The onnx ops that combine elements: MatMul and Gemm (sums over K in
// ascending order, in f64), Softmax, the Reduce* family, CumSum, TopK and
// ArgMax/ArgMin.
//
//===----------------------------------------------------------------------===//

#include "Indexing.h"
#include "ONNXKernels.h"

#include "moec/Dialect/ONNX/ONNXDialect.h"

#include "llvm/ADT/TypeSwitch.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

using namespace mlir;
using namespace moec::onnx;

namespace moec::interp::detail {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

/// numpy.matmul: 1-D operands are promoted to matrices and the added dimension
/// removed again; batch dimensions broadcast.
LogicalResult evalMatMul(MatMulOp op, Operands in, Results &out) {
  const Tensor &a = *in[0], &b = *in[1];
  if (a.rank() == 0 || b.rank() == 0)
    return op.emitOpError("takes no scalars");
  Shape aShape = a.shape, bShape = b.shape;
  if (a.rank() == 1)
    aShape.insert(aShape.begin(), 1);
  if (b.rank() == 1)
    bShape.push_back(1);
  int64_t m = aShape[aShape.size() - 2], k = aShape.back();
  int64_t kb = bShape[bShape.size() - 2], n = bShape.back();
  if (k != kb)
    return op.emitOpError() << "contracts A " << formatShape(a.shape) << " with B "
                            << formatShape(b.shape) << ": inner dimensions " << k << " and " << kb
                            << " differ";
  ArrayRef<int64_t> aBatch = ArrayRef<int64_t>(aShape).drop_back(2);
  ArrayRef<int64_t> bBatch = ArrayRef<int64_t>(bShape).drop_back(2);
  std::optional<Shape> batch = broadcastShapes(aBatch, bBatch);
  if (!batch)
    return op.emitOpError() << "batch dimensions of A " << formatShape(a.shape) << " and B "
                            << formatShape(b.shape) << " do not broadcast";
  Shape shape = *batch;
  if (a.rank() > 1)
    shape.push_back(m);
  if (b.rank() > 1)
    shape.push_back(n);
  Tensor &result = out.emplace_back(resultElementType(op), shape);
  std::vector<int64_t> aMap = broadcastIndexMap(aBatch, *batch);
  std::vector<int64_t> bMap = broadcastIndexMap(bBatch, *batch);
  std::vector<double> row(static_cast<size_t>(n));
  for (size_t batchIndex = 0; batchIndex < aMap.size(); ++batchIndex) {
    const double *pa = a.values.data() + aMap[batchIndex] * m * k;
    const double *pb = b.values.data() + bMap[batchIndex] * k * n;
    double *pr = result.values.data() + batchIndex * m * n;
    for (int64_t i = 0; i < m; ++i) {
      std::fill(row.begin(), row.end(), 0.0);
      for (int64_t p = 0; p < k; ++p) {
        double x = pa[i * k + p];
        for (int64_t j = 0; j < n; ++j)
          row[j] += x * pb[p * n + j];
      }
      std::copy(row.begin(), row.end(), pr + i * n);
    }
  }
  return success();
}

/// Y = alpha · A' · B' + beta · C, with C broadcast to [M, N].
LogicalResult evalGemm(GemmOp op, Operands in, Results &out) {
  const Tensor &a = *in[0], &b = *in[1];
  const Tensor *c = in[2];
  if (a.rank() != 2 || b.rank() != 2)
    return op.emitOpError() << "takes matrices, got A " << formatShape(a.shape) << " and B "
                            << formatShape(b.shape);
  bool transA = attrOr(op.getTransAAttr(), 0) != 0, transB = attrOr(op.getTransBAttr(), 0) != 0;
  double alpha = attrOr(op.getAlphaAttr(), 1.0), beta = attrOr(op.getBetaAttr(), 1.0);
  int64_t m = transA ? a.dim(1) : a.dim(0), k = transA ? a.dim(0) : a.dim(1);
  int64_t kb = transB ? b.dim(1) : b.dim(0), n = transB ? b.dim(0) : b.dim(1);
  if (k != kb)
    return op.emitOpError() << "contracts A' [" << m << ", " << k << "] with B' [" << kb << ", "
                            << n << "]: inner dimensions differ";
  Tensor &result = out.emplace_back(resultElementType(op), ArrayRef<int64_t>{m, n});
  std::vector<int64_t> cMap;
  if (c) {
    std::optional<Shape> shape = broadcastShapes(c->shape, result.shape);
    if (!shape || *shape != result.shape)
      return op.emitOpError() << "C " << formatShape(c->shape) << " does not broadcast to [" << m
                              << ", " << n << "]";
    cMap = broadcastIndexMap(c->shape, result.shape);
  }
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0.0;
      for (int64_t p = 0; p < k; ++p)
        sum += a.values[transA ? p * m + i : i * k + p] * b.values[transB ? j * k + p : p * n + j];
      double value = alpha * sum;
      if (c)
        value += beta * c->values[cMap[i * n + j]];
      result.values[i * n + j] = value;
    }
  return success();
}

LogicalResult evalSoftmax(SoftmaxOp op, Operands in, Results &out) {
  const Tensor &x = *in[0];
  std::optional<int64_t> axis = normalizeAxis(attrOr(op.getAxisAttr(), -1), x.rank());
  if (!axis)
    return op.emitOpError() << "axis " << attrOr(op.getAxisAttr(), -1) << " is out of range for "
                            << formatShape(x.shape);
  Tensor &result = out.emplace_back(resultElementType(op), x.shape);
  int64_t size = x.dim(*axis), inner = productOf(x.shape, *axis + 1, x.shape.size());
  int64_t outer = productOf(x.shape, 0, *axis);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t j) { return (o * size + j) * inner + i; };
      double max = -kInf;
      for (int64_t j = 0; j < size; ++j)
        max = std::max(max, x.values[at(j)]);
      double sum = 0.0;
      for (int64_t j = 0; j < size; ++j)
        sum += result.values[at(j)] = std::exp(x.values[at(j)] - max);
      for (int64_t j = 0; j < size; ++j)
        result.values[at(j)] /= sum;
    }
  return success();
}

/// The axes a reduction or CumSum names, normalised; nullopt after an error.
std::optional<SmallVector<int64_t>> normalizeAxes(Operation *op, ArrayRef<int64_t> axes,
                                                  int64_t rank) {
  SmallVector<int64_t> result;
  for (int64_t axis : axes) {
    std::optional<int64_t> normalized = normalizeAxis(axis, rank);
    if (!normalized) {
      op->emitOpError() << "axis " << axis << " is out of range for rank " << rank;
      return std::nullopt;
    }
    if (llvm::is_contained(result, *normalized)) {
      op->emitOpError() << "names axis " << axis << " twice";
      return std::nullopt;
    }
    result.push_back(*normalized);
  }
  return result;
}

/// ReduceSum/Mean/Max/Min/Prod: `axes` (an optional input), `keepdims`,
/// `noop_with_empty_axes`. Each output element folds its inputs in row-major
/// order with `combine`, starting from `init`.
LogicalResult reduce(Operation *op, Operands in, Results &out, IntegerAttr keepdimsAttr,
                     IntegerAttr noopAttr, double init,
                     llvm::function_ref<double(double, double)> combine, bool mean) {
  const Tensor &data = *in[0];
  SmallVector<int64_t> axes = in[1] ? toInt64s(*in[1]) : SmallVector<int64_t>();
  if (axes.empty() && attrOr(noopAttr, 0) != 0) {
    out.push_back(data); // noop_with_empty_axes: the identity
    return success();
  }
  std::optional<SmallVector<int64_t>> normalized = normalizeAxes(op, axes, data.rank());
  if (!normalized)
    return failure();
  if (normalized->empty())
    for (int64_t d = 0; d < data.rank(); ++d)
      normalized->push_back(d);
  Shape kept = data.shape, shape;
  for (int64_t d : *normalized)
    kept[d] = 1;
  bool keepdims = attrOr(keepdimsAttr, 1) != 0;
  for (int64_t d = 0; d < data.rank(); ++d)
    if (keepdims || !llvm::is_contained(*normalized, d))
      shape.push_back(kept[d]);
  Tensor &result = out.emplace_back(resultElementType(op), shape, init);
  // The kept shape broadcasts to the input's: that map sends each input element
  // to the output element it reduces into.
  std::vector<int64_t> target = broadcastIndexMap(kept, data.shape);
  for (int64_t i = 0, e = data.numElements(); i < e; ++i)
    result.values[target[i]] = combine(result.values[target[i]], data.values[i]);
  if (mean) {
    int64_t count = result.numElements() ? data.numElements() / result.numElements() : 0;
    for (double &value : result.values)
      value /= static_cast<double>(count);
  }
  return success();
}

double maxOf(double a, double b) { return std::isnan(a) || std::isnan(b) ? kNaN : std::max(a, b); }
double minOf(double a, double b) { return std::isnan(a) || std::isnan(b) ? kNaN : std::min(a, b); }
double add(double a, double b) { return a + b; }

LogicalResult evalCumSum(CumSumOp op, Operands in, Results &out) {
  const Tensor &x = *in[0];
  if (in[1]->numElements() != 1)
    return op.emitOpError("'axis' must hold one value");
  std::optional<int64_t> axis = normalizeAxis(toInt64(in[1]->values[0]), x.rank());
  if (!axis)
    return op.emitOpError() << "axis is out of range for " << formatShape(x.shape);
  bool exclusive = attrOr(op.getExclusiveAttr(), 0) != 0;
  bool reverse = attrOr(op.getReverseAttr(), 0) != 0;
  Tensor &result = out.emplace_back(resultElementType(op), x.shape);
  int64_t size = x.dim(*axis), inner = productOf(x.shape, *axis + 1, x.shape.size());
  int64_t outer = productOf(x.shape, 0, *axis);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      double sum = 0.0;
      for (int64_t step = 0; step < size; ++step) {
        int64_t j = reverse ? size - 1 - step : step;
        int64_t at = (o * size + j) * inner + i;
        if (exclusive) {
          result.values[at] = sum;
          sum += x.values[at];
        } else {
          sum += x.values[at];
          result.values[at] = sum;
        }
      }
    }
  return success();
}

/// Orders candidates best first: larger (or smaller) values, NaN as the
/// largest value (as torch.topk and onnxruntime), ties to the lower index.
struct TopKOrder {
  const double *values;
  bool largest;
  bool operator()(int64_t a, int64_t b) const {
    double x = values[a], y = values[b];
    bool xNaN = std::isnan(x), yNaN = std::isnan(y);
    if (xNaN || yNaN) {
      if (xNaN && yNaN)
        return a < b;
      return largest ? xNaN : yNaN;
    }
    if (x != y)
      return largest ? x > y : x < y;
    return a < b;
  }
};

/// TopK always returns its K values sorted (sorted = 0 allows any order).
LogicalResult evalTopK(TopKOp op, Operands in, Results &out) {
  const Tensor &x = *in[0];
  if (in[1]->numElements() != 1)
    return op.emitOpError() << "K must hold one value, got " << formatShape(in[1]->shape);
  int64_t k = toInt64(in[1]->values[0]);
  std::optional<int64_t> axis = normalizeAxis(attrOr(op.getAxisAttr(), -1), x.rank());
  if (!axis)
    return op.emitOpError() << "axis is out of range for " << formatShape(x.shape);
  int64_t size = x.dim(*axis);
  if (k < 0 || k > size)
    return op.emitOpError() << "K = " << k << " is not in [0, " << size << "] (axis " << *axis
                            << " of " << formatShape(x.shape) << ")";
  bool largest = attrOr(op.getLargestAttr(), 1) != 0;
  Shape shape = x.shape;
  shape[*axis] = k;
  out.emplace_back(resultElementType(op, 0), shape);
  out.emplace_back(resultElementType(op, 1), shape);
  // References only now: a second emplace_back may move the first result.
  Tensor &values = out[out.size() - 2], &indices = out.back();
  int64_t inner = productOf(x.shape, *axis + 1, x.shape.size());
  int64_t outer = productOf(x.shape, 0, *axis);
  std::vector<double> slice(static_cast<size_t>(size));
  std::vector<int64_t> order(static_cast<size_t>(size));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      for (int64_t j = 0; j < size; ++j)
        slice[j] = x.values[(o * size + j) * inner + i];
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + k, order.end(),
                        TopKOrder{slice.data(), largest});
      for (int64_t j = 0; j < k; ++j) {
        int64_t at = (o * k + j) * inner + i;
        values.values[at] = slice[order[j]];
        indices.values[at] = static_cast<double>(order[j]);
      }
    }
  return success();
}

/// ArgMax/ArgMin: the first (or last) index of the extreme along `axis`.
LogicalResult argExtreme(Operation *op, Operands in, Results &out, IntegerAttr axisAttr,
                         IntegerAttr keepdimsAttr, IntegerAttr lastAttr, bool max) {
  const Tensor &x = *in[0];
  std::optional<int64_t> axis = normalizeAxis(attrOr(axisAttr, 0), x.rank());
  if (!axis)
    return op->emitOpError() << "axis is out of range for " << formatShape(x.shape);
  int64_t size = x.dim(*axis);
  if (size == 0)
    return op->emitOpError("reduces an empty axis");
  bool last = attrOr(lastAttr, 0) != 0;
  Shape shape = x.shape;
  if (attrOr(keepdimsAttr, 1) != 0)
    shape[*axis] = 1;
  else
    shape.erase(shape.begin() + *axis);
  Tensor &result = out.emplace_back(resultElementType(op), shape);
  int64_t inner = productOf(x.shape, *axis + 1, x.shape.size());
  int64_t outer = productOf(x.shape, 0, *axis);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      int64_t best = 0;
      for (int64_t j = 1; j < size; ++j) {
        double candidate = x.values[(o * size + j) * inner + i];
        double current = x.values[(o * size + best) * inner + i];
        bool better = max ? candidate > current : candidate < current;
        if (better || (last && candidate == current))
          best = j;
      }
      result.values[o * inner + i] = static_cast<double>(best);
    }
  return success();
}

} // namespace

std::optional<LogicalResult> evalONNXCompute(Operation *op, Operands in, Results &out) {
  using Handled = std::optional<LogicalResult>;
  return llvm::TypeSwitch<Operation *, Handled>(op)
      .Case<MatMulOp>([&](MatMulOp o) { return evalMatMul(o, in, out); })
      .Case<GemmOp>([&](GemmOp o) { return evalGemm(o, in, out); })
      .Case<SoftmaxOp>([&](SoftmaxOp o) { return evalSoftmax(o, in, out); })
      .Case<ReduceSumOp>([&](ReduceSumOp o) {
        return reduce(o, in, out, o.getKeepdimsAttr(), o.getNoopWithEmptyAxesAttr(), 0.0, add,
                      false);
      })
      .Case<ReduceMeanOp>([&](ReduceMeanOp o) {
        return reduce(o, in, out, o.getKeepdimsAttr(), o.getNoopWithEmptyAxesAttr(), 0.0, add,
                      true);
      })
      .Case<ReduceMaxOp>([&](ReduceMaxOp o) {
        return reduce(o, in, out, o.getKeepdimsAttr(), o.getNoopWithEmptyAxesAttr(), -kInf, maxOf,
                      false);
      })
      .Case<ReduceMinOp>([&](ReduceMinOp o) {
        return reduce(o, in, out, o.getKeepdimsAttr(), o.getNoopWithEmptyAxesAttr(), kInf, minOf,
                      false);
      })
      .Case<ReduceProdOp>([&](ReduceProdOp o) {
        return reduce(
            o, in, out, o.getKeepdimsAttr(), o.getNoopWithEmptyAxesAttr(), 1.0,
            [](double a, double b) { return a * b; }, false);
      })
      .Case<CumSumOp>([&](CumSumOp o) { return evalCumSum(o, in, out); })
      .Case<TopKOp>([&](TopKOp o) { return evalTopK(o, in, out); })
      .Case<ArgMaxOp>([&](ArgMaxOp o) {
        return argExtreme(o, in, out, o.getAxisAttr(), o.getKeepdimsAttr(),
                          o.getSelectLastIndexAttr(), true);
      })
      .Case<ArgMinOp>([&](ArgMinOp o) {
        return argExtreme(o, in, out, o.getAxisAttr(), o.getKeepdimsAttr(),
                          o.getSelectLastIndexAttr(), false);
      })
      .Default([](Operation *) -> Handled { return std::nullopt; });
}

} // namespace moec::interp::detail
