//===- LegalizeForCodegen.cpp - only func, arith, tensor and moe ops --------===//
//
// The grouped phase may still hold onnx ops that the lowering left: weight
// constants and views of the inputs or results (onnx.Reshape, Squeeze,
// Unsqueeze, Identity, Flatten that keep the innermost dimension, so that the
// result is the same bytes). This pass states them in upstream ops, so that the
// printers meet only func, arith, tensor and moe (they reject onnx ops):
//
//   onnx.Constant {value}             -> arith.constant (the same attribute:
//                                        a dense_resource blob is not copied)
//   onnx.Constant {value_float(s)/    -> arith.constant dense<...>
//                  value_int(s)}
//   onnx.Identity                     -> its operand
//   a view (Reshape, Squeeze,         -> tensor.collapse_shape or
//   Unsqueeze, Flatten)                  tensor.expand_shape where the shapes
//                                        allow, else tensor.reshape with a
//                                        constant shape (static shapes)
//
// The shape and axes operands of the views are not read: the result type says
// the shape (the importer inferred it). A view that changes the innermost
// dimension (not a view in codegen's sense), a view whose shapes no tensor op
// can state, and every other op outside func, arith, tensor and moe are errors
// naming the op.
//
//===----------------------------------------------------------------------===//

#include "moec/Dialect/MoE/MoEOps.h"
#include "moec/Dialect/ONNX/ONNXDialect.h"
#include "moec/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/ReshapeOpsUtils.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/Support/FormatVariadic.h"

namespace moec {
#define GEN_PASS_DEF_MOELEGALIZEFORCODEGEN
#include "moec/Transforms/Passes.h.inc"
} // namespace moec

using namespace mlir;
using namespace moec;

namespace {

bool isOnnxView(Operation *op) {
  return isa<onnx::ReshapeOp, onnx::SqueezeOp, onnx::UnsqueezeOp, onnx::IdentityOp,
             onnx::FlattenOp>(op);
}

/// The ElementsAttr of an onnx.Constant, of its result type; null when it
/// holds strings (or nothing).
Attribute constantValue(onnx::ConstantOp op) {
  auto type = dyn_cast<RankedTensorType>(op.getType());
  if (!type)
    return {};
  if (std::optional<ElementsAttr> value = op.getValue())
    return value->getType() == type ? Attribute(*value) : Attribute();
  if (!type.hasStaticShape())
    return {};
  Type element = type.getElementType();
  auto floats = [&](ArrayRef<float> values) -> Attribute {
    if (!isa<FloatType>(element) || static_cast<int64_t>(values.size()) != type.getNumElements())
      return {};
    SmallVector<APFloat> converted;
    for (float f : values) {
      APFloat value(f);
      bool losesInfo;
      value.convert(cast<FloatType>(element).getFloatSemantics(), APFloat::rmNearestTiesToEven,
                    &losesInfo);
      converted.push_back(value);
    }
    return DenseElementsAttr::get(type, converted);
  };
  auto ints = [&](ArrayRef<int64_t> values) -> Attribute {
    if (!isa<IntegerType>(element) || static_cast<int64_t>(values.size()) != type.getNumElements())
      return {};
    SmallVector<APInt> converted;
    for (int64_t i : values)
      converted.push_back(APInt(element.getIntOrFloatBitWidth(), i, /*isSigned=*/true));
    return DenseElementsAttr::get(type, converted);
  };
  if (std::optional<APFloat> value = op.getValueFloat())
    return floats({value->convertToFloat()});
  if (std::optional<ArrayRef<float>> values = op.getValueFloats())
    return floats(*values);
  if (std::optional<uint64_t> value = op.getValueInt())
    return ints({static_cast<int64_t>(*value)});
  if (std::optional<ArrayRef<int64_t>> values = op.getValueInts())
    return ints(*values);
  return {};
}

/// Rewrites the view `op` into tensor ops, or reports why it cannot.
LogicalResult legalizeView(Operation *op, OpBuilder &builder) {
  Value input = op->getOperand(0), result = op->getResult(0);
  auto inType = dyn_cast<RankedTensorType>(input.getType());
  auto outType = dyn_cast<RankedTensorType>(result.getType());
  if (!inType || !outType)
    return op->emitError() << "cannot legalise '" << op->getName()
                           << "' for codegen: its operand and result must be ranked tensors";
  if (inType.getElementType() != outType.getElementType())
    return op->emitError() << "cannot legalise '" << op->getName()
                           << "' for codegen: it changes the element type";
  // Only the leading dimensions may change: the row length stays, so the
  // result is the same bytes (codegen's emitView rule).
  if (inType.getRank() == 0 || outType.getRank() == 0 ||
      inType.getShape().back() != outType.getShape().back() ||
      ShapedType::isDynamic(inType.getShape().back()))
    return op->emitError() << "cannot legalise '" << op->getName()
                           << "' for codegen: it changes the innermost dimension ("
                           << inType << " to " << outType
                           << "); only changes of the leading dimensions are views";
  builder.setInsertionPoint(op);
  Location loc = op->getLoc();
  Value replacement;
  if (inType == outType) {
    replacement = input;
  } else if (outType.getRank() < inType.getRank()) {
    if (std::optional<SmallVector<ReassociationIndices>> groups =
            getReassociationIndicesForCollapse(inType.getShape(), outType.getShape()))
      if (succeeded(reshapeLikeShapesAreCompatible(
              [](const Twine &) { return failure(); }, outType.getShape(), inType.getShape(),
              *groups, /*isExpandingReshape=*/false)))
        replacement = tensor::CollapseShapeOp::create(builder, loc, outType, input, *groups);
  } else if (outType.getRank() > inType.getRank()) {
    if (std::optional<SmallVector<ReassociationIndices>> groups =
            getReassociationIndicesForCollapse(outType.getShape(), inType.getShape()))
      if (succeeded(reshapeLikeShapesAreCompatible(
              [](const Twine &) { return failure(); }, inType.getShape(), outType.getShape(),
              *groups, /*isExpandingReshape=*/true)))
        replacement = tensor::ExpandShapeOp::create(builder, loc, outType, input, *groups);
  }
  if (!replacement && inType.hasStaticShape() && outType.hasStaticShape() &&
      inType.getNumElements() == outType.getNumElements()) {
    auto shapeType = RankedTensorType::get({outType.getRank()}, builder.getI64Type());
    Value shape = arith::ConstantOp::create(
        builder, loc, DenseIntElementsAttr::get(shapeType, outType.getShape()));
    replacement = tensor::ReshapeOp::create(builder, loc, outType, input, shape);
  }
  if (!replacement)
    return op->emitError() << "cannot legalise '" << op->getName() << "' for codegen: "
                           << inType << " to " << outType
                           << " is neither a collapse, an expansion nor a static reshape";
  result.replaceAllUsesWith(replacement);
  // Its shape or axes constant goes with it when nothing else reads it.
  SmallVector<Operation *> operands;
  for (Value operand : op->getOperands().drop_front())
    if (Operation *def = operand.getDefiningOp(); isa_and_nonnull<arith::ConstantOp, onnx::ConstantOp>(def))
      operands.push_back(def);
  op->erase();
  for (Operation *def : operands)
    if (def->use_empty())
      def->erase();
  return success();
}

struct MoELegalizeForCodegen : moec::impl::MoELegalizeForCodegenBase<MoELegalizeForCodegen> {
  void runOnOperation() override {
    OpBuilder builder(&getContext());
    bool failedAny = false;
    SmallVector<Operation *> views;
    getOperation().walk([&](Operation *op) {
      if (isOnnxView(op))
        views.push_back(op);
    });
    for (Operation *op : views)
      failedAny |= failed(legalizeView(op, builder));
    if (failedAny)
      return signalPassFailure();

    // The views' shape and axes operands are dead now; so may be other onnx
    // constants.
    SmallVector<Operation *> constants;
    getOperation().walk([&](onnx::ConstantOp op) { constants.push_back(op); });
    for (Operation *op : constants) {
      auto constant = cast<onnx::ConstantOp>(op);
      if (constant->use_empty()) {
        constant->erase();
        continue;
      }
      Attribute value = constantValue(constant);
      if (!value) {
        constant.emitError() << "cannot legalise 'onnx.Constant' for codegen: it holds no "
                                "numeric elements of its result type "
                             << constant.getType();
        failedAny = true;
        continue;
      }
      builder.setInsertionPoint(constant);
      auto replacement = arith::ConstantOp::create(builder, constant.getLoc(),
                                                   constant.getType(), cast<TypedAttr>(value));
      // Keep the names (moec.name: how bench/write_weights.py fills weights.bin).
      for (NamedAttribute attr : constant->getDiscardableAttrs())
        replacement->setAttr(attr.getName(), attr.getValue());
      constant.getResult().replaceAllUsesWith(replacement.getResult());
      constant.erase();
    }
    if (failedAny)
      return signalPassFailure();

    getOperation().walk([&](Operation *op) {
      if (op == getOperation().getOperation())
        return;
      Dialect *dialect = op->getDialect();
      if (isa_and_nonnull<func::FuncDialect, arith::ArithDialect, tensor::TensorDialect,
                          moe::MoEDialect>(dialect))
        return;
      // moe.elementwise's body of scalar arith and math ops is printed with it.
      if (isa_and_nonnull<math::MathDialect>(dialect) && op->getParentOfType<moe::ElementwiseOp>())
        return;
      op->emitError() << "cannot legalise '" << op->getName()
                      << "' for codegen: only func, arith, tensor and moe ops (and onnx "
                         "constants and views) have code";
      failedAny = true;
    });
    if (failedAny)
      signalPassFailure();
  }
};

} // namespace
