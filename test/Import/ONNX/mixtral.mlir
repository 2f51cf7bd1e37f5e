// RUN: moec-translate --import-onnx %fixtures/mixtral/model.onnx | FileCheck %s
// RUN: moec-translate --import-onnx %fixtures/mixtral/model.onnx | moec-opt | FileCheck %s

// transformers' Mixtral block (batched_mm experts) as torch.onnx.export writes it,
// imported faithfully: router Gemm -> Softmax -> TopK -> renormalise, then per-slot
// GatherND of the stacked expert weights, batched MatMul, SiLU-GLU, weighted ReduceSum.

// CHECK: module attributes {onnx.opset = 21 : i64, onnx.producer = "pytorch
// CHECK-LABEL: func.func @main_graph(
// CHECK-SAME: %[[X:.*]]: tensor<1x?x64xf32> {onnx.name = "hidden_states"}) -> (tensor<1x?x64xf32> {onnx.name = "output"})
// CHECK-DAG: %[[ROUTER:.*]] = "onnx.Constant"() <{value = dense_resource<gate.weight> : tensor<8x64xf32>}>
// CHECK-DAG: %[[GATE_UP:.*]] = "onnx.Constant"() <{value = dense_resource<experts.gate_up_proj> : tensor<8x80x64xf32>}>
// CHECK-DAG: %[[DOWN:.*]] = "onnx.Constant"() <{value = dense_resource<experts.down_proj> : tensor<8x64x40xf32>}>
// CHECK: %[[LOGITS:.*]] = "onnx.Gemm"(%{{.*}}, %[[ROUTER]], %{{.*}}) <{alpha = 1.000000e+00 : f32, beta = 1.000000e+00 : f32, transA = 0 : i64, transB = 1 : i64}> : (tensor<?x64xf32>, tensor<8x64xf32>, none) -> tensor<?x8xf32>
// CHECK: %[[PROBS:.*]] = "onnx.Softmax"(%[[LOGITS]]) <{axis = -1 : i64}>
// CHECK: %[[VALUES:.*]], %[[IDS:.*]] = "onnx.TopK"(%[[PROBS]], %{{.*}}) <{axis = -1 : i64, largest = 1 : i64, sorted = 1 : i64}> : (tensor<?x8xf32>, tensor<1xi64>) -> (tensor<?x2xf32>, tensor<?x2xi64>)
// CHECK: %[[SUM:.*]] = "onnx.ReduceSum"(%[[VALUES]], %{{.*}}) <{keepdims = 1 : i64, noop_with_empty_axes = 0 : i64}>
// CHECK: "onnx.Div"(%[[VALUES]], %[[SUM]])
// CHECK: "onnx.Clip"
// CHECK: %[[WGU:.*]] = "onnx.GatherND"(%[[GATE_UP]], %{{.*}}) <{batch_dims = 0 : i64}> : (tensor<8x80x64xf32>, tensor<?x1xi64>) -> tensor<?x80x64xf32>
// CHECK: "onnx.MatMul"(%[[WGU]], %{{.*}}) : (tensor<?x80x64xf32>, tensor<?x64x1xf32>) -> tensor<?x80x1xf32>
// CHECK: %[[HALVES:.*]]:2 = "onnx.Split"(%{{.*}}, %{{.*}}) <{axis = 1 : i64, num_outputs = 2 : i64}> : (tensor<?x80xf32>, none) -> (tensor<?x40xf32>, tensor<?x40xf32>)
// CHECK: %[[SIG:.*]] = "onnx.Sigmoid"(%[[HALVES]]#0)
// CHECK: %[[SILU:.*]] = "onnx.Mul"(%[[HALVES]]#0, %[[SIG]])
// CHECK: "onnx.Mul"(%[[SILU]], %[[HALVES]]#1)
// CHECK: %[[WD:.*]] = "onnx.GatherND"(%[[DOWN]], %{{.*}}) <{batch_dims = 0 : i64}> : (tensor<8x64x40xf32>, tensor<?x1xi64>) -> tensor<?x64x40xf32>
// CHECK: "onnx.MatMul"(%[[WD]], %{{.*}}) : (tensor<?x64x40xf32>, tensor<?x40x1xf32>) -> tensor<?x64x1xf32>
// CHECK: "onnx.ReduceSum"(%{{.*}}, %{{.*}}) <{keepdims = 0 : i64, noop_with_empty_axes = 0 : i64}> : (tensor<?x2x64xf32>, tensor<1xi64>) -> tensor<?x64xf32>
// CHECK: return %{{.*}} : tensor<1x?x64xf32>
// CHECK: dialect_resources
// CHECK-DAG: gate.weight: "0x04
// CHECK-DAG: experts.gate_up_proj: "0x04
// CHECK-DAG: experts.down_proj: "0x04
