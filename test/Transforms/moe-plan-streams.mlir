// RUN: moec-opt %s -split-input-file -moe-plan-streams | FileCheck %s

// The shared expert's side branch, which the CUDA printer runs on the side stream:
// the backward slice of a combine's addend (and addend_gate) through
// moe.linear ops and views down to inputs and constants, taken only when
// closed, when nothing else reads it and when none of it is a function result.

// A gated shared expert that reads the input alone: both linears go on the
// side stream (moe.stream = 1); the routed chain and the combine do not.
// CHECK-LABEL: func.func @gated_shared_expert
// CHECK-NOT: moe.stream
// CHECK: moe.grouped_matmul
// CHECK-NOT: moe.stream
// CHECK: moe.linear %{{.*}}, %{{.*}} {moe.stream = 1 : i64} : tensor<?x16xf32>, tensor<16x16xf32>
// CHECK: moe.linear %{{.*}}, %{{.*}} {moe.stream = 1 : i64} : tensor<?x16xf32>, tensor<1x16xf32>
// CHECK-NOT: moe.stream
// CHECK: moe.combine
// CHECK-NOT: moe.stream
func.func @gated_shared_expert(%x: tensor<?x16xf32>, %ids: tensor<?x1xi32>, %weights: tensor<?x1xf32>) -> tensor<?x16xf32> {
  %w = arith.constant dense<0.02> : tensor<4x16x16xf32>
  %ws = arith.constant dense<0.03> : tensor<16x16xf32>
  %wg = arith.constant dense<0.04> : tensor<1x16xf32>
  %perm, %offsets, %nvalid = moe.sort %ids {num_experts = 4 : i64}
      : tensor<?x1xi32> -> tensor<?xi32>, tensor<4xi32>, tensor<i32>
  %rows = moe.permute %x, %perm, %nvalid {top_k = 1 : i64}
      : tensor<?x16xf32>, tensor<?xi32>, tensor<i32> -> tensor<?x16xf32>
  %y = moe.grouped_matmul %rows, %w, %offsets
      : tensor<?x16xf32>, tensor<4x16x16xf32>, tensor<4xi32> -> tensor<?x16xf32>
  %shared = moe.linear %x, %ws : tensor<?x16xf32>, tensor<16x16xf32> -> tensor<?x16xf32>
  %gate = moe.linear %x, %wg : tensor<?x16xf32>, tensor<1x16xf32> -> tensor<?x1xf32>
  %out = moe.combine %y, %perm, %weights, %nvalid addend(%shared : tensor<?x16xf32>)
      addend_gate(%gate : tensor<?x1xf32>)
      : tensor<?x16xf32>, tensor<?xi32>, tensor<?x1xf32>, tensor<i32> -> tensor<?x16xf32>
  return %out : tensor<?x16xf32>
}

// -----

// Views: a view of an input that both chains read is marked
// moe.stream_input_view (defined before either stream uses it), a view inside
// the branch (of a linear's result) goes on the side stream with it; the
// shape constants are constants, not part of the branch. A two-linear shared
// expert (gate/up, then down), as DeepSeek-V3's.
// CHECK-LABEL: func.func @views
// CHECK: "onnx.Reshape"(%{{.*}}, %{{.*}}) {moe.stream_input_view}
// CHECK: moe.permute
// CHECK-NOT: moe.stream
// CHECK: moe.linear {{.*}}moe.stream = 1 : i64
// CHECK: moe.linear {{.*}}moe.stream = 1 : i64
// CHECK: "onnx.Reshape"(%{{.*}}, %{{.*}}) {moe.stream = 1 : i64}
// CHECK-NOT: moe.stream
// CHECK: moe.combine
func.func @views(%x: tensor<1x?x16xf32>, %ids: tensor<?x1xi32>, %weights: tensor<?x1xf32>) -> tensor<?x16xf32> {
  %shape = arith.constant dense<[-1, 16]> : tensor<2xi64>
  %w = arith.constant dense<0.02> : tensor<4x16x16xf32>
  %wgu = arith.constant dense<0.03> : tensor<16x16xf32>
  %wd = arith.constant dense<0.04> : tensor<16x8xf32>
  %xv = "onnx.Reshape"(%x, %shape) : (tensor<1x?x16xf32>, tensor<2xi64>) -> tensor<?x16xf32>
  %perm, %offsets, %nvalid = moe.sort %ids {num_experts = 4 : i64}
      : tensor<?x1xi32> -> tensor<?xi32>, tensor<4xi32>, tensor<i32>
  %rows = moe.permute %xv, %perm, %nvalid {top_k = 1 : i64}
      : tensor<?x16xf32>, tensor<?xi32>, tensor<i32> -> tensor<?x16xf32>
  %y = moe.grouped_matmul %rows, %w, %offsets
      : tensor<?x16xf32>, tensor<4x16x16xf32>, tensor<4xi32> -> tensor<?x16xf32>
  %h = moe.linear %xv, %wgu {epilogue = #moe.activation<silu>, epilogue_layout = #moe.gate_up_layout<concatenated>}
      : tensor<?x16xf32>, tensor<16x16xf32> -> tensor<?x8xf32>
  %s = moe.linear %h, %wd : tensor<?x8xf32>, tensor<16x8xf32> -> tensor<?x16xf32>
  %sv = "onnx.Reshape"(%s, %shape) : (tensor<?x16xf32>, tensor<2xi64>) -> tensor<?x16xf32>
  %out = moe.combine %y, %perm, %weights, %nvalid addend(%sv : tensor<?x16xf32>)
      : tensor<?x16xf32>, tensor<?xi32>, tensor<?x1xf32>, tensor<i32> -> tensor<?x16xf32>
  return %out : tensor<?x16xf32>
}

// -----

// Near misses, each left on the main stream (no attribute at all):
// the shared expert's result is also a result of the function ...
// CHECK-LABEL: func.func @shared_result_returned
// CHECK-NOT: moe.stream
func.func @shared_result_returned(%x: tensor<?x16xf32>, %ids: tensor<?x1xi32>, %weights: tensor<?x1xf32>)
    -> (tensor<?x16xf32>, tensor<?x16xf32>) {
  %w = arith.constant dense<0.02> : tensor<4x16x16xf32>
  %ws = arith.constant dense<0.03> : tensor<16x16xf32>
  %perm, %offsets, %nvalid = moe.sort %ids {num_experts = 4 : i64}
      : tensor<?x1xi32> -> tensor<?xi32>, tensor<4xi32>, tensor<i32>
  %rows = moe.permute %x, %perm, %nvalid {top_k = 1 : i64}
      : tensor<?x16xf32>, tensor<?xi32>, tensor<i32> -> tensor<?x16xf32>
  %y = moe.grouped_matmul %rows, %w, %offsets
      : tensor<?x16xf32>, tensor<4x16x16xf32>, tensor<4xi32> -> tensor<?x16xf32>
  %shared = moe.linear %x, %ws : tensor<?x16xf32>, tensor<16x16xf32> -> tensor<?x16xf32>
  %out = moe.combine %y, %perm, %weights, %nvalid addend(%shared : tensor<?x16xf32>)
      : tensor<?x16xf32>, tensor<?xi32>, tensor<?x1xf32>, tensor<i32> -> tensor<?x16xf32>
  return %out, %shared : tensor<?x16xf32>, tensor<?x16xf32>
}

// -----

// ... it is returned through a view (codegen writes it into the output) ...
// CHECK-LABEL: func.func @shared_result_returned_through_view
// CHECK-NOT: moe.stream
func.func @shared_result_returned_through_view(%x: tensor<?x16xf32>, %ids: tensor<?x1xi32>, %weights: tensor<?x1xf32>)
    -> (tensor<?x16xf32>, tensor<1x?x16xf32>) {
  %w = arith.constant dense<0.02> : tensor<4x16x16xf32>
  %ws = arith.constant dense<0.03> : tensor<16x16xf32>
  %axes = arith.constant dense<0> : tensor<1xi64>
  %perm, %offsets, %nvalid = moe.sort %ids {num_experts = 4 : i64}
      : tensor<?x1xi32> -> tensor<?xi32>, tensor<4xi32>, tensor<i32>
  %rows = moe.permute %x, %perm, %nvalid {top_k = 1 : i64}
      : tensor<?x16xf32>, tensor<?xi32>, tensor<i32> -> tensor<?x16xf32>
  %y = moe.grouped_matmul %rows, %w, %offsets
      : tensor<?x16xf32>, tensor<4x16x16xf32>, tensor<4xi32> -> tensor<?x16xf32>
  %shared = moe.linear %x, %ws : tensor<?x16xf32>, tensor<16x16xf32> -> tensor<?x16xf32>
  %sv = "onnx.Unsqueeze"(%shared, %axes) : (tensor<?x16xf32>, tensor<1xi64>) -> tensor<1x?x16xf32>
  %out = moe.combine %y, %perm, %weights, %nvalid addend(%shared : tensor<?x16xf32>)
      : tensor<?x16xf32>, tensor<?xi32>, tensor<?x1xf32>, tensor<i32> -> tensor<?x16xf32>
  return %out, %sv : tensor<?x16xf32>, tensor<1x?x16xf32>
}

// -----

// ... it reads a projection that the routed experts read too ...
// CHECK-LABEL: func.func @shared_input_projection
// CHECK-NOT: moe.stream
func.func @shared_input_projection(%x: tensor<?x16xf32>, %ids: tensor<?x1xi32>, %weights: tensor<?x1xf32>) -> tensor<?x16xf32> {
  %w = arith.constant dense<0.02> : tensor<4x16x16xf32>
  %wp = arith.constant dense<0.01> : tensor<16x16xf32>
  %ws = arith.constant dense<0.03> : tensor<16x16xf32>
  %h = moe.linear %x, %wp : tensor<?x16xf32>, tensor<16x16xf32> -> tensor<?x16xf32>
  %perm, %offsets, %nvalid = moe.sort %ids {num_experts = 4 : i64}
      : tensor<?x1xi32> -> tensor<?xi32>, tensor<4xi32>, tensor<i32>
  %rows = moe.permute %h, %perm, %nvalid {top_k = 1 : i64}
      : tensor<?x16xf32>, tensor<?xi32>, tensor<i32> -> tensor<?x16xf32>
  %y = moe.grouped_matmul %rows, %w, %offsets
      : tensor<?x16xf32>, tensor<4x16x16xf32>, tensor<4xi32> -> tensor<?x16xf32>
  %shared = moe.linear %h, %ws : tensor<?x16xf32>, tensor<16x16xf32> -> tensor<?x16xf32>
  %out = moe.combine %y, %perm, %weights, %nvalid addend(%shared : tensor<?x16xf32>)
      : tensor<?x16xf32>, tensor<?xi32>, tensor<?x1xf32>, tensor<i32> -> tensor<?x16xf32>
  return %out : tensor<?x16xf32>
}

// -----

// ... it is fed by the routed chain (the addend is an expert's result) ...
// CHECK-LABEL: func.func @fed_by_routed_chain
// CHECK-NOT: moe.stream
func.func @fed_by_routed_chain(%x: tensor<?x16xf32>, %ids: tensor<?x1xi32>, %weights: tensor<?x1xf32>) -> tensor<?x16xf32> {
  %w = arith.constant dense<0.02> : tensor<4x16x16xf32>
  %ws = arith.constant dense<0.03> : tensor<16x16xf32>
  %perm, %offsets, %nvalid = moe.sort %ids {num_experts = 4 : i64}
      : tensor<?x1xi32> -> tensor<?xi32>, tensor<4xi32>, tensor<i32>
  %rows = moe.permute %x, %perm, %nvalid {top_k = 1 : i64}
      : tensor<?x16xf32>, tensor<?xi32>, tensor<i32> -> tensor<?x16xf32>
  %y = moe.grouped_matmul %rows, %w, %offsets
      : tensor<?x16xf32>, tensor<4x16x16xf32>, tensor<4xi32> -> tensor<?x16xf32>
  %s = moe.linear %y, %ws : tensor<?x16xf32>, tensor<16x16xf32> -> tensor<?x16xf32>
  %out = moe.combine %y, %perm, %weights, %nvalid addend(%s : tensor<?x16xf32>)
      : tensor<?x16xf32>, tensor<?xi32>, tensor<?x1xf32>, tensor<i32> -> tensor<?x16xf32>
  return %out : tensor<?x16xf32>
}

// -----

// ... and an addend that computes nothing (a view of the input): no stream.
// CHECK-LABEL: func.func @addend_is_a_view
// CHECK-NOT: moe.stream
func.func @addend_is_a_view(%x: tensor<1x?x16xf32>, %rows: tensor<?x16xf32>, %perm: tensor<?xi32>,
                            %weights: tensor<?x1xf32>, %nvalid: tensor<i32>) -> tensor<?x16xf32> {
  %shape = arith.constant dense<[-1, 16]> : tensor<2xi64>
  %xv = "onnx.Reshape"(%x, %shape) : (tensor<1x?x16xf32>, tensor<2xi64>) -> tensor<?x16xf32>
  %out = moe.combine %rows, %perm, %weights, %nvalid addend(%xv : tensor<?x16xf32>)
      : tensor<?x16xf32>, tensor<?xi32>, tensor<?x1xf32>, tensor<i32> -> tensor<?x16xf32>
  return %out : tensor<?x16xf32>
}
