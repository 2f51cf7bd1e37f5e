// MXFP4 (docs/dialect.md, "MXFP4 layout"): f4E2M1FN weights [E, N, K] stand
// for their e2m1 value times 2^(s - 127) of their f8E8M0FNU scale, one per row
// per 32 along K; the product is exact (f64). Expected values by hand.

// RUN: moec-interp %s --function block_edge --print | FileCheck %s --check-prefix=EDGE
// RUN: moec-interp %s --function codes_from_blob --print | FileCheck %s --check-prefix=BLOB
// RUN: moec-interp %s --function scale_range --print | FileCheck %s --check-prefix=RANGE
// RUN: moec-interp %s --function experts --print | FileCheck %s --check-prefix=EXPERTS
// RUN: moec-interp %s --function layer --print | FileCheck %s --check-prefix=LAYER
// RUN: moec-opt %s -moe-lower-layer -o %t.lowered.mlir
// RUN: moec-interp %t.lowered.mlir --function layer --print | FileCheck %s --check-prefix=LAYER

// K = 34: two blocks per row, of 32 and 2 columns. Every code is 1.
// Row n = 0, scales 0.5 and 8: 32·0.5 + 2·8 = 32; row 1, scales 1 and 0.25:
// 32·1 + 2·0.25 = 32.5. A scale applied per row (not per 128 rows, as FP8's)
// and the tail block's own scale (not the first block's) both show.
// EDGE: result0 = tensor<1x2xf32> {{\[}}[32, 32.5]]
func.func @block_edge() -> tensor<1x2xf32> {
  %lhs = arith.constant dense<1.0> : tensor<1x34xf32>
  %w = arith.constant dense<1.0> : tensor<1x2x34xf4E2M1FN>
  %offsets = arith.constant dense<1> : tensor<1xi32>
  %ws = arith.constant dense<[[[0.5, 8.0], [1.0, 0.25]]]> : tensor<1x2x2xf8E8M0FNU>
  %y = moe.grouped_matmul %lhs, %w, %offsets weight_scales(%ws : tensor<1x2x2xf8E8M0FNU>)
      : tensor<1x34xf32>, tensor<1x2x34xf4E2M1FN>, tensor<1xi32> -> tensor<1x2xf32>
  return %y : tensor<1x2xf32>
}

// Codes from a blob, one per byte in the low nibble: 0x71 (its high nibble
// is not part of the code) = 0.5, 0x07 = 6, 0x0F = -6, 0x09 = -0.5, 0x03 =
// 1.5, 0x0C = -2. Scales from a blob too: 0x80 = 2, 0x7E = 0.5.
// Row [1, 2, 3, 4, 5, 6]: 0.5 + 12 - 18 - 2 + 7.5 - 12 = -12, times 2 and 0.5.
// BLOB: result0 = tensor<1x2xf32> {{\[}}[-24, -6]]
// BLOB: result1 = tensor<1x2x6xf4E2M1FN> {{\[}}{{\[}}[0.5, 6, -6, -0.5, 1.5, -2], [0.5, 6, -6, -0.5, 1.5, -2]]]
// BLOB: result2 = tensor<1x2x1xf8E8M0FNU> {{\[}}{{\[}}[2], [0.5]]]
func.func @codes_from_blob() -> (tensor<1x2xf32>, tensor<1x2x6xf4E2M1FN>, tensor<1x2x1xf8E8M0FNU>) {
  %lhs = arith.constant dense<[[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]]> : tensor<1x6xf32>
  %w = arith.constant dense_resource<e2m1_codes> : tensor<1x2x6xf4E2M1FN>
  %offsets = arith.constant dense<1> : tensor<1xi32>
  %ws = arith.constant dense_resource<e8m0_scales> : tensor<1x2x1xf8E8M0FNU>
  %y = moe.grouped_matmul %lhs, %w, %offsets weight_scales(%ws : tensor<1x2x1xf8E8M0FNU>)
      : tensor<1x6xf32>, tensor<1x2x6xf4E2M1FN>, tensor<1xi32> -> tensor<1x2xf32>
  return %y, %w, %ws : tensor<1x2xf32>, tensor<1x2x6xf4E2M1FN>, tensor<1x2x1xf8E8M0FNU>
}

// The ends of the scale range, exact in f64: byte 0x00 = 2^-127 and 0xFE =
// 2^127. Codes [6, 0.5], row [1, 1]: 6.5·2^-127 and 6.5·2^127 (beyond f32).
// RANGE: result0 = tensor<1x2xf64> {{\[}}[3.8203566401724344e-38, 1.10591769249305e+39]]
func.func @scale_range() -> tensor<1x2xf64> {
  %lhs = arith.constant dense<1.0> : tensor<1x2xf64>
  %w = arith.constant dense<[[[6.0, 0.5], [6.0, 0.5]]]> : tensor<1x2x2xf4E2M1FN>
  %offsets = arith.constant dense<1> : tensor<1xi32>
  %ws = arith.constant dense_resource<scale_ends> : tensor<1x2x1xf8E8M0FNU>
  %y = moe.grouped_matmul %lhs, %w, %offsets weight_scales(%ws : tensor<1x2x1xf8E8M0FNU>)
      : tensor<1x2xf64>, tensor<1x2x2xf4E2M1FN>, tensor<1xi32> -> tensor<1x2xf64>
  return %y : tensor<1x2xf64>
}

// Two experts by the offsets (rows 0-1 expert 0, row 2 expert 1), a bias and
// a gated epilogue (concatenated: gate row 0, up row 1; identity f, so gate ·
// up). Expert 0: every code 2, scales 1 (gate) and 0.5 (up); expert 1: every
// code -1, scales 4 and 2. K = 3.
// Row 0 [1, 1, 1]: gate 6 + 1 = 7, up 3 + 0 = 3 -> 21.
// Row 1 [1, 2, 3]: gate 12 + 1 = 13, up 6 -> 78.
// Row 2 [1, 0, -1]: gate 0 + 1 = 1, up 0 + 0.5 = 0.5 -> 0.5.
// EXPERTS: result0 = tensor<3x1xf32> {{\[}}[21], [78], [0.5]]
func.func @experts() -> tensor<3x1xf32> {
  %lhs = arith.constant dense<[[1.0, 1.0, 1.0], [1.0, 2.0, 3.0], [1.0, 0.0, -1.0]]> : tensor<3x3xf32>
  %w = arith.constant dense<[[[2.0, 2.0, 2.0], [2.0, 2.0, 2.0]], [[-1.0, -1.0, -1.0], [-1.0, -1.0, -1.0]]]> : tensor<2x2x3xf4E2M1FN>
  %offsets = arith.constant dense<[2, 3]> : tensor<2xi32>
  %ws = arith.constant dense<[[[1.0], [0.5]], [[4.0], [2.0]]]> : tensor<2x2x1xf8E8M0FNU>
  %b = arith.constant dense<[[1.0, 0.0], [1.0, 0.5]]> : tensor<2x2xf32>
  %y = moe.grouped_matmul %lhs, %w, %offsets bias(%b : tensor<2x2xf32>)
      weight_scales(%ws : tensor<2x2x1xf8E8M0FNU>)
      {epilogue = #moe.activation<identity>, epilogue_layout = #moe.gate_up_layout<concatenated>}
      : tensor<3x3xf32>, tensor<2x2x3xf4E2M1FN>, tensor<2xi32> -> tensor<3x1xf32>
  return %y : tensor<3x1xf32>
}

// moe.layer with MXFP4 experts (gpt-oss's checkpoints), directly and lowered
// (moe-lower-layer passes the scales on as weight_scales). Interleaved gate/up:
// gate row [1, 1] with scale 2, up row [2, 1] with scale 0.5; hidden [1, 2]:
// gate 6, up 2, identity: 12. Down [[3], [-4]] with scales 0.5 and 1: [18, -48],
// times the routing weight 0.5: [9, -24].
// LAYER: result0 = tensor<1x2xf32> {{\[}}[9, -24]]
func.func @layer() -> tensor<1x2xf32> {
  %x = arith.constant dense<[[1.0, 2.0]]> : tensor<1x2xf32>
  %ids = arith.constant dense<0> : tensor<1x1xi64>
  %w = arith.constant dense<0.5> : tensor<1x1xf32>
  %gu = arith.constant dense<[[[1.0, 1.0], [2.0, 1.0]]]> : tensor<1x2x2xf4E2M1FN>
  %gus = arith.constant dense<[[[2.0], [0.5]]]> : tensor<1x2x1xf8E8M0FNU>
  %dn = arith.constant dense<[[[3.0], [-4.0]]]> : tensor<1x2x1xf4E2M1FN>
  %dns = arith.constant dense<[[[0.5], [1.0]]]> : tensor<1x2x1xf8E8M0FNU>
  %y = moe.layer %x : tensor<1x2xf32> expert_ids(%ids : tensor<1x1xi64>) expert_weights(%w : tensor<1x1xf32>)
         gate_up(%gu : tensor<1x2x2xf4E2M1FN>) down(%dn : tensor<1x2x1xf4E2M1FN>)
         gate_up_scales(%gus : tensor<1x2x1xf8E8M0FNU>) down_scales(%dns : tensor<1x2x1xf8E8M0FNU>)
         {routing = #moe.routing<softmax_topk>, top_k = 1 : i64, activation = #moe.activation<identity>,
          gate_up_layout = #moe.gate_up_layout<interleaved>} -> tensor<1x2xf32>
  return %y : tensor<1x2xf32>
}

{-#
  dialect_resources: {
    builtin: {
      e2m1_codes: "0x0100000071070F09030C71070F09030C",
      e8m0_scales: "0x01000000807E",
      scale_ends: "0x0100000000FE"
    }
  }
#-}
