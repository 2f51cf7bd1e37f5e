// moe.layer on random inputs against float64 numpy references computed by
// Inputs/make_inputs.py (scripts/fixtures/moe_reference.py, written from the
// model specs, and a numpy transcription of docs/dialect.md for qwen2): every
// routing, every gate/up layout, every activation, biases, clamps, shared
// experts with and without the sigmoid gate, and f16. The layer rounds once,
// so f32 results agree to about 1e-7 and f16 results to one f16 step.

// RUN: moec-interp %s --function mixtral --inputs %S/Inputs/mixtral.inputs.npz --expected-outputs %S/Inputs/mixtral.expected.npz | FileCheck %s
// RUN: moec-interp %s --function gpt_oss --inputs %S/Inputs/gpt_oss.inputs.npz --expected-outputs %S/Inputs/gpt_oss.expected.npz | FileCheck %s
// RUN: moec-interp %s --function deepseek --inputs %S/Inputs/deepseek.inputs.npz --expected-outputs %S/Inputs/deepseek.expected.npz | FileCheck %s
// RUN: moec-interp %s --function separate --inputs %S/Inputs/separate.inputs.npz --expected-outputs %S/Inputs/separate.expected.npz | FileCheck %s
// RUN: moec-interp %s --function qwen2 --inputs %S/Inputs/qwen2.inputs.npz --expected-outputs %S/Inputs/qwen2.expected.npz | FileCheck %s
// RUN: moec-interp %s --function relu_f16 --inputs %S/Inputs/relu_f16.inputs.npz --expected-outputs %S/Inputs/relu_f16.expected.npz --rtol 1e-3 --atol 1e-3 | FileCheck %s
// The comparison can fail: mixtral's output against gpt_oss's expected one.
// RUN: not moec-interp %s --function mixtral --inputs %S/Inputs/mixtral.inputs.npz --expected-outputs %S/Inputs/gpt_oss.expected.npz | FileCheck %s --check-prefix=WRONG

// CHECK: out [6, 16]: max abs err {{.*}}: ok
// WRONG: out [6, 16]: max abs err {{.*}}: MISMATCH in {{[0-9]+}} of 96 elements (rtol 1.0e-05, atol 1.0e-06)

// Mixtral / Qwen3: softmax over all experts, top-2, renormalised, SiLU-GLU.
func.func @mixtral(%x: tensor<?x16xf32> {onnx.name = "x"},
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

// gpt-oss: router bias, top-k of the logits then softmax, interleaved clamped
// SwiGLU with alpha 1.702 and beta 1, expert biases.
func.func @gpt_oss(%x: tensor<?x16xf32> {onnx.name = "x"},
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

// DeepSeek-V3: sigmoid scores, selection-only correction bias, 4 groups of 2
// with the best 2 kept, top-3, renormalised with +1e-20, scaled by 2.5, plus a
// SiLU-GLU shared expert.
func.func @deepseek(%x: tensor<?x16xf32> {onnx.name = "x"},
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

// onnxruntime's SwiGLU with fc3: separate gate and up, all biases, given
// logits, alpha 1.5, beta 0.5, limit 3.
func.func @separate(%x: tensor<?x16xf32> {onnx.name = "x"},
                    %logits: tensor<?x8xf32> {onnx.name = "router_logits"},
                    %wg: tensor<8x8x16xf32> {onnx.name = "gate"},
                    %bg: tensor<8x8xf32> {onnx.name = "gate_bias"},
                    %wu: tensor<8x8x16xf32> {onnx.name = "up"},
                    %bu: tensor<8x8xf32> {onnx.name = "up_bias"},
                    %wd: tensor<8x16x8xf32> {onnx.name = "down"},
                    %bd: tensor<8x16xf32> {onnx.name = "down_bias"})
    -> (tensor<?x16xf32> {onnx.name = "out"}) {
  %y = moe.layer %x : tensor<?x16xf32> router_logits(%logits : tensor<?x8xf32>)
         gate_up(%wg : tensor<8x8x16xf32>) up(%wu : tensor<8x8x16xf32>)
         down(%wd : tensor<8x16x8xf32>)
         gate_up_bias(%bg : tensor<8x8xf32>) up_bias(%bu : tensor<8x8xf32>)
         down_bias(%bd : tensor<8x16xf32>)
         {routing = #moe.routing<softmax_topk>, top_k = 2 : i64, normalize = true,
          activation = #moe.activation<silu, alpha = 1.5, beta = 0.5, limit = 3.0>,
          gate_up_layout = #moe.gate_up_layout<separate>} -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// Qwen2-MoE-like: top-3 without renormalisation, GELU-GLU, a shared expert of
// 12 scaled by sigmoid(shared_gate · x).
func.func @qwen2(%x: tensor<?x16xf32> {onnx.name = "x"},
                 %logits: tensor<?x8xf32> {onnx.name = "router_logits"},
                 %wgu: tensor<8x16x16xf32> {onnx.name = "gate_up"},
                 %wd: tensor<8x16x8xf32> {onnx.name = "down"},
                 %sgu: tensor<24x16xf32> {onnx.name = "shared_gate_up"},
                 %sd: tensor<16x12xf32> {onnx.name = "shared_down"},
                 %sg: tensor<1x16xf32> {onnx.name = "shared_gate"})
    -> (tensor<?x16xf32> {onnx.name = "out"}) {
  %y = moe.layer %x : tensor<?x16xf32> router_logits(%logits : tensor<?x8xf32>)
         gate_up(%wgu : tensor<8x16x16xf32>) down(%wd : tensor<8x16x8xf32>)
         shared_gate_up(%sgu : tensor<24x16xf32>) shared_down(%sd : tensor<16x12xf32>)
         shared_gate(%sg : tensor<1x16xf32>)
         {routing = #moe.routing<softmax_topk>, top_k = 3 : i64,
          activation = #moe.activation<gelu>,
          gate_up_layout = #moe.gate_up_layout<concatenated>} -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// Ungated ReLU experts with biases, in f16.
func.func @relu_f16(%x: tensor<?x16xf16> {onnx.name = "x"},
                    %logits: tensor<?x8xf16> {onnx.name = "router_logits"},
                    %wu: tensor<8x8x16xf16> {onnx.name = "up"},
                    %bu: tensor<8x8xf16> {onnx.name = "up_bias"},
                    %wd: tensor<8x16x8xf16> {onnx.name = "down"},
                    %bd: tensor<8x16xf16> {onnx.name = "down_bias"})
    -> (tensor<?x16xf16> {onnx.name = "out"}) {
  %y = moe.layer %x : tensor<?x16xf16> router_logits(%logits : tensor<?x8xf16>)
         gate_up(%wu : tensor<8x8x16xf16>) down(%wd : tensor<8x16x8xf16>)
         gate_up_bias(%bu : tensor<8x8xf16>) down_bias(%bd : tensor<8x16xf16>)
         {routing = #moe.routing<softmax_topk>, top_k = 2 : i64,
          activation = #moe.activation<relu>,
          gate_up_layout = #moe.gate_up_layout<none>} -> tensor<?x16xf16>
  return %y : tensor<?x16xf16>
}
