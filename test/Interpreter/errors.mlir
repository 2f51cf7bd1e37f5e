// Errors are diagnostics that name the op and its location (or the input
// array and the argument), with a non-zero exit; nothing crashes.

// RUN: not moec-interp %s --function unsupported_onnx 2>&1 | FileCheck %s --check-prefix=UNSUP
// RUN: not moec-interp %s --function unsupported_other 2>&1 | FileCheck %s --check-prefix=OTHER
// RUN: not moec-interp %s --function all_reduce 2>&1 | FileCheck %s --check-prefix=ALLREDUCE
// RUN: not moec-interp %s --function declared_shape 2>&1 | FileCheck %s --check-prefix=SHAPE
// RUN: not moec-interp %s --function gather_out_of_range 2>&1 | FileCheck %s --check-prefix=GATHER
// RUN: not moec-interp %s --function duplicate_slot 2>&1 | FileCheck %s --check-prefix=DUP
// RUN: not moec-interp %s --function decreasing_offsets 2>&1 | FileCheck %s --check-prefix=OFFSETS
// RUN: not moec-interp %s --function bad_num_valid 2>&1 | FileCheck %s --check-prefix=NUMVALID
// RUN: not moec-interp %s --function elided 2>&1 | FileCheck %s --check-prefix=ELIDED
// RUN: not moec-interp %s --function complex 2>&1 | FileCheck %s --check-prefix=COMPLEX
// RUN: not moec-interp %s --function huge_range 2>&1 | FileCheck %s --check-prefix=HUGE
// RUN: not moec-interp %s --function odd_gated 2>&1 | FileCheck %s --check-prefix=ODD
// RUN: not moec-interp %s 2>&1 | FileCheck %s --check-prefix=WHICH
// RUN: not moec-interp %S/Inputs/einsum.onnx --inputs %S/Inputs/einsum.npz 2>&1 | FileCheck %s --check-prefix=ONNXNODE
// RUN: not moec-interp %s --function nonexistent 2>&1 | FileCheck %s --check-prefix=NOFUNC

// Inputs: names, ranks, static dims, dtypes (Inputs/make_inputs.py).
// RUN: not moec-interp %s --function two_args 2>&1 | FileCheck %s --check-prefix=NOINPUTS
// RUN: not moec-interp %s --function two_args --inputs %S/Inputs/bad-missing.npz 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: not moec-interp %s --function two_args --inputs %S/Inputs/bad-unknown.npz 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not moec-interp %s --function two_args --inputs %S/Inputs/bad-rank.npz 2>&1 | FileCheck %s --check-prefix=RANK
// RUN: not moec-interp %s --function two_args --inputs %S/Inputs/bad-static-dim.npz 2>&1 | FileCheck %s --check-prefix=DIM
// RUN: not moec-interp %s --function two_args --inputs %S/Inputs/bad-float-for-int.npz 2>&1 | FileCheck %s --check-prefix=FLOATINT
// RUN: not moec-interp %s --function two_args --inputs %S/Inputs/bad-int-for-float.npz 2>&1 | FileCheck %s --check-prefix=INTFLOAT
// RUN: not moec-interp %s --function two_args --inputs %S/Inputs/bad-int-range.npz 2>&1 | FileCheck %s --check-prefix=RANGE
// RUN: not moec-interp %s --function two_args --inputs %S/Inputs/no-such-file.npz 2>&1 | FileCheck %s --check-prefix=NOFILE
// f64 for f32 is rounded, i64 for i32 checked and converted:
// RUN: moec-interp %s --function two_args --inputs %S/Inputs/good-f64-and-i64.npz --print | FileCheck %s --check-prefix=CONVERT
// A mismatch (and an expected file without the output) exits non-zero:
// RUN: not moec-interp %s --function two_args --inputs %S/Inputs/good-f64-and-i64.npz --expected-outputs %S/Inputs/good-f64-and-i64.npz 2>&1 | FileCheck %s --check-prefix=MISMATCH

// UNSUP: errors.mlir:[[@LINE+3]]:8: error: 'onnx.Einsum' op is not supported by the interpreter
func.func @unsupported_onnx() -> tensor<2x2xf32> {
  %a = arith.constant dense<1.0> : tensor<2x2xf32>
  %y = "onnx.Einsum"(%a, %a) {equation = "ij,jk->ik"} : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  return %y : tensor<2x2xf32>
}

// OTHER: errors.mlir:[[@LINE+3]]:8: error: 'arith.remf' op is not supported by the interpreter
func.func @unsupported_other() -> tensor<2xf32> {
  %a = arith.constant dense<1.0> : tensor<2xf32>
  %y = arith.remf %a, %a : tensor<2xf32>
  return %y : tensor<2xf32>
}

// ALLREDUCE: errors.mlir:[[@LINE+3]]:8: error: 'moe.all_reduce' op sums the partial outputs of 2 expert-parallel ranks; the interpreter runs one rank at a time (moec-interp --ep-rank R gives rank R's partial sum)
func.func @all_reduce() -> tensor<2x2xf32> {
  %a = arith.constant dense<1.0> : tensor<2x2xf32>
  %y = moe.all_reduce %a {ep_size = 2 : i64} : tensor<2x2xf32>
  return %y : tensor<2x2xf32>
}

// SHAPE: errors.mlir:[[@LINE+4]]:8: error: 'onnx.Reshape' op result 0 has shape [2, 6] at run time, which does not fit its declared type 'tensor<3x4xf32>'
func.func @declared_shape() -> tensor<3x4xf32> {
  %a = arith.constant dense<1.0> : tensor<12xf32>
  %s = arith.constant dense<[2, 6]> : tensor<2xi64>
  %y = "onnx.Reshape"(%a, %s) : (tensor<12xf32>, tensor<2xi64>) -> tensor<3x4xf32>
  return %y : tensor<3x4xf32>
}

// GATHER: errors.mlir:[[@LINE+4]]:8: error: 'onnx.Gather' op index 3 is out of range for axis 0 of size 3
func.func @gather_out_of_range() -> tensor<2xf32> {
  %a = arith.constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
  %i = arith.constant dense<[-3, 3]> : tensor<2xi64>
  %y = "onnx.Gather"(%a, %i) : (tensor<3xf32>, tensor<2xi64>) -> tensor<2xf32>
  return %y : tensor<2xf32>
}

// DUP: errors.mlir:[[@LINE+6]]:8: error: 'moe.combine' op permutation lists slot 1 twice (again at row 1)
func.func @duplicate_slot() -> tensor<1x2xf32> {
  %rows = arith.constant dense<1.0> : tensor<2x2xf32>
  %p = arith.constant dense<[1, 1]> : tensor<2xi32>
  %w = arith.constant dense<1.0> : tensor<1x2xf32>
  %n = arith.constant dense<2> : tensor<i32>
  %y = moe.combine %rows, %p, %w, %n : tensor<2x2xf32>, tensor<2xi32>, tensor<1x2xf32>, tensor<i32> -> tensor<1x2xf32>
  return %y : tensor<1x2xf32>
}

// OFFSETS: errors.mlir:[[@LINE+5]]:8: error: 'moe.grouped_matmul' op offsets[1] = 1 is not an inclusive end in [2, 3]
func.func @decreasing_offsets() -> tensor<3x2xf32> {
  %x = arith.constant dense<1.0> : tensor<3x2xf32>
  %w = arith.constant dense<1.0> : tensor<2x2x2xf32>
  %o = arith.constant dense<[2, 1]> : tensor<2xi32>
  %y = moe.grouped_matmul %x, %w, %o : tensor<3x2xf32>, tensor<2x2x2xf32>, tensor<2xi32> -> tensor<3x2xf32>
  return %y : tensor<3x2xf32>
}

// NUMVALID: errors.mlir:[[@LINE+5]]:8: error: 'moe.permute' op num_valid = 5 is outside [0, 4]
func.func @bad_num_valid() -> tensor<4x2xf32> {
  %x = arith.constant dense<1.0> : tensor<2x2xf32>
  %p = arith.constant dense<[0, 1, 2, 3]> : tensor<4xi32>
  %n = arith.constant dense<5> : tensor<i32>
  %y = moe.permute %x, %p, %n {top_k = 2 : i64} : tensor<2x2xf32>, tensor<4xi32>, tensor<i32> -> tensor<4x2xf32>
  return %y : tensor<4x2xf32>
}

// ELIDED: errors.mlir:[[@LINE+2]]:8: error: dense_resource<__elided__> has no data (elided, or missing from the file's dialect_resources)
func.func @elided() -> tensor<4xf32> {
  %a = "onnx.Constant"() {value = dense_resource<__elided__> : tensor<4xf32>} : () -> tensor<4xf32>
  return %a : tensor<4xf32>
}

// COMPLEX: errors.mlir:[[@LINE+2]]:8: error: 'arith.constant' op result 0 has element type 'complex<f32>', which the interpreter does not support
func.func @complex() -> tensor<1xcomplex<f32>> {
  %a = arith.constant dense<(1.0, 2.0)> : tensor<1xcomplex<f32>>
  return %a : tensor<1xcomplex<f32>>
}

// HUGE: errors.mlir:[[@LINE+5]]:8: error: 'onnx.Range' op would make a result of shape [1099511627776], more than the interpreter's 2^31 elements
func.func @huge_range() -> tensor<?xf32> {
  %start = arith.constant dense<0.0> : tensor<f32>
  %limit = arith.constant dense<1099511627776.0> : tensor<f32>
  %delta = arith.constant dense<1.0> : tensor<f32>
  %y = "onnx.Range"(%start, %limit, %delta) : (tensor<f32>, tensor<f32>, tensor<f32>) -> tensor<?xf32>
  return %y : tensor<?xf32>
}

// A dynamic N that turns out odd at run time cannot hold gate and up halves.
// ODD: errors.mlir:[[@LINE+4]]:8: error: 'moe.activation' op has 3 columns at run time; the gated layout 'concatenated' needs an even number
func.func @odd_gated() -> tensor<1x?xf32> {
  %a = arith.constant dense<1.0> : tensor<1x3xf32>
  %x = "onnx.Identity"(%a) : (tensor<1x3xf32>) -> tensor<1x?xf32>
  %y = moe.activation %x {activation = #moe.activation<silu>, layout = #moe.gate_up_layout<concatenated>}
      : tensor<1x?xf32> -> tensor<1x?xf32>
  return %y : tensor<1x?xf32>
}

// An imported model has no source text: the error names the file and the node.
// ONNXNODE: {{.*}}einsum.onnx: node 'my_einsum': error: 'onnx.Einsum' op is not supported by the interpreter

// WHICH: moec-interp: error: {{.*}}errors.mlir holds {{[0-9]+}} functions (@unsupported_onnx, @unsupported_other, {{.*}}); choose one with --function
// NOFUNC: moec-interp: error: no function @nonexistent with a body in {{.*}}errors.mlir

// NOINPUTS: moec-interp: error: @two_args takes 2 arguments; give them with --inputs
// MISSING: moec-interp: error: {{.*}}bad-missing.npz: no input array named 'ids' (argument 1 of @two_args)
// UNKNOWN: moec-interp: error: {{.*}}bad-unknown.npz: input array 'idz' names no argument of @two_args (arguments: x, ids)
// RANK: moec-interp: error: {{.*}}bad-rank.npz: input 'x' is f32[5, 4, 1], but the argument is tensor<?x4xf32>
// DIM: moec-interp: error: {{.*}}bad-static-dim.npz: input 'ids' is i64[3, 3], but the argument is tensor<2x3xi32>
// FLOATINT: moec-interp: error: {{.*}}bad-float-for-int.npz: input 'ids' is f32[2, 3], but the argument is tensor<2x3xi32> (it takes an integer array)
// INTFLOAT: moec-interp: error: {{.*}}bad-int-for-float.npz: input 'x' is i64[5, 4], but the argument is tensor<?x4xf32> (it takes a floating-point array)
// RANGE: moec-interp: error: {{.*}}bad-int-range.npz: input 'ids' element 5 is 1099511627776, which i32 cannot hold
// NOFILE: moec-interp: error: {{.*}}no-such-file.npz
// CONVERT: x_plus_1 = tensor<5x4xf32> {{\[}}[1.10000002, 1.10000002, 1.10000002, 1.10000002],
// CONVERT: ids = tensor<2x3xi32> {{\[}}[1, 1, 1], [1, 1, 1]]
// MISMATCH: x_plus_1: MISSING from {{.*}}good-f64-and-i64.npz
// MISMATCH: ids [2, 3]: max abs err 0.00e+00, max rel err 0.00e+00: ok
// MISMATCH: note: {{.*}}good-f64-and-i64.npz array 'x' names no output; not compared
func.func @two_args(%x: tensor<?x4xf32> {onnx.name = "x"}, %ids: tensor<2x3xi32> {onnx.name = "ids"})
    -> (tensor<?x4xf32> {onnx.name = "x_plus_1"}, tensor<2x3xi32> {onnx.name = "ids"}) {
  %one = arith.constant dense<1.0> : tensor<f32>
  %y = "onnx.Add"(%x, %one) : (tensor<?x4xf32>, tensor<f32>) -> tensor<?x4xf32>
  return %y, %ids : tensor<?x4xf32>, tensor<2x3xi32>
}
