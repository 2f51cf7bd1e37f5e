// RUN: moec-opt %s -split-input-file -moe-legalize-for-codegen -verify-diagnostics | FileCheck %s

// After it only func, arith, tensor and moe ops remain: the onnx constants
// and views that codegen accepts today (Emitter::operand, isView/emitView)
// become their upstream equivalents.

// onnx.Constant becomes arith.constant with the same attribute (a
// dense_resource blob is the same blob, not a copy) and its moec.name.
// CHECK-LABEL: func.func @constants
// CHECK-NOT: onnx.
// CHECK-DAG: %[[W:.*]] = arith.constant {moec.name = "w"} dense<2.500000e-01> : tensor<2x8x8xf32>
// CHECK-DAG: %[[R:.*]] = arith.constant dense_resource<blob> : tensor<2xf32>
// CHECK-DAG: %[[F:.*]] = arith.constant dense<1.500000e+00> : tensor<f32>
// CHECK-DAG: %[[I:.*]] = arith.constant dense<[3, 4]> : tensor<2xi64>
// CHECK: moe.grouped_matmul %{{.*}}, %[[W]], %{{.*}}
// CHECK: return %{{.*}}, %[[R]], %[[F]], %[[I]]
func.func @constants(%x: tensor<?x8xf32>, %offsets: tensor<2xi32>)
    -> (tensor<?x8xf32>, tensor<2xf32>, tensor<f32>, tensor<2xi64>) {
  %w = "onnx.Constant"() {moec.name = "w", value = dense<0.25> : tensor<2x8x8xf32>} : () -> tensor<2x8x8xf32>
  %r = "onnx.Constant"() {value = dense_resource<blob> : tensor<2xf32>} : () -> tensor<2xf32>
  %f = "onnx.Constant"() {value_float = 1.5 : f32} : () -> tensor<f32>
  %i = "onnx.Constant"() {value_ints = array<i64: 3, 4>} : () -> tensor<2xi64>
  %y = moe.grouped_matmul %x, %w, %offsets : tensor<?x8xf32>, tensor<2x8x8xf32>, tensor<2xi32> -> tensor<?x8xf32>
  return %y, %r, %f, %i : tensor<?x8xf32>, tensor<2xf32>, tensor<f32>, tensor<2xi64>
}
{-#
  dialect_resources: {
    builtin: {
      blob: "0x040000000000803F00000040"
    }
  }
#-}

// -----

// Views that keep the innermost dimension: a Reshape or Squeeze to fewer
// dimensions is a collapse, an Unsqueeze an expansion (the token count stays
// dynamic), an Identity is its operand, a Flatten a collapse, and a static
// reshape of the leading dimensions a tensor.reshape with a constant shape.
// Their shape and axes operands are dropped with them.
// CHECK-LABEL: func.func @views
// CHECK-SAME: (%[[X:.*]]: tensor<1x?x16xf32>, %[[S:.*]]: tensor<?x1x16xf32>, %[[B:.*]]: tensor<2x3x16xf32>)
// CHECK-NOT: onnx.
// CHECK-NOT: dense<0> : tensor<1xi64>
// CHECK: %[[R:.*]] = tensor.collapse_shape %[[X]] {{\[\[}}0, 1], [2]] : tensor<1x?x16xf32> into tensor<?x16xf32>
// CHECK: %[[Q:.*]] = tensor.collapse_shape %[[S]] {{\[\[}}0], [1, 2]] : tensor<?x1x16xf32> into tensor<?x16xf32>
// CHECK: %[[U:.*]] = tensor.expand_shape %[[Q]] {{\[\[}}0, 1], [2]] output_shape [1, %{{.*}}, 16] : tensor<?x16xf32> into tensor<1x?x16xf32>
// CHECK: %[[FL:.*]] = tensor.collapse_shape %[[B]] {{\[\[}}0, 1], [2]] : tensor<2x3x16xf32> into tensor<6x16xf32>
// CHECK: %[[SHAPE:.*]] = arith.constant dense<[3, 2, 16]> : tensor<3xi64>
// CHECK: %[[RS:.*]] = tensor.reshape %[[B]](%[[SHAPE]]) : (tensor<2x3x16xf32>, tensor<3xi64>) -> tensor<3x2x16xf32>
// CHECK: moe.linear %[[R]]
// CHECK: return %{{.*}}, %[[U]], %[[FL]], %[[RS]], %[[X]]
func.func @views(%x: tensor<1x?x16xf32>, %s: tensor<?x1x16xf32>, %b: tensor<2x3x16xf32>)
    -> (tensor<?x4xf32>, tensor<1x?x16xf32>, tensor<6x16xf32>, tensor<3x2x16xf32>, tensor<1x?x16xf32>) {
  %shape = "onnx.Constant"() {value = dense<[-1, 16]> : tensor<2xi64>} : () -> tensor<2xi64>
  %axes = "onnx.Constant"() {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %axes0 = arith.constant dense<0> : tensor<1xi64>
  %shape3 = arith.constant dense<[3, 2, 16]> : tensor<3xi64>
  %w = arith.constant dense<0.5> : tensor<4x16xf32>
  %r = "onnx.Reshape"(%x, %shape) : (tensor<1x?x16xf32>, tensor<2xi64>) -> tensor<?x16xf32>
  %q = "onnx.Squeeze"(%s, %axes) : (tensor<?x1x16xf32>, tensor<1xi64>) -> tensor<?x16xf32>
  %u = "onnx.Unsqueeze"(%q, %axes0) : (tensor<?x16xf32>, tensor<1xi64>) -> tensor<1x?x16xf32>
  %fl = "onnx.Flatten"(%b) {axis = 2 : i64} : (tensor<2x3x16xf32>) -> tensor<6x16xf32>
  %rs = "onnx.Reshape"(%b, %shape3) : (tensor<2x3x16xf32>, tensor<3xi64>) -> tensor<3x2x16xf32>
  %id = "onnx.Identity"(%x) : (tensor<1x?x16xf32>) -> tensor<1x?x16xf32>
  %y = moe.linear %r, %w : tensor<?x16xf32>, tensor<4x16xf32> -> tensor<?x4xf32>
  return %y, %u, %fl, %rs, %id : tensor<?x4xf32>, tensor<1x?x16xf32>, tensor<6x16xf32>, tensor<3x2x16xf32>, tensor<1x?x16xf32>
}

// -----

// Left alone: what is already func, arith, tensor or moe.
// CHECK-LABEL: func.func @already_legal
// CHECK: tensor.concat
// CHECK: arith.constant
// CHECK: moe.linear
func.func @already_legal(%a: tensor<2x16xf32>, %b: tensor<2x16xf32>, %x: tensor<?x16xf32>) -> (tensor<4x16xf32>, tensor<?x4xf32>) {
  %c = tensor.concat dim(0) %a, %b : (tensor<2x16xf32>, tensor<2x16xf32>) -> tensor<4x16xf32>
  %w = arith.constant dense<0.5> : tensor<4x16xf32>
  %y = moe.linear %x, %w : tensor<?x16xf32>, tensor<4x16xf32> -> tensor<?x4xf32>
  return %c, %y : tensor<4x16xf32>, tensor<?x4xf32>
}

// -----

// A reshape that changes the innermost dimension is not a view (codegen's
// emitView rejects it the same way).
func.func @inner_reshape(%x: tensor<?x64xf32>) -> tensor<?x8x8xf32> {
  %shape = arith.constant dense<[-1, 8, 8]> : tensor<3xi64>
  // expected-error @+1 {{cannot legalise 'onnx.Reshape' for codegen: it changes the innermost dimension ('tensor<?x64xf32>' to 'tensor<?x8x8xf32>'); only changes of the leading dimensions are views}}
  %0 = "onnx.Reshape"(%x, %shape) : (tensor<?x64xf32>, tensor<3xi64>) -> tensor<?x8x8xf32>
  return %0 : tensor<?x8x8xf32>
}

// -----

func.func @squeeze_inner(%x: tensor<?x16x1xf32>) -> tensor<?x16xf32> {
  %axes = arith.constant dense<2> : tensor<1xi64>
  // expected-error @+1 {{cannot legalise 'onnx.Squeeze' for codegen: it changes the innermost dimension}}
  %0 = "onnx.Squeeze"(%x, %axes) : (tensor<?x16x1xf32>, tensor<1xi64>) -> tensor<?x16xf32>
  return %0 : tensor<?x16xf32>
}

// -----

// A leading-dimension change with two token-sized dimensions that no
// collapse, expansion or static reshape can state.
func.func @dynamic_regroup(%x: tensor<?x4x16xf32>) -> tensor<?x2x16xf32> {
  %shape = arith.constant dense<[-1, 2, 16]> : tensor<3xi64>
  // expected-error @+1 {{cannot legalise 'onnx.Reshape' for codegen: 'tensor<?x4x16xf32>' to 'tensor<?x2x16xf32>' is neither a collapse, an expansion nor a static reshape}}
  %0 = "onnx.Reshape"(%x, %shape) : (tensor<?x4x16xf32>, tensor<3xi64>) -> tensor<?x2x16xf32>
  return %0 : tensor<?x2x16xf32>
}

// -----

// Any other op has no code: named in the error.
func.func @other_op(%x: tensor<?x16xf32>) -> tensor<?x16xf32> {
  // expected-error @+1 {{cannot legalise 'onnx.Add' for codegen: only func, arith, tensor and moe ops (and onnx constants and views) have code}}
  %0 = "onnx.Add"(%x, %x) : (tensor<?x16xf32>, tensor<?x16xf32>) -> tensor<?x16xf32>
  return %0 : tensor<?x16xf32>
}

// -----

// A constant whose elements are not of its result type.
func.func @mistyped_constant() -> tensor<3xf32> {
  // expected-error @+1 {{cannot legalise 'onnx.Constant' for codegen: it holds no numeric elements of its result type 'tensor<3xf32>'}}
  %0 = "onnx.Constant"() {value_floats = array<f32: 1.0, 2.0>} : () -> tensor<3xf32>
  return %0 : tensor<3xf32>
}
