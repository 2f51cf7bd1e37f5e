//===- ModelKernels.cu - CUDA kernels for the whole-model ops ---------------===//
//
// Correctness first, and friendly to decode (a few tokens a step): one block
// per token (embedding, rotary) and per RMSNorm group; attention and its KV
// cache are Attention.cu and DeviceKVCache.cpp. Every kernel is launched
// programmatically dependent (DependentLaunch.cuh) and waits for its
// predecessor before touching memory; none allocates or synchronises, so a
// step is captured in a CUDA graph. Data the kernels read on the device
// (token ids, positions, sequences) is never trusted as an index: the header
// says what out-of-range values do.
//
//===----------------------------------------------------------------------===//

#include "DependentLaunch.cuh"
#include "GridSize.h"
#include "moec/runtime/cuda/ModelKernels.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace moec::rt::cuda {
namespace {

using detail::blocksFor;
using detail::kSMs;

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
/// Blocks of the kernels that loop over rows: enough to fill the device a few
/// times over.
constexpr int64_t kMaxRowBlocks = 16 * kSMs;

__device__ __forceinline__ double warpSum(double v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2)
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

//===----------------------------------------------------------------------===//
// embedding, rmsNorm, rotary, add
//===----------------------------------------------------------------------===//

/// A table element as f32: itself, or a bf16's bits widened (exact).
__device__ __forceinline__ float widen(float v) { return v; }
__device__ __forceinline__ float widen(uint16_t bits) {
  return __uint_as_float(static_cast<uint32_t>(bits) << 16);
}

template <typename Element>
__global__ void embeddingKernel(const int64_t *ids, int64_t n, const Element *table, int64_t vocab,
                                int64_t hidden, float *out) {
  device::awaitPrerequisites();
  for (int64_t t = blockIdx.x; t < n; t += gridDim.x) {
    int64_t id = ids[t];
    bool valid = id >= 0 && id < vocab;
    const Element *row = table + (valid ? id : 0) * hidden;
    for (int64_t j = threadIdx.x; j < hidden; j += blockDim.x)
      out[t * hidden + j] = valid ? widen(row[j]) : 0.0f;
  }
}

/// One block per group of `group` contiguous columns (row r's groups are
/// groups r·k/group onwards, so group g starts at g·group).
__global__ void rmsNormKernel(const float *x, int64_t groups, int64_t group, const float *weight,
                              float epsilon, float weightOffset, float *y) {
  device::awaitPrerequisites();
  __shared__ double partial[kWarps];
  for (int64_t g = blockIdx.x; g < groups; g += gridDim.x) {
    const float *in = x + g * group;
    float *o = y + g * group;
    double squares = 0;
    for (int64_t j = threadIdx.x; j < group; j += blockDim.x)
      squares += static_cast<double>(in[j]) * in[j];
    squares = warpSum(squares);
    if (threadIdx.x % 32 == 0)
      partial[threadIdx.x / 32] = squares;
    __syncthreads();
    double total = 0;
    for (int w = 0; w < kWarps; ++w)
      total += partial[w];
    __syncthreads(); // partial is rewritten by the next group
    auto inverse = static_cast<float>(
        1.0 / sqrt(total / static_cast<double>(group) + static_cast<double>(epsilon)));
    // Each element is read and written by one thread: y may be x.
    for (int64_t j = threadIdx.x; j < group; j += blockDim.x)
      o[j] = in[j] * inverse * (weightOffset + weight[j]);
  }
}

/// One block per token; its cosines and sines (scaled, in double) in shared
/// memory, [halfRotary] each.
__global__ void rotaryKernel(const float *x, int64_t n, int64_t columns, const int64_t *positions,
                             const float *invFreq, int64_t half, int64_t headDim, int64_t offset,
                             bool interleaved, float scale, float *y) {
  device::awaitPrerequisites();
  extern __shared__ double trig[];
  double *cosine = trig, *sine = trig + half;
  int64_t heads = columns / headDim;
  for (int64_t t = blockIdx.x; t < n; t += gridDim.x) {
    auto position = static_cast<double>(positions[t]);
    for (int64_t i = threadIdx.x; i < half; i += blockDim.x) {
      double s, c;
      // The angle in double: positions times a frequency lose too much in f32.
      sincos(position * static_cast<double>(invFreq[i]), &s, &c);
      cosine[i] = c * scale;
      sine[i] = s * scale;
    }
    __syncthreads();
    const float *row = x + t * columns;
    float *o = y + t * columns;
    if (o != row)
      for (int64_t c = threadIdx.x; c < columns; c += blockDim.x) {
        int64_t inHead = c % headDim;
        if (inHead < offset || inHead >= offset + 2 * half)
          o[c] = row[c];
      }
    // A thread per pair reads both before writing both: y may be x.
    for (int64_t p = threadIdx.x; p < heads * half; p += blockDim.x) {
      int64_t i = p % half, base = (p / half) * headDim + offset;
      int64_t a = interleaved ? base + 2 * i : base + i;
      int64_t b = interleaved ? base + 2 * i + 1 : base + half + i;
      double first = row[a], second = row[b];
      // Products and sums rounded one by one, as the CPU kernel's (no FMA).
      o[a] = static_cast<float>(__dsub_rn(__dmul_rn(first, cosine[i]), __dmul_rn(second, sine[i])));
      o[b] = static_cast<float>(__dadd_rn(__dmul_rn(second, cosine[i]), __dmul_rn(first, sine[i])));
    }
    __syncthreads(); // the next token rewrites cosine and sine
  }
}

__global__ void addKernel(const float *a, const float *b, int64_t count, float *out) {
  device::awaitPrerequisites();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = __fadd_rn(a[i], b[i]);
}

} // namespace

//===----------------------------------------------------------------------===//
// Launches
//===----------------------------------------------------------------------===//

Status embedding(const int64_t *ids, int64_t n, const float *table, int64_t vocab, int64_t hidden,
                 float *out, cudaStream_t stream) {
  if (n <= 0 || hidden <= 0)
    return Status::ok();
  return detail::launchDependent(embeddingKernel<float>, dim3(blocksFor(n, 1, kMaxRowBlocks)),
                                 dim3(kThreads), 0, stream, ids, n, table, vocab, hidden, out);
}

Status embeddingBF16(const int64_t *ids, int64_t n, const uint16_t *table, int64_t vocab,
                     int64_t hidden, float *out, cudaStream_t stream) {
  if (n <= 0 || hidden <= 0)
    return Status::ok();
  return detail::launchDependent(embeddingKernel<uint16_t>, dim3(blocksFor(n, 1, kMaxRowBlocks)),
                                 dim3(kThreads), 0, stream, ids, n, table, vocab, hidden, out);
}

Status rmsNorm(const float *x, int64_t m, int64_t k, const float *weight, int64_t group,
               float epsilon, float weightOffset, float *y, cudaStream_t stream) {
  if (group <= 0 || k % group != 0)
    return Status::error("rmsNorm: groups of " + std::to_string(group) + " columns in rows of " +
                         std::to_string(k));
  int64_t groups = m * (k / group);
  if (groups <= 0)
    return Status::ok();
  return detail::launchDependent(rmsNormKernel, dim3(blocksFor(groups, 1, kMaxRowBlocks)),
                                 dim3(kThreads), 0, stream, x, groups, group, weight, epsilon,
                                 weightOffset, y);
}

Status rotary(const float *x, int64_t n, int64_t columns, const int64_t *positions,
              const float *invFreq, int64_t halfRotary, int64_t headDim, int64_t offset,
              bool interleaved, float scale, float *y, cudaStream_t stream) {
  if (headDim <= 0 || columns % headDim != 0 || halfRotary < 0 || offset < 0 ||
      offset + 2 * halfRotary > headDim)
    return Status::error("rotary: a rotated slice of " + std::to_string(2 * halfRotary) +
                         " columns at " + std::to_string(offset) + " does not fit heads of " +
                         std::to_string(headDim) + " in rows of " + std::to_string(columns));
  if (n <= 0 || columns <= 0)
    return Status::ok();
  size_t shared = 2 * static_cast<size_t>(halfRotary) * sizeof(double);
  if (shared > 48 * 1024)
    return Status::error("rotary: " + std::to_string(halfRotary) +
                         " frequencies exceed the kernel's shared memory");
  return detail::launchDependent(rotaryKernel, dim3(blocksFor(n, 1, kMaxRowBlocks)), dim3(kThreads),
                                 shared, stream, x, n, columns, positions, invFreq, halfRotary,
                                 headDim, offset, interleaved, scale, y);
}

Status add(const float *a, const float *b, int64_t count, float *out, cudaStream_t stream) {
  if (count <= 0)
    return Status::ok();
  return detail::launchDependent(addKernel, dim3(blocksFor(count, kThreads, 4 * kMaxRowBlocks)),
                                 dim3(kThreads), 0, stream, a, b, count, out);
}

} // namespace moec::rt::cuda
