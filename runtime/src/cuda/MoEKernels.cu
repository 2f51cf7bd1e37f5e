//===- MoEKernels.cu - CUDA kernels for the lowered moe ops -----------------===//
//
// Correctness first: one block per token for routing, CUB's stable radix sort
// for the sort, one thread per output for the grouped matmul. Every count that
// depends on the routing is read on the device.
//
//===----------------------------------------------------------------------===//

#include "moec/runtime/Cuda.h"
#include "moec/runtime/cuda/MoEKernels.h"

#include <cub/device/device_radix_sort.cuh>

#include <algorithm>
#include <cfloat>
#include <cstdint>

namespace moec::rt::cuda {
namespace {

using cpu::ActivationKind;
using cpu::GateUpLayout;
using cpu::RoutingKind;

constexpr int kRouteThreads = 128;

__device__ float sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }

__device__ float activate(ActivationKind kind, float alpha, float x) {
  switch (kind) {
  case ActivationKind::SiLU: return x * sigmoidf(alpha * x);
  case ActivationKind::GELU: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
  case ActivationKind::ReLU: return x > 0.0f ? x : 0.0f;
  case ActivationKind::Identity: return x;
  }
  return x;
}

/// The better of two (value, index) candidates: larger value, ties to the lower index.
__device__ bool better(float a, int ia, float b, int ib) {
  return a > b || (a == b && ia < ib) || (ib < 0 && ia >= 0);
}

/// The index of the largest `values[i]` not yet `taken`, ties to the lower index.
__device__ int blockArgmax(const float *values, const bool *taken, int n, float *scratchValue,
                           int *scratchIndex) {
  float best = -INFINITY;
  int bestIndex = -1;
  for (int i = threadIdx.x; i < n; i += blockDim.x)
    if (!taken[i] && better(values[i], i, best, bestIndex)) {
      best = values[i];
      bestIndex = i;
    }
  scratchValue[threadIdx.x] = best;
  scratchIndex[threadIdx.x] = bestIndex;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) {
      int other = threadIdx.x + stride;
      if (better(scratchValue[other], scratchIndex[other], scratchValue[threadIdx.x],
                 scratchIndex[threadIdx.x])) {
        scratchValue[threadIdx.x] = scratchValue[other];
        scratchIndex[threadIdx.x] = scratchIndex[other];
      }
    }
    __syncthreads();
  }
  int result = scratchIndex[0];
  __syncthreads();
  return result;
}

/// One block per token. Shared memory: scores[E], selection[E], taken[E].
__global__ void routeKernel(const float *logits, int experts, const float *bias, Routing routing,
                            int32_t *ids, float *weights) {
  extern __shared__ unsigned char shared[];
  float *scores = reinterpret_cast<float *>(shared);
  float *selection = scores + experts;
  bool *taken = reinterpret_cast<bool *>(selection + experts);
  __shared__ float scratchValue[kRouteThreads];
  __shared__ int scratchIndex[kRouteThreads];
  __shared__ float reduction;
  const float *l = logits + static_cast<int64_t>(blockIdx.x) * experts;
  int k = routing.topK;

  if (routing.kind == RoutingKind::SoftmaxTopK) {
    if (threadIdx.x == 0) {
      float m = -INFINITY;
      for (int e = 0; e < experts; ++e)
        m = fmaxf(m, l[e]);
      double sum = 0;
      for (int e = 0; e < experts; ++e)
        sum += expf(l[e] - m);
      reduction = m;
      scratchValue[0] = static_cast<float>(sum);
    }
    __syncthreads();
    float m = reduction, sum = scratchValue[0];
    __syncthreads();
    for (int e = threadIdx.x; e < experts; e += blockDim.x)
      scores[e] = expf(l[e] - m) / sum;
  } else {
    for (int e = threadIdx.x; e < experts; e += blockDim.x)
      scores[e] = routing.kind == RoutingKind::TopKSoftmax ? l[e] : sigmoidf(l[e]);
  }
  for (int e = threadIdx.x; e < experts; e += blockDim.x) {
    selection[e] = scores[e] + (bias ? bias[e] : 0.0f);
    taken[e] = false;
  }
  __syncthreads();

  if (routing.kind == RoutingKind::SigmoidGroupTopK && routing.numGroups > 1) {
    // Group score: the sum of the group's two best; keep topkGroups groups,
    // mask the rest to -inf. Groups are few: one thread does the bookkeeping.
    if (threadIdx.x == 0) {
      int groups = routing.numGroups, size = experts / groups;
      float groupScore[64];
      bool kept[64];
      for (int g = 0; g < groups; ++g) {
        float a = -INFINITY, b = -INFINITY;
        int ia = -1;
        for (int i = 0; i < size; ++i) {
          float v = selection[g * size + i];
          if (ia < 0 || v > a) {
            b = a;
            a = v;
            ia = i;
          } else if (v > b) {
            b = v;
          }
        }
        groupScore[g] = a + b;
        kept[g] = false;
      }
      for (int round = 0; round < routing.topkGroups; ++round) {
        int best = -1;
        for (int g = 0; g < groups; ++g)
          if (!kept[g] && (best < 0 || groupScore[g] > groupScore[best]))
            best = g;
        kept[best] = true;
      }
      for (int e = 0; e < experts; ++e)
        if (!kept[e / size])
          selection[e] = -INFINITY;
    }
    __syncthreads();
  }

  int32_t *tokenIds = ids + static_cast<int64_t>(blockIdx.x) * k;
  float *w = weights + static_cast<int64_t>(blockIdx.x) * k;
  for (int i = 0; i < k; ++i) {
    int chosen = blockArgmax(selection, taken, experts, scratchValue, scratchIndex);
    if (threadIdx.x == 0) {
      tokenIds[i] = chosen;
      taken[chosen] = true;
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    if (routing.kind == RoutingKind::TopKSoftmax) {
      float m = -INFINITY;
      for (int i = 0; i < k; ++i)
        m = fmaxf(m, l[tokenIds[i]]);
      double sum = 0;
      for (int i = 0; i < k; ++i)
        sum += w[i] = expf(l[tokenIds[i]] - m);
      for (int i = 0; i < k; ++i)
        w[i] = static_cast<float>(w[i] / sum);
    } else {
      for (int i = 0; i < k; ++i)
        w[i] = scores[tokenIds[i]];
    }
    if (routing.normalize) {
      float sum = 0;
      for (int i = 0; i < k; ++i)
        sum += w[i];
      for (int i = 0; i < k; ++i)
        w[i] /= sum + 1e-20f;
    }
    for (int i = 0; i < k; ++i)
      w[i] *= routing.scalingFactor;
  }
}

/// Local ids as sort keys (the sentinel is numExperts), slot indices as values,
/// and the per-expert counts (counts[numExperts] gathers the sentinels).
__global__ void sortKeysKernel(const int32_t *ids, int64_t slots, int64_t numExperts,
                               int64_t firstExpert, uint32_t *keys, int32_t *values,
                               int32_t *counts) {
  for (int64_t s = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; s < slots;
       s += int64_t(gridDim.x) * blockDim.x) {
    int64_t local = static_cast<int64_t>(ids[s]) - firstExpert;
    uint32_t key = local >= 0 && local < numExperts ? uint32_t(local) : uint32_t(numExperts);
    keys[s] = key;
    values[s] = static_cast<int32_t>(s);
    atomicAdd(&counts[key], 1);
  }
}

__global__ void offsetsKernel(const int32_t *counts, int64_t numExperts, int32_t *offsets,
                              int32_t *numValid) {
  int32_t running = 0;
  for (int64_t e = 0; e < numExperts; ++e) {
    running += counts[e];
    offsets[e] = running;
  }
  *numValid = running;
}

__global__ void permuteKernel(const float *hidden, int64_t hiddenSize, const int32_t *permutation,
                              const int32_t *numValid, int64_t topK, float *rows) {
  int64_t valid = *numValid;
  int64_t total = valid * hiddenSize;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t r = i / hiddenSize, h = i % hiddenSize;
    rows[i] = hidden[(permutation[r] / topK) * hiddenSize + h];
  }
}

/// One thread per output element (gated epilogues: per output column, both
/// halves). The expert of a row is found by binary search in the offsets.
__global__ void groupedMatmulKernel(const float *lhs, int64_t slots, int64_t k,
                                    const float *weights, int64_t experts, int64_t n,
                                    const int32_t *offsets, const float *bias, Epilogue epilogue,
                                    int64_t width, float *out) {
  // No offsets: one expert, every row valid (moe.linear).
  int64_t valid = offsets ? offsets[experts - 1] : slots;
  int64_t total = valid * width;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t r = i / width, j = i % width;
    int64_t lo = 0, hi = experts - 1; // first e with offsets[e] > r
    while (lo < hi) {
      int64_t mid = (lo + hi) / 2;
      if (offsets[mid] > r)
        hi = mid;
      else
        lo = mid + 1;
    }
    const float *x = lhs + r * k;
    const float *w = weights + lo * n * k;
    const float *b = bias ? bias + lo * n : nullptr;
    auto project = [&](int64_t column) {
      float acc = b ? b[column] : 0.0f;
      for (int64_t c = 0; c < k; ++c)
        acc += x[c] * w[column * k + c];
      return acc;
    };
    float result;
    if (!epilogue.enabled) {
      result = project(j);
    } else if (epilogue.layout == GateUpLayout::None) {
      result = activate(epilogue.kind, epilogue.alpha, project(j));
    } else {
      bool interleaved = epilogue.layout == GateUpLayout::Interleaved;
      float g = project(interleaved ? 2 * j : j), u = project(interleaved ? 2 * j + 1 : width + j);
      if (isfinite(epilogue.limit)) {
        g = fminf(g, epilogue.limit);
        u = fminf(fmaxf(u, -epilogue.limit), epilogue.limit);
      }
      result = activate(epilogue.kind, epilogue.alpha, g) * (u + epilogue.beta);
    }
    out[r * width + j] = result;
  }
}

__global__ void inversePermutationKernel(const int32_t *permutation, int64_t slots,
                                         const int32_t *numValid, int32_t *rowOfSlot) {
  int64_t valid = *numValid;
  for (int64_t r = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; r < slots;
       r += int64_t(gridDim.x) * blockDim.x)
    if (r < valid)
      rowOfSlot[permutation[r]] = static_cast<int32_t>(r);
}

/// One block per token; a sentinel slot (row -1) adds nothing and is never read.
__global__ void combineKernel(const float *rows, const int32_t *rowOfSlot, int64_t hiddenSize,
                              const float *weights, int64_t topK, const float *addend,
                              const float *addendGate, float *out) {
  int64_t t = blockIdx.x;
  float gate = addendGate ? sigmoidf(addendGate[t]) : 1.0f;
  for (int64_t h = threadIdx.x; h < hiddenSize; h += blockDim.x) {
    float acc = 0.0f;
    for (int64_t k = 0; k < topK; ++k) {
      int32_t r = rowOfSlot[t * topK + k];
      if (r >= 0)
        acc += weights[t * topK + k] * rows[int64_t(r) * hiddenSize + h];
    }
    if (addend)
      acc += gate * addend[t * hiddenSize + h];
    out[t * hiddenSize + h] = acc;
  }
}

__global__ void narrowIdsKernel(const int64_t *ids, int64_t count, int32_t *out) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x)
    out[i] = ids[i] >= INT32_MIN && ids[i] <= INT32_MAX ? static_cast<int32_t>(ids[i]) : -1;
}

int blocksFor(int64_t work, int threads) {
  int64_t blocks = (work + threads - 1) / threads;
  return static_cast<int>(blocks < 1 ? 1 : (blocks > 65535 ? 65535 : blocks));
}

int keyBits(int64_t numExperts) {
  int bits = 1;
  while ((int64_t(1) << bits) <= numExperts)
    ++bits;
  return bits;
}

size_t alignUp(size_t bytes) { return (bytes + 255) & ~size_t(255); }

} // namespace

Status sortWorkspaceBytes(int64_t slots, size_t &bytes) {
  size_t cubBytes = 0;
  MOEC_CUDA_TRY(cub::DeviceRadixSort::SortPairs(nullptr, cubBytes, static_cast<uint32_t *>(nullptr),
                                                static_cast<uint32_t *>(nullptr),
                                                static_cast<int32_t *>(nullptr),
                                                static_cast<int32_t *>(nullptr),
                                                static_cast<int>(slots)));
  // keys in, keys out, values in, counts (up to 4096 experts + sentinel), CUB's own.
  bytes = 3 * alignUp(slots * 4) + alignUp(4097 * 4) + alignUp(cubBytes);
  return Status::ok();
}

Status linear(const float *x, int64_t m, int64_t k, const float *w, int64_t n, const float *bias,
              const Epilogue &epilogue, float *y, cudaStream_t stream) {
  if (m == 0)
    return Status::ok();
  int64_t width = epilogue.enabled && epilogue.layout != GateUpLayout::None ? n / 2 : n;
  // One expert and no offsets: the grouped kernel's binary search reads none.
  groupedMatmulKernel<<<blocksFor(m * width, 256), 256, 0, stream>>>(
      x, m, k, w, 1, n, nullptr, bias, epilogue, width, y);
  MOEC_CUDA_TRY(cudaGetLastError());
  return Status::ok();
}

Status narrowIds(const int64_t *ids, int64_t count, int32_t *out, cudaStream_t stream) {
  if (count == 0)
    return Status::ok();
  narrowIdsKernel<<<blocksFor(count, 256), 256, 0, stream>>>(ids, count, out);
  MOEC_CUDA_TRY(cudaGetLastError());
  return Status::ok();
}

Status route(const float *logits, int64_t tokens, int64_t experts, const float *correctionBias,
             const Routing &routing, int32_t *ids, float *weights, cudaStream_t stream) {
  if (tokens == 0)
    return Status::ok();
  if (routing.numGroups > 64)
    return Status::error("route: more than 64 expert groups");
  size_t shared = experts * (2 * sizeof(float) + sizeof(bool));
  routeKernel<<<static_cast<unsigned>(tokens), kRouteThreads, shared, stream>>>(
      logits, static_cast<int>(experts), correctionBias, routing, ids, weights);
  MOEC_CUDA_TRY(cudaGetLastError());
  return Status::ok();
}

Status sortByExpert(const int32_t *ids, int64_t slots, int64_t numExperts, int64_t firstExpert,
                    int32_t *permutation, int32_t *offsets, int32_t *numValid, void *workspace,
                    size_t workspaceBytes, cudaStream_t stream) {
  if (numExperts > 4096)
    return Status::error("sortByExpert: more than 4096 local experts");
  size_t needed = 0;
  MOEC_RETURN_IF_ERROR(sortWorkspaceBytes(slots, needed));
  if (workspaceBytes < needed)
    return Status::error("sortByExpert: workspace of " + std::to_string(workspaceBytes) +
                         " bytes, needs " + std::to_string(needed));
  auto *base = static_cast<unsigned char *>(workspace);
  auto *keysIn = reinterpret_cast<uint32_t *>(base);
  auto *keysOut = reinterpret_cast<uint32_t *>(base + alignUp(slots * 4));
  auto *valuesIn = reinterpret_cast<int32_t *>(base + 2 * alignUp(slots * 4));
  auto *counts = reinterpret_cast<int32_t *>(base + 3 * alignUp(slots * 4));
  void *cubTemp = base + 3 * alignUp(slots * 4) + alignUp(4097 * 4);
  size_t cubBytes = needed - (3 * alignUp(slots * 4) + alignUp(4097 * 4));
  MOEC_CUDA_TRY(cudaMemsetAsync(counts, 0, (numExperts + 1) * sizeof(int32_t), stream));
  if (slots > 0) {
    sortKeysKernel<<<blocksFor(slots, 256), 256, 0, stream>>>(ids, slots, numExperts, firstExpert,
                                                              keysIn, valuesIn, counts);
    MOEC_CUDA_TRY(cudaGetLastError());
    // Radix sort is stable: equal ids keep ascending slot order.
    MOEC_CUDA_TRY(cub::DeviceRadixSort::SortPairs(cubTemp, cubBytes, keysIn, keysOut, valuesIn,
                                                  permutation, static_cast<int>(slots), 0,
                                                  keyBits(numExperts), stream));
  }
  offsetsKernel<<<1, 1, 0, stream>>>(counts, numExperts, offsets, numValid);
  MOEC_CUDA_TRY(cudaGetLastError());
  return Status::ok();
}

Status permute(const float *hidden, int64_t hiddenSize, const int32_t *permutation,
               const int32_t *numValid, int64_t slots, int64_t topK, float *rows,
               cudaStream_t stream) {
  permuteKernel<<<blocksFor(slots * hiddenSize, 256), 256, 0, stream>>>(
      hidden, hiddenSize, permutation, numValid, topK, rows);
  MOEC_CUDA_TRY(cudaGetLastError());
  return Status::ok();
}

Status groupedMatmul(const float *lhs, int64_t slots, int64_t k, const float *weights,
                     int64_t experts, int64_t n, const int32_t *offsets, const float *bias,
                     const Epilogue &epilogue, float *out, cudaStream_t stream) {
  int64_t width = epilogue.enabled && epilogue.layout != GateUpLayout::None ? n / 2 : n;
  groupedMatmulKernel<<<blocksFor(slots * width, 256), 256, 0, stream>>>(
      lhs, slots, k, weights, experts, n, offsets, bias, epilogue, width, out);
  MOEC_CUDA_TRY(cudaGetLastError());
  return Status::ok();
}

Status combine(const float *rows, const int32_t *permutation, int64_t slots, int64_t hiddenSize,
               const float *weights, int64_t tokens, int64_t topK, const int32_t *numValid,
               const float *addend, const float *addendGate, int32_t *rowOfSlot, float *out,
               cudaStream_t stream) {
  if (tokens == 0)
    return Status::ok();
  // -1 everywhere (bytes 0xFF), then the valid rows: sentinel slots stay -1.
  MOEC_CUDA_TRY(cudaMemsetAsync(rowOfSlot, 0xFF, slots * sizeof(int32_t), stream));
  inversePermutationKernel<<<blocksFor(slots, 256), 256, 0, stream>>>(permutation, slots,
                                                                      numValid, rowOfSlot);
  MOEC_CUDA_TRY(cudaGetLastError());
  combineKernel<<<static_cast<unsigned>(tokens), 128, 0, stream>>>(
      rows, rowOfSlot, hiddenSize, weights, topK, addend, addendGate, out);
  MOEC_CUDA_TRY(cudaGetLastError());
  return Status::ok();
}

} // namespace moec::rt::cuda

//===----------------------------------------------------------------------===//
// Decode grouped matmul: weights streamed once, bf16
//===----------------------------------------------------------------------===//

namespace moec::rt::cuda {
namespace {

constexpr int kDecodeThreads = 256;           // 8 warps
constexpr int kDecodeRowsPerPass = 8;         // at most this many rows share one weight read
constexpr size_t kDecodeSharedBytes = 160 * 1024; // staged rows (f32) per block

__device__ float bf16ToFloat(uint16_t bits) { return __uint_as_float(uint32_t(bits) << 16); }

__device__ float warpSum(float value) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2)
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

/// Weight rows a warp keeps in flight: enough loads outstanding to cover HBM
/// latency (one 4 KB row at a time left the v0 kernel latency-bound).
constexpr int kDecodeWeightRowsPerWarp = 4;

/// For one warp: acc[c][r] += dot(rows[r], W[c]) for the kDecodeWeightRowsPerWarp
/// weight rows `w`, all loaded together with 16-byte read-only loads; rows are f32
/// in shared memory.
__device__ void dotRowsMulti(const float *rows, int rowCount, int64_t k,
                             const uint16_t *const *w,
                             float (*acc)[kDecodeRowsPerPass]) {
  int lane = threadIdx.x % 32;
  for (int64_t base = lane * 8; base < k; base += 32 * 8) {
    uint4 packed[kDecodeWeightRowsPerWarp];
#pragma unroll
    for (int c = 0; c < kDecodeWeightRowsPerWarp; ++c)
      packed[c] = w[c] ? __ldg(reinterpret_cast<const uint4 *>(w[c] + base)) : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int r = 0; r < kDecodeRowsPerPass; ++r) {
      if (r >= rowCount)
        break;
      float4 x0 = *reinterpret_cast<const float4 *>(rows + r * k + base);
      float4 x1 = *reinterpret_cast<const float4 *>(rows + r * k + base + 4);
      float x[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
#pragma unroll
      for (int c = 0; c < kDecodeWeightRowsPerWarp; ++c) {
        const uint16_t *bits = reinterpret_cast<const uint16_t *>(&packed[c]);
        float sum = 0.0f;
#pragma unroll
        for (int i = 0; i < 8; ++i)
          sum += x[i] * bf16ToFloat(bits[i]);
        acc[c][r] += sum;
      }
    }
  }
}

/// One block per (expert, column tile). Each warp takes kDecodeWeightRowsPerWarp
/// weight rows at a time: 2 output columns when gated (gate and up rows of each),
/// 4 otherwise.
__global__ void groupedMatmulDecodeKernel(const float *lhs, int64_t k, const uint16_t *weights,
                                          int64_t experts, int64_t n, const int32_t *offsets,
                                          const float *bias, Epilogue epilogue, int64_t width,
                                          int rowsPerPass, int columnsPerBlock, float *out) {
  extern __shared__ float rows[]; // rowsPerPass x k
  // Block x serves the x-th expert that has rows, so the grid needs only
  // min(E, rows) columns of blocks, not E: at decode most experts are idle, and
  // their weights are never read.
  // The block's threads test 256 experts at a time; ballots give each
  // non-empty expert its rank without a serial walk over the offsets.
  __shared__ int64_t chosen;
  __shared__ int warpCounts[kDecodeThreads / 32];
  if (threadIdx.x == 0)
    chosen = -1;
  int64_t ranked = 0; // non-empty experts in earlier chunks
  for (int64_t chunk = 0; chunk < experts; chunk += blockDim.x) {
    int64_t candidate = chunk + threadIdx.x;
    bool nonEmpty = candidate < experts &&
                    (candidate == 0 ? 0 : offsets[candidate - 1]) < offsets[candidate];
    unsigned ballot = __ballot_sync(0xffffffffu, nonEmpty);
    int laneRank = __popc(ballot & ((1u << (threadIdx.x % 32)) - 1));
    if (threadIdx.x % 32 == 0)
      warpCounts[threadIdx.x / 32] = __popc(ballot);
    __syncthreads();
    int64_t before = ranked;
    for (int w = 0; w < int(threadIdx.x / 32); ++w)
      before += warpCounts[w];
    if (nonEmpty && before + laneRank == blockIdx.x)
      chosen = candidate;
    for (int w = 0; w < kDecodeThreads / 32; ++w)
      ranked += warpCounts[w];
    __syncthreads();
    if (chosen >= 0)
      break;
  }
  int64_t e = chosen;
  int64_t begin = e > 0 ? offsets[e - 1] : 0, end = e >= 0 ? offsets[e] : 0;
  if (e < 0)
    return;
  bool gated = epilogue.enabled && epilogue.layout != GateUpLayout::None;
  bool interleaved = epilogue.layout == GateUpLayout::Interleaved;
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  int outputsPerWarp = gated ? kDecodeWeightRowsPerWarp / 2 : kDecodeWeightRowsPerWarp;
  const uint16_t *expertWeights = weights + e * n * k;
  const float *expertBias = bias ? bias + e * n : nullptr;
  int64_t firstColumn = blockIdx.y * int64_t(columnsPerBlock);

  for (int64_t first = begin; first < end; first += rowsPerPass) {
    int rowCount = static_cast<int>(end - first < rowsPerPass ? end - first : rowsPerPass);
    __syncthreads();
    for (int64_t i = threadIdx.x; i < rowCount * k; i += blockDim.x)
      rows[i] = lhs[first * k + i];
    __syncthreads();
    for (int c0 = warp * outputsPerWarp; c0 < columnsPerBlock; c0 += warps * outputsPerWarp) {
      // The weight rows of this warp's outputs: [gate, up] per output, or one each.
      const uint16_t *w[kDecodeWeightRowsPerWarp] = {};
      int64_t weightColumn[kDecodeWeightRowsPerWarp];
      for (int o = 0; o < outputsPerWarp; ++o) {
        int64_t j = firstColumn + c0 + o;
        if (j >= width)
          continue;
        if (gated) {
          weightColumn[2 * o] = interleaved ? 2 * j : j;
          weightColumn[2 * o + 1] = interleaved ? 2 * j + 1 : width + j;
          w[2 * o] = expertWeights + weightColumn[2 * o] * k;
          w[2 * o + 1] = expertWeights + weightColumn[2 * o + 1] * k;
        } else {
          weightColumn[o] = j;
          w[o] = expertWeights + j * k;
        }
      }
      float acc[kDecodeWeightRowsPerWarp][kDecodeRowsPerPass] = {};
      dotRowsMulti(rows, rowCount, k, w, acc);
      for (int o = 0; o < outputsPerWarp; ++o) {
        int64_t j = firstColumn + c0 + o;
        if (j >= width)
          break;
#pragma unroll
        for (int r = 0; r < kDecodeRowsPerPass; ++r) {
          if (r >= rowCount)
            break;
          int gi = gated ? 2 * o : o;
          float g = warpSum(acc[gi][r]) + (expertBias ? expertBias[weightColumn[gi]] : 0.0f);
          float u = gated ? warpSum(acc[gi + 1][r]) +
                                (expertBias ? expertBias[weightColumn[gi + 1]] : 0.0f)
                          : 0.0f;
          if (lane == 0) {
            float result = g;
            if (epilogue.enabled) {
              if (gated) {
                if (isfinite(epilogue.limit)) {
                  g = fminf(g, epilogue.limit);
                  u = fminf(fmaxf(u, -epilogue.limit), epilogue.limit);
                }
                result = activate(epilogue.kind, epilogue.alpha, g) * (u + epilogue.beta);
              } else {
                result = activate(epilogue.kind, epilogue.alpha, g);
              }
            }
            out[(first + r) * width + j] = result;
          }
        }
      }
    }
  }
}

} // namespace

Status groupedMatmulDecodeBF16(const float *lhs, int64_t slots, int64_t k,
                               const uint16_t *weightsBF16,
                               int64_t experts, int64_t n, const int32_t *offsets,
                               const float *bias, const Epilogue &epilogue, float *out,
                               cudaStream_t stream) {
  if (k % 8 != 0)
    return Status::error("groupedMatmulDecodeBF16: K = " + std::to_string(k) +
                         " is not a multiple of 8 (16-byte weight loads)");
  if (reinterpret_cast<uintptr_t>(weightsBF16) % 16 != 0)
    return Status::error("groupedMatmulDecodeBF16: weights are not 16-byte aligned");
  int64_t width = epilogue.enabled && epilogue.layout != GateUpLayout::None ? n / 2 : n;
  // Long rows (large K) stage fewer rows per pass so that they fit; and no
  // expert has more rows than there are slots, so at T = 1 (top-k slots) the
  // block reserves only that much shared memory and more blocks fit on an SM.
  int rowsPerPass = static_cast<int>(std::min<int64_t>(
      {kDecodeRowsPerPass, std::max<int64_t>(slots, 1),
       static_cast<int64_t>(kDecodeSharedBytes / (k * sizeof(float)))}));
  if (rowsPerPass < 1)
    return Status::error("groupedMatmulDecodeBF16: K = " + std::to_string(k) +
                         " is too long to stage one row in shared memory");
  size_t shared = rowsPerPass * k * sizeof(float);
  MOEC_CUDA_TRY(cudaFuncSetAttribute(groupedMatmulDecodeKernel,
                                     cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     static_cast<int>(shared)));
  // 8 warps, each with kDecodeWeightRowsPerWarp weight rows in flight.
  bool gated = epilogue.enabled && epilogue.layout != GateUpLayout::None;
  int columnsPerBlock = (kDecodeThreads / 32) * (gated ? 2 : 4);
  dim3 grid(static_cast<unsigned>(std::min(experts, slots)),
            static_cast<unsigned>((width + columnsPerBlock - 1) / columnsPerBlock));
  groupedMatmulDecodeKernel<<<grid, kDecodeThreads, shared, stream>>>(
      lhs, k, weightsBF16, experts, n, offsets, bias, epilogue, width, rowsPerPass,
      columnsPerBlock, out);
  MOEC_CUDA_TRY(cudaGetLastError());
  return Status::ok();
}

} // namespace moec::rt::cuda
