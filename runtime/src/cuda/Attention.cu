//===- Attention.cu - moe.attention over the device KV cache -----------------===//
//
// Every call first writes the step's key and value rows into the cache (one
// block per token, rounded to nearest even in a bf16 cache), then attends.
// Three attention kernels, chosen on the host from what it knows (the token
// count n, the shapes, the cache's type), never from positions or sequences,
// which are read on the device (a step is captured in a CUDA graph once and
// replayed with new ones):
//
//  - attendKernel, the exact path: one block per (token, head) on CUDA cores,
//    f32 throughout. Every f32 cache, and any shape the tensor-core kernels
//    do not take.
//  - flashDecodeKernel + mergeKernel, bf16 caches, up to max(64, maxBatch)
//    tokens (a decode step, or a short chunk) where the scratch holds their
//    partial results: split KV ("flash-decoding"). Each warp takes one (token, KV
//    head, split of the token's positions) and computes all the query heads
//    that share the KV head (GQA: 16 rows of an m16n8k16 tile, the heads
//    that share it, the rest padding), so a KV row is read once per token;
//    enough splits for about a wave of resident warps. The splits'
//    unnormalised sums, maxima and denominators go to the cache's scratch,
//    and the merge kernel adds the sink and normalises.
//  - flashPrefillKernel, bf16 caches, more tokens (prefill): FlashAttention-2
//    on mma.sync m16n8k16 (bf16 in, f32 accumulation). A block's 128 rows
//    are 128 / G consecutive tokens times the G query heads of one KV head;
//    K and V tiles of 64 positions stream through a two-stage cp.async
//    pipeline, shared by the 8 warps (16 rows each). A tile normally holds one
//    sequence's consecutive positions (a prompt): it reads that sequence's
//    positions up to the tile's last, causally masked per row. Tiles that
//    mix sequences take one pass per sequence over its positions, each row
//    masked to its own sequence, so any packing of a step is exact.
//
// The tensor-core kernels round the query and the softmax's weights to bf16
// for the products (the keys and values are bf16 already); the maxima, the
// exponentials, the denominators and the sums are f32. Scores are kept in
// base 2 (scale · log2 e folded in). Tokens outside the cache give zero rows
// and write nothing, in every path (ModelKernels.h).
//
//===----------------------------------------------------------------------===//

#include "AttentionTiles.cuh"
#include "DependentLaunch.cuh"
#include "GridSize.h"
#include "moec/runtime/cuda/ModelKernels.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>

namespace moec::rt::cuda {
namespace {

using namespace tiles;
using detail::blocksFor;
using detail::kSMs;

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int64_t kMaxRowBlocks = 16 * kSMs;
/// Up to this many tokens, or the cache's batch if more (a decode step of
/// every sequence), a bf16 cache's step takes the split-KV decode: the
/// prefill's tiles would hold a sequence per token.
constexpr int64_t kDecodeTokens = 64;
/// Warps the decode aims at: about a wave of the resident ones (12 an SM at
/// 128 dims), whose tiles in flight are more than the HBM's latency needs;
/// more splits would only add partial results to write and merge.
constexpr int64_t kDecodeWarps = 12 * kSMs;
/// At most this many splits of a token's positions, each at least
/// kMinSplitPositions of a full cache.
constexpr int64_t kMaxSplits = 64, kMinSplitPositions = 32;

/// The geometry of one attention call, as the kernels take it.
struct AttentionGeometry {
  int64_t heads, kvHeads, keyDim, sharedDim, valueDim;
  int64_t maxBatch, maxSeq;
  int64_t window;
  float scale;

  __host__ __device__ int64_t queryDim() const { return keyDim + sharedDim; }
  __host__ __device__ int64_t keyColumns() const { return kvHeads * keyDim + sharedDim; }
  __host__ __device__ int64_t valueColumns() const { return kvHeads * valueDim; }
  __host__ __device__ int64_t group() const { return heads / kvHeads; }
  /// Whether (sequence, position) is a row of the cache.
  __device__ bool inCache(int64_t sequence, int64_t position) const {
    return sequence >= 0 && sequence < maxBatch && position >= 0 && position < maxSeq;
  }
  /// The first position a query at `position` attends to.
  __device__ int64_t firstPosition(int64_t position) const {
    return window > 0 && position - window + 1 > 0 ? position - window + 1 : 0;
  }
};

__device__ __forceinline__ float toFloat(float v) { return v; }
__device__ __forceinline__ float toFloat(bf16 v) { return __bfloat162float(v); }
__device__ __forceinline__ void storeAs(float *p, float v) { *p = v; }
__device__ __forceinline__ void storeAs(bf16 *p, float v) { *p = __float2bfloat16_rn(v); }

//===----------------------------------------------------------------------===//
// The cache's writes and the exact path
//===----------------------------------------------------------------------===//

/// One block per token: its key row (the KV heads' keys, then the shared
/// slice) and value row into the cache; a token outside the cache writes
/// nothing.
template <typename T>
__global__ void writeCacheKernel(const float *key, const float *keyShared, const float *value,
                                 const int64_t *positions, const int64_t *sequences, int64_t n,
                                 AttentionGeometry g, T *keys, T *values) {
  device::awaitPrerequisites();
  const int64_t keyWidth = g.kvHeads * g.keyDim, keyColumns = g.keyColumns(),
                valueColumns = g.valueColumns();
  for (int64_t t = blockIdx.x; t < n; t += gridDim.x) {
    int64_t sequence = sequences[t], position = positions[t];
    if (!g.inCache(sequence, position))
      continue;
    int64_t row = sequence * g.maxSeq + position;
    T *k = keys + row * keyColumns;
    for (int64_t j = threadIdx.x; j < keyWidth; j += blockDim.x)
      storeAs(k + j, key[t * keyWidth + j]);
    for (int64_t j = threadIdx.x; j < g.sharedDim; j += blockDim.x)
      storeAs(k + keyWidth + j, keyShared[t * g.sharedDim + j]);
    for (int64_t j = threadIdx.x; j < valueColumns; j += blockDim.x)
      storeAs(values + row * valueColumns + j, value[t * valueColumns + j]);
  }
}

__device__ __forceinline__ float warpSum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2)
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

/// Block (head h, token t): warp w takes positions first + w, first + w +
/// kWarps, ...; each lane a strided part of the dot product (reduced over the
/// warp) and of the value columns. Each warp keeps its own running maximum,
/// denominator and weighted sum (the sink, if any, starts warp 0's), merged
/// at the end. Shared memory: the query [queryDim], then the warps' sums
/// [kWarps][valueDim].
template <typename T>
__global__ void attendKernel(const float *query, const T *keys, const T *values, const float *sinks,
                             const int64_t *positions, const int64_t *sequences, int64_t n,
                             AttentionGeometry g, float *out) {
  device::awaitPrerequisites();
  extern __shared__ float scratch[];
  __shared__ float warpMax[kWarps], warpDenominator[kWarps];
  const int64_t queryDim = g.queryDim(), keyColumns = g.keyColumns(),
                valueColumns = g.valueColumns();
  float *q = scratch, *sums = scratch + queryDim;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t h = blockIdx.x, kv = h / g.group();
  float *mySum = sums + warp * g.valueDim;
  for (int64_t t = blockIdx.y; t < n; t += gridDim.y) {
    int64_t sequence = sequences[t], position = positions[t];
    float *o = out + (t * g.heads + h) * g.valueDim;
    if (!g.inCache(sequence, position)) { // the whole block: no barrier skipped by some
      for (int64_t j = threadIdx.x; j < g.valueDim; j += blockDim.x)
        o[j] = 0.0f;
      continue;
    }
    for (int64_t d = threadIdx.x; d < queryDim; d += blockDim.x)
      q[d] = query[(t * g.heads + h) * queryDim + d];
    for (int64_t j = lane; j < g.valueDim; j += 32)
      mySum[j] = 0.0f;
    __syncthreads();

    const T *keyRows = keys + sequence * g.maxSeq * keyColumns;
    const T *valueRows = values + sequence * g.maxSeq * valueColumns + kv * g.valueDim;
    int64_t first = g.firstPosition(position);
    // The sink takes its share of the denominator and adds no value.
    float best = -INFINITY, denominator = 0.0f;
    if (sinks && warp == 0) {
      best = sinks[h];
      denominator = 1.0f;
    }
    for (int64_t p = first + warp; p <= position; p += kWarps) {
      const T *k = keyRows + p * keyColumns;
      float dot = 0.0f;
      for (int64_t d = lane; d < g.keyDim; d += 32)
        dot += q[d] * toFloat(k[kv * g.keyDim + d]);
      for (int64_t d = lane; d < g.sharedDim; d += 32)
        dot += q[g.keyDim + d] * toFloat(k[g.kvHeads * g.keyDim + d]);
      float score = warpSum(dot) * g.scale;
      float top = fmaxf(best, score);
      float rescale = expf(best - top), weight = expf(score - top);
      denominator = denominator * rescale + weight;
      const T *v = valueRows + p * valueColumns;
      for (int64_t j = lane; j < g.valueDim; j += 32)
        mySum[j] = mySum[j] * rescale + weight * toFloat(v[j]);
      best = top;
    }
    if (lane == 0) {
      warpMax[warp] = best;
      warpDenominator[warp] = denominator;
    }
    __syncthreads();
    float top = warpMax[0];
    for (int w = 1; w < kWarps; ++w)
      top = fmaxf(top, warpMax[w]);
    float factor[kWarps], total = 0.0f;
    for (int w = 0; w < kWarps; ++w) {
      // A warp that saw no position (and no sink) counts for nothing.
      factor[w] = warpMax[w] == -INFINITY ? 0.0f : expf(warpMax[w] - top);
      total += warpDenominator[w] * factor[w];
    }
    for (int64_t j = threadIdx.x; j < g.valueDim; j += blockDim.x) {
      float sum = 0.0f;
      for (int w = 0; w < kWarps; ++w)
        sum += sums[w * g.valueDim + j] * factor[w];
      o[j] = sum / total;
    }
    __syncthreads(); // the next token rewrites q, the sums and the warps' maxima
  }
}

//===----------------------------------------------------------------------===//
// Decode: split KV, then merge
//===----------------------------------------------------------------------===//

constexpr int kDecodePositions = 16; // positions per tile of the decode

template <class S> constexpr int decodeSharedBytes() {
  return kWarps * 2 * kDecodePositions * (S::kKeyStride + S::kValueStride) * 2;
}

/// Warp w of block b: item b·kWarps + w, the (token, KV head, split) (split
/// fastest). Its rows: the group's G query heads (G divides 16; rows G..15
/// padding). The split's positions: the token's [first, position] in
/// `splits` chunks of whole tiles. Partial results at ((t·heads + h)·splits +
/// split): partialSums [..][valueDim] unnormalised, partialStats [..][2] the
/// maximum (base 2, -inf where the split saw nothing) and the denominator.
template <int Dk, int Dr, int Dv>
__global__ void __launch_bounds__(kThreads)
    flashDecodeKernel(const float *query, const bf16 *keys, const bf16 *values,
                      const int64_t *positions, const int64_t *sequences, int64_t n,
                      AttentionGeometry g, int splits, float *partialSums, float *partialStats) {
  using S = HeadShape<Dk, Dr, Dv>;
  device::awaitPrerequisites();
  extern __shared__ __align__(16) unsigned char sharedBytes[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t item = static_cast<int64_t>(blockIdx.x) * kWarps + warp;
  const int split = static_cast<int>(item % splits);
  const int64_t kv = item / splits % g.kvHeads, t = item / splits / g.kvHeads;
  if (t >= n)
    return;
  const int64_t sequence = sequences[t], position = positions[t];
  if (!g.inCache(sequence, position))
    return; // the merge writes the zero row
  const int G = static_cast<int>(g.group());
  const int last = static_cast<int>(position), start = static_cast<int>(g.firstPosition(position));
  const int length = last - start + 1;
  const int chunk =
      ((length + splits - 1) / splits + kDecodePositions - 1) / kDecodePositions * kDecodePositions;
  const int from = start + split * chunk, to = min(from + chunk, last + 1); // [from, to)

  bf16 *kTiles = reinterpret_cast<bf16 *>(sharedBytes) +
                 warp * 2 * kDecodePositions * (S::kKeyStride + S::kValueStride);
  bf16 *vTiles = kTiles + 2 * kDecodePositions * S::kKeyStride;
  const bf16 *keyRows = keys + sequence * g.maxSeq * g.keyColumns() + kv * Dk;
  const bf16 *valueRows = values + sequence * g.maxSeq * g.valueColumns() + kv * Dv;
  const int64_t sharedColumn = g.kvHeads * Dk - kv * Dk;
  const int tiles = from < to ? (to - from + kDecodePositions - 1) / kDecodePositions : 0;
  auto load = [&](int tile) {
    int stage = tile % 2;
    loadTile<S, kDecodePositions, Dk>(kTiles + stage * kDecodePositions * S::kKeyStride,
                                      vTiles + stage * kDecodePositions * S::kValueStride, keyRows,
                                      valueRows, g.keyColumns(), sharedColumn, g.valueColumns(),
                                      from + tile * kDecodePositions, to - 1, lane, 32);
    commitCopies();
  };
  if (tiles > 0)
    load(0);

  const int r0 = lane / 4, r1 = r0 + 8;
  const int64_t h0 = kv * G + r0, h1 = kv * G + r1;
  const float *qRow = query + t * g.heads * S::kQuery;
  WarpRows<S> rows;
  rows.loadQuery(r0 < G ? qRow + h0 * S::kQuery : nullptr,
                 r1 < G ? qRow + h1 * S::kQuery : nullptr);
  const float scaleLog2 = g.scale * kLog2e;
  for (int tile = 0; tile < tiles; ++tile) {
    nextTile(tile, tiles, load);
    __syncwarp();
    int stage = tile % 2, first = from + tile * kDecodePositions;
    rows.template attend<kDecodePositions>(kTiles + stage * kDecodePositions * S::kKeyStride,
                                           vTiles + stage * kDecodePositions * S::kValueStride,
                                           first, first + kDecodePositions > to, scaleLog2,
                                           [&](int, int p) { return p < to; });
    __syncwarp(); // the next load rewrites this stage
  }
  rows.finishDenominators();
  const int c = lane % 4;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    int r = i == 0 ? r0 : r1;
    if (r >= G)
      continue;
    int64_t slot = ((t * g.heads + kv * G + r) * splits + split);
    if (c == 0) {
      partialStats[slot * 2] = rows.m[i];
      partialStats[slot * 2 + 1] = rows.l[i];
    }
    float *sums = partialSums + slot * Dv;
#pragma unroll
    for (int j = 0; j < Dv / 8; ++j)
      *reinterpret_cast<float2 *>(sums + j * 8 + 2 * c) =
          make_float2(rows.o[j][2 * i], rows.o[j][2 * i + 1]);
  }
}

/// One warp per (token, head): the splits' partial results combined with the
/// sink, normalised; a token outside the cache gets zeros. Lane i holds the
/// weights 2^(m - top) of splits i and 32 + i; the lanes then sum their
/// value columns over the splits, rows read whole by the warp.
template <int Dv>
__global__ void mergeKernel(const float *partialSums, const float *partialStats, const float *sinks,
                            const int64_t *positions, const int64_t *sequences, int64_t n,
                            AttentionGeometry g, int splits, float *out) {
  static_assert(kMaxSplits == 64 && Dv % 32 == 0);
  device::awaitPrerequisites();
  const int lane = threadIdx.x % 32;
  const int64_t item = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (item >= n * g.heads)
    return;
  const int64_t t = item / g.heads, h = item % g.heads;
  float *o = out + item * Dv;
  if (!g.inCache(sequences[t], positions[t])) {
    for (int j = lane; j < Dv; j += 32)
      o[j] = 0.0f;
    return;
  }
  const float *stats = partialStats + item * splits * 2;
  const float sink = sinks ? sinks[h] * kLog2e : -INFINITY;
  float m[2], l[2], top = sink;
  for (int k = 0; k < 2; ++k) {
    int split = lane + 32 * k;
    m[k] = split < splits ? stats[2 * split] : -INFINITY;
    l[k] = split < splits ? stats[2 * split + 1] : 0.0f;
    top = fmaxf(top, m[k]);
  }
  for (int offset = 16; offset > 0; offset /= 2)
    top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, offset));
  float weight[2], total = 0.0f;
  for (int k = 0; k < 2; ++k) {
    // A split that saw nothing counts for nothing (its sums are zeros).
    weight[k] = m[k] == -INFINITY ? 0.0f : exp2f(m[k] - top);
    total += l[k] * weight[k];
  }
  total = warpSum(total) + (sinks ? exp2f(sink - top) : 0.0f);
  const float inverse = total > 0.0f ? 1.0f / total : 0.0f;
  const float *sums = partialSums + item * splits * Dv;
  float acc[Dv / 32] = {};
#pragma unroll 4
  for (int split = 0; split < splits; ++split) {
    float w = __shfl_sync(0xffffffffu, split < 32 ? weight[0] : weight[1], split % 32);
#pragma unroll
    for (int k = 0; k < Dv / 32; ++k)
      acc[k] += w * sums[split * Dv + lane + 32 * k];
  }
#pragma unroll
  for (int k = 0; k < Dv / 32; ++k)
    o[lane + 32 * k] = acc[k] * inverse;
}

//===----------------------------------------------------------------------===//
// Prefill: FlashAttention-2 tiles
//===----------------------------------------------------------------------===//

/// 8 warps of 16 rows: a K/V tile serves 128 rows (about half the L2
/// traffic of 64), at 240-odd registers a thread one block fills an SM.
constexpr int kPrefillWarps = 8, kPrefillThreads = 32 * kPrefillWarps;
constexpr int kPrefillRows = 16 * kPrefillWarps, kPrefillPositions = 64;
constexpr int kTokenWords = kPrefillRows / 64; // the pending tokens' bit mask

template <class S> constexpr int prefillSharedBytes() {
  return 2 * kPrefillPositions * (S::kKeyStride + S::kValueStride) * 2;
}

/// Block (tile b, KV head kv): rows b·128.. of the (token, head in group)
/// order, token t = row / G, head kv·G + row % G (G divides 16, so a tile
/// holds 128 / G whole tokens); the tiles of the latest tokens (the longest)
/// first. One pass per distinct sequence of the tile's
/// tokens (one for a prompt), over that sequence's positions from the
/// tile's first attended to its last; each row masked to its own sequence,
/// position and window.
template <int Dk, int Dr, int Dv>
__global__ void __launch_bounds__(kPrefillThreads)
    flashPrefillKernel(const float *query, const bf16 *keys, const bf16 *values, const float *sinks,
                       const int64_t *positions, const int64_t *sequences, int64_t n,
                       AttentionGeometry g, float *out) {
  using S = HeadShape<Dk, Dr, Dv>;
  device::awaitPrerequisites();
  extern __shared__ __align__(16) unsigned char sharedBytes[];
  __shared__ int tokenSequence[kPrefillRows], tokenPosition[kPrefillRows];
  bf16 *kTiles = reinterpret_cast<bf16 *>(sharedBytes);
  bf16 *vTiles = kTiles + 2 * kPrefillPositions * S::kKeyStride;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int G = static_cast<int>(g.group()), tokens = kPrefillRows / G;
  const int64_t kv = blockIdx.y,
                firstToken = static_cast<int64_t>(gridDim.x - 1 - blockIdx.x) * tokens;
  for (int i = threadIdx.x; i < tokens; i += blockDim.x) {
    int64_t t = firstToken + i, sequence = -1, position = 0;
    if (t < n) {
      sequence = sequences[t];
      position = positions[t];
    }
    bool valid = t < n && g.inCache(sequence, position);
    tokenSequence[i] = valid ? static_cast<int>(sequence) : -1;
    tokenPosition[i] = valid ? static_cast<int>(position) : 0;
  }
  __syncthreads();

  // The thread's rows (g and g + 8 of its warp's 16).
  const int rowOf[2] = {warp * 16 + lane / 4, warp * 16 + lane / 4 + 8};
  int rowToken[2], rowSequence[2], rowPosition[2], rowFirst[2];
  const float *qRow[2];
  for (int i = 0; i < 2; ++i) {
    rowToken[i] = rowOf[i] / G;
    rowSequence[i] = tokenSequence[rowToken[i]];
    rowPosition[i] = tokenPosition[rowToken[i]];
    rowFirst[i] = static_cast<int>(g.firstPosition(rowPosition[i]));
    int64_t h = kv * G + rowOf[i] % G;
    qRow[i] = rowSequence[i] >= 0 ? query + ((firstToken + rowToken[i]) * g.heads + h) * S::kQuery
                                  : nullptr;
  }
  WarpRows<S> rows;
  rows.loadQuery(qRow[0], qRow[1]);

  const bf16 *keyBase = keys + kv * Dk, *valueBase = values + kv * Dv;
  const int64_t sharedColumn = g.kvHeads * Dk - kv * Dk;
  const float scaleLog2 = g.scale * kLog2e;
  // Tokens not yet attended (every thread holds the same mask).
  // Two words, named (an array indexed at run time would live in local memory).
  static_assert(kTokenWords == 2);
  uint64_t pending0 = 0, pending1 = 0;
  for (int i = 0; i < tokens; ++i)
    if (tokenSequence[i] >= 0)
      (i < 64 ? pending0 : pending1) |= uint64_t(1) << (i % 64);
  for (;;) {
    int next = pending0   ? __ffsll(static_cast<long long>(pending0)) - 1
               : pending1 ? 64 + __ffsll(static_cast<long long>(pending1)) - 1
                          : -1;
    if (next < 0)
      break;
    const int sequence = tokenSequence[next];
    int lo = INT32_MAX, hi = -1;
    for (int i = 0; i < tokens; ++i)
      if (tokenSequence[i] == sequence) {
        (i < 64 ? pending0 : pending1) &= ~(uint64_t(1) << (i % 64));
        lo = min(lo, static_cast<int>(g.firstPosition(tokenPosition[i])));
        hi = max(hi, tokenPosition[i]);
      }
    // This warp's rows of the pass: where they start and end, and whether a
    // tile inside [allFrom, allTo] needs no mask at all.
    bool on[2] = {rowSequence[0] == sequence, rowSequence[1] == sequence};
    int myFrom = INT32_MAX, myTo = -1, allFrom = -1, allTo = INT32_MAX;
    for (int i = 0; i < 2; ++i) {
      myFrom = min(myFrom, on[i] ? rowFirst[i] : INT32_MAX);
      myTo = max(myTo, on[i] ? rowPosition[i] : -1);
      allFrom = max(allFrom, on[i] ? rowFirst[i] : INT32_MAX);
      allTo = min(allTo, on[i] ? rowPosition[i] : -1);
    }
    myFrom = __reduce_min_sync(0xffffffffu, myFrom);
    myTo = __reduce_max_sync(0xffffffffu, myTo);
    allFrom = __reduce_max_sync(0xffffffffu, allFrom);
    allTo = __reduce_min_sync(0xffffffffu, allTo);

    const bf16 *keyRows = keyBase + static_cast<int64_t>(sequence) * g.maxSeq * g.keyColumns();
    const bf16 *valueRows =
        valueBase + static_cast<int64_t>(sequence) * g.maxSeq * g.valueColumns();
    const int begin = lo / kPrefillPositions * kPrefillPositions;
    const int tiles = (hi - begin) / kPrefillPositions + 1;
    auto load = [&](int tile) {
      int stage = tile % 2;
      loadTile<S, kPrefillPositions, Dk>(kTiles + stage * kPrefillPositions * S::kKeyStride,
                                         vTiles + stage * kPrefillPositions * S::kValueStride,
                                         keyRows, valueRows, g.keyColumns(), sharedColumn,
                                         g.valueColumns(), begin + tile * kPrefillPositions, hi,
                                         threadIdx.x, kPrefillThreads);
      commitCopies();
    };
    load(0);
    for (int tile = 0; tile < tiles; ++tile) {
      nextTile(tile, tiles, load);
      __syncthreads();
      const int first = begin + tile * kPrefillPositions, end = first + kPrefillPositions - 1;
      if (first <= myTo && end >= myFrom) { // warp-uniform: some row sees some position
        bool masked = !(first >= allFrom && end <= allTo);
        int stage = tile % 2;
        rows.template attend<kPrefillPositions>(
            kTiles + stage * kPrefillPositions * S::kKeyStride,
            vTiles + stage * kPrefillPositions * S::kValueStride, first, masked, scaleLog2,
            [&](int i, int p) { return on[i] && p >= rowFirst[i] && p <= rowPosition[i]; });
      }
      __syncthreads(); // the next load rewrites this stage
    }
  }
  rows.finishDenominators();
  for (int i = 0; i < 2; ++i) {
    int64_t t = firstToken + rowToken[i];
    if (t >= n)
      continue;
    int64_t h = kv * G + rowOf[i] % G;
    float *o = out + (t * g.heads + h) * Dv;
    if (rowSequence[i] < 0) {
      if (lane % 4 == 0)
        for (int j = 0; j < Dv; ++j)
          o[j] = 0.0f;
      continue;
    }
    rows.store(i, o, sinks ? sinks + h : nullptr);
  }
}

//===----------------------------------------------------------------------===//
// Dispatch
//===----------------------------------------------------------------------===//

/// The tensor-core kernels of one head shape, and their launches.
template <int Dk, int Dr, int Dv> struct FlashKernels {
  using S = HeadShape<Dk, Dr, Dv>;

  static bool fits(const AttentionGeometry &g) {
    return g.keyDim == Dk && g.sharedDim == Dr && g.valueDim == Dv;
  }

  static Status decode(const float *query, const bf16 *keys, const bf16 *values, const float *sinks,
                       const int64_t *positions, const int64_t *sequences, int64_t n,
                       const AttentionGeometry &g, int splits, float *scratch, float *out,
                       cudaStream_t stream) {
    constexpr int shared = decodeSharedBytes<S>();
    MOEC_CUDA_TRY(cudaFuncSetAttribute(flashDecodeKernel<Dk, Dr, Dv>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, shared));
    float *sums = scratch, *stats = scratch + n * g.heads * splits * Dv;
    int64_t items = n * g.kvHeads * splits;
    MOEC_RETURN_IF_ERROR(detail::launchDependent(
        flashDecodeKernel<Dk, Dr, Dv>, dim3(static_cast<unsigned>((items + kWarps - 1) / kWarps)),
        dim3(kThreads), shared, stream, query, keys, values, positions, sequences, n, g, splits,
        sums, stats));
    int64_t rows = n * g.heads;
    return detail::launchDependent(
        mergeKernel<Dv>, dim3(static_cast<unsigned>((rows + kWarps - 1) / kWarps)), dim3(kThreads),
        0, stream, static_cast<const float *>(sums), static_cast<const float *>(stats), sinks,
        positions, sequences, n, g, splits, out);
  }

  static Status prefill(const float *query, const bf16 *keys, const bf16 *values,
                        const float *sinks, const int64_t *positions, const int64_t *sequences,
                        int64_t n, const AttentionGeometry &g, float *out, cudaStream_t stream) {
    constexpr int shared = prefillSharedBytes<S>();
    MOEC_CUDA_TRY(cudaFuncSetAttribute(flashPrefillKernel<Dk, Dr, Dv>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, shared));
    int64_t tiles = (n * g.group() + kPrefillRows - 1) / kPrefillRows;
    dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(g.kvHeads));
    return detail::launchDependent(flashPrefillKernel<Dk, Dr, Dv>, grid, dim3(kPrefillThreads),
                                   shared, stream, query, keys, values, sinks, positions, sequences,
                                   n, g, out);
  }
};

/// The splits of the decode: enough warps for kDecodeWarps, each split at
/// least kMinSplitPositions of a full cache, as many as the scratch holds; 0
/// where not even one split fits.
int64_t decodeSplits(const AttentionGeometry &g, int64_t n, size_t scratchFloats) {
  int64_t want = (kDecodeWarps + n * g.kvHeads - 1) / (n * g.kvHeads);
  want = std::clamp<int64_t>(want, 1, std::max<int64_t>(1, g.maxSeq / kMinSplitPositions));
  want = std::min(want, kMaxSplits);
  int64_t perSplit = n * g.heads * (g.valueDim + 2);
  int64_t fit = static_cast<int64_t>(scratchFloats) / perSplit;
  return std::min(want, fit);
}

/// The tensor-core path for head shape <Dk, Dr, Dv>, if it is the call's.
template <int Dk, int Dr, int Dv>
std::optional<Status> tryFlash(const DeviceKVCache &cache, const float *query, const bf16 *keys,
                               const bf16 *values, const float *sinks, const int64_t *positions,
                               const int64_t *sequences, int64_t n, const AttentionGeometry &g,
                               float *out, cudaStream_t stream) {
  using K = FlashKernels<Dk, Dr, Dv>;
  if (!K::fits(g))
    return std::nullopt;
  bool decode = n <= std::max(kDecodeTokens, cache.maxBatch());
  int64_t splits = decode ? decodeSplits(g, n, cache.scratchFloats()) : 0;
  if (splits > 0)
    return K::decode(query, keys, values, sinks, positions, sequences, n, g,
                     static_cast<int>(splits), cache.scratch(), out, stream);
  return K::prefill(query, keys, values, sinks, positions, sequences, n, g, out, stream);
}

} // namespace

Status attention(DeviceKVCache &cache, int64_t slot, const float *query, const float *key,
                 const float *value, const float *keyShared, const float *sinks,
                 const int64_t *positions, const int64_t *sequences, int64_t n, int64_t heads,
                 int64_t kvHeads, int64_t keyDim, int64_t sharedDim, int64_t valueDim, float scale,
                 int64_t window, float *out, cudaStream_t stream) {
  const std::string op = "moe.attention: ";
  if (slot < 0 || static_cast<size_t>(slot) >= cache.slots())
    return Status::error(op + "layer " + std::to_string(slot) + " has no slot in the KV cache (" +
                         std::to_string(cache.slots()) + " slots)");
  if (kvHeads <= 0 || heads <= 0 || heads % kvHeads != 0)
    return Status::error(op + std::to_string(heads) + " query heads are not a multiple of " +
                         std::to_string(kvHeads) + " KV heads");
  const DeviceKVCache::Slot &shape = cache.slot(static_cast<size_t>(slot));
  AttentionGeometry g{};
  g.heads = heads, g.kvHeads = kvHeads, g.keyDim = keyDim, g.sharedDim = sharedDim;
  g.valueDim = valueDim, g.maxBatch = cache.maxBatch(), g.maxSeq = cache.maxSeq();
  g.window = window, g.scale = scale;
  if (shape.keyColumns != g.keyColumns() || shape.valueColumns != g.valueColumns())
    return Status::error(op + "slot " + std::to_string(slot) + " holds key rows of " +
                         std::to_string(shape.keyColumns) + " columns and value rows of " +
                         std::to_string(shape.valueColumns) + ", the op writes " +
                         std::to_string(g.keyColumns()) + " and " +
                         std::to_string(g.valueColumns()));
  if (sharedDim > 0 && !keyShared)
    return Status::error(op + "a shared key slice of " + std::to_string(sharedDim) +
                         " columns without data");
  size_t shared = sizeof(float) * static_cast<size_t>(g.queryDim() + kWarps * valueDim);
  if (shared > 48 * 1024)
    return Status::error(op + "heads of " + std::to_string(g.queryDim()) + " query and " +
                         std::to_string(valueDim) + " value columns exceed the kernel's shared " +
                         "memory");
  if (n <= 0)
    return Status::ok();
  void *keys = cache.keys(static_cast<size_t>(slot));
  void *values = cache.values(static_cast<size_t>(slot));
  dim3 writeGrid(blocksFor(n, 1, kMaxRowBlocks)),
      grid(static_cast<unsigned>(heads), static_cast<unsigned>(blocksFor(n, 1)));
  // Write, then read: every token of the step sees the others' rows.
  if (cache.type() == KVCacheType::F32) {
    auto *k = static_cast<float *>(keys), *v = static_cast<float *>(values);
    MOEC_RETURN_IF_ERROR(detail::launchDependent(writeCacheKernel<float>, writeGrid, dim3(kThreads),
                                                 0, stream, key, keyShared, value, positions,
                                                 sequences, n, g, k, v));
    if (valueDim <= 0)
      return Status::ok();
    return detail::launchDependent(attendKernel<float>, grid, dim3(kThreads), shared, stream, query,
                                   static_cast<const float *>(k), static_cast<const float *>(v),
                                   sinks, positions, sequences, n, g, out);
  }
  auto *k = static_cast<bf16 *>(keys), *v = static_cast<bf16 *>(values);
  MOEC_RETURN_IF_ERROR(detail::launchDependent(writeCacheKernel<bf16>, writeGrid, dim3(kThreads), 0,
                                               stream, key, keyShared, value, positions, sequences,
                                               n, g, k, v));
  if (valueDim <= 0)
    return Status::ok();
  // The tensor-core kernels: G query heads of a KV head fill 16-row tiles
  // (G divides 16), positions index as int.
  int64_t group = heads / kvHeads;
  auto aligned8 = [](const void *p) { return reinterpret_cast<uintptr_t>(p) % 8 == 0; };
  if (16 % group == 0 && scale > 0.0f && aligned8(query) && aligned8(out) &&
      cache.maxSeq() < (int64_t(1) << 30) && cache.maxBatch() < (int64_t(1) << 30) &&
      n * group < (int64_t(1) << 36)) {
    std::optional<Status> launched;
    for (auto flash : {tryFlash<128, 0, 128>, tryFlash<64, 0, 64>, tryFlash<128, 64, 128>})
      if (!launched)
        launched = flash(cache, query, k, v, sinks, positions, sequences, n, g, out, stream);
    if (launched)
      return *launched;
  }
  return detail::launchDependent(attendKernel<bf16>, grid, dim3(kThreads), shared, stream, query,
                                 static_cast<const bf16 *>(k), static_cast<const bf16 *>(v), sinks,
                                 positions, sequences, n, g, out);
}

} // namespace moec::rt::cuda
