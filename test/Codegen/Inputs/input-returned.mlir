// An input returned as an output beside a kernel result: emit-cuda-in-place.mlir
// checks that the artifact copies instead of running in place.
func.func @f(%x: tensor<?x8xf32> {onnx.name = "x"}) -> (tensor<?x8xf32> {onnx.name = "y"}, tensor<?x8xf32> {onnx.name = "x_out"}) {
  %w0 = arith.constant dense<0.125> : tensor<8x8xf32>
  %y = moe.linear %x, %w0 : tensor<?x8xf32>, tensor<8x8xf32> -> tensor<?x8xf32>
  return %y, %x : tensor<?x8xf32>, tensor<?x8xf32>
}
