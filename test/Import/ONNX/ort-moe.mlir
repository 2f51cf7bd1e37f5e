// RUN: moec-translate --import-onnx %fixtures/ort-moe/model.onnx | FileCheck %s
// RUN: moec-translate --import-onnx %fixtures/ort-moe-silu/model.onnx | FileCheck %s --check-prefix=SILU

// com.microsoft.MoE is already a whole MoE block: it becomes moe.layer directly,
// with router_logits, the interleaved SwiGLU layout and onnxruntime's
// activation_alpha / activation_beta / swiglu_limit.

// CHECK-LABEL: func.func @ort_moe(
// CHECK-SAME: %[[X:.*]]: tensor<?x64xf32> {onnx.name = "input"}, %[[L:.*]]: tensor<?x8xf32> {onnx.name = "router_probs"})
// CHECK: %[[FC1:.*]] = "onnx.Constant"() <{value = dense_resource<fc1_experts_weights> : tensor<8x80x64xf32>}>
// CHECK: %[[FC2:.*]] = "onnx.Constant"() <{value = dense_resource<fc2_experts_weights> : tensor<8x64x40xf32>}>
// CHECK: %[[B1:.*]] = "onnx.Constant"() <{value = dense_resource<fc1_experts_bias> : tensor<8x80xf32>}>
// CHECK: %[[B2:.*]] = "onnx.Constant"() <{value = dense_resource<fc2_experts_bias> : tensor<8x64xf32>}>
// CHECK: %[[Y:.*]] = moe.layer %[[X]] : tensor<?x64xf32> router_logits(%[[L]] : tensor<?x8xf32>) gate_up(%[[FC1]] : tensor<8x80x64xf32>) down(%[[FC2]] : tensor<8x64x40xf32>) gate_up_bias(%[[B1]] : tensor<8x80xf32>) down_bias(%[[B2]] : tensor<8x64xf32>)
// CHECK-SAME: activation = #moe.activation<silu, alpha = 1.70{{[0-9]*}}, beta = 1.000000e+00, limit = 7.000000e+00>
// CHECK-SAME: gate_up_layout = #moe.gate_up_layout<interleaved>
// CHECK-SAME: normalize = true
// CHECK-SAME: routing = #moe.routing<softmax_topk>
// CHECK-SAME: top_k = 2 : i64
// CHECK: return %[[Y]]

// SILU-LABEL: func.func
// SILU: moe.layer
// SILU-SAME: gate_up(%{{.*}} : tensor<8x40x64xf32>) down(%{{.*}} : tensor<8x64x40xf32>)
// SILU-SAME: activation = #moe.activation<silu>
// SILU-SAME: gate_up_layout = #moe.gate_up_layout<none>
// SILU-NOT: normalize
// SILU-SAME: top_k = 2 : i64

// RUN: moec-translate --import-onnx %fixtures/ort-qmoe/model.onnx | FileCheck %s --check-prefix=QMOE
// com.microsoft.QMoE: int4 weights are dequantized at import into f32 blobs
// (check_qmoe_dequant.py checks their values); the node becomes moe.layer.
// QMOE-LABEL: func.func @ort_qmoe(
// QMOE-DAG: %[[FC1:.*]] = "onnx.Constant"() <{value = dense_resource<fc1_dequantized> : tensor<4x64x64xf32>}>
// QMOE-DAG: %[[FC2:.*]] = "onnx.Constant"() <{value = dense_resource<fc2_dequantized> : tensor<4x64x32xf32>}>
// QMOE: moe.layer %{{.*}} : tensor<?x64xf32> router_logits(%{{.*}} : tensor<?x4xf32>) gate_up(%[[FC1]] : tensor<4x64x64xf32>) down(%[[FC2]] : tensor<4x64x32xf32>)
// QMOE-SAME: gate_up_layout = #moe.gate_up_layout<interleaved>
