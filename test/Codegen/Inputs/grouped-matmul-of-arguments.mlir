// A grouped matmul of rows and offsets that the caller passes in: nothing
// says when the offsets were written, so emit-cuda-bf16.mlir checks that the
// kernel waits for its predecessor before reading them.
func.func @grouped(%rows: tensor<?x16xf32> {onnx.name = "rows"},
                   %offsets: tensor<4xi32> {onnx.name = "offsets"})
    -> (tensor<?x8xf32> {onnx.name = "out"}) {
  %w = arith.constant {moec.name = "w"} dense<0.02> : tensor<4x8x16xf32>
  %out = moe.grouped_matmul %rows, %w, %offsets
      : tensor<?x16xf32>, tensor<4x8x16xf32>, tensor<4xi32> -> tensor<?x8xf32>
  return %out : tensor<?x8xf32>
}
