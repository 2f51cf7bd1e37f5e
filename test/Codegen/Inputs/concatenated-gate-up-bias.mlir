// A gated block with concatenated gate/up halves and a gate/up bias (E=4 H=16
// I=8): emit-cuda-bf16.mlir checks that both are interleaved on the device.
func.func @block(%hidden_states: tensor<?x16xf32> {onnx.name = "hidden_states"})
    -> (tensor<?x16xf32> {onnx.name = "output"}) {
  %router = arith.constant {moec.name = "router"} dense<0.01> : tensor<4x16xf32>
  %gate_up = arith.constant {moec.name = "gate_up"} dense<0.02> : tensor<4x16x16xf32>
  %gate_up_bias = arith.constant {moec.name = "gate_up_bias"} dense<0.5> : tensor<4x16xf32>
  %down = arith.constant {moec.name = "down"} dense<0.03> : tensor<4x16x8xf32>
  %out = moe.layer %hidden_states : tensor<?x16xf32>
           router_weight(%router : tensor<4x16xf32>)
           gate_up(%gate_up : tensor<4x16x16xf32>)
           down(%down : tensor<4x16x8xf32>)
           gate_up_bias(%gate_up_bias : tensor<4x16xf32>)
           {routing = #moe.routing<softmax_topk>, top_k = 2 : i64, normalize = true, activation = #moe.activation<silu>, gate_up_layout = #moe.gate_up_layout<concatenated>} -> tensor<?x16xf32>
  return %out : tensor<?x16xf32>
}
