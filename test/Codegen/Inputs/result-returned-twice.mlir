// One kernel result returned as two outputs: emit-cuda-in-place.mlir checks
// that the artifact copies both out instead of running in place.
func.func @f(%x: tensor<?x8xf32> {onnx.name = "x"}) -> (tensor<?x8xf32> {onnx.name = "y"}, tensor<?x8xf32> {onnx.name = "y2"}) {
  %w0 = arith.constant dense<0.125> : tensor<8x8xf32>
  %y = moe.linear %x, %w0 : tensor<?x8xf32>, tensor<8x8xf32> -> tensor<?x8xf32>
  return %y, %y : tensor<?x8xf32>, tensor<?x8xf32>
}
