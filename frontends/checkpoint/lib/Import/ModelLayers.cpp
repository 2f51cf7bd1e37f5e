//===- ModelLayers.cpp - a checkpoint's attention, MLP and MoE blocks -----===//
//
// The Builder's layers (ModelBuilder.h): attention (GQA with rotary, Qwen3's
// query/key norms, gpt-oss's biases and sinks) and DeepSeek-V3's MLA, a dense
// MLP, and the MoE block as one moe.layer with its experts as the checkpoint
// stores them (f32/bf16, FP8 codes with block scales, MXFP4 codes and scales).
//
//===----------------------------------------------------------------------===//

#include "ModelBuilder.h"

namespace moec::checkpoint::detail {

Value Builder::attention(Value x, int64_t layer) {
  std::string p = "model.layers." + std::to_string(layer) + ".self_attn.";
  int64_t h = config.hiddenSize, d = config.headDim;
  int64_t heads = config.numHeads, kvHeads = config.numKVHeads;
  bool bias = config.attentionBias;
  Value q = linear(x, p + "q_proj", heads * d, h, bias);
  Value k = linear(x, p + "k_proj", kvHeads * d, h, bias);
  Value v = linear(x, p + "v_proj", kvHeads * d, h, bias);
  if (config.family == Family::Qwen3Moe) {
    q = rmsNorm(q, p + "q_norm", d);
    k = rmsNorm(k, p + "k_norm", d);
  }
  q = rotary(q, d, 0, p + "rotary_q");
  k = rotary(k, d, 0, p + "rotary_k");
  Value sinks =
      config.family == Family::GptOss ? weight(p + "sinks", {heads}) : Value();
  if (!q || !k || !v || (config.family == Family::GptOss && !sinks))
    return Value();
  Value out = moe::AttentionOp::create(
      builder, locFor(p + "attention"), rowsOf(heads * d), q, k, v, positions, sequences,
      /*key_shared=*/Value(), sinks, builder.getI64IntegerAttr(layer),
      builder.getI64IntegerAttr(heads), builder.getI64IntegerAttr(kvHeads),
      builder.getF64FloatAttr(1.0 / std::sqrt(static_cast<double>(d))),
      builder.getI64IntegerAttr(config.layerWindow[layer]));
  return linear(out, p + "o_proj", h, heads * d, bias);
}

/// DeepSeek-V3's multi-head latent attention, with the latent expanded per
/// head (kv_b_proj's key and value rows split apart) and the rope key shared
/// by every head.
Value Builder::attentionMLA(Value x, int64_t layer) {
  std::string p = "model.layers." + std::to_string(layer) + ".self_attn.";
  int64_t h = config.hiddenSize, heads = config.numHeads;
  int64_t nope = config.qkNopeHeadDim, rope = config.qkRopeHeadDim, vDim = config.vHeadDim;
  int64_t rank = config.kvLoraRank, qHead = nope + rope;
  Value q;
  if (config.qLoraRank) {
    Value latent = linear(x, p + "q_a_proj", *config.qLoraRank, h);
    latent = rmsNorm(latent, p + "q_a_layernorm", *config.qLoraRank);
    q = linear(latent, p + "q_b_proj", heads * qHead, *config.qLoraRank);
  } else {
    q = linear(x, p + "q_proj", heads * qHead, h);
  }
  q = rotary(q, qHead, nope, p + "rotary_q");
  std::optional<Tensor> kvA = read(p + "kv_a_proj_with_mqa.weight", {rank + rope, h});
  std::optional<Tensor> kvB = read(p + "kv_b_proj.weight", {heads * (nope + vDim), rank});
  if (!q || !kvA || !kvB)
    return Value();
  Value latent = linear(x, constant(rows(*kvA, 0, rank), p + "kv_a_proj_with_mqa.latent"),
                        Value(), p + "kv_a_proj_with_mqa");
  Value ropeKey = linear(x, constant(rows(*kvA, rank, rank + rope), p + "kv_a_proj_with_mqa.rope"),
                         Value(), p + "kv_a_proj_with_mqa");
  ropeKey = rotary(ropeKey, rope, 0, p + "rotary_k");
  latent = rmsNorm(latent, p + "kv_a_layernorm", rank);
  // kv_b_proj's rows are, per head, nope key rows then v value rows.
  std::vector<Tensor> keyParts, valueParts;
  for (int64_t head = 0; head < heads; ++head) {
    int64_t base = head * (nope + vDim);
    keyParts.push_back(rows(*kvB, base, base + nope));
    valueParts.push_back(rows(*kvB, base + nope, base + nope + vDim));
  }
  SmallVector<const Tensor *> keys, values;
  for (int64_t head = 0; head < heads; ++head) {
    keys.push_back(&keyParts[head]);
    values.push_back(&valueParts[head]);
  }
  Value key = linear(latent, constant(stack(keys), p + "kv_b_proj.key"), Value(), p + "kv_b_proj");
  Value value =
      linear(latent, constant(stack(values), p + "kv_b_proj.value"), Value(), p + "kv_b_proj");
  if (!key || !value || !ropeKey)
    return Value();
  // softmax scale: qk_head_dim^-1/2, times YaRN's mscale(factor, mscale_all_dim)².
  double scale = 1.0 / std::sqrt(static_cast<double>(qHead));
  if (config.rope.kind == RopeConfig::Yarn && config.rope.mscaleAllDim != 0.0 &&
      config.rope.factor > 1.0) {
    double m = 0.1 * config.rope.mscaleAllDim * std::log(config.rope.factor) + 1.0;
    scale *= m * m;
  }
  Value out = moe::AttentionOp::create(
      builder, locFor(p + "attention"), rowsOf(heads * vDim), q, key, value, positions,
      sequences, ropeKey, /*sinks=*/Value(), builder.getI64IntegerAttr(layer),
      builder.getI64IntegerAttr(heads), builder.getI64IntegerAttr(heads),
      builder.getF64FloatAttr(scale), builder.getI64IntegerAttr(config.layerWindow[layer]));
  return linear(out, p + "o_proj", h, heads * vDim);
}

Value Builder::denseMLP(Value x, int64_t layer) {
  std::string p = "model.layers." + std::to_string(layer) + ".mlp.";
  int64_t h = config.hiddenSize, inter = config.intermediateSize;
  std::optional<Tensor> gate = read(p + "gate_proj.weight", {inter, h});
  std::optional<Tensor> up = read(p + "up_proj.weight", {inter, h});
  Value down = weight(p + "down_proj.weight", {h, inter});
  if (!x || !gate || !up || !down)
    return Value();
  Value gateUp = constant(stack({&*gate, &*up}), p + "gate_up_proj");
  auto activation = moe::ActivationAttr::get(&context, moe::ActivationKind::SiLU);
  Value hidden = moe::LinearOp::create(
      builder, locFor(p + "gate_up_proj"), rowsOf(inter), x, gateUp, Value(), activation,
      moe::GateUpLayoutAttr::get(&context, moe::GateUpLayout::Concatenated));
  return linear(hidden, down, Value(), p + "down_proj");
}

bool Builder::expertBlocks(const FP8Weight &weight, StringRef name) {
  if (weight.blockRows == moe::kScaleBlock && weight.blockColumns == moe::kScaleBlock)
    return true;
  error(name, "is F8_E4M3 in blocks of " + std::to_string(weight.blockRows) + "x" +
                  std::to_string(weight.blockColumns) +
                  " (quantization_config.weight_block_size); moe.layer's FP8 experts take "
                  "128x128 blocks, and moec does not quantise FP8 weights again");
  return false;
}

std::optional<Builder::ExpertWeight> Builder::experts(StringRef prefix, StringRef fused,
                                                      ArrayRef<StringRef> perExpert,
                                                      int64_t rows, int64_t columns) {
  int64_t count = config.numExperts;
  std::string fusedName = (prefix + fused).str();
  ExpertWeight out;
  if (!checkpoint) { // a random model: f32 placeholders, whatever the checkpoint's format
    std::optional<Tensor> placeholder = read(fusedName, {count, rows, columns});
    if (!placeholder)
      return std::nullopt;
    out.values = std::move(*placeholder);
    return out;
  }
  if (has(fusedName)) {
    std::optional<TensorView> tensor = view(fusedName, {count, rows, columns});
    if (!tensor)
      return std::nullopt;
    if (tensor->dtype == DType::F8E4M3) {
      out.fp8 = fp8(*tensor);
      if (!out.fp8 || !expertBlocks(*out.fp8, fusedName))
        return std::nullopt;
      return out;
    }
    std::optional<Tensor> decoded = values(*tensor);
    if (!decoded)
      return std::nullopt;
    out.values = std::move(*decoded);
    return out;
  }
  // v4: one tensor per expert and part, its rows stacked.
  int64_t partRows = rows / static_cast<int64_t>(perExpert.size());
  std::string first = (prefix + "0." + perExpert.front() + ".weight").str();
  if (!has(first)) {
    error(fusedName, "is missing, and so is its per-expert form '" + first + "'");
    return std::nullopt;
  }
  std::optional<TensorView> firstView = view(first, {partRows, columns});
  if (!firstView)
    return std::nullopt;
  bool isFP8 = firstView->dtype == DType::F8E4M3;
  if (isFP8) {
    out.fp8.emplace();
    out.fp8->shape = {count, rows, columns};
    out.fp8->scales.shape = {count, ceilDiv(rows, moe::kScaleBlock),
                             ceilDiv(columns, moe::kScaleBlock)};
  } else {
    out.values.shape = {count, rows, columns};
  }
  for (int64_t e = 0; e < count; ++e)
    for (StringRef part : perExpert) {
      std::string name = (prefix + Twine(e) + "." + part + ".weight").str();
      std::optional<TensorView> piece =
          e == 0 && part == perExpert.front() ? firstView : view(name, {partRows, columns});
      if (!piece)
        return std::nullopt;
      if ((piece->dtype == DType::F8E4M3) != isFP8) {
        error(name, "is " + dtypeName(piece->dtype) + " but '" + first + "' is " +
                        dtypeName(firstView->dtype) +
                        ": the experts' weights are FP8 all or none");
        return std::nullopt;
      }
      if (!isFP8) {
        std::optional<Tensor> decoded = values(*piece);
        if (!decoded)
          return std::nullopt;
        out.values.data.insert(out.values.data.end(), decoded->data.begin(), decoded->data.end());
        continue;
      }
      std::optional<FP8Weight> weight = fp8(*piece);
      if (!weight || !expertBlocks(*weight, name))
        return std::nullopt;
      // Stacked parts keep one scale per 128x128 block only if each part's
      // rows are whole blocks; moec does not quantise FP8 weights again.
      if (perExpert.size() > 1 && partRows % moe::kScaleBlock != 0) {
        error(name, "is F8_E4M3 with " + std::to_string(partRows) +
                        " rows, not a multiple of 128: moe.layer's FP8 gate_up stacks the "
                        "experts' " + perExpert[0] + " and " + perExpert[1] +
                        " rows with one scale per 128x128 block, and their blocks would "
                        "straddle (moec does not quantise FP8 weights again)");
        return std::nullopt;
      }
      out.fp8->codes.insert(out.fp8->codes.end(), weight->codes.begin(), weight->codes.end());
      out.fp8->scales.data.insert(out.fp8->scales.data.end(), weight->scales.data.begin(),
                                  weight->scales.data.end());
    }
  return out;
}

std::optional<Builder::ExpertWeight> Builder::mxfp4Experts(StringRef name, int64_t rows,
                                                           int64_t columns) {
  int64_t count = config.numExperts, kBlocks = ceilDiv(columns, moe::kMXBlock);
  std::string blocksName = (name + "_blocks").str(), scalesName = (name + "_scales").str();
  if (config.quantization != "mxfp4") {
    error(blocksName, "is MXFP4, but config.json has no mxfp4 quantization_config");
    return std::nullopt;
  }
  std::optional<TensorView> blocks = view(blocksName, {count, rows, kBlocks, 16});
  std::optional<TensorView> scales = view(scalesName, {count, rows, kBlocks});
  if (!blocks || !scales)
    return std::nullopt;
  for (const TensorView *tensor : {&*blocks, &*scales})
    if (tensor->dtype != DType::U8) {
      error(tensor->name, "has dtype " + dtypeName(tensor->dtype) +
                              "; MXFP4 blocks and scales are U8");
      return std::nullopt;
    }
  std::string why;
  std::optional<MXFP4Experts> unpacked =
      unpackMXFP4(blocks->bytes, scales->bytes, count * rows, columns, why);
  if (!unpacked) {
    error(why.find("scale") != std::string::npos ? scalesName : blocksName, why);
    return std::nullopt;
  }
  ExpertWeight out;
  out.mxfp4 = std::move(*unpacked);
  out.mxfp4Shape = {count, rows, columns};
  return out;
}

std::pair<Value, Value> Builder::expertConstants(const ExpertWeight &weight, StringRef name) {
  if (weight.mxfp4) {
    ArrayRef<int64_t> shape = weight.mxfp4Shape;
    auto codesType = RankedTensorType::get(shape, Float4E2M1FNType::get(&context));
    auto scalesType = RankedTensorType::get({shape[0], shape[1], ceilDiv(shape[2], moe::kMXBlock)},
                                            Float8E8M0FNUType::get(&context));
    return {makeConstant(builder, locFor(name), codesType, weight.mxfp4->codes, name),
            makeConstant(builder, locFor(name), scalesType, weight.mxfp4->scales,
                         (name + "_scales").str())};
  }
  if (!weight.fp8)
    return {constant(weight.values, name), Value()};
  auto type = RankedTensorType::get(weight.fp8->shape, Float8E4M3FNType::get(&context));
  Value codes = makeConstant(builder, locFor(name), type, weight.fp8->codes, name);
  return {codes, constant(weight.fp8->scales, (name + "_scale_inv").str())};
}

Value Builder::moeBlock(Value x, int64_t layer) {
  std::string layerPrefix = "model.layers." + std::to_string(layer) + ".";
  int64_t h = config.hiddenSize, inter = config.moeIntermediateSize, count = config.numExperts;
  bool mixtralV4 = config.family == Family::Mixtral && has(layerPrefix + "block_sparse_moe.gate.weight");
  std::string p = layerPrefix + (mixtralV4 ? "block_sparse_moe." : "mlp.");
  bool gptOss = config.family == Family::GptOss;
  Value router = weight(p + (gptOss ? "router.weight" : "gate.weight"), {count, h});
  Value routerBias = gptOss ? weight(p + "router.bias", {count}) : Value();
  Value correction = config.family == Family::DeepseekV3
                         ? weight(p + "gate.e_score_correction_bias", {count})
                         : Value();
  std::optional<ExpertWeight> gateUp, down;
  Value gateUpBias, downBias;
  if (gptOss) {
    // [E, in, out] with gate and up interleaved in the columns.
    std::string fusedName = p + "experts.gate_up_proj", fusedDownName = p + "experts.down_proj";
    for (StringRef name : {StringRef(fusedName), StringRef(fusedDownName)}) {
      if (!has(name))
        continue;
      llvm::Expected<TensorView> tensor = checkpoint->tensor(name);
      if (!tensor)
        llvm::consumeError(tensor.takeError()); // read() below names it
      else if (tensor->dtype == DType::F8E4M3)
        error(name, "is F8_E4M3: gpt-oss's [E, in, out] FP8 experts are not imported");
    }
    if (has(fusedName + "_blocks") || has(fusedDownName + "_blocks")) {
      // MXFP4 (gpt-oss's published checkpoints): [E, out, in] already.
      gateUp = mxfp4Experts(fusedName, 2 * inter, h);
      down = gateUp ? mxfp4Experts(fusedDownName, h, inter) : std::nullopt;
    } else {
      std::optional<Tensor> fused = read(fusedName, {count, h, 2 * inter});
      std::optional<Tensor> fusedDown = read(fusedDownName, {count, inter, h});
      if (fused && fusedDown) {
        gateUp = ExpertWeight{transposeLastTwo(*fused), std::nullopt};
        down = ExpertWeight{transposeLastTwo(*fusedDown), std::nullopt};
      }
    }
    gateUpBias = weight(p + "experts.gate_up_proj_bias", {count, 2 * inter});
    downBias = weight(p + "experts.down_proj_bias", {count, h});
  } else if (mixtralV4) {
    gateUp = experts(p + "experts.", "gate_up_proj", {"w1", "w3"}, 2 * inter, h);
    down = experts(p + "experts.", "down_proj", {"w2"}, h, inter);
  } else {
    gateUp = experts(p + "experts.", "gate_up_proj", {"gate_proj", "up_proj"}, 2 * inter, h);
    down = experts(p + "experts.", "down_proj", {"down_proj"}, h, inter);
  }
  Value sharedGateUp, sharedDown;
  if (config.family == Family::DeepseekV3 && config.numSharedExperts > 0) {
    int64_t shared = inter * config.numSharedExperts;
    std::optional<Tensor> gate = read(p + "shared_experts.gate_proj.weight", {shared, h});
    std::optional<Tensor> up = read(p + "shared_experts.up_proj.weight", {shared, h});
    if (gate && up)
      sharedGateUp = constant(stack({&*gate, &*up}), p + "shared_experts.gate_up_proj");
    sharedDown = weight(p + "shared_experts.down_proj.weight", {h, shared});
  }
  if (failedOnce || !x || !router || !gateUp || !down)
    return Value();
  auto [gateUpWeight, gateUpScales] = expertConstants(*gateUp, p + "experts.gate_up_proj");
  auto [downWeight, downScales] = expertConstants(*down, p + "experts.down_proj");

  moe::RoutingKind routing = moe::RoutingKind::SoftmaxTopK;
  bool normalize = config.normTopKProb;
  int64_t groups = 1, keptGroups = 1;
  double scaling = 1.0;
  auto activation = moe::ActivationAttr::get(&context, moe::ActivationKind::SiLU);
  moe::GateUpLayout layout = moe::GateUpLayout::Concatenated;
  switch (config.family) {
  case Family::Qwen3Moe:
    break;
  case Family::Mixtral:
    normalize = true;
    break;
  case Family::GptOss:
    routing = moe::RoutingKind::TopKSoftmax;
    normalize = false;
    activation = moe::ActivationAttr::get(&context, moe::ActivationKind::SiLU, 1.702, 1.0,
                                          config.swigluLimit > 0 ? config.swigluLimit
                                                                 : INFINITY);
    layout = moe::GateUpLayout::Interleaved;
    break;
  case Family::DeepseekV3:
    routing = moe::RoutingKind::SigmoidGroupTopK;
    groups = config.numGroups;
    keptGroups = config.topKGroups;
    scaling = config.routedScalingFactor;
    break;
  }
  return moe::LayerOp::create(
      builder, locFor(p + "experts"), x.getType(), x, router, /*router_logits=*/Value(),
      /*expert_ids=*/Value(), /*expert_weights=*/Value(), routerBias, correction, gateUpWeight,
      /*up_weight=*/Value(), downWeight, gateUpBias, /*up_bias=*/Value(), downBias,
      gateUpScales, downScales, sharedGateUp, sharedDown,
      /*shared_gate_weight=*/Value(), routing, static_cast<uint64_t>(config.topK), normalize,
      groups, keptGroups, APFloat(scaling), activation, layout);
}

} // namespace moec::checkpoint::detail
