// RUN: moec-opt %s -split-input-file -moe-fuse-sibling-linears -verify-diagnostics | FileCheck %s

// In whole models, projections of one input with bf16 weights and no
// epilogue become one moe.multi_linear (the CUDA target runs them in one
// launch); everything else is left as it is. The pass reports no errors: what it cannot fuse it leaves.

// Attention's q, k and v: one moe.multi_linear at the first of them, results
// in program order. The router (f32 weights), the o projection (another
// input) and a gated projection (an epilogue) are left alone.
// CHECK-LABEL: func.func @qkv
// CHECK: %[[QKV:.*]]:3 = moe.multi_linear %arg0, %{{.*}}, %{{.*}}, %{{.*}} : tensor<?x16xf32>, tensor<16x16xbf16>, tensor<8x16xbf16>, tensor<8x16xbf16> -> tensor<?x16xf32>, tensor<?x8xf32>, tensor<?x8xf32>
// CHECK-NOT: moe.multi_linear
// CHECK: moe.linear %arg0, %{{.*}} : tensor<?x16xf32>, tensor<4x16xf32> -> tensor<?x4xf32>
// CHECK: moe.linear %arg0, %{{.*}} {epilogue
// CHECK: moe.linear %[[QKV]]#0, %{{.*}} : tensor<?x16xf32>, tensor<16x16xbf16>
// CHECK: return %[[QKV]]#1, %[[QKV]]#2
func.func @qkv(%x: tensor<?x16xf32>) -> (tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x4xf32>, tensor<?x8xf32>, tensor<?x16xf32>) attributes {moe.kv_cache = {max_batch = 1 : i64, max_seq = 8 : i64}} {
  %wq = arith.constant dense<0.25> : tensor<16x16xbf16>
  %wk = arith.constant dense<0.5> : tensor<8x16xbf16>
  %wv = arith.constant dense<0.75> : tensor<8x16xbf16>
  %wr = arith.constant dense<1.0> : tensor<4x16xf32>
  %wg = arith.constant dense<1.5> : tensor<16x16xbf16>
  %wo = arith.constant dense<2.0> : tensor<16x16xbf16>
  %q = moe.linear %x, %wq : tensor<?x16xf32>, tensor<16x16xbf16> -> tensor<?x16xf32>
  %k = moe.linear %x, %wk : tensor<?x16xf32>, tensor<8x16xbf16> -> tensor<?x8xf32>
  %r = moe.linear %x, %wr : tensor<?x16xf32>, tensor<4x16xf32> -> tensor<?x4xf32>
  %g = moe.linear %x, %wg {epilogue = #moe.activation<silu>, epilogue_layout = #moe.gate_up_layout<concatenated>}
      : tensor<?x16xf32>, tensor<16x16xbf16> -> tensor<?x8xf32>
  %v = moe.linear %x, %wv : tensor<?x16xf32>, tensor<8x16xbf16> -> tensor<?x8xf32>
  %o = moe.linear %q, %wo : tensor<?x16xf32>, tensor<16x16xbf16> -> tensor<?x16xf32>
  return %k, %v, %r, %g, %o : tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x4xf32>, tensor<?x8xf32>, tensor<?x16xf32>
}

// -----

// Biases (gpt-oss's attention): siblings that all have one fuse with them; a
// sibling without a bias is not grouped with biased ones, and alone it stays
// a moe.linear.
// CHECK-LABEL: func.func @biases
// CHECK: %[[QK:.*]]:2 = moe.multi_linear %arg0, %{{.*}}, %{{.*}} biases(%{{.*}}, %{{.*}} : tensor<16xf32>, tensor<8xf32>) : tensor<?x16xf32>, tensor<16x16xbf16>, tensor<8x16xbf16> -> tensor<?x16xf32>, tensor<?x8xf32>
// CHECK: moe.linear %arg0, %{{.*}} : tensor<?x16xf32>, tensor<8x16xbf16> -> tensor<?x8xf32>
// CHECK-NOT: moe.multi_linear
func.func @biases(%x: tensor<?x16xf32>) -> (tensor<?x16xf32>, tensor<?x8xf32>, tensor<?x8xf32>) attributes {moe.kv_cache = {max_batch = 1 : i64, max_seq = 8 : i64}} {
  %wq = arith.constant dense<0.25> : tensor<16x16xbf16>
  %wk = arith.constant dense<0.5> : tensor<8x16xbf16>
  %bq = arith.constant dense<0.1> : tensor<16xf32>
  %bk = arith.constant dense<0.2> : tensor<8xf32>
  %q = moe.linear %x, %wq bias(%bq : tensor<16xf32>) : tensor<?x16xf32>, tensor<16x16xbf16> -> tensor<?x16xf32>
  %k = moe.linear %x, %wk bias(%bk : tensor<8xf32>) : tensor<?x16xf32>, tensor<8x16xbf16> -> tensor<?x8xf32>
  %v = moe.linear %x, %wk : tensor<?x16xf32>, tensor<8x16xbf16> -> tensor<?x8xf32>
  return %q, %k, %v : tensor<?x16xf32>, tensor<?x8xf32>, tensor<?x8xf32>
}

// -----

// Five siblings: four in one op (its limit), the fifth left alone. Results of
// different element types are not grouped.
// CHECK-LABEL: func.func @five
// CHECK: moe.multi_linear %arg0, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : {{.*}} -> tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>
// CHECK-NOT: moe.multi_linear
// CHECK: moe.linear %arg0, %{{.*}} : tensor<?x16xf32>, tensor<8x16xbf16> -> tensor<?x8xf32>
// CHECK: moe.linear %arg0, %{{.*}} : tensor<?x16xf32>, tensor<8x16xbf16> -> tensor<?x8xbf16>
func.func @five(%x: tensor<?x16xf32>) -> (tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x8xbf16>) attributes {moe.kv_cache = {max_batch = 1 : i64, max_seq = 8 : i64}} {
  %w = arith.constant dense<0.5> : tensor<8x16xbf16>
  %a = moe.linear %x, %w : tensor<?x16xf32>, tensor<8x16xbf16> -> tensor<?x8xf32>
  %b = moe.linear %x, %w : tensor<?x16xf32>, tensor<8x16xbf16> -> tensor<?x8xf32>
  %c = moe.linear %x, %w : tensor<?x16xf32>, tensor<8x16xbf16> -> tensor<?x8xf32>
  %d = moe.linear %x, %w : tensor<?x16xf32>, tensor<8x16xbf16> -> tensor<?x8xf32>
  %e = moe.linear %x, %w : tensor<?x16xf32>, tensor<8x16xbf16> -> tensor<?x8xf32>
  %f = moe.linear %x, %w : tensor<?x16xf32>, tensor<8x16xbf16> -> tensor<?x8xbf16>
  return %a, %b, %c, %d, %e, %f : tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x8xbf16>
}

// -----

// A sibling whose weight is computed after the first projection cannot move
// to it: both stay moe.linear. Projections in different blocks never group.
// CHECK-LABEL: func.func @late_weight
// CHECK-NOT: moe.multi_linear
// CHECK: moe.linear
// CHECK: moe.linear
// CHECK-NOT: moe.multi_linear
func.func @late_weight(%x: tensor<?x16xf32>, %w0: tensor<8x16xbf16>, %w1: tensor<8x16xbf16>) -> (tensor<?x8xf32>, tensor<?x8xf32>) attributes {moe.kv_cache = {max_batch = 1 : i64, max_seq = 8 : i64}} {
  %a = moe.linear %x, %w0 : tensor<?x16xf32>, tensor<8x16xbf16> -> tensor<?x8xf32>
  %w = arith.addf %w0, %w1 : tensor<8x16xbf16>
  %b = moe.linear %x, %w : tensor<?x16xf32>, tensor<8x16xbf16> -> tensor<?x8xf32>
  return %a, %b : tensor<?x8xf32>, tensor<?x8xf32>
}

// -----

// A block (no moe.kv_cache): its shared expert and gate go to a side stream
// (moe-plan-streams), so nothing is fused.
// CHECK-LABEL: func.func @block
// CHECK-NOT: moe.multi_linear
// CHECK: moe.linear
// CHECK: moe.linear
func.func @block(%x: tensor<?x16xf32>) -> (tensor<?x16xf32>, tensor<?x1xf32>) {
  %wu = arith.constant dense<0.25> : tensor<16x16xbf16>
  %wg = arith.constant dense<0.5> : tensor<1x16xbf16>
  %u = moe.linear %x, %wu : tensor<?x16xf32>, tensor<16x16xbf16> -> tensor<?x16xf32>
  %g = moe.linear %x, %wg : tensor<?x16xf32>, tensor<1x16xbf16> -> tensor<?x1xf32>
  return %u, %g : tensor<?x16xf32>, tensor<?x1xf32>
}
