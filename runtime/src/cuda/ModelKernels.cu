//===- ModelKernels.cu - CUDA kernels for the whole-model ops ---------------===//
//
// Friendly to decode (a few tokens a step, where a kernel's latency is its
// cost) and fine at prefill: one block per token for the embedding; RMSNorm
// one warp per group of up to 1024 columns (the per-head norms) and one block
// per wider group, with float4 loads and at most one barrier; rotary a block
// per (token, chunk of heads), each thread its own sine and cosine, so that
// a decode step's pairs are all in flight at once. Attention and its KV
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
/// rmsNorm: groups up to this many columns take one warp each; wider ones a
/// block of up to kMaxNormThreads.
constexpr int64_t kWarpGroup = 1024;
constexpr int kMaxNormThreads = 512;
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

/// The sum of squares of a group's columns, in double (each product exact),
/// then the group's scale as float: the CPU kernel's inverse, whose float
/// result the order of the double sum changes only at a float rounding
/// boundary.
__device__ __forceinline__ float inverseRms(double squares, int64_t group, float epsilon) {
  return static_cast<float>(
      1.0 / sqrt(squares / static_cast<double>(group) + static_cast<double>(epsilon)));
}

/// Vec consecutive floats: a float4 where the rows are 16-byte aligned.
template <int Vec> struct Floats;
template <> struct Floats<4> {
  float v[4];
  __device__ __forceinline__ void load(const float *p) {
    float4 f = *reinterpret_cast<const float4 *>(p);
    v[0] = f.x, v[1] = f.y, v[2] = f.z, v[3] = f.w;
  }
  __device__ __forceinline__ void store(float *p) const {
    *reinterpret_cast<float4 *>(p) = make_float4(v[0], v[1], v[2], v[3]);
  }
};
template <> struct Floats<1> {
  float v[1];
  __device__ __forceinline__ void load(const float *p) { v[0] = *p; }
  __device__ __forceinline__ void store(float *p) const { *p = v[0]; }
};

/// y = x · inverse · (weightOffset + weight) over one group's Vec-wide chunks
/// [from, chunks) stepping by `step`, each read and written by one thread (y
/// may be x). The products in the CPU kernel's order (no FMA to contract).
template <int Vec>
__device__ __forceinline__ void scaleGroup(const float *in, float *o, const float *weight,
                                           int64_t from, int64_t chunks, int64_t step,
                                           float inverse, float weightOffset) {
  for (int64_t c = from; c < chunks; c += step) {
    Floats<Vec> x, w;
    x.load(in + c * Vec);
    w.load(weight + c * Vec);
#pragma unroll
    for (int e = 0; e < Vec; ++e)
      x.v[e] = x.v[e] * inverse * (weightOffset + w.v[e]);
    x.store(o + c * Vec);
  }
}

/// The sum of squares of a group's chunks [from, chunks) stepping by `step`.
/// With an addend (moe.add_rms_norm) each chunk is first in + addend, rounded
/// once as the add kernel does, and written to `sum`, which scaleGroup then
/// reads back: the same thread's chunks, so its own writes.
template <int Vec>
__device__ __forceinline__ double sumSquares(const float *in, const float *addend, float *sum,
                                             int64_t from, int64_t chunks, int64_t step) {
  double squares = 0;
  for (int64_t c = from; c < chunks; c += step) {
    Floats<Vec> x;
    x.load(in + c * Vec);
    if (addend) {
      Floats<Vec> b;
      b.load(addend + c * Vec);
#pragma unroll
      for (int e = 0; e < Vec; ++e)
        x.v[e] = __fadd_rn(x.v[e], b.v[e]);
      x.store(sum + c * Vec);
    }
#pragma unroll
    for (int e = 0; e < Vec; ++e)
      squares += static_cast<double>(x.v[e]) * x.v[e];
  }
  return squares;
}

/// Groups of up to kWarpGroup columns (Qwen3's per-head q and k norms of 128):
/// one warp per group, no barrier. Group g starts at g·group (row r's groups
/// are r·k/group onwards).
template <int Vec>
__global__ void rmsNormWarpKernel(const float *x, const float *addend, int64_t groups,
                                  int64_t group, const float *weight, float epsilon,
                                  float weightOffset, float *sum, float *y) {
  device::awaitPrerequisites();
  const int lane = threadIdx.x % 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / 32);
  const int64_t chunks = group / Vec;
  for (int64_t g = blockIdx.x * static_cast<int64_t>(blockDim.x / 32) + threadIdx.x / 32;
       g < groups; g += warps) {
    const int64_t at = g * group;
    double squares = warpSum(sumSquares<Vec>(x + at, addend ? addend + at : nullptr,
                                             addend ? sum + at : nullptr, lane, chunks, 32));
    scaleGroup<Vec>(addend ? sum + at : x + at, y + at, weight, lane, chunks, 32,
                    inverseRms(squares, group, epsilon), weightOffset);
  }
}

/// Wider groups (a hidden row of 2048-7168 columns): one block per group,
/// blockDim.x threads (a multiple of 32, at most kMaxNormThreads), one
/// barrier: the warps' sums in shared memory, each thread adding them in
/// the same order.
template <int Vec>
__global__ void rmsNormBlockKernel(const float *x, const float *addend, int64_t groups,
                                   int64_t group, const float *weight, float epsilon,
                                   float weightOffset, float *sum, float *y) {
  device::awaitPrerequisites();
  __shared__ double partial[2][kMaxNormThreads / 32];
  const int warps = blockDim.x / 32;
  const int64_t chunks = group / Vec;
  int parity = 0;
  for (int64_t g = blockIdx.x; g < groups; g += gridDim.x, parity ^= 1) {
    const int64_t at = g * group;
    double squares =
        warpSum(sumSquares<Vec>(x + at, addend ? addend + at : nullptr,
                                addend ? sum + at : nullptr, threadIdx.x, chunks, blockDim.x));
    // Alternating buffers: the next group's writes cannot reach the ones
    // a slower warp is still adding.
    if (threadIdx.x % 32 == 0)
      partial[parity][threadIdx.x / 32] = squares;
    __syncthreads();
    double total = 0;
    for (int w = 0; w < warps; ++w)
      total += partial[parity][w];
    scaleGroup<Vec>(addend ? sum + at : x + at, y + at, weight, threadIdx.x, chunks, blockDim.x,
                    inverseRms(total, group, epsilon), weightOffset);
  }
}

/// Block (token t, chunk c of heads): a thread per (frequency i, head slot),
/// i = threadIdx.x % half (half ≤ kThreads; wider rotations step i by
/// kThreads), slot = threadIdx.x / half of `slots` = max(1, kThreads / half).
/// The thread's cosine and sine of i (scaled, in double) are computed once
/// for the token, by the thread itself (no shared memory, no barrier), and
/// rotate the pairs of heads c·chunkHeads + slot, + slots, ... of the chunk.
__global__ void rotaryKernel(const float *x, int64_t n, int64_t columns, const int64_t *positions,
                             const float *invFreq, int64_t half, int64_t headDim, int64_t offset,
                             bool interleaved, float scale, int64_t chunkHeads, float *y) {
  device::awaitPrerequisites();
  const int64_t heads = columns / headDim;
  const bool several = half > 0 && half < kThreads; // heads per pass
  const int64_t slots = several ? kThreads / half : 1;
  const int64_t slot = several ? threadIdx.x / half : 0;
  const int64_t firstHead = blockIdx.y * chunkHeads;
  const int64_t lastHead = min(heads, firstHead + chunkHeads);
  for (int64_t t = blockIdx.x; t < n; t += gridDim.x) {
    const float *row = x + t * columns;
    float *o = y + t * columns;
    if (o != row) // columns outside the rotated slice pass through
      for (int64_t c = firstHead * headDim + threadIdx.x; c < lastHead * headDim;
           c += blockDim.x) {
        int64_t inHead = c % headDim;
        if (inHead < offset || inHead >= offset + 2 * half)
          o[c] = row[c];
      }
    if (slot >= slots)
      continue;
    auto position = static_cast<double>(positions[t]);
    for (int64_t i = several ? threadIdx.x % half : threadIdx.x; i < half;
         i += kThreads) {
      double s, c;
      // The angle in double: positions times a frequency lose too much in f32.
      sincos(position * static_cast<double>(invFreq[i]), &s, &c);
      const double cosine = c * scale, sine = s * scale;
      for (int64_t h = firstHead + slot; h < lastHead; h += slots) {
        int64_t base = h * headDim + offset;
        int64_t a = interleaved ? base + 2 * i : base + i;
        int64_t b = interleaved ? base + 2 * i + 1 : base + half + i;
        // Both read before either is written: y may be x.
        double first = row[a], second = row[b];
        // Products and sums rounded one by one, as the CPU kernel's (no FMA).
        o[a] = static_cast<float>(__dsub_rn(__dmul_rn(first, cosine), __dmul_rn(second, sine)));
        o[b] = static_cast<float>(__dadd_rn(__dmul_rn(second, cosine), __dmul_rn(first, sine)));
      }
    }
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

namespace {

/// rmsNorm, and with an addend moe.add_rms_norm (the sum written to `sum`).
Status launchNorm(const float *x, const float *addend, int64_t m, int64_t k, const float *weight,
                  int64_t group, float epsilon, float weightOffset, float *sum, float *y,
                  cudaStream_t stream) {
  if (group <= 0 || k % group != 0)
    return Status::error("rmsNorm: groups of " + std::to_string(group) + " columns in rows of " +
                         std::to_string(k));
  int64_t groups = m * (k / group);
  if (groups <= 0)
    return Status::ok();
  // float4 chunks where every group, the weight and the outputs start 16-byte
  // aligned.
  auto aligned16 = [](const void *p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  bool vector = group % 4 == 0 && aligned16(x) && aligned16(weight) && aligned16(y) &&
                (!addend || (aligned16(addend) && aligned16(sum)));
  int64_t chunks = vector ? group / 4 : group;
  if (group <= kWarpGroup) {
    constexpr int kGroupsPerBlock = kThreads / 32;
    dim3 grid(blocksFor(groups, kGroupsPerBlock, kMaxRowBlocks));
    return vector ? detail::launchDependent(rmsNormWarpKernel<4>, grid, dim3(kThreads), 0, stream,
                                            x, addend, groups, group, weight, epsilon,
                                            weightOffset, sum, y)
                  : detail::launchDependent(rmsNormWarpKernel<1>, grid, dim3(kThreads), 0, stream,
                                            x, addend, groups, group, weight, epsilon,
                                            weightOffset, sum, y);
  }
  // A thread per chunk up to kMaxNormThreads (a row of 2048 in one load each).
  int threads = static_cast<int>(std::min<int64_t>(kMaxNormThreads, (chunks + 31) / 32 * 32));
  dim3 grid(blocksFor(groups, 1, kMaxRowBlocks));
  return vector ? detail::launchDependent(rmsNormBlockKernel<4>, grid, dim3(threads), 0, stream, x,
                                          addend, groups, group, weight, epsilon, weightOffset,
                                          sum, y)
                : detail::launchDependent(rmsNormBlockKernel<1>, grid, dim3(threads), 0, stream, x,
                                          addend, groups, group, weight, epsilon, weightOffset,
                                          sum, y);
}

} // namespace

Status rmsNorm(const float *x, int64_t m, int64_t k, const float *weight, int64_t group,
               float epsilon, float weightOffset, float *y, cudaStream_t stream) {
  return launchNorm(x, nullptr, m, k, weight, group, epsilon, weightOffset, nullptr, y, stream);
}

Status addRmsNorm(const float *a, const float *b, int64_t m, int64_t k, const float *weight,
                  int64_t group, float epsilon, float weightOffset, float *sum, float *y,
                  cudaStream_t stream) {
  return launchNorm(a, b, m, k, weight, group, epsilon, weightOffset, sum, y, stream);
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
  // A block's pass rotates `slots` heads (a thread per pair); a few tokens
  // take one pass per block (every pair in flight at once), many take more
  // heads a block (each thread's sine and cosine serve several heads) once
  // the grid fills the device a few times over.
  const int64_t heads = columns / headDim;
  const int64_t slots = halfRotary > 0 && halfRotary < kThreads ? kThreads / halfRotary : 1;
  const int64_t passChunks = (heads + slots - 1) / slots;
  int64_t passes = std::clamp<int64_t>(n * passChunks / (4 * kSMs), 1, passChunks);
  passes = std::max(passes, (passChunks + 65534) / 65535); // grid.y ≤ 65535
  const int64_t chunkHeads = slots * passes, chunks = (heads + chunkHeads - 1) / chunkHeads;
  dim3 grid(blocksFor(n, 1, std::max<int64_t>(1, kMaxRowBlocks / chunks)),
            static_cast<unsigned>(chunks));
  return detail::launchDependent(rotaryKernel, grid, dim3(kThreads), 0, stream, x, n, columns,
                                 positions, invFreq, halfRotary, headDim, offset, interleaved,
                                 scale, chunkHeads, y);
}

Status add(const float *a, const float *b, int64_t count, float *out, cudaStream_t stream) {
  if (count <= 0)
    return Status::ok();
  return detail::launchDependent(addKernel, dim3(blocksFor(count, kThreads, 4 * kMaxRowBlocks)),
                                 dim3(kThreads), 0, stream, a, b, count, out);
}

} // namespace moec::rt::cuda
