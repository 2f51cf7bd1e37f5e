//===- CheckpointConfigTest.cpp - config.json, normalised -------------------===//
//
// The published configs of the four families (transformers v4 spellings), the
// same configs as transformers v5 writes them (rope_parameters, dtype,
// num_local_experts, ...) giving the same ModelConfig, the fixtures' configs,
// and every error: unknown model_type or key, a missing key, a wrong type, an
// impossible or unsupported value.
//
//===----------------------------------------------------------------------===//

#include "moec/Frontends/Checkpoint/Config.h"

#include "CheckpointTestUtil.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

#include <set>

using namespace moec::checkpoint;

namespace {

llvm::json::Object parseObject(llvm::StringRef text) {
  llvm::Expected<llvm::json::Value> value = llvm::json::parse(text);
  if (!value) {
    ADD_FAILURE() << "bad test JSON: " << llvm::toString(value.takeError());
    return {};
  }
  if (!value->getAsObject()) {
    ADD_FAILURE() << "test JSON is not an object";
    return {};
  }
  return std::move(*value->getAsObject());
}

ModelConfig parseOk(llvm::StringRef text) {
  llvm::Expected<ModelConfig> config = parseConfig(parseObject(text));
  if (!config) {
    ADD_FAILURE() << llvm::toString(config.takeError());
    return {};
  }
  return *config;
}

std::string parseError(const llvm::json::Object &object) {
  llvm::Expected<ModelConfig> config = parseConfig(object);
  if (config)
    return "<no error>";
  return llvm::toString(config.takeError());
}

/// `base` with `key` set to the JSON `value` (or removed for "<remove>").
llvm::json::Object edited(llvm::StringRef base, llvm::StringRef key, llvm::StringRef value) {
  llvm::json::Object object = parseObject(base);
  if (value == "<remove>") {
    object.erase(key);
    return object;
  }
  llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(value);
  if (!parsed) {
    ADD_FAILURE() << "bad edit JSON for " << key.str() << ": "
                  << llvm::toString(parsed.takeError());
    return object;
  }
  object[key] = std::move(*parsed);
  return object;
}

void expectSame(const ModelConfig &a, const ModelConfig &b) {
  EXPECT_EQ(a.family, b.family);
  EXPECT_EQ(a.vocabSize, b.vocabSize);
  EXPECT_EQ(a.hiddenSize, b.hiddenSize);
  EXPECT_EQ(a.numLayers, b.numLayers);
  EXPECT_EQ(a.numHeads, b.numHeads);
  EXPECT_EQ(a.numKVHeads, b.numKVHeads);
  EXPECT_EQ(a.headDim, b.headDim);
  EXPECT_EQ(a.rmsNormEps, b.rmsNormEps);
  EXPECT_EQ(a.intermediateSize, b.intermediateSize);
  EXPECT_EQ(a.moeIntermediateSize, b.moeIntermediateSize);
  EXPECT_EQ(a.numExperts, b.numExperts);
  EXPECT_EQ(a.topK, b.topK);
  EXPECT_EQ(a.normTopKProb, b.normTopKProb);
  EXPECT_EQ(a.rope.kind, b.rope.kind);
  EXPECT_EQ(a.rope.theta, b.rope.theta);
  EXPECT_EQ(a.rope.factor, b.rope.factor);
  EXPECT_EQ(a.rope.betaFast, b.rope.betaFast);
  EXPECT_EQ(a.rope.betaSlow, b.rope.betaSlow);
  EXPECT_EQ(a.rope.mscale, b.rope.mscale);
  EXPECT_EQ(a.rope.mscaleAllDim, b.rope.mscaleAllDim);
  EXPECT_EQ(a.rope.originalMaxPositions, b.rope.originalMaxPositions);
  EXPECT_EQ(a.rope.truncate, b.rope.truncate);
  EXPECT_EQ(a.rope.attentionFactor, b.rope.attentionFactor);
  EXPECT_EQ(a.tieWordEmbeddings, b.tieWordEmbeddings);
  EXPECT_EQ(a.attentionBias, b.attentionBias);
  EXPECT_EQ(a.maxPositions, b.maxPositions);
  EXPECT_EQ(a.layerIsMoE, b.layerIsMoE);
  EXPECT_EQ(a.layerWindow, b.layerWindow);
  EXPECT_EQ(a.qLoraRank, b.qLoraRank);
  EXPECT_EQ(a.kvLoraRank, b.kvLoraRank);
  EXPECT_EQ(a.qkNopeHeadDim, b.qkNopeHeadDim);
  EXPECT_EQ(a.qkRopeHeadDim, b.qkRopeHeadDim);
  EXPECT_EQ(a.vHeadDim, b.vHeadDim);
  EXPECT_EQ(a.ropeInterleave, b.ropeInterleave);
  EXPECT_EQ(a.numGroups, b.numGroups);
  EXPECT_EQ(a.topKGroups, b.topKGroups);
  EXPECT_EQ(a.numSharedExperts, b.numSharedExperts);
  EXPECT_EQ(a.routedScalingFactor, b.routedScalingFactor);
  EXPECT_EQ(a.swigluLimit, b.swigluLimit);
  EXPECT_EQ(a.quantization, b.quantization);
  EXPECT_EQ(a.fp8BlockSize, b.fp8BlockSize);
}

//===----------------------------------------------------------------------===//
// The published configs (v4) and their v5 spellings
//===----------------------------------------------------------------------===//

// Qwen/Qwen3-30B-A3B, config.json (transformers 4.51).
const char *kQwen3V4 = R"({
  "architectures": ["Qwen3MoeForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 151643, "decoder_sparse_step": 1, "eos_token_id": 151645, "head_dim": 128,
  "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02,
  "intermediate_size": 6144, "max_position_embeddings": 40960, "max_window_layers": 48,
  "mlp_only_layers": [], "model_type": "qwen3_moe", "moe_intermediate_size": 768,
  "norm_topk_prob": true, "num_attention_heads": 32, "num_experts": 128,
  "num_experts_per_tok": 8, "num_hidden_layers": 48, "num_key_value_heads": 4,
  "output_router_logits": false, "rms_norm_eps": 1e-06, "rope_scaling": null,
  "rope_theta": 1000000.0, "router_aux_loss_coef": 0.001, "sliding_window": null,
  "tie_word_embeddings": false, "torch_dtype": "bfloat16", "transformers_version": "4.51.0",
  "use_cache": true, "use_sliding_window": false, "vocab_size": 151936})";

// The same model as transformers 5 saves it: rope_parameters, dtype, and
// num_experts under its attribute_map name.
const char *kQwen3V5 = R"({
  "architectures": ["Qwen3MoeForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 151643, "decoder_sparse_step": 1, "dtype": "bfloat16", "eos_token_id": 151645,
  "head_dim": 128, "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02,
  "intermediate_size": 6144, "max_position_embeddings": 40960, "max_window_layers": 48,
  "mlp_only_layers": [], "model_type": "qwen3_moe", "moe_intermediate_size": 768,
  "norm_topk_prob": true, "num_attention_heads": 32, "num_experts_per_tok": 8,
  "num_hidden_layers": 48, "num_key_value_heads": 4, "num_local_experts": 128,
  "output_router_logits": false, "pad_token_id": null, "rms_norm_eps": 1e-06,
  "rope_parameters": {"rope_theta": 1000000.0, "rope_type": "default"},
  "router_aux_loss_coef": 0.001, "sliding_window": null, "tie_word_embeddings": false,
  "transformers_version": "5.17.0", "use_cache": true, "use_sliding_window": false,
  "vocab_size": 151936})";

// mistralai/Mixtral-8x7B-v0.1, config.json (transformers 4.36).
const char *kMixtralV4 = R"({
  "architectures": ["MixtralForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 1,
  "eos_token_id": 2, "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
  "intermediate_size": 14336, "max_position_embeddings": 32768, "model_type": "mixtral",
  "num_attention_heads": 32, "num_experts_per_tok": 2, "num_hidden_layers": 32,
  "num_key_value_heads": 8, "num_local_experts": 8, "output_router_logits": false,
  "rms_norm_eps": 1e-05, "rope_theta": 1000000.0, "router_aux_loss_coef": 0.02,
  "sliding_window": null, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
  "transformers_version": "4.36.0.dev0", "use_cache": true, "vocab_size": 32000})";

const char *kMixtralV5 = R"({
  "architectures": ["MixtralForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 1,
  "dtype": "bfloat16", "eos_token_id": 2, "head_dim": null, "hidden_act": "silu",
  "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336,
  "max_position_embeddings": 32768, "model_type": "mixtral", "num_attention_heads": 32,
  "num_experts_per_tok": 2, "num_hidden_layers": 32, "num_key_value_heads": 8,
  "num_local_experts": 8, "output_router_logits": false, "pad_token_id": null,
  "rms_norm_eps": 1e-05, "rope_parameters": {"rope_theta": 1000000.0, "rope_type": "default"},
  "router_aux_loss_coef": 0.02, "router_jitter_noise": 0.0, "sliding_window": null,
  "tie_word_embeddings": false, "transformers_version": "5.17.0", "use_cache": true,
  "vocab_size": 32000})";

// openai/gpt-oss-120b, config.json (transformers 4.55; the experts ship as
// MXFP4).
const char *kGptOssV4 = R"({
  "architectures": ["GptOssForCausalLM"], "attention_bias": true, "attention_dropout": 0.0,
  "eos_token_id": 200002, "experts_per_token": 4, "head_dim": 64, "hidden_act": "silu",
  "hidden_size": 2880, "initial_context_length": 4096, "initializer_range": 0.02,
  "intermediate_size": 2880,
  "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "full_attention",
    "sliding_attention", "full_attention", "sliding_attention", "full_attention",
    "sliding_attention", "full_attention", "sliding_attention", "full_attention",
    "sliding_attention", "full_attention", "sliding_attention", "full_attention",
    "sliding_attention", "full_attention", "sliding_attention", "full_attention",
    "sliding_attention", "full_attention", "sliding_attention", "full_attention",
    "sliding_attention", "full_attention", "sliding_attention", "full_attention",
    "sliding_attention", "full_attention", "sliding_attention", "full_attention",
    "sliding_attention", "full_attention", "sliding_attention", "full_attention"],
  "max_position_embeddings": 131072, "model_type": "gpt_oss", "num_attention_heads": 64,
  "num_experts_per_tok": 4, "num_hidden_layers": 36, "num_key_value_heads": 8,
  "num_local_experts": 128, "output_router_logits": false, "pad_token_id": 199999,
  "quantization_config": {"modules_to_not_convert": ["model.layers.*.self_attn",
    "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"], "quant_method": "mxfp4"},
  "rms_norm_eps": 1e-05,
  "rope_scaling": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 32.0,
    "original_max_position_embeddings": 4096, "rope_type": "yarn", "truncate": false},
  "rope_theta": 150000, "router_aux_loss_coef": 0.9, "sliding_window": 128,
  "swiglu_limit": 7.0, "tie_word_embeddings": false, "transformers_version": "4.55.0.dev0",
  "use_cache": true, "vocab_size": 201088})";

// v5: rope_parameters with the theta inside; layer_types left to the default
// (sliding first, alternating), which is the published list.
const char *kGptOssV5 = R"({
  "architectures": ["GptOssForCausalLM"], "attention_bias": true, "attention_dropout": 0.0,
  "dtype": "bfloat16", "eos_token_id": 200002, "head_dim": 64, "hidden_act": "silu",
  "hidden_size": 2880, "initializer_range": 0.02, "intermediate_size": 2880,
  "max_position_embeddings": 131072, "model_type": "gpt_oss", "num_attention_heads": 64,
  "num_experts_per_tok": 4, "num_hidden_layers": 36, "num_key_value_heads": 8,
  "num_local_experts": 128, "output_router_logits": false, "pad_token_id": 199999,
  "quantization_config": {"modules_to_not_convert": ["model.layers.*.self_attn",
    "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"], "quant_method": "mxfp4"},
  "rms_norm_eps": 1e-05,
  "rope_parameters": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 32.0,
    "original_max_position_embeddings": 4096, "rope_theta": 150000.0, "rope_type": "yarn",
    "truncate": false},
  "router_aux_loss_coef": 0.9, "sliding_window": 128, "swiglu_alpha": 1.702,
  "swiglu_limit": 7.0, "tie_word_embeddings": false, "transformers_version": "5.17.0",
  "use_cache": true, "vocab_size": 201088})";

// deepseek-ai/DeepSeek-V3, config.json (FP8 e4m3, 128×128 blocks).
const char *kDeepseekV4 = R"({
  "architectures": ["DeepseekV3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "auto_map": {"AutoConfig": "configuration_deepseek.DeepseekV3Config",
    "AutoModel": "modeling_deepseek.DeepseekV3Model",
    "AutoModelForCausalLM": "modeling_deepseek.DeepseekV3ForCausalLM"},
  "aux_loss_alpha": 0.001, "bos_token_id": 0, "eos_token_id": 1, "ep_size": 1,
  "first_k_dense_replace": 3, "hidden_act": "silu", "hidden_size": 7168,
  "initializer_range": 0.02, "intermediate_size": 18432, "kv_lora_rank": 512,
  "max_position_embeddings": 163840, "model_type": "deepseek_v3", "moe_intermediate_size": 2048,
  "moe_layer_freq": 1, "n_group": 8, "n_routed_experts": 256, "n_shared_experts": 1,
  "norm_topk_prob": true, "num_attention_heads": 128, "num_experts_per_tok": 8,
  "num_hidden_layers": 61, "num_key_value_heads": 128, "num_nextn_predict_layers": 1,
  "pretraining_tp": 1, "q_lora_rank": 1536, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
  "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
    "weight_block_size": [128, 128]},
  "rms_norm_eps": 1e-06,
  "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 1.0,
    "mscale_all_dim": 1.0, "original_max_position_embeddings": 4096, "type": "yarn"},
  "rope_theta": 10000, "routed_scaling_factor": 2.5, "scoring_func": "sigmoid", "seq_aux": true,
  "tie_word_embeddings": false, "topk_group": 4, "topk_method": "noaux_tc",
  "torch_dtype": "bfloat16", "transformers_version": "4.33.1", "use_cache": true,
  "v_head_dim": 128, "vocab_size": 129280})";

// v5: rope_parameters (with both type spellings, as 4.57+ writes them),
// qk_head_dim and head_dim (= qk_rope_head_dim), rope_interleave.
const char *kDeepseekV5 = R"({
  "architectures": ["DeepseekV3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 0, "dtype": "bfloat16", "eos_token_id": 1, "first_k_dense_replace": 3,
  "head_dim": 64, "hidden_act": "silu", "hidden_size": 7168, "initializer_range": 0.02,
  "intermediate_size": 18432, "kv_lora_rank": 512, "max_position_embeddings": 163840,
  "model_type": "deepseek_v3", "moe_intermediate_size": 2048, "n_group": 8,
  "n_routed_experts": 256, "n_shared_experts": 1, "norm_topk_prob": true,
  "num_attention_heads": 128, "num_experts_per_tok": 8, "num_hidden_layers": 61,
  "num_key_value_heads": 128, "num_nextn_predict_layers": 1, "pad_token_id": null,
  "pretraining_tp": 1, "q_lora_rank": 1536, "qk_head_dim": 192, "qk_nope_head_dim": 128,
  "qk_rope_head_dim": 64,
  "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
    "weight_block_size": [128, 128]},
  "rms_norm_eps": 1e-06, "rope_interleave": true,
  "rope_parameters": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 40.0, "mscale": 1.0,
    "mscale_all_dim": 1.0, "original_max_position_embeddings": 4096, "rope_theta": 10000.0,
    "rope_type": "yarn", "type": "yarn"},
  "routed_scaling_factor": 2.5, "scoring_func": "sigmoid", "tie_word_embeddings": false,
  "topk_group": 4, "topk_method": "noaux_tc", "transformers_version": "5.17.0",
  "use_cache": true, "v_head_dim": 128, "vocab_size": 129280})";

TEST(Config, Qwen3_30B_A3B) {
  ModelConfig c = parseOk(kQwen3V4);
  EXPECT_EQ(c.family, Family::Qwen3Moe);
  EXPECT_EQ(c.vocabSize, 151936);
  EXPECT_EQ(c.hiddenSize, 2048);
  EXPECT_EQ(c.numLayers, 48);
  EXPECT_EQ(c.numHeads, 32);
  EXPECT_EQ(c.numKVHeads, 4);
  EXPECT_EQ(c.headDim, 128); // not hidden / heads
  EXPECT_EQ(c.rmsNormEps, 1e-6);
  EXPECT_EQ(c.intermediateSize, 6144);
  EXPECT_EQ(c.moeIntermediateSize, 768);
  EXPECT_EQ(c.numExperts, 128);
  EXPECT_EQ(c.topK, 8);
  EXPECT_TRUE(c.normTopKProb);
  EXPECT_EQ(c.rope.kind, RopeConfig::Default);
  EXPECT_EQ(c.rope.theta, 1e6);
  EXPECT_FALSE(c.tieWordEmbeddings);
  EXPECT_FALSE(c.attentionBias);
  EXPECT_EQ(c.maxPositions, 40960);
  EXPECT_EQ(c.layerIsMoE, std::vector<bool>(48, true));
  EXPECT_EQ(c.layerWindow, std::vector<int64_t>(48, 0));
  EXPECT_FALSE(c.quantization);
  expectSame(c, parseOk(kQwen3V5));
}

TEST(Config, Mixtral_8x7B) {
  ModelConfig c = parseOk(kMixtralV4);
  EXPECT_EQ(c.family, Family::Mixtral);
  EXPECT_EQ(c.vocabSize, 32000);
  EXPECT_EQ(c.hiddenSize, 4096);
  EXPECT_EQ(c.numLayers, 32);
  EXPECT_EQ(c.numKVHeads, 8);
  EXPECT_EQ(c.headDim, 128);
  EXPECT_EQ(c.intermediateSize, 0);
  EXPECT_EQ(c.moeIntermediateSize, 14336);
  EXPECT_EQ(c.numExperts, 8);
  EXPECT_EQ(c.topK, 2);
  EXPECT_TRUE(c.normTopKProb);
  EXPECT_EQ(c.rope.theta, 1e6);
  EXPECT_EQ(c.rmsNormEps, 1e-5);
  EXPECT_EQ(c.maxPositions, 32768);
  EXPECT_EQ(c.layerIsMoE, std::vector<bool>(32, true));
  EXPECT_EQ(c.layerWindow, std::vector<int64_t>(32, 0));
  expectSame(c, parseOk(kMixtralV5));
}

TEST(Config, GptOss_120B) {
  ModelConfig c = parseOk(kGptOssV4);
  EXPECT_EQ(c.family, Family::GptOss);
  EXPECT_EQ(c.vocabSize, 201088);
  EXPECT_EQ(c.hiddenSize, 2880);
  EXPECT_EQ(c.numLayers, 36);
  EXPECT_EQ(c.numHeads, 64);
  EXPECT_EQ(c.numKVHeads, 8);
  EXPECT_EQ(c.headDim, 64);
  EXPECT_EQ(c.moeIntermediateSize, 2880);
  EXPECT_EQ(c.numExperts, 128);
  EXPECT_EQ(c.topK, 4);
  EXPECT_TRUE(c.attentionBias);
  EXPECT_EQ(c.swigluLimit, 7.0);
  EXPECT_EQ(c.rope.kind, RopeConfig::Yarn);
  EXPECT_EQ(c.rope.theta, 150000);
  EXPECT_EQ(c.rope.factor, 32);
  EXPECT_EQ(c.rope.betaFast, 32);
  EXPECT_EQ(c.rope.betaSlow, 1);
  EXPECT_EQ(c.rope.originalMaxPositions, 4096);
  EXPECT_FALSE(c.rope.truncate);
  EXPECT_FALSE(c.rope.attentionFactor);
  EXPECT_EQ(c.quantization, std::optional<std::string>("mxfp4"));
  EXPECT_TRUE(c.fp8BlockSize.empty());
  ASSERT_EQ(c.layerWindow.size(), 36u);
  for (int64_t layer = 0; layer < 36; ++layer)
    EXPECT_EQ(c.layerWindow[layer], layer % 2 == 0 ? 128 : 0) << layer;
  expectSame(c, parseOk(kGptOssV5));

  // Without any rope key: GptOssConfig's own YaRN default, the same.
  llvm::json::Object bare = parseObject(kGptOssV4);
  bare.erase("rope_scaling");
  bare.erase("rope_theta");
  llvm::Expected<ModelConfig> defaulted = parseConfig(bare);
  ASSERT_TRUE(bool(defaulted)) << llvm::toString(defaulted.takeError());
  expectSame(c, *defaulted);
}

TEST(Config, DeepseekV3) {
  ModelConfig c = parseOk(kDeepseekV4);
  EXPECT_EQ(c.family, Family::DeepseekV3);
  EXPECT_EQ(c.vocabSize, 129280);
  EXPECT_EQ(c.hiddenSize, 7168);
  EXPECT_EQ(c.numLayers, 61);
  EXPECT_EQ(c.numHeads, 128);
  EXPECT_EQ(c.numKVHeads, 128);
  EXPECT_EQ(c.headDim, 192);
  EXPECT_EQ(c.intermediateSize, 18432);
  EXPECT_EQ(c.moeIntermediateSize, 2048);
  EXPECT_EQ(c.numExperts, 256);
  EXPECT_EQ(c.topK, 8);
  EXPECT_TRUE(c.normTopKProb);
  EXPECT_EQ(c.qLoraRank, std::optional<int64_t>(1536));
  EXPECT_EQ(c.kvLoraRank, 512);
  EXPECT_EQ(c.qkNopeHeadDim, 128);
  EXPECT_EQ(c.qkRopeHeadDim, 64);
  EXPECT_EQ(c.vHeadDim, 128);
  EXPECT_TRUE(c.ropeInterleave);
  EXPECT_EQ(c.numGroups, 8);
  EXPECT_EQ(c.topKGroups, 4);
  EXPECT_EQ(c.numSharedExperts, 1);
  EXPECT_EQ(c.routedScalingFactor, 2.5);
  EXPECT_EQ(c.rope.kind, RopeConfig::Yarn);
  EXPECT_EQ(c.rope.theta, 10000);
  EXPECT_EQ(c.rope.factor, 40);
  EXPECT_EQ(c.rope.mscale, 1.0);
  EXPECT_EQ(c.rope.mscaleAllDim, 1.0);
  EXPECT_EQ(c.rope.originalMaxPositions, 4096);
  EXPECT_TRUE(c.rope.truncate);
  EXPECT_EQ(c.maxPositions, 163840);
  EXPECT_EQ(c.quantization, std::optional<std::string>("fp8"));
  EXPECT_EQ(c.fp8BlockSize, (std::vector<int64_t>{128, 128}));
  ASSERT_EQ(c.layerIsMoE.size(), 61u);
  for (int64_t layer = 0; layer < 61; ++layer)
    EXPECT_EQ(c.layerIsMoE[layer], layer >= 3) << layer;
  EXPECT_EQ(c.layerWindow, std::vector<int64_t>(61, 0));
  expectSame(c, parseOk(kDeepseekV5));
}

//===----------------------------------------------------------------------===//
// Spellings and derived values
//===----------------------------------------------------------------------===//

// A small Qwen3 config to edit.
const char *kSmallQwen3 = R"({
  "model_type": "qwen3_moe", "vocab_size": 64, "hidden_size": 64, "intermediate_size": 96,
  "moe_intermediate_size": 40, "num_hidden_layers": 4, "num_attention_heads": 4,
  "num_key_value_heads": 2, "num_experts": 8, "num_experts_per_tok": 2,
  "rms_norm_eps": 1e-6, "max_position_embeddings": 128})";

TEST(Config, DerivedDefaults) {
  llvm::json::Object object = edited(kSmallQwen3, "num_key_value_heads", "<remove>");
  llvm::Expected<ModelConfig> c = parseConfig(object);
  ASSERT_TRUE(bool(c)) << llvm::toString(c.takeError());
  EXPECT_EQ(c->numKVHeads, 4); // num_attention_heads
  EXPECT_EQ(c->headDim, 16);   // hidden_size / num_attention_heads
  EXPECT_FALSE(c->normTopKProb);
  EXPECT_EQ(c->rope.theta, 10000);
  EXPECT_EQ(c->layerIsMoE, std::vector<bool>(4, true));
  // null counts as missing.
  llvm::Expected<ModelConfig> nulled =
      parseConfig(edited(kSmallQwen3, "num_key_value_heads", "null"));
  ASSERT_TRUE(bool(nulled));
  EXPECT_EQ(nulled->numKVHeads, 4);
}

TEST(Config, QwenLayerSelection) {
  llvm::json::Object object = edited(kSmallQwen3, "mlp_only_layers", "[0, 2]");
  ModelConfig c = *parseConfig(object);
  EXPECT_EQ(c.layerIsMoE, (std::vector<bool>{false, true, false, true}));
  object = edited(kSmallQwen3, "decoder_sparse_step", "2");
  c = *parseConfig(object);
  EXPECT_EQ(c.layerIsMoE, (std::vector<bool>{false, true, false, true}));
  object["mlp_only_layers"] = llvm::json::Array{3};
  c = *parseConfig(object);
  EXPECT_EQ(c.layerIsMoE, (std::vector<bool>{false, true, false, false}));
}

TEST(Config, QwenSlidingWindow) {
  llvm::json::Object object = edited(kSmallQwen3, "sliding_window", "16");
  // Without use_sliding_window the window is off (Qwen3MoeConfig).
  EXPECT_EQ(parseConfig(object)->layerWindow, std::vector<int64_t>(4, 0));
  object["use_sliding_window"] = true;
  EXPECT_EQ(parseConfig(object)->layerWindow, std::vector<int64_t>(4, 16));
  object["max_window_layers"] = 2;
  EXPECT_EQ(parseConfig(object)->layerWindow, (std::vector<int64_t>{0, 0, 16, 16}));
  object["sliding_window"] = nullptr;
  EXPECT_EQ(parseConfig(object)->layerWindow, std::vector<int64_t>(4, 0));
}

TEST(Config, MixtralSlidingWindow) {
  llvm::json::Object object = edited(kMixtralV4, "sliding_window", "4096");
  EXPECT_EQ(parseConfig(object)->layerWindow, std::vector<int64_t>(32, 4096));
  object.erase("sliding_window");
  EXPECT_EQ(parseConfig(object)->layerWindow, std::vector<int64_t>(32, 0));
}

TEST(Config, DeepseekLayerSelectionAndGroups) {
  llvm::json::Object object = edited(kDeepseekV4, "first_k_dense_replace", "0");
  object["moe_layer_freq"] = 2;
  ModelConfig c = *parseConfig(object);
  for (int64_t layer = 0; layer < 61; ++layer)
    EXPECT_EQ(c.layerIsMoE[layer], layer % 2 == 0) << layer;
  // q_lora_rank null: no low-rank query (DeepSeek-V2-Lite style).
  object["q_lora_rank"] = nullptr;
  EXPECT_FALSE(parseConfig(object)->qLoraRank);
  // num_local_experts is n_routed_experts' alias.
  object.erase("n_routed_experts");
  object["num_local_experts"] = 256;
  EXPECT_EQ(parseConfig(object)->numExperts, 256);
}

TEST(Config, YarnDefaultsAndAttentionFactor) {
  llvm::json::Object object = edited(
      kSmallQwen3, "rope_parameters",
      R"({"rope_type": "yarn", "factor": 4, "rope_theta": 500000, "attention_factor": 0.9})");
  ModelConfig c = *parseConfig(object);
  EXPECT_EQ(c.rope.kind, RopeConfig::Yarn);
  EXPECT_EQ(c.rope.theta, 500000);
  EXPECT_EQ(c.rope.factor, 4);
  EXPECT_EQ(c.rope.betaFast, 32);
  EXPECT_EQ(c.rope.betaSlow, 1);
  EXPECT_EQ(c.rope.mscale, 1);
  EXPECT_EQ(c.rope.mscaleAllDim, 0);
  EXPECT_EQ(c.rope.originalMaxPositions, 128); // max_position_embeddings
  EXPECT_TRUE(c.rope.truncate);
  EXPECT_EQ(c.rope.attentionFactor, std::optional<double>(0.9));
  // The same in v4 spelling, theta outside.
  llvm::json::Object v4 = edited(kSmallQwen3, "rope_scaling",
                                 R"({"type": "yarn", "factor": 4, "attention_factor": 0.9})");
  v4["rope_theta"] = 500000;
  expectSame(c, *parseConfig(v4));
  // Both spellings, equal: accepted.
  object["rope_scaling"] = *object.get("rope_parameters");
  expectSame(c, *parseConfig(object));
}

TEST(Config, KeyTablesAreDisjoint) {
  for (Family family : {Family::Qwen3Moe, Family::Mixtral, Family::GptOss, Family::DeepseekV3}) {
    std::vector<llvm::StringRef> understood = understoodKeys(family);
    std::set<llvm::StringRef> harmless;
    for (llvm::StringRef key : harmlessKeys(family))
      EXPECT_TRUE(harmless.insert(key).second) << key.str() << " twice";
    std::set<llvm::StringRef> seen;
    for (llvm::StringRef key : understood) {
      EXPECT_TRUE(seen.insert(key).second) << key.str() << " twice";
      EXPECT_FALSE(harmless.count(key)) << key.str() << " both understood and harmless";
    }
  }
}

//===----------------------------------------------------------------------===//
// Errors, each naming the key
//===----------------------------------------------------------------------===//

struct ErrorCase {
  const char *base;
  const char *key;
  const char *value; // JSON, or "<remove>"
  const char *expected;
};

TEST(Config, Errors) {
  ErrorCase cases[] = {
      // model_type.
      {kSmallQwen3, "model_type", "\"llama\"",
       "config.json: unknown model_type 'llama' (qwen3_moe, mixtral, gpt_oss, deepseek_v3)"},
      {kSmallQwen3, "model_type", "<remove>", "config.json: missing required key 'model_type'"},
      {kSmallQwen3, "model_type", "3", "key 'model_type': expected a string, got a number"},
      // Unknown keys, a family's harmless keys included elsewhere.
      {kSmallQwen3, "foo", "1", "config.json: unknown key 'foo' for qwen3_moe"},
      {kSmallQwen3, "router_jitter_noise", "0.0",
       "config.json: unknown key 'router_jitter_noise' for qwen3_moe"},
      {kMixtralV4, "attention_bias", "false", "unknown key 'attention_bias' for mixtral"},
      {kMixtralV4, "moe_intermediate_size", "10",
       "unknown key 'moe_intermediate_size' for mixtral"},
      {kDeepseekV4, "sliding_window", "4", "unknown key 'sliding_window' for deepseek_v3"},
      {kGptOssV4, "rope_ntk_alpha", "1", "unknown key 'rope_ntk_alpha' for gpt_oss"},
      // Missing required keys.
      {kSmallQwen3, "hidden_size", "<remove>", "missing required key 'hidden_size' for qwen3_moe"},
      {kSmallQwen3, "vocab_size", "null", "missing required key 'vocab_size' for qwen3_moe"},
      {kSmallQwen3, "num_experts", "<remove>",
       "missing required key 'num_experts' (or 'num_local_experts') for qwen3_moe"},
      {kGptOssV4, "num_experts_per_tok", "<remove>", "<no error>"}, // experts_per_token remains
      {kMixtralV4, "intermediate_size", "<remove>",
       "missing required key 'intermediate_size' for mixtral"},
      {kMixtralV4, "rms_norm_eps", "<remove>", "missing required key 'rms_norm_eps' for mixtral"},
      {kMixtralV4, "max_position_embeddings", "<remove>",
       "missing required key 'max_position_embeddings' for mixtral"},
      {kDeepseekV4, "kv_lora_rank", "<remove>",
       "missing required key 'kv_lora_rank' for deepseek_v3"},
      {kDeepseekV4, "q_lora_rank", "<remove>",
       "missing required key 'q_lora_rank' for deepseek_v3"},
      {kSmallQwen3, "rope_scaling", R"({"type": "yarn"})",
       "missing required key 'rope_scaling.factor' for qwen3_moe"},
      {kDeepseekV4, "quantization_config", R"({"weight_block_size": [128, 128]})",
       "missing required key 'quantization_config.quant_method' for deepseek_v3"},
      // Wrong types.
      {kSmallQwen3, "hidden_size", "\"64\"",
       "key 'hidden_size': expected an integer, got a string"},
      {kSmallQwen3, "hidden_size", "64.5", "key 'hidden_size': expected an integer, got a number"},
      {kSmallQwen3, "rms_norm_eps", "\"1e-6\"",
       "key 'rms_norm_eps': expected a finite number, got a string"},
      {kSmallQwen3, "norm_topk_prob", "1", "key 'norm_topk_prob': expected true or false"},
      {kSmallQwen3, "mlp_only_layers", "3", "key 'mlp_only_layers': expected an array"},
      {kSmallQwen3, "rope_parameters", "[]", "key 'rope_parameters': expected an object"},
      {kSmallQwen3, "hidden_act", "1", "key 'hidden_act': expected a string, got a number"},
      {kGptOssV4, "layer_types", "\"sliding\"", "key 'layer_types': expected an array"},
      {kDeepseekV4, "quantization_config", "\"fp8\"",
       "key 'quantization_config': expected an object, got a string"},
      // Impossible values.
      {kSmallQwen3, "hidden_size", "0", "key 'hidden_size': must be at least 1, got 0"},
      {kSmallQwen3, "num_hidden_layers", "-2", "key 'num_hidden_layers': must be at least 1"},
      {kSmallQwen3, "num_hidden_layers", "100000000", "key 'num_hidden_layers': 100000000 exceeds"},
      {kSmallQwen3, "num_key_value_heads", "3",
       "key 'num_key_value_heads': 4 attention heads are not divisible into 3 key/value heads"},
      {kSmallQwen3, "num_experts_per_tok", "9",
       "key 'num_experts_per_tok': 9 exceeds the 8 experts"},
      {kSmallQwen3, "num_local_experts", "16",
       "key 'num_local_experts': 16 disagrees with 'num_experts' (8)"},
      {kSmallQwen3, "rms_norm_eps", "-1e-6", "key 'rms_norm_eps': must be positive"},
      {kSmallQwen3, "mlp_only_layers", "[1, 4]",
       "key 'mlp_only_layers': entry 1 is not a layer index (0 to 3)"},
      {kSmallQwen3, "decoder_sparse_step", "0", "key 'decoder_sparse_step': must be at least 1"},
      {kSmallQwen3, "sliding_window", "0", "key 'sliding_window': must be at least 1"},
      {kSmallQwen3, "head_dim", "0", "key 'head_dim': must be at least 1"},
      {kSmallQwen3, "rope_theta", "0", "key 'rope_theta': must be positive"},
      {kSmallQwen3, "rope_scaling", R"({"type": "yarn", "factor": 0.5})",
       "key 'rope_scaling.factor': must be at least 1, got 0.5"},
      {kQwen3V4, "rope_parameters", R"({"rope_type": "default", "rope_theta": 5})",
       "key 'rope_parameters.rope_theta': 5 disagrees with 'rope_theta'"},
      {kGptOssV4, "layer_types", R"(["full_attention"])",
       "key 'layer_types': has 1 entries for 36 layers"},
      {kGptOssV4, "sliding_window", "null",
       "key 'layer_types': layer 0 is sliding_attention, but sliding_window is null"},
      {kDeepseekV4, "n_group", "3", "key 'n_group': 256 experts do not split into 3 groups"},
      {kDeepseekV4, "n_group", "256", "key 'n_group': 256 groups of 1 experts"},
      {kDeepseekV4, "topk_group", "9", "key 'topk_group': 9 exceeds n_group (8)"},
      {kDeepseekV4, "num_key_value_heads", "16",
       "key 'num_key_value_heads': MLA has one key/value head per attention head (128), got 16"},
      {kDeepseekV4, "head_dim", "128", "key 'head_dim': 128 is not qk_rope_head_dim (64)"},
      {kDeepseekV4, "qk_head_dim", "128",
       "key 'qk_head_dim': 128 is not qk_nope_head_dim + qk_rope_head_dim (192)"},
      {kDeepseekV4, "qk_rope_head_dim", "63", "key 'qk_rope_head_dim': must be even"},
      {kDeepseekV4, "quantization_config", R"({"quant_method": "fp8", "weight_block_size": [128]})",
       "key 'quantization_config.weight_block_size': expected two block sizes"},
      // Unsupported values.
      {kSmallQwen3, "rope_scaling", R"({"rope_type": "llama3", "factor": 8})",
       "key 'rope_scaling.rope_type': unsupported rope type 'llama3' (default, yarn)"},
      {kSmallQwen3, "rope_scaling", R"({"type": "linear", "factor": 2})",
       "key 'rope_scaling.type': unsupported rope type 'linear'"},
      {kSmallQwen3, "rope_parameters", R"({"rope_type": "dynamic", "factor": 2})",
       "key 'rope_parameters.rope_type': unsupported rope type 'dynamic'"},
      {kSmallQwen3, "rope_parameters", R"({"rope_type": "yarn", "type": "linear", "factor": 2})",
       "key 'rope_parameters.type': 'linear' disagrees with 'rope_type' ('yarn')"},
      {kSmallQwen3, "rope_parameters", R"({"rope_type": "default", "factor": 2})",
       "key 'rope_parameters.factor': not used by rope type 'default'"},
      {kSmallQwen3, "rope_parameters",
       R"({"rope_type": "yarn", "factor": 2, "low_freq_factor": 1})",
       "unknown key 'rope_parameters.low_freq_factor' for qwen3_moe"},
      {kSmallQwen3, "rope_parameters", R"({"rope_type": "default", "partial_rotary_factor": 0.5})",
       "key 'rope_parameters.partial_rotary_factor': unsupported 0.5"},
      {kSmallQwen3, "hidden_act", "\"gelu\"", "key 'hidden_act': unsupported activation 'gelu'"},
      {kSmallQwen3, "per_layer_config", R"({"0": {"hidden_size": 8}})",
       "key 'per_layer_config': per-layer overrides are not supported"},
      {kDeepseekV4, "scoring_func", "\"softmax\"",
       "key 'scoring_func': unsupported 'softmax' (sigmoid)"},
      {kDeepseekV4, "topk_method", "\"greedy\"", "key 'topk_method': unsupported 'greedy'"},
      {kDeepseekV4, "quantization_config", R"({"quant_method": "awq", "bits": 4})",
       "key 'quantization_config.quant_method': unsupported quantization method 'awq'"},
      {kDeepseekV4, "quantization_config", R"({"quant_method": "fp8"})",
       "key 'quantization_config.weight_block_size': missing: only blockwise FP8 is supported"},
      {kDeepseekV4, "quantization_config",
       R"({"quant_method": "fp8", "weight_block_size": [128, 128], "activation_scheme": "static"})",
       "key 'quantization_config.activation_scheme': unsupported 'static'"},
      {kDeepseekV4, "quantization_config",
       R"({"quant_method": "fp8", "weight_block_size": [128, 128], "fmt": "e5m2"})",
       "key 'quantization_config.fmt': unsupported FP8 format 'e5m2'"},
      {kDeepseekV4, "quantization_config",
       R"({"quant_method": "fp8", "weight_block_size": [128, 128], "bits": 8})",
       "unknown key 'quantization_config.bits' for fp8 quantization"},
      {kDeepseekV4, "quantization_config", R"({"quant_method": "mxfp4"})",
       "unsupported quantization method 'mxfp4'"},
      {kGptOssV4, "swiglu_alpha", "1.5", "key 'swiglu_alpha': unsupported 1.5"},
      {kGptOssV4, "layer_types", R"(["sliding_attention", "chunked_attention"])",
       "key 'layer_types': has 2 entries for 36 layers"},
  };
  for (const ErrorCase &c : cases) {
    std::string message = parseError(edited(c.base, c.key, c.value));
    EXPECT_HAS(message, c.expected) << " (" << c.key << " = " << c.value << ")";
    if (std::string(c.expected) != "<no error>") {
      EXPECT_EQ(message.rfind("config.json: ", 0), 0u) << message;
    }
  }
}

TEST(Config, TooFewExpertsInSelectedGroups) {
  llvm::json::Object object = parseObject(kDeepseekV4);
  object["n_group"] = 64; // 4 experts a group
  object["topk_group"] = 1;
  std::string message = parseError(object);
  EXPECT_HAS(message, "config.json: key 'num_experts_per_tok': 8 exceeds the 4 experts of the "
                      "topk_group (1) selected groups");
  object["topk_group"] = 2;
  EXPECT_EQ(parseError(object), "<no error>");
}

TEST(Config, UnsupportedLayerType) {
  llvm::json::Object object = parseObject(kGptOssV4);
  object["num_hidden_layers"] = 2;
  object["layer_types"] = llvm::json::Array{"sliding_attention", "chunked_attention"};
  std::string message = parseError(object);
  EXPECT_HAS(message, "key 'layer_types': entry 1: unsupported layer type");
}

TEST(Config, NotJsonObjectsInside) {
  // Deeply wrong values never crash: every key of the big configs replaced by
  // each kind of JSON value gives an answer.
  const char *values[] = {"null", "true", "-1", "0", "1e308", "\"x\"", "[]", "{}", "[1, \"a\"]"};
  for (const char *base : {kQwen3V4, kMixtralV4, kGptOssV4, kDeepseekV4, kDeepseekV5}) {
    llvm::json::Object object = parseObject(base);
    for (const auto &entry : object)
      for (const char *value : values)
        (void)parseError(edited(base, entry.first, value));
  }
}

//===----------------------------------------------------------------------===//
// The fixtures' configs (test/fixtures/models/*/checkpoint*/config.json)
//===----------------------------------------------------------------------===//

/// Reads dir/config.json; nullopt (after a failure) where it does not parse.
std::optional<ModelConfig> readFixtureConfig(llvm::StringRef dir) {
  llvm::SmallString<256> path(dir);
  llvm::sys::path::append(path, "config.json");
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer) {
    ADD_FAILURE() << path.str().str() << ": " << buffer.getError().message();
    return std::nullopt;
  }
  llvm::Expected<ModelConfig> config = parseConfig(parseObject((*buffer)->getBuffer()));
  if (!config) {
    ADD_FAILURE() << path.str().str() << ": " << llvm::toString(config.takeError());
    return std::nullopt;
  }
  return *config;
}

TEST(Config, Fixtures) {
  std::vector<std::string> dirs = test::fixtureCheckpoints();
  if (dirs.empty())
    GTEST_SKIP() << "no checkpoints under test/fixtures/models";
  for (const std::string &dir : dirs)
    EXPECT_TRUE(readFixtureConfig(dir)) << dir;
}

/// A model's checkpoint (transformers 5) and checkpoint-v4 (4.57) describe one
/// model: the same ModelConfig.
TEST(Config, FixturesV4AndV5Agree) {
  int compared = 0;
  for (const std::string &dir : test::fixtureCheckpoints()) {
    if (llvm::sys::path::filename(dir) != "checkpoint-v4")
      continue;
    std::string v5Dir = llvm::sys::path::parent_path(dir).str() + "/checkpoint";
    if (!llvm::sys::fs::is_directory(v5Dir))
      continue;
    SCOPED_TRACE(dir);
    std::optional<ModelConfig> v4 = readFixtureConfig(dir), v5 = readFixtureConfig(v5Dir);
    ASSERT_TRUE(v4 && v5);
    expectSame(*v5, *v4);
    ++compared;
  }
  if (compared == 0)
    GTEST_SKIP() << "no checkpoint / checkpoint-v4 pairs under test/fixtures/models";
}

} // namespace
