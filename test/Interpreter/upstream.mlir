// The interpreter's upstream ops (interpreter/lib/UpstreamOps.cpp),
// which hand-written MoE blocks are made of. Expected values by hand.

// RUN: moec-interp %s --function loop --print | FileCheck %s --check-prefix=LOOP
// RUN: moec-interp %s --function matmul_transposed --print | FileCheck %s --check-prefix=MATMUL
// RUN: moec-interp %s --function reduction --print | FileCheck %s --check-prefix=REDUCE
// RUN: moec-interp %s --function slices --print | FileCheck %s --check-prefix=SLICE
// RUN: moec-interp %s --function scalars --print | FileCheck %s --check-prefix=SCALAR
// RUN: moec-interp %s --function rounding --print | FileCheck %s --check-prefix=ROUND
// RUN: not moec-interp %s --function slice_out_of_range 2>&1 | FileCheck %s --check-prefix=SLICEOOR
// RUN: not moec-interp %s --function bad_step 2>&1 | FileCheck %s --check-prefix=STEP
// RUN: not moec-interp %s --function unsupported_body 2>&1 | FileCheck %s --check-prefix=BODY
// RUN: not moec-interp %s --function map_out_of_range 2>&1 | FileCheck %s --check-prefix=MAPOOR
// RUN: moec-interp %s --function reshapes --print | FileCheck %s --check-prefix=RESHAPE
// RUN: not moec-interp %s --function expand_mismatch 2>&1 | FileCheck %s --check-prefix=EXPANDBAD

#id = affine_map<(d0) -> (d0)>
#id2 = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>

// scf.for over e = 1, 3, 5 (step 2, to 6) adds e * [1, 2, 3] to zeros through
// a linalg.generic that reads the induction variable, cast to f32.
// LOOP: result0 = tensor<3xf32> [9, 18, 27]
func.func @loop() -> tensor<3xf32> {
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c6 = arith.constant 6 : index
  %zero = arith.constant 0.0 : f32
  %v = arith.constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
  %init = tensor.empty() : tensor<3xf32>
  %acc0 = linalg.fill ins(%zero : f32) outs(%init : tensor<3xf32>) -> tensor<3xf32>
  %r = scf.for %e = %c1 to %c6 step %c2 iter_args(%acc = %acc0) -> (tensor<3xf32>) {
    %ei = arith.index_cast %e : index to i64
    %ef = arith.sitofp %ei : i64 to f32
    %next = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
        ins(%v : tensor<3xf32>) outs(%acc : tensor<3xf32>) {
    ^bb0(%a: f32, %o: f32):
      %m = arith.mulf %a, %ef : f32
      %s = arith.addf %o, %m : f32
      linalg.yield %s : f32
    } -> tensor<3xf32>
    scf.yield %next : tensor<3xf32>
  }
  return %r : tensor<3xf32>
}

// x [2, 3] times W [2, 3] transposed: [[1,2,3],[4,5,6]] · [[1,0,1],[0,1,0]]ᵀ
// = [[4, 2], [10, 5]], accumulated into ones: [[5, 3], [11, 6]].
// MATMUL: result0 = tensor<2x2xf32> {{\[}}[5, 3], [11, 6]]
func.func @matmul_transposed() -> tensor<2x2xf32> {
  %x = arith.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>
  %w = arith.constant dense<[[1.0, 0.0, 1.0], [0.0, 1.0, 0.0]]> : tensor<2x3xf32>
  %one = arith.constant 1.0 : f32
  %init = tensor.empty() : tensor<2x2xf32>
  %ones = linalg.fill ins(%one : f32) outs(%init : tensor<2x2xf32>) -> tensor<2x2xf32>
  %y = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>,
                                      affine_map<(m, n, k) -> (n, k)>,
                                      affine_map<(m, n, k) -> (m, n)>]
         ins(%x, %w : tensor<2x3xf32>, tensor<2x3xf32>) outs(%ones : tensor<2x2xf32>) -> tensor<2x2xf32>
  return %y : tensor<2x2xf32>
}

// Per row, the sum of w[t, k] where ids[t, k] == 2 (a masked reduction over
// k), and w[t, 0] read for every k by the map (d0, d1) -> (d0, 0), summed.
// REDUCE: result0 = tensor<3xf32> [0.5, 0, 1]
// REDUCE: result1 = tensor<3xf32> [1, 0.5, 1]
func.func @reduction() -> (tensor<3xf32>, tensor<3xf32>) {
  %ids = arith.constant dense<[[2, 1], [0, 3], [2, 2]]> : tensor<3x2xi64>
  %w = arith.constant dense<[[0.5, 0.25], [0.25, 0.75], [0.5, 0.5]]> : tensor<3x2xf32>
  %two = arith.constant 2 : i64
  %zero = arith.constant 0.0 : f32
  %init = tensor.empty() : tensor<3xf32>
  %zeros = linalg.fill ins(%zero : f32) outs(%init : tensor<3xf32>) -> tensor<3xf32>
  %r = linalg.generic {indexing_maps = [#id2, #id2, #row], iterator_types = ["parallel", "reduction"]}
      ins(%ids, %w : tensor<3x2xi64>, tensor<3x2xf32>) outs(%zeros : tensor<3xf32>) {
  ^bb0(%i: i64, %v: f32, %acc: f32):
    %hit = arith.cmpi eq, %i, %two : i64
    %sel = arith.select %hit, %v, %zero : f32
    %s = arith.addf %acc, %sel : f32
    linalg.yield %s : f32
  } -> tensor<3xf32>
  %b = linalg.generic {indexing_maps = [#id2, affine_map<(d0, d1) -> (d0, 0)>, #row],
                       iterator_types = ["parallel", "reduction"]}
      ins(%ids, %w : tensor<3x2xi64>, tensor<3x2xf32>) outs(%zeros : tensor<3xf32>) {
  ^bb0(%i: i64, %v: f32, %acc: f32):
    %s = arith.addf %acc, %v : f32
    linalg.yield %s : f32
  } -> tensor<3xf32>
  return %r, %b : tensor<3xf32>, tensor<3xf32>
}

// extract_slice at a dynamic offset with stride 2, rank-reduced ([1, 3, 5],
// doubled by an elementwise addf); tensor.dim;
// tensor.empty with a dynamic size; tensor.concat; linalg.index.
// SLICE: result0 = tensor<3xf32> [2, 6, 10]
// SLICE: result1 = tensor<2x3xf32> {{\[}}[0, 1, 2], [10, 11, 12]]
// SLICE: result2 = tensor<5xf32> [0, 1, 2, 5, 11]
func.func @slices() -> (tensor<3xf32>, tensor<2x3xf32>, tensor<5xf32>) {
  %src = arith.constant dense<[[0.0, 1.0, 2.0, 3.0, 4.0, 5.0], [6.0, 7.0, 8.0, 9.0, 10.0, 11.0]]> : tensor<2x6xf32>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %s = tensor.extract_slice %src[%c0, %c1] [1, 3] [1, 2] : tensor<2x6xf32> to tensor<3xf32>
  %t = arith.constant dense<[[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]]> : tensor<2x3xf32>
  %plus = arith.addf %s, %s : tensor<3xf32>
  %n = tensor.dim %plus, %c0 : tensor<3xf32>
  %e = tensor.empty(%n) : tensor<2x?xf32>
  %idx = linalg.generic {indexing_maps = [#id2], iterator_types = ["parallel", "parallel"]}
      outs(%e : tensor<2x?xf32>) {
  ^bb0(%o: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %ten = arith.constant 10 : index
    %ij = arith.muli %i, %ten : index
    %k = arith.addi %ij, %j : index
    %ki = arith.index_cast %k : index to i64
    %kf = arith.sitofp %ki : i64 to f32
    linalg.yield %kf : f32
  } -> tensor<2x?xf32>
  %fixed = tensor.extract_slice %idx[0, 0] [2, 3] [1, 1] : tensor<2x?xf32> to tensor<2x3xf32>
  %head = tensor.extract_slice %src[0, 0] [1, 3] [1, 1] : tensor<2x6xf32> to tensor<3xf32>
  %tail = tensor.extract_slice %src[0, 5] [2, 1] [1, 1] : tensor<2x6xf32> to tensor<2xf32>
  %cat = tensor.concat dim(0) %head, %tail : (tensor<3xf32>, tensor<2xf32>) -> tensor<5xf32>
  return %plus, %fixed, %cat : tensor<3xf32>, tensor<2x3xf32>, tensor<5xf32>
}

// Elementwise arith and math on tensors, with a tensor condition for select
// and NaN-propagating maximumf: |a| by select, select(a < 0, a, max(a, 0)),
// exp (rounded to f32).
// SCALAR: result0 = tensor<4xf32> [1, 2, nan, 0.5]
// SCALAR: result1 = tensor<4xf32> [1, -2, nan, -0.5]
// SCALAR: result2 = tensor<4xf32> [2.71828175, 1, 1, 0.5]
func.func @scalars() -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %a = arith.constant dense<[1.0, -2.0, 0x7FC00000, -0.5]> : tensor<4xf32>
  %z = arith.constant dense<0.0> : tensor<4xf32>
  %pos = arith.cmpf ogt, %a, %z : tensor<4xf32>
  %neg = arith.negf %a : tensor<4xf32>
  %sel = arith.select %pos, %a, %neg : tensor<4xi1>, tensor<4xf32>
  %m = arith.maximumf %a, %z : tensor<4xf32>
  %lt = arith.cmpf olt, %a, %z : tensor<4xf32>
  %r2 = arith.select %lt, %a, %m : tensor<4xi1>, tensor<4xf32>
  %one = arith.constant dense<[1.0, 0.0, 0.0, -0.693147182]> : tensor<4xf32>
  %e = math.exp %one : tensor<4xf32>
  return %sel, %r2, %e : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// Each scalar op in a body rounds to its type: 1 + 2^-30 is 1 in f32, so
// (1 + 2^-30) - 1 is 0 in f32 and 2^-30 in f64.
// ROUND: result0 = tensor<1xf32> [0]
// ROUND: result1 = tensor<1xf64> [9.31322574{{[0-9]*}}e-10]
func.func @rounding() -> (tensor<1xf32>, tensor<1xf64>) {
  %x32 = arith.constant dense<1.0> : tensor<1xf32>
  %x64 = arith.constant dense<1.0> : tensor<1xf64>
  %i32 = tensor.empty() : tensor<1xf32>
  %i64 = tensor.empty() : tensor<1xf64>
  %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%x32 : tensor<1xf32>) outs(%i32 : tensor<1xf32>) {
  ^bb0(%v: f32, %o: f32):
    %eps = arith.constant 9.31322574615478515625e-10 : f32
    %s = arith.addf %v, %eps : f32
    %d = arith.subf %s, %v : f32
    linalg.yield %d : f32
  } -> tensor<1xf32>
  %b = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%x64 : tensor<1xf64>) outs(%i64 : tensor<1xf64>) {
  ^bb0(%v: f64, %o: f64):
    %eps = arith.constant 9.31322574615478515625e-10 : f64
    %s = arith.addf %v, %eps : f64
    %d = arith.subf %s, %v : f64
    linalg.yield %d : f64
  } -> tensor<1xf64>
  return %a, %b : tensor<1xf32>, tensor<1xf64>
}

// SLICEOOR: upstream.mlir:[[@LINE+4]]:8: error: 'tensor.extract_slice' op reads dimension 1 at offset 4, size 2, stride 2 at run time, outside the source's 6
func.func @slice_out_of_range() -> tensor<2xf32> {
  %src = arith.constant dense<[[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]]> : tensor<1x6xf32>
  %c4 = arith.constant 4 : index
  %s = tensor.extract_slice %src[0, %c4] [1, 2] [1, 2] : tensor<1x6xf32> to tensor<2xf32>
  return %s : tensor<2xf32>
}

// STEP: upstream.mlir:[[@LINE+6]]:8: error: 'scf.for' op has step 0 at run time; it must be positive
func.func @bad_step() -> tensor<2xf32> {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %step = arith.subi %c4, %c4 : index
  %v = arith.constant dense<1.0> : tensor<2xf32>
  %r = scf.for %i = %c0 to %c4 step %step iter_args(%a = %v) -> (tensor<2xf32>) {
    scf.yield %a : tensor<2xf32>
  }
  return %r : tensor<2xf32>
}

// BODY: upstream.mlir:[[@LINE+6]]:10: error: 'arith.remf' op in a linalg body is not supported by the interpreter
func.func @unsupported_body() -> tensor<2xf32> {
  %v = arith.constant dense<1.0> : tensor<2xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%v : tensor<2xf32>) outs(%v : tensor<2xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.remf %a, %a : f32
    linalg.yield %m : f32
  } -> tensor<2xf32>
  return %r : tensor<2xf32>
}

// A map past the end of a dynamically shaped operand (the verifier checks
// static shapes only).
// MAPOOR: upstream.mlir:[[@LINE+5]]:8: error: 'linalg.generic' op operand 0 is read at 2 in dimension 0, outside its 2
func.func @map_out_of_range() -> tensor<?xf32> {
  %c2 = arith.constant 2 : index
  %s = arith.constant dense<1.0> : tensor<2xf32>
  %v = tensor.extract_slice %s[0] [%c2] [1] : tensor<2xf32> to tensor<?xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0 + 1)>, #id], iterator_types = ["parallel"]}
      ins(%v : tensor<?xf32>) outs(%v : tensor<?xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  } -> tensor<?xf32>
  return %r : tensor<?xf32>
}

// tensor.collapse_shape and tensor.expand_shape (moe-legalize-for-codegen's
// views of a block's [B, T, H] input and output): the same row-major values,
// the dynamic batch of the expanded side taken from its operand.
// RESHAPE: result0 = tensor<6x2xf32> {{\[}}[1, 2], [3, 4], [5, 6], [7, 8], [9, 10], [11, 12]]
// RESHAPE: result1 = tensor<2x3x2xf32> {{\[\[}}[1, 2], [3, 4], [5, 6]], {{\[}}[7, 8], [9, 10], [11, 12]]]
func.func @reshapes() -> (tensor<6x2xf32>, tensor<?x3x2xf32>) {
  %x = arith.constant dense<[[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]],
                             [[7.0, 8.0], [9.0, 10.0], [11.0, 12.0]]]> : tensor<2x3x2xf32>
  %rows = tensor.collapse_shape %x [[0, 1], [2]] : tensor<2x3x2xf32> into tensor<6x2xf32>
  %n = arith.constant 6 : index
  %some = tensor.extract_slice %rows[0, 0] [%n, 2] [1, 1] : tensor<6x2xf32> to tensor<?x2xf32>
  %b = arith.constant 2 : index
  %back = tensor.expand_shape %some [[0, 1], [2]] output_shape [%b, 3, 2]
      : tensor<?x2xf32> into tensor<?x3x2xf32>
  return %rows, %back : tensor<6x2xf32>, tensor<?x3x2xf32>
}

// A dynamic size that does not divide the rows: an error naming the op.
// EXPANDBAD: error: 'tensor.expand_shape' op gets [6, 2] at run time: group 0 of [4, 3, 2] holds 12 elements, not 6
func.func @expand_mismatch() -> tensor<?x3x2xf32> {
  %rows = arith.constant dense<1.0> : tensor<6x2xf32>
  %n = arith.constant 6 : index
  %some = tensor.extract_slice %rows[0, 0] [%n, 2] [1, 1] : tensor<6x2xf32> to tensor<?x2xf32>
  %b = arith.constant 4 : index
  %e = tensor.expand_shape %some [[0, 1], [2]] output_shape [%b, 3, 2]
      : tensor<?x2xf32> into tensor<?x3x2xf32>
  return %e : tensor<?x3x2xf32>
}
