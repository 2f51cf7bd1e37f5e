//===- Sampling.cu - picking tokens from logits on the GPU -----------------===//

#include "moec/runtime/cuda/Sampling.h"

#include "StreamScratch.h"

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include <limits>
#include <string>

namespace moec::rt::cuda {
namespace {

constexpr int kGreedyThreads = 256;
/// Logits a greedy block reads: 4096 keep ~40 blocks on a 150k-logit row.
constexpr int64_t kGreedyChunk = 4096;

unsigned blocksFor(int64_t count, int threads) {
  return static_cast<unsigned>((count + threads - 1) / threads);
}

/// The key's bits in ascending order of the float (keys are never NaN or -0).
__device__ uint32_t ascendingBits(float key) {
  uint32_t bits = __float_as_uint(key);
  return bits & 0x80000000u ? ~bits : bits | 0x80000000u;
}

/// A (logit, token) pair as one integer whose order is greedy's: the key's
/// ascending bits above the complement of the token, so the larger key wins
/// and, among equal keys, the smaller token. NaN counts as -inf and -0 as +0
/// (one key, as the host's `>` sees them).
__device__ uint64_t greedyPair(float x, int64_t token) {
  float key = x != x ? -std::numeric_limits<float>::infinity() : (x == 0.0f ? 0.0f : x);
  return (uint64_t(ascendingBits(key)) << 32) | ~static_cast<uint32_t>(token);
}

__device__ uint64_t warpMax(uint64_t v) {
  for (int offset = 16; offset > 0; offset /= 2) {
    uint64_t other = __shfl_down_sync(0xffffffffu, v, offset);
    v = other > v ? other : v;
  }
  return v;
}

/// Greedy in two launches, so that a row of 150k-200k logits is read by many
/// SMs (one block per row is one SM's load bandwidth over the whole row): block
/// (c, r) takes the best pair of chunk c of row r, four independent loads a
/// thread in flight (grid x: rows, y: chunks); greedyFinishKernel takes the
/// best of each row's chunks.
__global__ void greedyChunkKernel(const float *logits, int64_t vocab, int64_t chunk,
                                  uint64_t *partial) {
  const float *row = logits + static_cast<int64_t>(blockIdx.x) * vocab;
  const int64_t begin = static_cast<int64_t>(blockIdx.y) * chunk;
  const int64_t end = begin + chunk < vocab ? begin + chunk : vocab;
  uint64_t best = 0; // below every pair: its key bits are those of no float
  for (int64_t v = begin + threadIdx.x; v < end; v += 4 * int64_t(blockDim.x)) {
    float x[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      int64_t at = v + u * int64_t(blockDim.x);
      x[u] = at < end ? row[at] : std::numeric_limits<float>::quiet_NaN();
    }
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      int64_t at = v + u * int64_t(blockDim.x);
      if (at < end) {
        uint64_t pair = greedyPair(x[u], at);
        best = pair > best ? pair : best;
      }
    }
  }
  best = warpMax(best);
  __shared__ uint64_t warps[kGreedyThreads / 32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0)
    warps[warp] = best;
  __syncthreads();
  if (warp == 0) {
    best = lane < static_cast<int>(blockDim.x / 32) ? warps[lane] : 0;
    best = warpMax(best);
    if (lane == 0)
      partial[int64_t(blockIdx.x) * gridDim.y + blockIdx.y] = best;
  }
}

/// One warp per row: the best of the row's `chunks` pairs, as its token.
__global__ void greedyFinishKernel(const uint64_t *partial, int64_t rows, int chunks,
                                   int64_t *tokens) {
  const int64_t row = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows)
    return;
  uint64_t best = 0;
  for (int c = lane; c < chunks; c += 32) {
    uint64_t pair = partial[row * chunks + c];
    best = pair > best ? pair : best;
  }
  best = warpMax(best);
  if (lane == 0)
    tokens[row] = static_cast<int64_t>(~static_cast<uint32_t>(best & 0xffffffffu));
}

__device__ float keyOfAscending(uint32_t ascending) {
  uint32_t bits = ascending & 0x80000000u ? ascending & 0x7fffffffu : ~ascending;
  return __uint_as_float(bits);
}

/// keys[i] = row · 2^32 + the complement of the key's ascending bits (so an
/// ascending sort puts each row's largest key first), ids[i] = the token.
__global__ void sortKeysKernel(const float *logits, int64_t count, int64_t vocab, float temperature,
                               uint64_t *keys, int32_t *ids) {
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= count)
    return;
  int64_t row = i / vocab;
  uint32_t descending = ~ascendingBits(samplingKey(logits[i], temperature));
  keys[i] = (static_cast<uint64_t>(row) << 32) | descending;
  ids[i] = static_cast<int32_t>(i - row * vocab);
}

/// The kept sorted keys' integer weights (0 for the rest).
__global__ void weightsKernel(const uint64_t *sorted, int64_t count, int64_t vocab, int64_t kept,
                              uint64_t *weights) {
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= count)
    return;
  int64_t row = i / vocab, j = i - row * vocab;
  if (j >= kept) {
    weights[i] = 0;
    return;
  }
  float key = keyOfAscending(~static_cast<uint32_t>(sorted[i]));
  float top = keyOfAscending(~static_cast<uint32_t>(sorted[row * vocab]));
  weights[i] = samplingWeight(key, top);
}

/// One thread per row: top-p's cut and the draw, each the first index of a
/// monotone predicate over the row's running mass, found by bisection.
__global__ void pickKernel(const uint64_t *prefix, const int32_t *sortedIds, int64_t rows,
                           int64_t vocab, int64_t kept, float topP, uint64_t seed,
                           int64_t firstSequence, int64_t step, int64_t *tokens) {
  int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= rows)
    return;
  // The scan ran over every row at once: a row's running mass is the scan's
  // minus what the rows before it summed (modulo 2^64, exact).
  const uint64_t *scan = prefix + row * vocab;
  uint64_t base = row ? scan[-1] : 0;
  auto mass = [&](int64_t i) { return scan[i] - base; };
  // The first i in [lo, hi) where `holds` does, else hi.
  auto first = [](int64_t lo, int64_t hi, auto holds) {
    while (lo < hi) {
      int64_t mid = lo + (hi - lo) / 2;
      if (holds(mid))
        hi = mid;
      else
        lo = mid + 1;
    }
    return lo;
  };
  int64_t n = kept;
  if (topP < 1.0f) {
    uint64_t total = mass(kept - 1);
    n = first(0, kept, [&](int64_t i) { return samplingReaches(mass(i), total, topP); }) + 1;
    n = n < kept ? n : kept;
  }
  uint64_t draw = samplingThreshold(
      samplingUniform(seed, static_cast<uint64_t>(firstSequence + row), static_cast<uint64_t>(step)),
      mass(n - 1));
  int64_t i = first(0, n, [&](int64_t j) { return mass(j) > draw; });
  tokens[row] = sortedIds[row * vocab + i];
}

} // namespace

Status greedyTokens(const float *logits, int64_t rows, int64_t vocab, int64_t *tokens,
                    cudaStream_t stream) {
  if (rows <= 0)
    return Status::ok();
  if (vocab <= 0 || rows > std::numeric_limits<int32_t>::max())
    return Status::error("greedyTokens: " + std::to_string(rows) + " rows of " +
                         std::to_string(vocab) + " logits");
  const int64_t chunks = (vocab + kGreedyChunk - 1) / kGreedyChunk;
  if (chunks > 65535) // the grid's y
    return Status::error("greedyTokens: a vocabulary of " + std::to_string(vocab) +
                         " logits exceeds " + std::to_string(65535 * kGreedyChunk));
  detail::StreamScratch scratch(stream);
  uint64_t *partial = nullptr;
  MOEC_RETURN_IF_ERROR(scratch.allocate(static_cast<size_t>(rows * chunks), partial));
  greedyChunkKernel<<<dim3(static_cast<unsigned>(rows), static_cast<unsigned>(chunks)),
                      kGreedyThreads, 0, stream>>>(logits, vocab, kGreedyChunk, partial);
  MOEC_CUDA_TRY(cudaGetLastError());
  constexpr int rowsPerBlock = 8;
  greedyFinishKernel<<<static_cast<unsigned>((rows + rowsPerBlock - 1) / rowsPerBlock),
                       32 * rowsPerBlock, 0, stream>>>(partial, rows, static_cast<int>(chunks),
                                                       tokens);
  MOEC_CUDA_TRY(cudaGetLastError());
  return Status::ok();
}

Status DeviceSampler::create(int64_t maxRows, int64_t vocab) {
  if (maxRows < 1 || vocab < 1 || maxRows > std::numeric_limits<int32_t>::max() / vocab)
    return Status::error("DeviceSampler: " + std::to_string(maxRows) + " rows of " +
                         std::to_string(vocab) + " logits exceed 2^31 logits (or are empty)");
  int count = static_cast<int>(maxRows * vocab);
  size_t n = static_cast<size_t>(count);
  size_t sortBytes = 0, scanBytes = 0;
  MOEC_CUDA_TRY(cub::DeviceRadixSort::SortPairs(nullptr, sortBytes,
                                                static_cast<const uint64_t *>(nullptr),
                                                static_cast<uint64_t *>(nullptr),
                                                static_cast<const int32_t *>(nullptr),
                                                static_cast<int32_t *>(nullptr), count, 0, 64));
  MOEC_CUDA_TRY(cub::DeviceScan::InclusiveSum(nullptr, scanBytes,
                                              static_cast<const uint64_t *>(nullptr),
                                              static_cast<uint64_t *>(nullptr), count));
  tempBytes_ = std::max<size_t>({sortBytes, scanBytes, 1});
  MOEC_RETURN_IF_ERROR(DeviceBuffer::allocate(n * sizeof(uint64_t), keys_));
  MOEC_RETURN_IF_ERROR(DeviceBuffer::allocate(n * sizeof(uint64_t), sortedKeys_));
  MOEC_RETURN_IF_ERROR(DeviceBuffer::allocate(n * sizeof(int32_t), ids_));
  MOEC_RETURN_IF_ERROR(DeviceBuffer::allocate(n * sizeof(int32_t), sortedIds_));
  MOEC_RETURN_IF_ERROR(DeviceBuffer::allocate(n * sizeof(uint64_t), weights_));
  MOEC_RETURN_IF_ERROR(DeviceBuffer::allocate(n * sizeof(uint64_t), prefix_));
  MOEC_RETURN_IF_ERROR(DeviceBuffer::allocate(tempBytes_, temp_));
  maxRows_ = maxRows;
  vocab_ = vocab;
  return Status::ok();
}

Status DeviceSampler::sample(const float *logits, int64_t rows, int64_t firstSequence,
                             int64_t step, const Sampling &sampling, int64_t *tokens,
                             cudaStream_t stream) {
  if (sampling.greedy())
    return greedyTokens(logits, rows, vocab_, tokens, stream);
  if (rows <= 0)
    return Status::ok();
  if (rows > maxRows_)
    return Status::error("DeviceSampler: " + std::to_string(rows) + " rows, buffers for " +
                         std::to_string(maxRows_));
  int count = static_cast<int>(rows * vocab_);
  int64_t kept = sampling.topK > 0 ? std::min<int64_t>(sampling.topK, vocab_) : vocab_;
  // The row occupies the bits above the key's 32: as few as the rows need.
  int endBit = 32;
  while ((int64_t(1) << (endBit - 32)) < rows)
    ++endBit;
  auto *keys = keys_.dataAs<uint64_t>(), *sortedKeys = sortedKeys_.dataAs<uint64_t>();
  auto *ids = ids_.dataAs<int32_t>(), *sortedIds = sortedIds_.dataAs<int32_t>();
  auto *weights = weights_.dataAs<uint64_t>(), *prefix = prefix_.dataAs<uint64_t>();
  sortKeysKernel<<<blocksFor(count, 256), 256, 0, stream>>>(logits, count, vocab_,
                                                            sampling.temperature, keys, ids);
  MOEC_CUDA_TRY(cudaGetLastError());
  size_t bytes = tempBytes_;
  MOEC_CUDA_TRY(cub::DeviceRadixSort::SortPairs(temp_.data(), bytes, keys, sortedKeys, ids,
                                                sortedIds, count, 0, endBit, stream));
  weightsKernel<<<blocksFor(count, 256), 256, 0, stream>>>(sortedKeys, count, vocab_, kept,
                                                           weights);
  MOEC_CUDA_TRY(cudaGetLastError());
  bytes = tempBytes_;
  MOEC_CUDA_TRY(cub::DeviceScan::InclusiveSum(temp_.data(), bytes, weights, prefix, count, stream));
  pickKernel<<<blocksFor(rows, 32), 32, 0, stream>>>(prefix, sortedIds, rows, vocab_, kept,
                                                     sampling.topP, sampling.seed, firstSequence,
                                                     step, tokens);
  MOEC_CUDA_TRY(cudaGetLastError());
  return Status::ok();
}

} // namespace moec::rt::cuda
