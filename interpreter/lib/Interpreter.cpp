//===- Interpreter.cpp - evaluates a func.func op by op ------------------===//
//
// The driver: binds the arguments, walks the function's single block in order,
// hands each op's operand tensors to its dialect's kernels, then rounds every
// result to its declared element type and checks its concrete shape against
// the declared one. A result that disagrees with its type is an error naming
// the op: the declared types are what passes and backends rely on. A run holds
// the KV cache of moe.attention, empty at its start.
//
//===----------------------------------------------------------------------===//

#include "moec/Interpreter/Interpreter.h"

#include "Kernels.h"

#include "moec/Dialect/MoE/MoEDialect.h"
#include "moec/Dialect/ONNX/ONNXDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/DenseMap.h"

#include <limits>

using namespace mlir;

namespace moec::interp {

namespace {

/// Whether `tensor`'s shape fits `type` (same rank; static dims equal).
bool shapeFits(const Tensor &tensor, RankedTensorType type) {
  if (tensor.rank() != type.getRank())
    return false;
  for (auto [size, declared] : llvm::zip(tensor.shape, type.getShape()))
    if (!ShapedType::isDynamic(declared) && size != declared)
      return false;
  return true;
}

/// Checks that `type` is something the interpreter can hold: a ranked tensor
/// of a known element type. `what` names the value in the message.
LogicalResult checkSupportedType(Operation *op, Type type, const Twine &what) {
  auto ranked = dyn_cast<RankedTensorType>(type);
  if (!ranked)
    return op->emitOpError() << what << " has type " << type
                             << "; the interpreter evaluates ranked tensors only";
  if (!getElementType(ranked.getElementType()))
    return op->emitOpError() << what << " has element type " << ranked.getElementType()
                             << ", which the interpreter does not support";
  return success();
}

class FunctionInterpreter : public detail::RegionRunner {
public:
  explicit FunctionInterpreter(const InterpretOptions &options) : options(options) {}

  FailureOr<SmallVector<Tensor>> run(func::FuncOp function, ArrayRef<Tensor> arguments) {
    if (function.isExternal())
      return function.emitOpError("has no body to interpret");
    if (!function.getBody().hasOneBlock())
      return function.emitOpError("has more than one block; the interpreter runs "
                                  "straight-line functions only");
    if (failed(bindArguments(function, arguments)))
      return failure();
    for (Operation &op : function.getBody().front()) {
      if (auto ret = dyn_cast<func::ReturnOp>(op))
        return returnValues(ret);
      if (failed(evaluate(op)))
        return failure();
    }
    return function.emitOpError("ends without func.return");
  }

private:
  LogicalResult bindArguments(func::FuncOp function, ArrayRef<Tensor> arguments) {
    Block &entry = function.getBody().front();
    if (arguments.size() != entry.getNumArguments())
      return function.emitOpError() << "takes " << entry.getNumArguments() << " arguments, but "
                                    << arguments.size() << " were given";
    for (auto [index, argument, tensor] : llvm::enumerate(entry.getArguments(), arguments)) {
      if (failed(checkSupportedType(function, argument.getType(), "argument " + Twine(index))))
        return failure();
      auto type = cast<RankedTensorType>(argument.getType());
      if (tensor.elementType != *getElementType(type.getElementType()) || !shapeFits(tensor, type))
        return function.emitOpError() << "argument " << index << " of type " << type
                                      << " cannot take a " << tensor.describe() << " tensor";
      values[argument] = tensor;
      values[argument].round();
    }
    return success();
  }

  FailureOr<SmallVector<Tensor>> returnValues(func::ReturnOp ret) {
    SmallVector<Tensor> results;
    for (Value operand : ret.getOperands()) {
      auto it = values.find(operand);
      if (it == values.end())
        return ret.emitOpError("returns a value that is not a tensor");
      results.push_back(it->second);
    }
    return results;
  }

  LogicalResult evaluate(Operation &op) {
    for (auto [index, result] : llvm::enumerate(op.getResults()))
      if (!isa<NoneType>(result.getType()) &&
          failed(checkSupportedType(&op, detail::interpretedType(result.getType()),
                                    "result " + Twine(index))))
        return failure();

    SmallVector<const Tensor *> operands;
    for (Value operand : op.getOperands()) {
      if (isa<NoneType>(operand.getType())) {
        operands.push_back(nullptr); // an omitted optional ONNX input
        continue;
      }
      auto it = values.find(operand);
      if (it == values.end())
        return op.emitOpError("uses a value the interpreter has not computed");
      operands.push_back(&it->second);
    }

    SmallVector<Tensor> results;
    if (failed(dispatch(op, operands, results)))
      return failure();
    if (results.size() != op.getNumResults())
      return op.emitOpError() << "interpreter kernel produced " << results.size() << " results for "
                              << op.getNumResults();
    for (auto [index, result, tensor] : llvm::enumerate(op.getResults(), results)) {
      if (isa<NoneType>(result.getType()))
        continue;
      auto type = cast<RankedTensorType>(detail::interpretedType(result.getType()));
      tensor.elementType = *getElementType(type.getElementType());
      if (!shapeFits(tensor, type))
        return op.emitOpError() << "result " << index << " has shape " << formatShape(tensor.shape)
                                << " at run time, which does not fit its declared type " << type;
      tensor.round();
    }
    for (auto [result, tensor] : llvm::zip(op.getResults(), results))
      if (!isa<NoneType>(result.getType()))
        values[result] = std::move(tensor);
    return success();
  }

  LogicalResult dispatch(Operation &op, detail::Operands operands, detail::Results &results) {
    auto constant = dyn_cast<arith::ConstantOp>(op);
    if (constant && isa<RankedTensorType>(constant.getType())) {
      FailureOr<Tensor> tensor = tensorFromAttribute(constant.getValue(), op.getLoc());
      if (failed(tensor))
        return failure();
      results.push_back(std::move(*tensor));
      return success();
    }
    auto empty = dyn_cast<tensor::EmptyOp>(op);
    if (empty && empty.getType().hasStaticShape()) {
      // The contents are undefined: NaN makes a read of them visible.
      ElementType type = detail::resultElementType(&op);
      results.emplace_back(type, empty.getType().getShape(),
                           isFloat(type) ? std::numeric_limits<double>::quiet_NaN() : 0.0);
      return success();
    }
    if (isa_and_nonnull<onnx::ONNXDialect>(op.getDialect()))
      return detail::evalONNXOp(&op, operands, results);
    if (detail::isModelOp(&op))
      return detail::evalModelOp(&op, operands, results, kvCache, *this);
    if (isa_and_nonnull<moe::MoEDialect>(op.getDialect()))
      return detail::evalMoEOp(&op, operands, results, options.epRank);
    // Scalars, loops, slices and linalg ops of hand-written blocks.
    if (isa_and_nonnull<arith::ArithDialect, math::MathDialect, scf::SCFDialect,
                        tensor::TensorDialect, linalg::LinalgDialect>(op.getDialect()))
      return detail::evalUpstreamOp(&op, operands, results, *this);
    return op.emitOpError("is not supported by the interpreter");
  }

  FailureOr<SmallVector<Tensor>> runBlock(Block &block, ArrayRef<Tensor> arguments) override {
    for (auto [argument, tensor] : llvm::zip_equal(block.getArguments(), arguments))
      values[argument] = tensor;
    for (Operation &op : block) {
      if (op.hasTrait<OpTrait::IsTerminator>()) {
        SmallVector<Tensor> yielded;
        for (Value operand : op.getOperands()) {
          const Tensor *tensor = lookup(operand);
          if (!tensor)
            return op.emitOpError("yields a value the interpreter has not computed");
          yielded.push_back(*tensor);
        }
        return yielded;
      }
      if (failed(evaluate(op)))
        return failure();
    }
    return failure(); // a block always ends in a terminator
  }

  const Tensor *lookup(Value value) override {
    auto it = values.find(value);
    return it == values.end() ? nullptr : &it->second;
  }

  const InterpretOptions &options;
  llvm::DenseMap<Value, Tensor> values;
  /// moe.attention's KV cache: this run's, so every run starts with it empty.
  detail::KVCache kvCache;
};

} // namespace

FailureOr<SmallVector<Tensor>> interpret(func::FuncOp function, ArrayRef<Tensor> arguments,
                                         const InterpretOptions &options) {
  return FunctionInterpreter(options).run(function, arguments);
}

} // namespace moec::interp
