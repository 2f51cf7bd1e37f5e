// RUN: moec-opt %s -split-input-file -moe-fuse-residual-norm -verify-diagnostics | FileCheck %s

// In whole models, a residual sum (arith.addf of two f32 [M, K]) and the
// moe.rms_norm that reads it become one moe.add_rms_norm at the sum; the
// sum's other readers read its first result. Everything else is left as it
// is; the pass reports no errors.

// A layer's two residual sums: each with its norm; the residual stream (the
// sums) still feeds the next sum and the function's result.
// CHECK-LABEL: func.func @layer
// CHECK: %[[S1:.*]], %[[N1:.*]] = moe.add_rms_norm %arg0, %arg1, %{{.*}} {epsilon = 9.9999999999999995E-7 : f64} : tensor<?x16xf32>, tensor<?x16xf32>, tensor<16xf32> -> tensor<?x16xf32>, tensor<?x16xf32>
// CHECK: %[[A:.*]] = moe.linear %[[N1]]
// CHECK: %[[S2:.*]], %[[N2:.*]] = moe.add_rms_norm %[[S1]], %[[A]], %{{.*}} {epsilon = 9.9999999999999995E-7 : f64, weight_offset = 1.000000e+00 : f64}
// CHECK-NOT: arith.addf
// CHECK-NOT: moe.rms_norm
// CHECK: return %[[S2]], %[[N2]]
func.func @layer(%h: tensor<?x16xf32>, %a0: tensor<?x16xf32>) -> (tensor<?x16xf32>, tensor<?x16xf32>)
    attributes {moe.kv_cache = {max_batch = 1 : i64, max_seq = 8 : i64}} {
  %w = arith.constant dense<1.0> : tensor<16xf32>
  %wo = arith.constant dense<0.5> : tensor<16x16xbf16>
  %s1 = arith.addf %h, %a0 : tensor<?x16xf32>
  %n1 = moe.rms_norm %s1, %w {epsilon = 1.0e-6 : f64} : tensor<?x16xf32>, tensor<16xf32> -> tensor<?x16xf32>
  %a = moe.linear %n1, %wo : tensor<?x16xf32>, tensor<16x16xbf16> -> tensor<?x16xf32>
  %s2 = arith.addf %s1, %a : tensor<?x16xf32>
  %n2 = moe.rms_norm %s2, %w {epsilon = 1.0e-6 : f64, weight_offset = 1.0 : f64} : tensor<?x16xf32>, tensor<16xf32> -> tensor<?x16xf32>
  return %s2, %n2 : tensor<?x16xf32>, tensor<?x16xf32>
}

// -----

// Two norms of one sum: the first fuses, the second reads the fused sum. A
// sum no norm reads, a norm of something else and a bf16 sum stay.
// CHECK-LABEL: func.func @left_alone
// CHECK: %[[S:.*]], %[[N:.*]] = moe.add_rms_norm %arg0, %arg1
// CHECK: moe.rms_norm %[[S]], %{{.*}} {epsilon = 1.000000e-05 : f64}
// CHECK: arith.addf %arg0, %arg0 : tensor<?x16xf32>
// CHECK: moe.rms_norm %arg1
// CHECK: arith.addf %arg2, %arg2 : tensor<?x16xbf16>
func.func @left_alone(%x: tensor<?x16xf32>, %y: tensor<?x16xf32>, %z: tensor<?x16xbf16>)
    -> (tensor<?x16xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<?x16xbf16>)
    attributes {moe.kv_cache = {max_batch = 1 : i64, max_seq = 8 : i64}} {
  %w = arith.constant dense<1.0> : tensor<16xf32>
  %s = arith.addf %x, %y : tensor<?x16xf32>
  %n1 = moe.rms_norm %s, %w {epsilon = 1.0e-6 : f64} : tensor<?x16xf32>, tensor<16xf32> -> tensor<?x16xf32>
  %n2 = moe.rms_norm %s, %w {epsilon = 1.0e-5 : f64} : tensor<?x16xf32>, tensor<16xf32> -> tensor<?x16xf32>
  %t = arith.addf %x, %x : tensor<?x16xf32>
  %n3 = moe.rms_norm %y, %w {epsilon = 1.0e-6 : f64} : tensor<?x16xf32>, tensor<16xf32> -> tensor<?x16xf32>
  %b = arith.addf %z, %z : tensor<?x16xbf16>
  return %n1, %n2, %t, %n3, %b : tensor<?x16xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<?x16xbf16>
}

// -----

// A norm whose weight is computed after the sum cannot move to it; a block
// (no moe.kv_cache) is left alone.
// CHECK-LABEL: func.func @late_weight
// CHECK-NOT: moe.add_rms_norm
// CHECK-LABEL: func.func @block
// CHECK-NOT: moe.add_rms_norm
func.func @late_weight(%x: tensor<?x16xf32>, %w0: tensor<16xf32>) -> tensor<?x16xf32>
    attributes {moe.kv_cache = {max_batch = 1 : i64, max_seq = 8 : i64}} {
  %s = arith.addf %x, %x : tensor<?x16xf32>
  %w = arith.addf %w0, %w0 : tensor<16xf32>
  %n = moe.rms_norm %s, %w {epsilon = 1.0e-6 : f64} : tensor<?x16xf32>, tensor<16xf32> -> tensor<?x16xf32>
  return %n : tensor<?x16xf32>
}
func.func @block(%x: tensor<?x16xf32>, %w: tensor<16xf32>) -> tensor<?x16xf32> {
  %s = arith.addf %x, %x : tensor<?x16xf32>
  %n = moe.rms_norm %s, %w {epsilon = 1.0e-6 : f64} : tensor<?x16xf32>, tensor<16xf32> -> tensor<?x16xf32>
  return %n : tensor<?x16xf32>
}
