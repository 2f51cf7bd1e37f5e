// RUN: moec-translate --import-onnx %fixtures/deepseek_v3/model.onnx | FileCheck %s

// DeepSeek-V3: sigmoid scores, a selection-only correction bias, group-limited
// top-k (top-2 sum per group, TopK over groups, ScatterElements into a group
// mask, Where to -inf), weights gathered from the unbiased scores, normalised and
// scaled, plus the shared expert (three MatMuls of pre-transposed weights).

// CHECK-LABEL: func.func @main_graph(
// CHECK-DAG: %[[BIAS:.*]] = "onnx.Constant"() <{value = dense<[-0.619341552, {{.*}}]> : tensor<16xf32>}>
// CHECK-DAG: %[[NEG_INF:.*]] = "onnx.Constant"() <{value = dense<0xFF800000> : tensor<f32>}>
// CHECK-DAG: "onnx.Constant"() <{value = dense_resource<experts.gate_up_proj> : tensor<16x48x64xf32>}>
// CHECK-DAG: "onnx.Constant"() <{value = dense_resource<experts.down_proj> : tensor<16x64x24xf32>}>
// CHECK: %[[LOGITS:.*]] = "onnx.Gemm"
// CHECK: %[[SCORES:.*]] = "onnx.Sigmoid"(%[[LOGITS]])
// CHECK: %[[BIASED:.*]] = "onnx.Add"(%[[SCORES]], %[[BIAS]])
// CHECK: "onnx.TopK"
// CHECK: "onnx.ReduceSum"
// CHECK: "onnx.TopK"
// CHECK: "onnx.ScatterElements"
// CHECK: "onnx.Not"
// CHECK: %[[MASKED:.*]] = "onnx.Where"(%{{.*}}, %[[NEG_INF]], %[[BIASED]])
// CHECK: %{{.*}}, %[[IDS:.*]] = "onnx.TopK"(%[[MASKED]], %{{.*}}) <{axis = -1 : i64, largest = 1 : i64, sorted = 0 : i64}>
// CHECK: "onnx.GatherElements"(%[[SCORES]], %[[IDS]]) <{axis = 1 : i64}>
// CHECK: "onnx.GatherND"
// CHECK: "onnx.GatherND"
// CHECK: "onnx.ReduceSum"
// CHECK: "onnx.MatMul"(%{{.*}}, %{{.*}}) : (tensor<1x?x64xf32>, tensor<64x24xf32>) -> tensor<1x?x24xf32>
// CHECK: "onnx.MatMul"(%{{.*}}, %{{.*}}) : (tensor<1x?x64xf32>, tensor<64x24xf32>) -> tensor<1x?x24xf32>
// CHECK: "onnx.MatMul"(%{{.*}}, %{{.*}}) : (tensor<1x?x24xf32>, tensor<24x64xf32>) -> tensor<1x?x64xf32>
// CHECK: "onnx.Add"
// CHECK: return
