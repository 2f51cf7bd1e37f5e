//===- ModelGenericOps.cpp - moe.elementwise and moe.reduce_rows ----------===//
//
// The generic ops of the step program in f64 (docs/dialect.md, "Whole
// models"). moe.elementwise's body is compiled once into scalar functions
// (the ones arith and math ops have in UpstreamOps.cpp) and evaluated at every
// element, each op's result rounded to its type; operands broadcast by shape:
// [N, C] per element, [N, 1] per row, [C] per column, a scalar everywhere.
// moe.reduce_rows accumulates each row in ascending column order.
//
//===----------------------------------------------------------------------===//

#include "Kernels.h"

#include "moec/Dialect/MoE/MoEOps.h"

#include <algorithm>
#include <cmath>
#include <limits>

using namespace mlir;
using namespace moec::moe;

namespace moec::interp::detail {
namespace {

/// How an operand is read at (n, c): its strides over rows and columns.
struct Broadcast {
  int64_t rowStride = 0, columnStride = 0;
};

LogicalResult evalElementwise(ElementwiseOp op, Operands in, Results &out,
                              RegionRunner &regions) {
  auto resultType = cast<RankedTensorType>(op.getResult().getType());
  int64_t rows = resultType.isDynamicDim(0) ? -1 : resultType.getDimSize(0);
  int64_t columns = resultType.isDynamicDim(1) ? -1 : resultType.getDimSize(1);
  auto bind = [&](int64_t &bound, int64_t size, StringRef what, unsigned index) -> LogicalResult {
    if (bound >= 0 && bound != size)
      return op.emitOpError() << "input " << index << " has " << size << " " << what
                              << " at run time, but the op has " << bound;
    bound = size;
    return success();
  };
  for (auto [index, tensor] : llvm::enumerate(in)) {
    if (tensor->rank() == 2 && failed(bind(rows, tensor->dim(0), "rows", index)))
      return failure();
    int64_t width = tensor->rank() == 0 ? 1 : tensor->dim(tensor->rank() - 1);
    if (tensor->rank() > 0 && width != 1 && failed(bind(columns, width, "columns", index)))
      return failure();
  }
  if (rows < 0)
    return op.emitOpError("has no [N, C] or [N, 1] input to size its rows at run time");
  if (columns < 0)
    columns = 1;
  SmallVector<Broadcast> reads;
  for (const Tensor *tensor : in) {
    Broadcast read;
    int64_t width = tensor->rank() == 0 ? 1 : tensor->dim(tensor->rank() - 1);
    if (width != 1)
      read.columnStride = 1;
    if (tensor->rank() == 2)
      read.rowStride = width;
    reads.push_back(read);
  }
  FailureOr<ScalarBlock> body = compileScalarBlock(op.getBody().front(), regions);
  if (failed(body))
    return failure();
  Tensor &result = out.emplace_back(resultElementType(op), ArrayRef<int64_t>{rows, columns});
  SmallVector<double, 4> arguments(in.size());
  for (int64_t n = 0; n < rows; ++n)
    for (int64_t c = 0; c < columns; ++c) {
      for (auto [argument, tensor, read] : llvm::zip(arguments, in, reads))
        argument = tensor->values[n * read.rowStride + c * read.columnStride];
      result.values[n * columns + c] = (*body)(arguments);
    }
  return success();
}

LogicalResult evalReduceRows(ReduceRowsOp op, Operands in, Results &out) {
  const Tensor &input = *in[0];
  int64_t rows = input.dim(0), columns = input.dim(1);
  if (columns == 0)
    return op.emitOpError("has no columns to reduce at run time");
  Tensor &result = out.emplace_back(resultElementType(op), ArrayRef<int64_t>{rows, 1});
  for (int64_t n = 0; n < rows; ++n) {
    const double *x = input.values.data() + n * columns;
    double value = op.getKind() == ReduceKind::Max ? -std::numeric_limits<double>::infinity() : 0.0;
    for (int64_t c = 0; c < columns; ++c)
      value = op.getKind() == ReduceKind::Max
                  ? (std::isnan(value) || std::isnan(x[c]) ? std::nan("") : std::max(value, x[c]))
                  : value + x[c];
    result.values[n] = op.getKind() == ReduceKind::Mean ? value / static_cast<double>(columns) : value;
  }
  return success();
}

} // namespace

LogicalResult evalGenericModelOp(Operation *op, Operands in, Results &out, RegionRunner &regions,
                                 bool &handled) {
  handled = true;
  if (auto elementwise = dyn_cast<ElementwiseOp>(op))
    return evalElementwise(elementwise, in, out, regions);
  if (auto reduce = dyn_cast<ReduceRowsOp>(op))
    return evalReduceRows(reduce, in, out);
  handled = false;
  return failure();
}

} // namespace moec::interp::detail
