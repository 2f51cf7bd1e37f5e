// A Mixtral-shaped MoE block written by hand in the moe dialect: 8 experts, top-2,
// softmax routing with renormalisation, SiLU-GLU experts with gate and up concatenated.
// `scripts/example.sh` parses and verifies it with moec-opt.
func.func @mixtral_block(%hidden: tensor<?x64xf32>, %router: tensor<8x64xf32>,
                         %gate_up: tensor<8x256x64xf32>, %down: tensor<8x64x128xf32>)
    -> tensor<?x64xf32> {
  %out = moe.layer %hidden : tensor<?x64xf32>
           router_weight(%router : tensor<8x64xf32>)
           gate_up(%gate_up : tensor<8x256x64xf32>) down(%down : tensor<8x64x128xf32>)
           {routing = #moe.routing<softmax_topk>, top_k = 2 : i64, normalize = true,
            activation = #moe.activation<silu>,
            gate_up_layout = #moe.gate_up_layout<concatenated>} -> tensor<?x64xf32>
  return %out : tensor<?x64xf32>
}
