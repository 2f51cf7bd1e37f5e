//===- ONNXMatchers.h - reading onnx-dialect graphs in raise passes -*- C++ -*-===//
//
// The helpers the raise passes share to read what torch.onnx.export writes:
// small constants (axes, shapes, scalars) as numbers, axes normalised against
// a rank, the defining op of a value, and the ops that do not change a value.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_PASSES_ONNXMATCHERS_H
#define MOEC_PASSES_ONNXMATCHERS_H

#include "moec/Dialect/ONNX/ONNXDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Value.h"

#include <optional>

namespace moec::onnx_match {

using namespace mlir;
namespace ox = moec::onnx;

/// The elements of a constant as doubles (small constants only).
inline std::optional<SmallVector<double>> constantValues(Value value) {
  auto constant = value.getDefiningOp<ox::ConstantOp>();
  if (!constant || !constant.getValue())
    return std::nullopt;
  auto dense = dyn_cast<DenseElementsAttr>(*constant.getValue());
  if (!dense || dense.getNumElements() > 64)
    return std::nullopt;
  SmallVector<double> values;
  Type type = dense.getElementType();
  if (isa<FloatType>(type)) {
    for (APFloat v : dense.getValues<APFloat>())
      values.push_back(v.convertToDouble());
  } else if (type.isInteger()) {
    // Two statements, not a conditional: its common type would make every
    // signed value unsigned.
    for (APInt v : dense.getValues<APInt>()) {
      if (type.isUnsignedInteger())
        values.push_back(static_cast<double>(v.getZExtValue()));
      else
        values.push_back(static_cast<double>(v.getSExtValue()));
    }
  } else {
    return std::nullopt;
  }
  return values;
}

/// The dense elements of an onnx.Constant or arith.constant (splats
/// included), or null.
inline DenseElementsAttr denseElements(Value value) {
  if (auto constant = value.getDefiningOp<ox::ConstantOp>())
    return constant.getValue() ? dyn_cast<DenseElementsAttr>(*constant.getValue())
                               : DenseElementsAttr();
  if (auto constant = value.getDefiningOp<arith::ConstantOp>())
    return dyn_cast<DenseElementsAttr>(constant.getValue());
  return DenseElementsAttr();
}

/// The value of a one-element constant.
inline std::optional<double> scalarConstant(Value value) {
  std::optional<SmallVector<double>> values = constantValues(value);
  if (!values || values->size() != 1)
    return std::nullopt;
  return values->front();
}

inline bool isScalar(Value value, double expected) {
  std::optional<double> v = scalarConstant(value);
  return v && *v == expected;
}

/// An integer list constant such as axes, shapes and slice bounds, read as
/// integers (INT64_MAX, a common "to the end" slice bound, does not survive a
/// round trip through double).
inline std::optional<SmallVector<int64_t>> intList(Value value) {
  auto constant = value.getDefiningOp<ox::ConstantOp>();
  auto dense = constant && constant.getValue()
                   ? dyn_cast<DenseIntElementsAttr>(*constant.getValue())
                   : DenseIntElementsAttr();
  if (!dense || dense.getNumElements() > 64 || !dense.getElementType().isSignlessInteger())
    return std::nullopt;
  SmallVector<int64_t> ints;
  for (APInt v : dense.getValues<APInt>())
    ints.push_back(v.getSExtValue());
  return ints;
}

inline int64_t rankOf(Value value) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  return type ? type.getRank() : -1;
}

/// An axis normalised against `rank` (ONNX allows negative axes).
inline int64_t normalizeAxis(int64_t axis, int64_t rank) { return axis < 0 ? axis + rank : axis; }

/// True when `axes` is the single axis `axis` of a rank-`rank` tensor.
inline bool isAxis(Value axes, int64_t axis, int64_t rank) {
  std::optional<SmallVector<int64_t>> list = intList(axes);
  return list && list->size() == 1 && normalizeAxis((*list)[0], rank) == axis;
}

inline bool isAttrAxis(std::optional<int64_t> attr, int64_t defaultAxis, int64_t axis, int64_t rank) {
  return normalizeAxis(attr.value_or(defaultAxis), rank) == axis;
}

template <typename OpTy> inline OpTy def(Value value) {
  return value ? value.getDefiningOp<OpTy>() : OpTy();
}

/// Looks through ops that do not change the value: Squeeze(Unsqueeze(x, a), a),
/// a Reshape to the type it already has, and Identity.
inline Value skipNoOps(Value value) {
  while (value) {
    if (auto squeeze = def<ox::SqueezeOp>(value)) {
      auto unsqueeze = def<ox::UnsqueezeOp>(squeeze.getData());
      if (unsqueeze && intList(unsqueeze.getAxes()) && intList(squeeze.getAxes()) &&
          *intList(unsqueeze.getAxes()) == *intList(squeeze.getAxes())) {
        value = unsqueeze.getData();
        continue;
      }
    }
    if (auto reshape = def<ox::ReshapeOp>(value)) {
      if (reshape.getData().getType() == reshape.getType() && rankOf(reshape.getData()) == 2) {
        std::optional<SmallVector<int64_t>> shape = intList(reshape.getShape());
        auto type = cast<RankedTensorType>(reshape.getType());
        if (shape && shape->size() == 2 && (*shape)[1] == type.getDimSize(1) &&
            !type.isDynamicDim(1)) {
          value = reshape.getData();
          continue;
        }
      }
    }
    if (auto identity = def<ox::IdentityOp>(value)) {
      value = identity.getInput();
      continue;
    }
    break;
  }
  return value;
}

/// `a * b` in either operand order: returns the other operand when one is `x`.
inline Value otherMulOperand(ox::MulOp mul, Value x) {
  if (!mul)
    return Value();
  if (skipNoOps(mul.getA()) == x)
    return mul.getB();
  if (skipNoOps(mul.getB()) == x)
    return mul.getA();
  return Value();
}

} // namespace moec::onnx_match

#endif // MOEC_PASSES_ONNXMATCHERS_H
