// A whole model in bf16 (moe-cast-model-bf16, the CUDA target's default)
// printed for the CUDA target: the KV cache created with bf16 rows, the bf16
// embedding table (one weight with the tied LM head, stored as bf16 bits)
// read by embeddingBF16 into f32 rows, the projections and the LM head on
// linearBF16, the norm and the residual sums in f32. With cache=f32 the cache
// is created as before. The CPU target stores no bf16 cache: an error naming
// it, before anything is printed.
//
// RUN: moec-opt %s -moe-plan-kv-cache="max-batch=2 max-seq=16" -moe-cast-model-bf16 | moec-translate --emit-cuda --max-tokens=16 | FileCheck %s
// RUN: moec-opt %s -moe-plan-kv-cache="max-batch=2 max-seq=16" -moe-cast-model-bf16="cache=f32" | moec-translate --emit-cuda --max-tokens=16 | FileCheck %s --check-prefix=F32CACHE
// RUN: moec-opt %s -moe-plan-kv-cache="max-batch=2 max-seq=16" -moe-cast-model-bf16 | not moec-translate --emit-cpp 2>&1 | FileCheck %s --check-prefix=CPU
// With moe-fuse-sibling-linears (moec compile's next step), q and k are one
// call of linearBF16Siblings over arrays of their weights, widths and results.
// RUN: moec-opt %s -moe-plan-kv-cache="max-batch=2 max-seq=16" -moe-cast-model-bf16 -moe-fuse-sibling-linears | moec-translate --emit-cuda --max-tokens=16 | FileCheck %s --check-prefix=FUSED
// RUN: moec-opt %s -moe-plan-kv-cache="max-batch=2 max-seq=16" -moe-cast-model-bf16="cache=f32" | not moec-translate --emit-cpp 2>&1 | FileCheck %s --check-prefix=CPUTABLE
//
// moec compile's default for a checkpoint on --target=cuda is this policy;
// --precision=f32 leaves every type f32, and --kv-cache=f32 the cache alone.
// RUN: moec compile %fixtures/models/qwen3_moe/checkpoint --target=cuda --max-batch=2 --max-seq=32 --emit=mlir | FileCheck %s --check-prefix=PLANNED
// RUN: moec compile %fixtures/models/qwen3_moe/checkpoint --target=cuda --precision=f32 --emit=mlir | FileCheck %s --check-prefix=PLANNED-F32
// RUN: moec compile %fixtures/models/qwen3_moe/checkpoint --target=cuda --kv-cache=f32 --emit=mlir | FileCheck %s --check-prefix=PLANNED-F32CACHE
// PLANNED: moe.kv_cache = {element_type = bf16, max_batch = 2 : i64, max_seq = 32 : i64}
// PLANNED-DAG: moe.embedding %{{.*}} : tensor<?xi64>, tensor<128x64xbf16> -> tensor<?x64xf32>
// PLANNED-DAG: moe.linear %{{.*}} : tensor<?x64xf32>, tensor<8x64xf32> -> tensor<?x8xf32>
// PLANNED-DAG: moe.grouped_matmul %{{.*}} : tensor<?x64xbf16>, tensor<8x{{[0-9]+}}x64xbf16>, tensor<8xi32> -> tensor<?x{{[0-9]+}}xbf16>
// PLANNED-DAG: moe.linear %{{.*}} : tensor<?x64xf32>, tensor<128x64xbf16> -> tensor<?x128xf32>
// PLANNED-F32-NOT: bf16
// PLANNED-F32-NOT: element_type
// PLANNED-F32CACHE: moe.kv_cache = {element_type = f32,
// PLANNED-F32CACHE: tensor<128x64xbf16>

// CHECK: MOEC_RETURN_IF_ERROR(state.cache.create(2, 16, {{[{][{]}}8, 8}}, KVCacheType::BF16));
// CHECK: const DeviceKVCache::IdsCheck idsChecks[] = {{[{][{]}}view[0], 32}};
// CHECK: const uint16_t *[[TABLE:w[0-9]+]] = reinterpret_cast<const uint16_t *>(weights + {{[0-9]+}}); // embed (bf16)
// CHECK: const float *[[NORM:w[0-9]+]] = reinterpret_cast<const float *>(weights + {{[0-9]+}});
// CHECK: float *[[OUT:v[0-9]+]] = inPlace ? static_cast<float *>(outputs[0])
// CHECK: auto compute = [&]() -> Status {
// CHECK-NEXT: // moe.embedding
// CHECK-NEXT: MOEC_RETURN_IF_ERROR(embeddingBF16(in0, T, [[TABLE]], 32, 16, [[H:v[0-9]+]], stream));
// CHECK-NEXT: // moe.rms_norm
// CHECK-NEXT: MOEC_RETURN_IF_ERROR(rmsNorm([[H]], T, 16, [[NORM]], 16,
// CHECK: MOEC_RETURN_IF_ERROR(linearBF16(v{{[0-9]+}}, T, 16, w{{[0-9]+}}, 16, nullptr, Epilogue{}, v{{[0-9]+}}, stream));
// CHECK: MOEC_RETURN_IF_ERROR(linearBF16(v{{[0-9]+}}, T, 16, w{{[0-9]+}}, 8, nullptr, Epilogue{}, v{{[0-9]+}}, stream));
// CHECK: MOEC_RETURN_IF_ERROR(attention(cache, 0,
// CHECK: MOEC_RETURN_IF_ERROR(add([[H]], v{{[0-9]+}}, 16 * T, v{{[0-9]+}}, stream));
// CHECK: MOEC_RETURN_IF_ERROR(linearBF16(v{{[0-9]+}}, T, 16, [[TABLE]], 32, nullptr, Epilogue{}, [[OUT]], stream));
// CHECK-NOT: embedding(
// F32CACHE: MOEC_RETURN_IF_ERROR(state.cache.create(2, 16, {{[{][{]}}8, 8}}));
// F32CACHE: embeddingBF16(
// FUSED: #include <array>
// FUSED: // moe.multi_linear
// FUSED-NEXT: MOEC_RETURN_IF_ERROR(linearBF16Siblings([[N:v[0-9]+]], T, 16, 2, std::array<decltype([[WQ:w[0-9]+]]), 2>{[[WQ]], [[WK:w[0-9]+]]}.data(), std::array<int64_t, 2>{16, 8}.data(), nullptr, std::array<decltype([[Q:v[0-9]+]]), 2>{[[Q]], [[K:v[0-9]+]]}.data(), stream));
// FUSED-NOT: linearBF16([[N]],
// FUSED: attention(cache, 0, [[Q]], [[K]], [[K]],
// CPU: error: cannot generate code for the KV cache of element type bf16: the CPU target stores f32 rows
// CPUTABLE: error: cannot generate code for 'moe.embedding': table has element type bf16; the CPU target computes in f32 only
func.func @forward(%ids: tensor<?xi64> {onnx.name = "input_ids"}, %pos: tensor<?xi64> {onnx.name = "positions"}, %seq: tensor<?xi64> {onnx.name = "sequences"}) -> (tensor<?x32xf32> {onnx.name = "logits"}) {
  %table = arith.constant {moec.name = "embed"} dense<0.5> : tensor<32x16xf32>
  %norm = arith.constant dense<1.0> : tensor<16xf32>
  %wq = arith.constant dense<0.1> : tensor<16x16xf32>
  %wk = arith.constant dense<0.1> : tensor<8x16xf32>
  %h = moe.embedding %ids, %table : tensor<?xi64>, tensor<32x16xf32> -> tensor<?x16xf32>
  %n = moe.rms_norm %h, %norm {epsilon = 1.0e-6 : f64} : tensor<?x16xf32>, tensor<16xf32> -> tensor<?x16xf32>
  %q = moe.linear %n, %wq : tensor<?x16xf32>, tensor<16x16xf32> -> tensor<?x16xf32>
  %k = moe.linear %n, %wk : tensor<?x16xf32>, tensor<8x16xf32> -> tensor<?x8xf32>
  %a = moe.attention %q, %k, %k, %pos, %seq {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.5 : f64}
      : tensor<?x16xf32>, tensor<?x8xf32>, tensor<?x8xf32>, tensor<?xi64>, tensor<?xi64> -> tensor<?x16xf32>
  %h1 = arith.addf %h, %a : tensor<?x16xf32>
  %logits = moe.linear %h1, %table : tensor<?x16xf32>, tensor<32x16xf32> -> tensor<?x32xf32>
  return %logits : tensor<?x32xf32>
}
