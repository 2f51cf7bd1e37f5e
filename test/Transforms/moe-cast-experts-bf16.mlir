// RUN: moec-opt %s -split-input-file -moe-cast-experts-bf16 -verify-diagnostics | FileCheck %s
// RUN: moec-opt %s -split-input-file -moe-cast-experts-bf16="outputs=bf16" -verify-diagnostics | FileCheck %s --check-prefix=OUT

// The CUDA target's --expert-weights=bf16 [--expert-outputs=bf16] policy
// stated as types, which the CUDA printer reads.

// A whole block: the router's linear keeps f32 (its logits choose the
// experts); the permuted rows and the gate/up result are read only as the rows
// of bf16-weight matmuls (which round rows to bf16 anyway): bf16. The shared
// expert's weights (K = 16) are bf16, its intermediate bf16; its output, read
// by the combine as the addend, stays f32, and so does the down projection's
// result unless outputs=bf16 (OUT).
// CHECK-LABEL: func.func @block
// CHECK-DAG: %[[WR:.*]] = arith.constant dense<1.000000e-01> : tensor<4x16xf32>
// CHECK-DAG: %[[WGU:.*]] = arith.constant {moec.name = "gate_up"} dense<2.001950e-02> : tensor<4x16x16xbf16>
// CHECK-DAG: %[[WD:.*]] = arith.constant {moec.name = "down"} dense<3.002930e-02> : tensor<4x16x8xbf16>
// CHECK-DAG: %[[WS1:.*]] = arith.constant dense<4.003910e-02> : tensor<16x16xbf16>
// CHECK-DAG: %[[WS2:.*]] = arith.constant dense<5.004880e-02> : tensor<16x8xbf16>
// CHECK: %[[L:.*]] = moe.linear %{{.*}}, %[[WR]] : tensor<?x16xf32>, tensor<4x16xf32> -> tensor<?x4xf32>
// CHECK: moe.permute {{.*}} -> tensor<?x16xbf16>
// CHECK: moe.grouped_matmul %{{.*}}, %[[WGU]], %{{.*}} {{.*}} : tensor<?x16xbf16>, tensor<4x16x16xbf16>, tensor<4xi32> -> tensor<?x8xbf16>
// CHECK: moe.grouped_matmul %{{.*}}, %[[WD]], %{{.*}} : tensor<?x8xbf16>, tensor<4x16x8xbf16>, tensor<4xi32> -> tensor<?x16xf32>
// CHECK: moe.linear %{{.*}}, %[[WS1]] {{.*}} : tensor<?x16xf32>, tensor<16x16xbf16> -> tensor<?x8xbf16>
// CHECK: moe.linear %{{.*}}, %[[WS2]] : tensor<?x8xbf16>, tensor<16x8xbf16> -> tensor<?x16xf32>
// CHECK: moe.combine {{.*}} : tensor<?x16xf32>, tensor<?xi32>, tensor<?x2xf32>, tensor<i32> -> tensor<?x16xf32>
// CHECK-NOT: tensor<4x16x16xf32>
// OUT-LABEL: func.func @block
// OUT: moe.grouped_matmul {{.*}} : tensor<?x8xbf16>, tensor<4x16x8xbf16>, tensor<4xi32> -> tensor<?x16xbf16>
// OUT: moe.linear {{.*}} -> tensor<?x16xf32>
// OUT: moe.combine {{.*}} : tensor<?x16xbf16>, tensor<?xi32>, tensor<?x2xf32>, tensor<i32> -> tensor<?x16xf32>
func.func @block(%x: tensor<?x16xf32>) -> tensor<?x16xf32> {
  %wr = arith.constant dense<0.1> : tensor<4x16xf32>
  %wgu = arith.constant {moec.name = "gate_up"} dense<0.02> : tensor<4x16x16xf32>
  %wd = arith.constant {moec.name = "down"} dense<0.03> : tensor<4x16x8xf32>
  %ws1 = arith.constant dense<0.04> : tensor<16x16xf32>
  %ws2 = arith.constant dense<0.05> : tensor<16x8xf32>
  %logits = moe.linear %x, %wr : tensor<?x16xf32>, tensor<4x16xf32> -> tensor<?x4xf32>
  %ids, %w = moe.route %logits {routing = #moe.routing<softmax_topk>, top_k = 2 : i64}
      : tensor<?x4xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
  %perm, %offsets, %nvalid = moe.sort %ids {num_experts = 4 : i64}
      : tensor<?x2xi32> -> tensor<?xi32>, tensor<4xi32>, tensor<i32>
  %rows = moe.permute %x, %perm, %nvalid {top_k = 2 : i64}
      : tensor<?x16xf32>, tensor<?xi32>, tensor<i32> -> tensor<?x16xf32>
  %h = moe.grouped_matmul %rows, %wgu, %offsets
      {epilogue = #moe.activation<silu>, epilogue_layout = #moe.gate_up_layout<concatenated>}
      : tensor<?x16xf32>, tensor<4x16x16xf32>, tensor<4xi32> -> tensor<?x8xf32>
  %y = moe.grouped_matmul %h, %wd, %offsets : tensor<?x8xf32>, tensor<4x16x8xf32>, tensor<4xi32> -> tensor<?x16xf32>
  %s1 = moe.linear %x, %ws1
      {epilogue = #moe.activation<silu>, epilogue_layout = #moe.gate_up_layout<concatenated>}
      : tensor<?x16xf32>, tensor<16x16xf32> -> tensor<?x8xf32>
  %s2 = moe.linear %s1, %ws2 : tensor<?x8xf32>, tensor<16x8xf32> -> tensor<?x16xf32>
  %out = moe.combine %y, %perm, %w, %nvalid addend(%s2 : tensor<?x16xf32>)
      : tensor<?x16xf32>, tensor<?xi32>, tensor<?x2xf32>, tensor<i32> -> tensor<?x16xf32>
  return %out : tensor<?x16xf32>
}

// -----

// Linear chains (as test/Codegen/emit-cuda-bf16-rows.mlir): %a is written by a
// bf16-weight linear (K = 8) but read by one whose K = 12 cannot load 8 at a
// time, which stays f32 (weight and all): %a stays f32. %b, written by that f32
// linear, stays f32 though a bf16-weight linear reads it. %c: bf16 to bf16.
// Function results stay f32. A weight computed at run time stays f32.
// CHECK-LABEL: func.func @linear_chain
// CHECK: %[[A:.*]] = moe.linear %{{.*}}, %{{.*}} : tensor<?x8xf32>, tensor<12x8xbf16> -> tensor<?x12xf32>
// CHECK: %[[B:.*]] = moe.linear %[[A]], %{{.*}} : tensor<?x12xf32>, tensor<16x12xf32> -> tensor<?x16xf32>
// CHECK: moe.linear %[[B]], %{{.*}} : tensor<?x16xf32>, tensor<8x16xbf16> -> tensor<?x8xf32>
// CHECK: %[[C:.*]] = moe.linear %{{.*}}, %{{.*}} : tensor<?x8xf32>, tensor<16x8xbf16> -> tensor<?x16xbf16>
// CHECK: moe.linear %[[C]], %{{.*}} : tensor<?x16xbf16>, tensor<8x16xbf16> -> tensor<?x8xf32>
// CHECK: moe.linear %{{.*}}, %{{.*}} : tensor<?x8xf32>, tensor<8x8xf32> -> tensor<?x8xf32>
func.func @linear_chain(%x: tensor<?x8xf32>, %wrt: tensor<8x8xf32>) -> (tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>) {
  %w0 = arith.constant dense<0.125> : tensor<12x8xf32>
  %w1 = arith.constant dense<0.25> : tensor<16x12xf32>
  %w2 = arith.constant dense<0.5> : tensor<8x16xf32>
  %w3 = arith.constant dense<0.375> : tensor<16x8xf32>
  %w4 = arith.constant dense<0.75> : tensor<8x16xf32>
  %a = moe.linear %x, %w0 : tensor<?x8xf32>, tensor<12x8xf32> -> tensor<?x12xf32>
  %b = moe.linear %a, %w1 : tensor<?x12xf32>, tensor<16x12xf32> -> tensor<?x16xf32>
  %y = moe.linear %b, %w2 : tensor<?x16xf32>, tensor<8x16xf32> -> tensor<?x8xf32>
  %c = moe.linear %x, %w3 : tensor<?x8xf32>, tensor<16x8xf32> -> tensor<?x16xf32>
  %z = moe.linear %c, %w4 : tensor<?x16xf32>, tensor<8x16xf32> -> tensor<?x8xf32>
  %r = moe.linear %x, %wrt : tensor<?x8xf32>, tensor<8x8xf32> -> tensor<?x8xf32>
  return %y, %z, %r : tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>
}

// -----

// Rounding to nearest even, as codegen's toBF16: 1 + 2^-8 is a tie and goes
// down to 1; 1 + 3*2^-8 is a tie and goes up to 1 + 2^-6 (even); 1 + 2^-8 +
// 2^-10 is above the tie: 1 + 2^-7; -1.5 is exact; -(1 + 2^-8 + 2^-20) rounds
// away to -(1 + 2^-7). Dense weights stay dense elements.
// CHECK-LABEL: func.func @round_nearest_even
// CHECK: arith.constant dense<{{\[\[\[}}1.000000e+00, 1.015630e+00, 1.007810e+00, -1.500000e+00, -1.007810e+00, 0.000000e+00, 2.000000e+00, 3.000000e+00]]]> : tensor<1x1x8xbf16>
func.func @round_nearest_even(%x: tensor<?x8xf32>, %offsets: tensor<1xi32>) -> tensor<?x1xf32> {
  %w = arith.constant dense<[[[1.00390625, 1.01171875, 1.0048828125, -1.5, -1.003907203674316, 0.0, 2.0, 3.0]]]> : tensor<1x1x8xf32>
  %y = moe.grouped_matmul %x, %w, %offsets : tensor<?x8xf32>, tensor<1x1x8xf32>, tensor<1xi32> -> tensor<?x1xf32>
  return %y : tensor<?x1xf32>
}

// -----

// A random weight's mark (moec.random_normal, moec compile --random-weights)
// goes with its bf16 copy, as every discardable attribute does: the copy is
// filled at load with the f32 values rounded. Its distinct placeholder value
// (2^16 + 2^9) is exact in bf16, so no two such weights become equal.
// CHECK-LABEL: func.func @random_weight
// CHECK: arith.constant {moec.name = "gate_up", moec.random_normal = 2.000000e-02 : f64} dense<6.604800e+04> : tensor<1x1x8xbf16>
func.func @random_weight(%x: tensor<?x8xf32>, %offsets: tensor<1xi32>) -> tensor<?x1xf32> {
  %w = arith.constant {moec.name = "gate_up", moec.random_normal = 0.02 : f64} dense<66048.0> : tensor<1x1x8xf32>
  %y = moe.grouped_matmul %x, %w, %offsets : tensor<?x8xf32>, tensor<1x1x8xf32>, tensor<1xi32> -> tensor<?x1xf32>
  return %y : tensor<?x1xf32>
}

// -----

// A dense_resource blob becomes a dense_resource blob (weights can be
// gigabytes): 1 + 2^-8 (0x3F808000) rounds to 0x3F80, 2 + 2^-6 (0x40010000)
// is exact 0x4001, little-endian after the 4-byte alignment header.
// CHECK-LABEL: func.func @resource
// CHECK: arith.constant {moec.name = "weights"} dense_resource<experts_bf16> : tensor<1x1x8xbf16>
// CHECK: experts_bf16: "0x40000000803F0140803F0140803F0140803F0140"
func.func @resource(%x: tensor<?x8xf32>, %offsets: tensor<1xi32>) -> tensor<?x1xf32> {
  %w = arith.constant dense_resource<weights> : tensor<1x1x8xf32>
  %y = moe.grouped_matmul %x, %w, %offsets : tensor<?x8xf32>, tensor<1x1x8xf32>, tensor<1xi32> -> tensor<?x1xf32>
  return %y : tensor<?x1xf32>
}
{-#
  dialect_resources: {
    builtin: {
      weights: "0x040000000080803F000001400080803F000001400080803F000001400080803F00000140"
    }
  }
#-}

// -----

// Left alone: an FP8 matmul (its weights and its rows, which moe.quantize
// reads, not a bf16 kernel), and the permuted rows that feed it stay f32.
// CHECK-LABEL: func.func @fp8_left_alone
// CHECK: moe.permute {{.*}} -> tensor<?x128xf32>
// CHECK: moe.quantize %{{.*}} : tensor<?x128xf32>
// CHECK: moe.grouped_matmul {{.*}} : tensor<?x128xf8E4M3FN>, tensor<2x8x128xf8E4M3FN>, tensor<2xi32> -> tensor<?x8xf32>
func.func @fp8_left_alone(%x: tensor<?x128xf32>, %perm: tensor<?xi32>, %offsets: tensor<2xi32>, %nvalid: tensor<i32>,
                          %ws: tensor<2x1x1xf32>) -> tensor<?x8xf32> {
  %w8 = arith.constant dense<1.25> : tensor<2x8x128xf8E4M3FN>
  %rows = moe.permute %x, %perm, %nvalid {top_k = 1 : i64}
      : tensor<?x128xf32>, tensor<?xi32>, tensor<i32> -> tensor<?x128xf32>
  %q, %qs = moe.quantize %rows : tensor<?x128xf32> -> tensor<?x128xf8E4M3FN>, tensor<?x1xf32>
  %y = moe.grouped_matmul %q, %w8, %offsets lhs_scales(%qs : tensor<?x1xf32>) weight_scales(%ws : tensor<2x1x1xf32>)
      : tensor<?x128xf8E4M3FN>, tensor<2x8x128xf8E4M3FN>, tensor<2xi32> -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}

// -----

// FP8 experts' results for the combine: f32 by default; with outputs=bf16
// (OUT) the down matmul of quantised rows writes bf16 rows, which only the
// combine reads; the gate/up result, which moe.quantize reads, stays f32.
// CHECK-LABEL: func.func @fp8_outputs
// CHECK: moe.grouped_matmul {{.*}} -> tensor<?x128xf32>
// CHECK: moe.grouped_matmul {{.*}} -> tensor<?x128xf32>
// CHECK: moe.combine {{.*}} : tensor<?x128xf32>,
// OUT-LABEL: func.func @fp8_outputs
// OUT: moe.grouped_matmul {{.*}} : tensor<?x128xf8E4M3FN>, tensor<2x128x128xf8E4M3FN>, tensor<2xi32> -> tensor<?x128xf32>
// OUT: moe.quantize %{{.*}} : tensor<?x128xf32>
// OUT: moe.grouped_matmul {{.*}} : tensor<?x128xf8E4M3FN>, tensor<2x128x128xf8E4M3FN>, tensor<2xi32> -> tensor<?x128xbf16>
// OUT: moe.combine {{.*}} : tensor<?x128xbf16>, tensor<?xi32>, tensor<?x1xf32>, tensor<i32> -> tensor<?x128xf32>
func.func @fp8_outputs(%x: tensor<?x128xf32>, %perm: tensor<?xi32>, %offsets: tensor<2xi32>, %nvalid: tensor<i32>,
                       %routing: tensor<?x1xf32>, %ws: tensor<2x1x1xf32>) -> tensor<?x128xf32> {
  %w8 = arith.constant dense<1.25> : tensor<2x128x128xf8E4M3FN>
  %rows = moe.permute %x, %perm, %nvalid {top_k = 1 : i64}
      : tensor<?x128xf32>, tensor<?xi32>, tensor<i32> -> tensor<?x128xf32>
  %q, %qs = moe.quantize %rows : tensor<?x128xf32> -> tensor<?x128xf8E4M3FN>, tensor<?x1xf32>
  %h = moe.grouped_matmul %q, %w8, %offsets lhs_scales(%qs : tensor<?x1xf32>) weight_scales(%ws : tensor<2x1x1xf32>)
      : tensor<?x128xf8E4M3FN>, tensor<2x128x128xf8E4M3FN>, tensor<2xi32> -> tensor<?x128xf32>
  %hq, %hs = moe.quantize %h : tensor<?x128xf32> -> tensor<?x128xf8E4M3FN>, tensor<?x1xf32>
  %y = moe.grouped_matmul %hq, %w8, %offsets lhs_scales(%hs : tensor<?x1xf32>) weight_scales(%ws : tensor<2x1x1xf32>)
      : tensor<?x128xf8E4M3FN>, tensor<2x128x128xf8E4M3FN>, tensor<2xi32> -> tensor<?x128xf32>
  %out = moe.combine %y, %perm, %routing, %nvalid
      : tensor<?x128xf32>, tensor<?xi32>, tensor<?x1xf32>, tensor<i32> -> tensor<?x128xf32>
  return %out : tensor<?x128xf32>
}

// -----

// MXFP4 experts (W4A16): the weights and scales stay, but the kernel rounds its
// rows to bf16 as the bf16-weight kernels do, so the permuted rows and the
// gate/up result that only such kernels read are held as bf16.
// CHECK-LABEL: func.func @mxfp4_rows
// CHECK: moe.permute {{.*}} -> tensor<?x64xbf16>
// CHECK: moe.grouped_matmul {{.*}} : tensor<?x64xbf16>, tensor<2x8x64xf4E2M1FN>, tensor<2xi32> -> tensor<?x8xbf16>
// CHECK: moe.grouped_matmul {{.*}} : tensor<?x8xbf16>, tensor<2x64x8xf4E2M1FN>, tensor<2xi32> -> tensor<?x64xf32>
func.func @mxfp4_rows(%x: tensor<?x64xf32>, %perm: tensor<?xi32>, %offsets: tensor<2xi32>, %nvalid: tensor<i32>)
    -> tensor<?x64xf32> {
  %w = arith.constant dense<1.0> : tensor<2x8x64xf4E2M1FN>
  %s = arith.constant dense<1.0> : tensor<2x8x2xf8E8M0FNU>
  %w2 = arith.constant dense<0.5> : tensor<2x64x8xf4E2M1FN>
  %s2 = arith.constant dense<1.0> : tensor<2x64x1xf8E8M0FNU>
  %rows = moe.permute %x, %perm, %nvalid {top_k = 1 : i64}
      : tensor<?x64xf32>, tensor<?xi32>, tensor<i32> -> tensor<?x64xf32>
  %h = moe.grouped_matmul %rows, %w, %offsets weight_scales(%s : tensor<2x8x2xf8E8M0FNU>)
      : tensor<?x64xf32>, tensor<2x8x64xf4E2M1FN>, tensor<2xi32> -> tensor<?x8xf32>
  %y = moe.grouped_matmul %h, %w2, %offsets weight_scales(%s2 : tensor<2x64x1xf8E8M0FNU>)
      : tensor<?x8xf32>, tensor<2x64x8xf4E2M1FN>, tensor<2xi32> -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

// -----

// Read by something else too: the permuted rows are also a result (f32), so
// the matmul meets f32 rows with bf16 weights (it rounds them itself); a weight
// constant that is also returned keeps its f32 constant beside the bf16 copy;
// with outputs=bf16 a down projection that is also a result stays f32 (OUT).
// CHECK-LABEL: func.func @read_elsewhere
// CHECK-DAG: %[[W32:.*]] = arith.constant dense<2.500000e-01> : tensor<2x8x8xf32>
// CHECK-DAG: %[[W16:.*]] = arith.constant dense<2.500000e-01> : tensor<2x8x8xbf16>
// CHECK: %[[ROWS:.*]] = moe.permute {{.*}} -> tensor<?x8xf32>
// CHECK: %[[Y:.*]] = moe.grouped_matmul %[[ROWS]], %[[W16]], %{{.*}} : tensor<?x8xf32>, tensor<2x8x8xbf16>, tensor<2xi32> -> tensor<?x8xf32>
// CHECK: return %[[ROWS]], %[[W32]], %[[Y]], %{{.*}}
// OUT-LABEL: func.func @read_elsewhere
// OUT: moe.grouped_matmul {{.*}} -> tensor<?x8xf32>
// OUT: moe.combine {{.*}} : tensor<?x8xf32>,
func.func @read_elsewhere(%x: tensor<?x8xf32>, %ids: tensor<?x1xi32>, %w: tensor<?x1xf32>)
    -> (tensor<?x8xf32>, tensor<2x8x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>) {
  %wd = arith.constant dense<0.25> : tensor<2x8x8xf32>
  %perm, %offsets, %nvalid = moe.sort %ids {num_experts = 2 : i64}
      : tensor<?x1xi32> -> tensor<?xi32>, tensor<2xi32>, tensor<i32>
  %rows = moe.permute %x, %perm, %nvalid {top_k = 1 : i64}
      : tensor<?x8xf32>, tensor<?xi32>, tensor<i32> -> tensor<?x8xf32>
  %y = moe.grouped_matmul %rows, %wd, %offsets : tensor<?x8xf32>, tensor<2x8x8xf32>, tensor<2xi32> -> tensor<?x8xf32>
  %out = moe.combine %y, %perm, %w, %nvalid
      : tensor<?x8xf32>, tensor<?xi32>, tensor<?x1xf32>, tensor<i32> -> tensor<?x8xf32>
  return %rows, %wd, %y, %out : tensor<?x8xf32>, tensor<2x8x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>
}

// -----

// outputs=bf16 rounds a down projection that only the combine reads as rows;
// a linear's result (the shared expert) is never rounded so, nor is a value the
// combine reads as its addend.
// CHECK-LABEL: func.func @outputs
// CHECK: moe.grouped_matmul {{.*}} -> tensor<?x8xf32>
// OUT-LABEL: func.func @outputs
// OUT: moe.grouped_matmul {{.*}} -> tensor<?x8xbf16>
// OUT: moe.linear {{.*}} -> tensor<?x8xf32>
// OUT: moe.combine {{.*}} : tensor<?x8xbf16>, tensor<?xi32>, tensor<?x1xf32>, tensor<i32> -> tensor<?x8xf32>
func.func @outputs(%x: tensor<?x8xf32>, %ids: tensor<?x1xi32>, %w: tensor<?x1xf32>) -> tensor<?x8xf32> {
  %wd = arith.constant dense<0.25> : tensor<2x8x8xf32>
  %ws = arith.constant dense<0.5> : tensor<8x8xf32>
  %perm, %offsets, %nvalid = moe.sort %ids {num_experts = 2 : i64}
      : tensor<?x1xi32> -> tensor<?xi32>, tensor<2xi32>, tensor<i32>
  %rows = moe.permute %x, %perm, %nvalid {top_k = 1 : i64}
      : tensor<?x8xf32>, tensor<?xi32>, tensor<i32> -> tensor<?x8xf32>
  %y = moe.grouped_matmul %rows, %wd, %offsets : tensor<?x8xf32>, tensor<2x8x8xf32>, tensor<2xi32> -> tensor<?x8xf32>
  %s = moe.linear %x, %ws : tensor<?x8xf32>, tensor<8x8xf32> -> tensor<?x8xf32>
  %out = moe.combine %y, %perm, %w, %nvalid addend(%s : tensor<?x8xf32>)
      : tensor<?x8xf32>, tensor<?xi32>, tensor<?x1xf32>, tensor<i32> -> tensor<?x8xf32>
  return %out : tensor<?x8xf32>
}

// -----

// Weights known only at run time cannot be stored as bf16 (codegen's error).
func.func @runtime_weights(%x: tensor<?x8xf32>, %w: tensor<2x8x8xf32>, %offsets: tensor<2xi32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{cannot store the weights as bf16: they must be an f32 constant of static shape}}
  %y = moe.grouped_matmul %x, %w, %offsets : tensor<?x8xf32>, tensor<2x8x8xf32>, tensor<2xi32> -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}

// -----

// The bf16 kernel loads 8 weights at a time: K = 12 is an error.
func.func @k_not_multiple_of_8(%x: tensor<?x12xf32>, %offsets: tensor<2xi32>) -> tensor<?x8xf32> {
  %w = arith.constant dense<0.5> : tensor<2x8x12xf32>
  // expected-error @+1 {{K = 12 is not a multiple of 8, which bf16 expert weights need}}
  %y = moe.grouped_matmul %x, %w, %offsets : tensor<?x12xf32>, tensor<2x8x12xf32>, tensor<2xi32> -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}
