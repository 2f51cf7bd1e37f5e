// RUN: moec-opt %s -split-input-file -moe-quantize-experts-mxfp4 -verify-diagnostics | FileCheck %s

// Constant weights become e2m1 codes (one a byte in the IR) with an e8m0 scale
// per row per 32 along K, computed here as triton_kernels does: per block,
// d = f32(amax / 6) rounded up to a power of two, codes w / d to nearest even.
// Row 0 [1, -2, 0.5, 4]: amax 4, d 2/3 -> 1 (byte 0x7F); codes 2, 0xC, 1, 6.
// Row 1 [0.3, 0.75, -5, 2.5]: amax 5 -> 1; 0.3 -> 0.5 (1); the ties 0.75 -> 1
// (2), -5 -> -4 (0xE), 2.5 -> 2 (4), each to the even code.
// Row 2 [6, 3, -1.5, 0]: amax 6, d exactly 1 (0x7F, not rounded up); 7, 5, 0xB, 0.
// Row 3 [0, -0, 0, 0]: all zero: scale byte 0, codes zero (-0 keeps its sign, 8).
// The rows stay f32: no moe.quantize (weight-only).
// CHECK-LABEL: func.func @constant_weights
// CHECK-SAME: (%[[X:.*]]: tensor<?x4xf32>, %[[OFF:.*]]: tensor<1xi32>)
// CHECK-DAG: %[[W:.*]] = arith.constant dense_resource<experts_e2m1> : tensor<1x4x4xf4E2M1FN>
// CHECK-DAG: %[[S:.*]] = arith.constant dense_resource<experts_e8m0_scales> : tensor<1x4x1xf8E8M0FNU>
// CHECK-NOT: moe.quantize
// CHECK: moe.grouped_matmul %[[X]], %[[W]], %[[OFF]] weight_scales(%[[S]] : tensor<1x4x1xf8E8M0FNU>) : tensor<?x4xf32>, tensor<1x4x4xf4E2M1FN>, tensor<1xi32> -> tensor<?x4xf32>
// CHECK: experts_e2m1: "0x40000000020C010601020E0407050B0000080000"
// CHECK: experts_e8m0_scales: "0x400000007F7F7F00"
func.func @constant_weights(%x: tensor<?x4xf32>, %offsets: tensor<1xi32>) -> tensor<?x4xf32> {
  %w = arith.constant dense<[[[1.0, -2.0, 0.5, 4.0], [0.3, 0.75, -5.0, 2.5], [6.0, 3.0, -1.5, 0.0], [0.0, -0.0, 0.0, 0.0]]]> : tensor<1x4x4xf32>
  %y = moe.grouped_matmul %x, %w, %offsets : tensor<?x4xf32>, tensor<1x4x4xf32>, tensor<1xi32> -> tensor<?x4xf32>
  return %y : tensor<?x4xf32>
}

// -----

// A block edge: K = 34 is a block of 32 and one of 2, each with its own scale.
// Block 0, all 0.5: d = 1/12 -> 1/8 (0x7C), codes 4 (6). Block 1 [12, -3]:
// d = 2 (0x80), codes 6 (7) and -1.5 (0xB). bf16 weights, a bias and the
// epilogue are kept; names follow moec.name.
// CHECK-LABEL: func.func @block_edge
// CHECK-DAG: arith.constant {moec.name = "gate_up.e2m1"} dense_resource<experts_e2m1> : tensor<1x2x34xf4E2M1FN>
// CHECK-DAG: arith.constant {moec.name = "gate_up.e8m0_scales"} dense_resource<experts_e8m0_scales> : tensor<1x2x2xf8E8M0FNU>
// CHECK: moe.grouped_matmul %{{.*}} bias(%{{.*}} : tensor<1x2xbf16>) weight_scales(%{{.*}} : tensor<1x2x2xf8E8M0FNU>) {epilogue = #moe.activation<silu>, epilogue_layout = #moe.gate_up_layout<concatenated>} : tensor<?x34xbf16>, tensor<1x2x34xf4E2M1FN>, tensor<1xi32> -> tensor<?x1xbf16>
// CHECK: experts_e2m1: "0x400000000606060606060606060606060606060606060606060606060606060606060606070B0606060606060606060606060606060606060606060606060606060606060606070B"
// CHECK: experts_e8m0_scales: "0x400000007C807C80"
func.func @block_edge(%x: tensor<?x34xbf16>, %offsets: tensor<1xi32>, %b: tensor<1x2xbf16>) -> tensor<?x1xbf16> {
  %w = arith.constant {moec.name = "gate_up"} dense<[[[0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 12.0, -3.0], [0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 12.0, -3.0]]]> : tensor<1x2x34xbf16>
  %y = moe.grouped_matmul %x, %w, %offsets bias(%b : tensor<1x2xbf16>)
      {epilogue = #moe.activation<silu>, epilogue_layout = #moe.gate_up_layout<concatenated>}
      : tensor<?x34xbf16>, tensor<1x2x34xbf16>, tensor<1xi32> -> tensor<?x1xbf16>
  return %y : tensor<?x1xbf16>
}

// -----

// Imported weights are onnx.Constant ops: cast the same way. [1, 2]: amax 2,
// d = 1/3 -> 1/2 (0x7E); codes 2 (4) and 4 (6).
// CHECK-LABEL: func.func @onnx_constant
// CHECK-NOT: onnx.Constant
// CHECK: weight_scales(%{{.*}} : tensor<1x1x1xf8E8M0FNU>)
// CHECK: experts_e2m1: "0x400000000406"
// CHECK: experts_e8m0_scales: "0x400000007E"
func.func @onnx_constant(%x: tensor<?x2xf32>, %offsets: tensor<1xi32>) -> tensor<?x1xf32> {
  %w = "onnx.Constant"() <{value = dense<[[[1.0, 2.0]]]> : tensor<1x1x2xf32>}> : () -> tensor<1x1x2xf32>
  %y = moe.grouped_matmul %x, %w, %offsets : tensor<?x2xf32>, tensor<1x1x2xf32>, tensor<1xi32> -> tensor<?x1xf32>
  return %y : tensor<?x1xf32>
}

// -----

// A splat (a shape without its values) stays a splat: every block has amax
// 0.5, scale 1/8, code -4.
// CHECK-LABEL: func.func @splat
// CHECK-DAG: arith.constant dense<-4.000000e+00> : tensor<2x8x40xf4E2M1FN>
// CHECK-DAG: arith.constant dense<1.250000e-01> : tensor<2x8x2xf8E8M0FNU>
// CHECK-NOT: xf32>
// CHECK: return
func.func @splat(%x: tensor<?x40xf16>, %offsets: tensor<2xi32>) -> tensor<?x8xf16> {
  %w = arith.constant dense<-0.5> : tensor<2x8x40xf16>
  %y = moe.grouped_matmul %x, %w, %offsets : tensor<?x40xf16>, tensor<2x8x40xf16>, tensor<2xi32> -> tensor<?x8xf16>
  return %y : tensor<?x8xf16>
}

// -----

// Left alone: the router and any other moe.linear (dense projections), weights
// that are not constants, weights already FP8 or MXFP4 (never cast again).
// CHECK-LABEL: func.func @left_alone
// CHECK: moe.linear %{{.*}}, %{{.*}} : tensor<?x64xf32>, tensor<4x64xf32> -> tensor<?x4xf32>
// CHECK: moe.grouped_matmul %{{.*}}, %{{.*}}, %{{.*}} : tensor<?x64xf32>, tensor<4x8x64xf32>, tensor<4xi32> -> tensor<?x8xf32>
// CHECK: moe.grouped_matmul {{.*}} weight_scales(%{{.*}} : tensor<4x1x1xf32>) : tensor<?x64xf32>, tensor<4x8x64xf8E4M3FN>, tensor<4xi32> -> tensor<?x8xf32>
// CHECK: moe.grouped_matmul {{.*}} weight_scales(%{{.*}} : tensor<4x8x2xf8E8M0FNU>) : tensor<?x64xf32>, tensor<4x8x64xf4E2M1FN>, tensor<4xi32> -> tensor<?x8xf32>
// CHECK-NOT: dense_resource
func.func @left_alone(%x: tensor<?x64xf32>, %offsets: tensor<4xi32>, %argw: tensor<4x8x64xf32>)
    -> (tensor<?x4xf32>, tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>) {
  %router = arith.constant dense<0.25> : tensor<4x64xf32>
  %logits = moe.linear %x, %router : tensor<?x64xf32>, tensor<4x64xf32> -> tensor<?x4xf32>
  %a = moe.grouped_matmul %x, %argw, %offsets : tensor<?x64xf32>, tensor<4x8x64xf32>, tensor<4xi32> -> tensor<?x8xf32>
  %w8 = arith.constant dense<1.0> : tensor<4x8x64xf8E4M3FN>
  %s8 = arith.constant dense<0.5> : tensor<4x1x1xf32>
  %b = moe.grouped_matmul %x, %w8, %offsets weight_scales(%s8 : tensor<4x1x1xf32>)
      : tensor<?x64xf32>, tensor<4x8x64xf8E4M3FN>, tensor<4xi32> -> tensor<?x8xf32>
  %w4 = arith.constant dense<1.0> : tensor<4x8x64xf4E2M1FN>
  %s4 = arith.constant dense<0.5> : tensor<4x8x2xf8E8M0FNU>
  %c = moe.grouped_matmul %x, %w4, %offsets weight_scales(%s4 : tensor<4x8x2xf8E8M0FNU>)
      : tensor<?x64xf32>, tensor<4x8x64xf4E2M1FN>, tensor<4xi32> -> tensor<?x8xf32>
  return %logits, %a, %b, %c : tensor<?x4xf32>, tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>
}

// -----

// A NaN has no MXFP4 code: an error naming the element.
func.func @nan_weight(%x: tensor<?x2xf32>, %offsets: tensor<1xi32>) -> tensor<?x2xf32> {
  %w = arith.constant dense<[[[1.0, 2.0], [0x7FC00000, 4.0]]]> : tensor<1x2x2xf32>
  // expected-error @+1 {{cannot cast the weights to MXFP4: element [0, 1, 0] is nan, which has no code}}
  %y = moe.grouped_matmul %x, %w, %offsets : tensor<?x2xf32>, tensor<1x2x2xf32>, tensor<1xi32> -> tensor<?x2xf32>
  return %y : tensor<?x2xf32>
}

// -----

// Nor does an infinity, here a splat's.
func.func @infinite_splat(%x: tensor<?x2xf32>, %offsets: tensor<1xi32>) -> tensor<?x2xf32> {
  %w = arith.constant dense<0xFF800000> : tensor<1x2x2xf32>
  // expected-error @+1 {{cannot cast the weights to MXFP4: every element is -INF, which has no code}}
  %y = moe.grouped_matmul %x, %w, %offsets : tensor<?x2xf32>, tensor<1x2x2xf32>, tensor<1xi32> -> tensor<?x2xf32>
  return %y : tensor<?x2xf32>
}

// -----

// Weights filled at load (moec compile --random-weights) are cast as their
// fill: random codes, marked moec.random_normal 2 (e2m1 of 2z) on a
// placeholder without data whose key is the weight's (two random experts of
// one shape stay two), and one scale for every block, the power of two
// nearest σ / 2: 0.01 -> 2^-7 (byte 120); 1.0 -> 2^-1 (byte 126).
// CHECK-LABEL: func.func @random_weights
// CHECK: %[[W:.*]] = arith.constant {moec.name = "gate_up.e2m1", moec.random_normal = 2.000000e+00 : f64} dense_resource<gate_up.e2m1> : tensor<2x4x64xf4E2M1FN>
// CHECK: %[[S:.*]] = arith.constant {moec.name = "gate_up.e8m0_scales"} dense<7.812500e-03> : tensor<2x4x2xf8E8M0FNU>
// CHECK: moe.grouped_matmul %{{.*}}, %[[W]], %{{.*}} weight_scales(%[[S]] : tensor<2x4x2xf8E8M0FNU>)
// CHECK: %[[W2:.*]] = arith.constant {moec.name = "down.e2m1", moec.random_normal = 2.000000e+00 : f64} dense_resource<down.e2m1> : tensor<2x4x64xf4E2M1FN>
// CHECK: %[[S2:.*]] = arith.constant {moec.name = "down.e8m0_scales"} dense<5.000000e-01> : tensor<2x4x2xf8E8M0FNU>
// CHECK: moe.grouped_matmul %{{.*}}, %[[W2]], %{{.*}} weight_scales(%[[S2]] : tensor<2x4x2xf8E8M0FNU>)
// CHECK-NOT: moec.random_normal = 2.000000e-02
func.func @random_weights(%x: tensor<?x64xf32>, %offsets: tensor<2xi32>) -> (tensor<?x4xf32>, tensor<?x4xf32>) {
  %w = arith.constant {moec.name = "gate_up", moec.random_normal = 0.02 : f64} dense<65536.0> : tensor<2x4x64xf32>
  %w2 = arith.constant {moec.name = "down", moec.random_normal = 1.0 : f64} dense<66048.0> : tensor<2x4x64xf32>
  %y = moe.grouped_matmul %x, %w, %offsets : tensor<?x64xf32>, tensor<2x4x64xf32>, tensor<2xi32> -> tensor<?x4xf32>
  %z = moe.grouped_matmul %x, %w2, %offsets : tensor<?x64xf32>, tensor<2x4x64xf32>, tensor<2xi32> -> tensor<?x4xf32>
  return %y, %z : tensor<?x4xf32>, tensor<?x4xf32>
}

// -----

// Random codes fill rows of whole blocks (two codes a byte, no padding).
func.func @random_partial_block(%x: tensor<?x40xf32>, %offsets: tensor<1xi32>) -> tensor<?x2xf32> {
  %w = arith.constant {moec.name = "gate_up", moec.random_normal = 0.02 : f64} dense<65536.0> : tensor<1x2x40xf32>
  // expected-error @+1 {{cannot cast weights filled at load (moec.random_normal, --random-weights) to MXFP4: K = 40 is not a multiple of 32, and random codes fill rows of whole blocks}}
  %y = moe.grouped_matmul %x, %w, %offsets : tensor<?x40xf32>, tensor<1x2x40xf32>, tensor<1xi32> -> tensor<?x2xf32>
  return %y : tensor<?x2xf32>
}
