// The four transformers fixtures, as torch.onnx.export wrote them, raise to one
// moe.layer each, with every routing and expert parameter recovered; raised and
// lowered, no per-token weight gather is left and exactly two grouped matmuls
// run. Near misses (one op changed in the real export) are left alone.

// RUN: moec-translate --import-onnx %fixtures/mixtral/model.onnx | moec-opt -moe-raise-onnx | FileCheck %s --check-prefix=MIXTRAL
// MIXTRAL-LABEL: func.func @main_graph
// MIXTRAL: %[[X:.*]] = "onnx.Reshape"(%arg0, %{{.*}}) {{.*}} -> tensor<?x64xf32>
// MIXTRAL: %[[Y:.*]] = moe.layer %[[X]] : tensor<?x64xf32> router_weight(%{{.*}} : tensor<8x64xf32>) gate_up(%{{.*}} : tensor<8x80x64xf32>) down(%{{.*}} : tensor<8x64x40xf32>) {activation = #moe.activation<silu>, gate_up_layout = #moe.gate_up_layout<concatenated>, normalize = true, routing = #moe.routing<softmax_topk>, top_k = 2 : i64} -> tensor<?x64xf32>
// MIXTRAL: "onnx.Reshape"(%[[Y]], %{{.*}}) {{.*}} -> tensor<1x?x64xf32>
// MIXTRAL-NOT: onnx.GatherND
// MIXTRAL-NOT: onnx.TopK
// MIXTRAL-NOT: onnx.MatMul

// RUN: moec-translate --import-onnx %fixtures/qwen3_moe/model.onnx | moec-opt -moe-raise-onnx | FileCheck %s --check-prefix=QWEN
// QWEN: moe.layer {{.*}} {activation = #moe.activation<silu>, gate_up_layout = #moe.gate_up_layout<concatenated>, normalize = true, routing = #moe.routing<softmax_topk>, top_k = 2 : i64}
// QWEN-NOT: onnx.GatherND

// gpt-oss: router bias, biases, the clamped SwiGLU with alpha 1.702 (read from
// the f32 constant), interleaved; [E, in, out] weights transposed at compile time.
// RUN: moec-translate --import-onnx %fixtures/gpt_oss/model.onnx | moec-opt -moe-raise-onnx | FileCheck %s --check-prefix=GPTOSS
// GPTOSS: %[[DOWN:.*]] = arith.constant dense_resource<down_weight> : tensor<8x64x40xf32>
// GPTOSS: %[[GU:.*]] = arith.constant dense_resource<gate_up_weight> : tensor<8x80x64xf32>
// GPTOSS: moe.layer %{{.*}} : tensor<?x64xf32> router_weight(%{{.*}} : tensor<8x64xf32>) router_bias(%{{.*}} : tensor<8xf32>) gate_up(%[[GU]] : tensor<8x80x64xf32>) down(%[[DOWN]] : tensor<8x64x40xf32>) gate_up_bias(%{{.*}} : tensor<8x80xf32>) down_bias(%{{.*}} : tensor<8x64xf32>) {activation = #moe.activation<silu, alpha = 1.70{{[0-9]+}}, beta = 1.000000e+00, limit = 7.000000e+00>, gate_up_layout = #moe.gate_up_layout<interleaved>, routing = #moe.routing<topk_softmax>, top_k = 2 : i64}
// GPTOSS-NOT: onnx.GatherND

// DeepSeek-V3: group-limited sigmoid routing with its correction bias, 4 groups
// keeping 2, normalised and scaled by 2.5, and the shared expert absorbed (the
// final Add is gone).
// RUN: moec-translate --import-onnx %fixtures/deepseek_v3/model.onnx | moec-opt -moe-raise-onnx | FileCheck %s --check-prefix=DEEPSEEK
// DEEPSEEK: %[[Y:.*]] = moe.layer %{{.*}} : tensor<?x64xf32> router_weight(%{{.*}} : tensor<16x64xf32>) correction_bias(%{{.*}} : tensor<16xf32>) gate_up(%{{.*}} : tensor<16x48x64xf32>) down(%{{.*}} : tensor<16x64x24xf32>) shared_gate_up(%{{.*}} : tensor<48x64xf32>) shared_down(%{{.*}} : tensor<64x24xf32>) {activation = #moe.activation<silu>, gate_up_layout = #moe.gate_up_layout<concatenated>, normalize = true, num_groups = 4 : i64, routed_scaling_factor = 2.500000e+00 : f64, routing = #moe.routing<sigmoid_group_topk>, top_k = 4 : i64, topk_groups = 2 : i64}
// DEEPSEEK: %[[OUT:.*]] = "onnx.Reshape"(%[[Y]]
// DEEPSEEK: return %[[OUT]]
// DEEPSEEK-NOT: onnx.GatherND
// DEEPSEEK-NOT: onnx.Where
// DEEPSEEK-NOT: onnx.MatMul

// Raised and lowered: two grouped matmuls, no per-token weight gather.
// RUN: moec-translate --import-onnx %fixtures/mixtral/model.onnx | moec-opt -moe-raise-onnx -moe-lower-layer | FileCheck %s --check-prefix=LOWERED
// RUN: moec-translate --import-onnx %fixtures/qwen3_moe/model.onnx | moec-opt -moe-raise-onnx -moe-lower-layer | FileCheck %s --check-prefix=LOWERED
// RUN: moec-translate --import-onnx %fixtures/gpt_oss/model.onnx | moec-opt -moe-raise-onnx -moe-lower-layer | FileCheck %s --check-prefix=LOWERED
// RUN: moec-translate --import-onnx %fixtures/deepseek_v3/model.onnx | moec-opt -moe-raise-onnx -moe-lower-layer | FileCheck %s --check-prefixes=LOWERED,SHARED
// LOWERED-NOT: onnx.GatherND
// LOWERED: moe.route
// LOWERED: moe.sort
// LOWERED: moe.permute
// LOWERED: moe.grouped_matmul {{.*}}epilogue
// LOWERED-NOT: moe.grouped_matmul {{.*}}epilogue
// LOWERED: moe.grouped_matmul
// LOWERED-NOT: moe.grouped_matmul
// SHARED: moe.linear {{.*}}epilogue
// SHARED: moe.linear
// LOWERED: moe.combine
// LOWERED-NOT: moe.grouped_matmul
// LOWERED-NOT: onnx.GatherND

// FP8 checkpoints: stacked experts read through DequantizeLinear of e4m3 with
// the scale repeated on the 128 rows of each block (scripts/fixtures/
// fp8_checkpoint.py) stay e4m3 with [E, ceil(N/128), ceil(K/128)] block scales:
// 272x320 and 320x136 make 3x3 and 3x2 blocks, partial at both edges.
// RUN: moec-translate --import-onnx %fixtures/deepseek_v3_fp8/model.onnx | moec-opt -moe-raise-onnx | FileCheck %s --check-prefix=FP8-DEEPSEEK
// FP8-DEEPSEEK-LABEL: func.func @main_graph
// FP8-DEEPSEEK: moe.layer {{.*}} gate_up(%{{.*}} : tensor<8x272x320xf8E4M3FN>) down(%{{.*}} : tensor<8x320x136xf8E4M3FN>) gate_up_scales(%{{.*}} : tensor<8x3x3xf32>) down_scales(%{{.*}} : tensor<8x3x2xf32>) shared_gate_up
// FP8-DEEPSEEK-NOT: onnx.DequantizeLinear
// gpt-oss stores [E, in, out]: the codes and their block grid are transposed.
// RUN: moec-translate --import-onnx %fixtures/gpt_oss_fp8/model.onnx | moec-opt -moe-raise-onnx | FileCheck %s --check-prefix=FP8-GPTOSS
// FP8-GPTOSS-LABEL: func.func @main_graph
// FP8-GPTOSS-DAG: %[[DOWN:.*]] = arith.constant dense_resource<down_weight> : tensor<8x320x136xf8E4M3FN>
// FP8-GPTOSS-DAG: %[[GU:.*]] = arith.constant dense_resource<gate_up_weight> : tensor<8x272x320xf8E4M3FN>
// FP8-GPTOSS: moe.layer {{.*}} gate_up(%[[GU]] : tensor<8x272x320xf8E4M3FN>) down(%[[DOWN]] : tensor<8x320x136xf8E4M3FN>) {{.*}} gate_up_scales(%{{.*}} : tensor<8x3x3xf32>) down_scales(%{{.*}} : tensor<8x3x2xf32>)
// FP8-GPTOSS-NOT: onnx.DequantizeLinear
// A scale that is not one number per 128x128 block (each row its own) cannot be
// kept: the weights are dequantised at compile time, as ONNX computes them, and
// the compiled block still matches onnxruntime.
// RUN: moec-translate --import-onnx %S/Inputs/fp8-per-row-scales/model.onnx | moec-opt -moe-raise-onnx | FileCheck %s --check-prefix=FP8-PER-ROW
// FP8-PER-ROW-LABEL: func.func @main_graph
// FP8-PER-ROW: moe.layer {{.*}} gate_up(%{{.*}} : tensor<16x48x64xf32>) down(%{{.*}} : tensor<16x64x24xf32>)
// FP8-PER-ROW-NOT: _scales(
// FP8-PER-ROW-NOT: onnx.DequantizeLinear
// RUN: moec compile %S/Inputs/fp8-per-row-scales/model.onnx --target=cpu -o %t.per-row
// RUN: moec-run %t.per-row --inputs %S/Inputs/fp8-per-row-scales/inputs.npz --expected-outputs %S/Inputs/fp8-per-row-scales/expected.npz --scale-atol | FileCheck %s --check-prefix=FP8-PER-ROW-OUT
// FP8-PER-ROW-OUT: output [1, 7, 64]: {{.*}}: ok
// A scale computed at run time is no checkpoint: the block is left alone.
// RUN: moec-translate --import-onnx %fixtures/deepseek_v3_fp8/model.onnx | sed 's/^\( *\)%26 = "onnx.DequantizeLinear"(%21, %22, %25)/\1%w22 = "onnx.Abs"(%22) : (tensor<8x272x3xf32>) -> tensor<8x272x3xf32>\n\1%26 = "onnx.DequantizeLinear"(%21, %w22, %25)/' | moec-opt -moe-raise-onnx | FileCheck %s --check-prefix=FP8-NEAR
// FP8-NEAR-NOT: moe.layer
// FP8-NEAR: onnx.DequantizeLinear
// FP8-NEAR-NOT: moe.layer

// Near misses, each one op of the real Mixtral export changed, are left alone:
// RUN: moec-translate --import-onnx %fixtures/mixtral/model.onnx | sed 's/keepdims = 0 : i64, noop/keepdims = 1 : i64, noop/' | moec-opt -moe-raise-onnx | FileCheck %s --check-prefix=NEAR
// (another reduction: max, not sum, over the top-k)
// RUN: moec-translate --import-onnx %fixtures/mixtral/model.onnx | sed 's/"onnx.ReduceSum"(%41/"onnx.ReduceMax"(%41/' | moec-opt -moe-raise-onnx | FileCheck %s --check-prefix=NEAR
// (a routing moe.layer cannot express: softmax across tokens, or the k smallest)
// RUN: moec-translate --import-onnx %fixtures/mixtral/model.onnx | sed 's/"onnx.Softmax"(%15) <{axis = -1/"onnx.Softmax"(%15) <{axis = 0/' | moec-opt -moe-raise-onnx | FileCheck %s --check-prefix=NEAR
// RUN: moec-translate --import-onnx %fixtures/mixtral/model.onnx | sed 's/largest = 1/largest = 0/' | moec-opt -moe-raise-onnx | FileCheck %s --check-prefix=NEAR
// (ids clamped to a range that is not [0, E-1])
// RUN: moec-translate --import-onnx %fixtures/mixtral/model.onnx | sed 's/dense<7> : tensor<i64>/dense<6> : tensor<i64>/' | moec-opt -moe-raise-onnx | FileCheck %s --check-prefix=NEAR
// (an activation that is not SiLU)
// RUN: moec-translate --import-onnx %fixtures/mixtral/model.onnx | sed 's/"onnx.Sigmoid"(%30#0)/"onnx.Tanh"(%30#0)/' | moec-opt -moe-raise-onnx | FileCheck %s --check-prefix=NEAR
// (the down projection's weights picked by other ids than the gate/up's)
// RUN: moec-translate --import-onnx %fixtures/mixtral/model.onnx | sed 's/^\( *\)%34 = "onnx.GatherND"(%6, %24)/\1%ids2 = "onnx.Unsqueeze"(%22, %2) : (tensor<?xi64>, tensor<1xi64>) -> tensor<?x1xi64>\n\1%34 = "onnx.GatherND"(%6, %ids2)/' | moec-opt -moe-raise-onnx | FileCheck %s --check-prefix=NEAR
// (expert weights computed at run time rather than stacked constants)
// RUN: moec-translate --import-onnx %fixtures/mixtral/model.onnx | sed 's/^\( *\)%34 = "onnx.GatherND"(%6, %24)/\1%w6 = "onnx.Mul"(%6, %6) : (tensor<8x64x40xf32>, tensor<8x64x40xf32>) -> tensor<8x64x40xf32>\n\1%34 = "onnx.GatherND"(%w6, %24)/' | moec-opt -moe-raise-onnx | FileCheck %s --check-prefix=NEAR
// NEAR-NOT: moe.layer
// NEAR: onnx.GatherND
// NEAR-NOT: moe.layer
