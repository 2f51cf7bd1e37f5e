//===- Config.cpp - config.json, normalised ---------------------------------===//
//
// The four families' key tables (transformers 5.17's configuration classes
// and the published configs of Qwen3-30B-A3B, Mixtral-8x7B-v0.1,
// gpt-oss-120b and DeepSeek-V3), then one reader per family. Defaults are
// transformers' where a key may be missing; where transformers' default is a
// particular checkpoint's size (num_key_value_heads, head_dim) the reader
// derives it instead: num_attention_heads, hidden_size / num_attention_heads.
//
//===----------------------------------------------------------------------===//

#include "moec/Frontends/Checkpoint/Config.h"

#include "JsonUtil.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <cstdio>

using namespace moec::checkpoint;
using llvm::StringRef;
using moec::checkpoint::detail::kindName;
using moec::checkpoint::detail::sortedKeys;
namespace json = llvm::json;

namespace {

//===----------------------------------------------------------------------===//
// The key tables
//===----------------------------------------------------------------------===//

/// More layers than any model has; bounds the per-layer vectors.
constexpr int64_t kMaxLayers = 1 << 16;

// clang-format off
/// Keys every family understands.
const StringRef kCommonUnderstood[] = {
    "model_type", "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "rms_norm_eps", "max_position_embeddings", "rope_theta",
    "rope_scaling", "rope_parameters", "tie_word_embeddings", "hidden_act",
    "num_experts_per_tok", "quantization_config", "per_layer_config"};

const StringRef kQwen3Understood[] = {
    "num_experts", "num_local_experts", "moe_intermediate_size", "intermediate_size",
    "norm_topk_prob", "decoder_sparse_step", "mlp_only_layers", "sliding_window",
    "use_sliding_window", "max_window_layers", "attention_bias"};
const StringRef kMixtralUnderstood[] = {
    "num_local_experts", "num_experts", "intermediate_size", "sliding_window"};
const StringRef kGptOssUnderstood[] = {
    "num_local_experts", "num_experts", "experts_per_token", "intermediate_size",
    "sliding_window", "layer_types", "attention_bias", "swiglu_limit", "swiglu_alpha"};
const StringRef kDeepseekUnderstood[] = {
    "n_routed_experts", "num_local_experts", "moe_intermediate_size", "intermediate_size",
    "n_shared_experts", "routed_scaling_factor", "kv_lora_rank", "q_lora_rank",
    "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "qk_head_dim", "n_group", "topk_group",
    "first_k_dense_replace", "moe_layer_freq", "norm_topk_prob", "scoring_func", "topk_method",
    "rope_interleave", "attention_bias"};

/// Keys that change nothing at inference: bookkeeping, training-only
/// settings, token ids, generation defaults that transformers v4 stored in
/// configs (it pops them on load), fine-tuning heads.
const StringRef kCommonHarmless[] = {
    // Bookkeeping.
    "architectures", "transformers_version", "torch_dtype", "dtype", "auto_map", "_name_or_path",
    "name_or_path", "_commit_hash", "_attn_implementation_autoset", "attn_implementation",
    "experts_implementation", "use_cache", "return_dict", "output_hidden_states",
    "output_attentions", "output_router_logits", "torchscript", "use_bfloat16", "pruned_heads",
    "chunk_size_feed_forward", "is_encoder_decoder", "is_decoder", "add_cross_attention",
    "cross_attention_hidden_size", "tie_encoder_decoder", "tf_legacy_loss",
    // Token ids.
    "bos_token_id", "eos_token_id", "pad_token_id", "sep_token_id", "decoder_start_token_id",
    // Training.
    "initializer_range", "attention_dropout", "router_aux_loss_coef",
    // Fine-tuning heads.
    "finetuning_task", "id2label", "label2id", "num_labels", "problem_type",
    "task_specific_params", "tokenizer_class", "prefix",
    // Generation defaults (GenerationConfig's; not the model's).
    "max_length", "min_length", "do_sample", "early_stopping", "num_beams", "num_beam_groups",
    "diversity_penalty", "temperature", "top_k", "top_p", "typical_p", "repetition_penalty",
    "length_penalty", "no_repeat_ngram_size", "encoder_no_repeat_ngram_size", "bad_words_ids",
    "num_return_sequences", "output_scores", "return_dict_in_generate", "forced_bos_token_id",
    "forced_eos_token_id", "remove_invalid_values", "exponential_decay_length_penalty",
    "suppress_tokens", "begin_suppress_tokens"};
/// Mixtral: the router's training noise.
const StringRef kMixtralHarmless[] = {"router_jitter_noise"};
/// gpt-oss: the original model's context (rope_scaling holds what YaRN uses).
const StringRef kGptOssHarmless[] = {"initial_context_length"};
/// DeepSeek-V3: training losses, the remote code's expert-parallel size and
/// pretraining tensor parallelism, the multi-token-prediction layers stored
/// after the last layer (model.layers.<num_hidden_layers>; not used for the
/// next token).
const StringRef kDeepseekHarmless[] = {
    "aux_loss_alpha", "seq_aux", "ep_size", "num_nextn_predict_layers", "pretraining_tp"};
// clang-format on

struct FamilyInfo {
  Family family;
  StringRef modelType;
  llvm::ArrayRef<StringRef> understood, harmless;
};
const FamilyInfo kFamilies[] = {
    {Family::Qwen3Moe, "qwen3_moe", kQwen3Understood, {}},
    {Family::Mixtral, "mixtral", kMixtralUnderstood, kMixtralHarmless},
    {Family::GptOss, "gpt_oss", kGptOssUnderstood, kGptOssHarmless},
    {Family::DeepseekV3, "deepseek_v3", kDeepseekUnderstood, kDeepseekHarmless},
};

const FamilyInfo &info(Family family) {
  for (const FamilyInfo &entry : kFamilies)
    if (entry.family == family)
      return entry;
  return kFamilies[0];
}

bool isUnderstood(Family family, StringRef key) {
  return llvm::is_contained(kCommonUnderstood, key) ||
         llvm::is_contained(info(family).understood, key);
}
bool isHarmless(Family family, StringRef key) {
  return llvm::is_contained(kCommonHarmless, key) || llvm::is_contained(info(family).harmless, key);
}

/// A double as people write it ("0.5", "1e-06"), not formatv's fixed "0.50".
std::string num(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", value);
  return text;
}

//===----------------------------------------------------------------------===//
// Reading typed keys, keeping the first error
//===----------------------------------------------------------------------===//

/// Reads keys of one JSON object (config.json, or a nested one such as
/// rope_scaling: `prefix` "rope_scaling."). A missing key or null reads as
/// absent; a wrong type or out-of-range value records the first error (the
/// rest of the reading goes on with defaults and its errors are dropped).
class Reader {
public:
  Reader(const json::Object &object, std::string prefix, StringRef family, std::string &error)
      : object(object), prefix(std::move(prefix)), family(family), error(error) {}

  std::string name(StringRef key) const { return prefix + key.str(); }

  void fail(const llvm::Twine &message) {
    if (error.empty())
      error = "config.json: " + message.str();
  }
  void failKey(StringRef key, const llvm::Twine &message) {
    fail("key '" + name(key) + "': " + message);
  }
  void missing(StringRef key) { fail("missing required key '" + name(key) + "' for " + family); }

  /// The value, or null for an absent key or JSON null.
  const json::Value *get(StringRef key) const {
    const json::Value *value = object.get(key);
    return value && value->kind() != json::Value::Null ? value : nullptr;
  }
  bool has(StringRef key) const { return get(key) != nullptr; }

  std::optional<int64_t> integer(StringRef key, int64_t min, bool required = false) {
    const json::Value *value = get(key);
    if (!value) {
      if (required)
        missing(key);
      return std::nullopt;
    }
    std::optional<int64_t> number = value->getAsInteger();
    if (!number) {
      failKey(key, llvm::formatv("expected an integer, got {0}", kindName(*value)));
      return std::nullopt;
    }
    if (*number < min) {
      failKey(key, llvm::formatv("must be at least {0}, got {1}", min, *number));
      return std::nullopt;
    }
    return number;
  }
  int64_t required(StringRef key, int64_t min) { return integer(key, min, true).value_or(min); }

  /// A number; `positive`: > 0.
  std::optional<double> number(StringRef key, bool positive, bool isRequired = false) {
    const json::Value *value = get(key);
    if (!value) {
      if (isRequired)
        missing(key);
      return std::nullopt;
    }
    std::optional<double> number = value->getAsNumber();
    if (!number || !std::isfinite(*number)) {
      failKey(key, llvm::formatv("expected a finite number, got {0}", kindName(*value)));
      return std::nullopt;
    }
    if (positive && !(*number > 0)) {
      failKey(key, llvm::formatv("must be positive, got {0}", num(*number)));
      return std::nullopt;
    }
    return number;
  }

  std::optional<bool> boolean(StringRef key) {
    const json::Value *value = get(key);
    if (!value)
      return std::nullopt;
    std::optional<bool> flag = value->getAsBoolean();
    if (!flag)
      failKey(key, llvm::formatv("expected true or false, got {0}", kindName(*value)));
    return flag;
  }

  std::optional<StringRef> string(StringRef key) {
    const json::Value *value = get(key);
    if (!value)
      return std::nullopt;
    std::optional<StringRef> text = value->getAsString();
    if (!text)
      failKey(key, llvm::formatv("expected a string, got {0}", kindName(*value)));
    return text;
  }

  /// One integer spelled by any of `keys` (transformers' attribute_map
  /// aliases); spellings given together must agree.
  std::optional<int64_t> aliased(llvm::ArrayRef<StringRef> keys, int64_t min, bool isRequired) {
    std::optional<int64_t> result;
    StringRef from;
    for (StringRef key : keys) {
      std::optional<int64_t> value = integer(key, min);
      if (!value)
        continue;
      if (result && *result != *value) {
        failKey(key, llvm::formatv("{0} disagrees with '{1}' ({2})", *value, name(from), *result));
        return std::nullopt;
      }
      result = value;
      from = key;
    }
    if (!result && isRequired) {
      std::string spellings = llvm::formatv("'{0}'", name(keys.front()));
      for (StringRef key : keys.drop_front())
        spellings += llvm::formatv(" (or '{0}')", name(key)).str();
      fail("missing required key " + spellings + " for " + family);
    }
    return result;
  }

  const json::Object &object;
  std::string prefix;
  StringRef family;
  std::string &error;
};

//===----------------------------------------------------------------------===//
// RoPE
//===----------------------------------------------------------------------===//

// clang-format off
const StringRef kRopeKeys[] = {
    "rope_type", "type", "rope_theta", "partial_rotary_factor", "factor", "attention_factor",
    "beta_fast", "beta_slow", "mscale", "mscale_all_dim", "original_max_position_embeddings",
    "truncate"};
// clang-format on
const StringRef kRopeDefaultKeys[] = {"rope_type", "type", "rope_theta", "partial_rotary_factor"};

double defaultTheta(Family family) {
  switch (family) {
  case Family::Mixtral:
    return 1e6;
  case Family::GptOss:
    return 150000;
  case Family::Qwen3Moe:
  case Family::DeepseekV3:
    return 10000;
  }
  return 10000;
}

/// v4: rope_theta + rope_scaling {type | rope_type, factor, ...}; v5:
/// rope_parameters {rope_type, rope_theta, factor, ...} (either may also
/// carry the other's theta spelling; given twice, the values must agree).
RopeConfig readRope(Reader &top, Family family, int64_t maxPositions) {
  RopeConfig rope;
  rope.theta = defaultTheta(family);
  const json::Value *parameters = top.get("rope_parameters");
  const json::Value *scaling = top.get("rope_scaling");
  StringRef dictKey = parameters ? "rope_parameters" : "rope_scaling";
  const json::Value *dictValue = parameters ? parameters : scaling;
  if (parameters && scaling && *parameters != *scaling) {
    top.failKey("rope_scaling", "disagrees with 'rope_parameters' (the v4 and v5 spellings of "
                                "one setting); give one");
    return rope;
  }
  std::optional<double> topTheta = top.number("rope_theta", /*positive=*/true);

  if (!dictValue) {
    if (topTheta)
      rope.theta = *topTheta;
    if (family == Family::GptOss) {
      // GptOssConfig's default: YaRN ×32 from 4096 positions, not truncated.
      rope.kind = RopeConfig::Yarn;
      rope.factor = 32;
      rope.truncate = false;
      rope.originalMaxPositions = 4096;
    }
    return rope;
  }
  const json::Object *dict = dictValue->getAsObject();
  if (!dict) {
    top.failKey(dictKey, llvm::formatv("expected an object, got {0}", kindName(*dictValue)));
    return rope;
  }
  Reader reader(*dict, (dictKey + ".").str(), top.family, top.error);

  std::optional<StringRef> type = reader.string("rope_type");
  std::optional<StringRef> legacyType = reader.string("type");
  if (type && legacyType && *type != *legacyType)
    reader.failKey("type",
                   llvm::formatv("'{0}' disagrees with 'rope_type' ('{1}')", *legacyType, *type));
  StringRef kind = type ? *type : legacyType ? *legacyType : StringRef("default");
  StringRef kindKey = type ? "rope_type" : "type";
  if (kind == "yarn") {
    rope.kind = RopeConfig::Yarn;
  } else if (kind != "default") {
    reader.failKey(kindKey, llvm::formatv("unsupported rope type '{0}' (default, yarn)", kind));
    return rope;
  }
  llvm::ArrayRef<StringRef> allowed =
      rope.kind == RopeConfig::Yarn ? llvm::ArrayRef(kRopeKeys) : llvm::ArrayRef(kRopeDefaultKeys);
  for (StringRef key : sortedKeys(*dict))
    if (!llvm::is_contained(allowed, key)) {
      if (llvm::is_contained(kRopeKeys, key))
        reader.failKey(key, llvm::formatv("not used by rope type '{0}'", kind));
      else
        reader.fail(llvm::formatv("unknown key '{0}' for {1}", reader.name(key), top.family));
      return rope;
    }

  std::optional<double> theta = reader.number("rope_theta", /*positive=*/true);
  if (theta && topTheta && *theta != *topTheta)
    reader.failKey("rope_theta", llvm::formatv("{0} disagrees with 'rope_theta' ({1})", num(*theta),
                                               num(*topTheta)));
  if (theta)
    rope.theta = *theta;
  else if (topTheta)
    rope.theta = *topTheta;
  if (std::optional<double> partial = reader.number("partial_rotary_factor", true))
    if (*partial != 1)
      reader.failKey(
          "partial_rotary_factor",
          llvm::formatv("unsupported {0} (only 1: rotary over the whole head)", num(*partial)));
  if (rope.kind != RopeConfig::Yarn)
    return rope;

  if (std::optional<double> factor = reader.number("factor", true, /*isRequired=*/true)) {
    if (*factor < 1)
      reader.failKey("factor", llvm::formatv("must be at least 1, got {0}", num(*factor)));
    rope.factor = *factor;
  }
  rope.attentionFactor = reader.number("attention_factor", true);
  rope.betaFast = reader.number("beta_fast", true).value_or(32);
  rope.betaSlow = reader.number("beta_slow", true).value_or(1);
  rope.mscale = reader.number("mscale", false).value_or(1);
  rope.mscaleAllDim = reader.number("mscale_all_dim", false).value_or(0);
  rope.originalMaxPositions =
      reader.integer("original_max_position_embeddings", 1).value_or(maxPositions);
  rope.truncate = reader.boolean("truncate").value_or(true);
  return rope;
}

//===----------------------------------------------------------------------===//
// Quantization
//===----------------------------------------------------------------------===//

void readQuantization(Reader &top, Family family, ModelConfig &config) {
  const json::Value *value = top.get("quantization_config");
  if (!value)
    return;
  const json::Object *object = value->getAsObject();
  if (!object) {
    top.failKey("quantization_config",
                llvm::formatv("expected an object, got {0}", kindName(*value)));
    return;
  }
  Reader reader(*object, "quantization_config.", top.family, top.error);
  std::optional<StringRef> method = reader.string("quant_method");
  if (!method) {
    if (!reader.has("quant_method"))
      reader.missing("quant_method");
    return;
  }
  llvm::SmallVector<StringRef> allowed = {"quant_method", "modules_to_not_convert"};
  if (*method == "fp8")
    allowed.append({"activation_scheme", "fmt", "weight_block_size"});
  else if (*method != "mxfp4" || family != Family::GptOss) {
    reader.failKey("quant_method", llvm::formatv("unsupported quantization method '{0}' (fp8 with "
                                                 "weight_block_size; mxfp4 for gpt_oss)",
                                                 *method));
    return;
  }
  for (StringRef key : sortedKeys(*object))
    if (!llvm::is_contained(allowed, key)) {
      reader.fail(
          llvm::formatv("unknown key '{0}' for {1} quantization", reader.name(key), *method));
      return;
    }
  if (const json::Value *modules = reader.get("modules_to_not_convert")) {
    const json::Array *array = modules->getAsArray();
    if (!array ||
        llvm::any_of(*array, [](const json::Value &entry) { return !entry.getAsString(); }))
      reader.failKey("modules_to_not_convert", "expected an array of strings");
  }
  config.quantization = method->str();
  if (*method != "fp8")
    return;

  if (std::optional<StringRef> scheme = reader.string("activation_scheme"))
    if (*scheme != "dynamic")
      reader.failKey("activation_scheme",
                     llvm::formatv("unsupported '{0}' (dynamic: activations are quantized per "
                                   "block at run time)",
                                   *scheme));
  if (std::optional<StringRef> format = reader.string("fmt"))
    if (*format != "e4m3")
      reader.failKey("fmt", llvm::formatv("unsupported FP8 format '{0}' (e4m3)", *format));
  const json::Value *block = reader.get("weight_block_size");
  if (!block) {
    reader.failKey("weight_block_size", "missing: only blockwise FP8 is supported (per-tensor "
                                        "FP8 checkpoints are not)");
    return;
  }
  const json::Array *sizes = block->getAsArray();
  if (!sizes || sizes->size() != 2) {
    reader.failKey("weight_block_size", "expected two block sizes [rows, columns]");
    return;
  }
  for (const json::Value &size : *sizes) {
    std::optional<int64_t> dim = size.getAsInteger();
    if (!dim || *dim < 1) {
      reader.failKey("weight_block_size", "expected two positive integers");
      return;
    }
    config.fp8BlockSize.push_back(*dim);
  }
}

//===----------------------------------------------------------------------===//
// The families
//===----------------------------------------------------------------------===//

/// head_dim, or hidden_size / num_attention_heads where it is missing.
int64_t readHeadDim(Reader &reader, const ModelConfig &config) {
  if (std::optional<int64_t> headDim = reader.integer("head_dim", 1))
    return *headDim;
  if (config.hiddenSize % config.numHeads != 0 && !reader.has("head_dim"))
    reader.failKey("head_dim", llvm::formatv("missing, and hidden_size {0} is not a multiple of "
                                             "num_attention_heads {1}",
                                             config.hiddenSize, config.numHeads));
  return std::max<int64_t>(1, config.hiddenSize / config.numHeads);
}

/// A sliding window: null or absent → nullopt.
std::optional<int64_t> readWindow(Reader &reader) { return reader.integer("sliding_window", 1); }

void readQwen3(Reader &r, ModelConfig &c) {
  c.headDim = readHeadDim(r, c);
  c.intermediateSize = r.required("intermediate_size", 1);
  c.moeIntermediateSize = r.required("moe_intermediate_size", 1);
  c.normTopKProb = r.boolean("norm_topk_prob").value_or(false);
  c.attentionBias = r.boolean("attention_bias").value_or(false);
  int64_t step = r.integer("decoder_sparse_step", 1).value_or(1);
  std::vector<bool> mlpOnly(c.numLayers, false);
  if (const json::Value *value = r.get("mlp_only_layers")) {
    const json::Array *layers = value->getAsArray();
    if (!layers) {
      r.failKey("mlp_only_layers",
                llvm::formatv("expected an array of layer indices, got {0}", kindName(*value)));
    } else {
      for (auto [index, entry] : llvm::enumerate(*layers)) {
        std::optional<int64_t> layer = entry.getAsInteger();
        if (!layer || *layer < 0 || *layer >= c.numLayers) {
          r.failKey("mlp_only_layers", llvm::formatv("entry {0} is not a layer index (0 to {1})",
                                                     index, c.numLayers - 1));
          break;
        }
        mlpOnly[*layer] = true;
      }
    }
  }
  // transformers: MoE iff not in mlp_only_layers and (layer + 1) % step == 0.
  for (int64_t layer = 0; layer < c.numLayers; ++layer)
    c.layerIsMoE.push_back(!mlpOnly[layer] && (layer + 1) % step == 0);

  // v4 (Qwen2's rule): a window from layer max_window_layers on, only with
  // use_sliding_window; v5 dropped max_window_layers (absent here: 0).
  std::optional<int64_t> window = readWindow(r);
  bool useWindow = r.boolean("use_sliding_window").value_or(false);
  int64_t firstWindowed = r.integer("max_window_layers", 0).value_or(0);
  for (int64_t layer = 0; layer < c.numLayers; ++layer)
    c.layerWindow.push_back(useWindow && window && layer >= firstWindowed ? *window : 0);
}

void readMixtral(Reader &r, ModelConfig &c) {
  c.headDim = readHeadDim(r, c);
  c.intermediateSize = 0;
  c.moeIntermediateSize = r.required("intermediate_size", 1);
  c.normTopKProb = true; // the router always renormalises its top k
  c.attentionBias = false;
  c.layerIsMoE.assign(c.numLayers, true);
  c.layerWindow.assign(c.numLayers, readWindow(r).value_or(0));
}

void readGptOss(Reader &r, ModelConfig &c) {
  c.headDim = readHeadDim(r, c);
  c.intermediateSize = 0;
  c.moeIntermediateSize = r.required("intermediate_size", 1);
  c.normTopKProb = true; // softmax over the k selected logits
  c.attentionBias = r.boolean("attention_bias").value_or(true);
  c.swigluLimit = r.number("swiglu_limit", true).value_or(7.0);
  if (std::optional<double> alpha = r.number("swiglu_alpha", true))
    if (std::abs(*alpha - 1.702) > 1e-9)
      r.failKey("swiglu_alpha",
                llvm::formatv("unsupported {0} (the experts' kernels use 1.702)", num(*alpha)));
  c.layerIsMoE.assign(c.numLayers, true);

  // GptOssConfig: sliding_window defaults to 128; layer_types to sliding,
  // full, sliding, ... ((layer + 1) % 2 → sliding).
  std::optional<int64_t> window = 128;
  if (r.object.get("sliding_window"))
    window = readWindow(r); // null: no window
  std::vector<bool> sliding;
  if (const json::Value *value = r.get("layer_types")) {
    const json::Array *types = value->getAsArray();
    if (!types) {
      r.failKey("layer_types", llvm::formatv("expected an array, got {0}", kindName(*value)));
    } else if (int64_t(types->size()) != c.numLayers) {
      r.failKey("layer_types",
                llvm::formatv("has {0} entries for {1} layers", types->size(), c.numLayers));
    } else {
      for (auto [index, entry] : llvm::enumerate(*types)) {
        std::optional<StringRef> type = entry.getAsString();
        if (type && (*type == "sliding_attention" || *type == "full_attention")) {
          sliding.push_back(*type == "sliding_attention");
          continue;
        }
        r.failKey("layer_types",
                  llvm::formatv("entry {0}: unsupported layer type (sliding_attention, "
                                "full_attention)",
                                index));
        break;
      }
    }
  }
  if (int64_t(sliding.size()) != c.numLayers) {
    sliding.clear();
    for (int64_t layer = 0; layer < c.numLayers; ++layer)
      sliding.push_back((layer + 1) % 2 != 0);
  }
  for (int64_t layer = 0; layer < c.numLayers; ++layer) {
    if (sliding[layer] && !window) {
      r.failKey("layer_types", llvm::formatv("layer {0} is sliding_attention, but sliding_window "
                                             "is null",
                                             layer));
      break;
    }
    c.layerWindow.push_back(sliding[layer] ? *window : 0);
  }
}

void readDeepseek(Reader &r, ModelConfig &c) {
  c.moeIntermediateSize = r.required("moe_intermediate_size", 1);
  c.intermediateSize = r.required("intermediate_size", 1);
  c.numSharedExperts = r.integer("n_shared_experts", 0).value_or(1);
  c.routedScalingFactor = r.number("routed_scaling_factor", true).value_or(2.5);
  c.normTopKProb = r.boolean("norm_topk_prob").value_or(true);
  c.attentionBias = r.boolean("attention_bias").value_or(false);
  c.ropeInterleave = r.boolean("rope_interleave").value_or(true);

  // MLA.
  if (!r.object.get("q_lora_rank"))
    r.missing("q_lora_rank"); // null is fine: no low-rank query projection
  c.qLoraRank = r.integer("q_lora_rank", 1);
  c.kvLoraRank = r.required("kv_lora_rank", 1);
  c.qkNopeHeadDim = r.required("qk_nope_head_dim", 1);
  c.qkRopeHeadDim = r.required("qk_rope_head_dim", 1);
  c.vHeadDim = r.required("v_head_dim", 1);
  if (c.qkRopeHeadDim % 2 != 0)
    r.failKey("qk_rope_head_dim",
              llvm::formatv("must be even (rotary pairs), got {0}", c.qkRopeHeadDim));
  c.headDim = c.qkNopeHeadDim + c.qkRopeHeadDim;
  if (std::optional<int64_t> qkHeadDim = r.integer("qk_head_dim", 1))
    if (*qkHeadDim != c.headDim)
      r.failKey("qk_head_dim", llvm::formatv("{0} is not qk_nope_head_dim + qk_rope_head_dim ({1})",
                                             *qkHeadDim, c.headDim));
  // transformers sets head_dim = qk_rope_head_dim (the rotary size).
  if (std::optional<int64_t> headDim = r.integer("head_dim", 1))
    if (*headDim != c.qkRopeHeadDim)
      r.failKey("head_dim", llvm::formatv("{0} is not qk_rope_head_dim ({1}), which DeepSeek-V3's "
                                          "head_dim means",
                                          *headDim, c.qkRopeHeadDim));
  if (c.numKVHeads != c.numHeads)
    r.failKey("num_key_value_heads",
              llvm::formatv("MLA has one key/value head per attention head ({0}), got {1}",
                            c.numHeads, c.numKVHeads));

  // Routing.
  if (std::optional<StringRef> scoring = r.string("scoring_func"))
    if (*scoring != "sigmoid")
      r.failKey("scoring_func", llvm::formatv("unsupported '{0}' (sigmoid)", *scoring));
  if (std::optional<StringRef> method = r.string("topk_method"))
    if (*method != "noaux_tc")
      r.failKey("topk_method", llvm::formatv("unsupported '{0}' (noaux_tc: group-limited top-k "
                                             "with the score correction bias)",
                                             *method));
  c.numGroups = r.integer("n_group", 1).value_or(8);
  c.topKGroups = r.integer("topk_group", 1).value_or(4);
  if (c.numExperts % c.numGroups != 0)
    r.failKey("n_group",
              llvm::formatv("{0} experts do not split into {1} groups", c.numExperts, c.numGroups));
  else if (c.numExperts / c.numGroups < 2)
    r.failKey("n_group", llvm::formatv("{0} groups of {1} experts: a group's score is the sum of "
                                       "its top two",
                                       c.numGroups, c.numExperts / c.numGroups));
  else if (c.topKGroups > c.numGroups)
    r.failKey("topk_group", llvm::formatv("{0} exceeds n_group ({1})", c.topKGroups, c.numGroups));
  else if (c.topK > c.topKGroups * (c.numExperts / c.numGroups))
    r.failKey("num_experts_per_tok",
              llvm::formatv("{0} exceeds the {1} experts of the topk_group ({2}) selected groups",
                            c.topK, c.topKGroups * (c.numExperts / c.numGroups), c.topKGroups));

  // DeepSeek's code: MoE from layer first_k_dense_replace on, every
  // moe_layer_freq-th layer.
  int64_t firstMoE = r.integer("first_k_dense_replace", 0).value_or(3);
  int64_t frequency = r.integer("moe_layer_freq", 1).value_or(1);
  for (int64_t layer = 0; layer < c.numLayers; ++layer)
    c.layerIsMoE.push_back(layer >= firstMoE && layer % frequency == 0);
  c.layerWindow.assign(c.numLayers, 0);
}

} // namespace

StringRef moec::checkpoint::familyName(Family family) { return info(family).modelType; }

std::vector<StringRef> moec::checkpoint::understoodKeys(Family family) {
  std::vector<StringRef> keys(std::begin(kCommonUnderstood), std::end(kCommonUnderstood));
  keys.insert(keys.end(), info(family).understood.begin(), info(family).understood.end());
  llvm::sort(keys);
  return keys;
}

std::vector<StringRef> moec::checkpoint::harmlessKeys(Family family) {
  std::vector<StringRef> keys(std::begin(kCommonHarmless), std::end(kCommonHarmless));
  keys.insert(keys.end(), info(family).harmless.begin(), info(family).harmless.end());
  llvm::sort(keys);
  return keys;
}

llvm::Expected<ModelConfig> moec::checkpoint::parseConfig(const json::Object &object) {
  auto failure = [](const llvm::Twine &message) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
  };
  const json::Value *modelType = object.get("model_type");
  if (!modelType)
    return failure("config.json: missing required key 'model_type'");
  std::optional<StringRef> typeName = modelType->getAsString();
  if (!typeName)
    return failure(llvm::formatv("config.json: key 'model_type': expected a string, got {0}",
                                 kindName(*modelType)));
  const FamilyInfo *family = nullptr;
  for (const FamilyInfo &entry : kFamilies)
    if (entry.modelType == *typeName)
      family = &entry;
  if (!family)
    return failure(llvm::formatv("config.json: unknown model_type '{0}' (qwen3_moe, mixtral, "
                                 "gpt_oss, deepseek_v3)",
                                 *typeName));
  for (StringRef key : sortedKeys(object))
    if (!isUnderstood(family->family, key) && !isHarmless(family->family, key))
      return failure(
          llvm::formatv("config.json: unknown key '{0}' for {1}", key, family->modelType));

  std::string error;
  Reader r(object, "", family->modelType, error);
  ModelConfig c;
  c.family = family->family;
  c.vocabSize = r.required("vocab_size", 1);
  c.hiddenSize = r.required("hidden_size", 1);
  c.numLayers = r.required("num_hidden_layers", 1);
  if (c.numLayers > kMaxLayers) {
    r.failKey("num_hidden_layers", llvm::formatv("{0} exceeds {1}", c.numLayers, kMaxLayers));
    c.numLayers = 1;
  }
  c.numHeads = r.required("num_attention_heads", 1);
  c.numKVHeads = r.integer("num_key_value_heads", 1).value_or(c.numHeads);
  if (c.numHeads % c.numKVHeads != 0)
    r.failKey("num_key_value_heads",
              llvm::formatv("{0} attention heads are not divisible into {1} key/value heads",
                            c.numHeads, c.numKVHeads));
  c.rmsNormEps = r.number("rms_norm_eps", true, /*isRequired=*/true).value_or(1e-6);
  c.maxPositions = r.required("max_position_embeddings", 1);
  c.tieWordEmbeddings = r.boolean("tie_word_embeddings").value_or(false);
  if (std::optional<StringRef> activation = r.string("hidden_act"))
    if (*activation != "silu")
      r.failKey("hidden_act", llvm::formatv("unsupported activation '{0}' (silu)", *activation));
  if (const json::Value *perLayer = r.get("per_layer_config")) {
    const json::Object *overrides = perLayer->getAsObject();
    if (!overrides || !overrides->empty())
      r.failKey("per_layer_config", "per-layer overrides are not supported");
  }

  switch (c.family) {
  case Family::Qwen3Moe:
    c.numExperts = r.aliased({"num_experts", "num_local_experts"}, 1, true).value_or(1);
    break;
  case Family::Mixtral:
  case Family::GptOss:
    c.numExperts = r.aliased({"num_local_experts", "num_experts"}, 1, true).value_or(1);
    break;
  case Family::DeepseekV3:
    c.numExperts = r.aliased({"n_routed_experts", "num_local_experts"}, 1, true).value_or(1);
    break;
  }
  llvm::SmallVector<StringRef, 2> topKKeys = {"num_experts_per_tok"};
  if (c.family == Family::GptOss)
    topKKeys.push_back("experts_per_token");
  c.topK = r.aliased(topKKeys, 1, true).value_or(1);
  if (c.topK > c.numExperts)
    r.failKey("num_experts_per_tok",
              llvm::formatv("{0} exceeds the {1} experts", c.topK, c.numExperts));

  switch (c.family) {
  case Family::Qwen3Moe:
    readQwen3(r, c);
    break;
  case Family::Mixtral:
    readMixtral(r, c);
    break;
  case Family::GptOss:
    readGptOss(r, c);
    break;
  case Family::DeepseekV3:
    readDeepseek(r, c);
    break;
  }
  c.rope = readRope(r, c.family, c.maxPositions);
  readQuantization(r, c.family, c);
  if (!error.empty())
    return failure(error);
  return c;
}
