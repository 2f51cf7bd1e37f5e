// RUN: moec-opt %s | moec-opt | FileCheck %s
// RUN: moec-opt %s --mlir-print-op-generic | moec-opt | FileCheck %s

// Round trip of every moe op, in its pretty and generic forms.

// CHECK-LABEL: func.func @mixtral_layer
// CHECK: %[[Y:.*]] = moe.layer %{{[a-z0-9_]+}} : tensor<?x64xbf16>
// CHECK-SAME: router_weight(%{{[a-z0-9_]+}} : tensor<8x64xbf16>)
// CHECK-SAME: gate_up(%{{[a-z0-9_]+}} : tensor<8x256x64xbf16>)
// CHECK-SAME: down(%{{[a-z0-9_]+}} : tensor<8x64x128xbf16>)
// CHECK-SAME: activation = #moe.activation<silu>
// CHECK-SAME: gate_up_layout = #moe.gate_up_layout<concatenated>
// CHECK-SAME: normalize = true
// CHECK-SAME: routing = #moe.routing<softmax_topk>
// CHECK-SAME: top_k = 2 : i64
// CHECK-SAME: -> tensor<?x64xbf16>
func.func @mixtral_layer(%x: tensor<?x64xbf16>, %wr: tensor<8x64xbf16>,
                         %wgu: tensor<8x256x64xbf16>, %wd: tensor<8x64x128xbf16>) -> tensor<?x64xbf16> {
  %y = moe.layer %x : tensor<?x64xbf16> router_weight(%wr : tensor<8x64xbf16>)
         gate_up(%wgu : tensor<8x256x64xbf16>) down(%wd : tensor<8x64x128xbf16>)
         {routing = #moe.routing<softmax_topk>, top_k = 2 : i64, normalize = true,
          activation = #moe.activation<silu>,
          gate_up_layout = #moe.gate_up_layout<concatenated>} -> tensor<?x64xbf16>
  return %y : tensor<?x64xbf16>
}

// CHECK-LABEL: func.func @gpt_oss_layer
// CHECK: moe.layer
// CHECK-SAME: router_weight(%{{[a-z0-9_]+}} : tensor<4x32xf32>)
// CHECK-SAME: router_bias(%{{[a-z0-9_]+}} : tensor<4xf32>)
// CHECK-SAME: gate_up(%{{[a-z0-9_]+}} : tensor<4x48x32xf32>)
// CHECK-SAME: down(%{{[a-z0-9_]+}} : tensor<4x32x24xf32>)
// CHECK-SAME: gate_up_bias(%{{[a-z0-9_]+}} : tensor<4x48xf32>)
// CHECK-SAME: down_bias(%{{[a-z0-9_]+}} : tensor<4x32xf32>)
// CHECK-SAME: activation = #moe.activation<silu, alpha = 1.702000e+00, beta = 1.000000e+00, limit = 7.000000e+00>
// CHECK-SAME: gate_up_layout = #moe.gate_up_layout<interleaved>
// CHECK-SAME: routing = #moe.routing<topk_softmax>
func.func @gpt_oss_layer(%x: tensor<?x32xf32>, %wr: tensor<4x32xf32>, %br: tensor<4xf32>,
                         %wgu: tensor<4x48x32xf32>, %bgu: tensor<4x48xf32>,
                         %wd: tensor<4x32x24xf32>, %bd: tensor<4x32xf32>) -> tensor<?x32xf32> {
  %y = moe.layer %x : tensor<?x32xf32> router_weight(%wr : tensor<4x32xf32>)
         router_bias(%br : tensor<4xf32>)
         gate_up(%wgu : tensor<4x48x32xf32>) down(%wd : tensor<4x32x24xf32>)
         gate_up_bias(%bgu : tensor<4x48xf32>) down_bias(%bd : tensor<4x32xf32>)
         {routing = #moe.routing<topk_softmax>, top_k = 2 : i64,
          activation = #moe.activation<silu, alpha = 1.702, beta = 1.0, limit = 7.0>,
          gate_up_layout = #moe.gate_up_layout<interleaved>} -> tensor<?x32xf32>
  return %y : tensor<?x32xf32>
}

// CHECK-LABEL: func.func @deepseek_layer
// CHECK: moe.layer
// CHECK-SAME: correction_bias(%{{[a-z0-9_]+}} : tensor<16xf32>)
// CHECK-SAME: gate_up(%{{[a-z0-9_]+}} : tensor<16x16x32xf32>)
// CHECK-SAME: up(%{{[a-z0-9_]+}} : tensor<16x16x32xf32>)
// CHECK-SAME: shared_gate_up(%{{[a-z0-9_]+}} : tensor<64x32xf32>)
// CHECK-SAME: shared_down(%{{[a-z0-9_]+}} : tensor<32x32xf32>)
// CHECK-SAME: gate_up_layout = #moe.gate_up_layout<separate>
// CHECK-SAME: num_groups = 4 : i64
// CHECK-SAME: routed_scaling_factor = 2.500000e+00 : f64
// CHECK-SAME: routing = #moe.routing<sigmoid_group_topk>
// CHECK-SAME: top_k = 4 : i64
// CHECK-SAME: topk_groups = 2 : i64
func.func @deepseek_layer(%x: tensor<?x32xf32>, %wr: tensor<16x32xf32>, %cb: tensor<16xf32>,
                          %wg: tensor<16x16x32xf32>, %wu: tensor<16x16x32xf32>,
                          %wd: tensor<16x32x16xf32>, %sgu: tensor<64x32xf32>,
                          %sd: tensor<32x32xf32>) -> tensor<?x32xf32> {
  %y = moe.layer %x : tensor<?x32xf32> router_weight(%wr : tensor<16x32xf32>)
         correction_bias(%cb : tensor<16xf32>)
         gate_up(%wg : tensor<16x16x32xf32>) up(%wu : tensor<16x16x32xf32>)
         down(%wd : tensor<16x32x16xf32>)
         shared_gate_up(%sgu : tensor<64x32xf32>) shared_down(%sd : tensor<32x32xf32>)
         {routing = #moe.routing<sigmoid_group_topk>, top_k = 4 : i64, normalize = true,
          num_groups = 4 : i64, topk_groups = 2 : i64, routed_scaling_factor = 2.5 : f64,
          activation = #moe.activation<silu>,
          gate_up_layout = #moe.gate_up_layout<separate>} -> tensor<?x32xf32>
  return %y : tensor<?x32xf32>
}

// CHECK-LABEL: func.func @qwen2_shared_gate_and_logits
// CHECK: moe.layer
// CHECK-SAME: router_logits(%{{[a-z0-9_]+}} : tensor<?x6xf32>)
// CHECK-SAME: shared_gate(%{{[a-z0-9_]+}} : tensor<1x16xf32>)
// CHECK-SAME: activation = #moe.activation<gelu>
func.func @qwen2_shared_gate_and_logits(%x: tensor<?x16xf32>, %logits: tensor<?x6xf32>,
    %wgu: tensor<6x16x16xf32>, %wd: tensor<6x16x8xf32>, %sgu: tensor<24x16xf32>,
    %sd: tensor<16x12xf32>, %sg: tensor<1x16xf32>) -> tensor<?x16xf32> {
  %y = moe.layer %x : tensor<?x16xf32> router_logits(%logits : tensor<?x6xf32>)
         gate_up(%wgu : tensor<6x16x16xf32>) down(%wd : tensor<6x16x8xf32>)
         shared_gate_up(%sgu : tensor<24x16xf32>) shared_down(%sd : tensor<16x12xf32>)
         shared_gate(%sg : tensor<1x16xf32>)
         {routing = #moe.routing<softmax_topk>, top_k = 3 : i64,
          activation = #moe.activation<gelu>,
          gate_up_layout = #moe.gate_up_layout<concatenated>} -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// CHECK-LABEL: func.func @ungated_relu_layer
// CHECK: moe.layer
// CHECK-NOT: {{ up\(}}
// CHECK-SAME: activation = #moe.activation<relu>
// CHECK-SAME: gate_up_layout = #moe.gate_up_layout<none>
func.func @ungated_relu_layer(%x: tensor<5x16xf16>, %wr: tensor<4x16xf16>,
    %w1: tensor<4x8x16xf16>, %w2: tensor<4x16x8xf16>) -> tensor<5x16xf16> {
  %y = moe.layer %x : tensor<5x16xf16> router_weight(%wr : tensor<4x16xf16>)
         gate_up(%w1 : tensor<4x8x16xf16>) down(%w2 : tensor<4x16x8xf16>)
         {routing = #moe.routing<softmax_topk>, top_k = 1 : i64,
          activation = #moe.activation<relu>,
          gate_up_layout = #moe.gate_up_layout<none>} -> tensor<5x16xf16>
  return %y : tensor<5x16xf16>
}

// Precomputed routing, as a hand-written experts module receives it: ids
// (i32 or i64) and weights [T, K]; top_k is K and the other routing
// attributes keep their defaults.
// CHECK-LABEL: func.func @precomputed_routing_layer
// CHECK: moe.layer
// CHECK-SAME: expert_ids(%{{[a-z0-9_]+}} : tensor<?x2xi64>)
// CHECK-SAME: expert_weights(%{{[a-z0-9_]+}} : tensor<?x2xbf16>)
// CHECK-SAME: gate_up(%{{[a-z0-9_]+}} : tensor<4x8x16xbf16>)
// CHECK-SAME: up(%{{[a-z0-9_]+}} : tensor<4x8x16xbf16>)
// CHECK-SAME: top_k = 2 : i64
func.func @precomputed_routing_layer(%x: tensor<?x16xbf16>, %ids: tensor<?x2xi64>,
    %w: tensor<?x2xbf16>, %wg: tensor<4x8x16xbf16>, %wu: tensor<4x8x16xbf16>,
    %wd: tensor<4x16x8xbf16>) -> tensor<?x16xbf16> {
  %y = moe.layer %x : tensor<?x16xbf16> expert_ids(%ids : tensor<?x2xi64>)
         expert_weights(%w : tensor<?x2xbf16>)
         gate_up(%wg : tensor<4x8x16xbf16>) up(%wu : tensor<4x8x16xbf16>)
         down(%wd : tensor<4x16x8xbf16>)
         {routing = #moe.routing<softmax_topk>, top_k = 2 : i64,
          activation = #moe.activation<silu>,
          gate_up_layout = #moe.gate_up_layout<separate>} -> tensor<?x16xbf16>
  return %y : tensor<?x16xbf16>
}

// CHECK-LABEL: func.func @lowered_pipeline
func.func @lowered_pipeline(%x: tensor<?x64xbf16>, %logits: tensor<?x8xf32>,
    %wgu: tensor<8x256x64xbf16>, %wd: tensor<8x64x128xbf16>) -> tensor<?x64xbf16> {
  // CHECK: %[[IDS:.*]], %[[W:.*]] = moe.route %{{[a-z0-9_]+}} {normalize = true, routing = #moe.routing<softmax_topk>, top_k = 2 : i64} : tensor<?x8xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
  %ids, %w = moe.route %logits {routing = #moe.routing<softmax_topk>, top_k = 2 : i64, normalize = true}
      : tensor<?x8xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
  // CHECK: %[[P:.*]], %[[OFF:.*]], %[[N:.*]] = moe.sort %[[IDS]] {num_experts = 8 : i64} : tensor<?x2xi32> -> tensor<?xi32>, tensor<8xi32>, tensor<i32>
  %perm, %offsets, %nvalid = moe.sort %ids {num_experts = 8 : i64}
      : tensor<?x2xi32> -> tensor<?xi32>, tensor<8xi32>, tensor<i32>
  // CHECK: %[[ROWS:.*]] = moe.permute %{{[a-z0-9_]+}}, %[[P]], %[[N]] {top_k = 2 : i64} : tensor<?x64xbf16>, tensor<?xi32>, tensor<i32> -> tensor<?x64xbf16>
  %rows = moe.permute %x, %perm, %nvalid {top_k = 2 : i64}
      : tensor<?x64xbf16>, tensor<?xi32>, tensor<i32> -> tensor<?x64xbf16>
  // CHECK: %[[H:.*]] = moe.grouped_matmul %[[ROWS]], %{{[a-z0-9_]+}}, %[[OFF]] {epilogue = #moe.activation<silu>, epilogue_layout = #moe.gate_up_layout<concatenated>} : tensor<?x64xbf16>, tensor<8x256x64xbf16>, tensor<8xi32> -> tensor<?x128xbf16>
  %h = moe.grouped_matmul %rows, %wgu, %offsets
      {epilogue = #moe.activation<silu>, epilogue_layout = #moe.gate_up_layout<concatenated>}
      : tensor<?x64xbf16>, tensor<8x256x64xbf16>, tensor<8xi32> -> tensor<?x128xbf16>
  // CHECK: %[[O:.*]] = moe.grouped_matmul %[[H]], %{{[a-z0-9_]+}}, %[[OFF]] : tensor<?x128xbf16>, tensor<8x64x128xbf16>, tensor<8xi32> -> tensor<?x64xf32>
  %o = moe.grouped_matmul %h, %wd, %offsets
      : tensor<?x128xbf16>, tensor<8x64x128xbf16>, tensor<8xi32> -> tensor<?x64xf32>
  // CHECK: moe.combine %[[O]], %[[P]], %[[W]], %[[N]] : tensor<?x64xf32>, tensor<?xi32>, tensor<?x2xf32>, tensor<i32> -> tensor<?x64xbf16>
  %y = moe.combine %o, %perm, %w, %nvalid
      : tensor<?x64xf32>, tensor<?xi32>, tensor<?x2xf32>, tensor<i32> -> tensor<?x64xbf16>
  return %y : tensor<?x64xbf16>
}

// CHECK-LABEL: func.func @route_sigmoid_groups_and_ep_sort
func.func @route_sigmoid_groups_and_ep_sort(%logits: tensor<4x16xf32>, %cb: tensor<16xf32>)
    -> (tensor<4x4xf32>, tensor<16xi32>, tensor<8xi32>, tensor<i32>) {
  // CHECK: moe.route %{{[a-z0-9_]+}} correction_bias(%{{[a-z0-9_]+}} : tensor<16xf32>) {normalize = true, num_groups = 4 : i64, routed_scaling_factor = 2.500000e+00 : f64, routing = #moe.routing<sigmoid_group_topk>, top_k = 4 : i64, topk_groups = 2 : i64}
  %ids, %w = moe.route %logits correction_bias(%cb : tensor<16xf32>)
      {routing = #moe.routing<sigmoid_group_topk>, top_k = 4 : i64, normalize = true,
       num_groups = 4 : i64, topk_groups = 2 : i64, routed_scaling_factor = 2.5 : f64}
      : tensor<4x16xf32> -> tensor<4x4xi32>, tensor<4x4xf32>
  // CHECK: moe.sort %{{[a-z0-9_]+}} {first_expert = 8 : i64, num_experts = 8 : i64} : tensor<4x4xi32> -> tensor<16xi32>, tensor<8xi32>, tensor<i32>
  %perm, %offsets, %nvalid = moe.sort %ids {num_experts = 8 : i64, first_expert = 8 : i64}
      : tensor<4x4xi32> -> tensor<16xi32>, tensor<8xi32>, tensor<i32>
  return %w, %perm, %offsets, %nvalid : tensor<4x4xf32>, tensor<16xi32>, tensor<8xi32>, tensor<i32>
}

// CHECK-LABEL: func.func @sort_i64_ids
// CHECK: moe.sort %{{[a-z0-9_]+}} {num_experts = 3 : i64} : tensor<?x2xi64> -> tensor<?xi32>, tensor<3xi32>, tensor<i32>
func.func @sort_i64_ids(%ids: tensor<?x2xi64>) -> tensor<?xi32> {
  %perm, %offsets, %nvalid = moe.sort %ids {num_experts = 3 : i64}
      : tensor<?x2xi64> -> tensor<?xi32>, tensor<3xi32>, tensor<i32>
  return %perm : tensor<?xi32>
}

// CHECK-LABEL: func.func @fp8_grouped_matmul_with_bias
func.func @fp8_grouped_matmul_with_bias(%x: tensor<?x200xbf16>, %w: tensor<4x300x200xf8E4M3FN>,
    %ws: tensor<4x3x2xf32>, %offsets: tensor<4xi32>, %b: tensor<4x300xf32>) -> tensor<?x300xbf16> {
  // CHECK: %[[Q:.*]], %[[S:.*]] = moe.quantize %{{[a-z0-9_]+}} : tensor<?x200xbf16> -> tensor<?x200xf8E4M3FN>, tensor<?x2xf32>
  %q, %s = moe.quantize %x : tensor<?x200xbf16> -> tensor<?x200xf8E4M3FN>, tensor<?x2xf32>
  // CHECK: moe.grouped_matmul %[[Q]], %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}} bias(%{{[a-z0-9_]+}} : tensor<4x300xf32>) lhs_scales(%[[S]] : tensor<?x2xf32>) weight_scales(%{{[a-z0-9_]+}} : tensor<4x3x2xf32>) : tensor<?x200xf8E4M3FN>, tensor<4x300x200xf8E4M3FN>, tensor<4xi32> -> tensor<?x300xbf16>
  %y = moe.grouped_matmul %q, %w, %offsets bias(%b : tensor<4x300xf32>)
      lhs_scales(%s : tensor<?x2xf32>) weight_scales(%ws : tensor<4x3x2xf32>)
      : tensor<?x200xf8E4M3FN>, tensor<4x300x200xf8E4M3FN>, tensor<4xi32> -> tensor<?x300xbf16>
  return %y : tensor<?x300xbf16>
}

// CHECK-LABEL: func.func @weight_only_fp8
// CHECK: moe.grouped_matmul %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}} weight_scales(%{{[a-z0-9_]+}} : tensor<2x1x1xf32>) {epilogue = #moe.activation<silu>, epilogue_layout = #moe.gate_up_layout<interleaved>} : tensor<?x64xbf16>, tensor<2x32x64xf8E4M3FN>, tensor<2xi32> -> tensor<?x16xbf16>
func.func @weight_only_fp8(%x: tensor<?x64xbf16>, %w: tensor<2x32x64xf8E4M3FN>,
    %ws: tensor<2x1x1xf32>, %offsets: tensor<2xi32>) -> tensor<?x16xbf16> {
  %y = moe.grouped_matmul %x, %w, %offsets weight_scales(%ws : tensor<2x1x1xf32>)
      {epilogue = #moe.activation<silu>, epilogue_layout = #moe.gate_up_layout<interleaved>}
      : tensor<?x64xbf16>, tensor<2x32x64xf8E4M3FN>, tensor<2xi32> -> tensor<?x16xbf16>
  return %y : tensor<?x16xbf16>
}

// MXFP4 weights with one e8m0 scale per row per 32 along K (K = 70: three
// blocks, the last partial), f32 rows.
// CHECK-LABEL: func.func @mxfp4_grouped_matmul
// CHECK: moe.grouped_matmul %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}} weight_scales(%{{[a-z0-9_]+}} : tensor<2x32x3xf8E8M0FNU>) {epilogue = #moe.activation<silu, alpha = 1.702000e+00, beta = 1.000000e+00, limit = 7.000000e+00>, epilogue_layout = #moe.gate_up_layout<interleaved>} : tensor<?x70xf32>, tensor<2x32x70xf4E2M1FN>, tensor<2xi32> -> tensor<?x16xf32>
func.func @mxfp4_grouped_matmul(%x: tensor<?x70xf32>, %w: tensor<2x32x70xf4E2M1FN>,
    %ws: tensor<2x32x3xf8E8M0FNU>, %offsets: tensor<2xi32>) -> tensor<?x16xf32> {
  %y = moe.grouped_matmul %x, %w, %offsets weight_scales(%ws : tensor<2x32x3xf8E8M0FNU>)
      {epilogue = #moe.activation<silu, alpha = 1.702, beta = 1.0, limit = 7.0>,
       epilogue_layout = #moe.gate_up_layout<interleaved>}
      : tensor<?x70xf32>, tensor<2x32x70xf4E2M1FN>, tensor<2xi32> -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// CHECK-LABEL: func.func @activations
func.func @activations(%gu: tensor<?x64xf32>) -> (tensor<?x32xf32>, tensor<?x64xf32>) {
  // CHECK: moe.activation %{{[a-z0-9_]+}} {activation = #moe.activation<silu, alpha = 1.702000e+00, beta = 1.000000e+00, limit = 7.000000e+00>, layout = #moe.gate_up_layout<interleaved>} : tensor<?x64xf32> -> tensor<?x32xf32>
  %a = moe.activation %gu {activation = #moe.activation<silu, alpha = 1.702, beta = 1.0, limit = 7.0>,
                           layout = #moe.gate_up_layout<interleaved>} : tensor<?x64xf32> -> tensor<?x32xf32>
  // CHECK: moe.activation %{{[a-z0-9_]+}} {activation = #moe.activation<identity>, layout = #moe.gate_up_layout<none>} : tensor<?x64xf32> -> tensor<?x64xf32>
  %b = moe.activation %gu {activation = #moe.activation<identity>, layout = #moe.gate_up_layout<none>}
      : tensor<?x64xf32> -> tensor<?x64xf32>
  return %a, %b : tensor<?x32xf32>, tensor<?x64xf32>
}

// CHECK-LABEL: func.func @every_rank_partition
// CHECK: moe.ep_shard %{{[a-z0-9_]+}} {ep_size = 4 : i64} : tensor<8x64x32xbf16> -> tensor<2x64x32xbf16>
// CHECK: moe.sort %{{[a-z0-9_]+}} {ep_size = 4 : i64, num_experts = 2 : i64}
// CHECK: moe.combine {{.*}} addend({{.*}}) {ep_size = 4 : i64}
func.func @every_rank_partition(%w: tensor<8x64x32xbf16>, %ids: tensor<?x2xi32>, %rows: tensor<?x64xf32>,
                                %x: tensor<?x2xf32>, %s: tensor<?x64xf32>) -> (tensor<2x64x32xbf16>, tensor<?x64xf32>) {
  %local = moe.ep_shard %w {ep_size = 4 : i64} : tensor<8x64x32xbf16> -> tensor<2x64x32xbf16>
  %p, %o, %n = moe.sort %ids {num_experts = 2 : i64, ep_size = 4 : i64} : tensor<?x2xi32> -> tensor<?xi32>, tensor<2xi32>, tensor<i32>
  %y = moe.combine %rows, %p, %x, %n addend(%s : tensor<?x64xf32>) {ep_size = 4 : i64}
      : tensor<?x64xf32>, tensor<?xi32>, tensor<?x2xf32>, tensor<i32> -> tensor<?x64xf32>
  return %local, %y : tensor<2x64x32xbf16>, tensor<?x64xf32>
}

// A group of one (--ep-size=1): the program for every rank, of one rank.
// CHECK-LABEL: func.func @group_of_one
// CHECK: moe.ep_shard %{{[a-z0-9_]+}} {ep_size = 1 : i64} : tensor<8x64x32xbf16> -> tensor<8x64x32xbf16>
// CHECK: moe.sort %{{[a-z0-9_]+}} {ep_size = 1 : i64, num_experts = 8 : i64}
// CHECK: moe.all_reduce %{{[a-z0-9_]+}} {ep_size = 1 : i64} : tensor<?x64xf32>
func.func @group_of_one(%w: tensor<8x64x32xbf16>, %ids: tensor<?x2xi32>, %rows: tensor<?x64xf32>)
    -> (tensor<8x64x32xbf16>, tensor<?xi32>, tensor<?x64xf32>) {
  %local = moe.ep_shard %w {ep_size = 1 : i64} : tensor<8x64x32xbf16> -> tensor<8x64x32xbf16>
  %p, %o, %n = moe.sort %ids {num_experts = 8 : i64, ep_size = 1 : i64} : tensor<?x2xi32> -> tensor<?xi32>, tensor<8xi32>, tensor<i32>
  %y = moe.all_reduce %rows {ep_size = 1 : i64} : tensor<?x64xf32>
  return %local, %p, %y : tensor<8x64x32xbf16>, tensor<?xi32>, tensor<?x64xf32>
}

// CHECK-LABEL: func.func @all_reduce
// CHECK: moe.all_reduce %{{[a-z0-9_]+}} {ep_size = 8 : i64} : tensor<?x64xbf16>
func.func @all_reduce(%partial: tensor<?x64xbf16>) -> tensor<?x64xbf16> {
  %y = moe.all_reduce %partial {ep_size = 8 : i64} : tensor<?x64xbf16>
  return %y : tensor<?x64xbf16>
}

// CHECK-LABEL: func.func @linear_and_shared_expert_combine
func.func @linear_and_shared_expert_combine(%x: tensor<?x64xbf16>, %wr: tensor<8x64xbf16>, %br: tensor<8xbf16>,
    %sgu: tensor<96x64xbf16>, %sd: tensor<64x48xbf16>, %sg: tensor<1x64xbf16>,
    %rows: tensor<?x64xf32>, %perm: tensor<?xi32>, %w: tensor<?x2xf32>, %n: tensor<i32>) -> tensor<?x64xbf16> {
  // CHECK: moe.linear %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}} bias(%{{[a-z0-9_]+}} : tensor<8xbf16>) : tensor<?x64xbf16>, tensor<8x64xbf16> -> tensor<?x8xf32>
  %logits = moe.linear %x, %wr bias(%br : tensor<8xbf16>) : tensor<?x64xbf16>, tensor<8x64xbf16> -> tensor<?x8xf32>
  // CHECK: moe.linear %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}} {epilogue = #moe.activation<silu>, epilogue_layout = #moe.gate_up_layout<concatenated>} : tensor<?x64xbf16>, tensor<96x64xbf16> -> tensor<?x48xbf16>
  %h = moe.linear %x, %sgu {epilogue = #moe.activation<silu>, epilogue_layout = #moe.gate_up_layout<concatenated>}
      : tensor<?x64xbf16>, tensor<96x64xbf16> -> tensor<?x48xbf16>
  %s = moe.linear %h, %sd : tensor<?x48xbf16>, tensor<64x48xbf16> -> tensor<?x64xbf16>
  %g = moe.linear %x, %sg : tensor<?x64xbf16>, tensor<1x64xbf16> -> tensor<?x1xf32>
  // CHECK: moe.combine %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}} addend(%{{[a-z0-9_]+}} : tensor<?x64xbf16>) addend_gate(%{{[a-z0-9_]+}} : tensor<?x1xf32>) : tensor<?x64xf32>, tensor<?xi32>, tensor<?x2xf32>, tensor<i32> -> tensor<?x64xbf16>
  %y = moe.combine %rows, %perm, %w, %n addend(%s : tensor<?x64xbf16>) addend_gate(%g : tensor<?x1xf32>)
      : tensor<?x64xf32>, tensor<?xi32>, tensor<?x2xf32>, tensor<i32> -> tensor<?x64xbf16>
  return %y : tensor<?x64xbf16>
}

// An FP8 checkpoint's experts: e4m3 weights with their 128x128 block scales.
// CHECK-LABEL: func.func @layer_fp8_weights
// CHECK: moe.layer %{{.*}} : tensor<?x200xf32> expert_ids(%{{.*}} : tensor<?x2xi32>) expert_weights(%{{.*}} : tensor<?x2xf32>) gate_up(%{{.*}} : tensor<4x272x200xf8E4M3FN>) down(%{{.*}} : tensor<4x200x136xf8E4M3FN>) gate_up_scales(%{{.*}} : tensor<4x3x2xf32>) down_scales(%{{.*}} : tensor<4x2x2xf32>)
func.func @layer_fp8_weights(%x: tensor<?x200xf32>, %ids: tensor<?x2xi32>, %w: tensor<?x2xf32>,
    %gu: tensor<4x272x200xf8E4M3FN>, %gus: tensor<4x3x2xf32>, %d: tensor<4x200x136xf8E4M3FN>,
    %ds: tensor<4x2x2xf32>) -> tensor<?x200xf32> {
  %y = moe.layer %x : tensor<?x200xf32> expert_ids(%ids : tensor<?x2xi32>) expert_weights(%w : tensor<?x2xf32>)
         gate_up(%gu : tensor<4x272x200xf8E4M3FN>) down(%d : tensor<4x200x136xf8E4M3FN>)
         gate_up_scales(%gus : tensor<4x3x2xf32>) down_scales(%ds : tensor<4x2x2xf32>)
         {routing = #moe.routing<softmax_topk>, top_k = 2 : i64, activation = #moe.activation<silu>,
          gate_up_layout = #moe.gate_up_layout<concatenated>} -> tensor<?x200xf32>
  return %y : tensor<?x200xf32>
}

// The mixed types of moe-cast-experts-bf16: f32 tokens permuted into bf16
// rows, f32 rows meeting bf16 weights (rounded to bf16 first), a bf16 gate/up
// result and bf16 down-projection rows combined into an f32 result.
// CHECK-LABEL: func.func @bf16_policy_types
// CHECK: moe.permute {{.*}} : tensor<?x64xf32>, tensor<?xi32>, tensor<i32> -> tensor<?x64xbf16>
// CHECK: moe.grouped_matmul {{.*}} : tensor<?x64xf32>, tensor<8x32x64xbf16>, tensor<8xi32> -> tensor<?x32xbf16>
// CHECK: moe.grouped_matmul {{.*}} : tensor<?x32xbf16>, tensor<8x64x32xbf16>, tensor<8xi32> -> tensor<?x64xbf16>
// CHECK: moe.linear {{.*}} : tensor<?x64xf32>, tensor<16x64xbf16> -> tensor<?x16xbf16>
func.func @bf16_policy_types(%x: tensor<?x64xf32>, %p: tensor<?xi32>, %n: tensor<i32>, %o: tensor<8xi32>,
    %rows32: tensor<?x64xf32>, %wgu: tensor<8x32x64xbf16>, %wd: tensor<8x64x32xbf16>,
    %ws: tensor<16x64xbf16>) -> (tensor<?x64xbf16>, tensor<?x64xbf16>, tensor<?x16xbf16>) {
  %rows = moe.permute %x, %p, %n {top_k = 2 : i64} : tensor<?x64xf32>, tensor<?xi32>, tensor<i32> -> tensor<?x64xbf16>
  %h = moe.grouped_matmul %rows32, %wgu, %o : tensor<?x64xf32>, tensor<8x32x64xbf16>, tensor<8xi32> -> tensor<?x32xbf16>
  %y = moe.grouped_matmul %h, %wd, %o : tensor<?x32xbf16>, tensor<8x64x32xbf16>, tensor<8xi32> -> tensor<?x64xbf16>
  %s = moe.linear %x, %ws : tensor<?x64xf32>, tensor<16x64xbf16> -> tensor<?x16xbf16>
  return %rows, %y, %s : tensor<?x64xbf16>, tensor<?x64xbf16>, tensor<?x16xbf16>
}
