//===- HostIO.cpp - npz arrays in and out of the interpreter --------------===//

#include "moec/Interpreter/HostIO.h"
#include "moec/runtime/Compare.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

using namespace mlir;

namespace moec::interp {
namespace {

std::string nameOf(DictionaryAttr attrs, const char *prefix, unsigned index) {
  if (attrs)
    if (auto name = attrs.getAs<StringAttr>("onnx.name"))
      return name.str();
  return prefix + std::to_string(index);
}

bool isFloatDType(rt::DType dtype) {
  switch (dtype) {
  case rt::DType::F16:
  case rt::DType::BF16:
  case rt::DType::F32:
  case rt::DType::F64:
  case rt::DType::F8E4M3FN:
    return true;
  default:
    return false;
  }
}

llvm::Error error(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// The input array `host` as argument `name` of `type`, per HostIO.h's rules.
llvm::Expected<Tensor> bindArgument(const std::string &name, RankedTensorType type,
                                    const rt::HostTensor &host) {
  std::string expected = llvm::formatv("{0}", type).str();
  std::optional<ElementType> elementType = getElementType(type.getElementType());
  if (!elementType)
    return error("argument '" + name + "' has type " + expected +
                 ", whose element type the interpreter does not support");
  bool shapeFits = static_cast<int64_t>(host.shape().size()) == type.getRank();
  for (int64_t d = 0; shapeFits && d < type.getRank(); ++d)
    shapeFits = type.isDynamicDim(d) || host.shape()[d] == type.getDimSize(d);
  if (!shapeFits)
    return error("input '" + name + "' is " + host.describe() + ", but the argument is " +
                 expected);
  bool floatArg = isFloat(*elementType), boolArg = *elementType == ElementType::I1;
  bool floatArray = isFloatDType(host.dtype()), boolArray = host.dtype() == rt::DType::Bool;
  if (boolArg != boolArray || (!boolArg && floatArg != floatArray))
    return error("input '" + name + "' is " + host.describe() + ", but the argument is " +
                 expected + " (" +
                 (boolArg    ? "it takes a bool array"
                  : floatArg ? "it takes a floating-point array"
                             : "it takes an integer array") +
                 ")");
  Tensor tensor(*elementType, host.shape());
  tensor.values = rt::valuesAsDoubles(host);
  if (!floatArg)
    for (auto [index, value] : llvm::enumerate(tensor.values))
      if (roundTo(*elementType, value) != value)
        return error(llvm::formatv("input '{0}' element {1} is {2}, which {3} cannot hold", name,
                                   index, static_cast<int64_t>(value), stringify(*elementType))
                         .str());
  tensor.round();
  return tensor;
}

} // namespace

std::string argumentName(func::FuncOp function, unsigned index) {
  return nameOf(function.getArgAttrDict(index), "arg", index);
}

std::string resultName(func::FuncOp function, unsigned index) {
  return nameOf(function.getResultAttrDict(index), "result", index);
}

llvm::Expected<SmallVector<Tensor>> bindArguments(func::FuncOp function,
                                                  const rt::TensorMap &inputs) {
  SmallVector<Tensor> arguments;
  std::vector<std::string> names;
  for (unsigned i = 0, e = function.getNumArguments(); i < e; ++i) {
    std::string name = argumentName(function, i);
    names.push_back(name);
    auto it = inputs.find(name);
    if (it == inputs.end())
      return error("no input array named '" + name + "' (argument " + std::to_string(i) + " of @" +
                   function.getSymName().str() + ")");
    auto type = dyn_cast<RankedTensorType>(function.getArgumentTypes()[i]);
    if (!type)
      return error(llvm::formatv("argument '{0}' has type {1}; the interpreter takes ranked "
                                 "tensors only",
                                 name, function.getArgumentTypes()[i])
                       .str());
    llvm::Expected<Tensor> tensor = bindArgument(name, type, it->second);
    if (!tensor)
      return tensor.takeError();
    arguments.push_back(std::move(*tensor));
  }
  for (const auto &[name, tensor] : inputs)
    if (!llvm::is_contained(names, name))
      return error("input array '" + name + "' names no argument of @" +
                   function.getSymName().str() + " (arguments: " + llvm::join(names, ", ") + ")");
  return arguments;
}

rt::HostTensor toHostTensor(const Tensor &tensor) {
  std::vector<int64_t> shape(tensor.shape.begin(), tensor.shape.end());
  // Values are already rounded to the element type, so they fit the narrower
  // storage types; int64 goes through toInt64, as 2^63 (a saturated i64) does not.
  auto fill = [&](rt::DType dtype, auto zero) {
    using T = decltype(zero);
    rt::HostTensor host(dtype, shape);
    T *data = host.dataAs<T>();
    for (size_t i = 0; i < tensor.values.size(); ++i) {
      double value = roundTo(tensor.elementType, tensor.values[i]);
      if constexpr (std::is_floating_point_v<T>)
        data[i] = static_cast<T>(value);
      else
        data[i] = static_cast<T>(toInt64(value));
    }
    return host;
  };
  switch (tensor.elementType) {
  case ElementType::F64:
    return fill(rt::DType::F64, double{});
  case ElementType::F16: {
    rt::HostTensor host(rt::DType::F16, shape);
    for (size_t i = 0; i < tensor.values.size(); ++i) {
      llvm::APFloat value(tensor.values[i]);
      bool losesInfo = false;
      value.convert(llvm::APFloat::IEEEhalf(), llvm::APFloat::rmNearestTiesToEven, &losesInfo);
      host.dataAs<uint16_t>()[i] = static_cast<uint16_t>(value.bitcastToAPInt().getZExtValue());
    }
    return host;
  }
  case ElementType::F32:
  case ElementType::BF16:
  case ElementType::F8E4M3FN:
  case ElementType::F4E2M1FN:
  case ElementType::F8E8M0FNU:
    return fill(rt::DType::F32, float{});
  case ElementType::I1:
    return fill(rt::DType::Bool, uint8_t{});
  case ElementType::I8:
    return fill(rt::DType::I8, int8_t{});
  case ElementType::U8:
    return fill(rt::DType::U8, uint8_t{});
  case ElementType::I16:
  case ElementType::U16:
  case ElementType::I32:
    return fill(rt::DType::I32, int32_t{});
  case ElementType::I64:
  case ElementType::U32:
  case ElementType::U64:
    return fill(rt::DType::I64, int64_t{});
  }
  llvm_unreachable("unknown element type");
}

} // namespace moec::interp
