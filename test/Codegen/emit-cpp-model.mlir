// A whole model's step program printed for the CPU: the model ops as kernel
// calls, the KV cache in the model's state (moe-plan-kv-cache's size, one slot
// per attention with its key and value widths), checked kernels that end the
// run with their message, and workspace slots reused once their last reader
// has run.
//
// RUN: moec-opt %s -moe-plan-kv-cache="max-batch=2 max-seq=16" | moec-translate --emit-cpp | FileCheck %s
// RUN: not moec-translate --emit-cpp %s 2>&1 | FileCheck %s --check-prefix=NOPLAN
// NOPLAN: error: cannot generate code for 'moe.attention': its function has no KV cache plan (moe.kv_cache: run moe-plan-kv-cache, which moec compile --target does)
// The same program for the CUDA target (emit-cuda-model.mlir has its checks).
// RUN: moec-opt %s -moe-plan-kv-cache | moec-translate --emit-cuda | FileCheck %s --check-prefix=CUDA
// CUDA: MOEC_RETURN_IF_ERROR(attention(cache, 0, v4, v5, v3, nullptr, w5, in1, in2, T, 4, 2, 4, 0, 4, 0x1p-1f, 3, v6, stream));

// CHECK: #include "moec/runtime/cpu/ModelKernels.h"
// CHECK: struct State {
// CHECK: : pool(threads), cache(2, 16, {{[{][{]}}8, 8}}) {}
// CHECK: KVCache cache;
// CHECK: MOEC_EXPORT void moec_artifact_reset(void *state, int64_t sequence) {
// CHECK: float *v0 = reinterpret_cast<float *>(workspace + 0);
// CHECK-NEXT: // moe.embedding
// CHECK-NEXT: if (!embedding(pool, in0, T, w0, 32, 16, v0, why))
// CHECK-NEXT: return fail(why, error, errorBytes);
// CHECK: rmsNorm(pool, v0, T, 16, w1, 16, 0x1.0c6f7ap-20f, 0x0p+0f, v1);
// CHECK: rotary(pool, v2, T, 16, in1, w4, 2, 4, 0, false, 0x1p+0f, v4);
// CHECK: rotary(pool, v3, T, 8, in1, w4, 2, 4, 0, true, 0x1p+0f, v5);
// CHECK: if (!attention(pool, cache, 0, v4, v5, v3, nullptr, w5, in1, in2, T, 4, 2, 4, 0, 4, 0x1p-1f, 3, v6, why))
// The residual sum reuses the slot of a value no later op reads.
// CHECK: float *v7 = reinterpret_cast<float *>(workspace + 524288);
// CHECK-NEXT: // arith.addf
// CHECK-NEXT: add(pool, v0, v6, 16 * T, v7);
// CHECK: float *v8 = static_cast<float *>(outputs[0]);
// CHECK-NEXT: linear(pool, v7, T, 16, w6, 32, nullptr, Epilogue{}, v8);
func.func @forward(%ids: tensor<?xi64> {onnx.name = "input_ids"}, %pos: tensor<?xi64> {onnx.name = "positions"}, %seq: tensor<?xi64> {onnx.name = "sequences"}) -> (tensor<?x32xf32> {onnx.name = "logits"}) {
  %table = arith.constant dense<0.5> : tensor<32x16xf32>
  %norm = arith.constant dense<1.0> : tensor<16xf32>
  %wq = arith.constant dense<0.1> : tensor<16x16xf32>
  %wk = arith.constant dense<0.1> : tensor<8x16xf32>
  %freq = arith.constant dense<[1.0, 0.1]> : tensor<2xf32>
  %sinks = arith.constant dense<0.5> : tensor<4xf32>
  %head = arith.constant dense<0.2> : tensor<32x16xf32>
  %h = moe.embedding %ids, %table : tensor<?xi64>, tensor<32x16xf32> -> tensor<?x16xf32>
  %n = moe.rms_norm %h, %norm {epsilon = 1.0e-6 : f64} : tensor<?x16xf32>, tensor<16xf32> -> tensor<?x16xf32>
  %q = moe.linear %n, %wq : tensor<?x16xf32>, tensor<16x16xf32> -> tensor<?x16xf32>
  %k = moe.linear %n, %wk : tensor<?x16xf32>, tensor<8x16xf32> -> tensor<?x8xf32>
  %qr = moe.rotary %q, %pos, %freq {head_dim = 4 : i64} : tensor<?x16xf32>, tensor<?xi64>, tensor<2xf32> -> tensor<?x16xf32>
  %kr = moe.rotary %k, %pos, %freq {head_dim = 4 : i64, interleaved = true} : tensor<?x8xf32>, tensor<?xi64>, tensor<2xf32> -> tensor<?x8xf32>
  %a = moe.attention %qr, %kr, %k, %pos, %seq sinks(%sinks : tensor<4xf32>) {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.5 : f64, window = 3 : i64}
      : tensor<?x16xf32>, tensor<?x8xf32>, tensor<?x8xf32>, tensor<?xi64>, tensor<?xi64> -> tensor<?x16xf32>
  %r = arith.addf %h, %a : tensor<?x16xf32>
  %logits = moe.linear %r, %head : tensor<?x16xf32>, tensor<32x16xf32> -> tensor<?x32xf32>
  return %logits : tensor<?x32xf32>
}
