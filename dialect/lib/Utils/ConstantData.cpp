//===- ConstantData.cpp - reading and making weight constants ---------------===//

#include "moec/Dialect/Utils/ConstantData.h"

#include "moec/Dialect/ONNX/ONNXDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"

using namespace mlir;

int64_t moec::elementBytes(Type elementType) {
  return (elementType.getIntOrFloatBitWidth() + 7) / 8;
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
