// The four whole-model fixtures (test/fixtures/models/*/model.onnx: torch.onnx.export of the
// cache-free forward, input_ids [B, T] -> logits [B, T, 128], opset 20) import with every op
// they hold; the rotary tables are Cos and Sin of positions times inverse frequencies.
// RUN: moec-translate --import-onnx %fixtures/models/mixtral/model.onnx | FileCheck %s --check-prefixes=CHECK,MIXTRAL
// RUN: moec-translate --import-onnx %fixtures/models/qwen3_moe/model.onnx | FileCheck %s
// RUN: moec-translate --import-onnx %fixtures/models/gpt_oss/model.onnx | FileCheck %s --check-prefixes=CHECK,GPT-OSS
// RUN: moec-translate --import-onnx %fixtures/models/deepseek_v3/model.onnx | FileCheck %s --check-prefixes=CHECK,DEEPSEEK
// The imported module round-trips through the parser and verifier.
// RUN: moec-translate --import-onnx %fixtures/models/deepseek_v3/model.onnx | moec-opt | FileCheck %s --check-prefixes=CHECK,DEEPSEEK

// CHECK: module attributes {onnx.opset = 20 : i64
// CHECK-LABEL: func.func @main_graph(
// CHECK-SAME: %[[IDS:.*]]: tensor<?x?xi64> {onnx.name = "input_ids"}) -> (tensor<?x?x128xf32> {onnx.name = "logits"})
// CHECK: "onnx.Gather"(%{{.*}}, %[[IDS]]) <{axis = 0 : i64}> : (tensor<128x64xf32>, tensor<?x?xi64>) -> tensor<?x?x64xf32>
// CHECK: "onnx.Range"(%{{.*}}, %{{.*}}, %{{.*}}) : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
// MIXTRAL: "onnx.CumSum"
// MIXTRAL: "onnx.LessOrEqual"
// MIXTRAL: "onnx.And"
// MIXTRAL: "onnx.Max"
// CHECK: %[[COS:.*]] = "onnx.Cos"(%[[ANGLES:.*]]) : (tensor<1x?x[[R:[0-9]+]]xf32>) -> tensor<1x?x[[R]]xf32>
// CHECK: "onnx.Sin"(%[[ANGLES]]) : (tensor<1x?x[[R]]xf32>) -> tensor<1x?x[[R]]xf32>
// CHECK: "onnx.Pow"
// CHECK: "onnx.ReduceMean"
// CHECK: "onnx.Sqrt"
// CHECK: "onnx.Reciprocal"
// MIXTRAL: "onnx.Neg"
// GPT-OSS: "onnx.ReduceMax"(%{{.*}}, %{{.*}}) <{keepdims = 1 : i64, noop_with_empty_axes = 0 : i64}> : (tensor<?x4x?x?xf32>, tensor<1xi64>) -> tensor<?x4x?x1xf32>
// DEEPSEEK: "onnx.ConstantOfShape"
// DEEPSEEK: "onnx.ScatterND"(%{{.*}}, %{{.*}}, %{{.*}}) <{reduction = "none"}> : (tensor<24x4x?x?xf32>, tensor<?x1xi64>, tensor<16x4x?x?xf32>) -> tensor<24x4x?x?xf32>
// CHECK: "onnx.Softmax"
// CHECK: return %{{.*}} : tensor<?x?x128xf32>
