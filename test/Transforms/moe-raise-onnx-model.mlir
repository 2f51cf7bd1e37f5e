// RUN: moec-opt %s -split-input-file -moe-raise-onnx-model -verify-diagnostics | FileCheck %s

// moe-raise-onnx-model: a whole-model export (torch.onnx.export of a decoder's
// cache-free forward: input_ids [B, T] -> logits [B, T, V]) becomes the step
// program @forward(input_ids, positions, sequences: [N]) -> [N, V]. The cases
// below are small graphs in the exporter's form (hidden 8, 2 query heads and 1
// KV head of 4 columns, vocabulary 6); near misses of a form are errors at the
// node, since nothing of the [B, T] graph may stay; functions that are not
// whole-model exports are left alone.

// The four fixtures, after moe-raise-onnx, as the checkpoint importer builds
// them (test/fixtures/models/*/model.onnx; their step programs run in
// e2e.model.onnx.* and interp.model.onnx.*).
// RUN: moec-translate --import-onnx %fixtures/models/mixtral/model.onnx | moec-opt -moe-raise-onnx -moe-raise-onnx-model | FileCheck %s --check-prefix=MIXTRAL
// MIXTRAL-LABEL: func.func @forward(%arg0: tensor<?xi64> {onnx.name = "input_ids"}, %arg1: tensor<?xi64> {onnx.name = "positions"}, %arg2: tensor<?xi64> {onnx.name = "sequences"}) -> (tensor<?x128xf32> {onnx.name = "logits"})
// MIXTRAL-COUNT-2: moe.attention {{.*}} {layer = {{[01]}} : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 2.500000e-01 : f64}
// MIXTRAL-NOT: onnx.MatMul
// MIXTRAL-NOT: onnx.Softmax

// RUN: moec-translate --import-onnx %fixtures/models/qwen3_moe/model.onnx | moec-opt -moe-raise-onnx -moe-raise-onnx-model | FileCheck %s --check-prefix=QWEN
// QWEN-LABEL: func.func @forward(
// QWEN: %[[Q:.*]] = moe.linear %{{.*}}, %{{.*}} : tensor<?x64xf32>, tensor<64x64xf32> -> tensor<?x64xf32>
// QWEN: %[[QN:.*]] = moe.rms_norm %[[Q]], %{{.*}} {epsilon = 9.9999999747524271E-7 : f64} : tensor<?x64xf32>, tensor<16xf32> -> tensor<?x64xf32>
// QWEN: moe.rotary %[[QN]], %arg1, %{{.*}} {head_dim = 16 : i64}
// QWEN: moe.linear {{.*}} {epilogue = #moe.activation<silu>, epilogue_layout = #moe.gate_up_layout<concatenated>} : tensor<?x64xf32>, tensor<192x64xf32> -> tensor<?x96xf32>
// QWEN: moe.layer

// RUN: moec-translate --import-onnx %fixtures/models/gpt_oss/model.onnx | moec-opt -moe-raise-onnx -moe-raise-onnx-model | FileCheck %s --check-prefix=GPTOSS
// GPTOSS: moe.rotary {{.*}} {head_dim = 16 : i64, scale = 1.3465735912322998 : f64}
// GPTOSS: moe.attention {{.*}} sinks(%{{.*}} : tensor<4xf32>) {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 2.500000e-01 : f64, window = 4 : i64}
// GPTOSS: moe.attention {{.*}} sinks(%{{.*}} : tensor<4xf32>) {layer = 1 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 2.500000e-01 : f64}

// DeepSeek-V3's MLA: the query's rope columns (16..23 of each head) rotate in
// place, interleaved; kv_a_proj_with_mqa's rows split into the latent and the
// rope key, kv_b_proj's per head into the nope key and the value; the rope key
// is key_shared.
// RUN: moec-translate --import-onnx %fixtures/models/deepseek_v3/model.onnx | moec-opt -moe-raise-onnx -moe-raise-onnx-model | FileCheck %s --check-prefix=DEEPSEEK
// DEEPSEEK: %[[X:.*]] = moe.rms_norm
// DEEPSEEK: %[[QA:.*]] = moe.linear %[[X]], %{{.*}} : tensor<?x64xf32>, tensor<32x64xf32> -> tensor<?x32xf32>
// DEEPSEEK: %[[QAN:.*]] = moe.rms_norm %[[QA]]
// DEEPSEEK: %[[Q:.*]] = moe.linear %[[QAN]], %{{.*}} : tensor<?x32xf32>, tensor<96x32xf32> -> tensor<?x96xf32>
// DEEPSEEK: %[[QR:.*]] = moe.rotary %[[Q]], %arg1, %[[INV:.*]] {head_dim = 24 : i64, interleaved = true, offset = 16 : i64} : tensor<?x96xf32>, tensor<?xi64>, tensor<4xf32> -> tensor<?x96xf32>
// DEEPSEEK: %[[LAT:.*]] = moe.linear %[[X]], %[[WLAT:.*]] : tensor<?x64xf32>, tensor<32x64xf32> -> tensor<?x32xf32>
// DEEPSEEK: %[[LATN:.*]] = moe.rms_norm %[[LAT]]
// DEEPSEEK: %[[K:.*]] = moe.linear %[[LATN]], %[[WK:.*]] : tensor<?x32xf32>, tensor<64x32xf32> -> tensor<?x64xf32>
// DEEPSEEK: %[[V:.*]] = moe.linear %[[LATN]], %[[WV:.*]] : tensor<?x32xf32>, tensor<64x32xf32> -> tensor<?x64xf32>
// DEEPSEEK: %[[KR:.*]] = moe.linear %[[X]], %{{.*}} : tensor<?x64xf32>, tensor<8x64xf32> -> tensor<?x8xf32>
// DEEPSEEK: %[[KRR:.*]] = moe.rotary %[[KR]], %arg1, %[[INV]] {head_dim = 8 : i64, interleaved = true}
// DEEPSEEK: moe.attention %[[QR]], %[[K]], %[[V]], %arg1, %arg2 key_shared(%[[KRR]] : tensor<?x8xf32>) {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 4 : i64, scale = 0.38249889016151428 : f64}
// DEEPSEEK: moe.attention {{.*}} {layer = 1 : i64
// DEEPSEEK-NOT: onnx.ScatterND

// A function that is no whole-model export stays as it is.
// CHECK-LABEL: func.func @block(
// CHECK: "onnx.Gather"
// CHECK: return
func.func @block(%ids: tensor<?x?xi64>, %x: tensor<?x?x8xf32>) -> tensor<?x?x8xf32> {
  %table = "onnx.Constant"() <{value = dense<0.5> : tensor<6x8xf32>}> : () -> tensor<6x8xf32>
  %e = "onnx.Gather"(%table, %ids) <{axis = 0 : i64}> : (tensor<6x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
  %y = "onnx.Add"(%e, %x) : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  return %y : tensor<?x?x8xf32>
}

// -----

// Embedding, RMSNorm, rotate-half rotary from Range positions, GQA (2 query
// heads, 1 KV head) repeated by Unsqueeze/Expand/Reshape, the causal mask,
// scale 0.5, the residual sum, the final norm and the LM head.
// CHECK-LABEL: func.func @forward(
// CHECK-SAME: %[[IDS:.*]]: tensor<?xi64> {onnx.name = "input_ids"}, %[[POS:.*]]: tensor<?xi64> {onnx.name = "positions"}, %[[SEQ:.*]]: tensor<?xi64> {onnx.name = "sequences"}) -> (tensor<?x6xf32> {onnx.name = "logits"})
// CHECK: %[[X:.*]] = moe.embedding %[[IDS]], %{{.*}} : tensor<?xi64>, tensor<6x8xf32> -> tensor<?x8xf32>
// CHECK: %[[H:.*]] = moe.rms_norm %[[X]], %{{.*}} {epsilon = 9.9999997473787516E-6 : f64} : tensor<?x8xf32>, tensor<8xf32> -> tensor<?x8xf32>
// CHECK: %[[WQ:.*]] = arith.constant dense<1.000000e-01> : tensor<8x8xf32>
// CHECK: %[[Q:.*]] = moe.linear %[[H]], %[[WQ]] : tensor<?x8xf32>, tensor<8x8xf32> -> tensor<?x8xf32>
// CHECK: %[[INV:.*]] = arith.constant dense_resource<rotary.inv_freq> : tensor<2xf32>
// CHECK: %[[QR:.*]] = moe.rotary %[[Q]], %[[POS]], %[[INV]] {head_dim = 4 : i64} : tensor<?x8xf32>, tensor<?xi64>, tensor<2xf32> -> tensor<?x8xf32>
// CHECK: %[[WK:.*]] = arith.constant dense<2.000000e-01> : tensor<4x8xf32>
// CHECK: %[[K:.*]] = moe.linear %[[H]], %[[WK]]
// CHECK: %[[KR:.*]] = moe.rotary %[[K]], %[[POS]], %[[INV]] {head_dim = 4 : i64} : tensor<?x4xf32>
// CHECK: %[[WV:.*]] = arith.constant dense<3.000000e-01> : tensor<4x8xf32>
// CHECK: %[[V:.*]] = moe.linear %[[H]], %[[WV]]
// CHECK: %[[A:.*]] = moe.attention %[[QR]], %[[KR]], %[[V]], %[[POS]], %[[SEQ]] {layer = 0 : i64, num_heads = 2 : i64, num_kv_heads = 1 : i64, scale = 5.000000e-01 : f64} : tensor<?x8xf32>, tensor<?x4xf32>, tensor<?x4xf32>, tensor<?xi64>, tensor<?xi64> -> tensor<?x8xf32>
// CHECK: %[[O:.*]] = moe.linear %[[A]]
// CHECK: %[[R:.*]] = arith.addf %[[X]], %[[O]] : tensor<?x8xf32>
// CHECK: %[[F:.*]] = moe.rms_norm %[[R]]
// CHECK: %[[WH:.*]] = arith.constant dense<5.000000e-01> : tensor<6x8xf32>
// CHECK: %[[L:.*]] = moe.linear %[[F]], %[[WH]] : tensor<?x8xf32>, tensor<6x8xf32> -> tensor<?x6xf32>
// CHECK: return %[[L]] : tensor<?x6xf32>
// CHECK-NOT: onnx.
// CHECK: dialect_resources
// CHECK: rotary.inv_freq: "0x400000000000803F0AD7233C"
func.func @mixtral(%ids: tensor<?x?xi64> {onnx.name = "input_ids"}) -> (tensor<?x?x6xf32> {onnx.name = "logits"}) {
  %table = "onnx.Constant"() <{value = dense<[[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8], [0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1], [1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0], [0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5], [0.1, 0.1, 0.2, 0.2, 0.3, 0.3, 0.4, 0.4], [0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0]]> : tensor<6x8xf32>}> : () -> tensor<6x8xf32>
  %wnorm = "onnx.Constant"() <{value = dense<[1.0, 1.1, 1.2, 1.3, 0.9, 0.8, 0.7, 0.6]> : tensor<8xf32>}> : () -> tensor<8xf32>
  %wfinal = "onnx.Constant"() <{value = dense<1.5> : tensor<8xf32>}> : () -> tensor<8xf32>
  %wq = "onnx.Constant"() <{value = dense<0.1> : tensor<8x8xf32>}> : () -> tensor<8x8xf32>
  %wk = "onnx.Constant"() <{value = dense<0.2> : tensor<8x4xf32>}> : () -> tensor<8x4xf32>
  %wv = "onnx.Constant"() <{value = dense<0.3> : tensor<8x4xf32>}> : () -> tensor<8x4xf32>
  %wo = "onnx.Constant"() <{value = dense<0.4> : tensor<8x8xf32>}> : () -> tensor<8x8xf32>
  %wh = "onnx.Constant"() <{value = dense<0.5> : tensor<8x6xf32>}> : () -> tensor<8x6xf32>
  %inv = "onnx.Constant"() <{value = dense<[[[1.000000e+00], [1.000000e-02]]]> : tensor<1x2x1xf32>}> : () -> tensor<1x2x1xf32>
  %scale = "onnx.Constant"() <{value = dense<5.000000e-01> : tensor<f32>}> : () -> tensor<f32>
  %two = "onnx.Constant"() <{value = dense<2.000000e+00> : tensor<f32>}> : () -> tensor<f32>
  %eps = "onnx.Constant"() <{value = dense<9.99999974E-6> : tensor<f32>}> : () -> tensor<f32>
  %zero = "onnx.Constant"() <{value = dense<0.000000e+00> : tensor<f32>}> : () -> tensor<f32>
  %min = "onnx.Constant"() <{value = dense<-3.40282347E+38> : tensor<f32>}> : () -> tensor<f32>
  %i0 = "onnx.Constant"() <{value = dense<0> : tensor<i64>}> : () -> tensor<i64>
  %i1 = "onnx.Constant"() <{value = dense<1> : tensor<i64>}> : () -> tensor<i64>
  %a0 = "onnx.Constant"() <{value = dense<0> : tensor<1xi64>}> : () -> tensor<1xi64>
  %a1 = "onnx.Constant"() <{value = dense<1> : tensor<1xi64>}> : () -> tensor<1xi64>
  %a2 = "onnx.Constant"() <{value = dense<2> : tensor<1xi64>}> : () -> tensor<1xi64>
  %a3 = "onnx.Constant"() <{value = dense<3> : tensor<1xi64>}> : () -> tensor<1xi64>
  %a4 = "onnx.Constant"() <{value = dense<4> : tensor<1xi64>}> : () -> tensor<1xi64>
  %am1 = "onnx.Constant"() <{value = dense<-1> : tensor<1xi64>}> : () -> tensor<1xi64>
  %a01 = "onnx.Constant"() <{value = dense<[0, 1]> : tensor<2xi64>}> : () -> tensor<2xi64>
  %end = "onnx.Constant"() <{value = dense<9223372036854775807> : tensor<1xi64>}> : () -> tensor<1xi64>
  %none = onnx.NoValue
  %b = "onnx.Shape"(%ids) <{end = 1 : i64, start = 0 : i64}> : (tensor<?x?xi64>) -> tensor<1xi64>
  %t = "onnx.Shape"(%ids) <{end = 2 : i64, start = 1 : i64}> : (tensor<?x?xi64>) -> tensor<1xi64>
  %ts = "onnx.Squeeze"(%t, %none) : (tensor<1xi64>, none) -> tensor<i64>
  %pos = "onnx.Range"(%i0, %ts, %i1) : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  %pos3 = "onnx.Unsqueeze"(%pos, %a01) : (tensor<?xi64>, tensor<2xi64>) -> tensor<1x1x?xi64>
  %btc = "onnx.Concat"(%b, %t, %am1) <{axis = 0 : i64}> : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<3xi64>
  %bthd = "onnx.Concat"(%b, %t, %am1, %a4) <{axis = 0 : i64}> : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<4xi64>
  %posf = "onnx.Cast"(%pos3) <{to = 1 : i64}> : (tensor<1x1x?xi64>) -> tensor<1x1x?xf32>
  %fr = "onnx.MatMul"(%inv, %posf) : (tensor<1x2x1xf32>, tensor<1x1x?xf32>) -> tensor<1x2x?xf32>
  %f = "onnx.Transpose"(%fr) <{perm = array<i64: 0, 2, 1>}> : (tensor<1x2x?xf32>) -> tensor<1x?x2xf32>
  %emb = "onnx.Concat"(%f, %f) <{axis = -1 : i64}> : (tensor<1x?x2xf32>, tensor<1x?x2xf32>) -> tensor<1x?x4xf32>
  %cos0 = "onnx.Cos"(%emb) : (tensor<1x?x4xf32>) -> tensor<1x?x4xf32>
  %sin0 = "onnx.Sin"(%emb) : (tensor<1x?x4xf32>) -> tensor<1x?x4xf32>
  %cos4 = "onnx.Unsqueeze"(%cos0, %a1) : (tensor<1x?x4xf32>, tensor<1xi64>) -> tensor<1x1x?x4xf32>
  %sin4 = "onnx.Unsqueeze"(%sin0, %a1) : (tensor<1x?x4xf32>, tensor<1xi64>) -> tensor<1x1x?x4xf32>
  %kv = "onnx.Unsqueeze"(%pos3, %a2) : (tensor<1x1x?xi64>, tensor<1xi64>) -> tensor<1x1x1x?xi64>
  %qi = "onnx.Unsqueeze"(%pos3, %a3) : (tensor<1x1x?xi64>, tensor<1xi64>) -> tensor<1x1x?x1xi64>
  %cond0 = "onnx.LessOrEqual"(%kv, %qi) : (tensor<1x1x1x?xi64>, tensor<1x1x?x1xi64>) -> tensor<1x1x?x?xi1>
  %mask = "onnx.Where"(%cond0, %zero, %min) : (tensor<1x1x?x?xi1>, tensor<f32>, tensor<f32>) -> tensor<1x1x?x?xf32>
  %x = "onnx.Gather"(%table, %ids) <{axis = 0 : i64}> : (tensor<6x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
  %n0sq = "onnx.Pow"(%x, %two) : (tensor<?x?x8xf32>, tensor<f32>) -> tensor<?x?x8xf32>
  %n0ms = "onnx.ReduceMean"(%n0sq, %am1) <{keepdims = 1 : i64, noop_with_empty_axes = 0 : i64}> : (tensor<?x?x8xf32>, tensor<1xi64>) -> tensor<?x?x1xf32>
  %n0me = "onnx.Add"(%n0ms, %eps) : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %n0rt = "onnx.Sqrt"(%n0me) : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %n0rr = "onnx.Reciprocal"(%n0rt) : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %n0xn = "onnx.Mul"(%x, %n0rr) : (tensor<?x?x8xf32>, tensor<?x?x1xf32>) -> tensor<?x?x8xf32>
  %h = "onnx.Mul"(%wnorm, %n0xn) : (tensor<8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %q0 = "onnx.MatMul"(%h, %wq) : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %q1 = "onnx.Reshape"(%q0, %bthd) <{allowzero = 1 : i64}> : (tensor<?x?x8xf32>, tensor<4xi64>) -> tensor<?x?x2x4xf32>
  %q = "onnx.Transpose"(%q1) <{perm = array<i64: 0, 2, 1, 3>}> : (tensor<?x?x2x4xf32>) -> tensor<?x2x?x4xf32>
  %k0 = "onnx.MatMul"(%h, %wk) : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  %k1 = "onnx.Reshape"(%k0, %bthd) <{allowzero = 1 : i64}> : (tensor<?x?x4xf32>, tensor<4xi64>) -> tensor<?x?x1x4xf32>
  %k = "onnx.Transpose"(%k1) <{perm = array<i64: 0, 2, 1, 3>}> : (tensor<?x?x1x4xf32>) -> tensor<?x1x?x4xf32>
  %v0 = "onnx.MatMul"(%h, %wv) : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  %v1 = "onnx.Reshape"(%v0, %bthd) <{allowzero = 1 : i64}> : (tensor<?x?x4xf32>, tensor<4xi64>) -> tensor<?x?x1x4xf32>
  %v = "onnx.Transpose"(%v1) <{perm = array<i64: 0, 2, 1, 3>}> : (tensor<?x?x1x4xf32>) -> tensor<?x1x?x4xf32>
  %qrlo = "onnx.Slice"(%q, %a0, %a2, %a3, %a1) : (tensor<?x2x?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x2x?x2xf32>
  %qrhi = "onnx.Slice"(%q, %a2, %end, %a3, %a1) : (tensor<?x2x?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x2x?x2xf32>
  %qrng = "onnx.Neg"(%qrhi) : (tensor<?x2x?x2xf32>) -> tensor<?x2x?x2xf32>
  %qrrh = "onnx.Concat"(%qrng, %qrlo) <{axis = -1 : i64}> : (tensor<?x2x?x2xf32>, tensor<?x2x?x2xf32>) -> tensor<?x2x?x4xf32>
  %qrc = "onnx.Mul"(%q, %cos4) : (tensor<?x2x?x4xf32>, tensor<1x1x?x4xf32>) -> tensor<?x2x?x4xf32>
  %qrs = "onnx.Mul"(%qrrh, %sin4) : (tensor<?x2x?x4xf32>, tensor<1x1x?x4xf32>) -> tensor<?x2x?x4xf32>
  %qr = "onnx.Add"(%qrc, %qrs) : (tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
  %krlo = "onnx.Slice"(%k, %a0, %a2, %a3, %a1) : (tensor<?x1x?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x1x?x2xf32>
  %krhi = "onnx.Slice"(%k, %a2, %end, %a3, %a1) : (tensor<?x1x?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x1x?x2xf32>
  %krng = "onnx.Neg"(%krhi) : (tensor<?x1x?x2xf32>) -> tensor<?x1x?x2xf32>
  %krrh = "onnx.Concat"(%krng, %krlo) <{axis = -1 : i64}> : (tensor<?x1x?x2xf32>, tensor<?x1x?x2xf32>) -> tensor<?x1x?x4xf32>
  %krc = "onnx.Mul"(%k, %cos4) : (tensor<?x1x?x4xf32>, tensor<1x1x?x4xf32>) -> tensor<?x1x?x4xf32>
  %krs = "onnx.Mul"(%krrh, %sin4) : (tensor<?x1x?x4xf32>, tensor<1x1x?x4xf32>) -> tensor<?x1x?x4xf32>
  %kr = "onnx.Add"(%krc, %krs) : (tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x1x?x4xf32>
  %rep5 = "onnx.Concat"(%b, %a1, %a2, %t, %a4) <{axis = 0 : i64}> : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<5xi64>
  %rep4 = "onnx.Concat"(%b, %a2, %t, %a4) <{axis = 0 : i64}> : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<4xi64>
  %kxu = "onnx.Unsqueeze"(%kr, %a2) : (tensor<?x1x?x4xf32>, tensor<1xi64>) -> tensor<?x1x1x?x4xf32>
  %kxe = "onnx.Expand"(%kxu, %rep5) : (tensor<?x1x1x?x4xf32>, tensor<5xi64>) -> tensor<?x1x2x?x4xf32>
  %kx = "onnx.Reshape"(%kxe, %rep4) <{allowzero = 1 : i64}> : (tensor<?x1x2x?x4xf32>, tensor<4xi64>) -> tensor<?x2x?x4xf32>
  %vxu = "onnx.Unsqueeze"(%v, %a2) : (tensor<?x1x?x4xf32>, tensor<1xi64>) -> tensor<?x1x1x?x4xf32>
  %vxe = "onnx.Expand"(%vxu, %rep5) : (tensor<?x1x1x?x4xf32>, tensor<5xi64>) -> tensor<?x1x2x?x4xf32>
  %vx = "onnx.Reshape"(%vxe, %rep4) <{allowzero = 1 : i64}> : (tensor<?x1x2x?x4xf32>, tensor<4xi64>) -> tensor<?x2x?x4xf32>
  %kt = "onnx.Transpose"(%kx) <{perm = array<i64: 0, 1, 3, 2>}> : (tensor<?x2x?x4xf32>) -> tensor<?x2x4x?xf32>
  %s0 = "onnx.MatMul"(%qr, %kt) : (tensor<?x2x?x4xf32>, tensor<?x2x4x?xf32>) -> tensor<?x2x?x?xf32>
  %s1 = "onnx.Mul"(%s0, %scale) : (tensor<?x2x?x?xf32>, tensor<f32>) -> tensor<?x2x?x?xf32>
  %s2 = "onnx.Add"(%s1, %mask) : (tensor<?x2x?x?xf32>, tensor<1x1x?x?xf32>) -> tensor<?x2x?x?xf32>
  %p = "onnx.Softmax"(%s2) <{axis = -1 : i64}> : (tensor<?x2x?x?xf32>) -> tensor<?x2x?x?xf32>
  %o0 = "onnx.MatMul"(%p, %vx) : (tensor<?x2x?x?xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
  %o1 = "onnx.Transpose"(%o0) <{perm = array<i64: 0, 2, 1, 3>}> : (tensor<?x2x?x4xf32>) -> tensor<?x?x2x4xf32>
  %attn = "onnx.Reshape"(%o1, %btc) <{allowzero = 1 : i64}> : (tensor<?x?x2x4xf32>, tensor<3xi64>) -> tensor<?x?x8xf32>
  %ao = "onnx.MatMul"(%attn, %wo) : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %r = "onnx.Add"(%x, %ao) : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %n1sq = "onnx.Pow"(%r, %two) : (tensor<?x?x8xf32>, tensor<f32>) -> tensor<?x?x8xf32>
  %n1ms = "onnx.ReduceMean"(%n1sq, %am1) <{keepdims = 1 : i64, noop_with_empty_axes = 0 : i64}> : (tensor<?x?x8xf32>, tensor<1xi64>) -> tensor<?x?x1xf32>
  %n1me = "onnx.Add"(%n1ms, %eps) : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %n1rt = "onnx.Sqrt"(%n1me) : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %n1rr = "onnx.Reciprocal"(%n1rt) : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %n1xn = "onnx.Mul"(%r, %n1rr) : (tensor<?x?x8xf32>, tensor<?x?x1xf32>) -> tensor<?x?x8xf32>
  %fin = "onnx.Mul"(%wfinal, %n1xn) : (tensor<8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %logits = "onnx.MatMul"(%fin, %wh) : (tensor<?x?x8xf32>, tensor<8x6xf32>) -> tensor<?x?x6xf32>
  return %logits : tensor<?x?x6xf32>
}
// -----

// gpt-oss: biases, halves from a Split, cos and sin times the attention factor,
// a sliding window of 3 (kv > q - 3) and per-head sinks: the sink column is
// appended, the row max subtracted and the column dropped after the Softmax.
// CHECK-LABEL: func.func @forward(
// CHECK: %[[Q:.*]] = moe.linear %{{.*}}, %{{.*}} bias(%{{.*}} : tensor<8xf32>)
// CHECK: moe.rotary %[[Q]], %{{.*}}, %{{.*}} {head_dim = 4 : i64, scale = 1.3465735912322998 : f64}
// CHECK: %[[SINKS:.*]] = arith.constant dense_resource<sinks> : tensor<2xf32>
// CHECK: moe.attention {{.*}} sinks(%[[SINKS]] : tensor<2xf32>) {layer = 0 : i64, num_heads = 2 : i64, num_kv_heads = 1 : i64, scale = 5.000000e-01 : f64, window = 3 : i64}
// CHECK-NOT: onnx.
// CHECK: sinks: "0x400000000000003F000080BF"
func.func @gpt_oss(%ids: tensor<?x?xi64> {onnx.name = "input_ids"}) -> (tensor<?x?x6xf32> {onnx.name = "logits"}) {
  %table = "onnx.Constant"() <{value = dense<[[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8], [0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1], [1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0], [0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5], [0.1, 0.1, 0.2, 0.2, 0.3, 0.3, 0.4, 0.4], [0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0]]> : tensor<6x8xf32>}> : () -> tensor<6x8xf32>
  %wnorm = "onnx.Constant"() <{value = dense<[1.0, 1.1, 1.2, 1.3, 0.9, 0.8, 0.7, 0.6]> : tensor<8xf32>}> : () -> tensor<8xf32>
  %wfinal = "onnx.Constant"() <{value = dense<1.5> : tensor<8xf32>}> : () -> tensor<8xf32>
  %wq = "onnx.Constant"() <{value = dense<0.1> : tensor<8x8xf32>}> : () -> tensor<8x8xf32>
  %wk = "onnx.Constant"() <{value = dense<0.2> : tensor<8x4xf32>}> : () -> tensor<8x4xf32>
  %wv = "onnx.Constant"() <{value = dense<0.3> : tensor<8x4xf32>}> : () -> tensor<8x4xf32>
  %wo = "onnx.Constant"() <{value = dense<0.4> : tensor<8x8xf32>}> : () -> tensor<8x8xf32>
  %wh = "onnx.Constant"() <{value = dense<0.5> : tensor<8x6xf32>}> : () -> tensor<8x6xf32>
  %inv = "onnx.Constant"() <{value = dense<[[[1.000000e+00], [1.000000e-02]]]> : tensor<1x2x1xf32>}> : () -> tensor<1x2x1xf32>
  %scale = "onnx.Constant"() <{value = dense<5.000000e-01> : tensor<f32>}> : () -> tensor<f32>
  %two = "onnx.Constant"() <{value = dense<2.000000e+00> : tensor<f32>}> : () -> tensor<f32>
  %eps = "onnx.Constant"() <{value = dense<9.99999974E-6> : tensor<f32>}> : () -> tensor<f32>
  %zero = "onnx.Constant"() <{value = dense<0.000000e+00> : tensor<f32>}> : () -> tensor<f32>
  %min = "onnx.Constant"() <{value = dense<-3.40282347E+38> : tensor<f32>}> : () -> tensor<f32>
  %i0 = "onnx.Constant"() <{value = dense<0> : tensor<i64>}> : () -> tensor<i64>
  %i1 = "onnx.Constant"() <{value = dense<1> : tensor<i64>}> : () -> tensor<i64>
  %a0 = "onnx.Constant"() <{value = dense<0> : tensor<1xi64>}> : () -> tensor<1xi64>
  %a1 = "onnx.Constant"() <{value = dense<1> : tensor<1xi64>}> : () -> tensor<1xi64>
  %a2 = "onnx.Constant"() <{value = dense<2> : tensor<1xi64>}> : () -> tensor<1xi64>
  %a3 = "onnx.Constant"() <{value = dense<3> : tensor<1xi64>}> : () -> tensor<1xi64>
  %a4 = "onnx.Constant"() <{value = dense<4> : tensor<1xi64>}> : () -> tensor<1xi64>
  %am1 = "onnx.Constant"() <{value = dense<-1> : tensor<1xi64>}> : () -> tensor<1xi64>
  %a01 = "onnx.Constant"() <{value = dense<[0, 1]> : tensor<2xi64>}> : () -> tensor<2xi64>
  %end = "onnx.Constant"() <{value = dense<9223372036854775807> : tensor<1xi64>}> : () -> tensor<1xi64>
  %none = onnx.NoValue
  %b = "onnx.Shape"(%ids) <{end = 1 : i64, start = 0 : i64}> : (tensor<?x?xi64>) -> tensor<1xi64>
  %t = "onnx.Shape"(%ids) <{end = 2 : i64, start = 1 : i64}> : (tensor<?x?xi64>) -> tensor<1xi64>
  %ts = "onnx.Squeeze"(%t, %none) : (tensor<1xi64>, none) -> tensor<i64>
  %pos = "onnx.Range"(%i0, %ts, %i1) : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  %pos3 = "onnx.Unsqueeze"(%pos, %a01) : (tensor<?xi64>, tensor<2xi64>) -> tensor<1x1x?xi64>
  %btc = "onnx.Concat"(%b, %t, %am1) <{axis = 0 : i64}> : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<3xi64>
  %bthd = "onnx.Concat"(%b, %t, %am1, %a4) <{axis = 0 : i64}> : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<4xi64>
  %sinks = "onnx.Constant"() <{value = dense<[[[[0.5]], [[-1.0]]]]> : tensor<1x2x1x1xf32>}> : () -> tensor<1x2x1x1xf32>
  %bq = "onnx.Constant"() <{value = dense<0.01> : tensor<8xf32>}> : () -> tensor<8xf32>
  %bk = "onnx.Constant"() <{value = dense<0.02> : tensor<4xf32>}> : () -> tensor<4xf32>
  %bv = "onnx.Constant"() <{value = dense<0.03> : tensor<4xf32>}> : () -> tensor<4xf32>
  %posf = "onnx.Cast"(%pos3) <{to = 1 : i64}> : (tensor<1x1x?xi64>) -> tensor<1x1x?xf32>
  %fr = "onnx.MatMul"(%inv, %posf) : (tensor<1x2x1xf32>, tensor<1x1x?xf32>) -> tensor<1x2x?xf32>
  %f = "onnx.Transpose"(%fr) <{perm = array<i64: 0, 2, 1>}> : (tensor<1x2x?xf32>) -> tensor<1x?x2xf32>
  %cos0 = "onnx.Cos"(%f) : (tensor<1x?x2xf32>) -> tensor<1x?x2xf32>
  %sin0 = "onnx.Sin"(%f) : (tensor<1x?x2xf32>) -> tensor<1x?x2xf32>
  %factor = "onnx.Constant"() <{value = dense<1.34657359> : tensor<f32>}> : () -> tensor<f32>
  %cos = "onnx.Mul"(%cos0, %factor) : (tensor<1x?x2xf32>, tensor<f32>) -> tensor<1x?x2xf32>
  %sin = "onnx.Mul"(%sin0, %factor) : (tensor<1x?x2xf32>, tensor<f32>) -> tensor<1x?x2xf32>
  %cos4 = "onnx.Unsqueeze"(%cos, %a1) : (tensor<1x?x2xf32>, tensor<1xi64>) -> tensor<1x1x?x2xf32>
  %sin4 = "onnx.Unsqueeze"(%sin, %a1) : (tensor<1x?x2xf32>, tensor<1xi64>) -> tensor<1x1x?x2xf32>
  %kv = "onnx.Unsqueeze"(%pos3, %a2) : (tensor<1x1x?xi64>, tensor<1xi64>) -> tensor<1x1x1x?xi64>
  %qi = "onnx.Unsqueeze"(%pos3, %a3) : (tensor<1x1x?xi64>, tensor<1xi64>) -> tensor<1x1x?x1xi64>
  %cond0 = "onnx.LessOrEqual"(%kv, %qi) : (tensor<1x1x1x?xi64>, tensor<1x1x?x1xi64>) -> tensor<1x1x?x?xi1>
  %w = "onnx.Constant"() <{value = dense<3> : tensor<i64>}> : () -> tensor<i64>
  %qw = "onnx.Sub"(%qi, %w) : (tensor<1x1x?x1xi64>, tensor<i64>) -> tensor<1x1x?x1xi64>
  %inw = "onnx.Greater"(%kv, %qw) : (tensor<1x1x1x?xi64>, tensor<1x1x?x1xi64>) -> tensor<1x1x?x?xi1>
  %cond = "onnx.And"(%inw, %cond0) : (tensor<1x1x?x?xi1>, tensor<1x1x?x?xi1>) -> tensor<1x1x?x?xi1>
  %mask = "onnx.Where"(%cond, %zero, %min) : (tensor<1x1x?x?xi1>, tensor<f32>, tensor<f32>) -> tensor<1x1x?x?xf32>
  %x = "onnx.Gather"(%table, %ids) <{axis = 0 : i64}> : (tensor<6x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
  %n0sq = "onnx.Pow"(%x, %two) : (tensor<?x?x8xf32>, tensor<f32>) -> tensor<?x?x8xf32>
  %n0ms = "onnx.ReduceMean"(%n0sq, %am1) <{keepdims = 1 : i64, noop_with_empty_axes = 0 : i64}> : (tensor<?x?x8xf32>, tensor<1xi64>) -> tensor<?x?x1xf32>
  %n0me = "onnx.Add"(%n0ms, %eps) : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %n0rt = "onnx.Sqrt"(%n0me) : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %n0rr = "onnx.Reciprocal"(%n0rt) : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %n0xn = "onnx.Mul"(%x, %n0rr) : (tensor<?x?x8xf32>, tensor<?x?x1xf32>) -> tensor<?x?x8xf32>
  %h = "onnx.Mul"(%wnorm, %n0xn) : (tensor<8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %q0 = "onnx.MatMul"(%h, %wq) : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %qb = "onnx.Add"(%q0, %bq) : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %q1 = "onnx.Reshape"(%qb, %bthd) <{allowzero = 1 : i64}> : (tensor<?x?x8xf32>, tensor<4xi64>) -> tensor<?x?x2x4xf32>
  %q = "onnx.Transpose"(%q1) <{perm = array<i64: 0, 2, 1, 3>}> : (tensor<?x?x2x4xf32>) -> tensor<?x2x?x4xf32>
  %k0 = "onnx.MatMul"(%h, %wk) : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  %kb = "onnx.Add"(%k0, %bk) : (tensor<?x?x4xf32>, tensor<4xf32>) -> tensor<?x?x4xf32>
  %k1 = "onnx.Reshape"(%kb, %bthd) <{allowzero = 1 : i64}> : (tensor<?x?x4xf32>, tensor<4xi64>) -> tensor<?x?x1x4xf32>
  %k = "onnx.Transpose"(%k1) <{perm = array<i64: 0, 2, 1, 3>}> : (tensor<?x?x1x4xf32>) -> tensor<?x1x?x4xf32>
  %v0 = "onnx.MatMul"(%h, %wv) : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  %vb = "onnx.Add"(%v0, %bv) : (tensor<?x?x4xf32>, tensor<4xf32>) -> tensor<?x?x4xf32>
  %v1 = "onnx.Reshape"(%vb, %bthd) <{allowzero = 1 : i64}> : (tensor<?x?x4xf32>, tensor<4xi64>) -> tensor<?x?x1x4xf32>
  %v = "onnx.Transpose"(%v1) <{perm = array<i64: 0, 2, 1, 3>}> : (tensor<?x?x1x4xf32>) -> tensor<?x1x?x4xf32>
  %qrp:2 = "onnx.Split"(%q, %none) <{axis = 3 : i64, num_outputs = 2 : i64}> : (tensor<?x2x?x4xf32>, none) -> (tensor<?x2x?x2xf32>, tensor<?x2x?x2xf32>)
  %qr1 = "onnx.Mul"(%qrp#0, %cos4) : (tensor<?x2x?x2xf32>, tensor<1x1x?x2xf32>) -> tensor<?x2x?x2xf32>
  %qr2 = "onnx.Mul"(%qrp#1, %sin4) : (tensor<?x2x?x2xf32>, tensor<1x1x?x2xf32>) -> tensor<?x2x?x2xf32>
  %qr3 = "onnx.Sub"(%qr1, %qr2) : (tensor<?x2x?x2xf32>, tensor<?x2x?x2xf32>) -> tensor<?x2x?x2xf32>
  %qr4 = "onnx.Mul"(%qrp#1, %cos4) : (tensor<?x2x?x2xf32>, tensor<1x1x?x2xf32>) -> tensor<?x2x?x2xf32>
  %qr5 = "onnx.Mul"(%qrp#0, %sin4) : (tensor<?x2x?x2xf32>, tensor<1x1x?x2xf32>) -> tensor<?x2x?x2xf32>
  %qr6 = "onnx.Add"(%qr4, %qr5) : (tensor<?x2x?x2xf32>, tensor<?x2x?x2xf32>) -> tensor<?x2x?x2xf32>
  %qr = "onnx.Concat"(%qr3, %qr6) <{axis = -1 : i64}> : (tensor<?x2x?x2xf32>, tensor<?x2x?x2xf32>) -> tensor<?x2x?x4xf32>
  %krp:2 = "onnx.Split"(%k, %none) <{axis = 3 : i64, num_outputs = 2 : i64}> : (tensor<?x1x?x4xf32>, none) -> (tensor<?x1x?x2xf32>, tensor<?x1x?x2xf32>)
  %kr1 = "onnx.Mul"(%krp#0, %cos4) : (tensor<?x1x?x2xf32>, tensor<1x1x?x2xf32>) -> tensor<?x1x?x2xf32>
  %kr2 = "onnx.Mul"(%krp#1, %sin4) : (tensor<?x1x?x2xf32>, tensor<1x1x?x2xf32>) -> tensor<?x1x?x2xf32>
  %kr3 = "onnx.Sub"(%kr1, %kr2) : (tensor<?x1x?x2xf32>, tensor<?x1x?x2xf32>) -> tensor<?x1x?x2xf32>
  %kr4 = "onnx.Mul"(%krp#1, %cos4) : (tensor<?x1x?x2xf32>, tensor<1x1x?x2xf32>) -> tensor<?x1x?x2xf32>
  %kr5 = "onnx.Mul"(%krp#0, %sin4) : (tensor<?x1x?x2xf32>, tensor<1x1x?x2xf32>) -> tensor<?x1x?x2xf32>
  %kr6 = "onnx.Add"(%kr4, %kr5) : (tensor<?x1x?x2xf32>, tensor<?x1x?x2xf32>) -> tensor<?x1x?x2xf32>
  %kr = "onnx.Concat"(%kr3, %kr6) <{axis = -1 : i64}> : (tensor<?x1x?x2xf32>, tensor<?x1x?x2xf32>) -> tensor<?x1x?x4xf32>
  %rep5 = "onnx.Concat"(%b, %a1, %a2, %t, %a4) <{axis = 0 : i64}> : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<5xi64>
  %rep4 = "onnx.Concat"(%b, %a2, %t, %a4) <{axis = 0 : i64}> : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<4xi64>
  %kxu = "onnx.Unsqueeze"(%kr, %a2) : (tensor<?x1x?x4xf32>, tensor<1xi64>) -> tensor<?x1x1x?x4xf32>
  %kxe = "onnx.Expand"(%kxu, %rep5) : (tensor<?x1x1x?x4xf32>, tensor<5xi64>) -> tensor<?x1x2x?x4xf32>
  %kx = "onnx.Reshape"(%kxe, %rep4) <{allowzero = 1 : i64}> : (tensor<?x1x2x?x4xf32>, tensor<4xi64>) -> tensor<?x2x?x4xf32>
  %vxu = "onnx.Unsqueeze"(%v, %a2) : (tensor<?x1x?x4xf32>, tensor<1xi64>) -> tensor<?x1x1x?x4xf32>
  %vxe = "onnx.Expand"(%vxu, %rep5) : (tensor<?x1x1x?x4xf32>, tensor<5xi64>) -> tensor<?x1x2x?x4xf32>
  %vx = "onnx.Reshape"(%vxe, %rep4) <{allowzero = 1 : i64}> : (tensor<?x1x2x?x4xf32>, tensor<4xi64>) -> tensor<?x2x?x4xf32>
  %kt = "onnx.Transpose"(%kx) <{perm = array<i64: 0, 1, 3, 2>}> : (tensor<?x2x?x4xf32>) -> tensor<?x2x4x?xf32>
  %s0 = "onnx.MatMul"(%qr, %kt) : (tensor<?x2x?x4xf32>, tensor<?x2x4x?xf32>) -> tensor<?x2x?x?xf32>
  %s1 = "onnx.Mul"(%s0, %scale) : (tensor<?x2x?x?xf32>, tensor<f32>) -> tensor<?x2x?x?xf32>
  %s2 = "onnx.Add"(%s1, %mask) : (tensor<?x2x?x?xf32>, tensor<1x1x?x?xf32>) -> tensor<?x2x?x?xf32>
  %sinkshape = "onnx.Concat"(%b, %a1, %t, %a1) <{axis = 0 : i64}> : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<4xi64>
  %sinkcol = "onnx.Expand"(%sinks, %sinkshape) : (tensor<1x2x1x1xf32>, tensor<4xi64>) -> tensor<?x2x?x1xf32>
  %s3 = "onnx.Concat"(%s2, %sinkcol) <{axis = -1 : i64}> : (tensor<?x2x?x?xf32>, tensor<?x2x?x1xf32>) -> tensor<?x2x?x?xf32>
  %smax = "onnx.ReduceMax"(%s3, %am1) <{keepdims = 1 : i64, noop_with_empty_axes = 0 : i64}> : (tensor<?x2x?x?xf32>, tensor<1xi64>) -> tensor<?x2x?x1xf32>
  %s4 = "onnx.Sub"(%s3, %smax) : (tensor<?x2x?x?xf32>, tensor<?x2x?x1xf32>) -> tensor<?x2x?x?xf32>
  %p0 = "onnx.Softmax"(%s4) <{axis = -1 : i64}> : (tensor<?x2x?x?xf32>) -> tensor<?x2x?x?xf32>
  %p = "onnx.Slice"(%p0, %a0, %am1, %a3, %a1) : (tensor<?x2x?x?xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x2x?x?xf32>
  %o0 = "onnx.MatMul"(%p, %vx) : (tensor<?x2x?x?xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
  %o1 = "onnx.Transpose"(%o0) <{perm = array<i64: 0, 2, 1, 3>}> : (tensor<?x2x?x4xf32>) -> tensor<?x?x2x4xf32>
  %attn = "onnx.Reshape"(%o1, %btc) <{allowzero = 1 : i64}> : (tensor<?x?x2x4xf32>, tensor<3xi64>) -> tensor<?x?x8xf32>
  %ao = "onnx.MatMul"(%attn, %wo) : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %r = "onnx.Add"(%x, %ao) : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %n1sq = "onnx.Pow"(%r, %two) : (tensor<?x?x8xf32>, tensor<f32>) -> tensor<?x?x8xf32>
  %n1ms = "onnx.ReduceMean"(%n1sq, %am1) <{keepdims = 1 : i64, noop_with_empty_axes = 0 : i64}> : (tensor<?x?x8xf32>, tensor<1xi64>) -> tensor<?x?x1xf32>
  %n1me = "onnx.Add"(%n1ms, %eps) : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %n1rt = "onnx.Sqrt"(%n1me) : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %n1rr = "onnx.Reciprocal"(%n1rt) : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %n1xn = "onnx.Mul"(%r, %n1rr) : (tensor<?x?x8xf32>, tensor<?x?x1xf32>) -> tensor<?x?x8xf32>
  %fin = "onnx.Mul"(%wfinal, %n1xn) : (tensor<8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %logits = "onnx.MatMul"(%fin, %wh) : (tensor<?x?x8xf32>, tensor<8x6xf32>) -> tensor<?x?x6xf32>
  return %logits : tensor<?x?x6xf32>
}
// -----

// Qwen3: the query's RMSNorm over each head's 4 columns (groups of 4 in the
// step program), a dense SiLU-gated MLP (gate and up stacked, transposed to
// [2I, H]) and a moe.layer that moe-raise-onnx left between two Reshapes.
// CHECK-LABEL: func.func @forward(
// CHECK: %[[Q:.*]] = moe.linear
// CHECK: %[[QN:.*]] = moe.rms_norm %[[Q]], %{{.*}} {epsilon = {{.*}}} : tensor<?x8xf32>, tensor<4xf32> -> tensor<?x8xf32>
// CHECK: moe.rotary %[[QN]]
// CHECK: %[[R:.*]] = arith.addf
// CHECK: %[[GU:.*]] = moe.linear %[[R]], %[[W:.*]] {epilogue = #moe.activation<silu>, epilogue_layout = #moe.gate_up_layout<concatenated>} : tensor<?x8xf32>, tensor<4x8xf32> -> tensor<?x2xf32>
// CHECK: %[[D:.*]] = moe.linear %[[GU]], %{{.*}} : tensor<?x2xf32>, tensor<8x2xf32> -> tensor<?x8xf32>
// CHECK: %[[R2:.*]] = arith.addf %[[R]], %[[D]]
// CHECK: %[[M:.*]] = moe.layer %[[R2]] : tensor<?x8xf32>
// CHECK: arith.addf %[[R2]], %[[M]]
// CHECK-NOT: onnx.
func.func @qwen3(%ids: tensor<?x?xi64> {onnx.name = "input_ids"}) -> (tensor<?x?x6xf32> {onnx.name = "logits"}) {
  %table = "onnx.Constant"() <{value = dense<[[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8], [0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1], [1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0], [0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5], [0.1, 0.1, 0.2, 0.2, 0.3, 0.3, 0.4, 0.4], [0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0]]> : tensor<6x8xf32>}> : () -> tensor<6x8xf32>
  %wnorm = "onnx.Constant"() <{value = dense<[1.0, 1.1, 1.2, 1.3, 0.9, 0.8, 0.7, 0.6]> : tensor<8xf32>}> : () -> tensor<8xf32>
  %wfinal = "onnx.Constant"() <{value = dense<1.5> : tensor<8xf32>}> : () -> tensor<8xf32>
  %wq = "onnx.Constant"() <{value = dense<0.1> : tensor<8x8xf32>}> : () -> tensor<8x8xf32>
  %wk = "onnx.Constant"() <{value = dense<0.2> : tensor<8x4xf32>}> : () -> tensor<8x4xf32>
  %wv = "onnx.Constant"() <{value = dense<0.3> : tensor<8x4xf32>}> : () -> tensor<8x4xf32>
  %wo = "onnx.Constant"() <{value = dense<0.4> : tensor<8x8xf32>}> : () -> tensor<8x8xf32>
  %wh = "onnx.Constant"() <{value = dense<0.5> : tensor<8x6xf32>}> : () -> tensor<8x6xf32>
  %inv = "onnx.Constant"() <{value = dense<[[[1.000000e+00], [1.000000e-02]]]> : tensor<1x2x1xf32>}> : () -> tensor<1x2x1xf32>
  %scale = "onnx.Constant"() <{value = dense<5.000000e-01> : tensor<f32>}> : () -> tensor<f32>
  %two = "onnx.Constant"() <{value = dense<2.000000e+00> : tensor<f32>}> : () -> tensor<f32>
  %eps = "onnx.Constant"() <{value = dense<9.99999974E-6> : tensor<f32>}> : () -> tensor<f32>
  %zero = "onnx.Constant"() <{value = dense<0.000000e+00> : tensor<f32>}> : () -> tensor<f32>
  %min = "onnx.Constant"() <{value = dense<-3.40282347E+38> : tensor<f32>}> : () -> tensor<f32>
  %i0 = "onnx.Constant"() <{value = dense<0> : tensor<i64>}> : () -> tensor<i64>
  %i1 = "onnx.Constant"() <{value = dense<1> : tensor<i64>}> : () -> tensor<i64>
  %a0 = "onnx.Constant"() <{value = dense<0> : tensor<1xi64>}> : () -> tensor<1xi64>
  %a1 = "onnx.Constant"() <{value = dense<1> : tensor<1xi64>}> : () -> tensor<1xi64>
  %a2 = "onnx.Constant"() <{value = dense<2> : tensor<1xi64>}> : () -> tensor<1xi64>
  %a3 = "onnx.Constant"() <{value = dense<3> : tensor<1xi64>}> : () -> tensor<1xi64>
  %a4 = "onnx.Constant"() <{value = dense<4> : tensor<1xi64>}> : () -> tensor<1xi64>
  %am1 = "onnx.Constant"() <{value = dense<-1> : tensor<1xi64>}> : () -> tensor<1xi64>
  %a01 = "onnx.Constant"() <{value = dense<[0, 1]> : tensor<2xi64>}> : () -> tensor<2xi64>
  %end = "onnx.Constant"() <{value = dense<9223372036854775807> : tensor<1xi64>}> : () -> tensor<1xi64>
  %none = onnx.NoValue
  %b = "onnx.Shape"(%ids) <{end = 1 : i64, start = 0 : i64}> : (tensor<?x?xi64>) -> tensor<1xi64>
  %t = "onnx.Shape"(%ids) <{end = 2 : i64, start = 1 : i64}> : (tensor<?x?xi64>) -> tensor<1xi64>
  %ts = "onnx.Squeeze"(%t, %none) : (tensor<1xi64>, none) -> tensor<i64>
  %pos = "onnx.Range"(%i0, %ts, %i1) : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  %pos3 = "onnx.Unsqueeze"(%pos, %a01) : (tensor<?xi64>, tensor<2xi64>) -> tensor<1x1x?xi64>
  %btc = "onnx.Concat"(%b, %t, %am1) <{axis = 0 : i64}> : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<3xi64>
  %bthd = "onnx.Concat"(%b, %t, %am1, %a4) <{axis = 0 : i64}> : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<4xi64>
  %posf = "onnx.Cast"(%pos3) <{to = 1 : i64}> : (tensor<1x1x?xi64>) -> tensor<1x1x?xf32>
  %fr = "onnx.MatMul"(%inv, %posf) : (tensor<1x2x1xf32>, tensor<1x1x?xf32>) -> tensor<1x2x?xf32>
  %f = "onnx.Transpose"(%fr) <{perm = array<i64: 0, 2, 1>}> : (tensor<1x2x?xf32>) -> tensor<1x?x2xf32>
  %emb = "onnx.Concat"(%f, %f) <{axis = -1 : i64}> : (tensor<1x?x2xf32>, tensor<1x?x2xf32>) -> tensor<1x?x4xf32>
  %cos0 = "onnx.Cos"(%emb) : (tensor<1x?x4xf32>) -> tensor<1x?x4xf32>
  %sin0 = "onnx.Sin"(%emb) : (tensor<1x?x4xf32>) -> tensor<1x?x4xf32>
  %cos4 = "onnx.Unsqueeze"(%cos0, %a1) : (tensor<1x?x4xf32>, tensor<1xi64>) -> tensor<1x1x?x4xf32>
  %sin4 = "onnx.Unsqueeze"(%sin0, %a1) : (tensor<1x?x4xf32>, tensor<1xi64>) -> tensor<1x1x?x4xf32>
  %kv = "onnx.Unsqueeze"(%pos3, %a2) : (tensor<1x1x?xi64>, tensor<1xi64>) -> tensor<1x1x1x?xi64>
  %qi = "onnx.Unsqueeze"(%pos3, %a3) : (tensor<1x1x?xi64>, tensor<1xi64>) -> tensor<1x1x?x1xi64>
  %cond0 = "onnx.LessOrEqual"(%kv, %qi) : (tensor<1x1x1x?xi64>, tensor<1x1x?x1xi64>) -> tensor<1x1x?x?xi1>
  %mask = "onnx.Where"(%cond0, %zero, %min) : (tensor<1x1x?x?xi1>, tensor<f32>, tensor<f32>) -> tensor<1x1x?x?xf32>
  %x = "onnx.Gather"(%table, %ids) <{axis = 0 : i64}> : (tensor<6x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
  %n0sq = "onnx.Pow"(%x, %two) : (tensor<?x?x8xf32>, tensor<f32>) -> tensor<?x?x8xf32>
  %n0ms = "onnx.ReduceMean"(%n0sq, %am1) <{keepdims = 1 : i64, noop_with_empty_axes = 0 : i64}> : (tensor<?x?x8xf32>, tensor<1xi64>) -> tensor<?x?x1xf32>
  %n0me = "onnx.Add"(%n0ms, %eps) : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %n0rt = "onnx.Sqrt"(%n0me) : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %n0rr = "onnx.Reciprocal"(%n0rt) : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %n0xn = "onnx.Mul"(%x, %n0rr) : (tensor<?x?x8xf32>, tensor<?x?x1xf32>) -> tensor<?x?x8xf32>
  %h = "onnx.Mul"(%wnorm, %n0xn) : (tensor<8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %q0 = "onnx.MatMul"(%h, %wq) : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %q1 = "onnx.Reshape"(%q0, %bthd) <{allowzero = 1 : i64}> : (tensor<?x?x8xf32>, tensor<4xi64>) -> tensor<?x?x2x4xf32>
  %wqn = "onnx.Constant"() <{value = dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>}> : () -> tensor<4xf32>
  %qnsq = "onnx.Pow"(%q1, %two) : (tensor<?x?x2x4xf32>, tensor<f32>) -> tensor<?x?x2x4xf32>
  %qnms = "onnx.ReduceMean"(%qnsq, %am1) <{keepdims = 1 : i64, noop_with_empty_axes = 0 : i64}> : (tensor<?x?x2x4xf32>, tensor<1xi64>) -> tensor<?x?x2x1xf32>
  %qnme = "onnx.Add"(%qnms, %eps) : (tensor<?x?x2x1xf32>, tensor<f32>) -> tensor<?x?x2x1xf32>
  %qnrt = "onnx.Sqrt"(%qnme) : (tensor<?x?x2x1xf32>) -> tensor<?x?x2x1xf32>
  %qnrr = "onnx.Reciprocal"(%qnrt) : (tensor<?x?x2x1xf32>) -> tensor<?x?x2x1xf32>
  %qnxn = "onnx.Mul"(%q1, %qnrr) : (tensor<?x?x2x4xf32>, tensor<?x?x2x1xf32>) -> tensor<?x?x2x4xf32>
  %q1n = "onnx.Mul"(%wqn, %qnxn) : (tensor<4xf32>, tensor<?x?x2x4xf32>) -> tensor<?x?x2x4xf32>
  %q = "onnx.Transpose"(%q1n) <{perm = array<i64: 0, 2, 1, 3>}> : (tensor<?x?x2x4xf32>) -> tensor<?x2x?x4xf32>
  %k0 = "onnx.MatMul"(%h, %wk) : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  %k1 = "onnx.Reshape"(%k0, %bthd) <{allowzero = 1 : i64}> : (tensor<?x?x4xf32>, tensor<4xi64>) -> tensor<?x?x1x4xf32>
  %k = "onnx.Transpose"(%k1) <{perm = array<i64: 0, 2, 1, 3>}> : (tensor<?x?x1x4xf32>) -> tensor<?x1x?x4xf32>
  %v0 = "onnx.MatMul"(%h, %wv) : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  %v1 = "onnx.Reshape"(%v0, %bthd) <{allowzero = 1 : i64}> : (tensor<?x?x4xf32>, tensor<4xi64>) -> tensor<?x?x1x4xf32>
  %v = "onnx.Transpose"(%v1) <{perm = array<i64: 0, 2, 1, 3>}> : (tensor<?x?x1x4xf32>) -> tensor<?x1x?x4xf32>
  %qrlo = "onnx.Slice"(%q, %a0, %a2, %a3, %a1) : (tensor<?x2x?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x2x?x2xf32>
  %qrhi = "onnx.Slice"(%q, %a2, %end, %a3, %a1) : (tensor<?x2x?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x2x?x2xf32>
  %qrng = "onnx.Neg"(%qrhi) : (tensor<?x2x?x2xf32>) -> tensor<?x2x?x2xf32>
  %qrrh = "onnx.Concat"(%qrng, %qrlo) <{axis = -1 : i64}> : (tensor<?x2x?x2xf32>, tensor<?x2x?x2xf32>) -> tensor<?x2x?x4xf32>
  %qrc = "onnx.Mul"(%q, %cos4) : (tensor<?x2x?x4xf32>, tensor<1x1x?x4xf32>) -> tensor<?x2x?x4xf32>
  %qrs = "onnx.Mul"(%qrrh, %sin4) : (tensor<?x2x?x4xf32>, tensor<1x1x?x4xf32>) -> tensor<?x2x?x4xf32>
  %qr = "onnx.Add"(%qrc, %qrs) : (tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
  %krlo = "onnx.Slice"(%k, %a0, %a2, %a3, %a1) : (tensor<?x1x?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x1x?x2xf32>
  %krhi = "onnx.Slice"(%k, %a2, %end, %a3, %a1) : (tensor<?x1x?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x1x?x2xf32>
  %krng = "onnx.Neg"(%krhi) : (tensor<?x1x?x2xf32>) -> tensor<?x1x?x2xf32>
  %krrh = "onnx.Concat"(%krng, %krlo) <{axis = -1 : i64}> : (tensor<?x1x?x2xf32>, tensor<?x1x?x2xf32>) -> tensor<?x1x?x4xf32>
  %krc = "onnx.Mul"(%k, %cos4) : (tensor<?x1x?x4xf32>, tensor<1x1x?x4xf32>) -> tensor<?x1x?x4xf32>
  %krs = "onnx.Mul"(%krrh, %sin4) : (tensor<?x1x?x4xf32>, tensor<1x1x?x4xf32>) -> tensor<?x1x?x4xf32>
  %kr = "onnx.Add"(%krc, %krs) : (tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x1x?x4xf32>
  %rep5 = "onnx.Concat"(%b, %a1, %a2, %t, %a4) <{axis = 0 : i64}> : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<5xi64>
  %rep4 = "onnx.Concat"(%b, %a2, %t, %a4) <{axis = 0 : i64}> : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<4xi64>
  %kxu = "onnx.Unsqueeze"(%kr, %a2) : (tensor<?x1x?x4xf32>, tensor<1xi64>) -> tensor<?x1x1x?x4xf32>
  %kxe = "onnx.Expand"(%kxu, %rep5) : (tensor<?x1x1x?x4xf32>, tensor<5xi64>) -> tensor<?x1x2x?x4xf32>
  %kx = "onnx.Reshape"(%kxe, %rep4) <{allowzero = 1 : i64}> : (tensor<?x1x2x?x4xf32>, tensor<4xi64>) -> tensor<?x2x?x4xf32>
  %vxu = "onnx.Unsqueeze"(%v, %a2) : (tensor<?x1x?x4xf32>, tensor<1xi64>) -> tensor<?x1x1x?x4xf32>
  %vxe = "onnx.Expand"(%vxu, %rep5) : (tensor<?x1x1x?x4xf32>, tensor<5xi64>) -> tensor<?x1x2x?x4xf32>
  %vx = "onnx.Reshape"(%vxe, %rep4) <{allowzero = 1 : i64}> : (tensor<?x1x2x?x4xf32>, tensor<4xi64>) -> tensor<?x2x?x4xf32>
  %kt = "onnx.Transpose"(%kx) <{perm = array<i64: 0, 1, 3, 2>}> : (tensor<?x2x?x4xf32>) -> tensor<?x2x4x?xf32>
  %s0 = "onnx.MatMul"(%qr, %kt) : (tensor<?x2x?x4xf32>, tensor<?x2x4x?xf32>) -> tensor<?x2x?x?xf32>
  %s1 = "onnx.Mul"(%s0, %scale) : (tensor<?x2x?x?xf32>, tensor<f32>) -> tensor<?x2x?x?xf32>
  %s2 = "onnx.Add"(%s1, %mask) : (tensor<?x2x?x?xf32>, tensor<1x1x?x?xf32>) -> tensor<?x2x?x?xf32>
  %p = "onnx.Softmax"(%s2) <{axis = -1 : i64}> : (tensor<?x2x?x?xf32>) -> tensor<?x2x?x?xf32>
  %o0 = "onnx.MatMul"(%p, %vx) : (tensor<?x2x?x?xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
  %o1 = "onnx.Transpose"(%o0) <{perm = array<i64: 0, 2, 1, 3>}> : (tensor<?x2x?x4xf32>) -> tensor<?x?x2x4xf32>
  %attn = "onnx.Reshape"(%o1, %btc) <{allowzero = 1 : i64}> : (tensor<?x?x2x4xf32>, tensor<3xi64>) -> tensor<?x?x8xf32>
  %ao = "onnx.MatMul"(%attn, %wo) : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %r = "onnx.Add"(%x, %ao) : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %wg = "onnx.Constant"() <{value = dense<[[0.1, 0.2], [0.3, 0.4], [0.5, 0.6], [0.7, 0.8], [0.9, 1.0], [1.1, 1.2], [1.3, 1.4], [1.5, 1.6]]> : tensor<8x2xf32>}> : () -> tensor<8x2xf32>
  %wu = "onnx.Constant"() <{value = dense<[[-0.1, -0.2], [-0.3, -0.4], [-0.5, -0.6], [-0.7, -0.8], [-0.9, -1.0], [-1.1, -1.2], [-1.3, -1.4], [-1.5, -1.6]]> : tensor<8x2xf32>}> : () -> tensor<8x2xf32>
  %wd = "onnx.Constant"() <{value = dense<0.25> : tensor<2x8xf32>}> : () -> tensor<2x8xf32>
  %g0 = "onnx.MatMul"(%r, %wg) : (tensor<?x?x8xf32>, tensor<8x2xf32>) -> tensor<?x?x2xf32>
  %g1 = "onnx.Sigmoid"(%g0) : (tensor<?x?x2xf32>) -> tensor<?x?x2xf32>
  %g2 = "onnx.Mul"(%g0, %g1) : (tensor<?x?x2xf32>, tensor<?x?x2xf32>) -> tensor<?x?x2xf32>
  %u0 = "onnx.MatMul"(%r, %wu) : (tensor<?x?x8xf32>, tensor<8x2xf32>) -> tensor<?x?x2xf32>
  %gu = "onnx.Mul"(%g2, %u0) : (tensor<?x?x2xf32>, tensor<?x?x2xf32>) -> tensor<?x?x2xf32>
  %d0 = "onnx.MatMul"(%gu, %wd) : (tensor<?x?x2xf32>, tensor<2x8xf32>) -> tensor<?x?x8xf32>
  %r2 = "onnx.Add"(%r, %d0) : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %rows = "onnx.Constant"() <{value = dense<[-1, 8]> : tensor<2xi64>}> : () -> tensor<2xi64>
  %router = arith.constant dense<0.5> : tensor<4x8xf32>
  %gate_up = arith.constant dense<0.25> : tensor<4x4x8xf32>
  %down = arith.constant dense<0.125> : tensor<4x8x2xf32>
  %flat = "onnx.Reshape"(%r2, %rows) <{allowzero = 0 : i64}> : (tensor<?x?x8xf32>, tensor<2xi64>) -> tensor<?x8xf32>
  %moe = moe.layer %flat : tensor<?x8xf32> router_weight(%router : tensor<4x8xf32>) gate_up(%gate_up : tensor<4x4x8xf32>) down(%down : tensor<4x8x2xf32>) {activation = #moe.activation<silu>, gate_up_layout = #moe.gate_up_layout<concatenated>, normalize = true, routing = #moe.routing<softmax_topk>, top_k = 2 : i64} -> tensor<?x8xf32>
  %moe3 = "onnx.Reshape"(%moe, %btc) <{allowzero = 1 : i64}> : (tensor<?x8xf32>, tensor<3xi64>) -> tensor<?x?x8xf32>
  %r3 = "onnx.Add"(%r2, %moe3) : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %n1sq = "onnx.Pow"(%r3, %two) : (tensor<?x?x8xf32>, tensor<f32>) -> tensor<?x?x8xf32>
  %n1ms = "onnx.ReduceMean"(%n1sq, %am1) <{keepdims = 1 : i64, noop_with_empty_axes = 0 : i64}> : (tensor<?x?x8xf32>, tensor<1xi64>) -> tensor<?x?x1xf32>
  %n1me = "onnx.Add"(%n1ms, %eps) : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %n1rt = "onnx.Sqrt"(%n1me) : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %n1rr = "onnx.Reciprocal"(%n1rt) : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %n1xn = "onnx.Mul"(%r3, %n1rr) : (tensor<?x?x8xf32>, tensor<?x?x1xf32>) -> tensor<?x?x8xf32>
  %fin = "onnx.Mul"(%wfinal, %n1xn) : (tensor<8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %logits = "onnx.MatMul"(%fin, %wh) : (tensor<?x?x8xf32>, tensor<8x6xf32>) -> tensor<?x?x6xf32>
  return %logits : tensor<?x?x6xf32>
}
// -----

// Scores divided by sqrt(D) rather than multiplied: scale = 1/2.
// CHECK-LABEL: func.func @forward(
// CHECK: moe.attention {{.*}} {layer = 0 : i64, num_heads = 2 : i64, num_kv_heads = 1 : i64, scale = 5.000000e-01 : f64}
func.func @divided(%ids: tensor<?x?xi64> {onnx.name = "input_ids"}) -> (tensor<?x?x6xf32> {onnx.name = "logits"}) {
  %table = "onnx.Constant"() <{value = dense<[[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8], [0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1], [1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0], [0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5], [0.1, 0.1, 0.2, 0.2, 0.3, 0.3, 0.4, 0.4], [0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0]]> : tensor<6x8xf32>}> : () -> tensor<6x8xf32>
  %wnorm = "onnx.Constant"() <{value = dense<[1.0, 1.1, 1.2, 1.3, 0.9, 0.8, 0.7, 0.6]> : tensor<8xf32>}> : () -> tensor<8xf32>
  %wfinal = "onnx.Constant"() <{value = dense<1.5> : tensor<8xf32>}> : () -> tensor<8xf32>
  %wq = "onnx.Constant"() <{value = dense<0.1> : tensor<8x8xf32>}> : () -> tensor<8x8xf32>
  %wk = "onnx.Constant"() <{value = dense<0.2> : tensor<8x4xf32>}> : () -> tensor<8x4xf32>
  %wv = "onnx.Constant"() <{value = dense<0.3> : tensor<8x4xf32>}> : () -> tensor<8x4xf32>
  %wo = "onnx.Constant"() <{value = dense<0.4> : tensor<8x8xf32>}> : () -> tensor<8x8xf32>
  %wh = "onnx.Constant"() <{value = dense<0.5> : tensor<8x6xf32>}> : () -> tensor<8x6xf32>
  %inv = "onnx.Constant"() <{value = dense<[[[1.000000e+00], [1.000000e-02]]]> : tensor<1x2x1xf32>}> : () -> tensor<1x2x1xf32>
  %scale = "onnx.Constant"() <{value = dense<2.000000e+00> : tensor<f32>}> : () -> tensor<f32>
  %two = "onnx.Constant"() <{value = dense<2.000000e+00> : tensor<f32>}> : () -> tensor<f32>
  %eps = "onnx.Constant"() <{value = dense<9.99999974E-6> : tensor<f32>}> : () -> tensor<f32>
  %zero = "onnx.Constant"() <{value = dense<0.000000e+00> : tensor<f32>}> : () -> tensor<f32>
  %min = "onnx.Constant"() <{value = dense<-3.40282347E+38> : tensor<f32>}> : () -> tensor<f32>
  %i0 = "onnx.Constant"() <{value = dense<0> : tensor<i64>}> : () -> tensor<i64>
  %i1 = "onnx.Constant"() <{value = dense<1> : tensor<i64>}> : () -> tensor<i64>
  %a0 = "onnx.Constant"() <{value = dense<0> : tensor<1xi64>}> : () -> tensor<1xi64>
  %a1 = "onnx.Constant"() <{value = dense<1> : tensor<1xi64>}> : () -> tensor<1xi64>
  %a2 = "onnx.Constant"() <{value = dense<2> : tensor<1xi64>}> : () -> tensor<1xi64>
  %a3 = "onnx.Constant"() <{value = dense<3> : tensor<1xi64>}> : () -> tensor<1xi64>
  %a4 = "onnx.Constant"() <{value = dense<4> : tensor<1xi64>}> : () -> tensor<1xi64>
  %am1 = "onnx.Constant"() <{value = dense<-1> : tensor<1xi64>}> : () -> tensor<1xi64>
  %a01 = "onnx.Constant"() <{value = dense<[0, 1]> : tensor<2xi64>}> : () -> tensor<2xi64>
  %end = "onnx.Constant"() <{value = dense<9223372036854775807> : tensor<1xi64>}> : () -> tensor<1xi64>
  %none = onnx.NoValue
  %b = "onnx.Shape"(%ids) <{end = 1 : i64, start = 0 : i64}> : (tensor<?x?xi64>) -> tensor<1xi64>
  %t = "onnx.Shape"(%ids) <{end = 2 : i64, start = 1 : i64}> : (tensor<?x?xi64>) -> tensor<1xi64>
  %ts = "onnx.Squeeze"(%t, %none) : (tensor<1xi64>, none) -> tensor<i64>
  %pos = "onnx.Range"(%i0, %ts, %i1) : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  %pos3 = "onnx.Unsqueeze"(%pos, %a01) : (tensor<?xi64>, tensor<2xi64>) -> tensor<1x1x?xi64>
  %btc = "onnx.Concat"(%b, %t, %am1) <{axis = 0 : i64}> : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<3xi64>
  %bthd = "onnx.Concat"(%b, %t, %am1, %a4) <{axis = 0 : i64}> : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<4xi64>
  %posf = "onnx.Cast"(%pos3) <{to = 1 : i64}> : (tensor<1x1x?xi64>) -> tensor<1x1x?xf32>
  %fr = "onnx.MatMul"(%inv, %posf) : (tensor<1x2x1xf32>, tensor<1x1x?xf32>) -> tensor<1x2x?xf32>
  %f = "onnx.Transpose"(%fr) <{perm = array<i64: 0, 2, 1>}> : (tensor<1x2x?xf32>) -> tensor<1x?x2xf32>
  %emb = "onnx.Concat"(%f, %f) <{axis = -1 : i64}> : (tensor<1x?x2xf32>, tensor<1x?x2xf32>) -> tensor<1x?x4xf32>
  %cos0 = "onnx.Cos"(%emb) : (tensor<1x?x4xf32>) -> tensor<1x?x4xf32>
  %sin0 = "onnx.Sin"(%emb) : (tensor<1x?x4xf32>) -> tensor<1x?x4xf32>
  %cos4 = "onnx.Unsqueeze"(%cos0, %a1) : (tensor<1x?x4xf32>, tensor<1xi64>) -> tensor<1x1x?x4xf32>
  %sin4 = "onnx.Unsqueeze"(%sin0, %a1) : (tensor<1x?x4xf32>, tensor<1xi64>) -> tensor<1x1x?x4xf32>
  %kv = "onnx.Unsqueeze"(%pos3, %a2) : (tensor<1x1x?xi64>, tensor<1xi64>) -> tensor<1x1x1x?xi64>
  %qi = "onnx.Unsqueeze"(%pos3, %a3) : (tensor<1x1x?xi64>, tensor<1xi64>) -> tensor<1x1x?x1xi64>
  %cond0 = "onnx.LessOrEqual"(%kv, %qi) : (tensor<1x1x1x?xi64>, tensor<1x1x?x1xi64>) -> tensor<1x1x?x?xi1>
  %mask = "onnx.Where"(%cond0, %zero, %min) : (tensor<1x1x?x?xi1>, tensor<f32>, tensor<f32>) -> tensor<1x1x?x?xf32>
  %x = "onnx.Gather"(%table, %ids) <{axis = 0 : i64}> : (tensor<6x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
  %n0sq = "onnx.Pow"(%x, %two) : (tensor<?x?x8xf32>, tensor<f32>) -> tensor<?x?x8xf32>
  %n0ms = "onnx.ReduceMean"(%n0sq, %am1) <{keepdims = 1 : i64, noop_with_empty_axes = 0 : i64}> : (tensor<?x?x8xf32>, tensor<1xi64>) -> tensor<?x?x1xf32>
  %n0me = "onnx.Add"(%n0ms, %eps) : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %n0rt = "onnx.Sqrt"(%n0me) : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %n0rr = "onnx.Reciprocal"(%n0rt) : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %n0xn = "onnx.Mul"(%x, %n0rr) : (tensor<?x?x8xf32>, tensor<?x?x1xf32>) -> tensor<?x?x8xf32>
  %h = "onnx.Mul"(%wnorm, %n0xn) : (tensor<8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %q0 = "onnx.MatMul"(%h, %wq) : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %q1 = "onnx.Reshape"(%q0, %bthd) <{allowzero = 1 : i64}> : (tensor<?x?x8xf32>, tensor<4xi64>) -> tensor<?x?x2x4xf32>
  %q = "onnx.Transpose"(%q1) <{perm = array<i64: 0, 2, 1, 3>}> : (tensor<?x?x2x4xf32>) -> tensor<?x2x?x4xf32>
  %k0 = "onnx.MatMul"(%h, %wk) : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  %k1 = "onnx.Reshape"(%k0, %bthd) <{allowzero = 1 : i64}> : (tensor<?x?x4xf32>, tensor<4xi64>) -> tensor<?x?x1x4xf32>
  %k = "onnx.Transpose"(%k1) <{perm = array<i64: 0, 2, 1, 3>}> : (tensor<?x?x1x4xf32>) -> tensor<?x1x?x4xf32>
  %v0 = "onnx.MatMul"(%h, %wv) : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  %v1 = "onnx.Reshape"(%v0, %bthd) <{allowzero = 1 : i64}> : (tensor<?x?x4xf32>, tensor<4xi64>) -> tensor<?x?x1x4xf32>
  %v = "onnx.Transpose"(%v1) <{perm = array<i64: 0, 2, 1, 3>}> : (tensor<?x?x1x4xf32>) -> tensor<?x1x?x4xf32>
  %qrlo = "onnx.Slice"(%q, %a0, %a2, %a3, %a1) : (tensor<?x2x?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x2x?x2xf32>
  %qrhi = "onnx.Slice"(%q, %a2, %end, %a3, %a1) : (tensor<?x2x?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x2x?x2xf32>
  %qrng = "onnx.Neg"(%qrhi) : (tensor<?x2x?x2xf32>) -> tensor<?x2x?x2xf32>
  %qrrh = "onnx.Concat"(%qrng, %qrlo) <{axis = -1 : i64}> : (tensor<?x2x?x2xf32>, tensor<?x2x?x2xf32>) -> tensor<?x2x?x4xf32>
  %qrc = "onnx.Mul"(%q, %cos4) : (tensor<?x2x?x4xf32>, tensor<1x1x?x4xf32>) -> tensor<?x2x?x4xf32>
  %qrs = "onnx.Mul"(%qrrh, %sin4) : (tensor<?x2x?x4xf32>, tensor<1x1x?x4xf32>) -> tensor<?x2x?x4xf32>
  %qr = "onnx.Add"(%qrc, %qrs) : (tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
  %krlo = "onnx.Slice"(%k, %a0, %a2, %a3, %a1) : (tensor<?x1x?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x1x?x2xf32>
  %krhi = "onnx.Slice"(%k, %a2, %end, %a3, %a1) : (tensor<?x1x?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x1x?x2xf32>
  %krng = "onnx.Neg"(%krhi) : (tensor<?x1x?x2xf32>) -> tensor<?x1x?x2xf32>
  %krrh = "onnx.Concat"(%krng, %krlo) <{axis = -1 : i64}> : (tensor<?x1x?x2xf32>, tensor<?x1x?x2xf32>) -> tensor<?x1x?x4xf32>
  %krc = "onnx.Mul"(%k, %cos4) : (tensor<?x1x?x4xf32>, tensor<1x1x?x4xf32>) -> tensor<?x1x?x4xf32>
  %krs = "onnx.Mul"(%krrh, %sin4) : (tensor<?x1x?x4xf32>, tensor<1x1x?x4xf32>) -> tensor<?x1x?x4xf32>
  %kr = "onnx.Add"(%krc, %krs) : (tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x1x?x4xf32>
  %rep5 = "onnx.Concat"(%b, %a1, %a2, %t, %a4) <{axis = 0 : i64}> : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<5xi64>
  %rep4 = "onnx.Concat"(%b, %a2, %t, %a4) <{axis = 0 : i64}> : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<4xi64>
  %kxu = "onnx.Unsqueeze"(%kr, %a2) : (tensor<?x1x?x4xf32>, tensor<1xi64>) -> tensor<?x1x1x?x4xf32>
  %kxe = "onnx.Expand"(%kxu, %rep5) : (tensor<?x1x1x?x4xf32>, tensor<5xi64>) -> tensor<?x1x2x?x4xf32>
  %kx = "onnx.Reshape"(%kxe, %rep4) <{allowzero = 1 : i64}> : (tensor<?x1x2x?x4xf32>, tensor<4xi64>) -> tensor<?x2x?x4xf32>
  %vxu = "onnx.Unsqueeze"(%v, %a2) : (tensor<?x1x?x4xf32>, tensor<1xi64>) -> tensor<?x1x1x?x4xf32>
  %vxe = "onnx.Expand"(%vxu, %rep5) : (tensor<?x1x1x?x4xf32>, tensor<5xi64>) -> tensor<?x1x2x?x4xf32>
  %vx = "onnx.Reshape"(%vxe, %rep4) <{allowzero = 1 : i64}> : (tensor<?x1x2x?x4xf32>, tensor<4xi64>) -> tensor<?x2x?x4xf32>
  %kt = "onnx.Transpose"(%kx) <{perm = array<i64: 0, 1, 3, 2>}> : (tensor<?x2x?x4xf32>) -> tensor<?x2x4x?xf32>
  %s0 = "onnx.MatMul"(%qr, %kt) : (tensor<?x2x?x4xf32>, tensor<?x2x4x?xf32>) -> tensor<?x2x?x?xf32>
  %s1 = "onnx.Div"(%s0, %scale) : (tensor<?x2x?x?xf32>, tensor<f32>) -> tensor<?x2x?x?xf32>
  %s2 = "onnx.Add"(%s1, %mask) : (tensor<?x2x?x?xf32>, tensor<1x1x?x?xf32>) -> tensor<?x2x?x?xf32>
  %p = "onnx.Softmax"(%s2) <{axis = -1 : i64}> : (tensor<?x2x?x?xf32>) -> tensor<?x2x?x?xf32>
  %o0 = "onnx.MatMul"(%p, %vx) : (tensor<?x2x?x?xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
  %o1 = "onnx.Transpose"(%o0) <{perm = array<i64: 0, 2, 1, 3>}> : (tensor<?x2x?x4xf32>) -> tensor<?x?x2x4xf32>
  %attn = "onnx.Reshape"(%o1, %btc) <{allowzero = 1 : i64}> : (tensor<?x?x2x4xf32>, tensor<3xi64>) -> tensor<?x?x8xf32>
  %ao = "onnx.MatMul"(%attn, %wo) : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %r = "onnx.Add"(%x, %ao) : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %n1sq = "onnx.Pow"(%r, %two) : (tensor<?x?x8xf32>, tensor<f32>) -> tensor<?x?x8xf32>
  %n1ms = "onnx.ReduceMean"(%n1sq, %am1) <{keepdims = 1 : i64, noop_with_empty_axes = 0 : i64}> : (tensor<?x?x8xf32>, tensor<1xi64>) -> tensor<?x?x1xf32>
  %n1me = "onnx.Add"(%n1ms, %eps) : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %n1rt = "onnx.Sqrt"(%n1me) : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %n1rr = "onnx.Reciprocal"(%n1rt) : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %n1xn = "onnx.Mul"(%r, %n1rr) : (tensor<?x?x8xf32>, tensor<?x?x1xf32>) -> tensor<?x?x8xf32>
  %fin = "onnx.Mul"(%wfinal, %n1xn) : (tensor<8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %logits = "onnx.MatMul"(%fin, %wh) : (tensor<?x?x8xf32>, tensor<8x6xf32>) -> tensor<?x?x6xf32>
  return %logits : tensor<?x?x6xf32>
}
// -----

// A tied LM head: MatMul by Transpose(table), the [V, H] table itself being the
// [out, in] weight.
// CHECK-LABEL: func.func @forward(
// CHECK: %[[TABLE:.*]] = "onnx.Constant"() <{value = dense<2.500000e-01> : tensor<6x8xf32>}>
// CHECK: moe.embedding %{{.*}}, %[[TABLE]]
// CHECK: moe.linear %{{.*}}, %[[TABLE]] : tensor<?x8xf32>, tensor<6x8xf32> -> tensor<?x6xf32>
func.func @tied(%ids: tensor<?x?xi64> {onnx.name = "input_ids"}) -> (tensor<?x?x6xf32> {onnx.name = "logits"}) {
  %table = "onnx.Constant"() <{value = dense<0.25> : tensor<6x8xf32>}> : () -> tensor<6x8xf32>
  %wnorm = "onnx.Constant"() <{value = dense<1.5> : tensor<8xf32>}> : () -> tensor<8xf32>
  %wh = "onnx.Constant"() <{value = dense<0.5> : tensor<8x6xf32>}> : () -> tensor<8x6xf32>
  %two = "onnx.Constant"() <{value = dense<2.000000e+00> : tensor<f32>}> : () -> tensor<f32>
  %eps = "onnx.Constant"() <{value = dense<9.99999974E-6> : tensor<f32>}> : () -> tensor<f32>
  %am1 = "onnx.Constant"() <{value = dense<-1> : tensor<1xi64>}> : () -> tensor<1xi64>
  %none = onnx.NoValue
  %x = "onnx.Gather"(%table, %ids) <{axis = 0 : i64}> : (tensor<6x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
  %n0sq = "onnx.Pow"(%x, %two) : (tensor<?x?x8xf32>, tensor<f32>) -> tensor<?x?x8xf32>
  %n0ms = "onnx.ReduceMean"(%n0sq, %am1) <{keepdims = 1 : i64, noop_with_empty_axes = 0 : i64}> : (tensor<?x?x8xf32>, tensor<1xi64>) -> tensor<?x?x1xf32>
  %n0me = "onnx.Add"(%n0ms, %eps) : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %n0rt = "onnx.Sqrt"(%n0me) : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %n0rr = "onnx.Reciprocal"(%n0rt) : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %n0xn = "onnx.Mul"(%x, %n0rr) : (tensor<?x?x8xf32>, tensor<?x?x1xf32>) -> tensor<?x?x8xf32>
  %h = "onnx.Mul"(%wnorm, %n0xn) : (tensor<8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %tt = "onnx.Transpose"(%table) <{perm = array<i64: 1, 0>}> : (tensor<6x8xf32>) -> tensor<8x6xf32>
  %logits = "onnx.MatMul"(%h, %tt) : (tensor<?x?x8xf32>, tensor<8x6xf32>) -> tensor<?x?x6xf32>
  return %logits : tensor<?x?x6xf32>
}
// -----

// A near miss of the RMSNorm (Pow(x, 3)) is lowered generically: the power,
// the mean of each row, and the rest fused into one moe.elementwise.
// CHECK-LABEL: func.func @forward(
// CHECK: %[[X:.*]] = moe.embedding
// CHECK: %[[P:.*]] = moe.elementwise %[[X]] : tensor<?x8xf32> -> tensor<?x8xf32> {
// CHECK: math.powf
// CHECK: %[[M:.*]] = moe.reduce_rows <mean> %[[P]] : tensor<?x8xf32> -> tensor<?x1xf32>
// CHECK: %[[W:.*]] = arith.constant dense<1.500000e+00> : tensor<8xf32>
// CHECK: moe.elementwise %[[M]], %[[X]], %[[W]] : tensor<?x1xf32>, tensor<?x8xf32>, tensor<8xf32> -> tensor<?x8xf32> {
// CHECK-NEXT: ^bb0(%[[A:.*]]: f32, %[[B:.*]]: f32, %[[C:.*]]: f32):
// CHECK: arith.addf %[[A]]
// CHECK: math.sqrt
// CHECK: arith.divf
// CHECK: arith.mulf %[[B]]
// CHECK: arith.mulf %[[C]]
// CHECK: moe.yield
// CHECK: moe.linear
// CHECK-NOT: onnx.
func.func @pow3(%ids: tensor<?x?xi64> {onnx.name = "input_ids"}) -> (tensor<?x?x6xf32> {onnx.name = "logits"}) {
  %table = "onnx.Constant"() <{value = dense<0.25> : tensor<6x8xf32>}> : () -> tensor<6x8xf32>
  %wnorm = "onnx.Constant"() <{value = dense<1.5> : tensor<8xf32>}> : () -> tensor<8xf32>
  %wh = "onnx.Constant"() <{value = dense<0.5> : tensor<8x6xf32>}> : () -> tensor<8x6xf32>
  %two = "onnx.Constant"() <{value = dense<2.000000e+00> : tensor<f32>}> : () -> tensor<f32>
  %eps = "onnx.Constant"() <{value = dense<9.99999974E-6> : tensor<f32>}> : () -> tensor<f32>
  %three = "onnx.Constant"() <{value = dense<3.000000e+00> : tensor<f32>}> : () -> tensor<f32>
  %am1 = "onnx.Constant"() <{value = dense<-1> : tensor<1xi64>}> : () -> tensor<1xi64>
  %none = onnx.NoValue
  %x = "onnx.Gather"(%table, %ids) <{axis = 0 : i64}> : (tensor<6x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
  %n0sq = "onnx.Pow"(%x, %three) : (tensor<?x?x8xf32>, tensor<f32>) -> tensor<?x?x8xf32>
  %n0ms = "onnx.ReduceMean"(%n0sq, %am1) <{keepdims = 1 : i64, noop_with_empty_axes = 0 : i64}> : (tensor<?x?x8xf32>, tensor<1xi64>) -> tensor<?x?x1xf32>
  %n0me = "onnx.Add"(%n0ms, %eps) : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %n0rt = "onnx.Sqrt"(%n0me) : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %n0rr = "onnx.Reciprocal"(%n0rt) : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %n0xn = "onnx.Mul"(%x, %n0rr) : (tensor<?x?x8xf32>, tensor<?x?x1xf32>) -> tensor<?x?x8xf32>
  %h = "onnx.Mul"(%wnorm, %n0xn) : (tensor<8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32> loc("norm_mul")
  %logits = "onnx.MatMul"(%h, %wh) : (tensor<?x?x8xf32>, tensor<8x6xf32>) -> tensor<?x?x6xf32>
  return %logits : tensor<?x?x6xf32>
}
// -----

// An RMSNorm whose epsilon is no constant is no moe.rms_norm: generic.
// CHECK-LABEL: func.func @forward(
// CHECK: %[[M:.*]] = moe.reduce_rows <mean>
// CHECK: %[[S:.*]] = arith.addf %[[M]], %[[M]] : tensor<?x1xf32>
// CHECK: moe.elementwise %[[S]], {{.*}} : tensor<?x1xf32>, tensor<?x8xf32>, tensor<8xf32> -> tensor<?x8xf32>
func.func @eps(%ids: tensor<?x?xi64> {onnx.name = "input_ids"}) -> (tensor<?x?x6xf32> {onnx.name = "logits"}) {
  %table = "onnx.Constant"() <{value = dense<0.25> : tensor<6x8xf32>}> : () -> tensor<6x8xf32>
  %wnorm = "onnx.Constant"() <{value = dense<1.5> : tensor<8xf32>}> : () -> tensor<8xf32>
  %wh = "onnx.Constant"() <{value = dense<0.5> : tensor<8x6xf32>}> : () -> tensor<8x6xf32>
  %two = "onnx.Constant"() <{value = dense<2.000000e+00> : tensor<f32>}> : () -> tensor<f32>
  %eps = "onnx.Constant"() <{value = dense<9.99999974E-6> : tensor<f32>}> : () -> tensor<f32>
  %am1 = "onnx.Constant"() <{value = dense<-1> : tensor<1xi64>}> : () -> tensor<1xi64>
  %none = onnx.NoValue
  %x = "onnx.Gather"(%table, %ids) <{axis = 0 : i64}> : (tensor<6x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
  %n0sq = "onnx.Pow"(%x, %two) : (tensor<?x?x8xf32>, tensor<f32>) -> tensor<?x?x8xf32>
  %n0ms = "onnx.ReduceMean"(%n0sq, %am1) <{keepdims = 1 : i64, noop_with_empty_axes = 0 : i64}> : (tensor<?x?x8xf32>, tensor<1xi64>) -> tensor<?x?x1xf32>
  %n0me = "onnx.Add"(%n0ms, %n0ms) : (tensor<?x?x1xf32>, tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %n0rt = "onnx.Sqrt"(%n0me) : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %n0rr = "onnx.Reciprocal"(%n0rt) : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %n0xn = "onnx.Mul"(%x, %n0rr) : (tensor<?x?x8xf32>, tensor<?x?x1xf32>) -> tensor<?x?x8xf32>
  %h = "onnx.Mul"(%wnorm, %n0xn) : (tensor<8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %logits = "onnx.MatMul"(%h, %wh) : (tensor<?x?x8xf32>, tensor<8x6xf32>) -> tensor<?x?x6xf32>
  return %logits : tensor<?x?x6xf32>
}
// -----

// An op no form holds (Tanh) is a moe.elementwise; the RMSNorm of it stays
// a moe.rms_norm.
// CHECK-LABEL: func.func @forward(
// CHECK: %[[X:.*]] = moe.embedding
// CHECK: %[[T:.*]] = moe.elementwise %[[X]] : tensor<?x8xf32> -> tensor<?x8xf32> {
// CHECK-NEXT: ^bb0(%[[A:.*]]: f32):
// CHECK-NEXT: %[[Y:.*]] = math.tanh %[[A]] : f32
// CHECK-NEXT: moe.yield %[[Y]] : f32
// CHECK: moe.rms_norm %[[T]]
func.func @tanh(%ids: tensor<?x?xi64> {onnx.name = "input_ids"}) -> (tensor<?x?x6xf32> {onnx.name = "logits"}) {
  %table = "onnx.Constant"() <{value = dense<0.25> : tensor<6x8xf32>}> : () -> tensor<6x8xf32>
  %wnorm = "onnx.Constant"() <{value = dense<1.5> : tensor<8xf32>}> : () -> tensor<8xf32>
  %wh = "onnx.Constant"() <{value = dense<0.5> : tensor<8x6xf32>}> : () -> tensor<8x6xf32>
  %two = "onnx.Constant"() <{value = dense<2.000000e+00> : tensor<f32>}> : () -> tensor<f32>
  %eps = "onnx.Constant"() <{value = dense<9.99999974E-6> : tensor<f32>}> : () -> tensor<f32>
  %am1 = "onnx.Constant"() <{value = dense<-1> : tensor<1xi64>}> : () -> tensor<1xi64>
  %none = onnx.NoValue
  %x = "onnx.Gather"(%table, %ids) <{axis = 0 : i64}> : (tensor<6x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
  %xt = "onnx.Tanh"(%x) : (tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %n0sq = "onnx.Pow"(%xt, %two) : (tensor<?x?x8xf32>, tensor<f32>) -> tensor<?x?x8xf32>
  %n0ms = "onnx.ReduceMean"(%n0sq, %am1) <{keepdims = 1 : i64, noop_with_empty_axes = 0 : i64}> : (tensor<?x?x8xf32>, tensor<1xi64>) -> tensor<?x?x1xf32>
  %n0me = "onnx.Add"(%n0ms, %eps) : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %n0rt = "onnx.Sqrt"(%n0me) : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %n0rr = "onnx.Reciprocal"(%n0rt) : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %n0xn = "onnx.Mul"(%xt, %n0rr) : (tensor<?x?x8xf32>, tensor<?x?x1xf32>) -> tensor<?x?x8xf32>
  %h = "onnx.Mul"(%wnorm, %n0xn) : (tensor<8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %logits = "onnx.MatMul"(%h, %wh) : (tensor<?x?x8xf32>, tensor<8x6xf32>) -> tensor<?x?x6xf32>
  return %logits : tensor<?x?x6xf32>
}
// -----

// What mixes tokens stays an error at its node: a mean over the token axis.
func.func @tokenmean(%ids: tensor<?x?xi64> {onnx.name = "input_ids"}) -> (tensor<?x?x6xf32> {onnx.name = "logits"}) {
  %table = "onnx.Constant"() <{value = dense<0.25> : tensor<6x8xf32>}> : () -> tensor<6x8xf32>
  %wh = "onnx.Constant"() <{value = dense<0.5> : tensor<8x6xf32>}> : () -> tensor<8x6xf32>
  %a1 = "onnx.Constant"() <{value = dense<1> : tensor<1xi64>}> : () -> tensor<1xi64>
  %x = "onnx.Gather"(%table, %ids) <{axis = 0 : i64}> : (tensor<6x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
  // expected-error@unknown {{node 'token_mean' (ReduceMean) cannot be raised to the step program: no form of the step program computes it (embeddings, RMSNorms, projections, gated MLPs, MoE blocks, rotary embeddings, attention, residual sums and their views); nor lowered generically: a reduction over another axis than the last with keepdims = 1 (only each token's row reduces on its own)}}
  %m = "onnx.ReduceMean"(%x, %a1) <{keepdims = 1 : i64, noop_with_empty_axes = 0 : i64}> : (tensor<?x?x8xf32>, tensor<1xi64>) -> tensor<?x1x8xf32> loc("token_mean")
  %d = "onnx.Sub"(%x, %m) : (tensor<?x?x8xf32>, tensor<?x1x8xf32>) -> tensor<?x?x8xf32>
  %logits = "onnx.MatMul"(%d, %wh) : (tensor<?x?x8xf32>, tensor<8x6xf32>) -> tensor<?x?x6xf32>
  return %logits : tensor<?x?x6xf32>
}
// -----

// Only a projection's output columns can be split (by splitting its weight).
func.func @split(%ids: tensor<?x?xi64> {onnx.name = "input_ids"}) -> (tensor<?x?x6xf32> {onnx.name = "logits"}) {
  %table = "onnx.Constant"() <{value = dense<0.25> : tensor<6x8xf32>}> : () -> tensor<6x8xf32>
  %wnorm = "onnx.Constant"() <{value = dense<1.5> : tensor<8xf32>}> : () -> tensor<8xf32>
  %wh = "onnx.Constant"() <{value = dense<0.5> : tensor<8x6xf32>}> : () -> tensor<8x6xf32>
  %two = "onnx.Constant"() <{value = dense<2.000000e+00> : tensor<f32>}> : () -> tensor<f32>
  %eps = "onnx.Constant"() <{value = dense<9.99999974E-6> : tensor<f32>}> : () -> tensor<f32>
  %am1 = "onnx.Constant"() <{value = dense<-1> : tensor<1xi64>}> : () -> tensor<1xi64>
  %none = onnx.NoValue
  %x = "onnx.Gather"(%table, %ids) <{axis = 0 : i64}> : (tensor<6x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
  %wp = "onnx.Constant"() <{value = dense<0.5> : tensor<4x8xf32>}> : () -> tensor<4x8xf32>
  // expected-error @+1 {{a Split of a value that is not a projection by a constant}}
  %sp:2 = "onnx.Split"(%x, %none) <{axis = 2 : i64, num_outputs = 2 : i64}> : (tensor<?x?x8xf32>, none) -> (tensor<?x?x4xf32>, tensor<?x?x4xf32>)
  %xp = "onnx.MatMul"(%sp#1, %wp) : (tensor<?x?x4xf32>, tensor<4x8xf32>) -> tensor<?x?x8xf32>
  %n0sq = "onnx.Pow"(%xp, %two) : (tensor<?x?x8xf32>, tensor<f32>) -> tensor<?x?x8xf32>
  %n0ms = "onnx.ReduceMean"(%n0sq, %am1) <{keepdims = 1 : i64, noop_with_empty_axes = 0 : i64}> : (tensor<?x?x8xf32>, tensor<1xi64>) -> tensor<?x?x1xf32>
  %n0me = "onnx.Add"(%n0ms, %eps) : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %n0rt = "onnx.Sqrt"(%n0me) : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %n0rr = "onnx.Reciprocal"(%n0rt) : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %n0xn = "onnx.Mul"(%xp, %n0rr) : (tensor<?x?x8xf32>, tensor<?x?x1xf32>) -> tensor<?x?x8xf32>
  %h = "onnx.Mul"(%wnorm, %n0xn) : (tensor<8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %logits = "onnx.MatMul"(%h, %wh) : (tensor<?x?x8xf32>, tensor<8x6xf32>) -> tensor<?x?x6xf32>
  return %logits : tensor<?x?x6xf32>
}
// -----

// Projection weights are constants.
func.func @computed_weight(%ids: tensor<?x?xi64> {onnx.name = "input_ids"}) -> (tensor<?x?x6xf32> {onnx.name = "logits"}) {
  %table = "onnx.Constant"() <{value = dense<0.25> : tensor<6x8xf32>}> : () -> tensor<6x8xf32>
  %wnorm = "onnx.Constant"() <{value = dense<1.5> : tensor<8xf32>}> : () -> tensor<8xf32>
  %wh = "onnx.Constant"() <{value = dense<0.5> : tensor<8x6xf32>}> : () -> tensor<8x6xf32>
  %two = "onnx.Constant"() <{value = dense<2.000000e+00> : tensor<f32>}> : () -> tensor<f32>
  %eps = "onnx.Constant"() <{value = dense<9.99999974E-6> : tensor<f32>}> : () -> tensor<f32>
  %am1 = "onnx.Constant"() <{value = dense<-1> : tensor<1xi64>}> : () -> tensor<1xi64>
  %none = onnx.NoValue
  %x = "onnx.Gather"(%table, %ids) <{axis = 0 : i64}> : (tensor<6x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
  %n0sq = "onnx.Pow"(%x, %two) : (tensor<?x?x8xf32>, tensor<f32>) -> tensor<?x?x8xf32>
  %n0ms = "onnx.ReduceMean"(%n0sq, %am1) <{keepdims = 1 : i64, noop_with_empty_axes = 0 : i64}> : (tensor<?x?x8xf32>, tensor<1xi64>) -> tensor<?x?x1xf32>
  %n0me = "onnx.Add"(%n0ms, %eps) : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %n0rt = "onnx.Sqrt"(%n0me) : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %n0rr = "onnx.Reciprocal"(%n0rt) : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %n0xn = "onnx.Mul"(%x, %n0rr) : (tensor<?x?x8xf32>, tensor<?x?x1xf32>) -> tensor<?x?x8xf32>
  %h = "onnx.Mul"(%wnorm, %n0xn) : (tensor<8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %wh2 = "onnx.Add"(%wh, %wh) : (tensor<8x6xf32>, tensor<8x6xf32>) -> tensor<8x6xf32>
  // expected-error @+1 {{a MatMul by a [in, out] weight that is not a constant}}
  %logits = "onnx.MatMul"(%h, %wh2) : (tensor<?x?x8xf32>, tensor<8x6xf32>) -> tensor<?x?x6xf32>
  return %logits : tensor<?x?x6xf32>
}
// -----

// A mask term of another kind (here kv >= q).
func.func @bidirectional(%ids: tensor<?x?xi64> {onnx.name = "input_ids"}) -> (tensor<?x?x6xf32> {onnx.name = "logits"}) {
  %table = "onnx.Constant"() <{value = dense<[[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8], [0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1], [1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0], [0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5], [0.1, 0.1, 0.2, 0.2, 0.3, 0.3, 0.4, 0.4], [0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0]]> : tensor<6x8xf32>}> : () -> tensor<6x8xf32>
  %wnorm = "onnx.Constant"() <{value = dense<[1.0, 1.1, 1.2, 1.3, 0.9, 0.8, 0.7, 0.6]> : tensor<8xf32>}> : () -> tensor<8xf32>
  %wfinal = "onnx.Constant"() <{value = dense<1.5> : tensor<8xf32>}> : () -> tensor<8xf32>
  %wq = "onnx.Constant"() <{value = dense<0.1> : tensor<8x8xf32>}> : () -> tensor<8x8xf32>
  %wk = "onnx.Constant"() <{value = dense<0.2> : tensor<8x4xf32>}> : () -> tensor<8x4xf32>
  %wv = "onnx.Constant"() <{value = dense<0.3> : tensor<8x4xf32>}> : () -> tensor<8x4xf32>
  %wo = "onnx.Constant"() <{value = dense<0.4> : tensor<8x8xf32>}> : () -> tensor<8x8xf32>
  %wh = "onnx.Constant"() <{value = dense<0.5> : tensor<8x6xf32>}> : () -> tensor<8x6xf32>
  %inv = "onnx.Constant"() <{value = dense<[[[1.000000e+00], [1.000000e-02]]]> : tensor<1x2x1xf32>}> : () -> tensor<1x2x1xf32>
  %scale = "onnx.Constant"() <{value = dense<5.000000e-01> : tensor<f32>}> : () -> tensor<f32>
  %two = "onnx.Constant"() <{value = dense<2.000000e+00> : tensor<f32>}> : () -> tensor<f32>
  %eps = "onnx.Constant"() <{value = dense<9.99999974E-6> : tensor<f32>}> : () -> tensor<f32>
  %zero = "onnx.Constant"() <{value = dense<0.000000e+00> : tensor<f32>}> : () -> tensor<f32>
  %min = "onnx.Constant"() <{value = dense<-3.40282347E+38> : tensor<f32>}> : () -> tensor<f32>
  %i0 = "onnx.Constant"() <{value = dense<0> : tensor<i64>}> : () -> tensor<i64>
  %i1 = "onnx.Constant"() <{value = dense<1> : tensor<i64>}> : () -> tensor<i64>
  %a0 = "onnx.Constant"() <{value = dense<0> : tensor<1xi64>}> : () -> tensor<1xi64>
  %a1 = "onnx.Constant"() <{value = dense<1> : tensor<1xi64>}> : () -> tensor<1xi64>
  %a2 = "onnx.Constant"() <{value = dense<2> : tensor<1xi64>}> : () -> tensor<1xi64>
  %a3 = "onnx.Constant"() <{value = dense<3> : tensor<1xi64>}> : () -> tensor<1xi64>
  %a4 = "onnx.Constant"() <{value = dense<4> : tensor<1xi64>}> : () -> tensor<1xi64>
  %am1 = "onnx.Constant"() <{value = dense<-1> : tensor<1xi64>}> : () -> tensor<1xi64>
  %a01 = "onnx.Constant"() <{value = dense<[0, 1]> : tensor<2xi64>}> : () -> tensor<2xi64>
  %end = "onnx.Constant"() <{value = dense<9223372036854775807> : tensor<1xi64>}> : () -> tensor<1xi64>
  %none = onnx.NoValue
  %b = "onnx.Shape"(%ids) <{end = 1 : i64, start = 0 : i64}> : (tensor<?x?xi64>) -> tensor<1xi64>
  %t = "onnx.Shape"(%ids) <{end = 2 : i64, start = 1 : i64}> : (tensor<?x?xi64>) -> tensor<1xi64>
  %ts = "onnx.Squeeze"(%t, %none) : (tensor<1xi64>, none) -> tensor<i64>
  %pos = "onnx.Range"(%i0, %ts, %i1) : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  %pos3 = "onnx.Unsqueeze"(%pos, %a01) : (tensor<?xi64>, tensor<2xi64>) -> tensor<1x1x?xi64>
  %btc = "onnx.Concat"(%b, %t, %am1) <{axis = 0 : i64}> : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<3xi64>
  %bthd = "onnx.Concat"(%b, %t, %am1, %a4) <{axis = 0 : i64}> : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<4xi64>
  %posf = "onnx.Cast"(%pos3) <{to = 1 : i64}> : (tensor<1x1x?xi64>) -> tensor<1x1x?xf32>
  %fr = "onnx.MatMul"(%inv, %posf) : (tensor<1x2x1xf32>, tensor<1x1x?xf32>) -> tensor<1x2x?xf32>
  %f = "onnx.Transpose"(%fr) <{perm = array<i64: 0, 2, 1>}> : (tensor<1x2x?xf32>) -> tensor<1x?x2xf32>
  %emb = "onnx.Concat"(%f, %f) <{axis = -1 : i64}> : (tensor<1x?x2xf32>, tensor<1x?x2xf32>) -> tensor<1x?x4xf32>
  %cos0 = "onnx.Cos"(%emb) : (tensor<1x?x4xf32>) -> tensor<1x?x4xf32>
  %sin0 = "onnx.Sin"(%emb) : (tensor<1x?x4xf32>) -> tensor<1x?x4xf32>
  %cos4 = "onnx.Unsqueeze"(%cos0, %a1) : (tensor<1x?x4xf32>, tensor<1xi64>) -> tensor<1x1x?x4xf32>
  %sin4 = "onnx.Unsqueeze"(%sin0, %a1) : (tensor<1x?x4xf32>, tensor<1xi64>) -> tensor<1x1x?x4xf32>
  %kv = "onnx.Unsqueeze"(%pos3, %a2) : (tensor<1x1x?xi64>, tensor<1xi64>) -> tensor<1x1x1x?xi64>
  %qi = "onnx.Unsqueeze"(%pos3, %a3) : (tensor<1x1x?xi64>, tensor<1xi64>) -> tensor<1x1x?x1xi64>
  %cond0 = "onnx.GreaterOrEqual"(%kv, %qi) : (tensor<1x1x1x?xi64>, tensor<1x1x?x1xi64>) -> tensor<1x1x?x?xi1>
  %mask = "onnx.Where"(%cond0, %zero, %min) : (tensor<1x1x?x?xi1>, tensor<f32>, tensor<f32>) -> tensor<1x1x?x?xf32>
  %x = "onnx.Gather"(%table, %ids) <{axis = 0 : i64}> : (tensor<6x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
  %n0sq = "onnx.Pow"(%x, %two) : (tensor<?x?x8xf32>, tensor<f32>) -> tensor<?x?x8xf32>
  %n0ms = "onnx.ReduceMean"(%n0sq, %am1) <{keepdims = 1 : i64, noop_with_empty_axes = 0 : i64}> : (tensor<?x?x8xf32>, tensor<1xi64>) -> tensor<?x?x1xf32>
  %n0me = "onnx.Add"(%n0ms, %eps) : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %n0rt = "onnx.Sqrt"(%n0me) : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %n0rr = "onnx.Reciprocal"(%n0rt) : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %n0xn = "onnx.Mul"(%x, %n0rr) : (tensor<?x?x8xf32>, tensor<?x?x1xf32>) -> tensor<?x?x8xf32>
  %h = "onnx.Mul"(%wnorm, %n0xn) : (tensor<8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %q0 = "onnx.MatMul"(%h, %wq) : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %q1 = "onnx.Reshape"(%q0, %bthd) <{allowzero = 1 : i64}> : (tensor<?x?x8xf32>, tensor<4xi64>) -> tensor<?x?x2x4xf32>
  %q = "onnx.Transpose"(%q1) <{perm = array<i64: 0, 2, 1, 3>}> : (tensor<?x?x2x4xf32>) -> tensor<?x2x?x4xf32>
  %k0 = "onnx.MatMul"(%h, %wk) : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  %k1 = "onnx.Reshape"(%k0, %bthd) <{allowzero = 1 : i64}> : (tensor<?x?x4xf32>, tensor<4xi64>) -> tensor<?x?x1x4xf32>
  %k = "onnx.Transpose"(%k1) <{perm = array<i64: 0, 2, 1, 3>}> : (tensor<?x?x1x4xf32>) -> tensor<?x1x?x4xf32>
  %v0 = "onnx.MatMul"(%h, %wv) : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  %v1 = "onnx.Reshape"(%v0, %bthd) <{allowzero = 1 : i64}> : (tensor<?x?x4xf32>, tensor<4xi64>) -> tensor<?x?x1x4xf32>
  %v = "onnx.Transpose"(%v1) <{perm = array<i64: 0, 2, 1, 3>}> : (tensor<?x?x1x4xf32>) -> tensor<?x1x?x4xf32>
  %qrlo = "onnx.Slice"(%q, %a0, %a2, %a3, %a1) : (tensor<?x2x?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x2x?x2xf32>
  %qrhi = "onnx.Slice"(%q, %a2, %end, %a3, %a1) : (tensor<?x2x?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x2x?x2xf32>
  %qrng = "onnx.Neg"(%qrhi) : (tensor<?x2x?x2xf32>) -> tensor<?x2x?x2xf32>
  %qrrh = "onnx.Concat"(%qrng, %qrlo) <{axis = -1 : i64}> : (tensor<?x2x?x2xf32>, tensor<?x2x?x2xf32>) -> tensor<?x2x?x4xf32>
  %qrc = "onnx.Mul"(%q, %cos4) : (tensor<?x2x?x4xf32>, tensor<1x1x?x4xf32>) -> tensor<?x2x?x4xf32>
  %qrs = "onnx.Mul"(%qrrh, %sin4) : (tensor<?x2x?x4xf32>, tensor<1x1x?x4xf32>) -> tensor<?x2x?x4xf32>
  %qr = "onnx.Add"(%qrc, %qrs) : (tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
  %krlo = "onnx.Slice"(%k, %a0, %a2, %a3, %a1) : (tensor<?x1x?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x1x?x2xf32>
  %krhi = "onnx.Slice"(%k, %a2, %end, %a3, %a1) : (tensor<?x1x?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x1x?x2xf32>
  %krng = "onnx.Neg"(%krhi) : (tensor<?x1x?x2xf32>) -> tensor<?x1x?x2xf32>
  %krrh = "onnx.Concat"(%krng, %krlo) <{axis = -1 : i64}> : (tensor<?x1x?x2xf32>, tensor<?x1x?x2xf32>) -> tensor<?x1x?x4xf32>
  %krc = "onnx.Mul"(%k, %cos4) : (tensor<?x1x?x4xf32>, tensor<1x1x?x4xf32>) -> tensor<?x1x?x4xf32>
  %krs = "onnx.Mul"(%krrh, %sin4) : (tensor<?x1x?x4xf32>, tensor<1x1x?x4xf32>) -> tensor<?x1x?x4xf32>
  %kr = "onnx.Add"(%krc, %krs) : (tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x1x?x4xf32>
  %rep5 = "onnx.Concat"(%b, %a1, %a2, %t, %a4) <{axis = 0 : i64}> : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<5xi64>
  %rep4 = "onnx.Concat"(%b, %a2, %t, %a4) <{axis = 0 : i64}> : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<4xi64>
  %kxu = "onnx.Unsqueeze"(%kr, %a2) : (tensor<?x1x?x4xf32>, tensor<1xi64>) -> tensor<?x1x1x?x4xf32>
  %kxe = "onnx.Expand"(%kxu, %rep5) : (tensor<?x1x1x?x4xf32>, tensor<5xi64>) -> tensor<?x1x2x?x4xf32>
  %kx = "onnx.Reshape"(%kxe, %rep4) <{allowzero = 1 : i64}> : (tensor<?x1x2x?x4xf32>, tensor<4xi64>) -> tensor<?x2x?x4xf32>
  %vxu = "onnx.Unsqueeze"(%v, %a2) : (tensor<?x1x?x4xf32>, tensor<1xi64>) -> tensor<?x1x1x?x4xf32>
  %vxe = "onnx.Expand"(%vxu, %rep5) : (tensor<?x1x1x?x4xf32>, tensor<5xi64>) -> tensor<?x1x2x?x4xf32>
  %vx = "onnx.Reshape"(%vxe, %rep4) <{allowzero = 1 : i64}> : (tensor<?x1x2x?x4xf32>, tensor<4xi64>) -> tensor<?x2x?x4xf32>
  %kt = "onnx.Transpose"(%kx) <{perm = array<i64: 0, 1, 3, 2>}> : (tensor<?x2x?x4xf32>) -> tensor<?x2x4x?xf32>
  %s0 = "onnx.MatMul"(%qr, %kt) : (tensor<?x2x?x4xf32>, tensor<?x2x4x?xf32>) -> tensor<?x2x?x?xf32>
  %s1 = "onnx.Mul"(%s0, %scale) : (tensor<?x2x?x?xf32>, tensor<f32>) -> tensor<?x2x?x?xf32>
  %s2 = "onnx.Add"(%s1, %mask) : (tensor<?x2x?x?xf32>, tensor<1x1x?x?xf32>) -> tensor<?x2x?x?xf32>
  %p = "onnx.Softmax"(%s2) <{axis = -1 : i64}> : (tensor<?x2x?x?xf32>) -> tensor<?x2x?x?xf32>
  // expected-error @+1 {{a mask term other than causal (kv <= q), a sliding window (kv > q - W), the packed-sequence test or true}}
  %o0 = "onnx.MatMul"(%p, %vx) : (tensor<?x2x?x?xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
  %o1 = "onnx.Transpose"(%o0) <{perm = array<i64: 0, 2, 1, 3>}> : (tensor<?x2x?x4xf32>) -> tensor<?x?x2x4xf32>
  %attn = "onnx.Reshape"(%o1, %btc) <{allowzero = 1 : i64}> : (tensor<?x?x2x4xf32>, tensor<3xi64>) -> tensor<?x?x8xf32>
  %ao = "onnx.MatMul"(%attn, %wo) : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %r = "onnx.Add"(%x, %ao) : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %n1sq = "onnx.Pow"(%r, %two) : (tensor<?x?x8xf32>, tensor<f32>) -> tensor<?x?x8xf32>
  %n1ms = "onnx.ReduceMean"(%n1sq, %am1) <{keepdims = 1 : i64, noop_with_empty_axes = 0 : i64}> : (tensor<?x?x8xf32>, tensor<1xi64>) -> tensor<?x?x1xf32>
  %n1me = "onnx.Add"(%n1ms, %eps) : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %n1rt = "onnx.Sqrt"(%n1me) : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %n1rr = "onnx.Reciprocal"(%n1rt) : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %n1xn = "onnx.Mul"(%r, %n1rr) : (tensor<?x?x8xf32>, tensor<?x?x1xf32>) -> tensor<?x?x8xf32>
  %fin = "onnx.Mul"(%wfinal, %n1xn) : (tensor<8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %logits = "onnx.MatMul"(%fin, %wh) : (tensor<?x?x8xf32>, tensor<8x6xf32>) -> tensor<?x?x6xf32>
  return %logits : tensor<?x?x6xf32>
}
// -----

// Attention without the causal term: moe.attention is causal.
func.func @nocausal(%ids: tensor<?x?xi64> {onnx.name = "input_ids"}) -> (tensor<?x?x6xf32> {onnx.name = "logits"}) {
  %table = "onnx.Constant"() <{value = dense<[[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8], [0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1], [1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0], [0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5], [0.1, 0.1, 0.2, 0.2, 0.3, 0.3, 0.4, 0.4], [0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0]]> : tensor<6x8xf32>}> : () -> tensor<6x8xf32>
  %wnorm = "onnx.Constant"() <{value = dense<[1.0, 1.1, 1.2, 1.3, 0.9, 0.8, 0.7, 0.6]> : tensor<8xf32>}> : () -> tensor<8xf32>
  %wfinal = "onnx.Constant"() <{value = dense<1.5> : tensor<8xf32>}> : () -> tensor<8xf32>
  %wq = "onnx.Constant"() <{value = dense<0.1> : tensor<8x8xf32>}> : () -> tensor<8x8xf32>
  %wk = "onnx.Constant"() <{value = dense<0.2> : tensor<8x4xf32>}> : () -> tensor<8x4xf32>
  %wv = "onnx.Constant"() <{value = dense<0.3> : tensor<8x4xf32>}> : () -> tensor<8x4xf32>
  %wo = "onnx.Constant"() <{value = dense<0.4> : tensor<8x8xf32>}> : () -> tensor<8x8xf32>
  %wh = "onnx.Constant"() <{value = dense<0.5> : tensor<8x6xf32>}> : () -> tensor<8x6xf32>
  %inv = "onnx.Constant"() <{value = dense<[[[1.000000e+00], [1.000000e-02]]]> : tensor<1x2x1xf32>}> : () -> tensor<1x2x1xf32>
  %scale = "onnx.Constant"() <{value = dense<5.000000e-01> : tensor<f32>}> : () -> tensor<f32>
  %two = "onnx.Constant"() <{value = dense<2.000000e+00> : tensor<f32>}> : () -> tensor<f32>
  %eps = "onnx.Constant"() <{value = dense<9.99999974E-6> : tensor<f32>}> : () -> tensor<f32>
  %zero = "onnx.Constant"() <{value = dense<0.000000e+00> : tensor<f32>}> : () -> tensor<f32>
  %min = "onnx.Constant"() <{value = dense<-3.40282347E+38> : tensor<f32>}> : () -> tensor<f32>
  %i0 = "onnx.Constant"() <{value = dense<0> : tensor<i64>}> : () -> tensor<i64>
  %i1 = "onnx.Constant"() <{value = dense<1> : tensor<i64>}> : () -> tensor<i64>
  %a0 = "onnx.Constant"() <{value = dense<0> : tensor<1xi64>}> : () -> tensor<1xi64>
  %a1 = "onnx.Constant"() <{value = dense<1> : tensor<1xi64>}> : () -> tensor<1xi64>
  %a2 = "onnx.Constant"() <{value = dense<2> : tensor<1xi64>}> : () -> tensor<1xi64>
  %a3 = "onnx.Constant"() <{value = dense<3> : tensor<1xi64>}> : () -> tensor<1xi64>
  %a4 = "onnx.Constant"() <{value = dense<4> : tensor<1xi64>}> : () -> tensor<1xi64>
  %am1 = "onnx.Constant"() <{value = dense<-1> : tensor<1xi64>}> : () -> tensor<1xi64>
  %a01 = "onnx.Constant"() <{value = dense<[0, 1]> : tensor<2xi64>}> : () -> tensor<2xi64>
  %end = "onnx.Constant"() <{value = dense<9223372036854775807> : tensor<1xi64>}> : () -> tensor<1xi64>
  %none = onnx.NoValue
  %b = "onnx.Shape"(%ids) <{end = 1 : i64, start = 0 : i64}> : (tensor<?x?xi64>) -> tensor<1xi64>
  %t = "onnx.Shape"(%ids) <{end = 2 : i64, start = 1 : i64}> : (tensor<?x?xi64>) -> tensor<1xi64>
  %ts = "onnx.Squeeze"(%t, %none) : (tensor<1xi64>, none) -> tensor<i64>
  %pos = "onnx.Range"(%i0, %ts, %i1) : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  %pos3 = "onnx.Unsqueeze"(%pos, %a01) : (tensor<?xi64>, tensor<2xi64>) -> tensor<1x1x?xi64>
  %btc = "onnx.Concat"(%b, %t, %am1) <{axis = 0 : i64}> : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<3xi64>
  %bthd = "onnx.Concat"(%b, %t, %am1, %a4) <{axis = 0 : i64}> : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<4xi64>
  %posf = "onnx.Cast"(%pos3) <{to = 1 : i64}> : (tensor<1x1x?xi64>) -> tensor<1x1x?xf32>
  %fr = "onnx.MatMul"(%inv, %posf) : (tensor<1x2x1xf32>, tensor<1x1x?xf32>) -> tensor<1x2x?xf32>
  %f = "onnx.Transpose"(%fr) <{perm = array<i64: 0, 2, 1>}> : (tensor<1x2x?xf32>) -> tensor<1x?x2xf32>
  %emb = "onnx.Concat"(%f, %f) <{axis = -1 : i64}> : (tensor<1x?x2xf32>, tensor<1x?x2xf32>) -> tensor<1x?x4xf32>
  %cos0 = "onnx.Cos"(%emb) : (tensor<1x?x4xf32>) -> tensor<1x?x4xf32>
  %sin0 = "onnx.Sin"(%emb) : (tensor<1x?x4xf32>) -> tensor<1x?x4xf32>
  %cos4 = "onnx.Unsqueeze"(%cos0, %a1) : (tensor<1x?x4xf32>, tensor<1xi64>) -> tensor<1x1x?x4xf32>
  %sin4 = "onnx.Unsqueeze"(%sin0, %a1) : (tensor<1x?x4xf32>, tensor<1xi64>) -> tensor<1x1x?x4xf32>
  %kv = "onnx.Unsqueeze"(%pos3, %a2) : (tensor<1x1x?xi64>, tensor<1xi64>) -> tensor<1x1x1x?xi64>
  %qi = "onnx.Unsqueeze"(%pos3, %a3) : (tensor<1x1x?xi64>, tensor<1xi64>) -> tensor<1x1x?x1xi64>
  %cond0 = "onnx.LessOrEqual"(%kv, %qi) : (tensor<1x1x1x?xi64>, tensor<1x1x?x1xi64>) -> tensor<1x1x?x?xi1>
  %true = "onnx.Constant"() <{value = dense<true> : tensor<i1>}> : () -> tensor<i1>
  %mask = "onnx.Where"(%true, %zero, %min) : (tensor<i1>, tensor<f32>, tensor<f32>) -> tensor<1x1x?x?xf32>
  %x = "onnx.Gather"(%table, %ids) <{axis = 0 : i64}> : (tensor<6x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
  %n0sq = "onnx.Pow"(%x, %two) : (tensor<?x?x8xf32>, tensor<f32>) -> tensor<?x?x8xf32>
  %n0ms = "onnx.ReduceMean"(%n0sq, %am1) <{keepdims = 1 : i64, noop_with_empty_axes = 0 : i64}> : (tensor<?x?x8xf32>, tensor<1xi64>) -> tensor<?x?x1xf32>
  %n0me = "onnx.Add"(%n0ms, %eps) : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %n0rt = "onnx.Sqrt"(%n0me) : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %n0rr = "onnx.Reciprocal"(%n0rt) : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %n0xn = "onnx.Mul"(%x, %n0rr) : (tensor<?x?x8xf32>, tensor<?x?x1xf32>) -> tensor<?x?x8xf32>
  %h = "onnx.Mul"(%wnorm, %n0xn) : (tensor<8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %q0 = "onnx.MatMul"(%h, %wq) : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %q1 = "onnx.Reshape"(%q0, %bthd) <{allowzero = 1 : i64}> : (tensor<?x?x8xf32>, tensor<4xi64>) -> tensor<?x?x2x4xf32>
  %q = "onnx.Transpose"(%q1) <{perm = array<i64: 0, 2, 1, 3>}> : (tensor<?x?x2x4xf32>) -> tensor<?x2x?x4xf32>
  %k0 = "onnx.MatMul"(%h, %wk) : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  %k1 = "onnx.Reshape"(%k0, %bthd) <{allowzero = 1 : i64}> : (tensor<?x?x4xf32>, tensor<4xi64>) -> tensor<?x?x1x4xf32>
  %k = "onnx.Transpose"(%k1) <{perm = array<i64: 0, 2, 1, 3>}> : (tensor<?x?x1x4xf32>) -> tensor<?x1x?x4xf32>
  %v0 = "onnx.MatMul"(%h, %wv) : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  %v1 = "onnx.Reshape"(%v0, %bthd) <{allowzero = 1 : i64}> : (tensor<?x?x4xf32>, tensor<4xi64>) -> tensor<?x?x1x4xf32>
  %v = "onnx.Transpose"(%v1) <{perm = array<i64: 0, 2, 1, 3>}> : (tensor<?x?x1x4xf32>) -> tensor<?x1x?x4xf32>
  %qrlo = "onnx.Slice"(%q, %a0, %a2, %a3, %a1) : (tensor<?x2x?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x2x?x2xf32>
  %qrhi = "onnx.Slice"(%q, %a2, %end, %a3, %a1) : (tensor<?x2x?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x2x?x2xf32>
  %qrng = "onnx.Neg"(%qrhi) : (tensor<?x2x?x2xf32>) -> tensor<?x2x?x2xf32>
  %qrrh = "onnx.Concat"(%qrng, %qrlo) <{axis = -1 : i64}> : (tensor<?x2x?x2xf32>, tensor<?x2x?x2xf32>) -> tensor<?x2x?x4xf32>
  %qrc = "onnx.Mul"(%q, %cos4) : (tensor<?x2x?x4xf32>, tensor<1x1x?x4xf32>) -> tensor<?x2x?x4xf32>
  %qrs = "onnx.Mul"(%qrrh, %sin4) : (tensor<?x2x?x4xf32>, tensor<1x1x?x4xf32>) -> tensor<?x2x?x4xf32>
  %qr = "onnx.Add"(%qrc, %qrs) : (tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
  %krlo = "onnx.Slice"(%k, %a0, %a2, %a3, %a1) : (tensor<?x1x?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x1x?x2xf32>
  %krhi = "onnx.Slice"(%k, %a2, %end, %a3, %a1) : (tensor<?x1x?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x1x?x2xf32>
  %krng = "onnx.Neg"(%krhi) : (tensor<?x1x?x2xf32>) -> tensor<?x1x?x2xf32>
  %krrh = "onnx.Concat"(%krng, %krlo) <{axis = -1 : i64}> : (tensor<?x1x?x2xf32>, tensor<?x1x?x2xf32>) -> tensor<?x1x?x4xf32>
  %krc = "onnx.Mul"(%k, %cos4) : (tensor<?x1x?x4xf32>, tensor<1x1x?x4xf32>) -> tensor<?x1x?x4xf32>
  %krs = "onnx.Mul"(%krrh, %sin4) : (tensor<?x1x?x4xf32>, tensor<1x1x?x4xf32>) -> tensor<?x1x?x4xf32>
  %kr = "onnx.Add"(%krc, %krs) : (tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x1x?x4xf32>
  %rep5 = "onnx.Concat"(%b, %a1, %a2, %t, %a4) <{axis = 0 : i64}> : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<5xi64>
  %rep4 = "onnx.Concat"(%b, %a2, %t, %a4) <{axis = 0 : i64}> : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<4xi64>
  %kxu = "onnx.Unsqueeze"(%kr, %a2) : (tensor<?x1x?x4xf32>, tensor<1xi64>) -> tensor<?x1x1x?x4xf32>
  %kxe = "onnx.Expand"(%kxu, %rep5) : (tensor<?x1x1x?x4xf32>, tensor<5xi64>) -> tensor<?x1x2x?x4xf32>
  %kx = "onnx.Reshape"(%kxe, %rep4) <{allowzero = 1 : i64}> : (tensor<?x1x2x?x4xf32>, tensor<4xi64>) -> tensor<?x2x?x4xf32>
  %vxu = "onnx.Unsqueeze"(%v, %a2) : (tensor<?x1x?x4xf32>, tensor<1xi64>) -> tensor<?x1x1x?x4xf32>
  %vxe = "onnx.Expand"(%vxu, %rep5) : (tensor<?x1x1x?x4xf32>, tensor<5xi64>) -> tensor<?x1x2x?x4xf32>
  %vx = "onnx.Reshape"(%vxe, %rep4) <{allowzero = 1 : i64}> : (tensor<?x1x2x?x4xf32>, tensor<4xi64>) -> tensor<?x2x?x4xf32>
  %kt = "onnx.Transpose"(%kx) <{perm = array<i64: 0, 1, 3, 2>}> : (tensor<?x2x?x4xf32>) -> tensor<?x2x4x?xf32>
  %s0 = "onnx.MatMul"(%qr, %kt) : (tensor<?x2x?x4xf32>, tensor<?x2x4x?xf32>) -> tensor<?x2x?x?xf32>
  %s1 = "onnx.Mul"(%s0, %scale) : (tensor<?x2x?x?xf32>, tensor<f32>) -> tensor<?x2x?x?xf32>
  %s2 = "onnx.Add"(%s1, %mask) : (tensor<?x2x?x?xf32>, tensor<1x1x?x?xf32>) -> tensor<?x2x?x?xf32>
  %p = "onnx.Softmax"(%s2) <{axis = -1 : i64}> : (tensor<?x2x?x?xf32>) -> tensor<?x2x?x?xf32>
  // expected-error @+1 {{the mask has no causal term (key position <= query position)}}
  %o0 = "onnx.MatMul"(%p, %vx) : (tensor<?x2x?x?xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
  %o1 = "onnx.Transpose"(%o0) <{perm = array<i64: 0, 2, 1, 3>}> : (tensor<?x2x?x4xf32>) -> tensor<?x?x2x4xf32>
  %attn = "onnx.Reshape"(%o1, %btc) <{allowzero = 1 : i64}> : (tensor<?x?x2x4xf32>, tensor<3xi64>) -> tensor<?x?x8xf32>
  %ao = "onnx.MatMul"(%attn, %wo) : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %r = "onnx.Add"(%x, %ao) : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %n1sq = "onnx.Pow"(%r, %two) : (tensor<?x?x8xf32>, tensor<f32>) -> tensor<?x?x8xf32>
  %n1ms = "onnx.ReduceMean"(%n1sq, %am1) <{keepdims = 1 : i64, noop_with_empty_axes = 0 : i64}> : (tensor<?x?x8xf32>, tensor<1xi64>) -> tensor<?x?x1xf32>
  %n1me = "onnx.Add"(%n1ms, %eps) : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %n1rt = "onnx.Sqrt"(%n1me) : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %n1rr = "onnx.Reciprocal"(%n1rt) : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %n1xn = "onnx.Mul"(%r, %n1rr) : (tensor<?x?x8xf32>, tensor<?x?x1xf32>) -> tensor<?x?x8xf32>
  %fin = "onnx.Mul"(%wfinal, %n1xn) : (tensor<8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %logits = "onnx.MatMul"(%fin, %wh) : (tensor<?x?x8xf32>, tensor<8x6xf32>) -> tensor<?x?x6xf32>
  return %logits : tensor<?x?x6xf32>
}
// -----

// The scale is a positive constant.
func.func @negative_scale(%ids: tensor<?x?xi64> {onnx.name = "input_ids"}) -> (tensor<?x?x6xf32> {onnx.name = "logits"}) {
  %table = "onnx.Constant"() <{value = dense<[[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8], [0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1], [1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0], [0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5], [0.1, 0.1, 0.2, 0.2, 0.3, 0.3, 0.4, 0.4], [0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0]]> : tensor<6x8xf32>}> : () -> tensor<6x8xf32>
  %wnorm = "onnx.Constant"() <{value = dense<[1.0, 1.1, 1.2, 1.3, 0.9, 0.8, 0.7, 0.6]> : tensor<8xf32>}> : () -> tensor<8xf32>
  %wfinal = "onnx.Constant"() <{value = dense<1.5> : tensor<8xf32>}> : () -> tensor<8xf32>
  %wq = "onnx.Constant"() <{value = dense<0.1> : tensor<8x8xf32>}> : () -> tensor<8x8xf32>
  %wk = "onnx.Constant"() <{value = dense<0.2> : tensor<8x4xf32>}> : () -> tensor<8x4xf32>
  %wv = "onnx.Constant"() <{value = dense<0.3> : tensor<8x4xf32>}> : () -> tensor<8x4xf32>
  %wo = "onnx.Constant"() <{value = dense<0.4> : tensor<8x8xf32>}> : () -> tensor<8x8xf32>
  %wh = "onnx.Constant"() <{value = dense<0.5> : tensor<8x6xf32>}> : () -> tensor<8x6xf32>
  %inv = "onnx.Constant"() <{value = dense<[[[1.000000e+00], [1.000000e-02]]]> : tensor<1x2x1xf32>}> : () -> tensor<1x2x1xf32>
  %scale = "onnx.Constant"() <{value = dense<-5.000000e-01> : tensor<f32>}> : () -> tensor<f32>
  %two = "onnx.Constant"() <{value = dense<2.000000e+00> : tensor<f32>}> : () -> tensor<f32>
  %eps = "onnx.Constant"() <{value = dense<9.99999974E-6> : tensor<f32>}> : () -> tensor<f32>
  %zero = "onnx.Constant"() <{value = dense<0.000000e+00> : tensor<f32>}> : () -> tensor<f32>
  %min = "onnx.Constant"() <{value = dense<-3.40282347E+38> : tensor<f32>}> : () -> tensor<f32>
  %i0 = "onnx.Constant"() <{value = dense<0> : tensor<i64>}> : () -> tensor<i64>
  %i1 = "onnx.Constant"() <{value = dense<1> : tensor<i64>}> : () -> tensor<i64>
  %a0 = "onnx.Constant"() <{value = dense<0> : tensor<1xi64>}> : () -> tensor<1xi64>
  %a1 = "onnx.Constant"() <{value = dense<1> : tensor<1xi64>}> : () -> tensor<1xi64>
  %a2 = "onnx.Constant"() <{value = dense<2> : tensor<1xi64>}> : () -> tensor<1xi64>
  %a3 = "onnx.Constant"() <{value = dense<3> : tensor<1xi64>}> : () -> tensor<1xi64>
  %a4 = "onnx.Constant"() <{value = dense<4> : tensor<1xi64>}> : () -> tensor<1xi64>
  %am1 = "onnx.Constant"() <{value = dense<-1> : tensor<1xi64>}> : () -> tensor<1xi64>
  %a01 = "onnx.Constant"() <{value = dense<[0, 1]> : tensor<2xi64>}> : () -> tensor<2xi64>
  %end = "onnx.Constant"() <{value = dense<9223372036854775807> : tensor<1xi64>}> : () -> tensor<1xi64>
  %none = onnx.NoValue
  %b = "onnx.Shape"(%ids) <{end = 1 : i64, start = 0 : i64}> : (tensor<?x?xi64>) -> tensor<1xi64>
  %t = "onnx.Shape"(%ids) <{end = 2 : i64, start = 1 : i64}> : (tensor<?x?xi64>) -> tensor<1xi64>
  %ts = "onnx.Squeeze"(%t, %none) : (tensor<1xi64>, none) -> tensor<i64>
  %pos = "onnx.Range"(%i0, %ts, %i1) : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  %pos3 = "onnx.Unsqueeze"(%pos, %a01) : (tensor<?xi64>, tensor<2xi64>) -> tensor<1x1x?xi64>
  %btc = "onnx.Concat"(%b, %t, %am1) <{axis = 0 : i64}> : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<3xi64>
  %bthd = "onnx.Concat"(%b, %t, %am1, %a4) <{axis = 0 : i64}> : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<4xi64>
  %posf = "onnx.Cast"(%pos3) <{to = 1 : i64}> : (tensor<1x1x?xi64>) -> tensor<1x1x?xf32>
  %fr = "onnx.MatMul"(%inv, %posf) : (tensor<1x2x1xf32>, tensor<1x1x?xf32>) -> tensor<1x2x?xf32>
  %f = "onnx.Transpose"(%fr) <{perm = array<i64: 0, 2, 1>}> : (tensor<1x2x?xf32>) -> tensor<1x?x2xf32>
  %emb = "onnx.Concat"(%f, %f) <{axis = -1 : i64}> : (tensor<1x?x2xf32>, tensor<1x?x2xf32>) -> tensor<1x?x4xf32>
  %cos0 = "onnx.Cos"(%emb) : (tensor<1x?x4xf32>) -> tensor<1x?x4xf32>
  %sin0 = "onnx.Sin"(%emb) : (tensor<1x?x4xf32>) -> tensor<1x?x4xf32>
  %cos4 = "onnx.Unsqueeze"(%cos0, %a1) : (tensor<1x?x4xf32>, tensor<1xi64>) -> tensor<1x1x?x4xf32>
  %sin4 = "onnx.Unsqueeze"(%sin0, %a1) : (tensor<1x?x4xf32>, tensor<1xi64>) -> tensor<1x1x?x4xf32>
  %kv = "onnx.Unsqueeze"(%pos3, %a2) : (tensor<1x1x?xi64>, tensor<1xi64>) -> tensor<1x1x1x?xi64>
  %qi = "onnx.Unsqueeze"(%pos3, %a3) : (tensor<1x1x?xi64>, tensor<1xi64>) -> tensor<1x1x?x1xi64>
  %cond0 = "onnx.LessOrEqual"(%kv, %qi) : (tensor<1x1x1x?xi64>, tensor<1x1x?x1xi64>) -> tensor<1x1x?x?xi1>
  %mask = "onnx.Where"(%cond0, %zero, %min) : (tensor<1x1x?x?xi1>, tensor<f32>, tensor<f32>) -> tensor<1x1x?x?xf32>
  %x = "onnx.Gather"(%table, %ids) <{axis = 0 : i64}> : (tensor<6x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
  %n0sq = "onnx.Pow"(%x, %two) : (tensor<?x?x8xf32>, tensor<f32>) -> tensor<?x?x8xf32>
  %n0ms = "onnx.ReduceMean"(%n0sq, %am1) <{keepdims = 1 : i64, noop_with_empty_axes = 0 : i64}> : (tensor<?x?x8xf32>, tensor<1xi64>) -> tensor<?x?x1xf32>
  %n0me = "onnx.Add"(%n0ms, %eps) : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %n0rt = "onnx.Sqrt"(%n0me) : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %n0rr = "onnx.Reciprocal"(%n0rt) : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %n0xn = "onnx.Mul"(%x, %n0rr) : (tensor<?x?x8xf32>, tensor<?x?x1xf32>) -> tensor<?x?x8xf32>
  %h = "onnx.Mul"(%wnorm, %n0xn) : (tensor<8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %q0 = "onnx.MatMul"(%h, %wq) : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %q1 = "onnx.Reshape"(%q0, %bthd) <{allowzero = 1 : i64}> : (tensor<?x?x8xf32>, tensor<4xi64>) -> tensor<?x?x2x4xf32>
  %q = "onnx.Transpose"(%q1) <{perm = array<i64: 0, 2, 1, 3>}> : (tensor<?x?x2x4xf32>) -> tensor<?x2x?x4xf32>
  %k0 = "onnx.MatMul"(%h, %wk) : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  %k1 = "onnx.Reshape"(%k0, %bthd) <{allowzero = 1 : i64}> : (tensor<?x?x4xf32>, tensor<4xi64>) -> tensor<?x?x1x4xf32>
  %k = "onnx.Transpose"(%k1) <{perm = array<i64: 0, 2, 1, 3>}> : (tensor<?x?x1x4xf32>) -> tensor<?x1x?x4xf32>
  %v0 = "onnx.MatMul"(%h, %wv) : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  %v1 = "onnx.Reshape"(%v0, %bthd) <{allowzero = 1 : i64}> : (tensor<?x?x4xf32>, tensor<4xi64>) -> tensor<?x?x1x4xf32>
  %v = "onnx.Transpose"(%v1) <{perm = array<i64: 0, 2, 1, 3>}> : (tensor<?x?x1x4xf32>) -> tensor<?x1x?x4xf32>
  %qrlo = "onnx.Slice"(%q, %a0, %a2, %a3, %a1) : (tensor<?x2x?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x2x?x2xf32>
  %qrhi = "onnx.Slice"(%q, %a2, %end, %a3, %a1) : (tensor<?x2x?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x2x?x2xf32>
  %qrng = "onnx.Neg"(%qrhi) : (tensor<?x2x?x2xf32>) -> tensor<?x2x?x2xf32>
  %qrrh = "onnx.Concat"(%qrng, %qrlo) <{axis = -1 : i64}> : (tensor<?x2x?x2xf32>, tensor<?x2x?x2xf32>) -> tensor<?x2x?x4xf32>
  %qrc = "onnx.Mul"(%q, %cos4) : (tensor<?x2x?x4xf32>, tensor<1x1x?x4xf32>) -> tensor<?x2x?x4xf32>
  %qrs = "onnx.Mul"(%qrrh, %sin4) : (tensor<?x2x?x4xf32>, tensor<1x1x?x4xf32>) -> tensor<?x2x?x4xf32>
  %qr = "onnx.Add"(%qrc, %qrs) : (tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
  %krlo = "onnx.Slice"(%k, %a0, %a2, %a3, %a1) : (tensor<?x1x?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x1x?x2xf32>
  %krhi = "onnx.Slice"(%k, %a2, %end, %a3, %a1) : (tensor<?x1x?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x1x?x2xf32>
  %krng = "onnx.Neg"(%krhi) : (tensor<?x1x?x2xf32>) -> tensor<?x1x?x2xf32>
  %krrh = "onnx.Concat"(%krng, %krlo) <{axis = -1 : i64}> : (tensor<?x1x?x2xf32>, tensor<?x1x?x2xf32>) -> tensor<?x1x?x4xf32>
  %krc = "onnx.Mul"(%k, %cos4) : (tensor<?x1x?x4xf32>, tensor<1x1x?x4xf32>) -> tensor<?x1x?x4xf32>
  %krs = "onnx.Mul"(%krrh, %sin4) : (tensor<?x1x?x4xf32>, tensor<1x1x?x4xf32>) -> tensor<?x1x?x4xf32>
  %kr = "onnx.Add"(%krc, %krs) : (tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x1x?x4xf32>
  %rep5 = "onnx.Concat"(%b, %a1, %a2, %t, %a4) <{axis = 0 : i64}> : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<5xi64>
  %rep4 = "onnx.Concat"(%b, %a2, %t, %a4) <{axis = 0 : i64}> : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<4xi64>
  %kxu = "onnx.Unsqueeze"(%kr, %a2) : (tensor<?x1x?x4xf32>, tensor<1xi64>) -> tensor<?x1x1x?x4xf32>
  %kxe = "onnx.Expand"(%kxu, %rep5) : (tensor<?x1x1x?x4xf32>, tensor<5xi64>) -> tensor<?x1x2x?x4xf32>
  %kx = "onnx.Reshape"(%kxe, %rep4) <{allowzero = 1 : i64}> : (tensor<?x1x2x?x4xf32>, tensor<4xi64>) -> tensor<?x2x?x4xf32>
  %vxu = "onnx.Unsqueeze"(%v, %a2) : (tensor<?x1x?x4xf32>, tensor<1xi64>) -> tensor<?x1x1x?x4xf32>
  %vxe = "onnx.Expand"(%vxu, %rep5) : (tensor<?x1x1x?x4xf32>, tensor<5xi64>) -> tensor<?x1x2x?x4xf32>
  %vx = "onnx.Reshape"(%vxe, %rep4) <{allowzero = 1 : i64}> : (tensor<?x1x2x?x4xf32>, tensor<4xi64>) -> tensor<?x2x?x4xf32>
  %kt = "onnx.Transpose"(%kx) <{perm = array<i64: 0, 1, 3, 2>}> : (tensor<?x2x?x4xf32>) -> tensor<?x2x4x?xf32>
  %s0 = "onnx.MatMul"(%qr, %kt) : (tensor<?x2x?x4xf32>, tensor<?x2x4x?xf32>) -> tensor<?x2x?x?xf32>
  %s1 = "onnx.Mul"(%s0, %scale) : (tensor<?x2x?x?xf32>, tensor<f32>) -> tensor<?x2x?x?xf32>
  %s2 = "onnx.Add"(%s1, %mask) : (tensor<?x2x?x?xf32>, tensor<1x1x?x?xf32>) -> tensor<?x2x?x?xf32>
  %p = "onnx.Softmax"(%s2) <{axis = -1 : i64}> : (tensor<?x2x?x?xf32>) -> tensor<?x2x?x?xf32>
  // expected-error @+1 {{attention scores that are not a positive constant times MatMul(Q, K}}
  %o0 = "onnx.MatMul"(%p, %vx) : (tensor<?x2x?x?xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
  %o1 = "onnx.Transpose"(%o0) <{perm = array<i64: 0, 2, 1, 3>}> : (tensor<?x2x?x4xf32>) -> tensor<?x?x2x4xf32>
  %attn = "onnx.Reshape"(%o1, %btc) <{allowzero = 1 : i64}> : (tensor<?x?x2x4xf32>, tensor<3xi64>) -> tensor<?x?x8xf32>
  %ao = "onnx.MatMul"(%attn, %wo) : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %r = "onnx.Add"(%x, %ao) : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %n1sq = "onnx.Pow"(%r, %two) : (tensor<?x?x8xf32>, tensor<f32>) -> tensor<?x?x8xf32>
  %n1ms = "onnx.ReduceMean"(%n1sq, %am1) <{keepdims = 1 : i64, noop_with_empty_axes = 0 : i64}> : (tensor<?x?x8xf32>, tensor<1xi64>) -> tensor<?x?x1xf32>
  %n1me = "onnx.Add"(%n1ms, %eps) : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %n1rt = "onnx.Sqrt"(%n1me) : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %n1rr = "onnx.Reciprocal"(%n1rt) : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %n1xn = "onnx.Mul"(%r, %n1rr) : (tensor<?x?x8xf32>, tensor<?x?x1xf32>) -> tensor<?x?x8xf32>
  %fin = "onnx.Mul"(%wfinal, %n1xn) : (tensor<8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %logits = "onnx.MatMul"(%fin, %wh) : (tensor<?x?x8xf32>, tensor<8x6xf32>) -> tensor<?x?x6xf32>
  return %logits : tensor<?x?x6xf32>
}
// -----

// Rotary angles of positions other than 0..T-1.
func.func @shifted_positions(%ids: tensor<?x?xi64> {onnx.name = "input_ids"}) -> (tensor<?x?x6xf32> {onnx.name = "logits"}) {
  %table = "onnx.Constant"() <{value = dense<[[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8], [0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1], [1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0], [0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5], [0.1, 0.1, 0.2, 0.2, 0.3, 0.3, 0.4, 0.4], [0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0]]> : tensor<6x8xf32>}> : () -> tensor<6x8xf32>
  %wnorm = "onnx.Constant"() <{value = dense<[1.0, 1.1, 1.2, 1.3, 0.9, 0.8, 0.7, 0.6]> : tensor<8xf32>}> : () -> tensor<8xf32>
  %wfinal = "onnx.Constant"() <{value = dense<1.5> : tensor<8xf32>}> : () -> tensor<8xf32>
  %wq = "onnx.Constant"() <{value = dense<0.1> : tensor<8x8xf32>}> : () -> tensor<8x8xf32>
  %wk = "onnx.Constant"() <{value = dense<0.2> : tensor<8x4xf32>}> : () -> tensor<8x4xf32>
  %wv = "onnx.Constant"() <{value = dense<0.3> : tensor<8x4xf32>}> : () -> tensor<8x4xf32>
  %wo = "onnx.Constant"() <{value = dense<0.4> : tensor<8x8xf32>}> : () -> tensor<8x8xf32>
  %wh = "onnx.Constant"() <{value = dense<0.5> : tensor<8x6xf32>}> : () -> tensor<8x6xf32>
  %inv = "onnx.Constant"() <{value = dense<[[[1.000000e+00], [1.000000e-02]]]> : tensor<1x2x1xf32>}> : () -> tensor<1x2x1xf32>
  %scale = "onnx.Constant"() <{value = dense<5.000000e-01> : tensor<f32>}> : () -> tensor<f32>
  %two = "onnx.Constant"() <{value = dense<2.000000e+00> : tensor<f32>}> : () -> tensor<f32>
  %eps = "onnx.Constant"() <{value = dense<9.99999974E-6> : tensor<f32>}> : () -> tensor<f32>
  %zero = "onnx.Constant"() <{value = dense<0.000000e+00> : tensor<f32>}> : () -> tensor<f32>
  %min = "onnx.Constant"() <{value = dense<-3.40282347E+38> : tensor<f32>}> : () -> tensor<f32>
  %i0 = "onnx.Constant"() <{value = dense<0> : tensor<i64>}> : () -> tensor<i64>
  %i1 = "onnx.Constant"() <{value = dense<1> : tensor<i64>}> : () -> tensor<i64>
  %a0 = "onnx.Constant"() <{value = dense<0> : tensor<1xi64>}> : () -> tensor<1xi64>
  %a1 = "onnx.Constant"() <{value = dense<1> : tensor<1xi64>}> : () -> tensor<1xi64>
  %a2 = "onnx.Constant"() <{value = dense<2> : tensor<1xi64>}> : () -> tensor<1xi64>
  %a3 = "onnx.Constant"() <{value = dense<3> : tensor<1xi64>}> : () -> tensor<1xi64>
  %a4 = "onnx.Constant"() <{value = dense<4> : tensor<1xi64>}> : () -> tensor<1xi64>
  %am1 = "onnx.Constant"() <{value = dense<-1> : tensor<1xi64>}> : () -> tensor<1xi64>
  %a01 = "onnx.Constant"() <{value = dense<[0, 1]> : tensor<2xi64>}> : () -> tensor<2xi64>
  %end = "onnx.Constant"() <{value = dense<9223372036854775807> : tensor<1xi64>}> : () -> tensor<1xi64>
  %none = onnx.NoValue
  %b = "onnx.Shape"(%ids) <{end = 1 : i64, start = 0 : i64}> : (tensor<?x?xi64>) -> tensor<1xi64>
  %t = "onnx.Shape"(%ids) <{end = 2 : i64, start = 1 : i64}> : (tensor<?x?xi64>) -> tensor<1xi64>
  %ts = "onnx.Squeeze"(%t, %none) : (tensor<1xi64>, none) -> tensor<i64>
  %pos = "onnx.Range"(%i0, %ts, %i1) : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  %pos3 = "onnx.Unsqueeze"(%pos, %a01) : (tensor<?xi64>, tensor<2xi64>) -> tensor<1x1x?xi64>
  %btc = "onnx.Concat"(%b, %t, %am1) <{axis = 0 : i64}> : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<3xi64>
  %bthd = "onnx.Concat"(%b, %t, %am1, %a4) <{axis = 0 : i64}> : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<4xi64>
  %pos3p = "onnx.Add"(%pos3, %i1) : (tensor<1x1x?xi64>, tensor<i64>) -> tensor<1x1x?xi64>
  %posf = "onnx.Cast"(%pos3p) <{to = 1 : i64}> : (tensor<1x1x?xi64>) -> tensor<1x1x?xf32>
  %fr = "onnx.MatMul"(%inv, %posf) : (tensor<1x2x1xf32>, tensor<1x1x?xf32>) -> tensor<1x2x?xf32>
  %f = "onnx.Transpose"(%fr) <{perm = array<i64: 0, 2, 1>}> : (tensor<1x2x?xf32>) -> tensor<1x?x2xf32>
  %emb = "onnx.Concat"(%f, %f) <{axis = -1 : i64}> : (tensor<1x?x2xf32>, tensor<1x?x2xf32>) -> tensor<1x?x4xf32>
  %cos0 = "onnx.Cos"(%emb) : (tensor<1x?x4xf32>) -> tensor<1x?x4xf32>
  %sin0 = "onnx.Sin"(%emb) : (tensor<1x?x4xf32>) -> tensor<1x?x4xf32>
  %cos4 = "onnx.Unsqueeze"(%cos0, %a1) : (tensor<1x?x4xf32>, tensor<1xi64>) -> tensor<1x1x?x4xf32>
  %sin4 = "onnx.Unsqueeze"(%sin0, %a1) : (tensor<1x?x4xf32>, tensor<1xi64>) -> tensor<1x1x?x4xf32>
  %kv = "onnx.Unsqueeze"(%pos3, %a2) : (tensor<1x1x?xi64>, tensor<1xi64>) -> tensor<1x1x1x?xi64>
  %qi = "onnx.Unsqueeze"(%pos3, %a3) : (tensor<1x1x?xi64>, tensor<1xi64>) -> tensor<1x1x?x1xi64>
  %cond0 = "onnx.LessOrEqual"(%kv, %qi) : (tensor<1x1x1x?xi64>, tensor<1x1x?x1xi64>) -> tensor<1x1x?x?xi1>
  %mask = "onnx.Where"(%cond0, %zero, %min) : (tensor<1x1x?x?xi1>, tensor<f32>, tensor<f32>) -> tensor<1x1x?x?xf32>
  %x = "onnx.Gather"(%table, %ids) <{axis = 0 : i64}> : (tensor<6x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
  %n0sq = "onnx.Pow"(%x, %two) : (tensor<?x?x8xf32>, tensor<f32>) -> tensor<?x?x8xf32>
  %n0ms = "onnx.ReduceMean"(%n0sq, %am1) <{keepdims = 1 : i64, noop_with_empty_axes = 0 : i64}> : (tensor<?x?x8xf32>, tensor<1xi64>) -> tensor<?x?x1xf32>
  %n0me = "onnx.Add"(%n0ms, %eps) : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %n0rt = "onnx.Sqrt"(%n0me) : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %n0rr = "onnx.Reciprocal"(%n0rt) : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %n0xn = "onnx.Mul"(%x, %n0rr) : (tensor<?x?x8xf32>, tensor<?x?x1xf32>) -> tensor<?x?x8xf32>
  %h = "onnx.Mul"(%wnorm, %n0xn) : (tensor<8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %q0 = "onnx.MatMul"(%h, %wq) : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %q1 = "onnx.Reshape"(%q0, %bthd) <{allowzero = 1 : i64}> : (tensor<?x?x8xf32>, tensor<4xi64>) -> tensor<?x?x2x4xf32>
  %q = "onnx.Transpose"(%q1) <{perm = array<i64: 0, 2, 1, 3>}> : (tensor<?x?x2x4xf32>) -> tensor<?x2x?x4xf32>
  %k0 = "onnx.MatMul"(%h, %wk) : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  %k1 = "onnx.Reshape"(%k0, %bthd) <{allowzero = 1 : i64}> : (tensor<?x?x4xf32>, tensor<4xi64>) -> tensor<?x?x1x4xf32>
  %k = "onnx.Transpose"(%k1) <{perm = array<i64: 0, 2, 1, 3>}> : (tensor<?x?x1x4xf32>) -> tensor<?x1x?x4xf32>
  %v0 = "onnx.MatMul"(%h, %wv) : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  %v1 = "onnx.Reshape"(%v0, %bthd) <{allowzero = 1 : i64}> : (tensor<?x?x4xf32>, tensor<4xi64>) -> tensor<?x?x1x4xf32>
  %v = "onnx.Transpose"(%v1) <{perm = array<i64: 0, 2, 1, 3>}> : (tensor<?x?x1x4xf32>) -> tensor<?x1x?x4xf32>
  %qrlo = "onnx.Slice"(%q, %a0, %a2, %a3, %a1) : (tensor<?x2x?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x2x?x2xf32>
  %qrhi = "onnx.Slice"(%q, %a2, %end, %a3, %a1) : (tensor<?x2x?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x2x?x2xf32>
  %qrng = "onnx.Neg"(%qrhi) : (tensor<?x2x?x2xf32>) -> tensor<?x2x?x2xf32>
  %qrrh = "onnx.Concat"(%qrng, %qrlo) <{axis = -1 : i64}> : (tensor<?x2x?x2xf32>, tensor<?x2x?x2xf32>) -> tensor<?x2x?x4xf32>
  %qrc = "onnx.Mul"(%q, %cos4) : (tensor<?x2x?x4xf32>, tensor<1x1x?x4xf32>) -> tensor<?x2x?x4xf32>
  %qrs = "onnx.Mul"(%qrrh, %sin4) : (tensor<?x2x?x4xf32>, tensor<1x1x?x4xf32>) -> tensor<?x2x?x4xf32>
  // expected-error @+1 {{not a rotary embedding: the angles are not of the positions 0..T-1}}
  %qr = "onnx.Add"(%qrc, %qrs) : (tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
  %krlo = "onnx.Slice"(%k, %a0, %a2, %a3, %a1) : (tensor<?x1x?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x1x?x2xf32>
  %krhi = "onnx.Slice"(%k, %a2, %end, %a3, %a1) : (tensor<?x1x?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x1x?x2xf32>
  %krng = "onnx.Neg"(%krhi) : (tensor<?x1x?x2xf32>) -> tensor<?x1x?x2xf32>
  %krrh = "onnx.Concat"(%krng, %krlo) <{axis = -1 : i64}> : (tensor<?x1x?x2xf32>, tensor<?x1x?x2xf32>) -> tensor<?x1x?x4xf32>
  %krc = "onnx.Mul"(%k, %cos4) : (tensor<?x1x?x4xf32>, tensor<1x1x?x4xf32>) -> tensor<?x1x?x4xf32>
  %krs = "onnx.Mul"(%krrh, %sin4) : (tensor<?x1x?x4xf32>, tensor<1x1x?x4xf32>) -> tensor<?x1x?x4xf32>
  %kr = "onnx.Add"(%krc, %krs) : (tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x1x?x4xf32>
  %rep5 = "onnx.Concat"(%b, %a1, %a2, %t, %a4) <{axis = 0 : i64}> : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<5xi64>
  %rep4 = "onnx.Concat"(%b, %a2, %t, %a4) <{axis = 0 : i64}> : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<4xi64>
  %kxu = "onnx.Unsqueeze"(%kr, %a2) : (tensor<?x1x?x4xf32>, tensor<1xi64>) -> tensor<?x1x1x?x4xf32>
  %kxe = "onnx.Expand"(%kxu, %rep5) : (tensor<?x1x1x?x4xf32>, tensor<5xi64>) -> tensor<?x1x2x?x4xf32>
  %kx = "onnx.Reshape"(%kxe, %rep4) <{allowzero = 1 : i64}> : (tensor<?x1x2x?x4xf32>, tensor<4xi64>) -> tensor<?x2x?x4xf32>
  %vxu = "onnx.Unsqueeze"(%v, %a2) : (tensor<?x1x?x4xf32>, tensor<1xi64>) -> tensor<?x1x1x?x4xf32>
  %vxe = "onnx.Expand"(%vxu, %rep5) : (tensor<?x1x1x?x4xf32>, tensor<5xi64>) -> tensor<?x1x2x?x4xf32>
  %vx = "onnx.Reshape"(%vxe, %rep4) <{allowzero = 1 : i64}> : (tensor<?x1x2x?x4xf32>, tensor<4xi64>) -> tensor<?x2x?x4xf32>
  %kt = "onnx.Transpose"(%kx) <{perm = array<i64: 0, 1, 3, 2>}> : (tensor<?x2x?x4xf32>) -> tensor<?x2x4x?xf32>
  %s0 = "onnx.MatMul"(%qr, %kt) : (tensor<?x2x?x4xf32>, tensor<?x2x4x?xf32>) -> tensor<?x2x?x?xf32>
  %s1 = "onnx.Mul"(%s0, %scale) : (tensor<?x2x?x?xf32>, tensor<f32>) -> tensor<?x2x?x?xf32>
  %s2 = "onnx.Add"(%s1, %mask) : (tensor<?x2x?x?xf32>, tensor<1x1x?x?xf32>) -> tensor<?x2x?x?xf32>
  %p = "onnx.Softmax"(%s2) <{axis = -1 : i64}> : (tensor<?x2x?x?xf32>) -> tensor<?x2x?x?xf32>
  %o0 = "onnx.MatMul"(%p, %vx) : (tensor<?x2x?x?xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
  %o1 = "onnx.Transpose"(%o0) <{perm = array<i64: 0, 2, 1, 3>}> : (tensor<?x2x?x4xf32>) -> tensor<?x?x2x4xf32>
  %attn = "onnx.Reshape"(%o1, %btc) <{allowzero = 1 : i64}> : (tensor<?x?x2x4xf32>, tensor<3xi64>) -> tensor<?x?x8xf32>
  %ao = "onnx.MatMul"(%attn, %wo) : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %r = "onnx.Add"(%x, %ao) : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %n1sq = "onnx.Pow"(%r, %two) : (tensor<?x?x8xf32>, tensor<f32>) -> tensor<?x?x8xf32>
  %n1ms = "onnx.ReduceMean"(%n1sq, %am1) <{keepdims = 1 : i64, noop_with_empty_axes = 0 : i64}> : (tensor<?x?x8xf32>, tensor<1xi64>) -> tensor<?x?x1xf32>
  %n1me = "onnx.Add"(%n1ms, %eps) : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %n1rt = "onnx.Sqrt"(%n1me) : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %n1rr = "onnx.Reciprocal"(%n1rt) : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %n1xn = "onnx.Mul"(%r, %n1rr) : (tensor<?x?x8xf32>, tensor<?x?x1xf32>) -> tensor<?x?x8xf32>
  %fin = "onnx.Mul"(%wfinal, %n1xn) : (tensor<8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %logits = "onnx.MatMul"(%fin, %wh) : (tensor<?x?x8xf32>, tensor<8x6xf32>) -> tensor<?x?x6xf32>
  return %logits : tensor<?x?x6xf32>
}
// -----

// The attention output flattened without its transpose back to [B, T, H, D].
func.func @heads_major(%ids: tensor<?x?xi64> {onnx.name = "input_ids"}) -> (tensor<?x?x6xf32> {onnx.name = "logits"}) {
  %table = "onnx.Constant"() <{value = dense<[[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8], [0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1], [1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0], [0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5], [0.1, 0.1, 0.2, 0.2, 0.3, 0.3, 0.4, 0.4], [0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0]]> : tensor<6x8xf32>}> : () -> tensor<6x8xf32>
  %wnorm = "onnx.Constant"() <{value = dense<[1.0, 1.1, 1.2, 1.3, 0.9, 0.8, 0.7, 0.6]> : tensor<8xf32>}> : () -> tensor<8xf32>
  %wfinal = "onnx.Constant"() <{value = dense<1.5> : tensor<8xf32>}> : () -> tensor<8xf32>
  %wq = "onnx.Constant"() <{value = dense<0.1> : tensor<8x8xf32>}> : () -> tensor<8x8xf32>
  %wk = "onnx.Constant"() <{value = dense<0.2> : tensor<8x4xf32>}> : () -> tensor<8x4xf32>
  %wv = "onnx.Constant"() <{value = dense<0.3> : tensor<8x4xf32>}> : () -> tensor<8x4xf32>
  %wo = "onnx.Constant"() <{value = dense<0.4> : tensor<8x8xf32>}> : () -> tensor<8x8xf32>
  %wh = "onnx.Constant"() <{value = dense<0.5> : tensor<8x6xf32>}> : () -> tensor<8x6xf32>
  %inv = "onnx.Constant"() <{value = dense<[[[1.000000e+00], [1.000000e-02]]]> : tensor<1x2x1xf32>}> : () -> tensor<1x2x1xf32>
  %scale = "onnx.Constant"() <{value = dense<5.000000e-01> : tensor<f32>}> : () -> tensor<f32>
  %two = "onnx.Constant"() <{value = dense<2.000000e+00> : tensor<f32>}> : () -> tensor<f32>
  %eps = "onnx.Constant"() <{value = dense<9.99999974E-6> : tensor<f32>}> : () -> tensor<f32>
  %zero = "onnx.Constant"() <{value = dense<0.000000e+00> : tensor<f32>}> : () -> tensor<f32>
  %min = "onnx.Constant"() <{value = dense<-3.40282347E+38> : tensor<f32>}> : () -> tensor<f32>
  %i0 = "onnx.Constant"() <{value = dense<0> : tensor<i64>}> : () -> tensor<i64>
  %i1 = "onnx.Constant"() <{value = dense<1> : tensor<i64>}> : () -> tensor<i64>
  %a0 = "onnx.Constant"() <{value = dense<0> : tensor<1xi64>}> : () -> tensor<1xi64>
  %a1 = "onnx.Constant"() <{value = dense<1> : tensor<1xi64>}> : () -> tensor<1xi64>
  %a2 = "onnx.Constant"() <{value = dense<2> : tensor<1xi64>}> : () -> tensor<1xi64>
  %a3 = "onnx.Constant"() <{value = dense<3> : tensor<1xi64>}> : () -> tensor<1xi64>
  %a4 = "onnx.Constant"() <{value = dense<4> : tensor<1xi64>}> : () -> tensor<1xi64>
  %am1 = "onnx.Constant"() <{value = dense<-1> : tensor<1xi64>}> : () -> tensor<1xi64>
  %a01 = "onnx.Constant"() <{value = dense<[0, 1]> : tensor<2xi64>}> : () -> tensor<2xi64>
  %end = "onnx.Constant"() <{value = dense<9223372036854775807> : tensor<1xi64>}> : () -> tensor<1xi64>
  %none = onnx.NoValue
  %b = "onnx.Shape"(%ids) <{end = 1 : i64, start = 0 : i64}> : (tensor<?x?xi64>) -> tensor<1xi64>
  %t = "onnx.Shape"(%ids) <{end = 2 : i64, start = 1 : i64}> : (tensor<?x?xi64>) -> tensor<1xi64>
  %ts = "onnx.Squeeze"(%t, %none) : (tensor<1xi64>, none) -> tensor<i64>
  %pos = "onnx.Range"(%i0, %ts, %i1) : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  %pos3 = "onnx.Unsqueeze"(%pos, %a01) : (tensor<?xi64>, tensor<2xi64>) -> tensor<1x1x?xi64>
  %btc = "onnx.Concat"(%b, %t, %am1) <{axis = 0 : i64}> : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<3xi64>
  %bthd = "onnx.Concat"(%b, %t, %am1, %a4) <{axis = 0 : i64}> : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<4xi64>
  %posf = "onnx.Cast"(%pos3) <{to = 1 : i64}> : (tensor<1x1x?xi64>) -> tensor<1x1x?xf32>
  %fr = "onnx.MatMul"(%inv, %posf) : (tensor<1x2x1xf32>, tensor<1x1x?xf32>) -> tensor<1x2x?xf32>
  %f = "onnx.Transpose"(%fr) <{perm = array<i64: 0, 2, 1>}> : (tensor<1x2x?xf32>) -> tensor<1x?x2xf32>
  %emb = "onnx.Concat"(%f, %f) <{axis = -1 : i64}> : (tensor<1x?x2xf32>, tensor<1x?x2xf32>) -> tensor<1x?x4xf32>
  %cos0 = "onnx.Cos"(%emb) : (tensor<1x?x4xf32>) -> tensor<1x?x4xf32>
  %sin0 = "onnx.Sin"(%emb) : (tensor<1x?x4xf32>) -> tensor<1x?x4xf32>
  %cos4 = "onnx.Unsqueeze"(%cos0, %a1) : (tensor<1x?x4xf32>, tensor<1xi64>) -> tensor<1x1x?x4xf32>
  %sin4 = "onnx.Unsqueeze"(%sin0, %a1) : (tensor<1x?x4xf32>, tensor<1xi64>) -> tensor<1x1x?x4xf32>
  %kv = "onnx.Unsqueeze"(%pos3, %a2) : (tensor<1x1x?xi64>, tensor<1xi64>) -> tensor<1x1x1x?xi64>
  %qi = "onnx.Unsqueeze"(%pos3, %a3) : (tensor<1x1x?xi64>, tensor<1xi64>) -> tensor<1x1x?x1xi64>
  %cond0 = "onnx.LessOrEqual"(%kv, %qi) : (tensor<1x1x1x?xi64>, tensor<1x1x?x1xi64>) -> tensor<1x1x?x?xi1>
  %mask = "onnx.Where"(%cond0, %zero, %min) : (tensor<1x1x?x?xi1>, tensor<f32>, tensor<f32>) -> tensor<1x1x?x?xf32>
  %x = "onnx.Gather"(%table, %ids) <{axis = 0 : i64}> : (tensor<6x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
  %n0sq = "onnx.Pow"(%x, %two) : (tensor<?x?x8xf32>, tensor<f32>) -> tensor<?x?x8xf32>
  %n0ms = "onnx.ReduceMean"(%n0sq, %am1) <{keepdims = 1 : i64, noop_with_empty_axes = 0 : i64}> : (tensor<?x?x8xf32>, tensor<1xi64>) -> tensor<?x?x1xf32>
  %n0me = "onnx.Add"(%n0ms, %eps) : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %n0rt = "onnx.Sqrt"(%n0me) : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %n0rr = "onnx.Reciprocal"(%n0rt) : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %n0xn = "onnx.Mul"(%x, %n0rr) : (tensor<?x?x8xf32>, tensor<?x?x1xf32>) -> tensor<?x?x8xf32>
  %h = "onnx.Mul"(%wnorm, %n0xn) : (tensor<8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %q0 = "onnx.MatMul"(%h, %wq) : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %q1 = "onnx.Reshape"(%q0, %bthd) <{allowzero = 1 : i64}> : (tensor<?x?x8xf32>, tensor<4xi64>) -> tensor<?x?x2x4xf32>
  %q = "onnx.Transpose"(%q1) <{perm = array<i64: 0, 2, 1, 3>}> : (tensor<?x?x2x4xf32>) -> tensor<?x2x?x4xf32>
  %k0 = "onnx.MatMul"(%h, %wk) : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  %k1 = "onnx.Reshape"(%k0, %bthd) <{allowzero = 1 : i64}> : (tensor<?x?x4xf32>, tensor<4xi64>) -> tensor<?x?x1x4xf32>
  %k = "onnx.Transpose"(%k1) <{perm = array<i64: 0, 2, 1, 3>}> : (tensor<?x?x1x4xf32>) -> tensor<?x1x?x4xf32>
  %v0 = "onnx.MatMul"(%h, %wv) : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  %v1 = "onnx.Reshape"(%v0, %bthd) <{allowzero = 1 : i64}> : (tensor<?x?x4xf32>, tensor<4xi64>) -> tensor<?x?x1x4xf32>
  %v = "onnx.Transpose"(%v1) <{perm = array<i64: 0, 2, 1, 3>}> : (tensor<?x?x1x4xf32>) -> tensor<?x1x?x4xf32>
  %qrlo = "onnx.Slice"(%q, %a0, %a2, %a3, %a1) : (tensor<?x2x?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x2x?x2xf32>
  %qrhi = "onnx.Slice"(%q, %a2, %end, %a3, %a1) : (tensor<?x2x?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x2x?x2xf32>
  %qrng = "onnx.Neg"(%qrhi) : (tensor<?x2x?x2xf32>) -> tensor<?x2x?x2xf32>
  %qrrh = "onnx.Concat"(%qrng, %qrlo) <{axis = -1 : i64}> : (tensor<?x2x?x2xf32>, tensor<?x2x?x2xf32>) -> tensor<?x2x?x4xf32>
  %qrc = "onnx.Mul"(%q, %cos4) : (tensor<?x2x?x4xf32>, tensor<1x1x?x4xf32>) -> tensor<?x2x?x4xf32>
  %qrs = "onnx.Mul"(%qrrh, %sin4) : (tensor<?x2x?x4xf32>, tensor<1x1x?x4xf32>) -> tensor<?x2x?x4xf32>
  %qr = "onnx.Add"(%qrc, %qrs) : (tensor<?x2x?x4xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
  %krlo = "onnx.Slice"(%k, %a0, %a2, %a3, %a1) : (tensor<?x1x?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x1x?x2xf32>
  %krhi = "onnx.Slice"(%k, %a2, %end, %a3, %a1) : (tensor<?x1x?x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x1x?x2xf32>
  %krng = "onnx.Neg"(%krhi) : (tensor<?x1x?x2xf32>) -> tensor<?x1x?x2xf32>
  %krrh = "onnx.Concat"(%krng, %krlo) <{axis = -1 : i64}> : (tensor<?x1x?x2xf32>, tensor<?x1x?x2xf32>) -> tensor<?x1x?x4xf32>
  %krc = "onnx.Mul"(%k, %cos4) : (tensor<?x1x?x4xf32>, tensor<1x1x?x4xf32>) -> tensor<?x1x?x4xf32>
  %krs = "onnx.Mul"(%krrh, %sin4) : (tensor<?x1x?x4xf32>, tensor<1x1x?x4xf32>) -> tensor<?x1x?x4xf32>
  %kr = "onnx.Add"(%krc, %krs) : (tensor<?x1x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x1x?x4xf32>
  %rep5 = "onnx.Concat"(%b, %a1, %a2, %t, %a4) <{axis = 0 : i64}> : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<5xi64>
  %rep4 = "onnx.Concat"(%b, %a2, %t, %a4) <{axis = 0 : i64}> : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<4xi64>
  %kxu = "onnx.Unsqueeze"(%kr, %a2) : (tensor<?x1x?x4xf32>, tensor<1xi64>) -> tensor<?x1x1x?x4xf32>
  %kxe = "onnx.Expand"(%kxu, %rep5) : (tensor<?x1x1x?x4xf32>, tensor<5xi64>) -> tensor<?x1x2x?x4xf32>
  %kx = "onnx.Reshape"(%kxe, %rep4) <{allowzero = 1 : i64}> : (tensor<?x1x2x?x4xf32>, tensor<4xi64>) -> tensor<?x2x?x4xf32>
  %vxu = "onnx.Unsqueeze"(%v, %a2) : (tensor<?x1x?x4xf32>, tensor<1xi64>) -> tensor<?x1x1x?x4xf32>
  %vxe = "onnx.Expand"(%vxu, %rep5) : (tensor<?x1x1x?x4xf32>, tensor<5xi64>) -> tensor<?x1x2x?x4xf32>
  %vx = "onnx.Reshape"(%vxe, %rep4) <{allowzero = 1 : i64}> : (tensor<?x1x2x?x4xf32>, tensor<4xi64>) -> tensor<?x2x?x4xf32>
  %kt = "onnx.Transpose"(%kx) <{perm = array<i64: 0, 1, 3, 2>}> : (tensor<?x2x?x4xf32>) -> tensor<?x2x4x?xf32>
  %s0 = "onnx.MatMul"(%qr, %kt) : (tensor<?x2x?x4xf32>, tensor<?x2x4x?xf32>) -> tensor<?x2x?x?xf32>
  %s1 = "onnx.Mul"(%s0, %scale) : (tensor<?x2x?x?xf32>, tensor<f32>) -> tensor<?x2x?x?xf32>
  %s2 = "onnx.Add"(%s1, %mask) : (tensor<?x2x?x?xf32>, tensor<1x1x?x?xf32>) -> tensor<?x2x?x?xf32>
  %p = "onnx.Softmax"(%s2) <{axis = -1 : i64}> : (tensor<?x2x?x?xf32>) -> tensor<?x2x?x?xf32>
  %o0 = "onnx.MatMul"(%p, %vx) : (tensor<?x2x?x?xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x4xf32>
  // expected-error @+1 {{a Reshape of a heads-major [B, H, T, D] value, which is no view of the token rows}}
  %attn = "onnx.Reshape"(%o0, %btc) <{allowzero = 1 : i64}> : (tensor<?x2x?x4xf32>, tensor<3xi64>) -> tensor<?x?x8xf32>
  %ao = "onnx.MatMul"(%attn, %wo) : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %r = "onnx.Add"(%x, %ao) : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %n1sq = "onnx.Pow"(%r, %two) : (tensor<?x?x8xf32>, tensor<f32>) -> tensor<?x?x8xf32>
  %n1ms = "onnx.ReduceMean"(%n1sq, %am1) <{keepdims = 1 : i64, noop_with_empty_axes = 0 : i64}> : (tensor<?x?x8xf32>, tensor<1xi64>) -> tensor<?x?x1xf32>
  %n1me = "onnx.Add"(%n1ms, %eps) : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %n1rt = "onnx.Sqrt"(%n1me) : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %n1rr = "onnx.Reciprocal"(%n1rt) : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %n1xn = "onnx.Mul"(%r, %n1rr) : (tensor<?x?x8xf32>, tensor<?x?x1xf32>) -> tensor<?x?x8xf32>
  %fin = "onnx.Mul"(%wfinal, %n1xn) : (tensor<8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %logits = "onnx.MatMul"(%fin, %wh) : (tensor<?x?x8xf32>, tensor<8x6xf32>) -> tensor<?x?x6xf32>
  return %logits : tensor<?x?x6xf32>
}
