//===- ModelGenericOps.cpp - verifiers of moe.elementwise, moe.reduce_rows ===//
//
// The generic ops of the step program (docs/dialect.md, "Whole models"):
// shapes as in ModelOps.cpp, symbolic; the elementwise body is checked to be
// scalar arith and math ops only, one block argument per operand.
//
//===----------------------------------------------------------------------===//

#include "moec/Dialect/MoE/MoEOps.h"
#include "ShapeChecker.h"

using namespace mlir;
using namespace moec::moe;
using moec::moe::detail::ShapeChecker;

namespace {

bool isScalarFloat(Type type) { return isa<Float16Type, BFloat16Type, Float32Type, Float64Type>(type); }

} // namespace

LogicalResult ElementwiseOp::verify() {
  ShapeChecker shapes(*this);
  if (failed(shapes.expect(getResult(), "result", {"N", "C"})))
    return failure();
  for (auto [index, input] : llvm::enumerate(getInputs())) {
    auto type = cast<RankedTensorType>(input.getType());
    std::string name = "input " + std::to_string(index);
    if (type.getRank() == 0)
      continue;
    if (type.getRank() == 1) {
      // A row vector [C], or a scalar [1].
      if (type.getDimSize(0) != 1 && failed(shapes.bind("C", type.getDimSize(0), name + " dimension 0")))
        return failure();
      continue;
    }
    if (type.getRank() != 2)
      return emitOpError() << name << " must be [N, C], [N, 1], [C] or a scalar, got " << type;
    if (failed(shapes.bind("N", type.getDimSize(0), name + " dimension 0")))
      return failure();
    if (type.getDimSize(1) != 1 && failed(shapes.bind("C", type.getDimSize(1), name + " dimension 1")))
      return failure();
  }
  return success();
}

LogicalResult ElementwiseOp::verifyRegions() {
  Block &body = getBody().front();
  if (body.getNumArguments() != getInputs().size())
    return emitOpError() << "body takes " << body.getNumArguments() << " arguments for "
                         << getInputs().size() << " inputs: one scalar per input";
  for (auto [index, argument, input] : llvm::enumerate(body.getArguments(), getInputs())) {
    Type element = cast<ShapedType>(input.getType()).getElementType();
    if (argument.getType() != element)
      return emitOpError() << "body argument " << index << " is " << argument.getType()
                           << ", not input " << index << "'s element type " << element;
  }
  auto yield = dyn_cast<YieldOp>(body.getTerminator());
  if (!yield)
    return emitOpError("body must end in moe.yield");
  Type element = cast<ShapedType>(getResult().getType()).getElementType();
  if (yield.getValue().getType() != element)
    return emitOpError() << "body yields " << yield.getValue().getType()
                         << ", not the result's element type " << element;
  for (Operation &op : body.without_terminator()) {
    StringRef dialect = op.getDialect() ? op.getDialect()->getNamespace() : StringRef();
    if ((dialect != "arith" && dialect != "math") || op.getNumRegions() != 0)
      return op.emitOpError("in a moe.elementwise body: only arith and math ops on scalars");
    for (Type type : llvm::concat<const Type>(op.getOperandTypes(), op.getResultTypes()))
      if (!isScalarFloat(type) && !type.isInteger(1))
        return op.emitOpError() << "in a moe.elementwise body has a value of type " << type
                                << ": only float scalars and i1 conditions";
  }
  return success();
}

LogicalResult ReduceRowsOp::verify() {
  ShapeChecker shapes(*this);
  if (failed(shapes.expect(getInput(), "input", {"N", "C"})) ||
      failed(shapes.expect(getResult(), "result", {"N", "1"})))
    return failure();
  if (shapes.get("C") == 0)
    return emitOpError("input must have columns to reduce");
  auto result = cast<RankedTensorType>(getResult().getType());
  if (result.getDimSize(1) != 1)
    return emitOpError() << "result dimension 1 must be 1, got " << result.getDimSize(1);
  return success();
}
