// RUN: moec-translate --import-onnx %fixtures/qwen3_moe/model.onnx | FileCheck %s

// Qwen3-MoE exports to the same graph as Mixtral (softmax, top-k, renormalise
// with norm_topk_prob, SiLU-GLU experts gathered per slot).

// CHECK-LABEL: func.func @main_graph(
// CHECK-DAG: "onnx.Constant"() <{value = dense_resource<gate.weight> : tensor<8x64xf32>}>
// CHECK-DAG: %[[GATE_UP:.*]] = "onnx.Constant"() <{value = dense_resource<experts.gate_up_proj> : tensor<8x80x64xf32>}>
// CHECK-DAG: %[[DOWN:.*]] = "onnx.Constant"() <{value = dense_resource<experts.down_proj> : tensor<8x64x40xf32>}>
// CHECK: "onnx.Gemm"
// CHECK: %[[PROBS:.*]] = "onnx.Softmax"
// CHECK: %[[VALUES:.*]], %{{.*}} = "onnx.TopK"(%[[PROBS]], %{{.*}})
// CHECK: "onnx.Div"(%[[VALUES]], %{{.*}})
// CHECK: "onnx.GatherND"(%[[GATE_UP]], %{{.*}})
// CHECK: "onnx.Split"
// CHECK: "onnx.GatherND"(%[[DOWN]], %{{.*}})
// CHECK: "onnx.ReduceSum"
// CHECK: return
