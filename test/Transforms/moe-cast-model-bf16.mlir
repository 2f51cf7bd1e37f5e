// RUN: moec-opt %s -split-input-file -moe-cast-model-bf16 -verify-diagnostics | FileCheck %s
// RUN: moec-opt %s -split-input-file -moe-cast-model-bf16="cache=f32 outputs=bf16" -verify-diagnostics | FileCheck %s --check-prefix=F32CACHE
// RUN: not moec-opt %s -split-input-file -moe-cast-model-bf16="cache=f16" 2>&1 | FileCheck %s --check-prefix=OPTION

// The CUDA target's default for a whole model (moec compile --target=cuda
// --precision=bf16) stated as types and moe.kv_cache, which the CUDA printer
// reads.

// OPTION: error: moe-cast-model-bf16: unknown cache='f16' (f32, bf16)

// A whole model (planned KV cache): the embedding table, tied to the LM head,
// becomes one bf16 constant that keeps its name and every other discardable
// attribute; the embedding's rows stay f32 (the residual stream). The
// attention projections and the experts take bf16 weights; the router (its
// logits choose the experts), the norm and the activations between kernels
// stay f32; rows only the bf16-weight kernels read are bf16. The KV cache
// stores bf16 rows, or f32 ones with cache=f32 (F32CACHE), where outputs=bf16
// also rounds the experts' down-projection results for the combine.
// CHECK-LABEL: func.func @model
// CHECK-SAME: moe.kv_cache = {element_type = bf16, max_batch = 2 : i64, max_seq = 16 : i64}
// CHECK-DAG: %[[TABLE:.*]] = arith.constant {moec.name = "embed", moec.placeholder = "random"} dense<1.000980e-01> : tensor<32x16xbf16>
// CHECK-DAG: %[[NORM:.*]] = arith.constant dense<1.000000e+00> : tensor<16xf32>
// CHECK-DAG: %[[WQ:.*]] = arith.constant dense<2.001950e-01> : tensor<16x16xbf16>
// CHECK-DAG: %[[WR:.*]] = arith.constant dense<4.000000e-01> : tensor<4x16xf32>
// CHECK-DAG: %[[WGU:.*]] = arith.constant {moec.name = "gate_up"} dense<5.000000e-01> : tensor<4x16x16xbf16>
// CHECK: %[[H:.*]] = moe.embedding %{{.*}}, %[[TABLE]] : tensor<?xi64>, tensor<32x16xbf16> -> tensor<?x16xf32>
// CHECK: moe.rms_norm %[[H]], %[[NORM]] {{.*}} -> tensor<?x16xf32>
// CHECK: moe.linear %{{.*}}, %[[WQ]] : tensor<?x16xf32>, tensor<16x16xbf16> -> tensor<?x16xf32>
// CHECK: moe.attention {{.*}} -> tensor<?x16xf32>
// CHECK: moe.linear %{{.*}}, %[[WR]] : tensor<?x16xf32>, tensor<4x16xf32> -> tensor<?x4xf32>
// CHECK: moe.permute {{.*}} -> tensor<?x16xbf16>
// CHECK: moe.grouped_matmul %{{.*}}, %[[WGU]], %{{.*}} {{.*}} -> tensor<?x8xbf16>
// CHECK: moe.grouped_matmul {{.*}} : tensor<?x8xbf16>, tensor<4x16x8xbf16>, tensor<4xi32> -> tensor<?x16xf32>
// CHECK: moe.combine {{.*}} -> tensor<?x16xf32>
// CHECK: arith.addf {{.*}} : tensor<?x16xf32>
// CHECK: moe.linear %{{.*}}, %[[TABLE]] : tensor<?x16xf32>, tensor<32x16xbf16> -> tensor<?x32xf32>
// CHECK-NOT: tensor<32x16xf32>
// F32CACHE-LABEL: func.func @model
// F32CACHE-SAME: moe.kv_cache = {element_type = f32, max_batch = 2 : i64, max_seq = 16 : i64}
// F32CACHE: moe.embedding {{.*}} tensor<32x16xbf16> -> tensor<?x16xf32>
// F32CACHE: moe.grouped_matmul {{.*}} : tensor<?x8xbf16>, tensor<4x16x8xbf16>, tensor<4xi32> -> tensor<?x16xbf16>
func.func @model(%ids: tensor<?xi64>, %pos: tensor<?xi64>, %seq: tensor<?xi64>) -> tensor<?x32xf32>
    attributes {moe.kv_cache = {max_batch = 2 : i64, max_seq = 16 : i64}} {
  %table = arith.constant {moec.name = "embed", moec.placeholder = "random"} dense<0.1> : tensor<32x16xf32>
  %norm = arith.constant dense<1.0> : tensor<16xf32>
  %wq = arith.constant dense<0.2> : tensor<16x16xf32>
  %wk = arith.constant dense<0.3> : tensor<8x16xf32>
  %wr = arith.constant dense<0.4> : tensor<4x16xf32>
  %wgu = arith.constant {moec.name = "gate_up"} dense<0.5> : tensor<4x16x16xf32>
  %wd = arith.constant dense<0.6> : tensor<4x16x8xf32>
  %h = moe.embedding %ids, %table : tensor<?xi64>, tensor<32x16xf32> -> tensor<?x16xf32>
  %n = moe.rms_norm %h, %norm {epsilon = 1.0e-6 : f64} : tensor<?x16xf32>, tensor<16xf32> -> tensor<?x16xf32>
  %q = moe.linear %n, %wq : tensor<?x16xf32>, tensor<16x16xf32> -> tensor<?x16xf32>
  %k = moe.linear %n, %wk : tensor<?x16xf32>, tensor<8x16xf32> -> tensor<?x8xf32>
  %a = moe.attention %q, %k, %k, %pos, %seq {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.5 : f64}
      : tensor<?x16xf32>, tensor<?x8xf32>, tensor<?x8xf32>, tensor<?xi64>, tensor<?xi64> -> tensor<?x16xf32>
  %h1 = arith.addf %h, %a : tensor<?x16xf32>
  %logits = moe.linear %h1, %wr : tensor<?x16xf32>, tensor<4x16xf32> -> tensor<?x4xf32>
  %eids, %w = moe.route %logits {routing = #moe.routing<softmax_topk>, top_k = 2 : i64}
      : tensor<?x4xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
  %perm, %offsets, %nvalid = moe.sort %eids {num_experts = 4 : i64}
      : tensor<?x2xi32> -> tensor<?xi32>, tensor<4xi32>, tensor<i32>
  %rows = moe.permute %h1, %perm, %nvalid {top_k = 2 : i64}
      : tensor<?x16xf32>, tensor<?xi32>, tensor<i32> -> tensor<?x16xf32>
  %g = moe.grouped_matmul %rows, %wgu, %offsets
      {epilogue = #moe.activation<silu>, epilogue_layout = #moe.gate_up_layout<concatenated>}
      : tensor<?x16xf32>, tensor<4x16x16xf32>, tensor<4xi32> -> tensor<?x8xf32>
  %y = moe.grouped_matmul %g, %wd, %offsets : tensor<?x8xf32>, tensor<4x16x8xf32>, tensor<4xi32> -> tensor<?x16xf32>
  %moe = moe.combine %y, %perm, %w, %nvalid
      : tensor<?x16xf32>, tensor<?xi32>, tensor<?x2xf32>, tensor<i32> -> tensor<?x16xf32>
  %h2 = arith.addf %h1, %moe : tensor<?x16xf32>
  %out = moe.linear %h2, %table : tensor<?x16xf32>, tensor<32x16xf32> -> tensor<?x32xf32>
  return %out : tensor<?x32xf32>
}

// -----

// A block (no KV cache) is left alone: its default is --expert-weights'.
// CHECK-LABEL: func.func @block
// CHECK-NOT: moe.kv_cache
// CHECK: moe.linear {{.*}} : tensor<?x16xf32>, tensor<8x16xf32> -> tensor<?x8xf32>
func.func @block(%x: tensor<?x16xf32>) -> tensor<?x8xf32> {
  %w = arith.constant dense<0.2> : tensor<8x16xf32>
  %y = moe.linear %x, %w : tensor<?x16xf32>, tensor<8x16xf32> -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}

// -----

// A table that is no constant (an input) stays f32, and so does a projection
// whose K (12) the bf16 kernel cannot load 8 at a time; the cache is still
// bf16.
// CHECK-LABEL: func.func @no_constant_table
// CHECK-SAME: element_type = bf16
// CHECK: moe.embedding {{.*}} : tensor<?xi64>, tensor<32x12xf32> -> tensor<?x12xf32>
// CHECK: moe.linear {{.*}} : tensor<?x12xf32>, tensor<8x12xf32> -> tensor<?x8xf32>
func.func @no_constant_table(%ids: tensor<?xi64>, %table: tensor<32x12xf32>, %pos: tensor<?xi64>,
                             %seq: tensor<?xi64>) -> tensor<?x8xf32>
    attributes {moe.kv_cache = {max_batch = 1 : i64, max_seq = 8 : i64}} {
  %wq = arith.constant dense<0.2> : tensor<8x12xf32>
  %h = moe.embedding %ids, %table : tensor<?xi64>, tensor<32x12xf32> -> tensor<?x12xf32>
  %q = moe.linear %h, %wq : tensor<?x12xf32>, tensor<8x12xf32> -> tensor<?x8xf32>
  %a = moe.attention %q, %q, %q, %pos, %seq {layer = 0 : i64, num_heads = 2 : i64, num_kv_heads = 2 : i64, scale = 0.5 : f64}
      : tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>, tensor<?xi64>, tensor<?xi64> -> tensor<?x8xf32>
  return %a : tensor<?x8xf32>
}

// -----

// Attention without a KV cache plan: the model was not planned.
// expected-error @+1 {{a whole model's function without a KV cache plan (moe.kv_cache): run moe-plan-kv-cache before moe-cast-model-bf16}}
func.func @unplanned(%q: tensor<?x8xf32>, %pos: tensor<?xi64>, %seq: tensor<?xi64>) -> tensor<?x8xf32> {
  %a = moe.attention %q, %q, %q, %pos, %seq {layer = 0 : i64, num_heads = 2 : i64, num_kv_heads = 2 : i64, scale = 0.5 : f64}
      : tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>, tensor<?xi64>, tensor<?xi64> -> tensor<?x8xf32>
  return %a : tensor<?x8xf32>
}

// -----

// Expert weights that cannot be bf16 (K = 12): an error naming this pass.
func.func @experts_k12(%rows: tensor<?x12xf32>, %offsets: tensor<4xi32>) -> tensor<?x16xf32>
    attributes {moe.kv_cache = {max_batch = 1 : i64, max_seq = 8 : i64}} {
  %wd = arith.constant dense<0.6> : tensor<4x16x12xf32>
  // expected-error @+1 {{cannot store the weights as bf16: K = 12 is not a multiple of 8, which bf16 expert weights need (moe-cast-model-bf16)}}
  %y = moe.grouped_matmul %rows, %wd, %offsets : tensor<?x12xf32>, tensor<4x16x12xf32>, tensor<4xi32> -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

// MLA (attention with a shared rope key, DeepSeek-V3) keeps an f32 KV cache
// whatever the cache option: a bf16 one measured above transformers' own bf16
// error on the DeepSeek-V3 fixture. Its weights still become bf16.
// CHECK-LABEL: func.func @mla
// CHECK-SAME: moe.kv_cache = {element_type = f32, max_batch = 2 : i64, max_seq = 16 : i64}
// CHECK: moe.linear %{{.*}} : tensor<?x16xf32>, tensor<24x16xbf16> -> tensor<?x24xf32>
// F32CACHE-LABEL: func.func @mla
// F32CACHE-SAME: moe.kv_cache = {element_type = f32,
func.func @mla(%ids: tensor<?xi64>, %pos: tensor<?xi64>, %seq: tensor<?xi64>) -> tensor<?x16xf32>
    attributes {moe.kv_cache = {max_batch = 2 : i64, max_seq = 16 : i64}} {
  %table = arith.constant dense<0.5> : tensor<32x16xf32>
  %wq = arith.constant dense<0.1> : tensor<24x16xf32>
  %wk = arith.constant dense<0.15> : tensor<8x16xf32>
  %wr = arith.constant dense<0.2> : tensor<2x16xf32>
  %h = moe.embedding %ids, %table : tensor<?xi64>, tensor<32x16xf32> -> tensor<?x16xf32>
  %q = moe.linear %h, %wq : tensor<?x16xf32>, tensor<24x16xf32> -> tensor<?x24xf32>
  %k = moe.linear %h, %wk : tensor<?x16xf32>, tensor<8x16xf32> -> tensor<?x8xf32>
  %r = moe.linear %h, %wr : tensor<?x16xf32>, tensor<2x16xf32> -> tensor<?x2xf32>
  %a = moe.attention %q, %k, %k, %pos, %seq key_shared(%r : tensor<?x2xf32>) {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.5 : f64}
      : tensor<?x24xf32>, tensor<?x8xf32>, tensor<?x8xf32>, tensor<?xi64>, tensor<?xi64> -> tensor<?x16xf32>
  return %a : tensor<?x16xf32>
}
