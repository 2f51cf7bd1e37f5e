// The lowered pipeline equals moe.layer: for three configurations, a
// hand-written route -> sort -> permute -> grouped_matmul (gate|up with the
// activation epilogue) -> grouped_matmul (down) -> combine computes the same
// output as the moe.layer it lowers, within 1e-6, on random inputs
// (Inputs/make_inputs.py). The lowered form rounds every intermediate to f32
// where the layer rounds once; both are also checked against numpy.

// RUN: moec-interp %s --function mixtral_layer --inputs %S/Inputs/mixtral.inputs.npz --outputs %t.mixtral.npz
// RUN: moec-interp %s --function mixtral_lowered --inputs %S/Inputs/mixtral.inputs.npz --expected-outputs %t.mixtral.npz --rtol 1e-6 --atol 1e-6 | FileCheck %s
// RUN: moec-interp %s --function mixtral_lowered --inputs %S/Inputs/mixtral.inputs.npz --expected-outputs %S/Inputs/mixtral.expected.npz | FileCheck %s

// RUN: moec-interp %s --function gpt_oss_layer --inputs %S/Inputs/gpt_oss.inputs.npz --outputs %t.gpt_oss.npz
// RUN: moec-interp %s --function gpt_oss_lowered --inputs %S/Inputs/gpt_oss.inputs.npz --expected-outputs %t.gpt_oss.npz --rtol 1e-6 --atol 1e-6 | FileCheck %s
// RUN: moec-interp %s --function gpt_oss_lowered --inputs %S/Inputs/gpt_oss.inputs.npz --expected-outputs %S/Inputs/gpt_oss.expected.npz | FileCheck %s

// RUN: moec-interp %s --function deepseek_layer --inputs %S/Inputs/deepseek.inputs.npz --outputs %t.deepseek.npz
// RUN: moec-interp %s --function deepseek_lowered --inputs %S/Inputs/deepseek.inputs.npz --expected-outputs %t.deepseek.npz --rtol 1e-6 --atol 1e-6 | FileCheck %s
// RUN: moec-interp %s --function deepseek_lowered --inputs %S/Inputs/deepseek.inputs.npz --expected-outputs %S/Inputs/deepseek.expected.npz | FileCheck %s

// CHECK: out [6, 16]: max abs err {{.*}}: ok

//===----------------------------------------------------------------------===//
// Mixtral: softmax top-2, renormalised, SiLU-GLU (concatenated).
//===----------------------------------------------------------------------===//

func.func @mixtral_layer(%x: tensor<?x16xf32> {onnx.name = "x"},
                         %wr: tensor<8x16xf32> {onnx.name = "router_weight"},
                         %wgu: tensor<8x16x16xf32> {onnx.name = "gate_up"},
                         %wd: tensor<8x16x8xf32> {onnx.name = "down"})
    -> (tensor<?x16xf32> {onnx.name = "out"}) {
  %y = moe.layer %x : tensor<?x16xf32> router_weight(%wr : tensor<8x16xf32>)
         gate_up(%wgu : tensor<8x16x16xf32>) down(%wd : tensor<8x16x8xf32>)
         {routing = #moe.routing<softmax_topk>, top_k = 2 : i64, normalize = true,
          activation = #moe.activation<silu>,
          gate_up_layout = #moe.gate_up_layout<concatenated>} -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

func.func @mixtral_lowered(%x: tensor<?x16xf32> {onnx.name = "x"},
                           %wr: tensor<8x16xf32> {onnx.name = "router_weight"},
                           %wgu: tensor<8x16x16xf32> {onnx.name = "gate_up"},
                           %wd: tensor<8x16x8xf32> {onnx.name = "down"})
    -> (tensor<?x16xf32> {onnx.name = "out"}) {
  %none = onnx.NoValue
  %logits = "onnx.Gemm"(%x, %wr, %none) {transB = 1 : i64}
      : (tensor<?x16xf32>, tensor<8x16xf32>, none) -> tensor<?x8xf32>
  %ids, %w = moe.route %logits {routing = #moe.routing<softmax_topk>, top_k = 2 : i64, normalize = true}
      : tensor<?x8xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
  %p, %o, %n = moe.sort %ids {num_experts = 8 : i64}
      : tensor<?x2xi32> -> tensor<?xi32>, tensor<8xi32>, tensor<i32>
  %rows = moe.permute %x, %p, %n {top_k = 2 : i64}
      : tensor<?x16xf32>, tensor<?xi32>, tensor<i32> -> tensor<?x16xf32>
  %h = moe.grouped_matmul %rows, %wgu, %o
      {epilogue = #moe.activation<silu>, epilogue_layout = #moe.gate_up_layout<concatenated>}
      : tensor<?x16xf32>, tensor<8x16x16xf32>, tensor<8xi32> -> tensor<?x8xf32>
  %y = moe.grouped_matmul %h, %wd, %o : tensor<?x8xf32>, tensor<8x16x8xf32>, tensor<8xi32> -> tensor<?x16xf32>
  %out = moe.combine %y, %p, %w, %n
      : tensor<?x16xf32>, tensor<?xi32>, tensor<?x2xf32>, tensor<i32> -> tensor<?x16xf32>
  return %out : tensor<?x16xf32>
}

//===----------------------------------------------------------------------===//
// gpt-oss: router bias, top-k then softmax, interleaved clamped SwiGLU, biases.
//===----------------------------------------------------------------------===//

func.func @gpt_oss_layer(%x: tensor<?x16xf32> {onnx.name = "x"},
                         %wr: tensor<8x16xf32> {onnx.name = "router_weight"},
                         %br: tensor<8xf32> {onnx.name = "router_bias"},
                         %wgu: tensor<8x16x16xf32> {onnx.name = "gate_up"},
                         %bgu: tensor<8x16xf32> {onnx.name = "gate_up_bias"},
                         %wd: tensor<8x16x8xf32> {onnx.name = "down"},
                         %bd: tensor<8x16xf32> {onnx.name = "down_bias"})
    -> (tensor<?x16xf32> {onnx.name = "out"}) {
  %y = moe.layer %x : tensor<?x16xf32> router_weight(%wr : tensor<8x16xf32>)
         router_bias(%br : tensor<8xf32>)
         gate_up(%wgu : tensor<8x16x16xf32>) down(%wd : tensor<8x16x8xf32>)
         gate_up_bias(%bgu : tensor<8x16xf32>) down_bias(%bd : tensor<8x16xf32>)
         {routing = #moe.routing<topk_softmax>, top_k = 2 : i64,
          activation = #moe.activation<silu, alpha = 1.702, beta = 1.0, limit = 7.0>,
          gate_up_layout = #moe.gate_up_layout<interleaved>} -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

func.func @gpt_oss_lowered(%x: tensor<?x16xf32> {onnx.name = "x"},
                           %wr: tensor<8x16xf32> {onnx.name = "router_weight"},
                           %br: tensor<8xf32> {onnx.name = "router_bias"},
                           %wgu: tensor<8x16x16xf32> {onnx.name = "gate_up"},
                           %bgu: tensor<8x16xf32> {onnx.name = "gate_up_bias"},
                           %wd: tensor<8x16x8xf32> {onnx.name = "down"},
                           %bd: tensor<8x16xf32> {onnx.name = "down_bias"})
    -> (tensor<?x16xf32> {onnx.name = "out"}) {
  %logits = "onnx.Gemm"(%x, %wr, %br) {transB = 1 : i64}
      : (tensor<?x16xf32>, tensor<8x16xf32>, tensor<8xf32>) -> tensor<?x8xf32>
  %ids, %w = moe.route %logits {routing = #moe.routing<topk_softmax>, top_k = 2 : i64}
      : tensor<?x8xf32> -> tensor<?x2xi32>, tensor<?x2xf32>
  %p, %o, %n = moe.sort %ids {num_experts = 8 : i64}
      : tensor<?x2xi32> -> tensor<?xi32>, tensor<8xi32>, tensor<i32>
  %rows = moe.permute %x, %p, %n {top_k = 2 : i64}
      : tensor<?x16xf32>, tensor<?xi32>, tensor<i32> -> tensor<?x16xf32>
  %h = moe.grouped_matmul %rows, %wgu, %o bias(%bgu : tensor<8x16xf32>)
      {epilogue = #moe.activation<silu, alpha = 1.702, beta = 1.0, limit = 7.0>,
       epilogue_layout = #moe.gate_up_layout<interleaved>}
      : tensor<?x16xf32>, tensor<8x16x16xf32>, tensor<8xi32> -> tensor<?x8xf32>
  %y = moe.grouped_matmul %h, %wd, %o bias(%bd : tensor<8x16xf32>)
      : tensor<?x8xf32>, tensor<8x16x8xf32>, tensor<8xi32> -> tensor<?x16xf32>
  %out = moe.combine %y, %p, %w, %n
      : tensor<?x16xf32>, tensor<?xi32>, tensor<?x2xf32>, tensor<i32> -> tensor<?x16xf32>
  return %out : tensor<?x16xf32>
}

//===----------------------------------------------------------------------===//
// DeepSeek-V3: group-limited sigmoid routing with a correction bias, top-3,
// scaled; the shared expert as a one-expert grouped matmul owning all T rows.
//===----------------------------------------------------------------------===//

func.func @deepseek_layer(%x: tensor<?x16xf32> {onnx.name = "x"},
                          %wr: tensor<8x16xf32> {onnx.name = "router_weight"},
                          %cb: tensor<8xf32> {onnx.name = "correction_bias"},
                          %wgu: tensor<8x16x16xf32> {onnx.name = "gate_up"},
                          %wd: tensor<8x16x8xf32> {onnx.name = "down"},
                          %sgu: tensor<16x16xf32> {onnx.name = "shared_gate_up"},
                          %sd: tensor<16x8xf32> {onnx.name = "shared_down"})
    -> (tensor<?x16xf32> {onnx.name = "out"}) {
  %y = moe.layer %x : tensor<?x16xf32> router_weight(%wr : tensor<8x16xf32>)
         correction_bias(%cb : tensor<8xf32>)
         gate_up(%wgu : tensor<8x16x16xf32>) down(%wd : tensor<8x16x8xf32>)
         shared_gate_up(%sgu : tensor<16x16xf32>) shared_down(%sd : tensor<16x8xf32>)
         {routing = #moe.routing<sigmoid_group_topk>, top_k = 3 : i64, normalize = true,
          num_groups = 4 : i64, topk_groups = 2 : i64, routed_scaling_factor = 2.5 : f64,
          activation = #moe.activation<silu>,
          gate_up_layout = #moe.gate_up_layout<concatenated>} -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

func.func @deepseek_lowered(%x: tensor<?x16xf32> {onnx.name = "x"},
                            %wr: tensor<8x16xf32> {onnx.name = "router_weight"},
                            %cb: tensor<8xf32> {onnx.name = "correction_bias"},
                            %wgu: tensor<8x16x16xf32> {onnx.name = "gate_up"},
                            %wd: tensor<8x16x8xf32> {onnx.name = "down"},
                            %sgu: tensor<16x16xf32> {onnx.name = "shared_gate_up"},
                            %sd: tensor<16x8xf32> {onnx.name = "shared_down"})
    -> (tensor<?x16xf32> {onnx.name = "out"}) {
  %none = onnx.NoValue
  %logits = "onnx.Gemm"(%x, %wr, %none) {transB = 1 : i64}
      : (tensor<?x16xf32>, tensor<8x16xf32>, none) -> tensor<?x8xf32>
  %ids, %w = moe.route %logits correction_bias(%cb : tensor<8xf32>)
      {routing = #moe.routing<sigmoid_group_topk>, top_k = 3 : i64, normalize = true,
       num_groups = 4 : i64, topk_groups = 2 : i64, routed_scaling_factor = 2.5 : f64}
      : tensor<?x8xf32> -> tensor<?x3xi32>, tensor<?x3xf32>
  %p, %o, %n = moe.sort %ids {num_experts = 8 : i64}
      : tensor<?x3xi32> -> tensor<?xi32>, tensor<8xi32>, tensor<i32>
  %rows = moe.permute %x, %p, %n {top_k = 3 : i64}
      : tensor<?x16xf32>, tensor<?xi32>, tensor<i32> -> tensor<?x16xf32>
  %h = moe.grouped_matmul %rows, %wgu, %o
      {epilogue = #moe.activation<silu>, epilogue_layout = #moe.gate_up_layout<concatenated>}
      : tensor<?x16xf32>, tensor<8x16x16xf32>, tensor<8xi32> -> tensor<?x8xf32>
  %y = moe.grouped_matmul %h, %wd, %o : tensor<?x8xf32>, tensor<8x16x8xf32>, tensor<8xi32> -> tensor<?x16xf32>
  %routed = moe.combine %y, %p, %w, %n
      : tensor<?x16xf32>, tensor<?xi32>, tensor<?x3xf32>, tensor<i32> -> tensor<?x16xf32>

  // Shared expert: one expert whose group ends at row T.
  %axis0 = "onnx.Constant"() {value = dense<[0]> : tensor<1xi64>} : () -> tensor<1xi64>
  %sgu3 = "onnx.Unsqueeze"(%sgu, %axis0) : (tensor<16x16xf32>, tensor<1xi64>) -> tensor<1x16x16xf32>
  %sd3 = "onnx.Unsqueeze"(%sd, %axis0) : (tensor<16x8xf32>, tensor<1xi64>) -> tensor<1x16x8xf32>
  %t64 = "onnx.Shape"(%x) {start = 0 : i64, end = 1 : i64} : (tensor<?x16xf32>) -> tensor<1xi64>
  %t = "onnx.Cast"(%t64) {to = 6 : i64} : (tensor<1xi64>) -> tensor<1xi32>
  %sh = moe.grouped_matmul %x, %sgu3, %t
      {epilogue = #moe.activation<silu>, epilogue_layout = #moe.gate_up_layout<concatenated>}
      : tensor<?x16xf32>, tensor<1x16x16xf32>, tensor<1xi32> -> tensor<?x8xf32>
  %shared = moe.grouped_matmul %sh, %sd3, %t
      : tensor<?x8xf32>, tensor<1x16x8xf32>, tensor<1xi32> -> tensor<?x16xf32>
  %out = "onnx.Add"(%routed, %shared) : (tensor<?x16xf32>, tensor<?x16xf32>) -> tensor<?x16xf32>
  return %out : tensor<?x16xf32>
}
