// RUN: moec-opt %s -split-input-file -verify-diagnostics -moe-plan-kv-cache="max-batch=2 max-seq=64" | FileCheck %s
// RUN: not moec-opt %s -split-input-file -moe-plan-kv-cache="max-batch=0 max-seq=64" 2>&1 | FileCheck %s --check-prefix=SIZE

// A whole model's function gets the size of its KV cache; the slots are the
// attention ops' layers, 0..L-1.
// CHECK-LABEL: func.func @two_layers
// CHECK-SAME: moe.kv_cache = {max_batch = 2 : i64, max_seq = 64 : i64}
func.func @two_layers(%q: tensor<?x32xf32>, %k: tensor<?x16xf32>, %pos: tensor<?xi64>, %seq: tensor<?xi64>) -> tensor<?x32xf32> {
  %a = moe.attention %q, %k, %k, %pos, %seq {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.25 : f64}
      : tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<?xi64>, tensor<?xi64> -> tensor<?x32xf32>
  %b = moe.attention %a, %k, %k, %pos, %seq {layer = 1 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.25 : f64}
      : tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<?xi64>, tensor<?xi64> -> tensor<?x32xf32>
  return %b : tensor<?x32xf32>
}

// -----

// No attention, no cache: a block is left alone.
// CHECK-LABEL: func.func @block
// CHECK-NOT: moe.kv_cache
func.func @block(%x: tensor<?x16xf32>) -> tensor<?x16xf32> {
  return %x : tensor<?x16xf32>
}

// -----

func.func @shared_slot(%q: tensor<?x32xf32>, %k: tensor<?x16xf32>, %pos: tensor<?xi64>, %seq: tensor<?xi64>) -> tensor<?x32xf32> {
  // expected-note @+1 {{the other one}}
  %a = moe.attention %q, %k, %k, %pos, %seq {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.25 : f64}
      : tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<?xi64>, tensor<?xi64> -> tensor<?x32xf32>
  // expected-error @+1 {{two moe.attention ops use KV cache slot 0}}
  %b = moe.attention %a, %k, %k, %pos, %seq {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.25 : f64}
      : tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<?xi64>, tensor<?xi64> -> tensor<?x32xf32>
  return %b : tensor<?x32xf32>
}

// -----

// expected-error @+1 {{the 1 moe.attention ops must use KV cache slots 0..0; slot 0 is missing}}
func.func @gap(%q: tensor<?x32xf32>, %k: tensor<?x16xf32>, %pos: tensor<?xi64>, %seq: tensor<?xi64>) -> tensor<?x32xf32> {
  %a = moe.attention %q, %k, %k, %pos, %seq {layer = 3 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.25 : f64}
      : tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<?xi64>, tensor<?xi64> -> tensor<?x32xf32>
  return %a : tensor<?x32xf32>
}

// -----

// A cache of no size (the second RUN line asks for max-batch=0).
// CHECK-LABEL: func.func @no_size
// SIZE: error: the KV cache of 0 sequences of 64 positions is not a size
func.func @no_size(%q: tensor<?x32xf32>, %k: tensor<?x16xf32>, %pos: tensor<?xi64>, %seq: tensor<?xi64>) -> tensor<?x32xf32> {
  %a = moe.attention %q, %k, %k, %pos, %seq {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.25 : f64}
      : tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<?xi64>, tensor<?xi64> -> tensor<?x32xf32>
  return %a : tensor<?x32xf32>
}
