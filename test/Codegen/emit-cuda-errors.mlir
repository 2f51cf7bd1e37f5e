// `moec compile --target=cuda`: the same checks as the CPU target, naming the
// CUDA target, and a clear error where there is no nvcc. None needs a GPU.

// RUN: rm -rf %t && split-file %s %t

// RUN: not moec compile %t/unknown-op.mlir --target=cuda -o %t/a 2>&1 | FileCheck %s --check-prefix=OP
// OP: unknown-op.mlir:2:8: error: cannot legalise 'onnx.Add' for codegen: only func, arith, tensor and moe ops (and onnx constants and views) have code
// RUN: not ls %t/a

// RUN: not moec compile %t/all-reduce.mlir --target=cuda -o %t/a 2>&1 | FileCheck %s --check-prefix=ALLREDUCE
// ALLREDUCE: all-reduce.mlir:2:8: error: cannot generate code for 'moe.all_reduce': an all-reduce in a program compiled for one rank (--ep-rank); compile without --ep-rank for the artifact that every rank loads

// RUN: not moec compile %t/bf16.mlir --target=cuda -o %t/a 2>&1 | FileCheck %s --check-prefix=BF16
// BF16: error: cannot generate code for input 'x' of element type 'bf16': the CUDA target takes f32 tensors (and i32/i64 expert ids) only

// RUN: not moec compile %t/fp8.mlir --target=cuda -o %t/a 2>&1 | FileCheck %s --check-prefix=FP8
// FP8: fp8.mlir:3:8: error: cannot generate code for 'moe.grouped_matmul': FP8 weights with f32 rows; the CUDA target multiplies FP8 weights with FP8 rows (moe.quantize) only: compile with --fp8, which quantises the rows

// FP8 experts (moe.quantize + FP8 grouped matmuls) do compile for CUDA.
// RUN: moec compile %fixtures/mixtral/model.onnx --target=cuda --fp8 --emit=mlir -o %t/fp8-experts.mlir
// RUN: moec-translate --emit-cuda %t/fp8-experts.mlir -o %t/fp8-experts.cu
// RUN: FileCheck %s --check-prefix=FP8-EXPERTS < %t/fp8-experts.cu
// The permute is fused into the first quantize: its f32 rows are never written.
// FP8-EXPERTS: // (fused into the moe.quantize below)
// FP8-EXPERTS: permuteQuantizeE4M3(in0, 64, [[PERM:v[0-9]+]], [[VALID:v[0-9]+]], [[INV:v[0-9]+]], 2 * T, 2, [[Q:v[0-9]+]], [[S:v[0-9]+]], stream)
// The gate/up matmul is fused into the second quantize: its f32 result is
// never written (the epilogue pass quantises), so no quantizeE4M3 remains.
// FP8-EXPERTS: // (fused into the moe.quantize below)
// Both after launches that hang off the sort (settled offsets: their first
// weights are requested before the programmatic wait).
// FP8-EXPERTS: groupedMatmulFP8QuantizedSettledOffsets([[Q]], 2 * T, [[S]], 64, {{w[0-9]+}}, {{w[0-9]+}}, 8, 80, [[OFFSETS:v[0-9]+]], nullptr, Epilogue{true, {{.*}}}, [[Q2:v[0-9]+]], [[S2:v[0-9]+]], {{v[0-9]+}}, 5120, stream)
// FP8-EXPERTS-NOT: quantizeE4M3(
// FP8-EXPERTS: groupedMatmulFP8SettledOffsets([[Q2]], 2 * T, [[S2]], 40, {{w[0-9]+}}, {{w[0-9]+}}, 8, 64, [[OFFSETS]], nullptr, Epilogue{},

// RUN: not moec compile %t/unknown-op.mlir --target=cuda 2>&1 | FileCheck %s --check-prefix=NOOUT
// NOOUT: moec: --target=cuda writes an artifact directory; name it with -o DIR
// RUN: not ls %t/a

// --expert-weights=bf16: the CUDA target only, K a multiple of 8, constant weights.
// RUN: not moec compile %fixtures/mixtral/model.onnx --target=cpu --expert-weights=bf16 -o %t/a 2>&1 | FileCheck %s --check-prefix=BF16-CPU
// BF16-CPU: moec: --expert-weights=bf16 needs --target=cuda (the CPU target keeps f32)
// RUN: not moec compile %fixtures/mixtral/model.onnx --expert-weights=bf16 2>&1 | FileCheck %s --check-prefix=BF16-NOTARGET
// BF16-NOTARGET: moec: --expert-weights needs --target=cuda
// RUN: not moec compile %fixtures/mixtral/model.onnx --target=cuda --expert-weights=f16 -o %t/a 2>&1 | FileCheck %s --check-prefix=BF16-UNKNOWN
// BF16-UNKNOWN: moec: unknown --expert-weights='f16' (f32, bf16, mxfp4)
// RUN: not moec compile %t/bf16-k12.mlir --target=cuda --expert-weights=bf16 -o %t/a 2>&1 | FileCheck %s --check-prefix=BF16-K
// BF16-K: bf16-k12.mlir:3:8: error: cannot store the weights as bf16: K = 12 is not a multiple of 8, which bf16 expert weights need (moe-cast-experts-bf16)
// RUN: not moec compile %t/bf16-argument.mlir --target=cuda --expert-weights=bf16 -o %t/a 2>&1 | FileCheck %s --check-prefix=BF16-ARG
// BF16-ARG: bf16-argument.mlir:2:8: error: cannot store the weights as bf16: they must be an f32 constant of static shape (moe-cast-experts-bf16)
// RUN: not ls %t/a

// Without nvcc: a clear message, no artifact and no staging directory left.
// RUN: env MOEC_NVCC=%t/no-such-nvcc not moec compile %fixtures/mixtral/model.onnx --target=cuda -o %t/a 2>&1 | FileCheck %s --check-prefix=NVCC
// NVCC: error: --target=cuda needs {{CUDA's compiler, but there is no nvcc at '.*no-such-nvcc' \(install the CUDA toolkit or set MOEC_NVCC\)|the runtime's CUDA kernels, which are not at '.*'}}
// RUN: not ls %t/a
// RUN: not ls -d %t/a.tmp-*

// --expert-outputs=bf16: bf16 or MXFP4 expert weights (FP8 experts with
// --expert-weights=bf16) on the CUDA target.
// RUN: not moec compile %fixtures/mixtral/model.onnx --target=cuda --expert-outputs=bf16 -o %t/a 2>&1 | FileCheck %s --check-prefix=OUT-WEIGHTS
// OUT-WEIGHTS: moec: --expert-outputs=bf16 needs --target=cuda --expert-weights=bf16|mxfp4 (the bf16-weight and MXFP4 kernels round their results)
// RUN: not moec compile %fixtures/mixtral/model.onnx --target=cpu --expert-outputs=bf16 -o %t/a 2>&1 | FileCheck %s --check-prefix=OUT-WEIGHTS
// RUN: not moec compile %fixtures/mixtral/model.onnx --target=cpu --expert-weights=mxfp4 --expert-outputs=bf16 -o %t/a 2>&1 | FileCheck %s --check-prefix=OUT-WEIGHTS
// RUN: not moec compile %fixtures/mixtral/model.onnx --expert-outputs=bf16 2>&1 | FileCheck %s --check-prefix=OUT-NOTARGET
// OUT-NOTARGET: moec: --expert-outputs needs --target=cuda
// RUN: not moec compile %fixtures/mixtral/model.onnx --target=cuda --expert-weights=bf16 --expert-outputs=f16 -o %t/a 2>&1 | FileCheck %s --check-prefix=OUT-UNKNOWN
// OUT-UNKNOWN: moec: unknown --expert-outputs='f16' (f32, bf16)
// A whole model's --precision (bf16 by default on cuda) and --kv-cache.
// RUN: not moec compile %fixtures/models/mixtral/checkpoint --target=cpu --precision=bf16 -o %t/a 2>&1 | FileCheck %s --check-prefix=PRECISION-CPU
// PRECISION-CPU: moec: --precision=bf16 needs --target=cuda (the CPU target keeps f32)
// RUN: not moec compile %fixtures/models/mixtral/checkpoint --target=cuda --precision=f16 -o %t/a 2>&1 | FileCheck %s --check-prefix=PRECISION-UNKNOWN
// PRECISION-UNKNOWN: moec: unknown --precision='f16' (bf16, f32)
// RUN: not moec compile %fixtures/models/mixtral/checkpoint --precision=f32 2>&1 | FileCheck %s --check-prefix=PRECISION-NOTARGET
// PRECISION-NOTARGET: moec: --precision needs --target
// RUN: not moec compile %fixtures/models/mixtral/checkpoint --target=cuda --precision=f32 --kv-cache=bf16 -o %t/a 2>&1 | FileCheck %s --check-prefix=CACHE-F32
// RUN: not moec compile %fixtures/models/mixtral/checkpoint --target=cpu --kv-cache=f32 -o %t/a 2>&1 | FileCheck %s --check-prefix=CACHE-F32
// CACHE-F32: moec: --kv-cache applies to --target=cuda --precision=bf16 (an f32 model keeps an f32 KV cache)
// RUN: not moec compile %fixtures/models/mixtral/checkpoint --target=cuda --kv-cache=f16 -o %t/a 2>&1 | FileCheck %s --check-prefix=CACHE-UNKNOWN
// CACHE-UNKNOWN: moec: unknown --kv-cache='f16' (bf16, f32)
// RUN: not moec compile %fixtures/models/mixtral/checkpoint --kv-cache=bf16 2>&1 | FileCheck %s --check-prefix=CACHE-NOTARGET
// CACHE-NOTARGET: moec: --kv-cache needs --target=cuda
// RUN: not ls %t/a

//--- unknown-op.mlir
func.func @f(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %0 = "onnx.Add"(%x, %x) : (tensor<?x64xf32>, tensor<?x64xf32>) -> tensor<?x64xf32>
  return %0 : tensor<?x64xf32>
}

//--- all-reduce.mlir
func.func @f(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %0 = moe.all_reduce %x {ep_size = 2 : i64} : tensor<?x64xf32>
  return %0 : tensor<?x64xf32>
}

//--- bf16.mlir
func.func @f(%x: tensor<?x64xbf16> {onnx.name = "x"}) -> tensor<?x64xbf16> {
  return %x : tensor<?x64xbf16>
}

//--- fp8.mlir
func.func @f(%x: tensor<?x128xf32>, %s: tensor<2x1x1xf32>, %o: tensor<2xi32>) -> tensor<?x128xf32> {
  %w = arith.constant dense<1.0> : tensor<2x128x128xf8E4M3FN>
  %0 = moe.grouped_matmul %x, %w, %o weight_scales(%s : tensor<2x1x1xf32>) : tensor<?x128xf32>, tensor<2x128x128xf8E4M3FN>, tensor<2xi32> -> tensor<?x128xf32>
  return %0 : tensor<?x128xf32>
}

//--- bf16-k12.mlir
func.func @f(%x: tensor<?x12xf32>, %o: tensor<2xi32>) -> tensor<?x16xf32> {
  %w = arith.constant dense<0.5> : tensor<2x16x12xf32>
  %0 = moe.grouped_matmul %x, %w, %o : tensor<?x12xf32>, tensor<2x16x12xf32>, tensor<2xi32> -> tensor<?x16xf32>
  return %0 : tensor<?x16xf32>
}

//--- bf16-argument.mlir
func.func @f(%x: tensor<?x16xf32>, %w: tensor<2x16x16xf32>, %o: tensor<2xi32>) -> tensor<?x16xf32> {
  %0 = moe.grouped_matmul %x, %w, %o : tensor<?x16xf32>, tensor<2x16x16xf32>, tensor<2xi32> -> tensor<?x16xf32>
  return %0 : tensor<?x16xf32>
}

