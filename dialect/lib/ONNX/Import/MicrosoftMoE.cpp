//===- MicrosoftMoE.cpp - onnxruntime's com.microsoft.MoE into moe.layer --===//
//
// onnxruntime's MoE op is already a whole MoE block, so it becomes moe.layer
// directly. Its weight layout changed between onnxruntime versions (fc1 was
// once [E, H, I]); the importer checks every shape against the current schema,
// fc1 [E, fusion·I, H], fc2 [E, H, I], fc3 [E, I, H], and rejects what does not
// fit instead of guessing.
//
//===----------------------------------------------------------------------===//

#include "ImporterImpl.h"

#include "moec/Dialect/MoE/MoEOps.h"
#include "moec/Dialect/ONNX/ONNXDialect.h"

#include "mlir/IR/Verifier.h"

using namespace mlir;
using namespace moec;
using namespace moec::onnx::detail;

namespace {

/// Inputs of com.microsoft.MoE, in order.
enum MoEInput {
  kInput, kRouterProbs, kFc1Weights, kFc1Bias, kFc2Weights, kFc2Bias, kFc3Weights, kFc3Bias,
  kNumMoEInputs
};
constexpr const char *kMoEInputNames[] = {
    "input", "router_probs", "fc1_experts_weights", "fc1_experts_bias",
    "fc2_experts_weights", "fc2_experts_bias", "fc3_experts_weights", "fc3_experts_bias"};

constexpr const char *kKnownAttributes[] = {
    "k", "activation_type", "normalize_routing_weights", "use_sparse_mixer", "swiglu_fusion",
    "swiglu_limit", "activation_alpha", "activation_beta", "swiglu_limit_after_activation"};

class MoEImporter {
public:
  MoEImporter(GraphImporter &importer, const ::onnx::NodeProto &node)
      : importer(importer), node(node), loc(importer.nodeLoc(node)) {}

  LogicalResult run() {
    if (failed(checkAttributes()) || failed(collectInputs()))
      return failure();
    std::string activationType = stringAttribute(node, "activation_type", "relu");
    int64_t fusion = intAttribute(node, "swiglu_fusion", 0);
    if (intAttribute(node, "use_sparse_mixer", 0) != 0)
      return error() << "use_sparse_mixer = 1 (PhiMoE's sparse mixer) cannot be expressed "
                        "as a moe.layer";
    if (intAttribute(node, "swiglu_limit_after_activation", 0) != 0)
      return error() << "swiglu_limit_after_activation = 1 (clamping after the activation) "
                        "is not supported";

    // The activation and the gate/up layout.
    moe::ActivationKind kind;
    moe::GateUpLayout layout = moe::GateUpLayout::None;
    double alpha = 1.0, beta = 0.0, limit = std::numeric_limits<double>::infinity();
    if (activationType == "swiglu") {
      kind = moe::ActivationKind::SiLU;
      alpha = floatAttribute(node, "activation_alpha").value_or(1.0f);
      beta = floatAttribute(node, "activation_beta").value_or(0.0f);
      if (std::optional<float> l = floatAttribute(node, "swiglu_limit"))
        limit = *l;
      switch (fusion) {
      case 0: layout = moe::GateUpLayout::Separate; break;
      case 1: layout = moe::GateUpLayout::Interleaved; break;
      case 2: layout = moe::GateUpLayout::Concatenated; break;
      default:
        return error() << "swiglu_fusion = " << fusion << " is not 0, 1 or 2";
      }
      if (layout == moe::GateUpLayout::Separate && !inputs[kFc3Weights])
        return error() << "swiglu with swiglu_fusion = 0 needs fc3_experts_weights (the up "
                          "projection)";
    } else if (activationType == "silu" || activationType == "gelu" ||
               activationType == "relu" || activationType == "identity") {
      kind = activationType == "silu"   ? moe::ActivationKind::SiLU
             : activationType == "gelu" ? moe::ActivationKind::GELU
             : activationType == "relu" ? moe::ActivationKind::ReLU
                                        : moe::ActivationKind::Identity;
      if (inputs[kFc3Weights] || inputs[kFc3Bias])
        return error() << "fc3_experts_weights is only for activation_type 'swiglu' with "
                          "swiglu_fusion = 0";
    } else {
      return error() << "activation_type '" << activationType
                     << "' is not supported (relu, gelu, silu, swiglu, identity are)";
    }
    if (layout != moe::GateUpLayout::Separate && inputs[kFc3Weights])
      return error() << "fc3_experts_weights is given, but swiglu_fusion = " << fusion
                     << " fuses gate and up into fc1";
    if (failed(checkShapes(layout)))
      return failure();
    return build(kind, layout, alpha, beta, limit);
  }

private:
  InFlightDiagnostic error() {
    return emitError(loc) << "node '" << node.name() << "' (com.microsoft." << node.op_type()
                          << "): ";
  }

  LogicalResult checkAttributes() {
    for (const auto &attr : node.attribute())
      if (llvm::find(kKnownAttributes, attr.name()) == std::end(kKnownAttributes))
        return error() << "unknown attribute '" << attr.name() << "'";
    if (intAttribute(node, "k", 1) < 1)
      return error() << "k = " << intAttribute(node, "k", 1) << " must be positive";
    return success();
  }

  LogicalResult collectInputs() {
    if (node.input_size() > kNumMoEInputs)
      return error() << "has " << node.input_size() << " inputs; MoE takes at most "
                     << kNumMoEInputs;
    inputs.assign(kNumMoEInputs, Value());
    for (int i = 0; i < node.input_size(); ++i) {
      if (node.input(i).empty())
        continue;
      FailureOr<Value> value = importer.lookup(node, node.input(i));
      if (failed(value))
        return failure();
      auto type = dyn_cast<RankedTensorType>(value->getType());
      if (!type)
        return error() << kMoEInputNames[i] << " must be a ranked tensor, got "
                       << value->getType();
      inputs[i] = *value;
    }
    for (MoEInput required : {kInput, kRouterProbs, kFc1Weights, kFc2Weights})
      if (!inputs[required])
        return error() << "required input " << kMoEInputNames[required] << " is missing";
    return success();
  }

  ArrayRef<int64_t> shapeOf(MoEInput input) {
    return cast<RankedTensorType>(inputs[input].getType()).getShape();
  }

  /// Expects `input` to have `expected` (kDynamic matches anything known).
  LogicalResult expectShape(MoEInput input, ArrayRef<int64_t> expected, StringRef layout) {
    ArrayRef<int64_t> shape = shapeOf(input);
    bool fits = shape.size() == expected.size();
    for (size_t i = 0; fits && i < shape.size(); ++i)
      fits = ShapedType::isDynamic(expected[i]) || ShapedType::isDynamic(shape[i]) ||
             shape[i] == expected[i];
    if (fits)
      return success();
    InFlightDiagnostic diag = error() << kMoEInputNames[input] << " has shape [";
    llvm::interleaveComma(shape, diag, [&](int64_t d) {
      if (ShapedType::isDynamic(d))
        diag << "?";
      else
        diag << d;
    });
    return diag << "], expected " << layout
                << " (the layout of onnxruntime's current MoE schema; older layouts are "
                   "not accepted)";
  }

  LogicalResult checkShapes(moe::GateUpLayout layout) {
    ArrayRef<int64_t> input = shapeOf(kInput);
    if (input.size() != 2 && input.size() != 3)
      return error() << "input must be [T, H] or [B, S, H], got rank " << input.size();
    if (shapeOf(kFc2Weights).size() != 3)
      return error() << "fc2_experts_weights must be [E, H, I], got rank "
                     << shapeOf(kFc2Weights).size();
    hidden = input.back();
    experts = shapeOf(kFc2Weights)[0];
    intermediate = shapeOf(kFc2Weights)[2];
    if (ShapedType::isDynamic(hidden) || ShapedType::isDynamic(experts) ||
        ShapedType::isDynamic(intermediate))
      return error() << "hidden size, expert count and intermediate size must be static";
    bool fused = layout == moe::GateUpLayout::Concatenated ||
                 layout == moe::GateUpLayout::Interleaved;
    int64_t fc1Rows = fused ? 2 * intermediate : intermediate;
    StringRef fc1Layout = fused ? "[E, 2·I, H]" : "[E, I, H]";
    if (failed(expectShape(kFc2Weights, {experts, hidden, intermediate}, "[E, H, I]")) ||
        failed(expectShape(kRouterProbs, {ShapedType::kDynamic, experts}, "[T, E]")) ||
        failed(expectShape(kFc1Weights, {experts, fc1Rows, hidden}, fc1Layout)) ||
        (inputs[kFc1Bias] &&
         failed(expectShape(kFc1Bias, {experts, fc1Rows}, fused ? "[E, 2·I]" : "[E, I]"))) ||
        (inputs[kFc2Bias] && failed(expectShape(kFc2Bias, {experts, hidden}, "[E, H]"))) ||
        (inputs[kFc3Weights] &&
         failed(expectShape(kFc3Weights, {experts, intermediate, hidden}, "[E, I, H]"))) ||
        (inputs[kFc3Bias] && failed(expectShape(kFc3Bias, {experts, intermediate}, "[E, I]"))))
      return failure();
    int64_t k = intAttribute(node, "k", 1);
    if (k > experts)
      return error() << "k = " << k << " exceeds the " << experts << " experts";
    return success();
  }

  LogicalResult build(moe::ActivationKind kind, moe::GateUpLayout layout, double alpha,
                      double beta, double limit) {
    OpBuilder &b = importer.builder;
    MLIRContext *context = &importer.context;
    auto inputType = cast<RankedTensorType>(inputs[kInput].getType());
    Value hiddenStates = inputs[kInput];
    // moe.layer takes [T, H]; a [B, S, H] input is flattened and restored.
    Value originalShape;
    if (inputType.getRank() == 3) {
      auto shapeType = RankedTensorType::get({3}, b.getI64Type());
      originalShape =
          moec::onnx::ShapeOp::create(b, loc, shapeType, hiddenStates, nullptr, nullptr).getResult();
      auto flatType = RankedTensorType::get({ShapedType::kDynamic, hidden},
                                            inputType.getElementType());
      hiddenStates = moec::onnx::ReshapeOp::create(b, loc, flatType, hiddenStates,
                                             importer.constantI64(loc, {-1, hidden}), nullptr)
                         .getResult();
    }
    auto activation = moe::ActivationAttr::get(context, kind, alpha, beta, limit);
    Value none;
    auto layer = moe::LayerOp::create(
        b, loc, hiddenStates.getType(), hiddenStates, /*router_weight=*/none,
        /*router_logits=*/inputs[kRouterProbs], /*router_bias=*/none, /*correction_bias=*/none,
        inputs[kFc1Weights], /*up_weight=*/inputs[kFc3Weights], inputs[kFc2Weights],
        inputs[kFc1Bias], /*up_bias=*/inputs[kFc3Bias], inputs[kFc2Bias],
        /*shared_gate_up_weight=*/none, /*shared_down_weight=*/none,
        /*shared_gate_weight=*/none, moe::RoutingKind::SoftmaxTopK,
        static_cast<uint64_t>(intAttribute(node, "k", 1)),
        intAttribute(node, "normalize_routing_weights", 0) != 0, /*num_groups=*/1,
        /*topk_groups=*/1, llvm::APFloat(1.0), activation, layout);
    if (failed(verify(layer)))
      return failure();
    Value result = layer.getResult();
    if (originalShape)
      result = moec::onnx::ReshapeOp::create(b, loc, inputType, result, originalShape, nullptr)
                   .getResult();
    if (node.output_size() != 1 || node.output(0).empty())
      return error() << "must have exactly one output";
    importer.values[node.output(0)] = result;
    return success();
  }

  GraphImporter &importer;
  const ::onnx::NodeProto &node;
  Location loc;
  SmallVector<Value> inputs;
  int64_t hidden = 0, experts = 0, intermediate = 0;
};

} // namespace

LogicalResult moec::onnx::detail::importMicrosoftNode(GraphImporter &importer,
                                                      const ::onnx::NodeProto &node) {
  if (node.op_type() == "MoE")
    return MoEImporter(importer, node).run();
  return emitError(importer.nodeLoc(node))
         << "node '" << node.name() << "' (com.microsoft." << node.op_type()
         << "): operator is not supported (com.microsoft.MoE is)";
}
