// moe.layer evaluated from its definition (docs/dialect.md, "moe.layer") on
// inputs small enough to compute by hand. Random inputs against a numpy
// reference are in layer-vs-numpy.mlir; the fixtures cover the models.

// RUN: moec-interp %s --function ungated_shared --print | FileCheck %s --check-prefix=SHARED
// RUN: moec-interp %s --function separate_biases --print | FileCheck %s --check-prefix=SEP
// RUN: moec-interp %s --function precomputed_routing --print | FileCheck %s --check-prefix=PRE
// RUN: moec-interp %s --function fp8_checkpoint --print | FileCheck %s --check-prefix=FP8
// RUN: moec-opt %s -moe-lower-layer | moec-interp - --function fp8_checkpoint --print | FileCheck %s --check-prefix=FP8

// T = 2, H = 2, E = 2, I = 1, identity activation, top_k = 1 with normalize
// (weight 1). Token 0 [1, 2] picks expert 1 (logits [0, 1]): h = [1, 1]·x + 0.5
// = 3.5, y = [2, 3]·h + [0, 1] = [7, 11.5]. Token 1 [4, -1] picks expert 0: h =
// [1, -1]·x + 0 = 5, y = [1, 0]·h = [5, 0]. Shared expert, ungated like the
// routed ones: h = [1, -1]·x, y = [1, 1]·h, scaled by sigmoid([0, 0]·x) = 0.5:
// token 0 adds 0.5·[-1, -1], token 1 adds 0.5·[5, 5].
// SHARED: result0 = tensor<2x2xf32> {{\[}}[6.5, 11], [7.5, 2.5]]
func.func @ungated_shared() -> tensor<2x2xf32> {
  %x = arith.constant dense<[[1.0, 2.0], [4.0, -1.0]]> : tensor<2x2xf32>
  %logits = arith.constant dense<[[0.0, 1.0], [3.0, 2.0]]> : tensor<2x2xf32>
  %gu = arith.constant dense<[[[1.0, -1.0]], [[1.0, 1.0]]]> : tensor<2x1x2xf32>
  %gub = arith.constant dense<[[0.0], [0.5]]> : tensor<2x1xf32>
  %down = arith.constant dense<[[[1.0], [0.0]], [[2.0], [3.0]]]> : tensor<2x2x1xf32>
  %db = arith.constant dense<[[0.0, 0.0], [0.0, 1.0]]> : tensor<2x2xf32>
  %sgu = arith.constant dense<[[1.0, -1.0]]> : tensor<1x2xf32>
  %sd = arith.constant dense<[[1.0], [1.0]]> : tensor<2x1xf32>
  %sg = arith.constant dense<[[0.0, 0.0]]> : tensor<1x2xf32>
  %y = moe.layer %x : tensor<2x2xf32> router_logits(%logits : tensor<2x2xf32>)
         gate_up(%gu : tensor<2x1x2xf32>) down(%down : tensor<2x2x1xf32>)
         gate_up_bias(%gub : tensor<2x1xf32>) down_bias(%db : tensor<2x2xf32>)
         shared_gate_up(%sgu : tensor<1x2xf32>) shared_down(%sd : tensor<2x1xf32>)
         shared_gate(%sg : tensor<1x2xf32>)
         {routing = #moe.routing<softmax_topk>, top_k = 1 : i64, normalize = true,
          activation = #moe.activation<identity>,
          gate_up_layout = #moe.gate_up_layout<none>} -> tensor<2x2xf32>
  return %y : tensor<2x2xf32>
}

// Separate gate and up with biases, relu, both experts (top_k = 2) with
// topk_softmax weights from router_weight [[1, 0], [0, 1]] + bias [0, ln 3]:
// token [2, 2] has logits [2, 2 + ln 3], so expert 1 (weight 3/4) then expert
// 0 (1/4). Expert e: g = gate[e]·x + gb[e], u = up[e]·x + ub[e], y = down[e]·
// (relu(g)·u).
//   e0: g = [1, 0]·x = 2, u = [0, 1]·x + 1 = 3, h = 6, y = [1, 1]·6 = [6, 6]
//   e1: g = [-1, 0]·x + 1 = -1 -> relu 0, h = 0, y = [0, 0]
// out = 3/4·[0, 0] + 1/4·[6, 6] = [1.5, 1.5].
// SEP: result0 = tensor<1x2xf32> {{\[}}[1.5, 1.5]]
func.func @separate_biases() -> tensor<1x2xf32> {
  %x = arith.constant dense<[[2.0, 2.0]]> : tensor<1x2xf32>
  %wr = arith.constant dense<[[1.0, 0.0], [0.0, 1.0]]> : tensor<2x2xf32>
  %br = arith.constant dense<[0.0, 1.0986122886681098]> : tensor<2xf32>
  %gate = arith.constant dense<[[[1.0, 0.0]], [[-1.0, 0.0]]]> : tensor<2x1x2xf32>
  %gb = arith.constant dense<[[0.0], [1.0]]> : tensor<2x1xf32>
  %up = arith.constant dense<[[[0.0, 1.0]], [[5.0, 5.0]]]> : tensor<2x1x2xf32>
  %ub = arith.constant dense<[[1.0], [0.0]]> : tensor<2x1xf32>
  %down = arith.constant dense<[[[1.0], [1.0]], [[7.0], [7.0]]]> : tensor<2x2x1xf32>
  %y = moe.layer %x : tensor<1x2xf32> router_weight(%wr : tensor<2x2xf32>)
         router_bias(%br : tensor<2xf32>)
         gate_up(%gate : tensor<2x1x2xf32>) up(%up : tensor<2x1x2xf32>)
         down(%down : tensor<2x2x1xf32>)
         gate_up_bias(%gb : tensor<2x1xf32>) up_bias(%ub : tensor<2x1xf32>)
         {routing = #moe.routing<topk_softmax>, top_k = 2 : i64,
          activation = #moe.activation<relu>,
          gate_up_layout = #moe.gate_up_layout<separate>} -> tensor<1x2xf32>
  return %y : tensor<1x2xf32>
}

// Precomputed routing with sentinel ids (5 and -1, outside [0, E = 2)) whose
// weights are NaN: those slots are not computed and add nothing. The experts
// are those of @ungated_shared: token 0 gets 0.5·[7, 11.5], token 1 2·[5, 0].
// PRE: result0 = tensor<2x2xf32> {{\[}}[3.5, 5.75], [10, 0]]
func.func @precomputed_routing() -> tensor<2x2xf32> {
  %x = arith.constant dense<[[1.0, 2.0], [4.0, -1.0]]> : tensor<2x2xf32>
  %ids = arith.constant dense<[[1, 5], [-1, 0]]> : tensor<2x2xi64>
  %w = arith.constant dense<[[0.5, 0x7FC00000], [0x7FC00000, 2.0]]> : tensor<2x2xf32>
  %gu = arith.constant dense<[[[1.0, -1.0]], [[1.0, 1.0]]]> : tensor<2x1x2xf32>
  %gub = arith.constant dense<[[0.0], [0.5]]> : tensor<2x1xf32>
  %down = arith.constant dense<[[[1.0], [0.0]], [[2.0], [3.0]]]> : tensor<2x2x1xf32>
  %db = arith.constant dense<[[0.0, 0.0], [0.0, 1.0]]> : tensor<2x2xf32>
  %y = moe.layer %x : tensor<2x2xf32> expert_ids(%ids : tensor<2x2xi64>)
         expert_weights(%w : tensor<2x2xf32>)
         gate_up(%gu : tensor<2x1x2xf32>) down(%down : tensor<2x2x1xf32>)
         gate_up_bias(%gub : tensor<2x1xf32>) down_bias(%db : tensor<2x2xf32>)
         {routing = #moe.routing<softmax_topk>, top_k = 2 : i64,
          activation = #moe.activation<identity>,
          gate_up_layout = #moe.gate_up_layout<none>} -> tensor<2x2xf32>
  return %y : tensor<2x2xf32>
}

// Weights that are already FP8 stand for their e4m3 values times their block
// scales: gate_up = 0.5 * [[1, 2], [0.5, -1]], down = 0.25 * [[2], [-4]]. Token 0
// (expert 0): gu = [2.5, -0.75], h = 2.5 * -0.75 = -1.875 (identity, gated),
// y = [0.5, -1] * -1.875 = [-0.9375, 1.875]; token 1's id is a sentinel: 0.
// The lowered form (FP8 weights with weight_scales) computes the same.
// FP8: result0 = tensor<2x2xf32> {{\[}}[-0.9375, 1.875], [0, 0]]
func.func @fp8_checkpoint() -> tensor<2x2xf32> {
  %x = arith.constant dense<[[1.0, 2.0], [3.0, -1.0]]> : tensor<2x2xf32>
  %ids = arith.constant dense<[[0], [1]]> : tensor<2x1xi64>
  %w = arith.constant dense<[[1.0], [1.0]]> : tensor<2x1xf32>
  %gu = arith.constant dense<[[[1.0, 2.0], [0.5, -1.0]]]> : tensor<1x2x2xf8E4M3FN>
  %gus = arith.constant dense<0.5> : tensor<1x1x1xf32>
  %dn = arith.constant dense<[[[2.0], [-4.0]]]> : tensor<1x2x1xf8E4M3FN>
  %dns = arith.constant dense<0.25> : tensor<1x1x1xf32>
  %y = moe.layer %x : tensor<2x2xf32> expert_ids(%ids : tensor<2x1xi64>) expert_weights(%w : tensor<2x1xf32>)
         gate_up(%gu : tensor<1x2x2xf8E4M3FN>) down(%dn : tensor<1x2x1xf8E4M3FN>)
         gate_up_scales(%gus : tensor<1x1x1xf32>) down_scales(%dns : tensor<1x1x1xf32>)
         {routing = #moe.routing<softmax_topk>, top_k = 1 : i64, activation = #moe.activation<identity>,
          gate_up_layout = #moe.gate_up_layout<concatenated>} -> tensor<2x2xf32>
  return %y : tensor<2x2xf32>
}
