// RUN: moec-opt %s -split-input-file -verify-diagnostics -moe-plan-weight-prefetch | FileCheck %s
// RUN: moec-opt %s -split-input-file -moe-plan-weight-prefetch="l2-bytes=1040 max-rows=8" | FileCheck %s --check-prefix=SMALL
// RUN: not moec-opt %s -split-input-file -moe-plan-weight-prefetch="l2-bytes=8" 2>&1 | FileCheck %s --check-prefix=OPTIONS

// In whole models (moe.kv_cache and a moe.embedding of the token ids), each
// projection with constant weights gets a moe.prefetch of them right after
// the last op that streamed weights before it (or before the first launch),
// when some other launch runs in between; at most l2-bytes bytes, in order.

// A layer: q, k and v (no streaming before them: the prefetch goes before the
// embedding), their norm, o (prefetched after q, k and v), and a projection
// right after o (nothing runs between: no prefetch). The second RUN line's
// budget of 1040 bytes takes q's 1024 and 16 of k's 128; o's 1024.
// CHECK-LABEL: func.func @layer
// CHECK-NEXT: %[[WQ:.*]] = arith.constant
// CHECK-NEXT: %[[WK:.*]] = arith.constant
// CHECK-NEXT: %[[WO:.*]] = arith.constant
// CHECK-NEXT: %[[WR:.*]] = arith.constant
// CHECK-NEXT: %[[T:.*]] = arith.constant
// CHECK-NEXT: %[[N:.*]] = arith.constant
// CHECK-NEXT: moe.prefetch(%[[WQ]], %[[WK]]) rows(%arg0) {bytes = array<i64: 1024, 128>, max_rows = 64 : i64}
// CHECK-NEXT: moe.embedding
// CHECK-NEXT: moe.rms_norm
// CHECK-NEXT: %[[QK:.*]]:2 = moe.multi_linear
// CHECK-NEXT: moe.prefetch(%[[WO]]) rows(%arg0) {bytes = array<i64: 1024>, max_rows = 64 : i64}
// CHECK-NEXT: moe.rms_norm %[[QK]]#0
// CHECK-NEXT: moe.linear %{{.*}}, %[[WO]]
// CHECK-NEXT: moe.linear %{{.*}}, %[[WR]]
// CHECK-NEXT: return
// SMALL-LABEL: func.func @layer
// SMALL: moe.prefetch(%{{.*}}, %{{.*}}) rows(%arg0) {bytes = array<i64: 1024, 16>, max_rows = 8 : i64}
// SMALL: moe.prefetch(%{{.*}}) rows(%arg0) {bytes = array<i64: 1024>, max_rows = 8 : i64}
func.func @layer(%ids: tensor<?xi64>) -> tensor<?x8xf32>
    attributes {moe.kv_cache = {max_batch = 1 : i64, max_seq = 8 : i64}} {
  %wq = arith.constant dense<0.5> : tensor<32x16xbf16>
  %wk = arith.constant dense<0.5> : tensor<4x16xbf16>
  %wo = arith.constant dense<0.5> : tensor<16x32xbf16>
  %wr = arith.constant dense<0.5> : tensor<8x16xf32>
  %table = arith.constant dense<0.5> : tensor<64x16xbf16>
  %norm = arith.constant dense<1.0> : tensor<16xf32>
  %h = moe.embedding %ids, %table : tensor<?xi64>, tensor<64x16xbf16> -> tensor<?x16xf32>
  %n = moe.rms_norm %h, %norm {epsilon = 1.0e-6 : f64} : tensor<?x16xf32>, tensor<16xf32> -> tensor<?x16xf32>
  %qk:2 = moe.multi_linear %n, %wq, %wk : tensor<?x16xf32>, tensor<32x16xbf16>, tensor<4x16xbf16> -> tensor<?x32xf32>, tensor<?x4xf32>
  %q = moe.rms_norm %qk#0, %norm {epsilon = 1.0e-6 : f64} : tensor<?x32xf32>, tensor<16xf32> -> tensor<?x32xf32>
  %o = moe.linear %q, %wo : tensor<?x32xf32>, tensor<16x32xbf16> -> tensor<?x16xf32>
  %r = moe.linear %o, %wr : tensor<?x16xf32>, tensor<8x16xf32> -> tensor<?x8xf32>
  return %r : tensor<?x8xf32>
}

// -----

// Left alone: a weight that is not a constant (but its linear still ends the
// stretch: the constant projection after it, with nothing in between, gets
// nothing), and the shared expert's side stream, which neither gets a
// prefetch nor ends a stretch (the last projection's prefetch goes after the
// first linear, before the side-stream op).
// CHECK-LABEL: func.func @left_alone
// CHECK: moe.embedding
// CHECK-NEXT: moe.linear %{{.*}}, %arg1
// CHECK-NEXT: moe.prefetch(%[[W:.*]]) rows(%arg0) {bytes = array<i64: 512>
// CHECK-NEXT: moe.linear {{.*}}moe.stream = 1
// CHECK-NEXT: moe.rms_norm
// CHECK-NEXT: moe.linear %{{.*}}, %[[W]]
// CHECK-NOT: moe.prefetch
func.func @left_alone(%ids: tensor<?xi64>, %w: tensor<16x16xbf16>) -> (tensor<?x16xf32>, tensor<?x16xf32>)
    attributes {moe.kv_cache = {max_batch = 1 : i64, max_seq = 8 : i64}} {
  %table = arith.constant dense<0.5> : tensor<64x16xbf16>
  %norm = arith.constant dense<1.0> : tensor<16xf32>
  %c = arith.constant dense<0.5> : tensor<16x16xbf16>
  %h = moe.embedding %ids, %table : tensor<?xi64>, tensor<64x16xbf16> -> tensor<?x16xf32>
  %a = moe.linear %h, %w : tensor<?x16xf32>, tensor<16x16xbf16> -> tensor<?x16xf32>
  %s = moe.linear %a, %c {moe.stream = 1 : i64} : tensor<?x16xf32>, tensor<16x16xbf16> -> tensor<?x16xf32>
  %n = moe.rms_norm %a, %norm {epsilon = 1.0e-6 : f64} : tensor<?x16xf32>, tensor<16xf32> -> tensor<?x16xf32>
  %b = moe.linear %n, %c : tensor<?x16xf32>, tensor<16x16xbf16> -> tensor<?x16xf32>
  return %b, %s : tensor<?x16xf32>, tensor<?x16xf32>
}

// -----

// Not whole models: a function without moe.kv_cache (an MoE block), and one
// whose token count does not come from the embedding of an argument.
// CHECK-LABEL: func.func @block
// CHECK-NOT: moe.prefetch
// CHECK-LABEL: func.func @no_embedding
// CHECK-NOT: moe.prefetch
func.func @block(%x: tensor<?x16xf32>) -> tensor<?x16xf32> {
  %norm = arith.constant dense<1.0> : tensor<16xf32>
  %c = arith.constant dense<0.5> : tensor<16x16xbf16>
  %n = moe.rms_norm %x, %norm {epsilon = 1.0e-6 : f64} : tensor<?x16xf32>, tensor<16xf32> -> tensor<?x16xf32>
  %y = moe.linear %n, %c : tensor<?x16xf32>, tensor<16x16xbf16> -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}
func.func @no_embedding(%x: tensor<?x16xf32>) -> tensor<?x16xf32>
    attributes {moe.kv_cache = {max_batch = 1 : i64, max_seq = 8 : i64}} {
  %norm = arith.constant dense<1.0> : tensor<16xf32>
  %c = arith.constant dense<0.5> : tensor<16x16xbf16>
  %n = moe.rms_norm %x, %norm {epsilon = 1.0e-6 : f64} : tensor<?x16xf32>, tensor<16xf32> -> tensor<?x16xf32>
  %y = moe.linear %n, %c : tensor<?x16xf32>, tensor<16x16xbf16> -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// OPTIONS: moe-plan-weight-prefetch: l2-bytes must be at least 16 and max-rows positive
