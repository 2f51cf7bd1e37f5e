// `moec compile --target=cpu` generates code for the grouped phase only; every
// op or type it cannot generate code for is an error at the op, naming it and
// the reason, with a non-zero exit and no artifact left behind.

// RUN: rm -rf %t && split-file %s %t

// RUN: not moec compile %t/unknown-op.mlir --target=cpu -o %t/a 2>&1 | FileCheck %s --check-prefix=OP
// OP: unknown-op.mlir:3:8: error: cannot legalise 'onnx.Add' for codegen: only func, arith, tensor and moe ops (and onnx constants and views) have code
// RUN: not ls %t/a

// RUN: not moec compile %t/all-reduce.mlir --target=cpu -o %t/a 2>&1 | FileCheck %s --check-prefix=ALLREDUCE
// ALLREDUCE: all-reduce.mlir:3:8: error: cannot generate code for 'moe.all_reduce': an all-reduce in a program compiled for one rank (--ep-rank); compile without --ep-rank for the artifact that every rank loads
// RUN: not ls %t/a

// RUN: not moec compile %t/bf16.mlir --target=cpu -o %t/a 2>&1 | FileCheck %s --check-prefix=BF16
// BF16: error: cannot generate code for input 'x' of element type 'bf16': the CPU target takes f32 tensors (and i32/i64 expert ids) only

// FP8 stays inside the grouped matmul: an e4m3 output is not something a caller can take.
// RUN: not moec compile %t/fp8-output.mlir --target=cpu -o %t/a 2>&1 | FileCheck %s --check-prefix=FP8
// FP8: fp8-output.mlir:3:3: error: cannot generate code for output 'output0' of element type 'f8E4M3FN': the CPU target takes f32 tensors (and i32/i64 expert ids) only

// RUN: not moec compile %t/inner-reshape.mlir --target=cpu -o %t/a 2>&1 | FileCheck %s --check-prefix=RESHAPE
// RESHAPE: inner-reshape.mlir:3:8: error: cannot legalise 'onnx.Reshape' for codegen: it changes the innermost dimension ('tensor<?x64xf32>' to 'tensor<?x8x8xf32>'); only changes of the leading dimensions are views

// RUN: not moec compile %t/two-functions.mlir --target=cpu -o %t/a 2>&1 | FileCheck %s --check-prefix=TWO
// TWO: error: cannot generate code: the module holds 2 functions with a body; the CPU target compiles exactly one

// The artifact directory replaces only an earlier artifact.
// RUN: mkdir -p %t/foreign && touch %t/foreign/precious
// RUN: not moec compile %fixtures/ort-moe/model.onnx --target=cpu -o %t/foreign 2>&1 | FileCheck %s --check-prefix=FOREIGN
// FOREIGN: error: '{{.*}}foreign' holds 'precious', which is not part of a moec artifact; not overwriting it
// RUN: ls %t/foreign/precious
// RUN: not moec compile %fixtures/ort-moe/model.onnx --target=cpu -o %t/foreign/precious 2>&1 | FileCheck %s --check-prefix=FILE
// FILE: error: '{{.*}}precious' exists and is not an artifact directory
// RUN: moec compile %fixtures/ort-moe/model.onnx --target=cpu -o %t/twice
// RUN: moec compile %fixtures/ort-moe/model.onnx --target=cpu -o %t/twice
// RUN: ls %t/twice/model.so %t/twice/weights.bin %t/twice/manifest.txt
// RUN: not ls %t/twice.tmp-*

// An imported model names the ONNX node. One rank's program (--ep-rank) has
// no artifact; the one for every rank (--ep-size alone) has.
// RUN: not moec compile %fixtures/mixtral/model.onnx --ep-size=2 --ep-rank=1 --target=cpu -o %t/a 2>&1 | FileCheck %s --check-prefix=ONNX
// ONNX: mixtral/model.onnx:0:0: error: cannot generate code for 'moe.all_reduce' (ONNX node 'node_sum_2'): an all-reduce in a program compiled for one rank (--ep-rank); compile without --ep-rank for the artifact that every rank loads
// RUN: not ls %t/a

// An output whose rows are the T·K routed slots, not the T tokens.
// RUN: not moec compile %t/slots-output.mlir --target=cpu -o %t/a 2>&1 | FileCheck %s --check-prefix=SLOTS
// SLOTS: slots-output.mlir:4:3: error: cannot generate code for 'func.return': result 0 has shape [?,8] ('?': a multiple of the token count T), the output is declared [-1,8]; an output's dynamic dimension must be T itself

// Flags of the driver.
// RUN: not moec compile %t/unknown-op.mlir --target=tpu -o %t/a 2>&1 | FileCheck %s --check-prefix=TARGET
// TARGET: moec: unknown target 'tpu' (cpu, cuda)
// RUN: not moec compile %t/unknown-op.mlir --target=cpu 2>&1 | FileCheck %s --check-prefix=NOOUT
// NOOUT: moec: --target=cpu writes an artifact directory; name it with -o DIR
// RUN: not moec compile %t/unknown-op.mlir --target=cpu --compile-to=moe -o %t/a 2>&1 | FileCheck %s --check-prefix=PHASE
// PHASE: moec: --target compiles the grouped (or fp8) phase; drop --compile-to=moe
// RUN: not moec compile %t/unknown-op.mlir --target=cpu --max-tokens=0 -o %t/a 2>&1 | FileCheck %s --check-prefix=TOKENS
// TOKENS: moec: --max-tokens must be at least 1
// RUN: not ls %t/a

//--- unknown-op.mlir
// A leftover ONNX op that is not a view.
func.func @f(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %0 = "onnx.Add"(%x, %x) : (tensor<?x64xf32>, tensor<?x64xf32>) -> tensor<?x64xf32>
  return %0 : tensor<?x64xf32>
}

//--- all-reduce.mlir
// The output of an expert-parallel rank.
func.func @f(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %0 = moe.all_reduce %x {ep_size = 2 : i64} : tensor<?x64xf32>
  return %0 : tensor<?x64xf32>
}

//--- bf16.mlir
func.func @f(%x: tensor<?x64xbf16> {onnx.name = "x"}) -> tensor<?x64xbf16> {
  return %x : tensor<?x64xbf16>
}

//--- fp8-output.mlir
func.func @f(%x: tensor<?x128xf32>) -> tensor<?x128xf8E4M3FN> {
  %q, %s = moe.quantize %x : tensor<?x128xf32> -> tensor<?x128xf8E4M3FN>, tensor<?x1xf32>
  return %q : tensor<?x128xf8E4M3FN>
}

//--- inner-reshape.mlir
func.func @f(%x: tensor<?x64xf32>) -> tensor<?x8x8xf32> {
  %shape = "onnx.Constant"() <{value = dense<[-1, 8, 8]> : tensor<3xi64>}> : () -> tensor<3xi64>
  %0 = "onnx.Reshape"(%x, %shape) : (tensor<?x64xf32>, tensor<3xi64>) -> tensor<?x8x8xf32>
  return %0 : tensor<?x8x8xf32>
}

//--- two-functions.mlir
func.func @f(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  return %x : tensor<?x64xf32>
}
func.func @g(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  return %x : tensor<?x64xf32>
}

//--- slots-output.mlir
func.func @f(%x: tensor<?x8xf32>, %ids: tensor<?x2xi32>) -> tensor<?x8xf32> {
  %perm, %offsets, %num_valid = moe.sort %ids {num_experts = 4 : i64} : tensor<?x2xi32> -> tensor<?xi32>, tensor<4xi32>, tensor<i32>
  %rows = moe.permute %x, %perm, %num_valid {top_k = 2 : i64} : tensor<?x8xf32>, tensor<?xi32>, tensor<i32> -> tensor<?x8xf32>
  return %rows : tensor<?x8xf32>
}
