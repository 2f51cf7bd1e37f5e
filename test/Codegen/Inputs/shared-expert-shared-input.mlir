// A shared expert that reads a projection the routed experts' permute reads
// too: emit-cuda-side-stream.mlir checks that it stays on the main stream.
func.func @shared_input(%x: tensor<?x16xf32> {onnx.name = "x"},
                        %ids: tensor<?x1xi32> {onnx.name = "ids"},
                        %weights: tensor<?x1xf32> {onnx.name = "weights"})
    -> (tensor<?x16xf32> {onnx.name = "out"}) {
  %w = arith.constant {moec.name = "w"} dense<0.02> : tensor<4x16x16xf32>
  %wp = arith.constant {moec.name = "wp"} dense<0.01> : tensor<16x16xf32>
  %ws = arith.constant {moec.name = "ws"} dense<0.03> : tensor<16x16xf32>
  %h = moe.linear %x, %wp : tensor<?x16xf32>, tensor<16x16xf32> -> tensor<?x16xf32>
  %perm, %offsets, %nvalid = moe.sort %ids {num_experts = 4 : i64}
      : tensor<?x1xi32> -> tensor<?xi32>, tensor<4xi32>, tensor<i32>
  %rows = moe.permute %h, %perm, %nvalid {top_k = 1 : i64}
      : tensor<?x16xf32>, tensor<?xi32>, tensor<i32> -> tensor<?x16xf32>
  %y = moe.grouped_matmul %rows, %w, %offsets
      : tensor<?x16xf32>, tensor<4x16x16xf32>, tensor<4xi32> -> tensor<?x16xf32>
  %shared = moe.linear %h, %ws : tensor<?x16xf32>, tensor<16x16xf32> -> tensor<?x16xf32>
  %out = moe.combine %y, %perm, %weights, %nvalid addend(%shared : tensor<?x16xf32>)
      : tensor<?x16xf32>, tensor<?xi32>, tensor<?x1xf32>, tensor<i32> -> tensor<?x16xf32>
  return %out : tensor<?x16xf32>
}
