//===- Config.h - config.json, normalised -----------------------*- C++ -*-===//
//
// A Hugging Face config.json of the four MoE families moec builds, read into
// one ModelConfig whether transformers v4 or v5 wrote it (rope_theta +
// rope_scaling or rope_parameters; num_experts, num_local_experts or
// n_routed_experts; ...). Every key must be one the family's table
// understands or one of the known-harmless keys (training, generation and
// bookkeeping fields); anything else is an error, as are missing required
// keys, wrong types, impossible and unsupported values. Each error names the
// key. The tables are in Config.cpp (and docs/design.md points there).
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_FRONTENDS_CHECKPOINT_CONFIG_H
#define MOEC_FRONTENDS_CHECKPOINT_CONFIG_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace moec::checkpoint {

/// model_type qwen3_moe, mixtral, gpt_oss, deepseek_v3.
enum class Family { Qwen3Moe, Mixtral, GptOss, DeepseekV3 };

/// The model_type spelling of a family.
llvm::StringRef familyName(Family family);

struct RopeConfig {
  enum Kind { Default, Yarn } kind = Default;
  double theta = 10000;
  // YaRN (transformers' _compute_yarn_parameters): factor is required;
  // originalMaxPositions is the config's value, else max_position_embeddings.
  double factor = 1, betaFast = 32, betaSlow = 1, mscale = 1, mscaleAllDim = 0;
  int64_t originalMaxPositions = 0;
  bool truncate = true;
  std::optional<double> attentionFactor;
};

struct ModelConfig {
  Family family = Family::Qwen3Moe;
  int64_t vocabSize = 0, hiddenSize = 0, numLayers = 0, numHeads = 0, numKVHeads = 0;
  /// Query/key/value head size. DeepSeek-V3: the query/key head size,
  /// qkNopeHeadDim + qkRopeHeadDim (values have vHeadDim).
  int64_t headDim = 0;
  double rmsNormEps = 0;
  /// The dense MLP (Qwen3's mlp_only_layers, DeepSeek's first layers); 0 for
  /// Mixtral and gpt-oss, which have none.
  int64_t intermediateSize = 0;
  int64_t moeIntermediateSize = 0; ///< one expert
  int64_t numExperts = 0, topK = 0;
  /// Whether the top-k weights are renormalised to sum 1: the config's
  /// norm_topk_prob (Qwen3, DeepSeek); always for Mixtral and gpt-oss (whose
  /// softmax over the k selected logits sums to 1).
  bool normTopKProb = false;
  RopeConfig rope;
  bool tieWordEmbeddings = false;
  bool attentionBias = false;
  int64_t maxPositions = 0;
  /// From mlp_only_layers / decoder_sparse_step (Qwen3), first_k_dense_replace
  /// / moe_layer_freq (DeepSeek); all true for Mixtral / gpt-oss.
  std::vector<bool> layerIsMoE;
  /// Per layer, 0 = full attention: sliding_window + layer_types (gpt-oss),
  /// sliding_window / use_sliding_window / max_window_layers (Qwen3),
  /// sliding_window (Mixtral; null = none).
  std::vector<int64_t> layerWindow;
  // DeepSeek-V3 (MLA and routing).
  std::optional<int64_t> qLoraRank; ///< null: q_proj instead of q_a_proj / q_b_proj
  int64_t kvLoraRank = 0, qkNopeHeadDim = 0, qkRopeHeadDim = 0, vHeadDim = 0;
  bool ropeInterleave = false;
  int64_t numGroups = 1, topKGroups = 1, numSharedExperts = 0;
  double routedScalingFactor = 1;
  // gpt-oss.
  double swigluLimit = 0;
  /// "fp8": blockwise FP8 (e4m3, dynamic activations) with fp8BlockSize
  /// (DeepSeek-V3's checkpoints: [128, 128]); "mxfp4": gpt-oss's published
  /// experts. Other methods are errors.
  std::optional<std::string> quantization;
  std::vector<int64_t> fp8BlockSize;
};

/// Normalises a parsed config.json. Errors start with "config.json: " and name
/// the key (nested keys as "rope_scaling.factor").
llvm::Expected<ModelConfig> parseConfig(const llvm::json::Object &config);

/// The keys parseConfig() understands for `family` and the known-harmless
/// ones it accepts and ignores (for documentation and tests).
std::vector<llvm::StringRef> understoodKeys(Family family);
std::vector<llvm::StringRef> harmlessKeys(Family family);

} // namespace moec::checkpoint

#endif // MOEC_FRONTENDS_CHECKPOINT_CONFIG_H
