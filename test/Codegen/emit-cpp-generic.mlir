// moe.elementwise printed for the CPU as one fused loop over rows × columns
// (the body's ops as f32 expressions; [N, C] read per element, [N, 1] per row,
// [C] per column), moe.reduce_rows as a loop over each row; the pool splits
// the rows. The CUDA target refuses them.
//
// RUN: moec-translate --emit-cpp %s | FileCheck %s
// RUN: not moec-translate --emit-cuda %s 2>&1 | FileCheck %s --check-prefix=CUDA
// CUDA: error: cannot generate code for 'moe.reduce_rows': generic whole-model ops (moe.elementwise, moe.reduce_rows) have no kernels on the CUDA target yet; compile for --target=cpu

// CHECK: // moe.reduce_rows
// CHECK-NEXT: pool.parallelFor((T), double(T) * 8, [&](int64_t r0, int64_t r1) {
// CHECK-NEXT:   for (int64_t r = r0; r < r1; ++r) {
// CHECK-NEXT:     double acc = 0.0;
// CHECK-NEXT:     for (int64_t c = 0; c < 8; ++c)
// CHECK-NEXT:       acc += in0[r * 8 + c];
// CHECK-NEXT:     [[M:v[0-9]+]][r] = static_cast<float>(acc / 8.0);
// CHECK: // moe.elementwise
// CHECK-NEXT: pool.parallelFor((T), double(T) * 8 * 5, [&](int64_t r0, int64_t r1) {
// CHECK-NEXT:   for (int64_t r = r0; r < r1; ++r)
// CHECK-NEXT:     for (int64_t c = 0; c < 8; ++c) {
// CHECK-NEXT:       const float a0 = in0[r * 8 + c];
// CHECK-NEXT:       const float a1 = [[M]][r];
// CHECK-NEXT:       const float a2 = w0[c];
// CHECK-NEXT:       const float e0 = 0x1.4f8b58p-17f;
// CHECK-NEXT:       const float e1 = (a1 + e0);
// CHECK-NEXT:       const float e2 = (1.0f / std::sqrt(e1));
// CHECK-NEXT:       const float e3 = (a0 * e2);
// CHECK-NEXT:       const float e4 = (e3 * a2);
// CHECK-NEXT:       v{{[0-9]+}}[r * 8 + c] = e4;
func.func @forward(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %w = arith.constant dense<1.5> : tensor<8xf32>
  %m = moe.reduce_rows <mean> %x : tensor<?x8xf32> -> tensor<?x1xf32>
  %y = moe.elementwise %x, %m, %w : tensor<?x8xf32>, tensor<?x1xf32>, tensor<8xf32> -> tensor<?x8xf32> {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %eps = arith.constant 1.0e-5 : f32
    %0 = arith.addf %b, %eps : f32
    %1 = math.rsqrt %0 : f32
    %2 = arith.mulf %a, %1 : f32
    %3 = arith.mulf %2, %c : f32
    moe.yield %3 : f32
  }
  return %y : tensor<?x8xf32>
}
