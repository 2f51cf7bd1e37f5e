//===- Tensor.cpp - element types, rounding, host tensors ----------------===//

#include "moec/Interpreter/Tensor.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/APInt.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <limits>

using namespace mlir;

namespace moec::interp {

std::optional<ElementType> getElementType(Type type) {
  if (type.isF64())
    return ElementType::F64;
  if (type.isF32())
    return ElementType::F32;
  if (type.isF16())
    return ElementType::F16;
  if (type.isBF16())
    return ElementType::BF16;
  if (isa<Float8E4M3FNType>(type))
    return ElementType::F8E4M3FN;
  if (isa<Float4E2M1FNType>(type))
    return ElementType::F4E2M1FN;
  if (isa<Float8E8M0FNUType>(type))
    return ElementType::F8E8M0FNU;
  if (isa<IndexType>(type))
    return ElementType::I64;
  auto integer = dyn_cast<IntegerType>(type);
  if (!integer)
    return std::nullopt;
  bool isUnsigned = integer.isUnsigned();
  switch (integer.getWidth()) {
  case 1:
    return ElementType::I1;
  case 8:
    return isUnsigned ? ElementType::U8 : ElementType::I8;
  case 16:
    return isUnsigned ? ElementType::U16 : ElementType::I16;
  case 32:
    return isUnsigned ? ElementType::U32 : ElementType::I32;
  case 64:
    return isUnsigned ? ElementType::U64 : ElementType::I64;
  default:
    return std::nullopt;
  }
}

llvm::StringRef stringify(ElementType type) {
  switch (type) {
  case ElementType::F64:
    return "f64";
  case ElementType::F32:
    return "f32";
  case ElementType::F16:
    return "f16";
  case ElementType::BF16:
    return "bf16";
  case ElementType::F8E4M3FN:
    return "f8E4M3FN";
  case ElementType::F4E2M1FN:
    return "f4E2M1FN";
  case ElementType::F8E8M0FNU:
    return "f8E8M0FNU";
  case ElementType::I1:
    return "i1";
  case ElementType::I8:
    return "i8";
  case ElementType::I16:
    return "i16";
  case ElementType::I32:
    return "i32";
  case ElementType::I64:
    return "i64";
  case ElementType::U8:
    return "ui8";
  case ElementType::U16:
    return "ui16";
  case ElementType::U32:
    return "ui32";
  case ElementType::U64:
    return "ui64";
  }
  llvm_unreachable("unknown element type");
}

bool isFloat(ElementType type) {
  switch (type) {
  case ElementType::F64:
  case ElementType::F32:
  case ElementType::F16:
  case ElementType::BF16:
  case ElementType::F8E4M3FN:
  case ElementType::F4E2M1FN:
  case ElementType::F8E8M0FNU:
    return true;
  default:
    return false;
  }
}

namespace {

/// One rounding from f64 to `semantics`, to nearest even (APFloat rounds
/// exactly once, where going through float first would round twice).
double roundThrough(const llvm::fltSemantics &semantics, double value) {
  llvm::APFloat number(value);
  bool losesInfo = false;
  number.convert(semantics, llvm::APFloat::rmNearestTiesToEven, &losesInfo);
  number.convert(llvm::APFloat::IEEEdouble(), llvm::APFloat::rmNearestTiesToEven, &losesInfo);
  return number.convertToDouble();
}

double saturateInteger(double value, double lowest, double highest) {
  if (std::isnan(value))
    return 0.0;
  return std::clamp(std::trunc(value), lowest, highest);
}

template <typename T> double saturateTo(double value) {
  return saturateInteger(value, static_cast<double>(std::numeric_limits<T>::lowest()),
                         static_cast<double>(std::numeric_limits<T>::max()));
}

} // namespace

double roundTo(ElementType type, double value) {
  switch (type) {
  case ElementType::F64:
    return value;
  case ElementType::F32:
    return static_cast<double>(static_cast<float>(value));
  case ElementType::F16:
    return roundThrough(llvm::APFloat::IEEEhalf(), value);
  case ElementType::BF16:
    return roundThrough(llvm::APFloat::BFloat(), value);
  case ElementType::F8E4M3FN:
    // The format has no infinity: saturate first, or APFloat returns NaN.
    if (std::isnan(value))
      return value;
    return roundThrough(llvm::APFloat::Float8E4M3FN(), std::clamp(value, -448.0, 448.0));
  case ElementType::F4E2M1FN:
    // No NaN either: NaN has no code (the MXFP4 cast rejects it).
    if (std::isnan(value))
      return value;
    return roundThrough(llvm::APFloat::Float4E2M1FN(), std::clamp(value, -6.0, 6.0));
  case ElementType::F8E8M0FNU: {
    // Powers of two in [2^-127, 2^127] only: the nearest (ties up), NaN for
    // what has none (zero, negatives, NaN, infinity).
    if (!(value > 0.0) || std::isinf(value))
      return std::numeric_limits<double>::quiet_NaN();
    int exponent = std::ilogb(value);
    if (std::ldexp(value, -exponent) >= 1.5)
      ++exponent;
    return std::ldexp(1.0, std::clamp(exponent, -127, 127));
  }
  case ElementType::I1:
    return value != 0.0 ? 1.0 : 0.0; // NaN is true, as a C++ bool conversion makes it
  case ElementType::I8:
    return saturateTo<int8_t>(value);
  case ElementType::I16:
    return saturateTo<int16_t>(value);
  case ElementType::I32:
    return saturateTo<int32_t>(value);
  case ElementType::I64:
    return saturateTo<int64_t>(value);
  case ElementType::U8:
    return saturateTo<uint8_t>(value);
  case ElementType::U16:
    return saturateTo<uint16_t>(value);
  case ElementType::U32:
    return saturateTo<uint32_t>(value);
  case ElementType::U64:
    return saturateTo<uint64_t>(value);
  }
  llvm_unreachable("unknown element type");
}

double decodeE4M3FN(uint8_t bits) {
  llvm::APFloat number(llvm::APFloat::Float8E4M3FN(), llvm::APInt(8, bits));
  bool losesInfo = false;
  number.convert(llvm::APFloat::IEEEdouble(), llvm::APFloat::rmNearestTiesToEven, &losesInfo);
  return number.convertToDouble();
}

double decodeE2M1FN(uint8_t bits) {
  llvm::APFloat number(llvm::APFloat::Float4E2M1FN(), llvm::APInt(4, bits & 0xF));
  bool losesInfo = false;
  number.convert(llvm::APFloat::IEEEdouble(), llvm::APFloat::rmNearestTiesToEven, &losesInfo);
  return number.convertToDouble();
}

double decodeE8M0FNU(uint8_t bits) {
  return bits == 0xFF ? std::numeric_limits<double>::quiet_NaN() : std::ldexp(1.0, int(bits) - 127);
}

int64_t toInt64(double value) {
  if (std::isnan(value))
    return 0;
  // 2^63 is the first double past INT64_MAX.
  if (value >= 9223372036854775808.0)
    return std::numeric_limits<int64_t>::max();
  if (value <= -9223372036854775808.0)
    return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(value);
}

int64_t numElementsOf(llvm::ArrayRef<int64_t> shape) {
  int64_t count = 1;
  for (int64_t size : shape)
    count *= size;
  return count;
}

std::string formatShape(llvm::ArrayRef<int64_t> shape) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << '[';
  llvm::interleaveComma(shape, os);
  os << ']';
  return text;
}

Tensor::Tensor(ElementType elementType, llvm::ArrayRef<int64_t> shape, double fill)
    : elementType(elementType), shape(shape.begin(), shape.end()),
      values(static_cast<size_t>(numElementsOf(shape)), fill) {}

std::string Tensor::describe() const { return stringify(elementType).str() + formatShape(shape); }

void Tensor::round() {
  if (elementType == ElementType::F64)
    return;
  for (double &value : values)
    value = roundTo(elementType, value);
}

} // namespace moec::interp
