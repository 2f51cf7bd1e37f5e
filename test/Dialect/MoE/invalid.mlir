// RUN: moec-opt %s -split-input-file -verify-diagnostics

// Every verifier message of the moe dialect, one case each.

// #moe.activation

func.func @activation_params_on_gelu(%x: tensor<4x8xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{alpha, beta and limit apply only to 'silu' (SwiGLU), not 'gelu'}}
  %y = moe.activation %x {activation = #moe.activation<gelu, alpha = 2.0>,
                          layout = #moe.gate_up_layout<concatenated>} : tensor<4x8xf32> -> tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}

// -----

func.func @activation_nonfinite_alpha(%x: tensor<4x8xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{alpha and beta must be finite, got alpha = INF}}
  %y = moe.activation %x {activation = #moe.activation<silu, alpha = 0x7FF0000000000000>,
                          layout = #moe.gate_up_layout<concatenated>} : tensor<4x8xf32> -> tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}

// -----

func.func @activation_negative_limit(%x: tensor<4x8xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{limit must be positive (or +inf for none), got -1}}
  %y = moe.activation %x {activation = #moe.activation<silu, limit = -1.0>,
                          layout = #moe.gate_up_layout<concatenated>} : tensor<4x8xf32> -> tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}

// -----

func.func @activation_unknown_kind(%x: tensor<4x8xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{unknown activation 'swish'; expected silu, gelu, relu or identity}}
  %y = moe.activation %x {activation = #moe.activation<swish>,
                          layout = #moe.gate_up_layout<concatenated>} : tensor<4x8xf32> -> tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}

// -----

func.func @activation_unknown_parameter(%x: tensor<4x8xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{unknown activation parameter 'gamma'; expected alpha, beta or limit}}
  %y = moe.activation %x {activation = #moe.activation<silu, gamma = 1.0>,
                          layout = #moe.gate_up_layout<concatenated>} : tensor<4x8xf32> -> tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}

// -----

// moe.layer

func.func @layer_both_routers(%x: tensor<?x16xf32>, %wr: tensor<4x16xf32>, %l: tensor<?x4xf32>,
    %wgu: tensor<4x64x16xf32>, %wd: tensor<4x16x32xf32>) -> tensor<?x16xf32> {
  // expected-error @+1 {{takes one of 'router_weight', 'router_logits' and 'expert_ids' with 'expert_weights', not several}}
  %y = moe.layer %x : tensor<?x16xf32> router_weight(%wr : tensor<4x16xf32>)
         router_logits(%l : tensor<?x4xf32>)
         gate_up(%wgu : tensor<4x64x16xf32>) down(%wd : tensor<4x16x32xf32>)
         {routing = #moe.routing<softmax_topk>, top_k = 2 : i64, activation = #moe.activation<silu>,
          gate_up_layout = #moe.gate_up_layout<concatenated>} -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

func.func @layer_no_router(%x: tensor<?x16xf32>, %wgu: tensor<4x64x16xf32>,
    %wd: tensor<4x16x32xf32>) -> tensor<?x16xf32> {
  // expected-error @+1 {{needs 'router_weight', 'router_logits', or 'expert_ids' with 'expert_weights'}}
  %y = moe.layer %x : tensor<?x16xf32>
         gate_up(%wgu : tensor<4x64x16xf32>) down(%wd : tensor<4x16x32xf32>)
         {routing = #moe.routing<softmax_topk>, top_k = 2 : i64, activation = #moe.activation<silu>,
          gate_up_layout = #moe.gate_up_layout<concatenated>} -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

func.func @layer_ids_and_logits(%x: tensor<?x16xf32>, %l: tensor<?x4xf32>, %ids: tensor<?x2xi64>,
    %w: tensor<?x2xf32>, %wgu: tensor<4x64x16xf32>, %wd: tensor<4x16x32xf32>) -> tensor<?x16xf32> {
  // expected-error @+1 {{takes one of 'router_weight', 'router_logits' and 'expert_ids' with 'expert_weights', not several}}
  %y = moe.layer %x : tensor<?x16xf32> router_logits(%l : tensor<?x4xf32>)
         expert_ids(%ids : tensor<?x2xi64>) expert_weights(%w : tensor<?x2xf32>)
         gate_up(%wgu : tensor<4x64x16xf32>) down(%wd : tensor<4x16x32xf32>)
         {routing = #moe.routing<softmax_topk>, top_k = 2 : i64, activation = #moe.activation<silu>,
          gate_up_layout = #moe.gate_up_layout<concatenated>} -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

func.func @layer_ids_without_weights(%x: tensor<?x16xf32>, %ids: tensor<?x2xi32>,
    %wgu: tensor<4x64x16xf32>, %wd: tensor<4x16x32xf32>) -> tensor<?x16xf32> {
  // expected-error @+1 {{'expert_ids' and 'expert_weights' go together}}
  %y = moe.layer %x : tensor<?x16xf32> expert_ids(%ids : tensor<?x2xi32>)
         gate_up(%wgu : tensor<4x64x16xf32>) down(%wd : tensor<4x16x32xf32>)
         {routing = #moe.routing<softmax_topk>, top_k = 2 : i64, activation = #moe.activation<silu>,
          gate_up_layout = #moe.gate_up_layout<concatenated>} -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

func.func @layer_precomputed_normalize(%x: tensor<?x16xf32>, %ids: tensor<?x2xi32>, %w: tensor<?x2xf32>,
    %wgu: tensor<4x64x16xf32>, %wd: tensor<4x16x32xf32>) -> tensor<?x16xf32> {
  // expected-error @+1 {{with precomputed routing ('expert_ids', 'expert_weights') the routing attributes other than top_k keep their defaults (routing softmax_topk, normalize false, num_groups 1, topk_groups 1, routed_scaling_factor 1.0)}}
  %y = moe.layer %x : tensor<?x16xf32> expert_ids(%ids : tensor<?x2xi32>) expert_weights(%w : tensor<?x2xf32>)
         gate_up(%wgu : tensor<4x64x16xf32>) down(%wd : tensor<4x16x32xf32>)
         {routing = #moe.routing<softmax_topk>, top_k = 2 : i64, normalize = true,
          activation = #moe.activation<silu>,
          gate_up_layout = #moe.gate_up_layout<concatenated>} -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

func.func @layer_precomputed_routing_kind(%x: tensor<?x16xf32>, %ids: tensor<?x2xi32>, %w: tensor<?x2xf32>,
    %wgu: tensor<4x64x16xf32>, %wd: tensor<4x16x32xf32>) -> tensor<?x16xf32> {
  // expected-error @+1 {{the routing attributes other than top_k keep their defaults}}
  %y = moe.layer %x : tensor<?x16xf32> expert_ids(%ids : tensor<?x2xi32>) expert_weights(%w : tensor<?x2xf32>)
         gate_up(%wgu : tensor<4x64x16xf32>) down(%wd : tensor<4x16x32xf32>)
         {routing = #moe.routing<topk_softmax>, top_k = 2 : i64, activation = #moe.activation<silu>,
          gate_up_layout = #moe.gate_up_layout<concatenated>} -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

func.func @layer_precomputed_correction_bias(%x: tensor<?x16xf32>, %ids: tensor<?x2xi32>,
    %w: tensor<?x2xf32>, %cb: tensor<4xf32>, %wgu: tensor<4x64x16xf32>,
    %wd: tensor<4x16x32xf32>) -> tensor<?x16xf32> {
  // expected-error @+1 {{'correction_bias' steers a router; precomputed routing has none}}
  %y = moe.layer %x : tensor<?x16xf32> expert_ids(%ids : tensor<?x2xi32>) expert_weights(%w : tensor<?x2xf32>)
         correction_bias(%cb : tensor<4xf32>)
         gate_up(%wgu : tensor<4x64x16xf32>) down(%wd : tensor<4x16x32xf32>)
         {routing = #moe.routing<softmax_topk>, top_k = 2 : i64, activation = #moe.activation<silu>,
          gate_up_layout = #moe.gate_up_layout<concatenated>} -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

func.func @layer_precomputed_top_k(%x: tensor<?x16xf32>, %ids: tensor<?x3xi64>, %w: tensor<?x3xf32>,
    %wgu: tensor<4x64x16xf32>, %wd: tensor<4x16x32xf32>) -> tensor<?x16xf32> {
  // expected-error @+1 {{expert_ids dimension 1 (K) is 3, but attribute top_k makes K = 2}}
  %y = moe.layer %x : tensor<?x16xf32> expert_ids(%ids : tensor<?x3xi64>) expert_weights(%w : tensor<?x3xf32>)
         gate_up(%wgu : tensor<4x64x16xf32>) down(%wd : tensor<4x16x32xf32>)
         {routing = #moe.routing<softmax_topk>, top_k = 2 : i64, activation = #moe.activation<silu>,
          gate_up_layout = #moe.gate_up_layout<concatenated>} -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

func.func @layer_precomputed_tokens(%x: tensor<5x16xf32>, %ids: tensor<5x2xi64>, %w: tensor<4x2xf32>,
    %wgu: tensor<4x64x16xf32>, %wd: tensor<4x16x32xf32>) -> tensor<5x16xf32> {
  // expected-error @+1 {{expert_weights dimension 0 (T) is 4, but hidden dimension 0 makes T = 5}}
  %y = moe.layer %x : tensor<5x16xf32> expert_ids(%ids : tensor<5x2xi64>) expert_weights(%w : tensor<4x2xf32>)
         gate_up(%wgu : tensor<4x64x16xf32>) down(%wd : tensor<4x16x32xf32>)
         {routing = #moe.routing<softmax_topk>, top_k = 2 : i64, activation = #moe.activation<silu>,
          gate_up_layout = #moe.gate_up_layout<concatenated>} -> tensor<5x16xf32>
  return %y : tensor<5x16xf32>
}

// -----

func.func @layer_precomputed_float_ids(%x: tensor<?x16xf32>, %ids: tensor<?x2xf32>, %w: tensor<?x2xf32>,
    %wgu: tensor<4x64x16xf32>, %wd: tensor<4x16x32xf32>) -> tensor<?x16xf32> {
  // expected-error @+1 {{must be ranked tensor of 32-bit signless integer or 64-bit signless integer values, but got 'tensor<?x2xf32>'}}
  %y = moe.layer %x : tensor<?x16xf32> expert_ids(%ids : tensor<?x2xf32>) expert_weights(%w : tensor<?x2xf32>)
         gate_up(%wgu : tensor<4x64x16xf32>) down(%wd : tensor<4x16x32xf32>)
         {routing = #moe.routing<softmax_topk>, top_k = 2 : i64, activation = #moe.activation<silu>,
          gate_up_layout = #moe.gate_up_layout<concatenated>} -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

func.func @layer_hidden_rank(%x: tensor<2x?x16xf32>, %wr: tensor<4x16xf32>,
    %wgu: tensor<4x64x16xf32>, %wd: tensor<4x16x32xf32>) -> tensor<2x?x16xf32> {
  // expected-error @+1 {{hidden must be a rank-2 tensor [T, H], got 'tensor<2x?x16xf32>'}}
  %y = moe.layer %x : tensor<2x?x16xf32> router_weight(%wr : tensor<4x16xf32>)
         gate_up(%wgu : tensor<4x64x16xf32>) down(%wd : tensor<4x16x32xf32>)
         {routing = #moe.routing<softmax_topk>, top_k = 2 : i64, activation = #moe.activation<silu>,
          gate_up_layout = #moe.gate_up_layout<concatenated>} -> tensor<2x?x16xf32>
  return %y : tensor<2x?x16xf32>
}

// -----

func.func @layer_router_hidden_size(%x: tensor<?x16xf32>, %wr: tensor<4x17xf32>,
    %wgu: tensor<4x64x16xf32>, %wd: tensor<4x16x32xf32>) -> tensor<?x16xf32> {
  // expected-error @+1 {{router_weight dimension 1 (H) is 17, but hidden dimension 1 makes H = 16}}
  %y = moe.layer %x : tensor<?x16xf32> router_weight(%wr : tensor<4x17xf32>)
         gate_up(%wgu : tensor<4x64x16xf32>) down(%wd : tensor<4x16x32xf32>)
         {routing = #moe.routing<softmax_topk>, top_k = 2 : i64, activation = #moe.activation<silu>,
          gate_up_layout = #moe.gate_up_layout<concatenated>} -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

func.func @layer_router_logits_experts(%x: tensor<?x16xf32>, %l: tensor<?x5xf32>,
    %wgu: tensor<4x64x16xf32>, %wd: tensor<4x16x32xf32>) -> tensor<?x16xf32> {
  // expected-error @+1 {{gate_up_weight dimension 0 (E) is 4, but router_logits dimension 1 makes E = 5}}
  %y = moe.layer %x : tensor<?x16xf32> router_logits(%l : tensor<?x5xf32>)
         gate_up(%wgu : tensor<4x64x16xf32>) down(%wd : tensor<4x16x32xf32>)
         {routing = #moe.routing<softmax_topk>, top_k = 2 : i64, activation = #moe.activation<silu>,
          gate_up_layout = #moe.gate_up_layout<concatenated>} -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

func.func @layer_router_bias_with_logits(%x: tensor<?x16xf32>, %l: tensor<?x4xf32>, %b: tensor<4xf32>,
    %wgu: tensor<4x64x16xf32>, %wd: tensor<4x16x32xf32>) -> tensor<?x16xf32> {
  // expected-error @+1 {{'router_bias' needs 'router_weight': given logits already include any bias}}
  %y = moe.layer %x : tensor<?x16xf32> router_logits(%l : tensor<?x4xf32>) router_bias(%b : tensor<4xf32>)
         gate_up(%wgu : tensor<4x64x16xf32>) down(%wd : tensor<4x16x32xf32>)
         {routing = #moe.routing<softmax_topk>, top_k = 2 : i64, activation = #moe.activation<silu>,
          gate_up_layout = #moe.gate_up_layout<concatenated>} -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

func.func @layer_correction_bias_experts(%x: tensor<?x16xf32>, %wr: tensor<4x16xf32>, %cb: tensor<8xf32>,
    %wgu: tensor<4x64x16xf32>, %wd: tensor<4x16x32xf32>) -> tensor<?x16xf32> {
  // expected-error @+1 {{correction_bias dimension 0 (E) is 8, but router_weight dimension 0 makes E = 4}}
  %y = moe.layer %x : tensor<?x16xf32> router_weight(%wr : tensor<4x16xf32>) correction_bias(%cb : tensor<8xf32>)
         gate_up(%wgu : tensor<4x64x16xf32>) down(%wd : tensor<4x16x32xf32>)
         {routing = #moe.routing<softmax_topk>, top_k = 2 : i64, activation = #moe.activation<silu>,
          gate_up_layout = #moe.gate_up_layout<concatenated>} -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

func.func @layer_odd_gate_up(%x: tensor<?x16xf32>, %wr: tensor<4x16xf32>,
    %wgu: tensor<4x63x16xf32>, %wd: tensor<4x16x32xf32>) -> tensor<?x16xf32> {
  // expected-error @+1 {{gate_up_weight dimension 1 (2I = 63) must be even: it holds gate and up together}}
  %y = moe.layer %x : tensor<?x16xf32> router_weight(%wr : tensor<4x16xf32>)
         gate_up(%wgu : tensor<4x63x16xf32>) down(%wd : tensor<4x16x32xf32>)
         {routing = #moe.routing<softmax_topk>, top_k = 2 : i64, activation = #moe.activation<silu>,
          gate_up_layout = #moe.gate_up_layout<concatenated>} -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

func.func @layer_down_intermediate(%x: tensor<?x16xf32>, %wr: tensor<4x16xf32>,
    %wgu: tensor<4x64x16xf32>, %wd: tensor<4x16x64xf32>) -> tensor<?x16xf32> {
  // expected-error @+1 {{down_weight dimension 2 (I) is 64, but gate_up_weight dimension 1 / 2 makes I = 32}}
  %y = moe.layer %x : tensor<?x16xf32> router_weight(%wr : tensor<4x16xf32>)
         gate_up(%wgu : tensor<4x64x16xf32>) down(%wd : tensor<4x16x64xf32>)
         {routing = #moe.routing<softmax_topk>, top_k = 2 : i64, activation = #moe.activation<silu>,
          gate_up_layout = #moe.gate_up_layout<concatenated>} -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

func.func @layer_down_rank(%x: tensor<?x16xf32>, %wr: tensor<4x16xf32>,
    %wgu: tensor<4x64x16xf32>, %wd: tensor<16x32xf32>) -> tensor<?x16xf32> {
  // expected-error @+1 {{down_weight must be a rank-3 tensor [E, H, I], got 'tensor<16x32xf32>'}}
  %y = moe.layer %x : tensor<?x16xf32> router_weight(%wr : tensor<4x16xf32>)
         gate_up(%wgu : tensor<4x64x16xf32>) down(%wd : tensor<16x32xf32>)
         {routing = #moe.routing<softmax_topk>, top_k = 2 : i64, activation = #moe.activation<silu>,
          gate_up_layout = #moe.gate_up_layout<concatenated>} -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

func.func @layer_separate_without_up(%x: tensor<?x16xf32>, %wr: tensor<4x16xf32>,
    %wg: tensor<4x32x16xf32>, %wd: tensor<4x16x32xf32>) -> tensor<?x16xf32> {
  // expected-error @+1 {{gate_up_layout 'separate' needs operand 'up_weight'}}
  %y = moe.layer %x : tensor<?x16xf32> router_weight(%wr : tensor<4x16xf32>)
         gate_up(%wg : tensor<4x32x16xf32>) down(%wd : tensor<4x16x32xf32>)
         {routing = #moe.routing<softmax_topk>, top_k = 2 : i64, activation = #moe.activation<silu>,
          gate_up_layout = #moe.gate_up_layout<separate>} -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

func.func @layer_up_without_separate(%x: tensor<?x16xf32>, %wr: tensor<4x16xf32>,
    %wgu: tensor<4x64x16xf32>, %wu: tensor<4x32x16xf32>, %wd: tensor<4x16x32xf32>) -> tensor<?x16xf32> {
  // expected-error @+1 {{operand 'up_weight' is only for gate_up_layout 'separate'}}
  %y = moe.layer %x : tensor<?x16xf32> router_weight(%wr : tensor<4x16xf32>)
         gate_up(%wgu : tensor<4x64x16xf32>) up(%wu : tensor<4x32x16xf32>) down(%wd : tensor<4x16x32xf32>)
         {routing = #moe.routing<softmax_topk>, top_k = 2 : i64, activation = #moe.activation<silu>,
          gate_up_layout = #moe.gate_up_layout<concatenated>} -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

func.func @layer_separate_up_shape(%x: tensor<?x16xf32>, %wr: tensor<4x16xf32>,
    %wg: tensor<4x32x16xf32>, %wu: tensor<4x31x16xf32>, %wd: tensor<4x16x32xf32>) -> tensor<?x16xf32> {
  // expected-error @+1 {{up_weight dimension 1 (I) is 31, but gate_up_weight dimension 1 makes I = 32}}
  %y = moe.layer %x : tensor<?x16xf32> router_weight(%wr : tensor<4x16xf32>)
         gate_up(%wg : tensor<4x32x16xf32>) up(%wu : tensor<4x31x16xf32>) down(%wd : tensor<4x16x32xf32>)
         {routing = #moe.routing<softmax_topk>, top_k = 2 : i64, activation = #moe.activation<silu>,
          gate_up_layout = #moe.gate_up_layout<separate>} -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

func.func @layer_gate_up_bias(%x: tensor<?x16xf32>, %wr: tensor<4x16xf32>,
    %wgu: tensor<4x64x16xf32>, %wd: tensor<4x16x32xf32>, %b: tensor<4x32xf32>) -> tensor<?x16xf32> {
  // expected-error @+1 {{gate_up_bias dimension 1 (2I) is 32, but gate_up_weight dimension 1 makes 2I = 64}}
  %y = moe.layer %x : tensor<?x16xf32> router_weight(%wr : tensor<4x16xf32>)
         gate_up(%wgu : tensor<4x64x16xf32>) down(%wd : tensor<4x16x32xf32>) gate_up_bias(%b : tensor<4x32xf32>)
         {routing = #moe.routing<softmax_topk>, top_k = 2 : i64, activation = #moe.activation<silu>,
          gate_up_layout = #moe.gate_up_layout<concatenated>} -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

func.func @layer_up_bias_without_separate(%x: tensor<?x16xf32>, %wr: tensor<4x16xf32>,
    %wgu: tensor<4x64x16xf32>, %wd: tensor<4x16x32xf32>, %b: tensor<4x32xf32>) -> tensor<?x16xf32> {
  // expected-error @+1 {{operand 'up_bias' is only for gate_up_layout 'separate'}}
  %y = moe.layer %x : tensor<?x16xf32> router_weight(%wr : tensor<4x16xf32>)
         gate_up(%wgu : tensor<4x64x16xf32>) down(%wd : tensor<4x16x32xf32>) up_bias(%b : tensor<4x32xf32>)
         {routing = #moe.routing<softmax_topk>, top_k = 2 : i64, activation = #moe.activation<silu>,
          gate_up_layout = #moe.gate_up_layout<concatenated>} -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

func.func @layer_down_bias(%x: tensor<?x16xf32>, %wr: tensor<4x16xf32>,
    %wgu: tensor<4x64x16xf32>, %wd: tensor<4x16x32xf32>, %b: tensor<4x15xf32>) -> tensor<?x16xf32> {
  // expected-error @+1 {{down_bias dimension 1 (H) is 15, but hidden dimension 1 makes H = 16}}
  %y = moe.layer %x : tensor<?x16xf32> router_weight(%wr : tensor<4x16xf32>)
         gate_up(%wgu : tensor<4x64x16xf32>) down(%wd : tensor<4x16x32xf32>) down_bias(%b : tensor<4x15xf32>)
         {routing = #moe.routing<softmax_topk>, top_k = 2 : i64, activation = #moe.activation<silu>,
          gate_up_layout = #moe.gate_up_layout<concatenated>} -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

func.func @layer_swiglu_params_ungated(%x: tensor<?x16xf32>, %wr: tensor<4x16xf32>,
    %wu: tensor<4x32x16xf32>, %wd: tensor<4x16x32xf32>) -> tensor<?x16xf32> {
  // expected-error @+1 {{alpha, beta and limit need a gated layout (the SwiGLU form), not 'none'}}
  %y = moe.layer %x : tensor<?x16xf32> router_weight(%wr : tensor<4x16xf32>)
         gate_up(%wu : tensor<4x32x16xf32>) down(%wd : tensor<4x16x32xf32>)
         {routing = #moe.routing<softmax_topk>, top_k = 2 : i64,
          activation = #moe.activation<silu, limit = 7.0>,
          gate_up_layout = #moe.gate_up_layout<none>} -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

func.func @layer_shared_half(%x: tensor<?x16xf32>, %wr: tensor<4x16xf32>,
    %wgu: tensor<4x64x16xf32>, %wd: tensor<4x16x32xf32>, %sgu: tensor<48x16xf32>) -> tensor<?x16xf32> {
  // expected-error @+1 {{'shared_gate_up_weight' and 'shared_down_weight' go together}}
  %y = moe.layer %x : tensor<?x16xf32> router_weight(%wr : tensor<4x16xf32>)
         gate_up(%wgu : tensor<4x64x16xf32>) down(%wd : tensor<4x16x32xf32>)
         shared_gate_up(%sgu : tensor<48x16xf32>)
         {routing = #moe.routing<softmax_topk>, top_k = 2 : i64, activation = #moe.activation<silu>,
          gate_up_layout = #moe.gate_up_layout<concatenated>} -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

func.func @layer_shared_odd(%x: tensor<?x16xf32>, %wr: tensor<4x16xf32>,
    %wgu: tensor<4x64x16xf32>, %wd: tensor<4x16x32xf32>, %sgu: tensor<47x16xf32>,
    %sd: tensor<16x24xf32>) -> tensor<?x16xf32> {
  // expected-error @+1 {{shared_gate_up_weight dimension 0 (2Is = 47) must be even: it holds gate and up together}}
  %y = moe.layer %x : tensor<?x16xf32> router_weight(%wr : tensor<4x16xf32>)
         gate_up(%wgu : tensor<4x64x16xf32>) down(%wd : tensor<4x16x32xf32>)
         shared_gate_up(%sgu : tensor<47x16xf32>) shared_down(%sd : tensor<16x24xf32>)
         {routing = #moe.routing<softmax_topk>, top_k = 2 : i64, activation = #moe.activation<silu>,
          gate_up_layout = #moe.gate_up_layout<concatenated>} -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

func.func @layer_shared_down(%x: tensor<?x16xf32>, %wr: tensor<4x16xf32>,
    %wgu: tensor<4x64x16xf32>, %wd: tensor<4x16x32xf32>, %sgu: tensor<48x16xf32>,
    %sd: tensor<16x20xf32>) -> tensor<?x16xf32> {
  // expected-error @+1 {{shared_down_weight dimension 1 (Is) is 20, but shared_gate_up_weight dimension 0 / 2 makes Is = 24}}
  %y = moe.layer %x : tensor<?x16xf32> router_weight(%wr : tensor<4x16xf32>)
         gate_up(%wgu : tensor<4x64x16xf32>) down(%wd : tensor<4x16x32xf32>)
         shared_gate_up(%sgu : tensor<48x16xf32>) shared_down(%sd : tensor<16x20xf32>)
         {routing = #moe.routing<softmax_topk>, top_k = 2 : i64, activation = #moe.activation<silu>,
          gate_up_layout = #moe.gate_up_layout<concatenated>} -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

func.func @layer_shared_gate_alone(%x: tensor<?x16xf32>, %wr: tensor<4x16xf32>,
    %wgu: tensor<4x64x16xf32>, %wd: tensor<4x16x32xf32>, %sg: tensor<1x16xf32>) -> tensor<?x16xf32> {
  // expected-error @+1 {{'shared_gate_weight' needs a shared expert}}
  %y = moe.layer %x : tensor<?x16xf32> router_weight(%wr : tensor<4x16xf32>)
         gate_up(%wgu : tensor<4x64x16xf32>) down(%wd : tensor<4x16x32xf32>)
         shared_gate(%sg : tensor<1x16xf32>)
         {routing = #moe.routing<softmax_topk>, top_k = 2 : i64, activation = #moe.activation<silu>,
          gate_up_layout = #moe.gate_up_layout<concatenated>} -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

func.func @layer_shared_gate_rows(%x: tensor<?x16xf32>, %wr: tensor<4x16xf32>,
    %wgu: tensor<4x64x16xf32>, %wd: tensor<4x16x32xf32>, %sgu: tensor<48x16xf32>,
    %sd: tensor<16x24xf32>, %sg: tensor<2x16xf32>) -> tensor<?x16xf32> {
  // expected-error @+1 {{shared_gate_weight must be [1, H], one sigmoid gate per token, got 'tensor<2x16xf32>'}}
  %y = moe.layer %x : tensor<?x16xf32> router_weight(%wr : tensor<4x16xf32>)
         gate_up(%wgu : tensor<4x64x16xf32>) down(%wd : tensor<4x16x32xf32>)
         shared_gate_up(%sgu : tensor<48x16xf32>) shared_down(%sd : tensor<16x24xf32>)
         shared_gate(%sg : tensor<2x16xf32>)
         {routing = #moe.routing<softmax_topk>, top_k = 2 : i64, activation = #moe.activation<silu>,
          gate_up_layout = #moe.gate_up_layout<concatenated>} -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

func.func @layer_result_type(%x: tensor<?x16xf32>, %wr: tensor<4x16xf32>,
    %wgu: tensor<4x64x16xf32>, %wd: tensor<4x16x32xf32>) -> tensor<?x16xbf16> {
  // expected-error @+1 {{result type 'tensor<?x16xbf16>' must equal the type of 'hidden', 'tensor<?x16xf32>'}}
  %y = moe.layer %x : tensor<?x16xf32> router_weight(%wr : tensor<4x16xf32>)
         gate_up(%wgu : tensor<4x64x16xf32>) down(%wd : tensor<4x16x32xf32>)
         {routing = #moe.routing<softmax_topk>, top_k = 2 : i64, activation = #moe.activation<silu>,
          gate_up_layout = #moe.gate_up_layout<concatenated>} -> tensor<?x16xbf16>
  return %y : tensor<?x16xbf16>
}

// -----

func.func @layer_top_k_too_large(%x: tensor<?x16xf32>, %wr: tensor<4x16xf32>,
    %wgu: tensor<4x64x16xf32>, %wd: tensor<4x16x32xf32>) -> tensor<?x16xf32> {
  // expected-error @+1 {{top_k = 5 exceeds the number of experts (4)}}
  %y = moe.layer %x : tensor<?x16xf32> router_weight(%wr : tensor<4x16xf32>)
         gate_up(%wgu : tensor<4x64x16xf32>) down(%wd : tensor<4x16x32xf32>)
         {routing = #moe.routing<softmax_topk>, top_k = 5 : i64, activation = #moe.activation<silu>,
          gate_up_layout = #moe.gate_up_layout<concatenated>} -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

func.func @layer_top_k_zero(%x: tensor<?x16xf32>, %wr: tensor<4x16xf32>,
    %wgu: tensor<4x64x16xf32>, %wd: tensor<4x16x32xf32>) -> tensor<?x16xf32> {
  // expected-error @+3 {{attribute 'top_k' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
  %y = moe.layer %x : tensor<?x16xf32> router_weight(%wr : tensor<4x16xf32>)
         gate_up(%wgu : tensor<4x64x16xf32>) down(%wd : tensor<4x16x32xf32>)
         {routing = #moe.routing<softmax_topk>, top_k = 0 : i64, activation = #moe.activation<silu>,
          gate_up_layout = #moe.gate_up_layout<concatenated>} -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

func.func @layer_int_weights(%x: tensor<?x16xf32>, %wr: tensor<4x16xf32>,
    %wgu: tensor<4x64x16xi8>, %wd: tensor<4x16x32xf32>) -> tensor<?x16xf32> {
  // expected-error @+1 {{operand #2 must be ranked tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float or f8E4M3FN type or f4E2M1FN type values}}
  %y = moe.layer %x : tensor<?x16xf32> router_weight(%wr : tensor<4x16xf32>)
         gate_up(%wgu : tensor<4x64x16xi8>) down(%wd : tensor<4x16x32xf32>)
         {routing = #moe.routing<softmax_topk>, top_k = 2 : i64, activation = #moe.activation<silu>,
          gate_up_layout = #moe.gate_up_layout<concatenated>} -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

// routing attributes (shared by moe.layer and moe.route)

func.func @route_scaling_factor(%l: tensor<4x8xf32>) -> tensor<4x2xf32> {
  // expected-error @+1 {{routed_scaling_factor must be positive and finite, got -1}}
  %ids, %w = moe.route %l {routing = #moe.routing<softmax_topk>, top_k = 2 : i64,
                           routed_scaling_factor = -1.0 : f64}
      : tensor<4x8xf32> -> tensor<4x2xi32>, tensor<4x2xf32>
  return %w : tensor<4x2xf32>
}

// -----

func.func @route_groups_on_softmax(%l: tensor<4x8xf32>) -> tensor<4x2xf32> {
  // expected-error @+1 {{num_groups and topk_groups apply only to routing 'sigmoid_group_topk'}}
  %ids, %w = moe.route %l {routing = #moe.routing<softmax_topk>, top_k = 2 : i64, num_groups = 2 : i64}
      : tensor<4x8xf32> -> tensor<4x2xi32>, tensor<4x2xf32>
  return %w : tensor<4x2xf32>
}

// -----

func.func @route_zero_groups(%l: tensor<4x8xf32>) -> tensor<4x2xf32> {
  // expected-error @+1 {{num_groups must be positive, got 0}}
  %ids, %w = moe.route %l {routing = #moe.routing<sigmoid_group_topk>, top_k = 2 : i64,
                           num_groups = 0 : i64}
      : tensor<4x8xf32> -> tensor<4x2xi32>, tensor<4x2xf32>
  return %w : tensor<4x2xf32>
}

// -----

func.func @route_topk_groups_range(%l: tensor<4x8xf32>) -> tensor<4x2xf32> {
  // expected-error @+1 {{topk_groups must be in [1, num_groups = 2], got 3}}
  %ids, %w = moe.route %l {routing = #moe.routing<sigmoid_group_topk>, top_k = 2 : i64,
                           num_groups = 2 : i64, topk_groups = 3 : i64}
      : tensor<4x8xf32> -> tensor<4x2xi32>, tensor<4x2xf32>
  return %w : tensor<4x2xf32>
}

// -----

func.func @route_uneven_groups(%l: tensor<4x10xf32>) -> tensor<4x2xf32> {
  // expected-error @+1 {{the 10 experts do not split into num_groups = 4 equal groups}}
  %ids, %w = moe.route %l {routing = #moe.routing<sigmoid_group_topk>, top_k = 2 : i64,
                           num_groups = 4 : i64, topk_groups = 2 : i64}
      : tensor<4x10xf32> -> tensor<4x2xi32>, tensor<4x2xf32>
  return %w : tensor<4x2xf32>
}

// -----

func.func @route_singleton_groups(%l: tensor<4x8xf32>) -> tensor<4x2xf32> {
  // expected-error @+1 {{groups of 1 expert: a group's score is the sum of its two best experts, so each group needs at least 2}}
  %ids, %w = moe.route %l {routing = #moe.routing<sigmoid_group_topk>, top_k = 2 : i64,
                           num_groups = 8 : i64, topk_groups = 2 : i64}
      : tensor<4x8xf32> -> tensor<4x2xi32>, tensor<4x2xf32>
  return %w : tensor<4x2xf32>
}

// -----

func.func @route_topk_beyond_kept_groups(%l: tensor<4x16xf32>) -> tensor<4x6xf32> {
  // expected-error @+1 {{top_k = 6 exceeds the 4 experts in the topk_groups = 1 groups kept}}
  %ids, %w = moe.route %l {routing = #moe.routing<sigmoid_group_topk>, top_k = 6 : i64,
                           num_groups = 4 : i64, topk_groups = 1 : i64}
      : tensor<4x16xf32> -> tensor<4x6xi32>, tensor<4x6xf32>
  return %w : tensor<4x6xf32>
}

// -----

// moe.route shapes

func.func @route_ids_width(%l: tensor<4x8xf32>) -> tensor<4x2xf32> {
  // expected-error @+1 {{result expert_ids dimension 1 (K) is 3, but attribute top_k makes K = 2}}
  %ids, %w = moe.route %l {routing = #moe.routing<softmax_topk>, top_k = 2 : i64}
      : tensor<4x8xf32> -> tensor<4x3xi32>, tensor<4x2xf32>
  return %w : tensor<4x2xf32>
}

// -----

func.func @route_weights_tokens(%l: tensor<4x8xf32>) -> tensor<5x2xf32> {
  // expected-error @+1 {{result weights dimension 0 (T) is 5, but logits dimension 0 makes T = 4}}
  %ids, %w = moe.route %l {routing = #moe.routing<softmax_topk>, top_k = 2 : i64}
      : tensor<4x8xf32> -> tensor<4x2xi32>, tensor<5x2xf32>
  return %w : tensor<5x2xf32>
}

// -----

func.func @route_ids_dtype(%l: tensor<4x8xf32>) -> tensor<4x2xf32> {
  // expected-error @+1 {{result #0 must be ranked tensor of 32-bit signless integer values}}
  %ids, %w = moe.route %l {routing = #moe.routing<softmax_topk>, top_k = 2 : i64}
      : tensor<4x8xf32> -> tensor<4x2xi64>, tensor<4x2xf32>
  return %w : tensor<4x2xf32>
}

// -----

// moe.sort

func.func @sort_slots(%ids: tensor<4x2xi32>) -> tensor<9xi32> {
  // expected-error @+1 {{result permutation dimension 0 (S) is 9, but expert_ids [T, K] (T * K) makes S = 8}}
  %p, %o, %n = moe.sort %ids {num_experts = 4 : i64} : tensor<4x2xi32> -> tensor<9xi32>, tensor<4xi32>, tensor<i32>
  return %p : tensor<9xi32>
}

// -----

func.func @sort_offsets(%ids: tensor<4x2xi32>) -> tensor<8xi32> {
  // expected-error @+1 {{result offsets dimension 0 (E) is 5, but attribute num_experts makes E = 4}}
  %p, %o, %n = moe.sort %ids {num_experts = 4 : i64} : tensor<4x2xi32> -> tensor<8xi32>, tensor<5xi32>, tensor<i32>
  return %p : tensor<8xi32>
}

// -----

func.func @sort_num_valid_rank(%ids: tensor<4x2xi32>) -> tensor<8xi32> {
  // expected-error @+1 {{result num_valid must be a rank-0 tensor [], got 'tensor<1xi32>'}}
  %p, %o, %n = moe.sort %ids {num_experts = 4 : i64} : tensor<4x2xi32> -> tensor<8xi32>, tensor<4xi32>, tensor<1xi32>
  return %p : tensor<8xi32>
}

// -----

func.func @sort_id_range(%ids: tensor<4x2xi32>) -> tensor<8xi32> {
  // expected-error @+1 {{the expert ids up to 2147483651 do not fit i32}}
  %p, %o, %n = moe.sort %ids {num_experts = 4 : i64, first_expert = 2147483647 : i64}
      : tensor<4x2xi32> -> tensor<8xi32>, tensor<4xi32>, tensor<i32>
  return %p : tensor<8xi32>
}

// -----

func.func @sort_negative_first_expert(%ids: tensor<4x2xi32>) -> tensor<8xi32> {
  // expected-error @+1 {{attribute 'first_expert' failed to satisfy constraint: 64-bit signless integer attribute whose value is non-negative}}
  %p, %o, %n = moe.sort %ids {num_experts = 4 : i64, first_expert = -1 : i64}
      : tensor<4x2xi32> -> tensor<8xi32>, tensor<4xi32>, tensor<i32>
  return %p : tensor<8xi32>
}

// -----

// moe.permute

func.func @permute_rows(%x: tensor<4x16xf32>, %p: tensor<12xi32>, %n: tensor<i32>) -> tensor<12x16xf32> {
  // expected-error @+1 {{permutation has 12 rows, but hidden's 4 tokens times top_k = 2 make 8}}
  %r = moe.permute %x, %p, %n {top_k = 2 : i64} : tensor<4x16xf32>, tensor<12xi32>, tensor<i32> -> tensor<12x16xf32>
  return %r : tensor<12x16xf32>
}

// -----

func.func @permute_width(%x: tensor<4x16xf32>, %p: tensor<8xi32>, %n: tensor<i32>) -> tensor<8x15xf32> {
  // expected-error @+1 {{result dimension 1 (H) is 15, but hidden dimension 1 makes H = 16}}
  %r = moe.permute %x, %p, %n {top_k = 2 : i64} : tensor<4x16xf32>, tensor<8xi32>, tensor<i32> -> tensor<8x15xf32>
  return %r : tensor<8x15xf32>
}

// -----

// Only f32 rows may be stored as bf16 (moe-cast-experts-bf16); no other change.
func.func @permute_dtype(%x: tensor<4x16xf32>, %p: tensor<8xi32>, %n: tensor<i32>) -> tensor<8x16xf16> {
  // expected-error @+1 {{result element type must match that of 'hidden' (or be bf16 for f32 'hidden')}}
  %r = moe.permute %x, %p, %n {top_k = 2 : i64} : tensor<4x16xf32>, tensor<8xi32>, tensor<i32> -> tensor<8x16xf16>
  return %r : tensor<8x16xf16>
}

// -----

func.func @permute_bf16_to_f32(%x: tensor<4x16xbf16>, %p: tensor<8xi32>, %n: tensor<i32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{result element type must match that of 'hidden'}}
  %r = moe.permute %x, %p, %n {top_k = 2 : i64} : tensor<4x16xbf16>, tensor<8xi32>, tensor<i32> -> tensor<8x16xf32>
  return %r : tensor<8x16xf32>
}

// -----

// moe.grouped_matmul

func.func @gmm_contraction(%x: tensor<?x64xbf16>, %w: tensor<8x32x65xbf16>, %o: tensor<8xi32>) -> tensor<?x32xbf16> {
  // expected-error @+1 {{weights dimension 2 (K) is 65, but lhs dimension 1 makes K = 64}}
  %y = moe.grouped_matmul %x, %w, %o : tensor<?x64xbf16>, tensor<8x32x65xbf16>, tensor<8xi32> -> tensor<?x32xbf16>
  return %y : tensor<?x32xbf16>
}

// -----

func.func @gmm_offsets(%x: tensor<?x64xbf16>, %w: tensor<8x32x64xbf16>, %o: tensor<7xi32>) -> tensor<?x32xbf16> {
  // expected-error @+1 {{offsets dimension 0 (E) is 7, but weights dimension 0 makes E = 8}}
  %y = moe.grouped_matmul %x, %w, %o : tensor<?x64xbf16>, tensor<8x32x64xbf16>, tensor<7xi32> -> tensor<?x32xbf16>
  return %y : tensor<?x32xbf16>
}

// -----

func.func @gmm_bias(%x: tensor<?x64xbf16>, %w: tensor<8x32x64xbf16>, %o: tensor<8xi32>, %b: tensor<8x64xf32>) -> tensor<?x32xbf16> {
  // expected-error @+1 {{bias dimension 1 (N) is 64, but weights dimension 1 makes N = 32}}
  %y = moe.grouped_matmul %x, %w, %o bias(%b : tensor<8x64xf32>) : tensor<?x64xbf16>, tensor<8x32x64xbf16>, tensor<8xi32> -> tensor<?x32xbf16>
  return %y : tensor<?x32xbf16>
}

// -----

func.func @gmm_fp8_lhs_without_scales(%x: tensor<?x64xf8E4M3FN>, %w: tensor<8x32x64xf8E4M3FN>,
    %ws: tensor<8x1x1xf32>, %o: tensor<8xi32>) -> tensor<?x32xbf16> {
  // expected-error @+1 {{operand 'lhs' is f8E4M3FN and needs 'lhs_scales'}}
  %y = moe.grouped_matmul %x, %w, %o weight_scales(%ws : tensor<8x1x1xf32>)
      : tensor<?x64xf8E4M3FN>, tensor<8x32x64xf8E4M3FN>, tensor<8xi32> -> tensor<?x32xbf16>
  return %y : tensor<?x32xbf16>
}

// -----

func.func @gmm_scales_without_fp8_lhs(%x: tensor<?x64xbf16>, %xs: tensor<?x1xf32>, %w: tensor<8x32x64xbf16>,
    %o: tensor<8xi32>) -> tensor<?x32xbf16> {
  // expected-error @+1 {{'lhs_scales' is given but operand 'lhs' is not FP8}}
  %y = moe.grouped_matmul %x, %w, %o lhs_scales(%xs : tensor<?x1xf32>)
      : tensor<?x64xbf16>, tensor<8x32x64xbf16>, tensor<8xi32> -> tensor<?x32xbf16>
  return %y : tensor<?x32xbf16>
}

// -----

func.func @gmm_fp8_weights_without_scales(%x: tensor<?x64xbf16>, %w: tensor<8x32x64xf8E4M3FN>,
    %o: tensor<8xi32>) -> tensor<?x32xbf16> {
  // expected-error @+1 {{operand 'weights' is f8E4M3FN and needs 'weight_scales'}}
  %y = moe.grouped_matmul %x, %w, %o : tensor<?x64xbf16>, tensor<8x32x64xf8E4M3FN>, tensor<8xi32> -> tensor<?x32xbf16>
  return %y : tensor<?x32xbf16>
}

// -----

func.func @gmm_scales_without_fp8_weights(%x: tensor<?x64xbf16>, %w: tensor<8x32x64xbf16>,
    %ws: tensor<8x1x1xf32>, %o: tensor<8xi32>) -> tensor<?x32xbf16> {
  // expected-error @+1 {{'weight_scales' is given but operand 'weights' is not FP8}}
  %y = moe.grouped_matmul %x, %w, %o weight_scales(%ws : tensor<8x1x1xf32>)
      : tensor<?x64xbf16>, tensor<8x32x64xbf16>, tensor<8xi32> -> tensor<?x32xbf16>
  return %y : tensor<?x32xbf16>
}

// -----

func.func @gmm_fp8_lhs_bf16_weights(%x: tensor<?x64xf8E4M3FN>, %xs: tensor<?x1xf32>, %w: tensor<8x32x64xbf16>,
    %o: tensor<8xi32>) -> tensor<?x32xbf16> {
  // expected-error @+1 {{an FP8 'lhs' needs FP8 'weights'}}
  %y = moe.grouped_matmul %x, %w, %o lhs_scales(%xs : tensor<?x1xf32>)
      : tensor<?x64xf8E4M3FN>, tensor<8x32x64xbf16>, tensor<8xi32> -> tensor<?x32xbf16>
  return %y : tensor<?x32xbf16>
}

// -----

// f32 rows may meet bf16 weights (moe-cast-experts-bf16), not the other way.
func.func @gmm_mixed_types(%x: tensor<?x64xbf16>, %w: tensor<8x32x64xf32>, %o: tensor<8xi32>) -> tensor<?x32xf32> {
  // expected-error @+1 {{'lhs' ('bf16') and 'weights' ('f32') must have one element type}}
  %y = moe.grouped_matmul %x, %w, %o : tensor<?x64xbf16>, tensor<8x32x64xf32>, tensor<8xi32> -> tensor<?x32xf32>
  return %y : tensor<?x32xf32>
}

// -----

func.func @gmm_f16_rows_bf16_weights(%x: tensor<?x64xf16>, %w: tensor<8x32x64xbf16>, %o: tensor<8xi32>) -> tensor<?x32xf32> {
  // expected-error @+1 {{'lhs' ('f16') and 'weights' ('bf16') must have one element type}}
  %y = moe.grouped_matmul %x, %w, %o : tensor<?x64xf16>, tensor<8x32x64xbf16>, tensor<8xi32> -> tensor<?x32xf32>
  return %y : tensor<?x32xf32>
}

// -----

func.func @gmm_weight_scale_blocks(%x: tensor<?x200xf8E4M3FN>, %xs: tensor<?x2xf32>,
    %w: tensor<4x300x200xf8E4M3FN>, %ws: tensor<4x2x2xf32>, %o: tensor<4xi32>) -> tensor<?x300xbf16> {
  // expected-error @+1 {{weight_scales dimension 1 (ceil(N/128)) is 2, but weights dimension 1 / 128 makes ceil(N/128) = 3}}
  %y = moe.grouped_matmul %x, %w, %o lhs_scales(%xs : tensor<?x2xf32>) weight_scales(%ws : tensor<4x2x2xf32>)
      : tensor<?x200xf8E4M3FN>, tensor<4x300x200xf8E4M3FN>, tensor<4xi32> -> tensor<?x300xbf16>
  return %y : tensor<?x300xbf16>
}

// -----

func.func @gmm_lhs_scale_groups(%x: tensor<?x200xf8E4M3FN>, %xs: tensor<?x1xf32>,
    %w: tensor<4x300x200xf8E4M3FN>, %ws: tensor<4x3x2xf32>, %o: tensor<4xi32>) -> tensor<?x300xbf16> {
  // expected-error @+1 {{lhs_scales dimension 1 (ceil(K/128)) is 1, but weights dimension 2 / 128 makes ceil(K/128) = 2}}
  %y = moe.grouped_matmul %x, %w, %o lhs_scales(%xs : tensor<?x1xf32>) weight_scales(%ws : tensor<4x3x2xf32>)
      : tensor<?x200xf8E4M3FN>, tensor<4x300x200xf8E4M3FN>, tensor<4xi32> -> tensor<?x300xbf16>
  return %y : tensor<?x300xbf16>
}

// -----

// MXFP4 (docs/dialect.md, "MXFP4 layout"): f4E2M1FN weights [E, N, K] with
// f8E8M0FNU scales [E, N, ceil(K/32)], unquantised rows.
func.func @gmm_mxfp4_without_scales(%x: tensor<?x64xf32>, %w: tensor<8x32x64xf4E2M1FN>,
    %o: tensor<8xi32>) -> tensor<?x32xf32> {
  // expected-error @+1 {{operand 'weights' is f4E2M1FN and needs 'weight_scales' of f8E8M0FNU, one per 32 along K}}
  %y = moe.grouped_matmul %x, %w, %o : tensor<?x64xf32>, tensor<8x32x64xf4E2M1FN>, tensor<8xi32> -> tensor<?x32xf32>
  return %y : tensor<?x32xf32>
}

// -----

func.func @gmm_mxfp4_f32_scales(%x: tensor<?x64xf32>, %w: tensor<8x32x64xf4E2M1FN>,
    %ws: tensor<8x32x2xf32>, %o: tensor<8xi32>) -> tensor<?x32xf32> {
  // expected-error @+1 {{operand 'weights' is f4E2M1FN and needs 'weight_scales' of f8E8M0FNU, one per 32 along K}}
  %y = moe.grouped_matmul %x, %w, %o weight_scales(%ws : tensor<8x32x2xf32>)
      : tensor<?x64xf32>, tensor<8x32x64xf4E2M1FN>, tensor<8xi32> -> tensor<?x32xf32>
  return %y : tensor<?x32xf32>
}

// -----

func.func @gmm_e8m0_scales_fp8_weights(%x: tensor<?x64xf32>, %w: tensor<8x32x64xf8E4M3FN>,
    %ws: tensor<8x32x2xf8E8M0FNU>, %o: tensor<8xi32>) -> tensor<?x32xf32> {
  // expected-error @+1 {{'weight_scales' of 'f8E8M0FNU' are MXFP4 scales, but operand 'weights' is not f4E2M1FN}}
  %y = moe.grouped_matmul %x, %w, %o weight_scales(%ws : tensor<8x32x2xf8E8M0FNU>)
      : tensor<?x64xf32>, tensor<8x32x64xf8E4M3FN>, tensor<8xi32> -> tensor<?x32xf32>
  return %y : tensor<?x32xf32>
}

// -----

func.func @gmm_e8m0_scales_f32_weights(%x: tensor<?x64xf32>, %w: tensor<8x32x64xf32>,
    %ws: tensor<8x32x2xf8E8M0FNU>, %o: tensor<8xi32>) -> tensor<?x32xf32> {
  // expected-error @+1 {{'weight_scales' of 'f8E8M0FNU' are MXFP4 scales, but operand 'weights' is not f4E2M1FN}}
  %y = moe.grouped_matmul %x, %w, %o weight_scales(%ws : tensor<8x32x2xf8E8M0FNU>)
      : tensor<?x64xf32>, tensor<8x32x64xf32>, tensor<8xi32> -> tensor<?x32xf32>
  return %y : tensor<?x32xf32>
}

// -----

func.func @gmm_mxfp4_fp8_rows(%x: tensor<?x64xf8E4M3FN>, %xs: tensor<?x1xf32>,
    %w: tensor<8x32x64xf4E2M1FN>, %ws: tensor<8x32x2xf8E8M0FNU>, %o: tensor<8xi32>) -> tensor<?x32xf32> {
  // expected-error @+1 {{MXFP4 'weights' take unquantised rows (f32, bf16, f16 or f64), not FP8 ones}}
  %y = moe.grouped_matmul %x, %w, %o lhs_scales(%xs : tensor<?x1xf32>) weight_scales(%ws : tensor<8x32x2xf8E8M0FNU>)
      : tensor<?x64xf8E4M3FN>, tensor<8x32x64xf4E2M1FN>, tensor<8xi32> -> tensor<?x32xf32>
  return %y : tensor<?x32xf32>
}

// -----

// K = 70: three blocks of 32 (the last one partial).
func.func @gmm_mxfp4_scale_blocks(%x: tensor<?x70xf32>, %w: tensor<4x16x70xf4E2M1FN>,
    %ws: tensor<4x16x2xf8E8M0FNU>, %o: tensor<4xi32>) -> tensor<?x16xf32> {
  // expected-error @+1 {{weight_scales dimension 2 (ceil(K/32)) is 2, but weights dimension 2 / 32 makes ceil(K/32) = 3}}
  %y = moe.grouped_matmul %x, %w, %o weight_scales(%ws : tensor<4x16x2xf8E8M0FNU>)
      : tensor<?x70xf32>, tensor<4x16x70xf4E2M1FN>, tensor<4xi32> -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

// One scale per row, not per 128 rows as for FP8.
func.func @gmm_mxfp4_scale_rows(%x: tensor<?x64xf32>, %w: tensor<4x16x64xf4E2M1FN>,
    %ws: tensor<4x1x2xf8E8M0FNU>, %o: tensor<4xi32>) -> tensor<?x16xf32> {
  // expected-error @+1 {{weight_scales dimension 1 (N) is 1, but weights dimension 1 makes N = 16}}
  %y = moe.grouped_matmul %x, %w, %o weight_scales(%ws : tensor<4x1x2xf8E8M0FNU>)
      : tensor<?x64xf32>, tensor<4x16x64xf4E2M1FN>, tensor<4xi32> -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

func.func @gmm_mxfp4_result(%x: tensor<?x64xf32>, %w: tensor<4x16x64xf4E2M1FN>,
    %ws: tensor<4x16x2xf8E8M0FNU>, %o: tensor<4xi32>) -> tensor<?x16xf32> {
  // expected-error @+1 {{result dimension 1 (N/2) is 16, but weights dimension 1 / 2 makes N/2 = 8}}
  %y = moe.grouped_matmul %x, %w, %o weight_scales(%ws : tensor<4x16x2xf8E8M0FNU>)
      {epilogue = #moe.activation<silu>, epilogue_layout = #moe.gate_up_layout<concatenated>}
      : tensor<?x64xf32>, tensor<4x16x64xf4E2M1FN>, tensor<4xi32> -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

func.func @gmm_epilogue_without_layout(%x: tensor<?x64xbf16>, %w: tensor<8x32x64xbf16>, %o: tensor<8xi32>) -> tensor<?x16xbf16> {
  // expected-error @+1 {{'epilogue' and 'epilogue_layout' go together}}
  %y = moe.grouped_matmul %x, %w, %o {epilogue = #moe.activation<silu>}
      : tensor<?x64xbf16>, tensor<8x32x64xbf16>, tensor<8xi32> -> tensor<?x16xbf16>
  return %y : tensor<?x16xbf16>
}

// -----

func.func @gmm_epilogue_separate(%x: tensor<?x64xbf16>, %w: tensor<8x32x64xbf16>, %o: tensor<8xi32>) -> tensor<?x16xbf16> {
  // expected-error @+1 {{layout 'separate' is not a fused layout: concatenate gate and up first}}
  %y = moe.grouped_matmul %x, %w, %o {epilogue = #moe.activation<silu>, epilogue_layout = #moe.gate_up_layout<separate>}
      : tensor<?x64xbf16>, tensor<8x32x64xbf16>, tensor<8xi32> -> tensor<?x16xbf16>
  return %y : tensor<?x16xbf16>
}

// -----

func.func @gmm_gated_epilogue_width(%x: tensor<?x64xbf16>, %w: tensor<8x32x64xbf16>, %o: tensor<8xi32>) -> tensor<?x32xbf16> {
  // expected-error @+1 {{result dimension 1 (N/2) is 32, but weights dimension 1 / 2 makes N/2 = 16}}
  %y = moe.grouped_matmul %x, %w, %o {epilogue = #moe.activation<silu>, epilogue_layout = #moe.gate_up_layout<concatenated>}
      : tensor<?x64xbf16>, tensor<8x32x64xbf16>, tensor<8xi32> -> tensor<?x32xbf16>
  return %y : tensor<?x32xbf16>
}

// -----

func.func @gmm_gated_odd(%x: tensor<?x64xbf16>, %w: tensor<8x33x64xbf16>, %o: tensor<8xi32>) -> tensor<?x16xbf16> {
  // expected-error @+1 {{weights dimension 1 (N = 33) must be even: it holds gate and up together}}
  %y = moe.grouped_matmul %x, %w, %o {epilogue = #moe.activation<silu>, epilogue_layout = #moe.gate_up_layout<interleaved>}
      : tensor<?x64xbf16>, tensor<8x33x64xbf16>, tensor<8xi32> -> tensor<?x16xbf16>
  return %y : tensor<?x16xbf16>
}

// -----

func.func @gmm_swiglu_params_ungated(%x: tensor<?x64xbf16>, %w: tensor<8x32x64xbf16>, %o: tensor<8xi32>) -> tensor<?x32xbf16> {
  // expected-error @+1 {{alpha, beta and limit need a gated layout (the SwiGLU form), not 'none'}}
  %y = moe.grouped_matmul %x, %w, %o {epilogue = #moe.activation<silu, alpha = 1.702>, epilogue_layout = #moe.gate_up_layout<none>}
      : tensor<?x64xbf16>, tensor<8x32x64xbf16>, tensor<8xi32> -> tensor<?x32xbf16>
  return %y : tensor<?x32xbf16>
}

// -----

// moe.activation

func.func @activation_result_dtype(%x: tensor<4x8xf32>) -> tensor<4x4xbf16> {
  // expected-error @+1 {{result element type must match that of 'input'}}
  %y = moe.activation %x {activation = #moe.activation<silu>, layout = #moe.gate_up_layout<concatenated>}
      : tensor<4x8xf32> -> tensor<4x4xbf16>
  return %y : tensor<4x4xbf16>
}

// -----

func.func @activation_separate(%x: tensor<4x8xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{layout 'separate' is not a fused layout: concatenate gate and up first}}
  %y = moe.activation %x {activation = #moe.activation<silu>, layout = #moe.gate_up_layout<separate>}
      : tensor<4x8xf32> -> tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}

// -----

func.func @activation_ungated_width(%x: tensor<4x8xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{result dimension 1 (N) is 4, but input dimension 1 makes N = 8}}
  %y = moe.activation %x {activation = #moe.activation<relu>, layout = #moe.gate_up_layout<none>}
      : tensor<4x8xf32> -> tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}

// -----

// moe.combine

func.func @combine_slots(%r: tensor<10x16xf32>, %p: tensor<10xi32>, %w: tensor<4x2xf32>, %n: tensor<i32>) -> tensor<4x16xf32> {
  // expected-error @+1 {{rows has 10 slots, but weights [T, K] makes T * K = 8}}
  %y = moe.combine %r, %p, %w, %n : tensor<10x16xf32>, tensor<10xi32>, tensor<4x2xf32>, tensor<i32> -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

func.func @combine_permutation(%r: tensor<8x16xf32>, %p: tensor<9xi32>, %w: tensor<4x2xf32>, %n: tensor<i32>) -> tensor<4x16xf32> {
  // expected-error @+1 {{permutation dimension 0 (S) is 9, but rows dimension 0 makes S = 8}}
  %y = moe.combine %r, %p, %w, %n : tensor<8x16xf32>, tensor<9xi32>, tensor<4x2xf32>, tensor<i32> -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

func.func @combine_result(%r: tensor<8x16xf32>, %p: tensor<8xi32>, %w: tensor<4x2xf32>, %n: tensor<i32>) -> tensor<5x16xf32> {
  // expected-error @+1 {{result dimension 0 (T) is 5, but weights dimension 0 makes T = 4}}
  %y = moe.combine %r, %p, %w, %n : tensor<8x16xf32>, tensor<8xi32>, tensor<4x2xf32>, tensor<i32> -> tensor<5x16xf32>
  return %y : tensor<5x16xf32>
}

// -----

// moe.quantize

func.func @quantize_scales(%x: tensor<4x300xbf16>) -> tensor<4x2xf32> {
  // expected-error @+1 {{result scales dimension 1 (ceil(K/128)) is 2, but input dimension 1 / 128 makes ceil(K/128) = 3}}
  %q, %s = moe.quantize %x : tensor<4x300xbf16> -> tensor<4x300xf8E4M3FN>, tensor<4x2xf32>
  return %s : tensor<4x2xf32>
}

// -----

func.func @quantize_rows(%x: tensor<4x300xbf16>) -> tensor<4x3xf32> {
  // expected-error @+1 {{result dimension 0 (M) is 5, but input dimension 0 makes M = 4}}
  %q, %s = moe.quantize %x : tensor<4x300xbf16> -> tensor<5x300xf8E4M3FN>, tensor<4x3xf32>
  return %s : tensor<4x3xf32>
}

// -----

// moe.ep_shard and the every-rank attributes

func.func @ep_shard_uneven(%w: tensor<6x4xf32>) -> tensor<1x4xf32> {
  // expected-error @+1 {{input's 6 experts do not split evenly over ep_size = 4}}
  %y = moe.ep_shard %w {ep_size = 4 : i64} : tensor<6x4xf32> -> tensor<1x4xf32>
  return %y : tensor<1x4xf32>
}

// -----

func.func @ep_shard_dynamic_experts(%w: tensor<?x4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{input's dynamic experts do not split evenly over ep_size = 2}}
  %y = moe.ep_shard %w {ep_size = 2 : i64} : tensor<?x4xf32> -> tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// -----

func.func @ep_shard_count(%w: tensor<8x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{result must hold 2 experts (8 / ep_size 4), got 4}}
  %y = moe.ep_shard %w {ep_size = 4 : i64} : tensor<8x4xf32> -> tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}

// -----

func.func @ep_shard_inner(%w: tensor<8x4xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{result dimension 1 (3) differs from the input's (4)}}
  %y = moe.ep_shard %w {ep_size = 4 : i64} : tensor<8x4xf32> -> tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}

// -----

func.func @ep_shard_element(%w: tensor<8x4xf32>) -> tensor<2x4xbf16> {
  // expected-error @+1 {{result element type 'bf16' differs from the input's 'f32'}}
  %y = moe.ep_shard %w {ep_size = 4 : i64} : tensor<8x4xf32> -> tensor<2x4xbf16>
  return %y : tensor<2x4xbf16>
}

// -----

func.func @ep_shard_scalar(%w: tensor<f32>) -> tensor<f32> {
  // expected-error @+1 {{input and result must have the same rank, at least 1 (experts along dimension 0)}}
  %y = moe.ep_shard %w {ep_size = 2 : i64} : tensor<f32> -> tensor<f32>
  return %y : tensor<f32>
}

// -----

func.func @sort_every_rank_first_expert(%ids: tensor<4x2xi32>) -> tensor<8xi32> {
  // expected-error @+1 {{first_expert must be 0 with ep_size (the rank picks the first expert), got 2}}
  %p, %o, %n = moe.sort %ids {num_experts = 2 : i64, first_expert = 2 : i64, ep_size = 2 : i64}
      : tensor<4x2xi32> -> tensor<8xi32>, tensor<2xi32>, tensor<i32>
  return %p : tensor<8xi32>
}

// -----

func.func @sort_every_rank_id_range(%ids: tensor<4x2xi32>) -> tensor<8xi32> {
  // expected-error @+1 {{the expert ids up to 4294967296 do not fit i32}}
  %p, %o, %n = moe.sort %ids {num_experts = 1073741824 : i64, ep_size = 4 : i64}
      : tensor<4x2xi32> -> tensor<8xi32>, tensor<1073741824xi32>, tensor<i32>
  return %p : tensor<8xi32>
}

// -----

// moe.all_reduce

// A group of one is a group (the every-rank program of --ep-size=1); none is not.
func.func @all_reduce_no_rank(%x: tensor<4x16xf32>) -> tensor<4x16xf32> {
  // expected-error @+1 {{attribute 'ep_size' failed to satisfy constraint: 64-bit signless integer attribute whose minimum value is 1}}
  %y = moe.all_reduce %x {ep_size = 0 : i64} : tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

func.func @combine_gate_without_addend(%r: tensor<8x16xf32>, %p: tensor<8xi32>, %w: tensor<4x2xf32>, %n: tensor<i32>,
    %g: tensor<4x1xf32>) -> tensor<4x16xf32> {
  // expected-error @+1 {{'addend_gate' needs an 'addend'}}
  %y = moe.combine %r, %p, %w, %n addend_gate(%g : tensor<4x1xf32>)
      : tensor<8x16xf32>, tensor<8xi32>, tensor<4x2xf32>, tensor<i32> -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

func.func @combine_gate_width(%r: tensor<8x16xf32>, %p: tensor<8xi32>, %w: tensor<4x2xf32>, %n: tensor<i32>,
    %a: tensor<4x16xf32>, %g: tensor<4x2xf32>) -> tensor<4x16xf32> {
  // expected-error @+1 {{addend_gate must be [T, 1], one gate per token, got 'tensor<4x2xf32>'}}
  %y = moe.combine %r, %p, %w, %n addend(%a : tensor<4x16xf32>) addend_gate(%g : tensor<4x2xf32>)
      : tensor<8x16xf32>, tensor<8xi32>, tensor<4x2xf32>, tensor<i32> -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

func.func @combine_addend_shape(%r: tensor<8x16xf32>, %p: tensor<8xi32>, %w: tensor<4x2xf32>, %n: tensor<i32>,
    %a: tensor<4x17xf32>) -> tensor<4x16xf32> {
  // expected-error @+1 {{addend dimension 1 (H) is 17, but rows dimension 1 makes H = 16}}
  %y = moe.combine %r, %p, %w, %n addend(%a : tensor<4x17xf32>)
      : tensor<8x16xf32>, tensor<8xi32>, tensor<4x2xf32>, tensor<i32> -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

// moe.linear

func.func @linear_contraction(%x: tensor<?x64xf32>, %w: tensor<8x63xf32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{weight dimension 1 (K) is 63, but input dimension 1 makes K = 64}}
  %y = moe.linear %x, %w : tensor<?x64xf32>, tensor<8x63xf32> -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}

// -----

func.func @linear_bias(%x: tensor<?x64xf32>, %w: tensor<8x64xf32>, %b: tensor<9xf32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{bias dimension 0 (N) is 9, but weight dimension 0 makes N = 8}}
  %y = moe.linear %x, %w bias(%b : tensor<9xf32>) : tensor<?x64xf32>, tensor<8x64xf32> -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}

// -----

func.func @linear_epilogue_without_layout(%x: tensor<?x64xf32>, %w: tensor<8x64xf32>) -> tensor<?x4xf32> {
  // expected-error @+1 {{'epilogue' and 'epilogue_layout' go together}}
  %y = moe.linear %x, %w {epilogue = #moe.activation<silu>} : tensor<?x64xf32>, tensor<8x64xf32> -> tensor<?x4xf32>
  return %y : tensor<?x4xf32>
}

// -----

func.func @linear_gated_width(%x: tensor<?x64xf32>, %w: tensor<8x64xf32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{result dimension 1 (N/2) is 8, but weight dimension 0 / 2 makes N/2 = 4}}
  %y = moe.linear %x, %w {epilogue = #moe.activation<silu>, epilogue_layout = #moe.gate_up_layout<concatenated>}
      : tensor<?x64xf32>, tensor<8x64xf32> -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}

// -----

func.func @layer_fp8_without_scales(%x: tensor<?x16xf32>, %ids: tensor<?x1xi32>, %w: tensor<?x1xf32>,
    %gu: tensor<2x8x16xf8E4M3FN>, %d: tensor<2x16x4xf32>) -> tensor<?x16xf32> {
  // expected-error @+1 {{'gate_up_weight' is FP8 and needs 'gate_up_scales' (its 128x128 block scales)}}
  %y = moe.layer %x : tensor<?x16xf32> expert_ids(%ids : tensor<?x1xi32>) expert_weights(%w : tensor<?x1xf32>)
         gate_up(%gu : tensor<2x8x16xf8E4M3FN>) down(%d : tensor<2x16x4xf32>)
         {routing = #moe.routing<softmax_topk>, top_k = 1 : i64, activation = #moe.activation<silu>,
          gate_up_layout = #moe.gate_up_layout<concatenated>} -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

func.func @layer_scales_without_fp8(%x: tensor<?x16xf32>, %ids: tensor<?x1xi32>, %w: tensor<?x1xf32>,
    %gu: tensor<2x8x16xf32>, %d: tensor<2x16x4xf32>, %s: tensor<2x1x1xf32>) -> tensor<?x16xf32> {
  // expected-error @+1 {{'down_weight' is not FP8 but has 'down_scales' (its 128x128 block scales)}}
  %y = moe.layer %x : tensor<?x16xf32> expert_ids(%ids : tensor<?x1xi32>) expert_weights(%w : tensor<?x1xf32>)
         gate_up(%gu : tensor<2x8x16xf32>) down(%d : tensor<2x16x4xf32>) down_scales(%s : tensor<2x1x1xf32>)
         {routing = #moe.routing<softmax_topk>, top_k = 1 : i64, activation = #moe.activation<silu>,
          gate_up_layout = #moe.gate_up_layout<concatenated>} -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

// MXFP4 experts (gpt-oss's checkpoints): f4E2M1FN with f8E8M0FNU scales, one
// per row per 32 along K.
func.func @layer_mxfp4_without_scales(%x: tensor<?x64xf32>, %ids: tensor<?x1xi32>, %w: tensor<?x1xf32>,
    %gu: tensor<2x8x64xf4E2M1FN>, %d: tensor<2x64x4xf32>) -> tensor<?x64xf32> {
  // expected-error @+1 {{'gate_up_weight' is MXFP4 and needs 'gate_up_scales' of f8E8M0FNU, one per row per 32 along K}}
  %y = moe.layer %x : tensor<?x64xf32> expert_ids(%ids : tensor<?x1xi32>) expert_weights(%w : tensor<?x1xf32>)
         gate_up(%gu : tensor<2x8x64xf4E2M1FN>) down(%d : tensor<2x64x4xf32>)
         {routing = #moe.routing<softmax_topk>, top_k = 1 : i64, activation = #moe.activation<silu>,
          gate_up_layout = #moe.gate_up_layout<interleaved>} -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

// -----

func.func @layer_e8m0_scales_f32_weights(%x: tensor<?x64xf32>, %ids: tensor<?x1xi32>, %w: tensor<?x1xf32>,
    %gu: tensor<2x8x64xf32>, %d: tensor<2x64x4xf4E2M1FN>, %ds: tensor<2x64x1xf8E8M0FNU>, %gus: tensor<2x8x2xf8E8M0FNU>) -> tensor<?x64xf32> {
  // expected-error @+1 {{'gate_up_scales' of 'f8E8M0FNU' are MXFP4 scales, but 'gate_up_weight' is not f4E2M1FN}}
  %y = moe.layer %x : tensor<?x64xf32> expert_ids(%ids : tensor<?x1xi32>) expert_weights(%w : tensor<?x1xf32>)
         gate_up(%gu : tensor<2x8x64xf32>) down(%d : tensor<2x64x4xf4E2M1FN>)
         gate_up_scales(%gus : tensor<2x8x2xf8E8M0FNU>) down_scales(%ds : tensor<2x64x1xf8E8M0FNU>)
         {routing = #moe.routing<softmax_topk>, top_k = 1 : i64, activation = #moe.activation<silu>,
          gate_up_layout = #moe.gate_up_layout<interleaved>} -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

// -----

// K = 4 along down's rows still takes one (partial) block; 2 is wrong.
func.func @layer_mxfp4_scale_shape(%x: tensor<?x64xf32>, %ids: tensor<?x1xi32>, %w: tensor<?x1xf32>,
    %gu: tensor<2x8x64xf4E2M1FN>, %gus: tensor<2x8x2xf8E8M0FNU>, %d: tensor<2x64x4xf4E2M1FN>, %ds: tensor<2x64x2xf8E8M0FNU>) -> tensor<?x64xf32> {
  // expected-error @+1 {{'down_scales' is 'tensor<2x64x2xf8E8M0FNU>'; 'down_weight' makes [2, 64, 1] (one per row per 32 along K)}}
  %y = moe.layer %x : tensor<?x64xf32> expert_ids(%ids : tensor<?x1xi32>) expert_weights(%w : tensor<?x1xf32>)
         gate_up(%gu : tensor<2x8x64xf4E2M1FN>) down(%d : tensor<2x64x4xf4E2M1FN>)
         gate_up_scales(%gus : tensor<2x8x2xf8E8M0FNU>) down_scales(%ds : tensor<2x64x2xf8E8M0FNU>)
         {routing = #moe.routing<softmax_topk>, top_k = 1 : i64, activation = #moe.activation<silu>,
          gate_up_layout = #moe.gate_up_layout<interleaved>} -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

// -----

func.func @layer_fp8_scale_blocks(%x: tensor<?x200xf32>, %ids: tensor<?x1xi32>, %w: tensor<?x1xf32>,
    %gu: tensor<2x272x200xf8E4M3FN>, %s: tensor<2x2x2xf32>, %d: tensor<2x200x136xf32>) -> tensor<?x200xf32> {
  // expected-error @+1 {{'gate_up_scales' is 'tensor<2x2x2xf32>'; the blocks of 'gate_up_weight' make [2, 3, 2]}}
  %y = moe.layer %x : tensor<?x200xf32> expert_ids(%ids : tensor<?x1xi32>) expert_weights(%w : tensor<?x1xf32>)
         gate_up(%gu : tensor<2x272x200xf8E4M3FN>) down(%d : tensor<2x200x136xf32>) gate_up_scales(%s : tensor<2x2x2xf32>)
         {routing = #moe.routing<softmax_topk>, top_k = 1 : i64, activation = #moe.activation<silu>,
          gate_up_layout = #moe.gate_up_layout<concatenated>} -> tensor<?x200xf32>
  return %y : tensor<?x200xf32>
}

// -----

func.func @layer_fp8_separate(%x: tensor<?x16xf32>, %ids: tensor<?x1xi32>, %w: tensor<?x1xf32>,
    %g: tensor<2x4x16xf8E4M3FN>, %u: tensor<2x4x16xf32>, %s: tensor<2x1x1xf32>, %d: tensor<2x16x4xf32>) -> tensor<?x16xf32> {
  // expected-error @+1 {{FP8 or MXFP4 'gate_up_weight' needs gate and up fused (concatenated or interleaved), not 'separate'}}
  %y = moe.layer %x : tensor<?x16xf32> expert_ids(%ids : tensor<?x1xi32>) expert_weights(%w : tensor<?x1xf32>)
         gate_up(%g : tensor<2x4x16xf8E4M3FN>) up(%u : tensor<2x4x16xf32>) down(%d : tensor<2x16x4xf32>)
         gate_up_scales(%s : tensor<2x1x1xf32>)
         {routing = #moe.routing<softmax_topk>, top_k = 1 : i64, activation = #moe.activation<silu>,
          gate_up_layout = #moe.gate_up_layout<separate>} -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

// moe.multi_linear

func.func @multi_linear_no_weights(%x: tensor<?x64xf32>) {
  // expected-error @+1 {{takes 1 to 4 weights, got 0}}
  "moe.multi_linear"(%x) {operandSegmentSizes = array<i32: 1, 0, 0>} : (tensor<?x64xf32>) -> ()
  return
}

// -----

func.func @multi_linear_five_weights(%x: tensor<?x64xf32>, %w: tensor<8x64xbf16>) {
  // expected-error @+1 {{takes 1 to 4 weights, got 5}}
  %y:5 = moe.multi_linear %x, %w, %w, %w, %w, %w : tensor<?x64xf32>, tensor<8x64xbf16>, tensor<8x64xbf16>, tensor<8x64xbf16>, tensor<8x64xbf16>, tensor<8x64xbf16>
      -> tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>
  return
}

// -----

func.func @multi_linear_results(%x: tensor<?x64xf32>, %w: tensor<8x64xbf16>) -> tensor<?x8xf32> {
  // expected-error @+1 {{has one result per weight: 1 results for 2 weights}}
  %y = moe.multi_linear %x, %w, %w : tensor<?x64xf32>, tensor<8x64xbf16>, tensor<8x64xbf16> -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}

// -----

func.func @multi_linear_biases(%x: tensor<?x64xf32>, %w: tensor<8x64xbf16>, %b: tensor<8xf32>) -> (tensor<?x8xf32>, tensor<?x8xf32>) {
  // expected-error @+1 {{takes no biases or one per weight: 1 biases for 2 weights}}
  %y:2 = moe.multi_linear %x, %w, %w biases(%b : tensor<8xf32>) : tensor<?x64xf32>, tensor<8x64xbf16>, tensor<8x64xbf16> -> tensor<?x8xf32>, tensor<?x8xf32>
  return %y#0, %y#1 : tensor<?x8xf32>, tensor<?x8xf32>
}

// -----

func.func @multi_linear_contraction(%x: tensor<?x64xf32>, %w: tensor<8x64xbf16>, %w1: tensor<8x63xbf16>) -> (tensor<?x8xf32>, tensor<?x8xf32>) {
  // expected-error @+1 {{weight 1 dimension 1 (K) is 63, but input dimension 1 makes K = 64}}
  %y:2 = moe.multi_linear %x, %w, %w1 : tensor<?x64xf32>, tensor<8x64xbf16>, tensor<8x63xbf16> -> tensor<?x8xf32>, tensor<?x8xf32>
  return %y#0, %y#1 : tensor<?x8xf32>, tensor<?x8xf32>
}

// -----

func.func @multi_linear_width(%x: tensor<?x64xf32>, %w: tensor<8x64xbf16>, %w1: tensor<4x64xbf16>) -> (tensor<?x8xf32>, tensor<?x8xf32>) {
  // expected-error @+1 {{result 1 dimension 1 (N1) is 8, but weight 1 dimension 0 makes N1 = 4}}
  %y:2 = moe.multi_linear %x, %w, %w1 : tensor<?x64xf32>, tensor<8x64xbf16>, tensor<4x64xbf16> -> tensor<?x8xf32>, tensor<?x8xf32>
  return %y#0, %y#1 : tensor<?x8xf32>, tensor<?x8xf32>
}

// -----

func.func @multi_linear_weight_types(%x: tensor<?x64xf32>, %w: tensor<8x64xbf16>, %w1: tensor<8x64xf32>) -> (tensor<?x8xf32>, tensor<?x8xf32>) {
  // expected-error @+1 {{weight 1's element type differs from weight 0's ('bf16')}}
  %y:2 = moe.multi_linear %x, %w, %w1 : tensor<?x64xf32>, tensor<8x64xbf16>, tensor<8x64xf32> -> tensor<?x8xf32>, tensor<?x8xf32>
  return %y#0, %y#1 : tensor<?x8xf32>, tensor<?x8xf32>
}

// -----

func.func @multi_linear_result_types(%x: tensor<?x64xf32>, %w: tensor<8x64xbf16>) -> (tensor<?x8xf32>, tensor<?x8xbf16>) {
  // expected-error @+1 {{result 1's element type differs from result 0's ('f32')}}
  %y:2 = moe.multi_linear %x, %w, %w : tensor<?x64xf32>, tensor<8x64xbf16>, tensor<8x64xbf16> -> tensor<?x8xf32>, tensor<?x8xbf16>
  return %y#0, %y#1 : tensor<?x8xf32>, tensor<?x8xbf16>
}

// -----

// moe.add_rms_norm

func.func @add_rms_norm_shapes(%x: tensor<?x16xf32>, %y: tensor<?x8xf32>, %w: tensor<16xf32>) {
  // expected-error @+1 {{addend dimension 1 (K) is 8, but input dimension 1 makes K = 16}}
  %s, %n = moe.add_rms_norm %x, %y, %w {epsilon = 1.0e-6 : f64} : tensor<?x16xf32>, tensor<?x8xf32>, tensor<16xf32> -> tensor<?x16xf32>, tensor<?x16xf32>
  return
}

// -----

func.func @add_rms_norm_groups(%x: tensor<?x16xf32>, %w: tensor<5xf32>) {
  // expected-error @+1 {{weight length 5 does not divide the 16 input columns into groups}}
  %s, %n = moe.add_rms_norm %x, %x, %w {epsilon = 1.0e-6 : f64} : tensor<?x16xf32>, tensor<?x16xf32>, tensor<5xf32> -> tensor<?x16xf32>, tensor<?x16xf32>
  return
}

// -----

func.func @add_rms_norm_bf16(%x: tensor<?x16xbf16>, %w: tensor<16xf32>) {
  // expected-error @+1 {{input must be f32: the residual stream is summed in f32}}
  %s, %n = moe.add_rms_norm %x, %x, %w {epsilon = 1.0e-6 : f64} : tensor<?x16xbf16>, tensor<?x16xbf16>, tensor<16xf32> -> tensor<?x16xbf16>, tensor<?x16xf32>
  return
}

// -----

func.func @add_rms_norm_epsilon(%x: tensor<?x16xf32>, %w: tensor<16xf32>) {
  // expected-error @+1 {{epsilon must be non-negative and finite, got -1}}
  %s, %n = moe.add_rms_norm %x, %x, %w {epsilon = -1.0 : f64} : tensor<?x16xf32>, tensor<?x16xf32>, tensor<16xf32> -> tensor<?x16xf32>, tensor<?x16xf32>
  return
}
