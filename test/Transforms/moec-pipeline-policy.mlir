// The codegen policy steps of --moec-pipeline: off by default (the grouped
// phase is unchanged), each when asked for, after the last phase.

// RUN: moec-opt %s --moec-pipeline="compile-to=grouped" | FileCheck %s --check-prefix=DEFAULT
// RUN: moec-opt %s --moec-pipeline="compile-to=grouped expert-weights=bf16 target=cuda legalize=true" | FileCheck %s --check-prefix=POLICY
// RUN: moec-opt %s --moec-pipeline="compile-to=grouped expert-weights=bf16 expert-outputs=bf16" | FileCheck %s --check-prefix=OUTPUTS
// RUN: moec-opt %s --moec-pipeline="compile-to=moe expert-weights=bf16 target=cuda" | FileCheck %s --check-prefix=MOE
// RUN: moec-opt %s --moec-pipeline="compile-to=grouped ep-size=2 expert-weights=bf16 target=cuda" | FileCheck %s --check-prefix=EP
// RUN: moec-opt %s --moec-pipeline="compile-to=grouped ep-size=1 expert-weights=bf16 target=cuda" | FileCheck %s --check-prefix=EP1
// RUN: moec-opt %s --moec-pipeline="compile-to=grouped expert-weights=mxfp4 target=cuda legalize=true" | FileCheck %s --check-prefix=MXFP4
// RUN: moec-opt %s --moec-pipeline="compile-to=grouped expert-weights=mxfp4" | FileCheck %s --check-prefix=MXFP4-NOTARGET

// DEFAULT-LABEL: func.func @block
// DEFAULT-NOT: bf16
// DEFAULT-NOT: moe.stream
// DEFAULT: "onnx.Reshape"
// DEFAULT-NOT: bf16
// DEFAULT-NOT: moe.stream

// POLICY-LABEL: func.func @block
// POLICY-NOT: onnx.
// POLICY: tensor.collapse_shape {{.*}} {moe.stream_input_view}
// POLICY: moe.linear {{.*}} : tensor<?x32xf32>, tensor<16x32xf32> -> tensor<?x16xf32>
// POLICY: moe.permute {{.*}} -> tensor<?x32xbf16>
// POLICY: moe.grouped_matmul {{.*}} : tensor<?x32xbf16>, tensor<16x32x32xbf16>, tensor<16xi32> -> tensor<?x16xbf16>
// POLICY: moe.grouped_matmul {{.*}} : tensor<?x16xbf16>, tensor<16x32x16xbf16>, tensor<16xi32> -> tensor<?x32xf32>
// POLICY: moe.linear {{.*}}moe.stream = 1 : i64{{.*}} : tensor<?x32xf32>, tensor<64x32xbf16> -> tensor<?x32xbf16>
// POLICY: moe.linear {{.*}}moe.stream = 1 : i64{{.*}} : tensor<?x32xbf16>, tensor<32x32xbf16> -> tensor<?x32xf32>
// POLICY: moe.combine
// POLICY-NOT: onnx.

// OUTPUTS-LABEL: func.func @block
// OUTPUTS-NOT: moe.stream
// OUTPUTS: moe.grouped_matmul {{.*}} -> tensor<?x32xbf16>
// OUTPUTS-NOT: moe.stream

// Expert parallelism after the casts: the bf16 experts are what each rank's
// moe.ep_shard takes its slice of (the cast saw the constants); the router
// stays f32, the shared expert on the side stream is bf16 too, and the
// combine is all-reduced.
// EP-LABEL: func.func @block
// EP-DAG: %[[WD:.*]] = arith.constant {{.*}} : tensor<16x32x16xbf16>
// EP-DAG: %[[WGU:.*]] = arith.constant {{.*}} : tensor<16x32x32xbf16>
// EP: moe.linear {{.*}} : tensor<?x32xf32>, tensor<16x32xf32> -> tensor<?x16xf32>
// EP: moe.sort {{.*}} {ep_size = 2 : i64, num_experts = 8 : i64}
// EP: moe.permute {{.*}} -> tensor<?x32xbf16>
// EP: %[[S1:.*]] = moe.ep_shard %[[WGU]] {ep_size = 2 : i64} : tensor<16x32x32xbf16> -> tensor<8x32x32xbf16>
// EP: moe.grouped_matmul %{{.*}}, %[[S1]], %{{.*}} : tensor<?x32xbf16>, tensor<8x32x32xbf16>, tensor<8xi32> -> tensor<?x16xbf16>
// EP: %[[S2:.*]] = moe.ep_shard %[[WD]] {ep_size = 2 : i64} : tensor<16x32x16xbf16> -> tensor<8x32x16xbf16>
// EP: moe.grouped_matmul %{{.*}}, %[[S2]], %{{.*}} : tensor<?x16xbf16>, tensor<8x32x16xbf16>, tensor<8xi32> -> tensor<?x32xf32>
// EP: moe.linear {{.*}}moe.stream = 1 : i64{{.*}} : tensor<?x32xf32>, tensor<64x32xbf16> -> tensor<?x32xbf16>
// EP: %[[Y:.*]] = moe.combine {{.*}} {ep_size = 2 : i64}
// EP: %[[R:.*]] = moe.all_reduce %[[Y]] {ep_size = 2 : i64}
// EP: return %[[R]]
// EP-NOT: xf32> -> tensor<8x

// A group of one is the program for every rank too (the rank and the
// all-reduce at run time), with bf16 experts.
// EP1-LABEL: func.func @block
// EP1: moe.sort {{.*}} {ep_size = 1 : i64, num_experts = 16 : i64}
// EP1: moe.ep_shard %{{.*}} {ep_size = 1 : i64} : tensor<16x32x32xbf16> -> tensor<16x32x32xbf16>
// EP1: moe.ep_shard %{{.*}} {ep_size = 1 : i64} : tensor<16x32x16xbf16> -> tensor<16x32x16xbf16>
// EP1: moe.combine {{.*}} {ep_size = 1 : i64}
// EP1: moe.all_reduce %{{.*}} {ep_size = 1 : i64}

// MXFP4 experts on CUDA: the rest of the block as expert-weights=bf16 stores
// it (the rows into the W4A16 kernel and the shared expert bf16, the router
// f32); without a target nothing but the experts is cast.
// MXFP4-LABEL: func.func @block
// MXFP4: moe.linear {{.*}} : tensor<?x32xf32>, tensor<16x32xf32> -> tensor<?x16xf32>
// MXFP4: moe.permute {{.*}} -> tensor<?x32xbf16>
// MXFP4: moe.grouped_matmul {{.*}} : tensor<?x32xbf16>, tensor<16x32x32xf4E2M1FN>, tensor<16xi32> -> tensor<?x16xbf16>
// MXFP4: moe.grouped_matmul {{.*}} : tensor<?x16xbf16>, tensor<16x32x16xf4E2M1FN>, tensor<16xi32> -> tensor<?x32xf32>
// MXFP4: moe.linear {{.*}}moe.stream = 1 : i64{{.*}} : tensor<?x32xf32>, tensor<64x32xbf16> -> tensor<?x32xbf16>
// MXFP4: moe.linear {{.*}}moe.stream = 1 : i64{{.*}} : tensor<?x32xbf16>, tensor<32x32xbf16> -> tensor<?x32xf32>
// MXFP4-NOTARGET-LABEL: func.func @block
// MXFP4-NOTARGET-NOT: bf16
// MXFP4-NOTARGET: tensor<16x32x32xf4E2M1FN>
// MXFP4-NOTARGET-NOT: bf16

// MOE-LABEL: func.func @block
// MOE-NOT: bf16
// MOE-NOT: moe.stream
// MOE: moe.layer
func.func @block(%x3: tensor<1x?x32xf32>) -> tensor<?x32xf32> {
  %shape = "onnx.Constant"() {value = dense<[-1, 32]> : tensor<2xi64>} : () -> tensor<2xi64>
  %x = "onnx.Reshape"(%x3, %shape) : (tensor<1x?x32xf32>, tensor<2xi64>) -> tensor<?x32xf32>
  %wr = arith.constant dense<0.01> : tensor<16x32xf32>
  %cb = arith.constant dense<0.0> : tensor<16xf32>
  %wgu = arith.constant dense<0.02> : tensor<16x32x32xf32>
  %wd = arith.constant dense<0.04> : tensor<16x32x16xf32>
  %sgu = arith.constant dense<0.05> : tensor<64x32xf32>
  %sd = arith.constant dense<0.06> : tensor<32x32xf32>
  %y = moe.layer %x : tensor<?x32xf32> router_weight(%wr : tensor<16x32xf32>)
         correction_bias(%cb : tensor<16xf32>)
         gate_up(%wgu : tensor<16x32x32xf32>)
         down(%wd : tensor<16x32x16xf32>)
         shared_gate_up(%sgu : tensor<64x32xf32>) shared_down(%sd : tensor<32x32xf32>)
         {routing = #moe.routing<sigmoid_group_topk>, top_k = 4 : i64, normalize = true,
          num_groups = 4 : i64, topk_groups = 2 : i64, routed_scaling_factor = 2.5 : f64,
          activation = #moe.activation<silu>,
          gate_up_layout = #moe.gate_up_layout<concatenated>} -> tensor<?x32xf32>
  return %y : tensor<?x32xf32>
}
