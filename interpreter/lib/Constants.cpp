//===- Constants.cpp - constant attributes as tensors ---------------------===//
//
// Constants reach the interpreter as `dense<...>` (small ONNX initializers,
// hand-written IR) or `dense_resource<name>` (the importer's weights, whose
// bytes live in a resource blob: little-endian, in the element type's storage
// layout, as ONNX's raw_data).
//
//===----------------------------------------------------------------------===//

#include "moec/Interpreter/Interpreter.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "llvm/ADT/APFloat.h"

#include <cstring>

using namespace mlir;

namespace moec::interp {
namespace {

double apFloatToDouble(llvm::APFloat value) {
  bool losesInfo = false;
  value.convert(llvm::APFloat::IEEEdouble(), llvm::APFloat::rmNearestTiesToEven, &losesInfo);
  return value.convertToDouble();
}

void readDense(DenseElementsAttr attr, Tensor &tensor) {
  Type elementType = attr.getElementType();
  tensor.values.clear();
  tensor.values.reserve(static_cast<size_t>(attr.getNumElements()));
  if (elementType.isF32()) {
    for (float value : attr.getValues<float>())
      tensor.values.push_back(value);
  } else if (elementType.isF64()) {
    for (double value : attr.getValues<double>())
      tensor.values.push_back(value);
  } else if (isa<FloatType>(elementType)) {
    for (llvm::APFloat value : attr.getValues<llvm::APFloat>())
      tensor.values.push_back(apFloatToDouble(value));
  } else if (elementType.isInteger(1)) {
    for (bool value : attr.getValues<bool>())
      tensor.values.push_back(value ? 1.0 : 0.0);
  } else {
    bool isUnsigned = elementType.isUnsignedInteger();
    for (const llvm::APInt &value : attr.getValues<llvm::APInt>())
      tensor.values.push_back(isUnsigned ? static_cast<double>(value.getZExtValue())
                                         : static_cast<double>(value.getSExtValue()));
  }
}

/// One little-endian element of `bytes` wide at `data`, as the double it means.
double decodeElement(ElementType type, const char *data) {
  auto load = [&](auto zero) {
    decltype(zero) value;
    std::memcpy(&value, data, sizeof(value));
    return value;
  };
  switch (type) {
  case ElementType::F64:
    return load(double{});
  case ElementType::F32:
    return load(float{});
  case ElementType::F16:
    return apFloatToDouble(
        llvm::APFloat(llvm::APFloat::IEEEhalf(), llvm::APInt(16, load(uint16_t{}))));
  case ElementType::BF16:
    return apFloatToDouble(
        llvm::APFloat(llvm::APFloat::BFloat(), llvm::APInt(16, load(uint16_t{}))));
  case ElementType::F8E4M3FN:
    return decodeE4M3FN(load(uint8_t{}));
  case ElementType::F4E2M1FN: // one code per byte, in the low nibble (docs/dialect.md)
    return decodeE2M1FN(load(uint8_t{}));
  case ElementType::F8E8M0FNU:
    return decodeE8M0FNU(load(uint8_t{}));
  case ElementType::I1:
    return load(uint8_t{}) != 0 ? 1.0 : 0.0;
  case ElementType::I8:
    return load(int8_t{});
  case ElementType::I16:
    return load(int16_t{});
  case ElementType::I32:
    return load(int32_t{});
  case ElementType::I64:
    return static_cast<double>(load(int64_t{}));
  case ElementType::U8:
    return load(uint8_t{});
  case ElementType::U16:
    return load(uint16_t{});
  case ElementType::U32:
    return load(uint32_t{});
  case ElementType::U64:
    return static_cast<double>(load(uint64_t{}));
  }
  llvm_unreachable("unknown element type");
}

/// Bytes one element of `type` takes in a blob (i1 as one byte, as ONNX stores bools).
size_t storageBytes(ElementType type) {
  switch (type) {
  case ElementType::F64:
  case ElementType::I64:
  case ElementType::U64:
    return 8;
  case ElementType::F32:
  case ElementType::I32:
  case ElementType::U32:
    return 4;
  case ElementType::F16:
  case ElementType::BF16:
  case ElementType::I16:
  case ElementType::U16:
    return 2;
  default:
    return 1;
  }
}

} // namespace

FailureOr<Tensor> tensorFromAttribute(Attribute attribute, Location loc) {
  auto typed = dyn_cast<TypedAttr>(attribute);
  auto type = typed ? dyn_cast<RankedTensorType>(typed.getType()) : RankedTensorType();
  if (!type)
    return emitError(loc) << "constant " << attribute << " is not a ranked tensor";
  std::optional<ElementType> elementType = getElementType(type.getElementType());
  if (!elementType)
    return emitError(loc) << "constant element type " << type.getElementType()
                          << " is not supported by the interpreter";
  Tensor tensor(*elementType, type.getShape());

  if (auto dense = dyn_cast<DenseElementsAttr>(attribute)) {
    readDense(dense, tensor);
    return tensor;
  }
  if (auto resource = dyn_cast<DenseResourceElementsAttr>(attribute)) {
    DenseResourceElementsHandle handle = resource.getRawHandle();
    AsmResourceBlob *blob = handle.getBlob();
    if (!blob)
      return emitError(loc) << "dense_resource<" << handle.getKey()
                            << "> has no data (elided, or missing from the file's "
                               "dialect_resources)";
    ArrayRef<char> data = blob->getData();
    size_t bytes = storageBytes(*elementType);
    if (data.size() != static_cast<size_t>(tensor.numElements()) * bytes)
      return emitError(loc) << "dense_resource<" << handle.getKey() << "> holds " << data.size()
                            << " bytes, but " << type << " needs "
                            << tensor.numElements() * static_cast<int64_t>(bytes);
    for (int64_t i = 0, e = tensor.numElements(); i < e; ++i)
      tensor.values[i] = decodeElement(*elementType, data.data() + i * bytes);
    return tensor;
  }
  return emitError(loc) << "constant " << attribute
                        << " is neither dense<...> nor dense_resource<...>";
}

} // namespace moec::interp
