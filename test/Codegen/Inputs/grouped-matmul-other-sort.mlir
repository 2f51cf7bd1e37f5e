// Rows permuted by one sort, offsets from another sort emitted right before the
// grouped matmul: the offsets are not settled, so emit-cuda-bf16.mlir checks
// that the kernel waits for its predecessor before reading them.
func.func @other_sort(%x: tensor<?x16xf32> {onnx.name = "x"},
                      %ids: tensor<?x1xi32> {onnx.name = "ids"},
                      %other: tensor<?x1xi32> {onnx.name = "other"})
    -> (tensor<?x8xf32> {onnx.name = "out"}) {
  %w = arith.constant {moec.name = "w"} dense<0.02> : tensor<4x8x16xf32>
  %perm, %offsets, %nvalid = moe.sort %ids {num_experts = 4 : i64}
      : tensor<?x1xi32> -> tensor<?xi32>, tensor<4xi32>, tensor<i32>
  %rows = moe.permute %x, %perm, %nvalid {top_k = 1 : i64}
      : tensor<?x16xf32>, tensor<?xi32>, tensor<i32> -> tensor<?x16xf32>
  %perm2, %offsets2, %nvalid2 = moe.sort %other {num_experts = 4 : i64}
      : tensor<?x1xi32> -> tensor<?xi32>, tensor<4xi32>, tensor<i32>
  %out = moe.grouped_matmul %rows, %w, %offsets2
      : tensor<?x16xf32>, tensor<4x8x16xf32>, tensor<4xi32> -> tensor<?x8xf32>
  return %out : tensor<?x8xf32>
}
