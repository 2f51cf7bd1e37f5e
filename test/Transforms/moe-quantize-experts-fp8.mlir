// RUN: moec-opt %s -split-input-file -moe-quantize-experts-fp8 -verify-diagnostics | FileCheck %s

// Constant weights become e4m3 with a scale per 128x128 block, computed here:
// w = [[1, -2], [0.5, 4]] has amax 4, scale 4/448 = 1/112 (f32 0x3C124925,
// blob bytes 2549123C), and w / scale = [112, -224, 56, 448], all exact in e4m3:
// 0x6E, 0xF6, 0x66, 0x7E. The rows are quantized at run time by moe.quantize.
// CHECK-LABEL: func.func @constant_weights
// CHECK-SAME: (%[[X:.*]]: tensor<?x2xf32>, %[[OFF:.*]]: tensor<1xi32>)
// CHECK-DAG: %[[W:.*]] = arith.constant dense_resource<experts_e4m3> : tensor<1x2x2xf8E4M3FN>
// CHECK-DAG: %[[S:.*]] = arith.constant dense_resource<experts_e4m3_scales> : tensor<1x1x1xf32>
// CHECK: %[[Q:.*]], %[[QS:.*]] = moe.quantize %[[X]] : tensor<?x2xf32> -> tensor<?x2xf8E4M3FN>, tensor<?x1xf32>
// CHECK: moe.grouped_matmul %[[Q]], %[[W]], %[[OFF]] lhs_scales(%[[QS]] : tensor<?x1xf32>) weight_scales(%[[S]] : tensor<1x1x1xf32>) : tensor<?x2xf8E4M3FN>, tensor<1x2x2xf8E4M3FN>, tensor<1xi32> -> tensor<?x2xf32>
// CHECK: experts_e4m3: "0x400000006EF6667E"
// CHECK: experts_e4m3_scales: "0x400000002549123C"
func.func @constant_weights(%x: tensor<?x2xf32>, %offsets: tensor<1xi32>) -> tensor<?x2xf32> {
  %w = arith.constant dense<[[[1.0, -2.0], [0.5, 4.0]]]> : tensor<1x2x2xf32>
  %y = moe.grouped_matmul %x, %w, %offsets : tensor<?x2xf32>, tensor<1x2x2xf32>, tensor<1xi32> -> tensor<?x2xf32>
  return %y : tensor<?x2xf32>
}

// -----

// Partial blocks: N = 130 and K = 200 make 2 x 2 blocks of 128 (the last ones
// partial); the epilogue and bias are kept; a bf16 result stays bf16.
// CHECK-LABEL: func.func @partial_blocks
// CHECK: moe.quantize %{{.*}} : tensor<?x200xbf16> -> tensor<?x200xf8E4M3FN>, tensor<?x2xf32>
// CHECK: moe.grouped_matmul {{.*}} bias(%{{.*}} : tensor<3x130xbf16>) lhs_scales(%{{.*}} : tensor<?x2xf32>) weight_scales(%{{.*}} : tensor<3x2x2xf32>) {epilogue = #moe.activation<silu>, epilogue_layout = #moe.gate_up_layout<concatenated>} : tensor<?x200xf8E4M3FN>, tensor<3x130x200xf8E4M3FN>, tensor<3xi32> -> tensor<?x65xbf16>
func.func @partial_blocks(%x: tensor<?x200xbf16>, %offsets: tensor<3xi32>, %b: tensor<3x130xbf16>) -> tensor<?x65xbf16> {
  %w = arith.constant dense<0.5> : tensor<3x130x200xbf16>
  %y = moe.grouped_matmul %x, %w, %offsets bias(%b : tensor<3x130xbf16>)
      {epilogue = #moe.activation<silu>, epilogue_layout = #moe.gate_up_layout<concatenated>}
      : tensor<?x200xbf16>, tensor<3x130x200xbf16>, tensor<3xi32> -> tensor<?x65xbf16>
  return %y : tensor<?x65xbf16>
}

// -----

// A splat (a shape without its values, as bench/make_block_mlir.py writes them)
// stays a splat: every block has amax 0.5, scale 0.5/448, code -448. Weights
// named by moec.name give their casts the names NAME.e4m3 and NAME.e4m3_scales.
// CHECK-LABEL: func.func @splat_named
// CHECK-DAG: arith.constant {moec.name = "gate_up.e4m3"} dense<-4.480000e+02> : tensor<3x130x200xf8E4M3FN>
// CHECK-DAG: arith.constant {moec.name = "gate_up.e4m3_scales"} dense<0.00111607148> : tensor<3x2x2xf32>
// CHECK: moe.quantize
func.func @splat_named(%x: tensor<?x200xf32>, %offsets: tensor<3xi32>) -> tensor<?x130xf32> {
  %w = arith.constant {moec.name = "gate_up"} dense<-0.5> : tensor<3x130x200xf32>
  %y = moe.grouped_matmul %x, %w, %offsets : tensor<?x200xf32>, tensor<3x130x200xf32>, tensor<3xi32> -> tensor<?x130xf32>
  return %y : tensor<?x130xf32>
}

// -----

// A random weight (moec.random_normal 0.02, moec compile --random-weights) is
// quantised as its fill: codes of deviation 64, a placeholder without data
// (two random experts of one shape must not be merged as equal splats would
// be), and block scales 0.02/64; its placeholder value is not read.
// CHECK-LABEL: func.func @random_weights
// CHECK-DAG: arith.constant {moec.name = "gate_up.e4m3", moec.random_normal = 6.400000e+01 : f64} dense_resource<gate_up.e4m3> : tensor<3x130x200xf8E4M3FN>
// CHECK-DAG: arith.constant {moec.name = "down.e4m3", moec.random_normal = 6.400000e+01 : f64} dense_resource<down.e4m3> : tensor<3x130x200xf8E4M3FN>
// CHECK-DAG: arith.constant {moec.name = "gate_up.e4m3_scales"} dense<3.125000e-04> : tensor<3x2x2xf32>
// CHECK-NOT: moec.random_normal = 2.0
func.func @random_weights(%x: tensor<?x200xf32>, %offsets: tensor<3xi32>) -> (tensor<?x130xf32>, tensor<?x130xf32>) {
  %w = arith.constant {moec.name = "gate_up", moec.random_normal = 0.02 : f64} dense<65536.0> : tensor<3x130x200xf32>
  %w2 = arith.constant {moec.name = "down", moec.random_normal = 0.02 : f64} dense<66048.0> : tensor<3x130x200xf32>
  %y = moe.grouped_matmul %x, %w, %offsets : tensor<?x200xf32>, tensor<3x130x200xf32>, tensor<3xi32> -> tensor<?x130xf32>
  %z = moe.grouped_matmul %x, %w2, %offsets : tensor<?x200xf32>, tensor<3x130x200xf32>, tensor<3xi32> -> tensor<?x130xf32>
  return %y, %z : tensor<?x130xf32>, tensor<?x130xf32>
}

// -----

// Weights that are already FP8 (a checkpoint's e4m3 weights and their
// weight_scale_inv blocks) are not cast again: the same constants stay, only the
// f32 rows are quantised.
// CHECK-LABEL: func.func @already_fp8_weights
// CHECK-SAME: (%[[X:.*]]: tensor<?x200xf32>, %[[OFF:.*]]: tensor<2xi32>, %[[S:.*]]: tensor<2x1x2xf32>)
// CHECK: %[[W:.*]] = arith.constant dense<1.250000e+00> : tensor<2x8x200xf8E4M3FN>
// CHECK-NOT: arith.constant
// CHECK: %[[Q:.*]], %[[QS:.*]] = moe.quantize %[[X]] : tensor<?x200xf32> -> tensor<?x200xf8E4M3FN>, tensor<?x2xf32>
// CHECK: moe.grouped_matmul %[[Q]], %[[W]], %[[OFF]] lhs_scales(%[[QS]] : tensor<?x2xf32>) weight_scales(%[[S]] : tensor<2x1x2xf32>)
func.func @already_fp8_weights(%x: tensor<?x200xf32>, %offsets: tensor<2xi32>, %s: tensor<2x1x2xf32>) -> tensor<?x8xf32> {
  %w = arith.constant dense<1.25> : tensor<2x8x200xf8E4M3FN>
  %y = moe.grouped_matmul %x, %w, %offsets weight_scales(%s : tensor<2x1x2xf32>)
      : tensor<?x200xf32>, tensor<2x8x200xf8E4M3FN>, tensor<2xi32> -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}

// -----

// Left alone: weights that are not constants (known only at run time) and
// matmuls whose rows are already FP8.
// CHECK-LABEL: func.func @left_alone
// CHECK-NOT: moe.quantize
// CHECK: moe.grouped_matmul %{{.*}}, %{{.*}}, %{{.*}} : tensor<?x4xf32>, tensor<2x8x4xf32>
// CHECK: moe.grouped_matmul %{{.*}}, %{{.*}}, %{{.*}} lhs_scales
func.func @left_alone(%x: tensor<?x4xf32>, %w: tensor<2x8x4xf32>, %offsets: tensor<2xi32>,
                      %q: tensor<?x4xf8E4M3FN>, %qs: tensor<?x1xf32>, %w8: tensor<2x8x4xf8E4M3FN>,
                      %ws: tensor<2x1x1xf32>) -> (tensor<?x8xf32>, tensor<?x8xf32>) {
  %a = moe.grouped_matmul %x, %w, %offsets : tensor<?x4xf32>, tensor<2x8x4xf32>, tensor<2xi32> -> tensor<?x8xf32>
  %b = moe.grouped_matmul %q, %w8, %offsets lhs_scales(%qs : tensor<?x1xf32>) weight_scales(%ws : tensor<2x1x1xf32>)
      : tensor<?x4xf8E4M3FN>, tensor<2x8x4xf8E4M3FN>, tensor<2xi32> -> tensor<?x8xf32>
  return %a, %b : tensor<?x8xf32>, tensor<?x8xf32>
}
