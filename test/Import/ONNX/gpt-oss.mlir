// RUN: moec-translate --import-onnx %fixtures/gpt_oss/model.onnx | FileCheck %s

// gpt-oss: router with bias, top-k on logits then softmax over the k chosen,
// experts stored [E, in, out] with biases, gate and up interleaved (Slice with
// step 2), gate and up clamped at 7, (up + 1) * gate * sigmoid(1.702 * gate).

// CHECK-LABEL: func.func @main_graph(
// CHECK-DAG: %[[ROUTER_B:.*]] = "onnx.Constant"() <{value = dense<[0.3641752, {{.*}}]> : tensor<8xf32>}>
// CHECK-DAG: "onnx.Constant"() <{value = dense_resource<experts.gate_up_proj> : tensor<8x64x80xf32>}>
// CHECK-DAG: "onnx.Constant"() <{value = dense_resource<experts.gate_up_proj_bias> : tensor<8x80xf32>}>
// CHECK-DAG: "onnx.Constant"() <{value = dense_resource<experts.down_proj> : tensor<8x40x64xf32>}>
// CHECK-DAG: "onnx.Constant"() <{value = dense_resource<experts.down_proj_bias> : tensor<8x64xf32>}>
// CHECK-DAG: %[[STEP:.*]] = "onnx.Constant"() <{value = dense<2> : tensor<1xi64>}>
// CHECK: %[[LOGITS:.*]] = "onnx.Gemm"(%{{.*}}, %{{.*}}, %[[ROUTER_B]])
// CHECK: %[[VALUES:.*]], %{{.*}} = "onnx.TopK"(%[[LOGITS]], %{{.*}})
// CHECK: "onnx.Softmax"(%[[VALUES]]) <{axis = 1 : i64}>
// CHECK: "onnx.GatherND"
// CHECK: "onnx.GatherND"
// CHECK: "onnx.MatMul"(%{{.*}}, %{{.*}}) : (tensor<?x1x64xf32>, tensor<?x64x80xf32>) -> tensor<?x1x80xf32>
// CHECK: %[[GATE:.*]] = "onnx.Slice"(%[[GU:.*]], %{{.*}}, %{{.*}}, %{{.*}}, %[[STEP]]) : (tensor<?x80xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x40xf32>
// CHECK: "onnx.Clip"(%[[GATE]], %{{.*}}, %{{.*}}) : (tensor<?x40xf32>, none, tensor<f32>) -> tensor<?x40xf32>
// CHECK: %[[UP:.*]] = "onnx.Slice"(%[[GU]], %{{.*}}, %{{.*}}, %{{.*}}, %[[STEP]])
// CHECK: "onnx.Clip"(%[[UP]], %{{.*}}, %{{.*}}) : (tensor<?x40xf32>, tensor<f32>, tensor<f32>) -> tensor<?x40xf32>
// CHECK: "onnx.Sigmoid"
// CHECK: "onnx.MatMul"(%{{.*}}, %{{.*}}) : (tensor<?x1x40xf32>, tensor<?x40x64xf32>) -> tensor<?x1x64xf32>
// CHECK: "onnx.ReduceSum"
// CHECK: return
