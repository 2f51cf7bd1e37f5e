//===- ConstantData.cpp - reading and making weight constants ---------------===//

#include "moec/Dialect/Utils/ConstantData.h"

#include "moec/Dialect/ONNX/ONNXDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"

#include <cstring>

using namespace mlir;

int64_t moec::elementBytes(Type elementType) {
  return (elementType.getIntOrFloatBitWidth() + 7) / 8;
}

std::optional<float> moec::decodeAsFloat(Type elementType, ArrayRef<char> bytes, int64_t index) {
  // f32 and bf16 without APFloat: the FP8 cast decodes every weight of a model.
  if (elementType.isF32()) {
    float value;
    std::memcpy(&value, bytes.data() + index * 4, 4);
    return value;
  }
  if (elementType.isBF16()) {
    uint16_t bits;
    std::memcpy(&bits, bytes.data() + index * 2, 2);
    uint32_t wide = uint32_t(bits) << 16;
    float value;
    std::memcpy(&value, &wide, 4);
    return value;
  }
  if (elementType.isInteger(8)) {
    char byte = bytes[index];
    return elementType.isUnsignedInteger() ? float(static_cast<uint8_t>(byte))
                                           : float(static_cast<int8_t>(byte));
  }
  if (!elementType.isF16() && !isa<Float8E4M3FNType>(elementType))
    return std::nullopt;
  unsigned bits = elementType.getIntOrFloatBitWidth();
  uint64_t raw = 0;
  std::memcpy(&raw, bytes.data() + index * (bits / 8), bits / 8);
  return APFloat(cast<FloatType>(elementType).getFloatSemantics(), APInt(bits, raw))
      .convertToFloat();
}

std::optional<ArrayRef<char>> moec::getConstantBytes(Value value) {
  Attribute attr;
  if (auto constant = value.getDefiningOp<arith::ConstantOp>())
    attr = constant.getValue();
  else if (auto constant = value.getDefiningOp<onnx::ConstantOp>())
    attr = constant.getValue() ? Attribute(*constant.getValue()) : Attribute();
  auto type = dyn_cast_or_null<TypedAttr>(attr);
  if (!type || cast<ShapedType>(type.getType()).getElementType().isInteger(1))
    return std::nullopt;
  if (auto dense = dyn_cast<DenseElementsAttr>(attr))
    return dense.isSplat() ? std::nullopt : std::optional(dense.getRawData());
  if (auto resource = dyn_cast<DenseResourceElementsAttr>(attr))
    if (AsmResourceBlob *blob = resource.getRawHandle().getBlob())
      return blob->getData();
  return std::nullopt;
}

Value moec::makeConstant(OpBuilder &builder, Location loc, RankedTensorType type,
                         ArrayRef<char> bytes, StringRef name) {
  // 64-byte aligned: enough for any vector load the kernels make.
  auto attr = DenseResourceElementsAttr::get(
      type, name, HeapAsmResourceBlob::allocateAndCopyWithAlign(bytes, 64));
  return arith::ConstantOp::create(builder, loc, type, cast<TypedAttr>(attr)).getResult();
}
