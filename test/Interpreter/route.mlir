// moe.route (docs/dialect.md, "Routing"): scores, selection with the
// correction bias (selection only), group-limited top-k with -inf masking,
// ties to the lower id, normalisation, the scaling factor. Hand-computed.

// RUN: moec-interp %s --function group_limited --print | FileCheck %s --check-prefix=GROUP
// RUN: moec-interp %s --function group_score_is_top2_sum --print | FileCheck %s --check-prefix=TOP2
// RUN: moec-interp %s --function ties_and_order --print | FileCheck %s --check-prefix=TIES
// RUN: moec-interp %s --function bias_selects_only --print | FileCheck %s --check-prefix=BIAS
// RUN: moec-interp %s --function topk_softmax --print | FileCheck %s --check-prefix=TKSM

// DeepSeek-style: logits 0, so every score is sigmoid(0) = 0.5 and the biased
// scores c = 0.5 + bias are [-.1 -.2 | -.4 -.45 | -.05 -.15 | -.3 -.35]. Group
// scores (top-2 sums) -.3, -.85, -.2, -.65 keep groups 2 and 0; top-2 of the
// masked c is expert 4 then 0. Were the other groups masked to 0 instead of
// -inf, experts 2 and 3 (c = 0) would win. Weights: 0.5 each, normalised to
// 0.5, times 2.5.
// GROUP: result0 = tensor<1x2xi32> {{\[}}[4, 0]]
// GROUP: result1 = tensor<1x2xf32> {{\[}}[1.25, 1.25]]
func.func @group_limited() -> (tensor<1x2xi32>, tensor<1x2xf32>) {
  %logits = arith.constant dense<0.0> : tensor<1x8xf32>
  %bias = arith.constant dense<[-0.6, -0.7, -0.9, -0.95, -0.55, -0.65, -0.8, -0.85]> : tensor<8xf32>
  %ids, %w = moe.route %logits correction_bias(%bias : tensor<8xf32>)
      {routing = #moe.routing<sigmoid_group_topk>, top_k = 2 : i64, normalize = true,
       num_groups = 4 : i64, topk_groups = 2 : i64, routed_scaling_factor = 2.5 : f64}
      : tensor<1x8xf32> -> tensor<1x2xi32>, tensor<1x2xf32>
  return %ids, %w : tensor<1x2xi32>, tensor<1x2xf32>
}

// Scores sigmoid([3, -3, 1, 1]) = [.953, .047, .731, .731]: group 0 has the
// best expert, but group 1 has the larger top-2 sum (1.46 > 1.0) and is kept.
// Not normalised: the weights are the scores, sigmoid(1) rounded to f32.
// TOP2: result0 = tensor<1x2xi32> {{\[}}[2, 3]]
// TOP2: result1 = tensor<1x2xf32> {{\[}}[0.731058598, 0.731058598]]
func.func @group_score_is_top2_sum() -> (tensor<1x2xi32>, tensor<1x2xf32>) {
  %logits = arith.constant dense<[[3.0, -3.0, 1.0, 1.0]]> : tensor<1x4xf32>
  %ids, %w = moe.route %logits
      {routing = #moe.routing<sigmoid_group_topk>, top_k = 2 : i64,
       num_groups = 2 : i64, topk_groups = 1 : i64}
      : tensor<1x4xf32> -> tensor<1x2xi32>, tensor<1x2xf32>
  return %ids, %w : tensor<1x2xi32>, tensor<1x2xf32>
}

// Equal logits: ties go to the lower id, weights softmax = 1/4 each. Distinct
// logits come in descending order of score.
// TIES: result0 = tensor<2x3xi32> {{\[}}[0, 1, 2], [1, 3, 0]]
// TIES: result1 = tensor<2x3xf32> {{\[}}[0.25, 0.25, 0.25], [0.5, 0.25, 0.125]]
func.func @ties_and_order() -> (tensor<2x3xi32>, tensor<2x3xf32>) {
  // Row 1: exp(logits) ∝ [1, 4, 1, 2], softmax [.125, .5, .125, .25].
  %logits = arith.constant dense<[[1.0, 1.0, 1.0, 1.0],
                                  [0.0, 1.3862943611198906, 0.0, 0.69314718055994530]]> : tensor<2x4xf32>
  %ids, %w = moe.route %logits {routing = #moe.routing<softmax_topk>, top_k = 3 : i64}
      : tensor<2x4xf32> -> tensor<2x3xi32>, tensor<2x3xf32>
  return %ids, %w : tensor<2x3xi32>, tensor<2x3xf32>
}

// The correction bias picks expert 2 first, but the weights are the unbiased
// softmax scores (1/4 each), normalised to 1/2.
// BIAS: result0 = tensor<1x2xi32> {{\[}}[2, 0]]
// BIAS: result1 = tensor<1x2xf32> {{\[}}[0.5, 0.5]]
func.func @bias_selects_only() -> (tensor<1x2xi32>, tensor<1x2xf32>) {
  %logits = arith.constant dense<0.0> : tensor<1x4xf32>
  %bias = arith.constant dense<[0.0, 0.0, 1.0, 0.0]> : tensor<4xf32>
  %ids, %w = moe.route %logits correction_bias(%bias : tensor<4xf32>)
      {routing = #moe.routing<softmax_topk>, top_k = 2 : i64, normalize = true}
      : tensor<1x4xf32> -> tensor<1x2xi32>, tensor<1x2xf32>
  return %ids, %w : tensor<1x2xi32>, tensor<1x2xf32>
}

// gpt-oss: top-k of the logits (tie between 1 and 3 to the lower id), then a
// softmax over the two chosen logits (equal: 1/2 each), times 3.
// TKSM: result0 = tensor<1x2xi32> {{\[}}[1, 3]]
// TKSM: result1 = tensor<1x2xf32> {{\[}}[1.5, 1.5]]
func.func @topk_softmax() -> (tensor<1x2xi32>, tensor<1x2xf32>) {
  %logits = arith.constant dense<[[0.0, 2.0, 1.0, 2.0]]> : tensor<1x4xf32>
  %ids, %w = moe.route %logits
      {routing = #moe.routing<topk_softmax>, top_k = 2 : i64, routed_scaling_factor = 3.0 : f64}
      : tensor<1x4xf32> -> tensor<1x2xi32>, tensor<1x2xf32>
  return %ids, %w : tensor<1x2xi32>, tensor<1x2xf32>
}
