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
#include "moec/Dialect/Utils/ConstantData.h"

#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/Verifier.h"
#include "llvm/Support/MathExtras.h"

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
constexpr const char *kKnownQuantAttributes[] = {
    "expert_weight_bits", "fc1_expert_weight_bits", "fc2_expert_weight_bits",
    "fc3_expert_weight_bits", "block_size", "quant_type", "weights_prepacked",
    "accuracy_level"};

/// Inputs of com.microsoft.QMoE that moec reads, in order; the rest (global and
/// activation scales of the FP4/FP8 modes) must be absent.
enum QMoEInput {
  kQInput, kQRouterProbs, kQFc1Weights, kQFc1Scales, kQFc1Bias, kQFc2Weights, kQFc2Scales,
  kQFc2Bias, kQFc3Weights, kQFc3Scales, kQFc3Bias, kQFc1ZeroPoints, kQFc2ZeroPoints,
  kQFc3ZeroPoints, kQRouterWeights, kNumQMoEInputsRead
};


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
    return emitError(loc) << describeNode(node) << ": ";
  }

  LogicalResult checkAttributes() {
    bool quantized = node.op_type() == "QMoE";
    for (const auto &attr : node.attribute()) {
      if (llvm::find(kKnownAttributes, attr.name()) == std::end(kKnownAttributes) &&
          (!quantized ||
           llvm::find(kKnownQuantAttributes, attr.name()) == std::end(kKnownQuantAttributes)))
        return error() << "unknown attribute '" << printableName(attr.name()) << "'";
      // Every attribute of these ops is an INT but for these three.
      StringRef name = attr.name();
      auto expected = name == "activation_type" || name == "quant_type"
                          ? ::onnx::AttributeProto::STRING
                      : name == "swiglu_limit" || name == "activation_alpha" ||
                              name == "activation_beta"
                          ? ::onnx::AttributeProto::FLOAT
                          : ::onnx::AttributeProto::INT;
      if (attr.type() != expected)
        return error() << "attribute '" << name << "' must be " << attributeTypeName(expected)
                       << ", got " << attributeTypeName(attr.type());
    }
    if (intAttribute(node, "k", 1) < 1)
      return error() << "k = " << intAttribute(node, "k", 1) << " must be positive";
    return success();
  }

  LogicalResult collectInputs() {
    if (node.op_type() == "QMoE")
      return collectQuantizedInputs();
    if (node.input_size() > kNumMoEInputs)
      return error() << "has " << node.input_size() << " inputs; MoE takes at most "
                     << static_cast<int64_t>(kNumMoEInputs);
    inputs.assign(kNumMoEInputs, Value());
    for (int i = 0; i < node.input_size(); ++i) {
      if (node.input(i).empty())
        continue;
      FailureOr<Value> value = importer.lookup(node, node.input(i));
      if (failed(value))
        return failure();
      auto type = dyn_cast<RankedTensorType>(value->getType());
      if (!type || !isa<Float16Type, BFloat16Type, Float32Type>(type.getElementType()))
        return error() << kMoEInputNames[i] << " must be a ranked f32, f16 or bf16 tensor, got "
                       << value->getType();
      inputs[i] = *value;
    }
    for (MoEInput required : {kInput, kRouterProbs, kFc1Weights, kFc2Weights})
      if (!inputs[required])
        return error() << "required input " << kMoEInputNames[required] << " is missing";
    return success();
  }


  /// QMoE: the int4/int8 block-quantized weights are dequantized at import,
  /// `w = (q - zero_point) * scale`, into f32 constants, and the node is then a
  /// MoE node. Only the raw layout (weights_prepacked = 0) is defined well
  /// enough to read; execution-provider-specific packings are rejected.
  LogicalResult collectQuantizedInputs() {
    std::string quantType = stringAttribute(node, "quant_type", "int");
    if (quantType != "int")
      return error() << "quant_type '" << quantType << "' is not supported (only 'int')";
    if (intAttribute(node, "weights_prepacked", -1) != 0)
      return error() << "weights_prepacked = " << intAttribute(node, "weights_prepacked", -1)
                     << " selects an execution-provider-specific packing; only 0, the raw "
                        "[E, N, K/pack] layout, can be imported";
    if (node.input_size() > kNumQMoEInputsRead)
      for (int i = kNumQMoEInputsRead; i < node.input_size(); ++i)
        if (!node.input(i).empty())
          return error() << "input " << i << " (a global or activation scale of the FP4/FP8 "
                         << "modes) is not supported with quant_type 'int'";
    if (node.input_size() > kQRouterWeights && !node.input(kQRouterWeights).empty())
      return error() << "router_weights (separate mixing weights) cannot be expressed as "
                        "a moe.layer";
    SmallVector<Value> q(kNumQMoEInputsRead, Value());
    for (int i = 0; i < std::min<int>(node.input_size(), kNumQMoEInputsRead); ++i) {
      if (node.input(i).empty())
        continue;
      FailureOr<Value> value = importer.lookup(node, node.input(i));
      if (failed(value))
        return failure();
      if (!isa<RankedTensorType>(value->getType()))
        return error() << "input " << i << " must be a ranked tensor";
      Type element = cast<RankedTensorType>(value->getType()).getElementType();
      bool floating = isa<Float16Type, BFloat16Type, Float32Type>(element);
      if ((i == kQInput || i == kQRouterProbs || i == kQFc1Bias || i == kQFc2Bias ||
           i == kQFc3Bias) &&
          !floating)
        return error() << "input " << i << " must be an f32, f16 or bf16 tensor, got "
                       << value->getType();
      q[i] = *value;
    }
    for (QMoEInput required : {kQInput, kQRouterProbs, kQFc1Weights, kQFc1Scales,
                               kQFc2Weights, kQFc2Scales})
      if (!q[required])
        return error() << "required input " << static_cast<int64_t>(required) << " is missing";
    inputs.assign(kNumMoEInputs, Value());
    inputs[kInput] = q[kQInput];
    inputs[kRouterProbs] = q[kQRouterProbs];
    inputs[kFc1Bias] = q[kQFc1Bias];
    inputs[kFc2Bias] = q[kQFc2Bias];
    inputs[kFc3Bias] = q[kQFc3Bias];
    int64_t bits = intAttribute(node, "expert_weight_bits", 4);
    struct Projection {
      const char *name;
      QMoEInput weights, scales, zeroPoints;
      MoEInput into;
    } projections[] = {{"fc1", kQFc1Weights, kQFc1Scales, kQFc1ZeroPoints, kFc1Weights},
                       {"fc2", kQFc2Weights, kQFc2Scales, kQFc2ZeroPoints, kFc2Weights},
                       {"fc3", kQFc3Weights, kQFc3Scales, kQFc3ZeroPoints, kFc3Weights}};
    for (const Projection &p : projections) {
      if (!q[p.weights])
        continue;
      int64_t projectionBits =
          intAttribute(node, (std::string(p.name) + "_expert_weight_bits").c_str(), bits);
      FailureOr<Value> weights = dequantize(p.name, q[p.weights], q[p.scales],
                                            q[p.zeroPoints], projectionBits);
      if (failed(weights))
        return failure();
      inputs[p.into] = *weights;
      for (Value consumed : {q[p.weights], q[p.scales], q[p.zeroPoints]})
        if (consumed)
          quantizedInputs.push_back(consumed);
    }
    return success();
  }

  FailureOr<Value> dequantize(StringRef name, Value packed, Value scales, Value zeroPoints,
                              int64_t bits) {
    if (bits != 4 && bits != 8)
      return error() << name << ": " << bits << "-bit weights are not supported (4 and 8 are)";
    if (!scales)
      return error() << name << "_scales is required";
    auto packedType = cast<RankedTensorType>(packed.getType());
    auto scaleType = cast<RankedTensorType>(scales.getType());
    if (packedType.getRank() != 3 || !packedType.hasStaticShape() ||
        !packedType.getElementType().isUnsignedInteger(8))
      return error() << name << "_experts_weights must be a static [E, N, K*" << bits
                     << "/8] ui8 tensor, got " << packedType;
    if (!scaleType.getElementType().isF32())
      return error() << name << "_scales must be f32, got " << scaleType;
    int64_t experts = packedType.getDimSize(0), rows = packedType.getDimSize(1);
    int64_t columns = packedType.getDimSize(2) * 8 / bits;
    int64_t blockSize = intAttribute(node, "block_size", 0);
    int64_t blocks = 1;
    SmallVector<int64_t> expectedScales = {experts, rows};
    if (blockSize > 0) {
      if (!llvm::isPowerOf2_64(blockSize) || blockSize < 16 || columns % blockSize != 0)
        return error() << "block_size = " << blockSize << " must be a power of two >= 16 that "
                       << "divides K = " << columns;
      blocks = columns / blockSize;
      expectedScales.push_back(blocks);
    } else {
      blockSize = columns;
    }
    if (scaleType.getShape() != ArrayRef<int64_t>(expectedScales))
      return error() << name << "_scales has type " << scaleType << ", expected shape ["
                     << experts << ", " << rows << (expectedScales.size() == 3 ? ", " : "")
                     << (expectedScales.size() == 3 ? std::to_string(blocks) : "") << "]";
    std::optional<ArrayRef<char>> packedBytes = getConstantBytes(packed);
    std::optional<ArrayRef<char>> scaleBytes = getConstantBytes(scales);
    if (!packedBytes || !scaleBytes)
      return error() << name << " weights and scales must be initializers (non-splat)";
    std::optional<ArrayRef<char>> zeroBytes;
    int64_t zeroStride = 0; // bytes of zero points per row
    if (zeroPoints) {
      auto zeroType = cast<RankedTensorType>(zeroPoints.getType());
      zeroStride = (blocks * bits + 7) / 8;
      SmallVector<int64_t> expectedZeros = {experts, rows, zeroStride};
      if (expectedScales.size() == 2)
        expectedZeros = {experts, (rows * bits + 7) / 8};
      if (zeroType.getShape() != ArrayRef<int64_t>(expectedZeros) ||
          !zeroType.getElementType().isUnsignedInteger(8))
        return error() << name << "_zero_points has type " << zeroType
                       << ", which does not match the packed layout of the schema";
      if (expectedScales.size() == 2 && bits == 4)
        return error() << name << "_zero_points packed across rows (no block_size) are not "
                                  "supported for 4-bit weights";
      zeroBytes = getConstantBytes(zeroPoints);
      if (!zeroBytes)
        return error() << name << "_zero_points must be an initializer";
    }
    // Unpack: 4-bit values sit two to a byte, the lower index in the low nibble.
    auto code = [&](ArrayRef<char> bytes, int64_t index) -> int64_t {
      auto byte = static_cast<uint8_t>(bytes[bits == 8 ? index : index / 2]);
      return bits == 8 ? byte : (index % 2 == 0 ? byte & 0xF : byte >> 4);
    };
    auto *scaleData = reinterpret_cast<const float *>(scaleBytes->data());
    int64_t count = experts * rows * columns;
    std::vector<float> values(static_cast<size_t>(count));
    int64_t defaultZero = int64_t(1) << (bits - 1);
    for (int64_t row = 0; row < experts * rows; ++row)
      for (int64_t col = 0; col < columns; ++col) {
        int64_t block = col / blockSize;
        int64_t zero = defaultZero;
        if (zeroBytes)
          zero = code(*zeroBytes, row * zeroStride * 8 / bits + block);
        float scale = scaleData[row * blocks + block];
        values[row * columns + col] =
            static_cast<float>(code(*packedBytes, row * columns + col) - zero) * scale;
      }
    auto type = RankedTensorType::get({experts, rows, columns}, importer.builder.getF32Type());
    ArrayRef<char> raw(reinterpret_cast<const char *>(values.data()), values.size() * 4);
    auto attr = DenseResourceElementsAttr::get(
        type, (std::string(name) + "_dequantized").c_str(),
        HeapAsmResourceBlob::allocateAndCopyWithAlign(raw, kBlobAlignment));
    return importer.makeConstant(loc, cast<ElementsAttr>(attr));
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
        /*router_logits=*/inputs[kRouterProbs], /*expert_ids=*/none, /*expert_weights=*/none,
        /*router_bias=*/none, /*correction_bias=*/none,
        inputs[kFc1Weights], /*up_weight=*/inputs[kFc3Weights], inputs[kFc2Weights],
        inputs[kFc1Bias], /*up_bias=*/inputs[kFc3Bias], inputs[kFc2Bias],
        /*gate_up_scales=*/none, /*down_scales=*/none, /*shared_gate_up_weight=*/none, /*shared_down_weight=*/none,
        /*shared_gate_weight=*/none, moe::RoutingKind::SoftmaxTopK,
        static_cast<uint64_t>(intAttribute(node, "k", 1)),
        intAttribute(node, "normalize_routing_weights", 0) != 0, /*num_groups=*/1,
        /*topk_groups=*/1, llvm::APFloat(1.0), activation, layout);
    if (failed(verify(layer)))
      return failure();
    // QMoE's packed weights, scales and zero points are dead once dequantized
    // (unless a later node reads them too); the graph importer erases them at the
    // end, so that the weights are not held twice.
    for (Value input : quantizedInputs)
      importer.eraseIfUnused.push_back(input);
    Value result = layer.getResult();
    if (originalShape)
      result = moec::onnx::ReshapeOp::create(b, loc, inputType, result, originalShape, nullptr)
                   .getResult();
    if (node.output_size() != 1 || node.output(0).empty())
      return error() << "must have exactly one output";
    return importer.defineOutputs(node, result);
  }

  GraphImporter &importer;
  const ::onnx::NodeProto &node;
  Location loc;
  SmallVector<Value> inputs;
  SmallVector<Value> quantizedInputs; // QMoE inputs consumed by dequantization
  int64_t hidden = 0, experts = 0, intermediate = 0;
};

} // namespace

LogicalResult moec::onnx::detail::importMicrosoftNode(GraphImporter &importer,
                                                      const ::onnx::NodeProto &node) {
  if (node.op_type() == "MoE" || node.op_type() == "QMoE")
    return MoEImporter(importer, node).run();
  return emitError(importer.nodeLoc(node))
         << describeNode(node) << ": operator is not supported (com.microsoft.MoE and QMoE are)";
}
