// RUN: moec-opt %s -split-input-file -moe-lower-layer -verify-diagnostics | FileCheck %s

// Mixtral: router weights, softmax top-2 with renormalisation, SiLU-GLU with
// gate and up concatenated.
// CHECK-LABEL: func.func @mixtral
// CHECK-SAME: (%[[X:.*]]: tensor<?x64xf32>, %[[WR:.*]]: tensor<8x64xf32>, %[[WGU:.*]]: tensor<8x256x64xf32>, %[[WD:.*]]: tensor<8x64x128xf32>)
// CHECK: %[[LOGITS:.*]] = moe.linear %[[X]], %[[WR]] : tensor<?x64xf32>, tensor<8x64xf32> -> tensor<?x8xf32>
// CHECK: %[[IDS:.*]], %[[W:.*]] = moe.route %[[LOGITS]] {normalize = true, routing = #moe.routing<softmax_topk>, top_k = 2 : i64} : tensor<?x8xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
// CHECK: %[[PERM:.*]], %[[OFF:.*]], %[[N:.*]] = moe.sort %[[IDS]] {num_experts = 8 : i64} : tensor<?x2xi32> -> tensor<?xi32>, tensor<8xi32>, tensor<i32>
// CHECK: %[[ROWS:.*]] = moe.permute %[[X]], %[[PERM]], %[[N]] {top_k = 2 : i64} : tensor<?x64xf32>, tensor<?xi32>, tensor<i32> -> tensor<?x64xf32>
// CHECK: %[[H:.*]] = moe.grouped_matmul %[[ROWS]], %[[WGU]], %[[OFF]] {epilogue = #moe.activation<silu>, epilogue_layout = #moe.gate_up_layout<concatenated>} : tensor<?x64xf32>, tensor<8x256x64xf32>, tensor<8xi32> -> tensor<?x128xf32>
// CHECK: %[[O:.*]] = moe.grouped_matmul %[[H]], %[[WD]], %[[OFF]] : tensor<?x128xf32>, tensor<8x64x128xf32>, tensor<8xi32> -> tensor<?x64xf32>
// CHECK: %[[Y:.*]] = moe.combine %[[O]], %[[PERM]], %[[W]], %[[N]] : tensor<?x64xf32>, tensor<?xi32>, tensor<?x2xf32>, tensor<i32> -> tensor<?x64xf32>
// CHECK: return %[[Y]]
// CHECK-NOT: moe.layer
func.func @mixtral(%x: tensor<?x64xf32>, %wr: tensor<8x64xf32>, %wgu: tensor<8x256x64xf32>,
                   %wd: tensor<8x64x128xf32>) -> tensor<?x64xf32> {
  %y = moe.layer %x : tensor<?x64xf32> router_weight(%wr : tensor<8x64xf32>)
         gate_up(%wgu : tensor<8x256x64xf32>) down(%wd : tensor<8x64x128xf32>)
         {routing = #moe.routing<softmax_topk>, top_k = 2 : i64, normalize = true,
          activation = #moe.activation<silu>,
          gate_up_layout = #moe.gate_up_layout<concatenated>} -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

// -----

// gpt-oss: router bias, biases on both projections, clamped SwiGLU, interleaved;
// bf16 activations keep bf16 intermediates, the router stays f32.
// CHECK-LABEL: func.func @gpt_oss
// CHECK: %[[LOGITS:.*]] = moe.linear %{{.*}}, %{{.*}} bias(%{{.*}} : tensor<4xbf16>) : tensor<?x32xbf16>, tensor<4x32xbf16> -> tensor<?x4xf32>
// CHECK: moe.route %[[LOGITS]] {routing = #moe.routing<topk_softmax>, top_k = 2 : i64}
// CHECK: moe.grouped_matmul %{{.*}}, %{{.*}}, %{{.*}} bias(%{{.*}} : tensor<4x48xbf16>) {epilogue = #moe.activation<silu, alpha = 1.702000e+00, beta = 1.000000e+00, limit = 7.000000e+00>, epilogue_layout = #moe.gate_up_layout<interleaved>} : tensor<?x32xbf16>, tensor<4x48x32xbf16>, tensor<4xi32> -> tensor<?x24xbf16>
// CHECK: moe.grouped_matmul %{{.*}}, %{{.*}}, %{{.*}} bias(%{{.*}} : tensor<4x32xbf16>) : tensor<?x24xbf16>, tensor<4x32x24xbf16>, tensor<4xi32> -> tensor<?x32xbf16>
// CHECK: moe.combine {{.*}} -> tensor<?x32xbf16>
func.func @gpt_oss(%x: tensor<?x32xbf16>, %wr: tensor<4x32xbf16>, %br: tensor<4xbf16>,
                   %wgu: tensor<4x48x32xbf16>, %bgu: tensor<4x48xbf16>,
                   %wd: tensor<4x32x24xbf16>, %bd: tensor<4x32xbf16>) -> tensor<?x32xbf16> {
  %y = moe.layer %x : tensor<?x32xbf16> router_weight(%wr : tensor<4x32xbf16>)
         router_bias(%br : tensor<4xbf16>)
         gate_up(%wgu : tensor<4x48x32xbf16>) down(%wd : tensor<4x32x24xbf16>)
         gate_up_bias(%bgu : tensor<4x48xbf16>) down_bias(%bd : tensor<4x32xbf16>)
         {routing = #moe.routing<topk_softmax>, top_k = 2 : i64,
          activation = #moe.activation<silu, alpha = 1.702, beta = 1.0, limit = 7.0>,
          gate_up_layout = #moe.gate_up_layout<interleaved>} -> tensor<?x32xbf16>
  return %y : tensor<?x32xbf16>
}

// -----

// Separate constant gate and up weights are concatenated at compile time, per
// expert: gate rows then up rows. f32 1..8 are 3F800000, 40000000, 40400000,
// 40800000, 40A00000, 40C00000, 40E00000, 41000000 (little-endian in the blob).
// CHECK-LABEL: func.func @separate_constant_weights
// CHECK: %[[GU:.*]] = arith.constant dense_resource<gate_up_weight> : tensor<2x2x2xf32>
// CHECK: moe.grouped_matmul %{{.*}}, %[[GU]], %{{.*}} {epilogue = #moe.activation<silu>, epilogue_layout = #moe.gate_up_layout<concatenated>} : tensor<?x2xf32>, tensor<2x2x2xf32>, tensor<2xi32> -> tensor<?x1xf32>
// CHECK: gate_up_weight: "0x400000000000803F00000040
// CHECK-SAME: 0000A0400000C040
// CHECK-SAME: 0000404000008040
// CHECK-SAME: 0000E04000000041"
func.func @separate_constant_weights(%x: tensor<?x2xf32>, %l: tensor<?x2xf32>,
                                     %wd: tensor<2x2x1xf32>) -> tensor<?x2xf32> {
  %g = arith.constant dense<[[[1.0, 2.0]], [[3.0, 4.0]]]> : tensor<2x1x2xf32>
  %u = arith.constant dense<[[[5.0, 6.0]], [[7.0, 8.0]]]> : tensor<2x1x2xf32>
  %y = moe.layer %x : tensor<?x2xf32> router_logits(%l : tensor<?x2xf32>)
         gate_up(%g : tensor<2x1x2xf32>) up(%u : tensor<2x1x2xf32>) down(%wd : tensor<2x2x1xf32>)
         {routing = #moe.routing<softmax_topk>, top_k = 1 : i64, activation = #moe.activation<silu>,
          gate_up_layout = #moe.gate_up_layout<separate>} -> tensor<?x2xf32>
  return %y : tensor<?x2xf32>
}

// -----

// Separate weights that are not constants are concatenated at run time.
// CHECK-LABEL: func.func @separate_runtime_weights
// CHECK: %[[GU:.*]] = tensor.concat dim(1) %{{.*}}, %{{.*}} : (tensor<4x8x16xf32>, tensor<4x8x16xf32>) -> tensor<4x16x16xf32>
// CHECK: %[[B:.*]] = tensor.concat dim(1) %{{.*}}, %{{.*}} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x16xf32>
// CHECK: moe.grouped_matmul %{{.*}}, %[[GU]], %{{.*}} bias(%[[B]] : tensor<4x16xf32>)
// CHECK-SAME: epilogue_layout = #moe.gate_up_layout<concatenated>
func.func @separate_runtime_weights(%x: tensor<?x16xf32>, %l: tensor<?x4xf32>, %wg: tensor<4x8x16xf32>,
    %wu: tensor<4x8x16xf32>, %bg: tensor<4x8xf32>, %bu: tensor<4x8xf32>,
    %wd: tensor<4x16x8xf32>) -> tensor<?x16xf32> {
  %y = moe.layer %x : tensor<?x16xf32> router_logits(%l : tensor<?x4xf32>)
         gate_up(%wg : tensor<4x8x16xf32>) up(%wu : tensor<4x8x16xf32>) down(%wd : tensor<4x16x8xf32>)
         gate_up_bias(%bg : tensor<4x8xf32>) up_bias(%bu : tensor<4x8xf32>)
         {routing = #moe.routing<softmax_topk>, top_k = 2 : i64, activation = #moe.activation<silu>,
          gate_up_layout = #moe.gate_up_layout<separate>} -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

// Given router logits need no router projection; an ungated ReLU expert has no
// halving epilogue.
// CHECK-LABEL: func.func @logits_and_ungated
// CHECK-NOT: moe.linear
// CHECK: moe.route %{{.*}} {routing = #moe.routing<softmax_topk>, top_k = 1 : i64}
// CHECK: moe.grouped_matmul %{{.*}}, %{{.*}}, %{{.*}} {epilogue = #moe.activation<relu>, epilogue_layout = #moe.gate_up_layout<none>} : tensor<5x16xf16>, tensor<4x8x16xf16>, tensor<4xi32> -> tensor<5x8xf16>
// CHECK: moe.combine {{.*}} : tensor<5x16xf16>, tensor<5xi32>, tensor<5x1xf32>, tensor<i32> -> tensor<5x16xf16>
func.func @logits_and_ungated(%x: tensor<5x16xf16>, %l: tensor<5x4xf16>,
    %w1: tensor<4x8x16xf16>, %w2: tensor<4x16x8xf16>) -> tensor<5x16xf16> {
  %y = moe.layer %x : tensor<5x16xf16> router_logits(%l : tensor<5x4xf16>)
         gate_up(%w1 : tensor<4x8x16xf16>) down(%w2 : tensor<4x16x8xf16>)
         {routing = #moe.routing<softmax_topk>, top_k = 1 : i64,
          activation = #moe.activation<relu>,
          gate_up_layout = #moe.gate_up_layout<none>} -> tensor<5x16xf16>
  return %y : tensor<5x16xf16>
}

// -----

// DeepSeek-V3: group-limited sigmoid routing with the correction bias, and a
// shared expert that joins the combine; a Qwen2-style shared gate gates it.
// CHECK-LABEL: func.func @deepseek_shared
// CHECK: %[[LOGITS:.*]] = moe.linear %[[X:[^,]*]], %{{.*}} : tensor<?x32xf32>, tensor<16x32xf32> -> tensor<?x16xf32>
// CHECK: moe.route %[[LOGITS]] correction_bias(%{{.*}} : tensor<16xf32>) {normalize = true, num_groups = 4 : i64, routed_scaling_factor = 2.500000e+00 : f64, routing = #moe.routing<sigmoid_group_topk>, top_k = 4 : i64, topk_groups = 2 : i64}
// CHECK: %[[S1:.*]] = moe.linear %[[X]], %{{.*}} {epilogue = #moe.activation<silu>, epilogue_layout = #moe.gate_up_layout<concatenated>} : tensor<?x32xf32>, tensor<64x32xf32> -> tensor<?x32xf32>
// CHECK: %[[S:.*]] = moe.linear %[[S1]], %{{.*}} : tensor<?x32xf32>, tensor<32x32xf32> -> tensor<?x32xf32>
// CHECK: %[[G:.*]] = moe.linear %[[X]], %{{.*}} : tensor<?x32xf32>, tensor<1x32xf32> -> tensor<?x1xf32>
// CHECK: moe.combine %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} addend(%[[S]] : tensor<?x32xf32>) addend_gate(%[[G]] : tensor<?x1xf32>)
func.func @deepseek_shared(%x: tensor<?x32xf32>, %wr: tensor<16x32xf32>, %cb: tensor<16xf32>,
    %wgu: tensor<16x32x32xf32>, %wd: tensor<16x32x16xf32>, %sgu: tensor<64x32xf32>,
    %sd: tensor<32x32xf32>, %sg: tensor<1x32xf32>) -> tensor<?x32xf32> {
  %y = moe.layer %x : tensor<?x32xf32> router_weight(%wr : tensor<16x32xf32>)
         correction_bias(%cb : tensor<16xf32>)
         gate_up(%wgu : tensor<16x32x32xf32>) down(%wd : tensor<16x32x16xf32>)
         shared_gate_up(%sgu : tensor<64x32xf32>) shared_down(%sd : tensor<32x32xf32>)
         shared_gate(%sg : tensor<1x32xf32>)
         {routing = #moe.routing<sigmoid_group_topk>, top_k = 4 : i64, normalize = true,
          num_groups = 4 : i64, topk_groups = 2 : i64, routed_scaling_factor = 2.5 : f64,
          activation = #moe.activation<silu>,
          gate_up_layout = #moe.gate_up_layout<concatenated>} -> tensor<?x32xf32>
  return %y : tensor<?x32xf32>
}

// -----

// Precomputed routing: no moe.linear and no moe.route; i64 ids go straight
// into moe.sort (any id outside [0, E) becomes the sentinel there), f32
// weights straight into moe.combine.
// CHECK-LABEL: func.func @precomputed_routing
// CHECK-SAME: (%[[X:.*]]: tensor<5x16xf32>, %[[IDS:.*]]: tensor<5x2xi64>, %[[W:.*]]: tensor<5x2xf32>
// CHECK-NOT: moe.linear
// CHECK-NOT: moe.route
// CHECK: %[[PERM:.*]], %[[OFF:.*]], %[[N:.*]] = moe.sort %[[IDS]] {num_experts = 4 : i64} : tensor<5x2xi64> -> tensor<10xi32>, tensor<4xi32>, tensor<i32>
// CHECK: %[[ROWS:.*]] = moe.permute %[[X]], %[[PERM]], %[[N]] {top_k = 2 : i64}
// CHECK: %[[GU:.*]] = tensor.concat dim(1)
// CHECK: %[[H:.*]] = moe.grouped_matmul %[[ROWS]], %[[GU]], %[[OFF]] {epilogue = #moe.activation<silu>, epilogue_layout = #moe.gate_up_layout<concatenated>} : tensor<10x16xf32>, tensor<4x16x16xf32>, tensor<4xi32> -> tensor<10x8xf32>
// CHECK: %[[O:.*]] = moe.grouped_matmul %[[H]]
// CHECK: %[[Y:.*]] = moe.combine %[[O]], %[[PERM]], %[[W]], %[[N]] : tensor<10x16xf32>, tensor<10xi32>, tensor<5x2xf32>, tensor<i32> -> tensor<5x16xf32>
// CHECK: return %[[Y]]
func.func @precomputed_routing(%x: tensor<5x16xf32>, %ids: tensor<5x2xi64>, %w: tensor<5x2xf32>,
    %wg: tensor<4x8x16xf32>, %wu: tensor<4x8x16xf32>, %wd: tensor<4x16x8xf32>) -> tensor<5x16xf32> {
  %y = moe.layer %x : tensor<5x16xf32> expert_ids(%ids : tensor<5x2xi64>)
         expert_weights(%w : tensor<5x2xf32>)
         gate_up(%wg : tensor<4x8x16xf32>) up(%wu : tensor<4x8x16xf32>) down(%wd : tensor<4x16x8xf32>)
         {routing = #moe.routing<softmax_topk>, top_k = 2 : i64, activation = #moe.activation<silu>,
          gate_up_layout = #moe.gate_up_layout<separate>} -> tensor<5x16xf32>
  return %y : tensor<5x16xf32>
}

// -----

// Routing weights narrower than f32 are widened for the combine (which sums in
// f32); wider ones are narrowed. i32 ids need no cast.
// CHECK-LABEL: func.func @precomputed_routing_casts
// CHECK: %[[W32:.*]] = arith.extf %{{.*}} : tensor<?x1xbf16> to tensor<?x1xf32>
// CHECK: moe.sort %{{.*}} {num_experts = 4 : i64} : tensor<?x1xi32>
// CHECK: moe.combine %{{.*}}, %{{.*}}, %[[W32]], %{{.*}} : tensor<?x16xbf16>, tensor<?xi32>, tensor<?x1xf32>, tensor<i32> -> tensor<?x16xbf16>
// CHECK-LABEL: func.func @precomputed_routing_f64
// CHECK: %[[W32:.*]] = arith.truncf %{{.*}} : tensor<?x1xf64> to tensor<?x1xf32>
// CHECK: moe.combine %{{.*}}, %{{.*}}, %[[W32]], %{{.*}}
func.func @precomputed_routing_casts(%x: tensor<?x16xbf16>, %ids: tensor<?x1xi32>, %w: tensor<?x1xbf16>,
    %wgu: tensor<4x16x16xbf16>, %wd: tensor<4x16x8xbf16>) -> tensor<?x16xbf16> {
  %y = moe.layer %x : tensor<?x16xbf16> expert_ids(%ids : tensor<?x1xi32>)
         expert_weights(%w : tensor<?x1xbf16>)
         gate_up(%wgu : tensor<4x16x16xbf16>) down(%wd : tensor<4x16x8xbf16>)
         {routing = #moe.routing<softmax_topk>, top_k = 1 : i64, activation = #moe.activation<silu>,
          gate_up_layout = #moe.gate_up_layout<concatenated>} -> tensor<?x16xbf16>
  return %y : tensor<?x16xbf16>
}
func.func @precomputed_routing_f64(%x: tensor<?x16xf64>, %ids: tensor<?x1xi32>, %w: tensor<?x1xf64>,
    %wgu: tensor<4x16x16xf64>, %wd: tensor<4x16x8xf64>) -> tensor<?x16xf64> {
  %y = moe.layer %x : tensor<?x16xf64> expert_ids(%ids : tensor<?x1xi32>)
         expert_weights(%w : tensor<?x1xf64>)
         gate_up(%wgu : tensor<4x16x16xf64>) down(%wd : tensor<4x16x8xf64>)
         {routing = #moe.routing<softmax_topk>, top_k = 1 : i64, activation = #moe.activation<silu>,
          gate_up_layout = #moe.gate_up_layout<concatenated>} -> tensor<?x16xf64>
  return %y : tensor<?x16xf64>
}

// -----

// Already-lowered ops and other ops are left alone.
// CHECK-LABEL: func.func @leaves_lowered_ops_alone
// CHECK-NEXT: moe.sort
// CHECK-NEXT: arith.addf
// CHECK-NEXT: return
func.func @leaves_lowered_ops_alone(%ids: tensor<4x2xi32>, %a: f32) -> (tensor<8xi32>, f32) {
  %p, %o, %n = moe.sort %ids {num_experts = 4 : i64} : tensor<4x2xi32> -> tensor<8xi32>, tensor<4xi32>, tensor<i32>
  %b = arith.addf %a, %a : f32
  return %p, %b : tensor<8xi32>, f32
}

// -----

// A dynamic number of experts cannot be lowered (offsets need a static size).
func.func @dynamic_experts(%x: tensor<?x16xf32>, %l: tensor<?x?xf32>,
    %wgu: tensor<?x64x16xf32>, %wd: tensor<?x16x32xf32>) -> tensor<?x16xf32> {
  // expected-error @+1 {{could not lower this moe.layer: the number of experts must be static}}
  %y = moe.layer %x : tensor<?x16xf32> router_logits(%l : tensor<?x?xf32>)
         gate_up(%wgu : tensor<?x64x16xf32>) down(%wd : tensor<?x16x32xf32>)
         {routing = #moe.routing<softmax_topk>, top_k = 2 : i64, activation = #moe.activation<silu>,
          gate_up_layout = #moe.gate_up_layout<concatenated>} -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

// FP8 checkpoint weights keep their e4m3 values: the block scales become the
// grouped matmuls' weight_scales (the rows are quantised by the fp8 phase).
// CHECK-LABEL: func.func @fp8_weights
// CHECK-SAME: %[[GU:[a-z0-9]+]]: tensor<4x272x200xf8E4M3FN>, %[[GUS:[a-z0-9]+]]: tensor<4x3x2xf32>, %[[D:[a-z0-9]+]]: tensor<4x200x136xf8E4M3FN>, %[[DS:[a-z0-9]+]]: tensor<4x2x2xf32>
// CHECK: %[[H:.*]] = moe.grouped_matmul %{{.*}}, %[[GU]], %{{.*}} weight_scales(%[[GUS]] : tensor<4x3x2xf32>) {epilogue = #moe.activation<silu>, epilogue_layout = #moe.gate_up_layout<concatenated>}
// CHECK: moe.grouped_matmul %[[H]], %[[D]], %{{.*}} weight_scales(%[[DS]] : tensor<4x2x2xf32>) : tensor<?x136xf32>, tensor<4x200x136xf8E4M3FN>
func.func @fp8_weights(%x: tensor<?x200xf32>, %ids: tensor<?x2xi32>, %w: tensor<?x2xf32>,
    %gu: tensor<4x272x200xf8E4M3FN>, %gus: tensor<4x3x2xf32>, %d: tensor<4x200x136xf8E4M3FN>,
    %ds: tensor<4x2x2xf32>) -> tensor<?x200xf32> {
  %y = moe.layer %x : tensor<?x200xf32> expert_ids(%ids : tensor<?x2xi32>) expert_weights(%w : tensor<?x2xf32>)
         gate_up(%gu : tensor<4x272x200xf8E4M3FN>) down(%d : tensor<4x200x136xf8E4M3FN>)
         gate_up_scales(%gus : tensor<4x3x2xf32>) down_scales(%ds : tensor<4x2x2xf32>)
         {routing = #moe.routing<softmax_topk>, top_k = 2 : i64, activation = #moe.activation<silu>,
          gate_up_layout = #moe.gate_up_layout<concatenated>} -> tensor<?x200xf32>
  return %y : tensor<?x200xf32>
}
