// RUN: moec-opt %s -split-input-file -verify-diagnostics | moec-opt -split-input-file | FileCheck %s
// RUN: moec-opt %s -split-input-file -verify-diagnostics --mlir-print-op-generic | moec-opt -split-input-file | FileCheck %s

// The ops of whole models (ModelOps.td): a round trip of each, with every
// optional operand and attribute, in the pretty and generic forms; then every
// verifier message of dialect/lib/MoE/ModelOps.cpp, one case each.

// CHECK-LABEL: func.func @embedding
// CHECK: moe.embedding %{{.*}}, %{{.*}} : tensor<?xi64>, tensor<32x16xbf16> -> tensor<?x16xbf16>
// CHECK: moe.embedding %{{.*}}, %{{.*}} : tensor<4xi32>, tensor<?x16xf32> -> tensor<4x16xf32>
// A bf16 table's rows widened to f32 (the CUDA target's bf16 models).
// CHECK: moe.embedding %{{.*}}, %{{.*}} : tensor<?xi64>, tensor<32x16xbf16> -> tensor<?x16xf32>
func.func @embedding(%ids: tensor<?xi64>, %table: tensor<32x16xbf16>, %ids32: tensor<4xi32>,
                     %table2: tensor<?x16xf32>) -> (tensor<?x16xbf16>, tensor<4x16xf32>, tensor<?x16xf32>) {
  %x = moe.embedding %ids, %table : tensor<?xi64>, tensor<32x16xbf16> -> tensor<?x16xbf16>
  %y = moe.embedding %ids32, %table2 : tensor<4xi32>, tensor<?x16xf32> -> tensor<4x16xf32>
  %z = moe.embedding %ids, %table : tensor<?xi64>, tensor<32x16xbf16> -> tensor<?x16xf32>
  return %x, %y, %z : tensor<?x16xbf16>, tensor<4x16xf32>, tensor<?x16xf32>
}

// CHECK-LABEL: func.func @rms_norm
// CHECK: moe.rms_norm %{{.*}}, %{{.*}} {epsilon = 9.9999999999999995E-7 : f64} : tensor<?x16xf32>, tensor<16xf32> -> tensor<?x16xf32>
// CHECK: moe.rms_norm %{{.*}}, %{{.*}} {epsilon = 9.9999999999999995E-7 : f64, weight_offset = 1.000000e+00 : f64} : tensor<?x16xf32>, tensor<4xbf16> -> tensor<?x16xf32>
func.func @rms_norm(%x: tensor<?x16xf32>, %w: tensor<16xf32>, %wq: tensor<4xbf16>)
    -> (tensor<?x16xf32>, tensor<?x16xf32>) {
  %y = moe.rms_norm %x, %w {epsilon = 1.0e-6 : f64} : tensor<?x16xf32>, tensor<16xf32> -> tensor<?x16xf32>
  %z = moe.rms_norm %x, %wq {epsilon = 1.0e-6 : f64, weight_offset = 1.0 : f64}
         : tensor<?x16xf32>, tensor<4xbf16> -> tensor<?x16xf32>
  return %y, %z : tensor<?x16xf32>, tensor<?x16xf32>
}

// CHECK-LABEL: func.func @rotary
// CHECK: moe.rotary %{{.*}}, %{{.*}}, %{{.*}} {head_dim = 8 : i64} : tensor<?x32xf32>, tensor<?xi64>, tensor<4xf32> -> tensor<?x32xf32>
// CHECK: moe.rotary %{{.*}}, %{{.*}}, %{{.*}} {head_dim = 8 : i64, interleaved = true, offset = 4 : i64, scale = 1.250000e+00 : f64} : tensor<?x32xf32>, tensor<?xi64>, tensor<2xf32> -> tensor<?x32xf32>
func.func @rotary(%x: tensor<?x32xf32>, %pos: tensor<?xi64>, %f: tensor<4xf32>, %g: tensor<2xf32>)
    -> (tensor<?x32xf32>, tensor<?x32xf32>) {
  %y = moe.rotary %x, %pos, %f {head_dim = 8 : i64}
         : tensor<?x32xf32>, tensor<?xi64>, tensor<4xf32> -> tensor<?x32xf32>
  %z = moe.rotary %x, %pos, %g {head_dim = 8 : i64, offset = 4 : i64, interleaved = true, scale = 1.25 : f64}
         : tensor<?x32xf32>, tensor<?xi64>, tensor<2xf32> -> tensor<?x32xf32>
  return %y, %z : tensor<?x32xf32>, tensor<?x32xf32>
}

// CHECK-LABEL: func.func @attention
// CHECK: moe.attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 1.250000e-01 : f64} : tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<?xi64>, tensor<?xi64> -> tensor<?x32xf32>
// CHECK: moe.attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} key_shared(%{{.*}} : tensor<?x4xbf16>) sinks(%{{.*}} : tensor<4xf32>) {layer = 3 : i64, num_heads = 4 : i64, num_kv_heads = 4 : i64, scale = 1.000000e-01 : f64, window = 128 : i64} : tensor<?x48xbf16>, tensor<?x32xbf16>, tensor<?x24xbf16>, tensor<?xi32>, tensor<?xi32> -> tensor<?x24xbf16>
// CHECK: moe.attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} sinks(%{{.*}} : tensor<4xf32>) {layer = 1 : i64, num_heads = 4 : i64, num_kv_heads = 1 : i64, scale = 5.000000e-01 : f64} : tensor<2x16xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2xi64>, tensor<2xi64> -> tensor<2x16xf32>
func.func @attention(%q: tensor<?x32xf32>, %k: tensor<?x16xf32>, %v: tensor<?x16xf32>,
                     %pos: tensor<?xi64>, %seq: tensor<?xi64>,
                     %q2: tensor<?x48xbf16>, %k2: tensor<?x32xbf16>, %v2: tensor<?x24xbf16>,
                     %ks: tensor<?x4xbf16>, %sinks: tensor<4xf32>, %pos32: tensor<?xi32>,
                     %seq32: tensor<?xi32>, %q3: tensor<2x16xf32>, %k3: tensor<2x4xf32>,
                     %p3: tensor<2xi64>) -> (tensor<?x32xf32>, tensor<?x24xbf16>, tensor<2x16xf32>) {
  // Llama: GQA, no window.
  %a = moe.attention %q, %k, %v, %pos, %seq {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.125 : f64}
         : tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<?xi64>, tensor<?xi64> -> tensor<?x32xf32>
  // Every optional part: a shared rope key (D = 8 + 4), sinks, a window.
  %b = moe.attention %q2, %k2, %v2, %pos32, %seq32 key_shared(%ks : tensor<?x4xbf16>) sinks(%sinks : tensor<4xf32>)
         {layer = 3 : i64, num_heads = 4 : i64, num_kv_heads = 4 : i64, scale = 0.1 : f64, window = 128 : i64}
         : tensor<?x48xbf16>, tensor<?x32xbf16>, tensor<?x24xbf16>, tensor<?xi32>, tensor<?xi32> -> tensor<?x24xbf16>
  // Static shapes, one KV head (MQA), sinks without key_shared.
  %c = moe.attention %q3, %k3, %k3, %p3, %p3 sinks(%sinks : tensor<4xf32>)
         {layer = 1 : i64, num_heads = 4 : i64, num_kv_heads = 1 : i64, scale = 0.5 : f64}
         : tensor<2x16xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2xi64>, tensor<2xi64> -> tensor<2x16xf32>
  return %a, %b, %c : tensor<?x32xf32>, tensor<?x24xbf16>, tensor<2x16xf32>
}

// A layer of a whole model: token-major activations, projections, residuals
// and the MoE block.
// CHECK-LABEL: func.func @forward
// CHECK: moe.embedding
// CHECK: moe.rms_norm
// CHECK: moe.linear
// CHECK: moe.rotary
// CHECK: moe.attention
// CHECK: arith.addf
// CHECK: moe.layer
// CHECK: arith.addf
func.func @forward(%input_ids: tensor<?xi64>, %positions: tensor<?xi64>, %sequences: tensor<?xi64>)
    -> tensor<?x32xf32> {
  %table = arith.constant dense<0.5> : tensor<32x16xf32>
  %norm = arith.constant dense<1.0> : tensor<16xf32>
  %wq = arith.constant dense<0.1> : tensor<32x16xf32>
  %wk = arith.constant dense<0.1> : tensor<16x16xf32>
  %wo = arith.constant dense<0.1> : tensor<16x32xf32>
  %freq = arith.constant dense<[1.0, 0.01]> : tensor<2xf32>
  %wr = arith.constant dense<0.1> : tensor<4x16xf32>
  %wgu = arith.constant dense<0.1> : tensor<4x16x16xf32>
  %wd = arith.constant dense<0.1> : tensor<4x16x8xf32>
  %x = moe.embedding %input_ids, %table : tensor<?xi64>, tensor<32x16xf32> -> tensor<?x16xf32>
  %n = moe.rms_norm %x, %norm {epsilon = 1.0e-6 : f64} : tensor<?x16xf32>, tensor<16xf32> -> tensor<?x16xf32>
  %q = moe.linear %n, %wq : tensor<?x16xf32>, tensor<32x16xf32> -> tensor<?x32xf32>
  %k = moe.linear %n, %wk : tensor<?x16xf32>, tensor<16x16xf32> -> tensor<?x16xf32>
  %qr = moe.rotary %q, %positions, %freq {head_dim = 8 : i64}
          : tensor<?x32xf32>, tensor<?xi64>, tensor<2xf32> -> tensor<?x32xf32>
  %kr = moe.rotary %k, %positions, %freq {head_dim = 8 : i64}
          : tensor<?x16xf32>, tensor<?xi64>, tensor<2xf32> -> tensor<?x16xf32>
  %a = moe.attention %qr, %kr, %k, %positions, %sequences
         {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.35355339059327373 : f64}
         : tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<?xi64>, tensor<?xi64> -> tensor<?x32xf32>
  %o = moe.linear %a, %wo : tensor<?x32xf32>, tensor<16x32xf32> -> tensor<?x16xf32>
  %r = arith.addf %x, %o : tensor<?x16xf32>
  %m = moe.layer %r : tensor<?x16xf32> router_weight(%wr : tensor<4x16xf32>)
         gate_up(%wgu : tensor<4x16x16xf32>) down(%wd : tensor<4x16x8xf32>)
         {routing = #moe.routing<softmax_topk>, top_k = 2 : i64, activation = #moe.activation<silu>,
          gate_up_layout = #moe.gate_up_layout<concatenated>} -> tensor<?x16xf32>
  %s = arith.addf %r, %m : tensor<?x16xf32>
  %logits = moe.linear %s, %table : tensor<?x16xf32>, tensor<32x16xf32> -> tensor<?x32xf32>
  return %logits : tensor<?x32xf32>
}

// -----

// moe.embedding

func.func @embedding_ids_rank(%ids: tensor<2x3xi64>, %table: tensor<32x16xf32>) -> tensor<6x16xf32> {
  // expected-error @+1 {{ids must be a rank-1 tensor [N], got 'tensor<2x3xi64>'}}
  %x = moe.embedding %ids, %table : tensor<2x3xi64>, tensor<32x16xf32> -> tensor<6x16xf32>
  return %x : tensor<6x16xf32>
}

// -----

func.func @embedding_table_rank(%ids: tensor<4xi64>, %table: tensor<32xf32>) -> tensor<4x16xf32> {
  // expected-error @+1 {{table must be a rank-2 tensor [V, H], got 'tensor<32xf32>'}}
  %x = moe.embedding %ids, %table : tensor<4xi64>, tensor<32xf32> -> tensor<4x16xf32>
  return %x : tensor<4x16xf32>
}

// -----

func.func @embedding_result_rows(%ids: tensor<4xi64>, %table: tensor<32x16xf32>) -> tensor<5x16xf32> {
  // expected-error @+1 {{result dimension 0 (N) is 5, but ids dimension 0 makes N = 4}}
  %x = moe.embedding %ids, %table : tensor<4xi64>, tensor<32x16xf32> -> tensor<5x16xf32>
  return %x : tensor<5x16xf32>
}

// -----

func.func @embedding_result_width(%ids: tensor<?xi64>, %table: tensor<32x16xf32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{result dimension 1 (H) is 8, but table dimension 1 makes H = 16}}
  %x = moe.embedding %ids, %table : tensor<?xi64>, tensor<32x16xf32> -> tensor<?x8xf32>
  return %x : tensor<?x8xf32>
}

// -----

// Only a narrower table widens to f32: f32 rows are not narrowed to bf16.
func.func @embedding_element_type(%ids: tensor<?xi64>, %table: tensor<32x16xf32>) -> tensor<?x16xbf16> {
  // expected-error @+1 {{result element type must be the table's, or f32 for a bf16 or f16 table}}
  %x = moe.embedding %ids, %table : tensor<?xi64>, tensor<32x16xf32> -> tensor<?x16xbf16>
  return %x : tensor<?x16xbf16>
}

// -----

// moe.rms_norm

func.func @rms_norm_input_rank(%x: tensor<16xf32>, %w: tensor<16xf32>) -> tensor<16xf32> {
  // expected-error @+1 {{input must be a rank-2 tensor [M, K], got 'tensor<16xf32>'}}
  %y = moe.rms_norm %x, %w {epsilon = 1.0e-6 : f64} : tensor<16xf32>, tensor<16xf32> -> tensor<16xf32>
  return %y : tensor<16xf32>
}

// -----

func.func @rms_norm_weight_rank(%x: tensor<?x16xf32>, %w: tensor<1x16xf32>) -> tensor<?x16xf32> {
  // expected-error @+1 {{weight must be a rank-1 tensor [G], got 'tensor<1x16xf32>'}}
  %y = moe.rms_norm %x, %w {epsilon = 1.0e-6 : f64} : tensor<?x16xf32>, tensor<1x16xf32> -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

func.func @rms_norm_result_shape(%x: tensor<?x16xf32>, %w: tensor<16xf32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{result dimension 1 (K) is 8, but input dimension 1 makes K = 16}}
  %y = moe.rms_norm %x, %w {epsilon = 1.0e-6 : f64} : tensor<?x16xf32>, tensor<16xf32> -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}

// -----

func.func @rms_norm_empty_weight(%x: tensor<?x16xf32>, %w: tensor<0xf32>) -> tensor<?x16xf32> {
  // expected-error @+1 {{weight must not be empty: it is one group's scale}}
  %y = moe.rms_norm %x, %w {epsilon = 1.0e-6 : f64} : tensor<?x16xf32>, tensor<0xf32> -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

func.func @rms_norm_groups(%x: tensor<?x16xf32>, %w: tensor<6xf32>) -> tensor<?x16xf32> {
  // expected-error @+1 {{weight length 6 does not divide the 16 input columns into groups}}
  %y = moe.rms_norm %x, %w {epsilon = 1.0e-6 : f64} : tensor<?x16xf32>, tensor<6xf32> -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

func.func @rms_norm_negative_epsilon(%x: tensor<?x16xf32>, %w: tensor<16xf32>) -> tensor<?x16xf32> {
  // expected-error @+1 {{epsilon must be non-negative and finite, got -1}}
  %y = moe.rms_norm %x, %w {epsilon = -1.0 : f64} : tensor<?x16xf32>, tensor<16xf32> -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

func.func @rms_norm_nan_epsilon(%x: tensor<?x16xf32>, %w: tensor<16xf32>) -> tensor<?x16xf32> {
  // expected-error @+1 {{epsilon must be non-negative and finite, got nan}}
  %y = moe.rms_norm %x, %w {epsilon = 0x7FF8000000000000 : f64} : tensor<?x16xf32>, tensor<16xf32> -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

func.func @rms_norm_offset(%x: tensor<?x16xf32>, %w: tensor<16xf32>) -> tensor<?x16xf32> {
  // expected-error @+1 {{weight_offset must be finite}}
  %y = moe.rms_norm %x, %w {epsilon = 1.0e-6 : f64, weight_offset = 0x7FF0000000000000 : f64}
         : tensor<?x16xf32>, tensor<16xf32> -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

// moe.rotary

func.func @rotary_positions(%x: tensor<4x32xf32>, %pos: tensor<5xi64>, %f: tensor<4xf32>) -> tensor<4x32xf32> {
  // expected-error @+1 {{positions dimension 0 (N) is 5, but input dimension 0 makes N = 4}}
  %y = moe.rotary %x, %pos, %f {head_dim = 8 : i64} : tensor<4x32xf32>, tensor<5xi64>, tensor<4xf32> -> tensor<4x32xf32>
  return %y : tensor<4x32xf32>
}

// -----

func.func @rotary_dynamic_columns(%x: tensor<?x?xf32>, %pos: tensor<?xi64>, %f: tensor<4xf32>) -> tensor<?x?xf32> {
  // expected-error @+1 {{input needs a static column count}}
  %y = moe.rotary %x, %pos, %f {head_dim = 8 : i64} : tensor<?x?xf32>, tensor<?xi64>, tensor<4xf32> -> tensor<?x?xf32>
  return %y : tensor<?x?xf32>
}

// -----

func.func @rotary_whole_heads(%x: tensor<?x36xf32>, %pos: tensor<?xi64>, %f: tensor<4xf32>) -> tensor<?x36xf32> {
  // expected-error @+1 {{input has 36 columns, not whole heads of head_dim 8}}
  %y = moe.rotary %x, %pos, %f {head_dim = 8 : i64} : tensor<?x36xf32>, tensor<?xi64>, tensor<4xf32> -> tensor<?x36xf32>
  return %y : tensor<?x36xf32>
}

// -----

func.func @rotary_dynamic_freq(%x: tensor<?x32xf32>, %pos: tensor<?xi64>, %f: tensor<?xf32>) -> tensor<?x32xf32> {
  // expected-error @+1 {{inv_freq must have a static, non-zero length}}
  %y = moe.rotary %x, %pos, %f {head_dim = 8 : i64} : tensor<?x32xf32>, tensor<?xi64>, tensor<?xf32> -> tensor<?x32xf32>
  return %y : tensor<?x32xf32>
}

// -----

func.func @rotary_empty_freq(%x: tensor<?x32xf32>, %pos: tensor<?xi64>, %f: tensor<0xf32>) -> tensor<?x32xf32> {
  // expected-error @+1 {{inv_freq must have a static, non-zero length}}
  %y = moe.rotary %x, %pos, %f {head_dim = 8 : i64} : tensor<?x32xf32>, tensor<?xi64>, tensor<0xf32> -> tensor<?x32xf32>
  return %y : tensor<?x32xf32>
}

// -----

func.func @rotary_slice_past_head(%x: tensor<?x32xf32>, %pos: tensor<?xi64>, %f: tensor<2xf32>) -> tensor<?x32xf32> {
  // expected-error @+1 {{the rotated columns [6, 10) do not lie in a head of 8 columns}}
  %y = moe.rotary %x, %pos, %f {head_dim = 8 : i64, offset = 6 : i64}
         : tensor<?x32xf32>, tensor<?xi64>, tensor<2xf32> -> tensor<?x32xf32>
  return %y : tensor<?x32xf32>
}

// -----

func.func @rotary_negative_offset(%x: tensor<?x32xf32>, %pos: tensor<?xi64>, %f: tensor<2xf32>) -> tensor<?x32xf32> {
  // expected-error @+1 {{the rotated columns [-1, 3) do not lie in a head of 8 columns}}
  %y = moe.rotary %x, %pos, %f {head_dim = 8 : i64, offset = -1 : i64}
         : tensor<?x32xf32>, tensor<?xi64>, tensor<2xf32> -> tensor<?x32xf32>
  return %y : tensor<?x32xf32>
}

// -----

func.func @rotary_scale(%x: tensor<?x32xf32>, %pos: tensor<?xi64>, %f: tensor<4xf32>) -> tensor<?x32xf32> {
  // expected-error @+1 {{scale must be finite}}
  %y = moe.rotary %x, %pos, %f {head_dim = 8 : i64, scale = 0xFFF0000000000000 : f64}
         : tensor<?x32xf32>, tensor<?xi64>, tensor<4xf32> -> tensor<?x32xf32>
  return %y : tensor<?x32xf32>
}

// -----

func.func @rotary_head_dim(%x: tensor<?x32xf32>, %pos: tensor<?xi64>, %f: tensor<4xf32>) -> tensor<?x32xf32> {
  // expected-error @+1 {{attribute 'head_dim' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
  %y = moe.rotary %x, %pos, %f {head_dim = 0 : i64} : tensor<?x32xf32>, tensor<?xi64>, tensor<4xf32> -> tensor<?x32xf32>
  return %y : tensor<?x32xf32>
}

// -----

// moe.attention

func.func @attention_rows(%q: tensor<4x32xf32>, %k: tensor<3x16xf32>, %pos: tensor<4xi64>) -> tensor<4x32xf32> {
  // expected-error @+1 {{key dimension 0 (N) is 3, but query dimension 0 makes N = 4}}
  %a = moe.attention %q, %k, %k, %pos, %pos {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.125 : f64}
         : tensor<4x32xf32>, tensor<3x16xf32>, tensor<3x16xf32>, tensor<4xi64>, tensor<4xi64> -> tensor<4x32xf32>
  return %a : tensor<4x32xf32>
}

// -----

func.func @attention_sequences_rank(%q: tensor<?x32xf32>, %k: tensor<?x16xf32>, %pos: tensor<?xi64>,
                                    %seq: tensor<?x1xi64>) -> tensor<?x32xf32> {
  // expected-error @+1 {{sequences must be a rank-1 tensor [N], got 'tensor<?x1xi64>'}}
  %a = moe.attention %q, %k, %k, %pos, %seq {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.125 : f64}
         : tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<?xi64>, tensor<?x1xi64> -> tensor<?x32xf32>
  return %a : tensor<?x32xf32>
}

// -----

func.func @attention_key_shared_rank(%q: tensor<?x48xf32>, %k: tensor<?x32xf32>, %pos: tensor<?xi64>,
                                     %ks: tensor<?xf32>) -> tensor<?x32xf32> {
  // expected-error @+1 {{key_shared must be a rank-2 tensor [N, Dr], got 'tensor<?xf32>'}}
  %a = moe.attention %q, %k, %k, %pos, %pos key_shared(%ks : tensor<?xf32>)
         {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 4 : i64, scale = 0.125 : f64}
         : tensor<?x48xf32>, tensor<?x32xf32>, tensor<?x32xf32>, tensor<?xi64>, tensor<?xi64> -> tensor<?x32xf32>
  return %a : tensor<?x32xf32>
}

// -----

func.func @attention_sinks_length(%q: tensor<?x32xf32>, %k: tensor<?x16xf32>, %pos: tensor<?xi64>,
                                  %sinks: tensor<3xf32>) -> tensor<?x32xf32> {
  // expected-error @+1 {{attribute num_heads (Hq) is 4, but sinks dimension 0 makes Hq = 3}}
  %a = moe.attention %q, %k, %k, %pos, %pos sinks(%sinks : tensor<3xf32>)
         {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.125 : f64}
         : tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<?xi64>, tensor<?xi64> -> tensor<?x32xf32>
  return %a : tensor<?x32xf32>
}

// -----

func.func @attention_kv_heads(%q: tensor<?x32xf32>, %k: tensor<?x12xf32>, %pos: tensor<?xi64>) -> tensor<?x32xf32> {
  // expected-error @+1 {{num_heads = 4 is not a multiple of num_kv_heads = 3}}
  %a = moe.attention %q, %k, %k, %pos, %pos {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 3 : i64, scale = 0.125 : f64}
         : tensor<?x32xf32>, tensor<?x12xf32>, tensor<?x12xf32>, tensor<?xi64>, tensor<?xi64> -> tensor<?x32xf32>
  return %a : tensor<?x32xf32>
}

// -----

func.func @attention_dynamic_query(%q: tensor<?x?xf32>, %k: tensor<?x16xf32>, %pos: tensor<?xi64>) -> tensor<?x32xf32> {
  // expected-error @+1 {{query needs a static column count}}
  %a = moe.attention %q, %k, %k, %pos, %pos {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.125 : f64}
         : tensor<?x?xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<?xi64>, tensor<?xi64> -> tensor<?x32xf32>
  return %a : tensor<?x32xf32>
}

// -----

func.func @attention_query_heads(%q: tensor<?x30xf32>, %k: tensor<?x16xf32>, %pos: tensor<?xi64>) -> tensor<?x32xf32> {
  // expected-error @+1 {{query has 30 columns, not a multiple of 4 heads}}
  %a = moe.attention %q, %k, %k, %pos, %pos {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.125 : f64}
         : tensor<?x30xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<?xi64>, tensor<?xi64> -> tensor<?x32xf32>
  return %a : tensor<?x32xf32>
}

// -----

func.func @attention_key_heads(%q: tensor<?x32xf32>, %k: tensor<?x15xf32>, %v: tensor<?x16xf32>,
                               %pos: tensor<?xi64>) -> tensor<?x32xf32> {
  // expected-error @+1 {{key has 15 columns, not a multiple of 2 heads}}
  %a = moe.attention %q, %k, %v, %pos, %pos {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.125 : f64}
         : tensor<?x32xf32>, tensor<?x15xf32>, tensor<?x16xf32>, tensor<?xi64>, tensor<?xi64> -> tensor<?x32xf32>
  return %a : tensor<?x32xf32>
}

// -----

func.func @attention_value_heads(%q: tensor<?x32xf32>, %k: tensor<?x16xf32>, %v: tensor<?x15xf32>,
                                 %pos: tensor<?xi64>) -> tensor<?x32xf32> {
  // expected-error @+1 {{value has 15 columns, not a multiple of 2 heads}}
  %a = moe.attention %q, %k, %v, %pos, %pos {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.125 : f64}
         : tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x15xf32>, tensor<?xi64>, tensor<?xi64> -> tensor<?x32xf32>
  return %a : tensor<?x32xf32>
}

// -----

func.func @attention_result_heads(%q: tensor<?x32xf32>, %k: tensor<?x16xf32>, %pos: tensor<?xi64>) -> tensor<?x30xf32> {
  // expected-error @+1 {{result has 30 columns, not a multiple of 4 heads}}
  %a = moe.attention %q, %k, %k, %pos, %pos {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.125 : f64}
         : tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<?xi64>, tensor<?xi64> -> tensor<?x30xf32>
  return %a : tensor<?x30xf32>
}

// -----

func.func @attention_dynamic_shared(%q: tensor<?x48xf32>, %k: tensor<?x32xf32>, %pos: tensor<?xi64>,
                                    %ks: tensor<?x?xf32>) -> tensor<?x32xf32> {
  // expected-error @+1 {{key_shared needs a static column count}}
  %a = moe.attention %q, %k, %k, %pos, %pos key_shared(%ks : tensor<?x?xf32>)
         {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 4 : i64, scale = 0.125 : f64}
         : tensor<?x48xf32>, tensor<?x32xf32>, tensor<?x32xf32>, tensor<?xi64>, tensor<?xi64> -> tensor<?x32xf32>
  return %a : tensor<?x32xf32>
}

// -----

func.func @attention_key_width(%q: tensor<?x32xf32>, %k: tensor<?x8xf32>, %v: tensor<?x16xf32>,
                               %pos: tensor<?xi64>) -> tensor<?x32xf32> {
  // expected-error @+1 {{query heads have 8 columns, but keys have 4 columns}}
  %a = moe.attention %q, %k, %v, %pos, %pos {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.125 : f64}
         : tensor<?x32xf32>, tensor<?x8xf32>, tensor<?x16xf32>, tensor<?xi64>, tensor<?xi64> -> tensor<?x32xf32>
  return %a : tensor<?x32xf32>
}

// -----

func.func @attention_shared_width(%q: tensor<?x48xf32>, %k: tensor<?x32xf32>, %pos: tensor<?xi64>,
                                  %ks: tensor<?x8xf32>) -> tensor<?x32xf32> {
  // expected-error @+1 {{query heads have 12 columns, but keys have 8 + 8 shared columns}}
  %a = moe.attention %q, %k, %k, %pos, %pos key_shared(%ks : tensor<?x8xf32>)
         {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 4 : i64, scale = 0.125 : f64}
         : tensor<?x48xf32>, tensor<?x32xf32>, tensor<?x32xf32>, tensor<?xi64>, tensor<?xi64> -> tensor<?x32xf32>
  return %a : tensor<?x32xf32>
}

// -----

func.func @attention_value_width(%q: tensor<?x32xf32>, %k: tensor<?x16xf32>, %v: tensor<?x8xf32>,
                                 %pos: tensor<?xi64>) -> tensor<?x32xf32> {
  // expected-error @+1 {{result heads have 8 columns, values 4}}
  %a = moe.attention %q, %k, %v, %pos, %pos {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.125 : f64}
         : tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x8xf32>, tensor<?xi64>, tensor<?xi64> -> tensor<?x32xf32>
  return %a : tensor<?x32xf32>
}

// -----

func.func @attention_scale(%q: tensor<?x32xf32>, %k: tensor<?x16xf32>, %pos: tensor<?xi64>) -> tensor<?x32xf32> {
  // expected-error @+1 {{scale must be positive and finite, got 0}}
  %a = moe.attention %q, %k, %k, %pos, %pos {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.0 : f64}
         : tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<?xi64>, tensor<?xi64> -> tensor<?x32xf32>
  return %a : tensor<?x32xf32>
}

// -----

func.func @attention_window(%q: tensor<?x32xf32>, %k: tensor<?x16xf32>, %pos: tensor<?xi64>) -> tensor<?x32xf32> {
  // expected-error @+1 {{window must be non-negative (0: no window), got -1}}
  %a = moe.attention %q, %k, %k, %pos, %pos
         {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.125 : f64, window = -1 : i64}
         : tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<?xi64>, tensor<?xi64> -> tensor<?x32xf32>
  return %a : tensor<?x32xf32>
}

// -----

func.func @attention_layer(%q: tensor<?x32xf32>, %k: tensor<?x16xf32>, %pos: tensor<?xi64>) -> tensor<?x32xf32> {
  // expected-error @+1 {{attribute 'layer' failed to satisfy constraint: 64-bit signless integer attribute whose value is non-negative}}
  %a = moe.attention %q, %k, %k, %pos, %pos {layer = -1 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.125 : f64}
         : tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<?xi64>, tensor<?xi64> -> tensor<?x32xf32>
  return %a : tensor<?x32xf32>
}

// -----

func.func @attention_num_heads(%q: tensor<?x32xf32>, %k: tensor<?x16xf32>, %pos: tensor<?xi64>) -> tensor<?x32xf32> {
  // expected-error @+1 {{attribute 'num_kv_heads' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
  %a = moe.attention %q, %k, %k, %pos, %pos {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 0 : i64, scale = 0.125 : f64}
         : tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<?xi64>, tensor<?xi64> -> tensor<?x32xf32>
  return %a : tensor<?x32xf32>
}
