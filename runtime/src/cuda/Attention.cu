//===- Attention.cu - moe.attention over the device KV cache
//-----------------===//
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
//    partial results: split KV ("flash-decoding"). Each warp takes one (token,
//    KV head, split of the token's positions) and computes all the query heads
//    that share the KV head (GQA: 16 rows of an m16n8k16 tile, the heads
//    that share it, the rest padding), so a KV row is read once per token;
//    enough splits for about a wave of resident warps. The splits'
//    unnormalised sums, maxima and denominators go to the cache's scratch,
//    and the merge kernel (a block per (token, head), its warps over the
//    splits) adds the sink and normalises.
//  - flashPrefillKernel, bf16 caches, more tokens (prefill): FlashAttention-2
//    on mma.sync m16n8k16 (bf16 in, f32 accumulation). A block's rows (128,
//    or 64 for a short prompt) are rows / G consecutive tokens times the G
//    query heads of one KV head; K and V tiles of 64 positions stream
//    through a two-stage cp.async pipeline, shared by the block's warps (4 of
//    two m16 tiles each, so that every K and V fragment read from shared
//    memory feeds two products; 4 of one for 64 rows; 8 of one for MLA's
//    192-column keys). A tile normally holds one
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
#include <type_traits>

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
/// At most this many splits of a token's positions (the merge holds 4
/// weights a lane), each at least kMinSplitPositions of a full cache: at
/// batch 1, 4 KV heads of 128 splits are 4 warps an SM, each with its whole
/// split (two tiles of a 4096-position cache) in flight at once.
constexpr int64_t kMaxSplits = 128, kMinSplitPositions = 32;

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
    if (!g.inCache(sequence,
                   position)) { // the whole block: no barrier skipped by some
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
    __syncthreads(); // the next token rewrites q, the sums and the warps'
                     // maxima
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
    loadTile<S, kDecodePositions, Dk, 32>(
        kTiles + stage * kDecodePositions * S::kKeyStride,
        vTiles + stage * kDecodePositions * S::kValueStride, keyRows, valueRows, g.keyColumns(),
        sharedColumn, g.valueColumns(), from + tile * kDecodePositions, to - 1, lane);
    commitCopies();
  };
  if (tiles > 0)
    load(0);

  const int r0 = lane / 4, r1 = r0 + 8;
  const int64_t h0 = kv * G + r0, h1 = kv * G + r1;
  const float *qRow = query + t * g.heads * S::kQuery;
  WarpRows<S> rows;
  const float *const queryRows[2] = {r0 < G ? qRow + h0 * S::kQuery : nullptr,
                                     r1 < G ? qRow + h1 * S::kQuery : nullptr};
  rows.loadQuery(queryRows);
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
          make_float2(rows.o[0][j][2 * i], rows.o[0][j][2 * i + 1]);
  }
}

/// One block (kWarps warps) per (token, head): the splits' partial results
/// combined with the sink, normalised; a token outside the cache gets zeros.
/// Warp 0 turns the splits' maxima into weights 2^(m - top) (lane i: splits
/// i + 32k) and the denominator; then warp w sums splits w, w + kWarps, ...
/// (each lane Dv / 32 adjacent columns, one vector load per split, several
/// splits in flight), and the warps' sums are added in shared memory.
template <int Dv>
__global__ void __launch_bounds__(kThreads)
    mergeKernel(const float *partialSums, const float *partialStats, const float *sinks,
                const int64_t *positions, const int64_t *sequences, int64_t n, AttentionGeometry g,
                int splits, float *out) {
  static_assert(kMaxSplits % 32 == 0 && (Dv == 64 || Dv == 128));
  constexpr int kPerLane = kMaxSplits / 32, kColumns = Dv / 32;
  using Vector = std::conditional_t<kColumns == 4, float4, float2>;
  __shared__ float weights[kMaxSplits], warpSums[kWarps][Dv];
  __shared__ float inverse;
  device::awaitPrerequisites();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t item = blockIdx.x; // (token, head)
  const int64_t t = item / g.heads, h = item % g.heads;
  float *o = out + item * Dv;
  if (!g.inCache(sequences[t], positions[t])) { // the whole block
    for (int j = threadIdx.x; j < Dv; j += blockDim.x)
      o[j] = 0.0f;
    return;
  }
  if (warp == 0) {
    const float *stats = partialStats + item * splits * 2;
    const float sink = sinks ? sinks[h] * kLog2e : -INFINITY;
    float m[kPerLane], l[kPerLane], top = sink;
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) {
      int split = lane + 32 * k;
      m[k] = split < splits ? stats[2 * split] : -INFINITY;
      l[k] = split < splits ? stats[2 * split + 1] : 0.0f;
      top = fmaxf(top, m[k]);
    }
    for (int offset = 16; offset > 0; offset /= 2)
      top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, offset));
    float total = 0.0f;
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) {
      // A split that saw nothing counts for nothing (its sums are zeros).
      float weight = m[k] == -INFINITY ? 0.0f : exp2f(m[k] - top);
      weights[lane + 32 * k] = weight;
      total += l[k] * weight;
    }
    total = warpSum(total) + (sinks ? exp2f(sink - top) : 0.0f);
    if (lane == 0)
      inverse = total > 0.0f ? 1.0f / total : 0.0f;
  }
  __syncthreads();
  const float *sums = partialSums + item * splits * Dv + lane * kColumns;
  float acc[kColumns] = {};
#pragma unroll 8
  for (int split = warp; split < splits; split += kWarps) {
    Vector v = *reinterpret_cast<const Vector *>(sums + split * Dv);
    const float w = weights[split];
    const float *x = reinterpret_cast<const float *>(&v);
#pragma unroll
    for (int k = 0; k < kColumns; ++k)
      acc[k] += w * x[k];
  }
#pragma unroll
  for (int k = 0; k < kColumns; ++k)
    warpSums[warp][lane * kColumns + k] = acc[k];
  __syncthreads();
  for (int j = threadIdx.x; j < Dv; j += blockDim.x) {
    float sum = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w)
      sum += warpSums[w][j];
    o[j] = sum * inverse;
  }
}

//===----------------------------------------------------------------------===//
// Prefill: FlashAttention-2 tiles
//===----------------------------------------------------------------------===//

constexpr int kPrefillPositions = 64; // positions per K/V tile

/// A prefill block's shape: Warps warps of M m16 tiles each, Rows rows. The
/// query's fragments stay in registers unless M = 2 rows of more than 64
/// dimensions would not fit beside the sums (then shared memory).
template <int Dk, int Dr, int Dv, int Warps, int M> struct PrefillBlock {
  using S = HeadShape<Dk, Dr, Dv>;
  static constexpr int kThreads = 32 * Warps, kRows = 16 * M * Warps;
  static constexpr bool kQueryShared = M > 1 && S::kQuery > 64;
  static constexpr int kTileBytes = 2 * kPrefillPositions * (S::kKeyStride + S::kValueStride) * 2;
  static constexpr int kSharedBytes = kTileBytes + (kQueryShared ? kRows * S::kKeyStride * 2 : 0);
  /// Blocks of 4 warps: two resident on an SM (their registers allow it).
  static constexpr int kMinBlocks = Warps == 4 ? 2 : 1;
  static_assert(kRows <= 128, "the pending tokens' mask has two words");
};

/// Block (tile b, KV head kv) of B = PrefillBlock<...>: rows b·B::kRows.. of
/// the (token, head in group) order, token t = row / G, head kv·G + row % G
/// (G divides 16, so a tile holds kRows / G whole tokens); the tiles of the
/// latest tokens (the longest) first. One pass per distinct sequence of the
/// tile's tokens (one for a prompt), over that sequence's positions from
/// the tile's first attended to its last; each row masked to its own
/// sequence, position and window. Tiles past a warp's last row, or before
/// its first, are skipped by the warp; tiles that every row of the warp
/// sees whole are not masked.
template <int Dk, int Dr, int Dv, int Warps, int M>
__global__ void __launch_bounds__(PrefillBlock<Dk, Dr, Dv, Warps, M>::kThreads,
                                  PrefillBlock<Dk, Dr, Dv, Warps, M>::kMinBlocks)
    flashPrefillKernel(const float *query, const bf16 *keys, const bf16 *values, const float *sinks,
                       const int64_t *positions, const int64_t *sequences, int64_t n,
                       AttentionGeometry g, float *out) {
  using B = PrefillBlock<Dk, Dr, Dv, Warps, M>;
  using S = typename B::S;
  constexpr int kRows = B::kRows, kThreads = B::kThreads, R = 2 * M;
  device::awaitPrerequisites();
  extern __shared__ __align__(16) unsigned char sharedBytes[];
  __shared__ int tokenSequence[kRows], tokenPosition[kRows];
  bf16 *kTiles = reinterpret_cast<bf16 *>(sharedBytes);
  bf16 *vTiles = kTiles + 2 * kPrefillPositions * S::kKeyStride;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  bf16 *queryTile = reinterpret_cast<bf16 *>(sharedBytes + B::kTileBytes) +
                    warp * 16 * M * S::kKeyStride; // kQueryShared: the warp's rows
  const int G = static_cast<int>(g.group()), tokens = kRows / G;
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

  // The thread's rows: g + 8(r % 2) of its warp's m tile r / 2.
  auto rowOf = [&](int r) { return warp * 16 * M + (r / 2) * 16 + lane / 4 + 8 * (r % 2); };
  int rowSequence[R], rowPosition[R], rowFirst[R];
  const float *qRow[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int token = rowOf(r) / G;
    rowSequence[r] = tokenSequence[token];
    rowPosition[r] = tokenPosition[token];
    rowFirst[r] = static_cast<int>(g.firstPosition(rowPosition[r]));
    int64_t h = kv * G + rowOf(r) % G;
    qRow[r] =
        rowSequence[r] >= 0 ? query + ((firstToken + token) * g.heads + h) * S::kQuery : nullptr;
  }
  WarpRows<S, M, B::kQueryShared> rows;
  rows.loadQuery(qRow, queryTile);

  const bf16 *keyBase = keys + kv * Dk, *valueBase = values + kv * Dv;
  const int64_t sharedColumn = g.kvHeads * Dk - kv * Dk;
  const float scaleLog2 = g.scale * kLog2e;
  // Tokens not yet attended (every thread holds the same mask).
  // Two words, named (an array indexed at run time would live in local memory).
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
    bool on[R];
    int myFrom = INT32_MAX, myTo = -1, allFrom = -1, allTo = INT32_MAX;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      on[r] = rowSequence[r] == sequence;
      myFrom = min(myFrom, on[r] ? rowFirst[r] : INT32_MAX);
      myTo = max(myTo, on[r] ? rowPosition[r] : -1);
      allFrom = max(allFrom, on[r] ? rowFirst[r] : INT32_MAX);
      allTo = min(allTo, on[r] ? rowPosition[r] : -1);
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
      loadTile<S, kPrefillPositions, Dk, kThreads>(
          kTiles + stage * kPrefillPositions * S::kKeyStride,
          vTiles + stage * kPrefillPositions * S::kValueStride, keyRows, valueRows, g.keyColumns(),
          sharedColumn, g.valueColumns(), begin + tile * kPrefillPositions, hi, threadIdx.x);
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
            [&](int r, int p) { return on[r] && p >= rowFirst[r] && p <= rowPosition[r]; });
      }
      __syncthreads(); // the next load rewrites this stage
    }
  }
  rows.finishDenominators();
#pragma unroll
  for (int r = 0; r < R; ++r) {
    int64_t t = firstToken + rowOf(r) / G;
    if (t >= n)
      continue;
    int64_t h = kv * G + rowOf(r) % G;
    float *o = out + (t * g.heads + h) * Dv;
    if (rowSequence[r] < 0) {
      if (lane % 4 == 0)
        for (int j = 0; j < Dv; ++j)
          o[j] = 0.0f;
      continue;
    }
    rows.store(r, o, sinks ? sinks + h : nullptr);
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
    return detail::launchDependent(mergeKernel<Dv>, dim3(static_cast<unsigned>(n * g.heads)),
                                   dim3(kThreads), 0, stream, static_cast<const float *>(sums),
                                   static_cast<const float *>(stats), sinks, positions, sequences,
                                   n, g, splits, out);
  }

  template <int Warps, int M>
  static Status prefillWith(const float *query, const bf16 *keys, const bf16 *values,
                            const float *sinks, const int64_t *positions, const int64_t *sequences,
                            int64_t n, const AttentionGeometry &g, float *out,
                            cudaStream_t stream) {
    using B = PrefillBlock<Dk, Dr, Dv, Warps, M>;
    auto kernel = flashPrefillKernel<Dk, Dr, Dv, Warps, M>;
    MOEC_CUDA_TRY(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, B::kSharedBytes));
    int64_t tiles = (n * g.group() + B::kRows - 1) / B::kRows;
    dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(g.kvHeads));
    return detail::launchDependent(kernel, grid, dim3(B::kThreads), B::kSharedBytes, stream, query,
                                   keys, values, sinks, positions, sequences, n, g, out);
  }

  /// MLA's 192-column keys: 8 warps of one m tile (the query in registers).
  /// The others: 4 warps of two m tiles (128 rows, each K/V fragment feeding
  /// two products, two blocks an SM), or of one (64 rows) where the grid of
  /// 128-row blocks would not give every SM two (a short prompt).
  static Status prefill(const float *query, const bf16 *keys, const bf16 *values,
                        const float *sinks, const int64_t *positions, const int64_t *sequences,
                        int64_t n, const AttentionGeometry &g, float *out, cudaStream_t stream) {
    if constexpr (Dr > 0) {
      return prefillWith<8, 1>(query, keys, values, sinks, positions, sequences, n, g, out, stream);
    } else {
      int64_t blocks = (n * g.group() + 127) / 128 * g.kvHeads;
      if (blocks < 2 * kSMs)
        return prefillWith<4, 1>(query, keys, values, sinks, positions, sequences, n, g, out,
                                 stream);
      return prefillWith<4, 2>(query, keys, values, sinks, positions, sequences, n, g, out, stream);
    }
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
