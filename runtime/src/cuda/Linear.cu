//===- Linear.cu - moe.linear in f32: the router, and f32 shared experts ---===//
//
// The router's logits decide which experts run, so they are computed from f32
// weights in f32, as the CPU and the reference do: a bf16 router would flip
// near-tied top-k choices. The weight [N, K] is read once per 16 input rows:
// each warp owns one output column (its gate and up rows when gated) and walks
// K with coalesced loads, against the 16 rows staged in shared memory.
//
//===----------------------------------------------------------------------===//

#include "Epilogue.cuh"
#include "moec/runtime/Cuda.h"
#include "moec/runtime/cuda/MoEKernels.h"

namespace moec::rt::cuda {
namespace {

using cpu::GateUpLayout;

constexpr int kThreads = 256;
constexpr int kColumnsPerBlock = kThreads / 32; // one output column per warp
constexpr int kRowsPerBlock = 16;
constexpr int kChunk = 256; // K staged per step: 16 rows x 256 floats = 16 KB

/// acc[r] += this lane's share of dot(rows[r][0, left), wRow[0, left)) over one
/// staged chunk; all of the lane's 8 weight loads are issued before the products.
__device__ __forceinline__ void accumulate(const float *wRow, int64_t left, int lane,
                                           const float (*rows)[kChunk],
                                           float (&acc)[kRowsPerBlock]) {
  float wv[kChunk / 32];
#pragma unroll
  for (int j = 0; j < kChunk / 32; ++j)
    wv[j] = lane + 32 * j < left ? __ldg(wRow + lane + 32 * j) : 0.0f;
#pragma unroll
  for (int j = 0; j < kChunk / 32; ++j)
#pragma unroll
    for (int r = 0; r < kRowsPerBlock; ++r)
      acc[r] += wv[j] * rows[r][lane + 32 * j];
}

__global__ void __launch_bounds__(kThreads)
linearKernel(const float *x, int64_t m, int64_t k, const float *w, int64_t n, const float *bias,
             cpu::Epilogue epilogue, int64_t width, float *y) {
  __shared__ float rows[kRowsPerBlock][kChunk];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t firstRow = int64_t(blockIdx.y) * kRowsPerBlock;
  const int rowCount = static_cast<int>(m - firstRow < kRowsPerBlock ? m - firstRow : kRowsPerBlock);
  const int64_t column = int64_t(blockIdx.x) * kColumnsPerBlock + warp;
  const bool gated = epilogue.enabled && epilogue.layout != GateUpLayout::None;
  const bool interleaved = epilogue.layout == GateUpLayout::Interleaved;
  // The weight rows of this warp's output: [gate, up] when gated.
  int64_t weightRow[2] = {column, -1};
  if (gated) {
    weightRow[0] = interleaved ? 2 * column : column;
    weightRow[1] = interleaved ? 2 * column + 1 : width + column;
  }
  const bool active = column < width;

  float acc[2][kRowsPerBlock] = {};
  for (int64_t k0 = 0; k0 < k; k0 += kChunk) {
    __syncthreads();
    for (int i = threadIdx.x; i < kRowsPerBlock * kChunk; i += kThreads) {
      int r = i / kChunk, c = i % kChunk;
      rows[r][c] = r < rowCount && k0 + c < k ? x[(firstRow + r) * k + k0 + c] : 0.0f;
    }
    __syncthreads();
    if (!active)
      continue;
    accumulate(w + weightRow[0] * k + k0, k - k0, lane, rows, acc[0]);
    if (gated)
      accumulate(w + weightRow[1] * k + k0, k - k0, lane, rows, acc[1]);
  }
  if (!active)
    return;
#pragma unroll
  for (int r = 0; r < kRowsPerBlock; ++r) {
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int offset = 16; offset > 0; offset /= 2)
        acc[h][r] += __shfl_xor_sync(0xffffffffu, acc[h][r], offset);
  }
  // Lane r writes row r: the reduced sums are in every lane.
#pragma unroll
  for (int r = 0; r < kRowsPerBlock; ++r) {
    if (lane != r || r >= rowCount)
      continue;
    float g = acc[0][r] + (bias ? bias[weightRow[0]] : 0.0f);
    float result = g;
    if (gated)
      result = device::gatedEpilogue(epilogue, g, acc[1][r] + (bias ? bias[weightRow[1]] : 0.0f));
    else if (epilogue.enabled)
      result = device::activate(epilogue.kind, epilogue.alpha, g);
    y[(firstRow + r) * width + column] = result;
  }
}

} // namespace

Status linear(const float *x, int64_t m, int64_t k, const float *w, int64_t n, const float *bias,
              const Epilogue &epilogue, float *y, cudaStream_t stream) {
  if (m == 0)
    return Status::ok();
  bool gated = epilogue.enabled && epilogue.layout != GateUpLayout::None;
  if (gated && n % 2 != 0)
    return Status::error("linear: gated N = " + std::to_string(n) + " is odd");
  int64_t width = gated ? n / 2 : n;
  int64_t rowBlocks = (m + kRowsPerBlock - 1) / kRowsPerBlock;
  if (rowBlocks > 65535)
    return Status::error("linear: " + std::to_string(m) + " rows exceed the grid's limit");
  dim3 grid(static_cast<unsigned>((width + kColumnsPerBlock - 1) / kColumnsPerBlock),
            static_cast<unsigned>(rowBlocks));
  linearKernel<<<grid, kThreads, 0, stream>>>(x, m, k, w, n, bias, epilogue, width, y);
  MOEC_CUDA_TRY(cudaGetLastError());
  return Status::ok();
}

} // namespace moec::rt::cuda
