// FP8 (docs/dialect.md, "FP8 layout"): f8E4M3FN values are decoded numbers,
// scales are dequantisation multipliers, one per row per 128 columns for
// activations and one per 128x128 block for weights; moe.quantize makes
// per-row 128-column groups with scale = max(amax / 448, 1e-12) and rounds
// x / scale to e4m3, nearest even. Expected values by hand.

// RUN: moec-interp %s --function two_k_blocks --print | FileCheck %s --check-prefix=BLOCKS
// RUN: moec-interp %s --function weight_only_blob --print | FileCheck %s --check-prefix=BLOB
// RUN: moec-interp %s --function quantize --print | FileCheck %s --check-prefix=QUANT

// K = 130: two K blocks, of 128 and 2 columns. Every q is 1. Row 0:
// 128·0.5·1 + 2·2·4 = 80; row 1: 128·1·1 + 2·1·4 = 136.
// BLOCKS: result0 = tensor<2x2xf32> {{\[}}[80, 80], [136, 136]]
func.func @two_k_blocks() -> tensor<2x2xf32> {
  %lhs = arith.constant dense<1.0> : tensor<2x130xf8E4M3FN>
  %w = arith.constant dense<1.0> : tensor<1x2x130xf8E4M3FN>
  %offsets = arith.constant dense<2> : tensor<1xi32>
  %ls = arith.constant dense<[[0.5, 2.0], [1.0, 1.0]]> : tensor<2x2xf32>
  %ws = arith.constant dense<[[[1.0, 4.0]]]> : tensor<1x1x2xf32>
  %y = moe.grouped_matmul %lhs, %w, %offsets lhs_scales(%ls : tensor<2x2xf32>)
      weight_scales(%ws : tensor<1x1x2xf32>)
      : tensor<2x130xf8E4M3FN>, tensor<1x2x130xf8E4M3FN>, tensor<1xi32> -> tensor<2x2xf32>
  return %y : tensor<2x2xf32>
}

// Weight-only FP8 from a blob of e4m3 bytes 0x38 0x7E 0xC0 0xF8 = 1, 448, -2,
// -256, times the f32 row [1, 1, 1, 1] and the block scale 0.5: 95.5. The
// f32 weights are returned too, as decoded.
// BLOB: result0 = tensor<1x1xf32> {{\[}}[95.5]]
// BLOB: result1 = tensor<1x1x4xf8E4M3FN> {{\[}}{{\[}}[1, 448, -2, -256]]]
func.func @weight_only_blob() -> (tensor<1x1xf32>, tensor<1x1x4xf8E4M3FN>) {
  %lhs = arith.constant dense<1.0> : tensor<1x4xf32>
  %w = arith.constant dense_resource<e4m3_bytes> : tensor<1x1x4xf8E4M3FN>
  %offsets = arith.constant dense<1> : tensor<1xi32>
  %ws = arith.constant dense<0.5> : tensor<1x1x1xf32>
  %y = moe.grouped_matmul %lhs, %w, %offsets weight_scales(%ws : tensor<1x1x1xf32>)
      : tensor<1x4xf32>, tensor<1x1x4xf8E4M3FN>, tensor<1xi32> -> tensor<1x1xf32>
  return %y, %w : tensor<1x1xf32>, tensor<1x1x4xf8E4M3FN>
}

// K = 131: groups of 128 and 3 columns.
// Row 0: group 0 all 3 (scale 3/448, every q 448); group 1 [34, -17, 1] (scale
// 34/448: q 448, -224, and 13.18 rounded to 13).
// Row 1: group 0 all 0 (amax 0: scale 1e-12, q 0); group 1 [896, 34, 38] (scale
// 2: q 448 and the ties 17 -> 16, 19 -> 20, to the even mantissa).
// QUANT: result0 = tensor<2x3xf8E4M3FN> {{\[}}[448, -224, 13], [448, 16, 20]]
// QUANT: result1 = tensor<2x2xf8E4M3FN> {{\[}}[448, 448], [0, 0]]
// QUANT: result2 = tensor<2x2xf32> {{\[}}[0.00669642864, 0.0758928582], [9.99999996e-13, 2]]
func.func @quantize() -> (tensor<2x3xf8E4M3FN>, tensor<2x2xf8E4M3FN>, tensor<2x2xf32>) {
  %r0 = arith.constant dense<3.0> : tensor<1x128xf32>
  %r1 = arith.constant dense<0.0> : tensor<1x128xf32>
  %t0 = arith.constant dense<[[34.0, -17.0, 1.0]]> : tensor<1x3xf32>
  %t1 = arith.constant dense<[[896.0, 34.0, 38.0]]> : tensor<1x3xf32>
  %row0 = "onnx.Concat"(%r0, %t0) {axis = 1 : i64} : (tensor<1x128xf32>, tensor<1x3xf32>) -> tensor<1x131xf32>
  %row1 = "onnx.Concat"(%r1, %t1) {axis = 1 : i64} : (tensor<1x128xf32>, tensor<1x3xf32>) -> tensor<1x131xf32>
  %x = "onnx.Concat"(%row0, %row1) {axis = 0 : i64} : (tensor<1x131xf32>, tensor<1x131xf32>) -> tensor<2x131xf32>
  %q, %scales = moe.quantize %x : tensor<2x131xf32> -> tensor<2x131xf8E4M3FN>, tensor<2x2xf32>
  // The tail group's three columns, and columns 0 and 127 of the first group.
  %starts = "onnx.Constant"() {value = dense<[128]> : tensor<1xi64>} : () -> tensor<1xi64>
  %ends = "onnx.Constant"() {value = dense<[131]> : tensor<1xi64>} : () -> tensor<1xi64>
  %axes = "onnx.Constant"() {value = dense<[1]> : tensor<1xi64>} : () -> tensor<1xi64>
  %none = onnx.NoValue
  %tail = "onnx.Slice"(%q, %starts, %ends, %axes, %none)
      : (tensor<2x131xf8E4M3FN>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, none) -> tensor<2x3xf8E4M3FN>
  %cols = "onnx.Constant"() {value = dense<[0, 127]> : tensor<2xi64>} : () -> tensor<2xi64>
  %head = "onnx.Gather"(%q, %cols) {axis = 1 : i64}
      : (tensor<2x131xf8E4M3FN>, tensor<2xi64>) -> tensor<2x2xf8E4M3FN>
  return %tail, %head, %scales : tensor<2x3xf8E4M3FN>, tensor<2x2xf8E4M3FN>, tensor<2x2xf32>
}

{-#
  dialect_resources: {
    builtin: {
      e4m3_bytes: "0x01000000387EC0F8"
    }
  }
#-}
