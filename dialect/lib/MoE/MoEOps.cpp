//===- MoEOps.cpp - moe dialect operations and their verifiers ------------===//
//
// Verifiers name the operand and dimension at fault and say what was expected.
// Shapes are checked symbolically: each dimension of each operand is bound to a
// name (T, H, E, I, ...); the first operand to fix a size wins and a later
// disagreement names both operands. Dynamic dimensions bind nothing.
//
//===----------------------------------------------------------------------===//

#include "moec/Dialect/MoE/MoEOps.h"
#include "ShapeChecker.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/StringMap.h"

#include <cmath>

using namespace mlir;
using namespace moec::moe;

using moec::moe::detail::ceilDiv;
using moec::moe::detail::ShapeChecker;

namespace {

/// Routing attributes shared by moe.layer and moe.route. `numExperts` may be
/// dynamic.
LogicalResult verifyRouting(Operation *op, RoutingKind routing, int64_t topK,
                            int64_t numGroups, int64_t topkGroups,
                            double scalingFactor, int64_t numExperts) {
  if (!ShapedType::isDynamic(numExperts) && topK > numExperts)
    return op->emitOpError() << "top_k = " << topK << " exceeds the number of experts ("
                             << numExperts << ")";
  if (!(scalingFactor > 0.0) || !std::isfinite(scalingFactor))
    return op->emitOpError() << "routed_scaling_factor must be positive and finite, got "
                             << scalingFactor;
  if (routing != RoutingKind::SigmoidGroupTopK) {
    if (numGroups != 1 || topkGroups != 1)
      return op->emitOpError()
             << "num_groups and topk_groups apply only to routing 'sigmoid_group_topk'";
    return success();
  }
  if (numGroups < 1)
    return op->emitOpError() << "num_groups must be positive, got " << numGroups;
  if (topkGroups < 1 || topkGroups > numGroups)
    return op->emitOpError() << "topk_groups must be in [1, num_groups = " << numGroups
                             << "], got " << topkGroups;
  if (ShapedType::isDynamic(numExperts))
    return success();
  if (numExperts % numGroups != 0)
    return op->emitOpError() << "the " << numExperts
                             << " experts do not split into num_groups = " << numGroups
                             << " equal groups";
  int64_t groupSize = numExperts / numGroups;
  if (numGroups > 1 && groupSize < 2)
    return op->emitOpError() << "groups of " << groupSize
                             << " expert: a group's score is the sum of its two best "
                                "experts, so each group needs at least 2";
  if (topK > topkGroups * groupSize)
    return op->emitOpError() << "top_k = " << topK << " exceeds the "
                             << topkGroups * groupSize << " experts in the topk_groups = "
                             << topkGroups << " groups kept";
  return success();
}

/// An activation attribute with SwiGLU parameters needs a gated layout; the
/// lowered ops take gate and up fused, never separate.
LogicalResult verifyActivationLayout(Operation *op, ActivationAttr activation,
                                     GateUpLayout layout, bool fusedOnly) {
  if (fusedOnly && layout == GateUpLayout::Separate)
    return op->emitOpError()
           << "layout 'separate' is not a fused layout: concatenate gate and up first";
  if (layout == GateUpLayout::None && activation.hasSwiGLUParameters())
    return op->emitOpError()
           << "alpha, beta and limit need a gated layout (the SwiGLU form), not 'none'";
  return success();
}

/// The epilogue of moe.grouped_matmul and moe.linear: activation and layout go
/// together, and a gated layout halves N (which must be even).
LogicalResult verifyEpilogue(Operation *op, ShapeChecker &shapes,
                                    std::optional<ActivationAttr> epilogue,
                                    std::optional<GateUpLayout> layout, StringRef weightsName,
                                    int64_t weightsRowDim, bool &gated) {
  if (epilogue.has_value() != layout.has_value())
    return op->emitOpError("'epilogue' and 'epilogue_layout' go together");
  gated = layout && *layout != GateUpLayout::None;
  if (epilogue && failed(verifyActivationLayout(op, *epilogue, *layout, true)))
    return failure();
  if (gated && failed(shapes.bindHalf("N", "N/2", weightsName, weightsRowDim)))
    return failure();
  return success();
}

bool isFP8(Value value) {
  return isa<Float8E4M3FNType>(cast<ShapedType>(value.getType()).getElementType());
}

bool isMXFP4(Value value) {
  return isa<Float4E2M1FNType>(cast<ShapedType>(value.getType()).getElementType());
}

Type elementType(Value value) { return cast<ShapedType>(value.getType()).getElementType(); }

} // namespace

//===----------------------------------------------------------------------===//
// LayerOp
//===----------------------------------------------------------------------===//

/// A moe.layer weight that is MXFP4, or has e8m0 scales: both, and the scales
/// [E, N, ceil(K/32)] of the weight's [E, N, K].
static LogicalResult verifyMXFP4Scales(Operation *op, Value weight, Value scales,
                                       StringRef weightName, StringRef scalesName) {
  if (!isMXFP4(weight))
    return op->emitOpError() << "'" << scalesName << "' of " << elementType(scales)
                             << " are MXFP4 scales, but '" << weightName
                             << "' is not f4E2M1FN";
  if (!scales || !isa<Float8E8M0FNUType>(elementType(scales)))
    return op->emitOpError() << "'" << weightName << "' is MXFP4 and needs '" << scalesName
                             << "' of f8E8M0FNU, one per row per 32 along K";
  ArrayRef<int64_t> shape = cast<RankedTensorType>(weight.getType()).getShape();
  SmallVector<int64_t> want = {shape[0], shape[1],
                               ShapedType::isDynamic(shape[2]) ? shape[2]
                                                               : ceilDiv(shape[2], kMXBlock)};
  auto scalesType = cast<RankedTensorType>(scales.getType());
  if (scalesType.getShape() != ArrayRef<int64_t>(want))
    return op->emitOpError() << "'" << scalesName << "' is " << scalesType << "; '"
                             << weightName << "' makes [" << want[0] << ", " << want[1] << ", "
                             << want[2] << "] (one per row per 32 along K)";
  return success();
}

int64_t LayerOp::getNumExperts() {
  return cast<RankedTensorType>(getGateUpWeight().getType()).getDimSize(0);
}

int64_t LayerOp::getIntermediateSize() {
  return cast<RankedTensorType>(getDownWeight().getType()).getDimSize(2);
}

LogicalResult LayerOp::verify() {
  ShapeChecker shapes(*this);
  if (failed(shapes.expect(getHidden(), "hidden", {"T", "H"})))
    return failure();

  // Router: weights, logits, or the routing itself (ids and weights, as a
  // hand-written experts module receives it).
  if (static_cast<bool>(getExpertIds()) != static_cast<bool>(getExpertWeights()))
    return emitOpError("'expert_ids' and 'expert_weights' go together");
  int sources = static_cast<bool>(getRouterWeight()) + static_cast<bool>(getRouterLogits()) +
                static_cast<bool>(getExpertIds());
  if (sources > 1)
    return emitOpError("takes one of 'router_weight', 'router_logits' and 'expert_ids' with "
                       "'expert_weights', not several");
  if (sources == 0)
    return emitOpError("needs 'router_weight', 'router_logits', or 'expert_ids' with "
                       "'expert_weights'");
  if (hasPrecomputedRouting()) {
    // Nothing routes, so nothing may say how: one spelling per meaning. Ids
    // outside [0, E) are the sentinel (docs/dialect.md), not an error.
    if (getRouting() != RoutingKind::SoftmaxTopK || getNormalize() || getNumGroups() != 1 ||
        getTopkGroups() != 1 || getRoutedScalingFactor().convertToDouble() != 1.0)
      return emitOpError("with precomputed routing ('expert_ids', 'expert_weights') the routing "
                         "attributes other than top_k keep their defaults (routing "
                         "softmax_topk, normalize false, num_groups 1, topk_groups 1, "
                         "routed_scaling_factor 1.0)");
    if (getCorrectionBias())
      return emitOpError("'correction_bias' steers a router; precomputed routing has none");
    if (failed(shapes.bind("K", static_cast<int64_t>(getTopK()), "attribute top_k")) ||
        failed(shapes.expect(getExpertIds(), "expert_ids", {"T", "K"})) ||
        failed(shapes.expect(getExpertWeights(), "expert_weights", {"T", "K"})))
      return failure();
  }
  if (getRouterWeight() &&
      failed(shapes.expect(getRouterWeight(), "router_weight", {"E", "H"})))
    return failure();
  if (getRouterLogits() &&
      failed(shapes.expect(getRouterLogits(), "router_logits", {"T", "E"})))
    return failure();
  if (getRouterBias()) {
    if (!getRouterWeight())
      return emitOpError("'router_bias' needs 'router_weight': given logits already "
                         "include any bias");
    if (failed(shapes.expect(getRouterBias(), "router_bias", {"E"})))
      return failure();
  }
  if (getCorrectionBias() &&
      failed(shapes.expect(getCorrectionBias(), "correction_bias", {"E"})))
    return failure();

  // Routed experts. Weights are [out, in]: gate_up [E, 2I or I, H], down [E, H, I].
  GateUpLayout layout = getGateUpLayout();
  bool fused = layout == GateUpLayout::Concatenated || layout == GateUpLayout::Interleaved;
  StringRef gateUpRows = fused ? "2I" : "I";
  if (failed(shapes.expect(getGateUpWeight(), "gate_up_weight", {"E", gateUpRows, "H"})))
    return failure();
  if (fused && failed(shapes.bindHalf("2I", "I", "gate_up_weight", 1)))
    return failure();
  if (layout == GateUpLayout::Separate) {
    if (!getUpWeight())
      return emitOpError("gate_up_layout 'separate' needs operand 'up_weight'");
    if (failed(shapes.expect(getUpWeight(), "up_weight", {"E", "I", "H"})))
      return failure();
  } else if (getUpWeight()) {
    return emitOpError("operand 'up_weight' is only for gate_up_layout 'separate'");
  }
  if (failed(shapes.expect(getDownWeight(), "down_weight", {"E", "H", "I"})))
    return failure();
  if (getGateUpBias() &&
      failed(shapes.expect(getGateUpBias(), "gate_up_bias", {"E", gateUpRows})))
    return failure();
  if (getUpBias()) {
    if (layout != GateUpLayout::Separate)
      return emitOpError("operand 'up_bias' is only for gate_up_layout 'separate'");
    if (failed(shapes.expect(getUpBias(), "up_bias", {"E", "I"})))
      return failure();
  }
  if (getDownBias() && failed(shapes.expect(getDownBias(), "down_bias", {"E", "H"})))
    return failure();
  // FP8 weights (an e4m3 checkpoint) come with their block scales, and only
  // then; MXFP4 weights (gpt-oss's) with their e8m0 scales, one per row per 32.
  struct Scaled {
    Value weight, scales;
    StringRef weightName, scalesName;
  } scaled[] = {{getGateUpWeight(), getGateUpScales(), "gate_up_weight", "gate_up_scales"},
                {getDownWeight(), getDownScales(), "down_weight", "down_scales"}};
  for (const Scaled &pair : scaled) {
    if (isMXFP4(pair.weight) || (pair.scales && !elementType(pair.scales).isF32())) {
      if (failed(verifyMXFP4Scales(*this, pair.weight, pair.scales, pair.weightName,
                                   pair.scalesName)))
        return failure();
      continue;
    }
    if (isFP8(pair.weight) != static_cast<bool>(pair.scales))
      return emitOpError() << "'" << pair.weightName << "' is "
                           << (pair.scales ? "not FP8 but has '" : "FP8 and needs '")
                           << pair.scalesName << "' (its 128x128 block scales)";
    if (!pair.scales)
      continue;
    ArrayRef<int64_t> shape = cast<RankedTensorType>(pair.weight.getType()).getShape();
    SmallVector<int64_t> want = {shape[0], ShapedType::isDynamic(shape[1]) ? shape[1] : (shape[1] + 127) / 128,
                                 ShapedType::isDynamic(shape[2]) ? shape[2] : (shape[2] + 127) / 128};
    auto scalesType = cast<RankedTensorType>(pair.scales.getType());
    if (scalesType.getShape() != ArrayRef<int64_t>(want))
      return emitOpError() << "'" << pair.scalesName << "' is " << scalesType
                           << "; the blocks of '" << pair.weightName << "' make ["
                           << want[0] << ", " << want[1] << ", " << want[2] << "]";
  }
  if (getGateUpScales() && layout == GateUpLayout::Separate)
    return emitOpError("FP8 or MXFP4 'gate_up_weight' needs gate and up fused (concatenated or "
                       "interleaved), not 'separate'");
  if (failed(verifyActivationLayout(*this, getActivation(), layout, /*fusedOnly=*/false)))
    return failure();

  // Shared expert: gate and up concatenated when gated.
  if (static_cast<bool>(getSharedGateUpWeight()) != static_cast<bool>(getSharedDownWeight()))
    return emitOpError("'shared_gate_up_weight' and 'shared_down_weight' go together");
  if (getSharedGateUpWeight()) {
    StringRef sharedRows = isGated() ? "2Is" : "Is";
    if (failed(shapes.expect(getSharedGateUpWeight(), "shared_gate_up_weight",
                             {sharedRows, "H"})))
      return failure();
    if (isGated() && failed(shapes.bindHalf("2Is", "Is", "shared_gate_up_weight", 0)))
      return failure();
    if (failed(shapes.expect(getSharedDownWeight(), "shared_down_weight", {"H", "Is"})))
      return failure();
  }
  if (getSharedGateWeight()) {
    if (!getSharedGateUpWeight())
      return emitOpError("'shared_gate_weight' needs a shared expert");
    if (failed(shapes.expect(getSharedGateWeight(), "shared_gate_weight", {"G", "H"})))
      return failure();
    if (shapes.get("G") != 1)
      return emitOpError() << "shared_gate_weight must be [1, H], one sigmoid gate per "
                              "token, got "
                           << getSharedGateWeight().getType();
  }

  if (getResult().getType() != getHidden().getType())
    return emitOpError() << "result type " << getResult().getType()
                         << " must equal the type of 'hidden', " << getHidden().getType();
  return verifyRouting(*this, getRouting(), getTopK(), getNumGroups(), getTopkGroups(),
                       getRoutedScalingFactor().convertToDouble(), shapes.get("E"));
}

//===----------------------------------------------------------------------===//
// Lowered ops
//===----------------------------------------------------------------------===//

LogicalResult RouteOp::verify() {
  ShapeChecker shapes(*this);
  if (failed(shapes.bind("K", getTopK(), "attribute top_k")) ||
      failed(shapes.expect(getLogits(), "logits", {"T", "E"})) ||
      (getCorrectionBias() &&
       failed(shapes.expect(getCorrectionBias(), "correction_bias", {"E"}))) ||
      failed(shapes.expect(getExpertIds(), "result expert_ids", {"T", "K"})) ||
      failed(shapes.expect(getWeights(), "result weights", {"T", "K"})))
    return failure();
  return verifyRouting(*this, getRouting(), getTopK(), getNumGroups(), getTopkGroups(),
                       getRoutedScalingFactor().convertToDouble(), shapes.get("E"));
}

LogicalResult SortOp::verify() {
  ShapeChecker shapes(*this);
  if (failed(shapes.bind("E", getNumExperts(), "attribute num_experts")) ||
      failed(shapes.expect(getExpertIds(), "expert_ids", {"T", "K"})))
    return failure();
  int64_t tokens = shapes.get("T"), topK = shapes.get("K");
  if (!ShapedType::isDynamic(tokens) && !ShapedType::isDynamic(topK) &&
      failed(shapes.bind("S", tokens * topK, "expert_ids [T, K] (T * K)")))
    return failure();
  if (failed(shapes.expect(getPermutation(), "result permutation", {"S"})) ||
      failed(shapes.expect(getOffsets(), "result offsets", {"E"})) ||
      failed(shapes.expect(getNumValid(), "result num_valid", {})))
    return failure();
  int64_t end = getFirstExpert() + getNumExperts();
  if (std::optional<int64_t> epSize = getEpSize()) {
    if (getFirstExpert() != 0)
      return emitOpError() << "first_expert must be 0 with ep_size (the rank picks the "
                              "first expert), got "
                           << getFirstExpert();
    end = *epSize * getNumExperts();
  }
  if (end > std::numeric_limits<int32_t>::max())
    return emitOpError() << "the expert ids up to " << end << " do not fit i32";
  return success();
}

LogicalResult EPShardOp::verify() {
  auto input = cast<RankedTensorType>(getInput().getType());
  auto result = cast<RankedTensorType>(getResult().getType());
  int64_t epSize = static_cast<int64_t>(getEpSize());
  if (input.getRank() < 1 || input.getRank() != result.getRank())
    return emitOpError() << "input and result must have the same rank, at least 1 (experts "
                            "along dimension 0)";
  if (input.getElementType() != result.getElementType())
    return emitOpError() << "result element type " << result.getElementType()
                         << " differs from the input's " << input.getElementType();
  int64_t experts = input.getDimSize(0);
  if (ShapedType::isDynamic(experts) || experts % epSize != 0)
    return emitOpError() << "input's " << (ShapedType::isDynamic(experts) ? "dynamic" : "")
                         << (ShapedType::isDynamic(experts) ? "" : std::to_string(experts))
                         << " experts do not split evenly over ep_size = " << epSize;
  if (result.getDimSize(0) != experts / epSize)
    return emitOpError() << "result must hold " << experts / epSize << " experts (" << experts
                         << " / ep_size " << epSize << "), got " << result.getDimSize(0);
  for (int64_t d = 1; d < input.getRank(); ++d)
    if (input.getDimSize(d) != result.getDimSize(d))
      return emitOpError() << "result dimension " << d << " (" << result.getDimSize(d)
                           << ") differs from the input's (" << input.getDimSize(d) << ")";
  return success();
}

LogicalResult PermuteOp::verify() {
  ShapeChecker shapes(*this);
  if (failed(shapes.expect(getHidden(), "hidden", {"T", "H"})) ||
      failed(shapes.expect(getPermutation(), "permutation", {"S"})) ||
      failed(shapes.expect(getNumValid(), "num_valid", {})) ||
      failed(shapes.expect(getResult(), "result", {"S", "H"})))
    return failure();
  int64_t tokens = shapes.get("T"), slots = shapes.get("S");
  int64_t topK = static_cast<int64_t>(getTopK());
  if (!ShapedType::isDynamic(tokens) && !ShapedType::isDynamic(slots) &&
      slots != tokens * topK)
    return emitOpError() << "permutation has " << slots << " rows, but hidden's " << tokens
                         << " tokens times top_k = " << topK << " make " << tokens * topK;
  // The rows may be stored rounded to bf16 (moe-cast-experts-bf16: their
  // readers, bf16-weight kernels, round them so anyway).
  if (elementType(getResult()) != elementType(getHidden()) &&
      !(elementType(getResult()).isBF16() && elementType(getHidden()).isF32()))
    return emitOpError("result element type must match that of 'hidden' (or be bf16 for f32 "
                       "'hidden')");
  return success();
}

/// moe.grouped_matmul with MXFP4 weights (docs/dialect.md, "MXFP4 layout"),
/// or with scales that only MXFP4 weights take.
static LogicalResult verifyMXFP4Matmul(GroupedMatmulOp op, ShapeChecker &shapes) {
  if (!isMXFP4(op.getWeights()))
    return op.emitOpError() << "'weight_scales' of " << elementType(op.getWeightScales())
                            << " are MXFP4 scales, but operand 'weights' is not f4E2M1FN";
  if (!op.getWeightScales() || !isa<Float8E8M0FNUType>(elementType(op.getWeightScales())))
    return op.emitOpError("operand 'weights' is f4E2M1FN and needs 'weight_scales' of "
                          "f8E8M0FNU, one per 32 along K");
  if (isFP8(op.getLhs()) || op.getLhsScales())
    return op.emitOpError("MXFP4 'weights' take unquantised rows (f32, bf16, f16 or f64), "
                          "not FP8 ones");
  int64_t k = shapes.get("K");
  if (failed(shapes.bind("ceil(K/32)", ShapedType::isDynamic(k) ? k : ceilDiv(k, kMXBlock),
                         "weights dimension 2 / 32")) ||
      failed(shapes.expect(op.getWeightScales(), "weight_scales", {"E", "N", "ceil(K/32)"})))
    return failure();
  bool gated = false;
  if (failed(verifyEpilogue(op, shapes, op.getEpilogue(), op.getEpilogueLayout(), "weights", 1,
                            gated)))
    return failure();
  return shapes.expect(op.getResult(), "result", {"S", gated ? "N/2" : "N"});
}

LogicalResult GroupedMatmulOp::verify() {
  ShapeChecker shapes(*this);
  if (failed(shapes.expect(getLhs(), "lhs", {"S", "K"})) ||
      failed(shapes.expect(getWeights(), "weights", {"E", "N", "K"})) ||
      failed(shapes.expect(getOffsets(), "offsets", {"E"})) ||
      (getBias() && failed(shapes.expect(getBias(), "bias", {"E", "N"}))))
    return failure();

  // MXFP4 weights carry one e8m0 scale per 32 along K and meet unquantised rows.
  if (isMXFP4(getWeights()) || (getWeightScales() && !elementType(getWeightScales()).isF32()))
    return verifyMXFP4Matmul(*this, shapes);
  // FP8 operands carry their block scales; scales without FP8 mean nothing.
  if (isFP8(getLhs()) != static_cast<bool>(getLhsScales()))
    return isFP8(getLhs())
               ? emitOpError("operand 'lhs' is f8E4M3FN and needs 'lhs_scales'")
               : emitOpError("'lhs_scales' is given but operand 'lhs' is not FP8");
  if (isFP8(getWeights()) != static_cast<bool>(getWeightScales()))
    return isFP8(getWeights())
               ? emitOpError("operand 'weights' is f8E4M3FN and needs 'weight_scales'")
               : emitOpError("'weight_scales' is given but operand 'weights' is not FP8");
  if (isFP8(getLhs()) && !isFP8(getWeights()))
    return emitOpError("an FP8 'lhs' needs FP8 'weights'");
  // bf16 weights may meet f32 rows, which are rounded to bf16 first (the
  // bf16-weight kernels' operand rounding; moe-cast-experts-bf16).
  if (!isFP8(getLhs()) && !isFP8(getWeights()) &&
      elementType(getLhs()) != elementType(getWeights()) &&
      !(elementType(getWeights()).isBF16() && elementType(getLhs()).isF32()))
    return emitOpError() << "'lhs' (" << elementType(getLhs()) << ") and 'weights' ("
                         << elementType(getWeights()) << ") must have one element type";
  auto blocks = [&](StringRef symbol) {
    int64_t size = shapes.get(symbol);
    return ShapedType::isDynamic(size) ? size : ceilDiv(size, kScaleBlock);
  };
  if (failed(shapes.bind("ceil(K/128)", blocks("K"), "weights dimension 2 / 128")) ||
      failed(shapes.bind("ceil(N/128)", blocks("N"), "weights dimension 1 / 128")) ||
      (getLhsScales() &&
       failed(shapes.expect(getLhsScales(), "lhs_scales", {"S", "ceil(K/128)"}))) ||
      (getWeightScales() &&
       failed(shapes.expect(getWeightScales(), "weight_scales",
                            {"E", "ceil(N/128)", "ceil(K/128)"}))))
    return failure();

  bool gated = false;
  if (failed(verifyEpilogue(*this, shapes, getEpilogue(), getEpilogueLayout(), "weights", 1,
                            gated)))
    return failure();
  return shapes.expect(getResult(), "result", {"S", gated ? "N/2" : "N"});
}

LogicalResult ActivationOp::verify() {
  ShapeChecker shapes(*this);
  GateUpLayout layout = getLayout();
  if (failed(verifyActivationLayout(*this, getActivation(), layout, true)) ||
      failed(shapes.expect(getInput(), "input", {"M", "N"})))
    return failure();
  bool gated = layout != GateUpLayout::None;
  if (gated && failed(shapes.bindHalf("N", "N/2", "input", 1)))
    return failure();
  if (failed(shapes.expect(getResult(), "result", {"M", gated ? "N/2" : "N"})))
    return failure();
  if (elementType(getResult()) != elementType(getInput()))
    return emitOpError("result element type must match that of 'input'");
  return success();
}

LogicalResult CombineOp::verify() {
  ShapeChecker shapes(*this);
  if (failed(shapes.expect(getRows(), "rows", {"S", "H"})) ||
      failed(shapes.expect(getPermutation(), "permutation", {"S"})) ||
      failed(shapes.expect(getWeights(), "weights", {"T", "K"})) ||
      failed(shapes.expect(getNumValid(), "num_valid", {})) ||
      failed(shapes.expect(getResult(), "result", {"T", "H"})) ||
      (getAddend() && failed(shapes.expect(getAddend(), "addend", {"T", "H"}))))
    return failure();
  if (getAddendGate()) {
    if (!getAddend())
      return emitOpError("'addend_gate' needs an 'addend'");
    if (failed(shapes.expect(getAddendGate(), "addend_gate", {"T", "G"})))
      return failure();
    if (shapes.get("G") != 1)
      return emitOpError() << "addend_gate must be [T, 1], one gate per token, got "
                           << getAddendGate().getType();
  }
  int64_t tokens = shapes.get("T"), topK = shapes.get("K"), slots = shapes.get("S");
  if (!ShapedType::isDynamic(tokens) && !ShapedType::isDynamic(topK) &&
      !ShapedType::isDynamic(slots) && slots != tokens * topK)
    return emitOpError() << "rows has " << slots << " slots, but weights [T, K] makes T * K = "
                         << tokens * topK;
  return success();
}

LogicalResult LinearOp::verify() {
  ShapeChecker shapes(*this);
  if (failed(shapes.expect(getInput(), "input", {"M", "K"})) ||
      failed(shapes.expect(getWeight(), "weight", {"N", "K"})) ||
      (getBias() && failed(shapes.expect(getBias(), "bias", {"N"}))))
    return failure();
  bool gated = false;
  if (failed(verifyEpilogue(*this, shapes, getEpilogue(), getEpilogueLayout(), "weight", 0,
                            gated)))
    return failure();
  return shapes.expect(getResult(), "result", {"M", gated ? "N/2" : "N"});
}

LogicalResult MultiLinearOp::verify() {
  size_t count = getWeights().size();
  if (count < 1 || count > 4)
    return emitOpError() << "takes 1 to 4 weights, got " << count;
  if (!getBiases().empty() && getBiases().size() != count)
    return emitOpError() << "takes no biases or one per weight: " << getBiases().size()
                         << " biases for " << count << " weights";
  if (getResults().size() != count)
    return emitOpError() << "has one result per weight: " << getResults().size()
                         << " results for " << count << " weights";
  ShapeChecker shapes(*this);
  if (failed(shapes.expect(getInput(), "input", {"M", "K"})))
    return failure();
  Type weightElement = cast<RankedTensorType>(getWeights()[0].getType()).getElementType();
  Type resultElement = cast<RankedTensorType>(getResults()[0].getType()).getElementType();
  for (size_t i = 0; i < count; ++i) {
    std::string n = "N" + std::to_string(i), index = std::to_string(i);
    if (failed(shapes.expect(getWeights()[i], "weight " + index, {n, "K"})) ||
        (!getBiases().empty() && failed(shapes.expect(getBiases()[i], "bias " + index, {n}))) ||
        failed(shapes.expect(getResults()[i], "result " + index, {"M", n})))
      return failure();
    if (cast<RankedTensorType>(getWeights()[i].getType()).getElementType() != weightElement)
      return emitOpError() << "weight " << i << "'s element type differs from weight 0's ("
                           << weightElement << ")";
    if (cast<RankedTensorType>(getResults()[i].getType()).getElementType() != resultElement)
      return emitOpError() << "result " << i << "'s element type differs from result 0's ("
                           << resultElement << ")";
  }
  return success();
}

LogicalResult QuantizeOp::verify() {
  ShapeChecker shapes(*this);
  if (failed(shapes.expect(getInput(), "input", {"M", "K"})) ||
      failed(shapes.expect(getResult(), "result", {"M", "K"})))
    return failure();
  int64_t columns = shapes.get("K");
  int64_t groups = ShapedType::isDynamic(columns) ? columns : ceilDiv(columns, kScaleBlock);
  if (failed(shapes.bind("ceil(K/128)", groups, "input dimension 1 / 128")))
    return failure();
  return shapes.expect(getScales(), "result scales", {"M", "ceil(K/128)"});
}

#define GET_OP_CLASSES
#include "moec/Dialect/MoE/MoEOps.cpp.inc"
