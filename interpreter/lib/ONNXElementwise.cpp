//===- ONNXElementwise.cpp - element-wise onnx ops ------------------------===//
//
// Unary functions, broadcasting binary and variadic ops, comparisons, logic,
// Where, Clip, Cast and DequantizeLinear. Everything is computed in f64 and rounded by the
// driver to the declared result type, which also gives integer Div its
// truncation toward zero and Cast its conversions.
//
//===----------------------------------------------------------------------===//

#include "Indexing.h"
#include "ONNXKernels.h"

#include "moec/Dialect/ONNX/DequantizeLayout.h"
#include "moec/Dialect/ONNX/ONNXDialect.h"

#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>
#include <limits>
#include <numbers>

using namespace mlir;
using namespace moec::onnx;

namespace moec::interp::detail {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

LogicalResult unary(Operation *op, Operands in, Results &out,
                    llvm::function_ref<double(double)> fn) {
  const Tensor &x = *in[0];
  Tensor &result = out.emplace_back(resultElementType(op), x.shape);
  for (auto [slot, value] : llvm::zip(result.values, x.values))
    slot = fn(value);
  return success();
}

/// `fn` applied to `a` and `b` broadcast to a common shape, into `result`.
LogicalResult broadcastInto(Operation *op, const Tensor &a, const Tensor &b, Tensor &result,
                            llvm::function_ref<double(double, double)> fn) {
  std::optional<Shape> shape = broadcastShapes(a.shape, b.shape);
  if (!shape)
    return op->emitOpError() << "operands of shapes " << formatShape(a.shape) << " and "
                             << formatShape(b.shape) << " do not broadcast";
  Tensor value(result.elementType, *shape);
  if (a.shape == *shape && b.shape == *shape) {
    for (int64_t i = 0, e = value.numElements(); i < e; ++i)
      value.values[i] = fn(a.values[i], b.values[i]);
  } else {
    std::vector<int64_t> ia = broadcastIndexMap(a.shape, *shape);
    std::vector<int64_t> ib = broadcastIndexMap(b.shape, *shape);
    for (int64_t i = 0, e = value.numElements(); i < e; ++i)
      value.values[i] = fn(a.values[ia[i]], b.values[ib[i]]);
  }
  result = std::move(value);
  return success();
}

LogicalResult binary(Operation *op, Operands in, Results &out,
                     llvm::function_ref<double(double, double)> fn) {
  Tensor &result = out.emplace_back(resultElementType(op), ArrayRef<int64_t>{});
  return broadcastInto(op, *in[0], *in[1], result, fn);
}

/// Max, Min, Sum, Mean: a left fold over all inputs, broadcasting as it goes.
LogicalResult variadic(Operation *op, Operands in, Results &out,
                       llvm::function_ref<double(double, double)> fn) {
  if (in.empty())
    return op->emitOpError("needs at least one input");
  Tensor &result = out.emplace_back(*in[0]);
  result.elementType = resultElementType(op);
  for (const Tensor *next : in.drop_front())
    if (failed(broadcastInto(op, result, *next, result, fn)))
      return failure();
  return success();
}

/// NaN-propagating max and min (numpy.maximum/minimum, onnxruntime).
double maxOf(double a, double b) { return std::isnan(a) || std::isnan(b) ? kNaN : std::max(a, b); }
double minOf(double a, double b) { return std::isnan(a) || std::isnan(b) ? kNaN : std::min(a, b); }

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

LogicalResult evalDiv(DivOp op, Operands in, Results &out) {
  bool integer = !isFloat(resultElementType(op));
  if (integer && llvm::is_contained(in[1]->values, 0.0))
    return op.emitOpError("divides an integer by zero");
  // Integer division truncates toward zero: the driver's rounding does that.
  return binary(op, in, out, [](double a, double b) { return a / b; });
}

LogicalResult evalMod(ModOp op, Operands in, Results &out) {
  bool fmod = attrOr(op.getFmodAttr(), 0) != 0;
  if (!isFloat(resultElementType(op)) && llvm::is_contained(in[1]->values, 0.0))
    return op.emitOpError("takes an integer modulo zero");
  return binary(op, in, out, [fmod](double a, double b) {
    double r = std::fmod(a, b);
    // fmod = 0: the sign of the divisor, as Python's %.
    if (!fmod && r != 0.0 && ((r < 0.0) != (b < 0.0)))
      r += b;
    return r;
  });
}

LogicalResult evalWhere(WhereOp op, Operands in, Results &out) {
  const Tensor &cond = *in[0], &x = *in[1], &y = *in[2];
  std::optional<Shape> partial = broadcastShapes(cond.shape, x.shape);
  std::optional<Shape> shape = partial ? broadcastShapes(*partial, y.shape) : std::nullopt;
  if (!shape)
    return op.emitOpError() << "condition " << formatShape(cond.shape) << ", X "
                            << formatShape(x.shape) << " and Y " << formatShape(y.shape)
                            << " do not broadcast";
  Tensor &result = out.emplace_back(resultElementType(op), *shape);
  std::vector<int64_t> ic = broadcastIndexMap(cond.shape, *shape);
  std::vector<int64_t> ix = broadcastIndexMap(x.shape, *shape);
  std::vector<int64_t> iy = broadcastIndexMap(y.shape, *shape);
  for (int64_t i = 0, e = result.numElements(); i < e; ++i)
    result.values[i] = cond.values[ic[i]] != 0.0 ? x.values[ix[i]] : y.values[iy[i]];
  return success();
}

LogicalResult evalClip(ClipOp op, Operands in, Results &out) {
  double lo = -std::numeric_limits<double>::infinity();
  double hi = std::numeric_limits<double>::infinity();
  for (auto [bound, name, index] : {std::tuple{&lo, "min", 1}, std::tuple{&hi, "max", 2}}) {
    const Tensor *t = in[index];
    if (!t)
      continue;
    if (t->numElements() != 1)
      return op.emitOpError() << "'" << name << "' must be a scalar, got " << formatShape(t->shape);
    *bound = t->values[0];
  }
  // min > max clips everything to max (ONNX), as min(max(x, lo), hi) does.
  return unary(op, in, out,
               [lo, hi](double x) { return std::isnan(x) ? x : std::min(std::max(x, lo), hi); });
}

/// ONNX's TensorProto.DataType codes of the types the interpreter knows.
std::optional<ElementType> onnxDataType(int64_t code) {
  switch (code) {
  case 1:
    return ElementType::F32;
  case 2:
    return ElementType::U8;
  case 3:
    return ElementType::I8;
  case 4:
    return ElementType::U16;
  case 5:
    return ElementType::I16;
  case 6:
    return ElementType::I32;
  case 7:
    return ElementType::I64;
  case 9:
    return ElementType::I1;
  case 10:
    return ElementType::F16;
  case 11:
    return ElementType::F64;
  case 12:
    return ElementType::U32;
  case 13:
    return ElementType::U64;
  case 16:
    return ElementType::BF16;
  case 17:
    return ElementType::F8E4M3FN;
  default:
    return std::nullopt;
  }
}

/// Cast and CastLike. The conversion itself is the driver's rounding to the
/// result type; only FP8 without saturation differs: out of range is NaN.
LogicalResult castTo(Operation *op, Operands in, Results &out, bool saturate) {
  ElementType target = resultElementType(op);
  if (target != ElementType::F8E4M3FN || saturate)
    return unary(op, in, out, [](double x) { return x; });
  return unary(op, in, out, [](double x) {
    llvm::APFloat value(x);
    bool losesInfo = false;
    llvm::APFloat::opStatus status = value.convert(llvm::APFloat::Float8E4M3FN(),
                                                   llvm::APFloat::rmNearestTiesToEven, &losesInfo);
    return (status & llvm::APFloat::opOverflow) || std::isinf(x) ? kNaN : x;
  });
}

LogicalResult evalCast(CastOp op, Operands in, Results &out) {
  std::optional<ElementType> to = onnxDataType(op.getTo());
  if (!to)
    return op.emitOpError() << "casts to ONNX data type " << op.getTo()
                            << ", which the interpreter does not support";
  if (*to != resultElementType(op))
    return op.emitOpError() << "casts to " << stringify(*to) << " (to = " << op.getTo()
                            << "), but its result type is " << op.getResult().getType();
  return castTo(op, in, out, attrOr(op.getSaturateAttr(), 1) != 0);
}

/// y = (x - zero_point) * scale, each element with the scale its layout gives
/// (DequantizeLayout). The driver rounds y to the result type (the scale's).
LogicalResult evalDequantizeLinear(DequantizeLinearOp op, Operands in, Results &out) {
  const Tensor &x = *in[0], &scale = *in[1];
  const Tensor *zeroPoint = in.size() > 2 ? in[2] : nullptr;
  std::string why;
  std::optional<DequantizeLayout> layout = DequantizeLayout::get(
      x.shape, scale.shape, op.getAxis(), op.getBlockSize(), why);
  if (!layout)
    return op.emitOpError() << "x " << formatShape(x.shape) << " and x_scale "
                            << formatShape(scale.shape) << ": " << why;
  if (zeroPoint && zeroPoint->shape != scale.shape)
    return op.emitOpError() << "x_zero_point " << formatShape(zeroPoint->shape)
                            << " must have x_scale's shape " << formatShape(scale.shape);
  Tensor &y = out.emplace_back(resultElementType(op), x.shape);
  for (int64_t i = 0, n = static_cast<int64_t>(x.values.size()); i < n; ++i) {
    int64_t s = layout->scaleIndex(i);
    y.values[i] = (x.values[i] - (zeroPoint ? zeroPoint->values[s] : 0.0)) * scale.values[s];
  }
  return success();
}

double gelu(double x, bool tanhApproximation) {
  if (!tanhApproximation)
    return 0.5 * x * (1.0 + std::erf(x / std::numbers::sqrt2));
  double inner = std::sqrt(2.0 / std::numbers::pi) * (x + 0.044715 * x * x * x);
  return 0.5 * x * (1.0 + std::tanh(inner));
}

} // namespace

std::optional<LogicalResult> evalONNXElementwise(Operation *op, Operands in, Results &out) {
  using Handled = std::optional<LogicalResult>;
  auto u = [&](auto fn) -> Handled { return unary(op, in, out, fn); };
  auto b = [&](auto fn) -> Handled { return binary(op, in, out, fn); };
  auto v = [&](auto fn) -> Handled { return variadic(op, in, out, fn); };
  return llvm::TypeSwitch<Operation *, Handled>(op)
      // Unary.
      .Case<AbsOp>([&](auto) { return u([](double x) { return std::fabs(x); }); })
      .Case<NegOp>([&](auto) { return u([](double x) { return -x; }); })
      .Case<CeilOp>([&](auto) { return u([](double x) { return std::ceil(x); }); })
      .Case<FloorOp>([&](auto) { return u([](double x) { return std::floor(x); }); })
      .Case<SqrtOp>([&](auto) { return u([](double x) { return std::sqrt(x); }); })
      .Case<ExpOp>([&](auto) { return u([](double x) { return std::exp(x); }); })
      .Case<LogOp>([&](auto) { return u([](double x) { return std::log(x); }); })
      .Case<ErfOp>([&](auto) { return u([](double x) { return std::erf(x); }); })
      .Case<TanhOp>([&](auto) { return u([](double x) { return std::tanh(x); }); })
      .Case<SinOp>([&](auto) { return u([](double x) { return std::sin(x); }); })
      .Case<CosOp>([&](auto) { return u([](double x) { return std::cos(x); }); })
      .Case<ReciprocalOp>([&](auto) { return u([](double x) { return 1.0 / x; }); })
      .Case<SigmoidOp>([&](auto) { return u(sigmoid); })
      .Case<ReluOp>(
          [&](auto) { return u([](double x) { return std::isnan(x) ? x : std::max(x, 0.0); }); })
      .Case<SoftplusOp>([&](auto) { return u([](double x) { return std::log1p(std::exp(x)); }); })
      .Case<SignOp>([&](auto) {
        return u([](double x) { return std::isnan(x) ? x : double((x > 0) - (x < 0)); });
      })
      .Case<IdentityOp>([&](auto) { return u([](double x) { return x; }); })
      .Case<NotOp>([&](auto) { return u([](double x) { return x == 0.0 ? 1.0 : 0.0; }); })
      .Case<IsNaNOp>([&](auto) { return u([](double x) { return std::isnan(x) ? 1.0 : 0.0; }); })
      .Case<IsInfOp>([&](IsInfOp isInf) {
        bool negative = attrOr(isInf.getDetectNegativeAttr(), 1) != 0;
        bool positive = attrOr(isInf.getDetectPositiveAttr(), 1) != 0;
        return u(
            [=](double x) { return std::isinf(x) && (x > 0 ? positive : negative) ? 1.0 : 0.0; });
      })
      .Case<HardSigmoidOp>([&](HardSigmoidOp hs) {
        double alpha = attrOr(hs.getAlphaAttr(), 0.2), beta = attrOr(hs.getBetaAttr(), 0.5);
        return u([=](double x) { return std::max(0.0, std::min(1.0, alpha * x + beta)); });
      })
      .Case<GeluOp>([&](GeluOp gl) -> Handled {
        StringRef approximate = gl.getApproximate().value_or("none");
        if (approximate != "none" && approximate != "tanh")
          return gl.emitOpError() << "approximate = \"" << approximate
                                  << "\" is neither \"none\" nor \"tanh\"";
        bool useTanh = approximate == "tanh";
        return u([=](double x) { return gelu(x, useTanh); });
      })
      // Binary, broadcasting.
      .Case<AddOp>([&](auto) { return b([](double x, double y) { return x + y; }); })
      .Case<SubOp>([&](auto) { return b([](double x, double y) { return x - y; }); })
      .Case<MulOp>([&](auto) { return b([](double x, double y) { return x * y; }); })
      .Case<DivOp>([&](DivOp div) -> Handled { return evalDiv(div, in, out); })
      .Case<ModOp>([&](ModOp mod) -> Handled { return evalMod(mod, in, out); })
      .Case<PowOp>([&](auto) { return b([](double x, double y) { return std::pow(x, y); }); })
      .Case<EqualOp>([&](auto) { return b([](double x, double y) { return double(x == y); }); })
      .Case<LessOp>([&](auto) { return b([](double x, double y) { return double(x < y); }); })
      .Case<LessOrEqualOp>(
          [&](auto) { return b([](double x, double y) { return double(x <= y); }); })
      .Case<GreaterOp>([&](auto) { return b([](double x, double y) { return double(x > y); }); })
      .Case<GreaterOrEqualOp>(
          [&](auto) { return b([](double x, double y) { return double(x >= y); }); })
      .Case<AndOp>(
          [&](auto) { return b([](double x, double y) { return double(x != 0 && y != 0); }); })
      .Case<OrOp>(
          [&](auto) { return b([](double x, double y) { return double(x != 0 || y != 0); }); })
      .Case<XorOp>(
          [&](auto) { return b([](double x, double y) { return double((x != 0) != (y != 0)); }); })
      // Variadic, broadcasting.
      .Case<MaxOp>([&](auto) { return v(maxOf); })
      .Case<MinOp>([&](auto) { return v(minOf); })
      .Case<SumOp>([&](auto) { return v([](double x, double y) { return x + y; }); })
      .Case<MeanOp>([&](auto) -> Handled {
        if (failed(variadic(op, in, out, [](double x, double y) { return x + y; })))
          return failure();
        for (double &value : out.back().values)
          value /= static_cast<double>(in.size());
        return success();
      })
      // The rest.
      .Case<WhereOp>([&](WhereOp where) -> Handled { return evalWhere(where, in, out); })
      .Case<ClipOp>([&](ClipOp clip) -> Handled { return evalClip(clip, in, out); })
      .Case<CastOp>([&](CastOp cast) -> Handled { return evalCast(cast, in, out); })
      .Case<DequantizeLinearOp>([&](DequantizeLinearOp dq) -> Handled {
        return evalDequantizeLinear(dq, in, out);
      })
      .Case<CastLikeOp>([&](CastLikeOp cast) -> Handled {
        return castTo(op, in.take_front(), out, attrOr(cast.getSaturateAttr(), 1) != 0);
      })
      .Default([](Operation *) -> Handled { return std::nullopt; });
}

} // namespace moec::interp::detail
