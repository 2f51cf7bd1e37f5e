//===- ImportModel.cpp - a checkpoint as a whole-model step program -------===//
//
// One decoder layer per config layer: RMSNorm, attention (GQA with rotary
// embedding, Qwen3's query/key norms, gpt-oss's biases and sinks, DeepSeek-V3's
// MLA), the residual sum, RMSNorm, a dense MLP or a moe.layer, the residual
// sum; then the final norm and the LM head. Which tensors and attributes a
// family needs is written here once per family; Config.h has already checked
// the config's keys and values. Every tensor is checked against the shape the
// config implies before it is read.
//
// FP8 checkpoints (quantization_config fp8, DeepSeek-V3's): a projection's
// `X.weight` is F8_E4M3 with `X.weight_scale_inv`, one f32 dequantisation
// multiplier per weight_block_size block. The routed experts stay e4m3:
// moe.layer takes the codes as they are with their 128x128 block scales
// (per-expert gate and up stacked into gate_up, which needs their rows to be
// whole 128-blocks). Every other FP8 weight (attention, shared experts, dense
// MLP) is dequantised here, once, to f32, which the CPU target computes in.
// A weight's dtype decides, so modules_to_not_convert needs no list here.
//
// MXFP4 checkpoints (quantization_config mxfp4, gpt-oss's): the experts'
// gate_up_proj and down_proj come as `_blocks` and `_scales` (MXFP4Experts.h),
// taken as they are: moe.layer's f4E2M1FN weights with f8E8M0FNU scales.
//
//===----------------------------------------------------------------------===//

#include "ModelBuilder.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

using namespace mlir;
namespace moe = moec::moe;

namespace moec::checkpoint {
using detail::Builder;

OwningOpRef<ModuleOp> detail::Builder::build() {
  Location loc = FileLineColLoc::get(&context, dir, 0, 0);
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  builder.setInsertionPointToEnd(module->getBody());
  auto ids = RankedTensorType::get({ShapedType::kDynamic}, builder.getI64Type());
  int64_t h = config.hiddenSize, vocab = config.vocabSize;
  auto function = func::FuncOp::create(builder, loc, "forward",
                                       builder.getFunctionType({ids, ids, ids}, {rowsOf(vocab)}));
  const char *inputNames[] = {"input_ids", "positions", "sequences"};
  for (unsigned i = 0; i < 3; ++i)
    function.setArgAttr(i, "onnx.name", builder.getStringAttr(inputNames[i]));
  function.setResultAttr(0, "onnx.name", builder.getStringAttr("logits"));
  Block *body = function.addEntryBlock();
  builder.setInsertionPointToEnd(body);
  positions = body->getArgument(1);
  sequences = body->getArgument(2);
  bool mla = config.family == Family::DeepseekV3;
  computeRope(mla ? config.qkRopeHeadDim : config.headDim);

  Value table = weight("model.embed_tokens.weight", {vocab, h});
  Value x = table ? moe::EmbeddingOp::create(builder, locFor("model.embed_tokens"),
                                             rowsOf(h), body->getArgument(0), table)
                  : Value();
  for (int64_t layer = 0; layer < config.numLayers && !failedOnce; ++layer) {
    std::string p = "model.layers." + std::to_string(layer) + ".";
    Value normed = rmsNorm(x, p + "input_layernorm", h);
    Value attended = mla ? attentionMLA(normed, layer) : attention(normed, layer);
    x = add(x, attended, p + "residual_attention");
    normed = rmsNorm(x, p + "post_attention_layernorm", h);
    Value mlp = config.layerIsMoE[layer] ? moeBlock(normed, layer) : denseMLP(normed, layer);
    x = add(x, mlp, p + "residual_mlp");
  }
  x = rmsNorm(x, "model.norm", h);
  Value head = config.tieWordEmbeddings ? table : weight("lm_head.weight", {vocab, h});
  Value logits = linear(x, head, Value(), "lm_head");
  if (failedOnce || !logits)
    return nullptr;
  func::ReturnOp::create(builder, loc, logits);
  if (failed(verify(*module)))
    return nullptr;
  return module;
}

bool isCheckpointDirectory(StringRef path) {
  llvm::SmallString<256> config(path);
  llvm::sys::path::append(config, "config.json");
  return llvm::sys::fs::is_directory(path) && llvm::sys::fs::exists(config);
}

OwningOpRef<ModuleOp> importCheckpoint(StringRef dir, MLIRContext &context,
                                       const ImportOptions &options) {
  context.loadDialect<moe::MoEDialect, arith::ArithDialect, func::FuncDialect>();
  Location loc = FileLineColLoc::get(&context, dir, 0, 0);
  // A random model reads config.json alone; safetensors, if any, are ignored.
  std::unique_ptr<Checkpoint> checkpoint;
  llvm::json::Object json;
  if (options.randomSeed) {
    llvm::Expected<llvm::json::Object> read = readConfigFile(dir);
    if (!read) {
      emitError(loc) << llvm::toString(read.takeError());
      return nullptr;
    }
    json = std::move(*read);
  } else {
    llvm::Expected<std::unique_ptr<Checkpoint>> opened = Checkpoint::open(dir);
    if (!opened) {
      emitError(loc) << llvm::toString(opened.takeError());
      return nullptr;
    }
    checkpoint = std::move(*opened);
  }
  const llvm::json::Object &object = checkpoint ? checkpoint->config() : json;
  llvm::Expected<ModelConfig> config = parseConfig(object);
  if (!config) {
    // The reader's messages start with "config.json: ".
    emitError(loc) << llvm::toString(config.takeError());
    return nullptr;
  }
  // transformers' _init_weights: normal(0, initializer_range), 0.02 by default.
  double range = 0.02;
  if (const llvm::json::Value *given = object.get("initializer_range")) {
    std::optional<double> number = given->getAsNumber();
    if (!number || !std::isfinite(*number) || *number < 0 || *number > 1e6) {
      emitError(loc) << "config.json: 'initializer_range' must be a number in [0, 1e6]";
      return nullptr;
    }
    range = *number;
  }
  Builder builder(checkpoint.get(), *config, context, dir, range);
  OwningOpRef<ModuleOp> module = builder.build();
  if (module && options.randomSeed)
    (*module)->setAttr(kRandomSeedAttr,
                       IntegerAttr::get(IntegerType::get(&context, 64, IntegerType::Unsigned),
                                        *options.randomSeed));
  return module;
}

} // namespace moec::checkpoint
