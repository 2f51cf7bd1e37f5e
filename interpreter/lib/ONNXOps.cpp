//===- ONNXOps.cpp - dispatch of the onnx dialect's ops -------------------===//

#include "ONNXKernels.h"

#include "moec/Dialect/ONNX/ONNXDialect.h"
#include "moec/Interpreter/Interpreter.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;

namespace moec::interp::detail {
namespace {

/// onnx.Constant: exactly one of its value attributes is set.
LogicalResult evalConstant(onnx::ConstantOp op, Results &out) {
  ElementType type = resultElementType(op);
  if (ElementsAttr value = op.getValueAttr()) {
    FailureOr<Tensor> tensor = tensorFromAttribute(value, op.getLoc());
    if (failed(tensor))
      return failure();
    out.push_back(std::move(*tensor));
    return success();
  }
  if (FloatAttr value = op.getValueFloatAttr()) {
    out.emplace_back(type, ArrayRef<int64_t>{}, value.getValueAsDouble());
    return success();
  }
  if (IntegerAttr value = op.getValueIntAttr()) {
    out.emplace_back(type, ArrayRef<int64_t>{}, static_cast<double>(value.getInt()));
    return success();
  }
  if (std::optional<ArrayRef<float>> values = op.getValueFloats()) {
    Tensor &tensor =
        out.emplace_back(type, ArrayRef<int64_t>{static_cast<int64_t>(values->size())});
    llvm::copy(*values, tensor.values.begin());
    return success();
  }
  if (std::optional<ArrayRef<int64_t>> values = op.getValueInts()) {
    Tensor &tensor =
        out.emplace_back(type, ArrayRef<int64_t>{static_cast<int64_t>(values->size())});
    for (auto [slot, value] : llvm::zip(tensor.values, *values))
      slot = static_cast<double>(value);
    return success();
  }
  return op.emitOpError("holds strings or no value; the interpreter evaluates numeric "
                        "constants only");
}

} // namespace

LogicalResult evalONNXOp(Operation *op, Operands in, Results &out) {
  if (auto constant = dyn_cast<onnx::ConstantOp>(op))
    return evalConstant(constant, out);
  if (isa<onnx::NoValueOp>(op)) {
    out.emplace_back(); // the `none` result: consumers see a null operand
    return success();
  }
  for (auto family : {evalONNXElementwise, evalONNXCompute, evalONNXShape, evalONNXIndexing})
    if (std::optional<LogicalResult> handled = family(op, in, out))
      return *handled;
  return op->emitOpError("is not supported by the interpreter");
}

} // namespace moec::interp::detail
