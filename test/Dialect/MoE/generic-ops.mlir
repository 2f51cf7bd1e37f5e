// RUN: moec-opt %s -split-input-file -verify-diagnostics | moec-opt -split-input-file | FileCheck %s
// RUN: moec-opt %s -split-input-file -verify-diagnostics --mlir-print-op-generic | moec-opt -split-input-file | FileCheck %s

// The generic ops of whole models (ModelGenericOps.td): a round trip of each,
// every operand form of moe.elementwise ([N, C], [N, 1], [C], rank 0, [1]),
// in the pretty and generic forms; then every verifier message of
// dialect/lib/MoE/ModelGenericOps.cpp, one case each.

// CHECK-LABEL: func.func @elementwise
// CHECK: moe.elementwise %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : tensor<?x8xf32>, tensor<?x1xf32>, tensor<8xf32>, tensor<f32>, tensor<1xf32> -> tensor<?x8xf32> {
// CHECK: ^bb0(%{{.*}}: f32, %{{.*}}: f32, %{{.*}}: f32, %{{.*}}: f32, %{{.*}}: f32):
// CHECK: math.rsqrt
// CHECK: arith.cmpf ogt
// CHECK: arith.select
// CHECK: moe.yield %{{.*}} : f32
// CHECK: moe.reduce_rows <sum> %{{.*}} : tensor<?x8xf32> -> tensor<?x1xf32>
// CHECK: moe.reduce_rows <max> %{{.*}} : tensor<4x8xf32> -> tensor<4x1xf32>
func.func @elementwise(%x: tensor<?x8xf32>, %m: tensor<?x1xf32>, %w: tensor<8xf32>,
                       %s: tensor<f32>, %one: tensor<1xf32>, %y: tensor<4x8xf32>)
    -> (tensor<?x8xf32>, tensor<?x1xf32>, tensor<4x1xf32>) {
  %r = moe.elementwise %x, %m, %w, %s, %one : tensor<?x8xf32>, tensor<?x1xf32>, tensor<8xf32>, tensor<f32>, tensor<1xf32> -> tensor<?x8xf32> {
  ^bb0(%a: f32, %b: f32, %c: f32, %d: f32, %e: f32):
    %0 = arith.mulf %a, %c : f32
    %1 = arith.addf %b, %d : f32
    %2 = math.rsqrt %1 : f32
    %3 = arith.mulf %0, %2 : f32
    %p = arith.cmpf ogt, %3, %e : f32
    %4 = arith.select %p, %3, %e : f32
    moe.yield %4 : f32
  }
  %sum = moe.reduce_rows <sum> %x : tensor<?x8xf32> -> tensor<?x1xf32>
  %max = moe.reduce_rows <max> %y : tensor<4x8xf32> -> tensor<4x1xf32>
  return %r, %sum, %max : tensor<?x8xf32>, tensor<?x1xf32>, tensor<4x1xf32>
}

// -----

func.func @result_rank(%x: tensor<?x8xf32>) -> tensor<?xf32> {
  // expected-error @+1 {{'moe.elementwise' op result must be a rank-2 tensor [N, C], got 'tensor<?xf32>'}}
  %r = moe.elementwise %x : tensor<?x8xf32> -> tensor<?xf32> {
  ^bb0(%a: f32):
    moe.yield %a : f32
  }
  return %r : tensor<?xf32>
}

// -----

func.func @input_rank(%x: tensor<2x?x8xf32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{input 0 must be [N, C], [N, 1], [C] or a scalar, got 'tensor<2x?x8xf32>'}}
  %r = moe.elementwise %x : tensor<2x?x8xf32> -> tensor<?x8xf32> {
  ^bb0(%a: f32):
    moe.yield %a : f32
  }
  return %r : tensor<?x8xf32>
}

// -----

func.func @row_width(%x: tensor<?x8xf32>, %w: tensor<4xf32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{input 1 dimension 0 (C) is 4, but result dimension 1 makes C = 8}}
  %r = moe.elementwise %x, %w : tensor<?x8xf32>, tensor<4xf32> -> tensor<?x8xf32> {
  ^bb0(%a: f32, %b: f32):
    moe.yield %a : f32
  }
  return %r : tensor<?x8xf32>
}

// -----

func.func @rows(%x: tensor<4x8xf32>, %m: tensor<3x1xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{input 1 dimension 0 (N) is 3, but result dimension 0 makes N = 4}}
  %r = moe.elementwise %x, %m : tensor<4x8xf32>, tensor<3x1xf32> -> tensor<4x8xf32> {
  ^bb0(%a: f32, %b: f32):
    moe.yield %a : f32
  }
  return %r : tensor<4x8xf32>
}

// -----

func.func @arguments(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{body takes 2 arguments for 1 inputs: one scalar per input}}
  %r = moe.elementwise %x : tensor<?x8xf32> -> tensor<?x8xf32> {
  ^bb0(%a: f32, %b: f32):
    moe.yield %a : f32
  }
  return %r : tensor<?x8xf32>
}

// -----

func.func @argument_type(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{body argument 0 is 'f64', not input 0's element type 'f32'}}
  %r = moe.elementwise %x : tensor<?x8xf32> -> tensor<?x8xf32> {
  ^bb0(%a: f64):
    %t = arith.truncf %a : f64 to f32
    moe.yield %t : f32
  }
  return %r : tensor<?x8xf32>
}

// -----

func.func @yield_type(%x: tensor<?x8xf32>) -> tensor<?x8xbf16> {
  // expected-error @+1 {{body yields 'f32', not the result's element type 'bf16'}}
  %r = moe.elementwise %x : tensor<?x8xf32> -> tensor<?x8xbf16> {
  ^bb0(%a: f32):
    moe.yield %a : f32
  }
  return %r : tensor<?x8xbf16>
}

// -----

func.func @body_op(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %r = moe.elementwise %x : tensor<?x8xf32> -> tensor<?x8xf32> {
  ^bb0(%a: f32):
    // expected-error @+1 {{'tensor.empty' op in a moe.elementwise body: only arith and math ops on scalars}}
    %t = tensor.empty() : tensor<2xf32>
    moe.yield %a : f32
  }
  return %r : tensor<?x8xf32>
}

// -----

func.func @body_type(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %r = moe.elementwise %x : tensor<?x8xf32> -> tensor<?x8xf32> {
  ^bb0(%a: f32):
    // expected-error @+1 {{'arith.fptosi' op in a moe.elementwise body has a value of type 'i32': only float scalars and i1 conditions}}
    %i = arith.fptosi %a : f32 to i32
    moe.yield %a : f32
  }
  return %r : tensor<?x8xf32>
}

// -----

func.func @reduce_result(%x: tensor<?x8xf32>) -> tensor<?x2xf32> {
  // expected-error @+1 {{result dimension 1 must be 1, got 2}}
  %r = moe.reduce_rows <mean> %x : tensor<?x8xf32> -> tensor<?x2xf32>
  return %r : tensor<?x2xf32>
}

// -----

func.func @reduce_rows_count(%x: tensor<4x8xf32>) -> tensor<3x1xf32> {
  // expected-error @+1 {{result dimension 0 (N) is 3, but input dimension 0 makes N = 4}}
  %r = moe.reduce_rows <mean> %x : tensor<4x8xf32> -> tensor<3x1xf32>
  return %r : tensor<3x1xf32>
}

// -----

func.func @reduce_empty(%x: tensor<4x0xf32>) -> tensor<4x1xf32> {
  // expected-error @+1 {{input must have columns to reduce}}
  %r = moe.reduce_rows <max> %x : tensor<4x0xf32> -> tensor<4x1xf32>
  return %r : tensor<4x1xf32>
}
