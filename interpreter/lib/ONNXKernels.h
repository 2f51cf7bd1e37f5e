//===- ONNXKernels.h - the onnx dialect's kernels, by family ---*- C++ -*-===//
//
// Each family returns nullopt for an op that is not one of its own, so the
// dispatcher (ONNXOps.cpp) asks them in turn and every op is listed once, in
// the file that implements it. Semantics are ONNX's at the op's version (the
// op's summary names it): numpy broadcasting, negative axes, ONNX's attribute
// defaults.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_INTERPRETER_ONNXKERNELS_H
#define MOEC_INTERPRETER_ONNXKERNELS_H

#include "Kernels.h"

#include <optional>

namespace moec::interp::detail {

/// Element-wise ops: unary functions, broadcasting binary and variadic ops,
/// comparisons and logic, Where, Clip, Cast.
std::optional<mlir::LogicalResult> evalONNXElementwise(mlir::Operation *op, Operands in,
                                                       Results &out);
/// MatMul, Gemm, Softmax, the reductions, CumSum, TopK, ArgMax/ArgMin.
std::optional<mlir::LogicalResult> evalONNXCompute(mlir::Operation *op, Operands in, Results &out);
/// Ops that move elements without arithmetic: Reshape, Squeeze, Unsqueeze,
/// Expand, Concat, Split, Slice, Transpose, Shape, ConstantOfShape, ...
std::optional<mlir::LogicalResult> evalONNXShape(mlir::Operation *op, Operands in, Results &out);
/// Index-driven ops: Gather, GatherElements, GatherND, ScatterElements,
/// ScatterND, OneHot, NonZero, Trilu.
std::optional<mlir::LogicalResult> evalONNXIndexing(mlir::Operation *op, Operands in, Results &out);

} // namespace moec::interp::detail

#endif // MOEC_INTERPRETER_ONNXKERNELS_H
