//===- Attention.cu - moe.attention over the device KV cache
//-----------------===//
//
// A call writes the step's key and value rows into the cache (rounded to
// nearest even in a bf16 cache), then attends: every token sees the others'
// rows. Three attention kernels, chosen on the host from what it knows (the
// token count n, the shapes, the cache's type), never from positions or
// sequences, which are read on the device (a step is captured in a CUDA
// graph once and replayed with new ones):
//
//  - attendKernel, the exact path: one block per (token, head) on CUDA cores,
//    f32 throughout, after writeCacheKernel (one block per token). Every f32
//    cache, and any shape the tensor-core kernels do not take.
//  - flashDecodeKernel, bf16 caches, up to max(64, maxBatch) tokens (a
//    decode step, or a short chunk): split KV ("flash-decoding") in one
//    kernel. A thread-block cluster per (token, KV head), each warp one split
//    of the token's positions, computing all the query heads that share the
//    KV head (GQA: 16 rows of an m16n8k16 tile, the heads that share it, the
//    rest padding), so a KV row is read once per token; enough splits for
//    about a wave of resident warps. The splits' unnormalised sums, maxima
//    and denominators merge in shared memory (the block's warps) and then
//    across the cluster through distributed shared memory, in a fixed order,
//    with the sink. The kernel writes the step's rows into the cache itself
//    and takes them from its inputs where a split reads them, so the decode
//    is one launch.
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

#include <cooperative_groups.h>
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
/// 128 dims), whose tiles in flight are more than the HBM's latency needs.
constexpr int64_t kDecodeWarps = 12 * kSMs;
/// Each split at least kMinSplitPositions of a full cache; a (token, KV head)
/// takes at most a cluster of kMaxClusterBlocks blocks of kWarps splits
/// (16: non-portable, taken where the device schedules it, else 8).
constexpr int64_t kMinSplitPositions = 32;
constexpr int kMaxClusterBlocks = 16, kPortableClusterBlocks = 8;

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
// Decode: split KV over a thread-block cluster, merged in the cluster
//===----------------------------------------------------------------------===//

constexpr int kDecodePositions = 16; // positions per tile of the decode

template <class S> constexpr int decodeTileBytes() {
  return kWarps * 2 * kDecodePositions * (S::kKeyStride + S::kValueStride) * 2;
}

/// After the tiles, the same shared memory holds the warps' partial results
/// (kWarps of [16][Dv] sums and [16] maxima and denominators) and the
/// block's merge of them ([16][Dv] and [16][2]), which the cluster reads.
template <class S> struct DecodeMerge {
  static constexpr int kWarpSums = 0, kWarpStats = kWarps * 16 * S::kValue,
                       kBlockSums = kWarpStats + kWarps * 16 * 2,
                       kBlockStats = kBlockSums + 16 * S::kValue,
                       kFloats = kBlockStats + 16 * 2;
  static_assert(kFloats * 4 <= decodeTileBytes<S>(), "the merge reuses the tiles' memory");
};

/// Whether token u of the step writes a row this warp reads: its sequence's,
/// a position in [from, to), inside the cache.
__device__ __forceinline__ bool writesRow(const int64_t *positions, const int64_t *sequences,
                                          const AttentionGeometry &g, int64_t u, int64_t sequence,
                                          int from, int to) {
  int64_t s = sequences[u], p = positions[u];
  return s == sequence && p >= from && p < to && g.inCache(s, p);
}

/// Cluster c = (token t, KV head kv) of `clusterDim.x` blocks; warp w of the
/// cluster's block of rank b takes split b·kWarps + w of the token's
/// positions [first, position] (whole tiles, as even as they go). Its rows:
/// the group's G query heads (G divides 16; rows G..15 padding).
///
/// The step's own key and value rows are not read back from the cache: the
/// cluster's rank-0 block writes token t's rows of head kv (and the shared
/// key slice, at kv = 0) into the cache, and a warp whose split holds a
/// position some token of the step writes replaces that row of its tile
/// with the token's (rounded to bf16 as the write rounds it), so every token
/// sees the step's rows (write, then read) without a kernel in between. The
/// cache's copy a warp may read while it is written is always replaced.
///
/// The merge: each warp's (maximum, denominator, sums) of its rows into
/// shared memory; the block merges its warps (fixed order); cluster barrier;
/// each block then takes a slice of the G·Dv outputs, reading every block's
/// merge through distributed shared memory in rank order, adds the sink and
/// normalises; a last barrier keeps each block's shared memory until every
/// block has read it. Deterministic: the same splits always merge in the
/// same order.
template <int Dk, int Dr, int Dv>
__global__ void __launch_bounds__(kThreads)
    flashDecodeKernel(const float *query, const float *key, const float *keyShared,
                      const float *value, const float *sinks, const int64_t *positions,
                      const int64_t *sequences, int64_t n, AttentionGeometry g, bf16 *keys,
                      bf16 *values, float *out) {
  using S = HeadShape<Dk, Dr, Dv>;
  using M = DecodeMerge<S>;
  namespace cg = cooperative_groups;
  device::awaitPrerequisites();
  extern __shared__ __align__(16) unsigned char sharedBytes[];
  cg::cluster_group cluster = cg::this_cluster();
  const int blocks = static_cast<int>(cluster.num_blocks()),
            rank = static_cast<int>(cluster.block_rank());
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int splits = blocks * kWarps, split = rank * kWarps + warp;
  const int64_t item = blockIdx.x / blocks; // (token, KV head)
  const int64_t kv = item % g.kvHeads, t = item / g.kvHeads;
  const int G = static_cast<int>(g.group());
  const int64_t sequence = sequences[t], position = positions[t];
  const bool valid = g.inCache(sequence, position);
  const int64_t keyColumns = g.keyColumns(), valueColumns = g.valueColumns();

  if (valid && rank == 0) { // the token's rows of head kv into the cache
    const int64_t row = sequence * g.maxSeq + position;
    for (int j = threadIdx.x; j < Dk; j += kThreads)
      keys[row * keyColumns + kv * Dk + j] =
          __float2bfloat16_rn(key[t * g.kvHeads * Dk + kv * Dk + j]);
    for (int j = threadIdx.x; j < Dr && kv == 0; j += kThreads)
      keys[row * keyColumns + g.kvHeads * Dk + j] = __float2bfloat16_rn(keyShared[t * Dr + j]);
    for (int j = threadIdx.x; j < Dv; j += kThreads)
      values[row * valueColumns + kv * Dv + j] =
          __float2bfloat16_rn(value[t * valueColumns + kv * Dv + j]);
  }

  const int last = static_cast<int>(position), start = static_cast<int>(g.firstPosition(position));
  const int length = valid ? last - start + 1 : 0;
  const int chunk =
      ((length + splits - 1) / splits + kDecodePositions - 1) / kDecodePositions * kDecodePositions;
  const int from = start + split * chunk, to = min(from + chunk, last + 1); // [from, to)
  const int tiles = valid && from < to ? (to - from + kDecodePositions - 1) / kDecodePositions : 0;

  bf16 *kTiles = reinterpret_cast<bf16 *>(sharedBytes) +
                 warp * 2 * kDecodePositions * (S::kKeyStride + S::kValueStride);
  bf16 *vTiles = kTiles + 2 * kDecodePositions * S::kKeyStride;
  const bf16 *keyRows = keys + sequence * g.maxSeq * keyColumns + kv * Dk;
  const bf16 *valueRows = values + sequence * g.maxSeq * valueColumns + kv * Dv;
  const int64_t sharedColumn = g.kvHeads * Dk - kv * Dk;
  auto load = [&](int tile) {
    int stage = tile % 2;
    loadTile<S, kDecodePositions, Dk, 32>(
        kTiles + stage * kDecodePositions * S::kKeyStride,
        vTiles + stage * kDecodePositions * S::kValueStride, keyRows, valueRows, keyColumns,
        sharedColumn, valueColumns, from + tile * kDecodePositions, to - 1, lane);
    commitCopies();
  };
  // Whether any token of the step writes a row of this split.
  bool stepRows = false;
  if (tiles > 0) {
    load(0);
    for (int64_t u0 = 0; u0 < n && !stepRows; u0 += 32)
      stepRows = __any_sync(0xffffffffu, u0 + lane < n && writesRow(positions, sequences, g,
                                                                    u0 + lane, sequence, from, to));
  }
  // Rows of tile `first` that tokens of the step write, from their inputs.
  auto patch = [&](bf16 *kTile, bf16 *vTile, int first) {
    const int end = min(first + kDecodePositions, to);
    for (int64_t u0 = 0; u0 < n; u0 += 32) {
      unsigned hits = __ballot_sync(0xffffffffu, u0 + lane < n && writesRow(positions, sequences,
                                                                            g, u0 + lane, sequence,
                                                                            first, end));
      while (hits) { // in token order: a later token's row wins, as in the cache
        const int64_t u = u0 + __ffs(hits) - 1;
        hits &= hits - 1;
        const int r = static_cast<int>(positions[u]) - first;
        for (int j = lane; j < Dk + Dr; j += 32)
          kTile[r * S::kKeyStride + j] = __float2bfloat16_rn(
              j < Dk ? key[u * g.kvHeads * Dk + kv * Dk + j] : keyShared[u * Dr + j - Dk]);
        for (int j = lane; j < Dv; j += 32)
          vTile[r * S::kValueStride + j] =
              __float2bfloat16_rn(value[u * valueColumns + kv * Dv + j]);
      }
    }
  };

  const int r0 = lane / 4, r1 = r0 + 8;
  const int64_t h0 = kv * G + r0, h1 = kv * G + r1;
  const float *qRow = query + t * g.heads * S::kQuery;
  WarpRows<S> rows;
  const float *const queryRows[2] = {valid && r0 < G ? qRow + h0 * S::kQuery : nullptr,
                                     valid && r1 < G ? qRow + h1 * S::kQuery : nullptr};
  rows.loadQuery(queryRows);
  const float scaleLog2 = g.scale * kLog2e;
  for (int tile = 0; tile < tiles; ++tile) {
    nextTile(tile, tiles, load);
    __syncwarp();
    int stage = tile % 2, first = from + tile * kDecodePositions;
    bf16 *kTile = kTiles + stage * kDecodePositions * S::kKeyStride;
    bf16 *vTile = vTiles + stage * kDecodePositions * S::kValueStride;
    if (stepRows) {
      patch(kTile, vTile, first);
      __syncwarp();
    }
    rows.template attend<kDecodePositions>(kTile, vTile, first, first + kDecodePositions > to,
                                           scaleLog2, [&](int, int p) { return p < to; });
    __syncwarp(); // the next load rewrites this stage
  }
  rows.finishDenominators();

  // The warps' partial results (a warp that saw nothing: maxima -inf, sums 0).
  __syncthreads(); // every warp is done with its tiles
  float *merge = reinterpret_cast<float *>(sharedBytes);
  const int c = lane % 4;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    int r = i == 0 ? r0 : r1;
    if (r >= G)
      continue;
    if (c == 0) {
      merge[M::kWarpStats + (warp * 16 + r) * 2] = rows.m[i];
      merge[M::kWarpStats + (warp * 16 + r) * 2 + 1] = rows.l[i];
    }
    float *sums = merge + M::kWarpSums + (warp * 16 + r) * Dv;
#pragma unroll
    for (int j = 0; j < Dv / 8; ++j)
      *reinterpret_cast<float2 *>(sums + j * 8 + 2 * c) =
          make_float2(rows.o[0][j][2 * i], rows.o[0][j][2 * i + 1]);
  }
  __syncthreads();
  // The block's merge of its warps, in warp order.
  for (int e = threadIdx.x; e < G * Dv; e += kThreads) {
    const int r = e / Dv, j = e % Dv;
    float top = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w)
      top = fmaxf(top, merge[M::kWarpStats + (w * 16 + r) * 2]);
    float sum = 0.0f, denominator = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      float m = merge[M::kWarpStats + (w * 16 + r) * 2];
      float weight = m == -INFINITY ? 0.0f : exp2f(m - top);
      sum += merge[M::kWarpSums + (w * 16 + r) * Dv + j] * weight;
      denominator += merge[M::kWarpStats + (w * 16 + r) * 2 + 1] * weight;
    }
    merge[M::kBlockSums + r * Dv + j] = sum;
    if (j == 0) {
      merge[M::kBlockStats + r * 2] = top;
      merge[M::kBlockStats + r * 2 + 1] = denominator;
    }
  }
  cluster.sync(); // every block's merge written, visible to the cluster

  // This block's slice of the outputs (two adjacent columns a thread), the
  // blocks' merges added in rank order, with the sink.
  for (int e = rank * kThreads + threadIdx.x; e < G * Dv / 2; e += blocks * kThreads) {
    const int r = 2 * e / Dv, j = 2 * e % Dv;
    const int64_t h = kv * G + r;
    float2 *o = reinterpret_cast<float2 *>(out + (t * g.heads + h) * Dv + j);
    if (!valid) {
      *o = make_float2(0.0f, 0.0f);
      continue;
    }
    // Every block's loads issued at once (unrolled to the largest cluster).
    const float sink = sinks ? sinks[h] * kLog2e : -INFINITY;
    float m[kMaxClusterBlocks], l[kMaxClusterBlocks];
    float2 part[kMaxClusterBlocks];
#pragma unroll
    for (int b = 0; b < kMaxClusterBlocks; ++b) {
      m[b] = -INFINITY, l[b] = 0.0f, part[b] = make_float2(0.0f, 0.0f);
      if (b < blocks) {
        const float *theirs = cluster.map_shared_rank(merge, b);
        m[b] = theirs[M::kBlockStats + r * 2];
        l[b] = theirs[M::kBlockStats + r * 2 + 1];
        part[b] = *reinterpret_cast<const float2 *>(theirs + M::kBlockSums + r * Dv + j);
      }
    }
    float top = sink;
#pragma unroll
    for (int b = 0; b < kMaxClusterBlocks; ++b)
      top = fmaxf(top, m[b]);
    float2 sum = make_float2(0.0f, 0.0f);
    float total = sinks ? exp2f(sink - top) : 0.0f;
#pragma unroll
    for (int b = 0; b < kMaxClusterBlocks; ++b) {
      // A block that saw nothing (or none) counts for nothing (its sums are zeros).
      float weight = m[b] == -INFINITY ? 0.0f : exp2f(m[b] - top);
      sum.x += part[b].x * weight, sum.y += part[b].y * weight;
      total += l[b] * weight;
    }
    float inverse = total > 0.0f ? 1.0f / total : 0.0f;
    *o = make_float2(sum.x * inverse, sum.y * inverse);
  }
  cluster.sync(); // the others' reads of this block's shared memory are done
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

  /// The cluster decode of `blocks` blocks per (token, KV head); it writes
  /// the step's rows into the cache itself.
  static Status decode(const float *query, const float *key, const float *keyShared,
                       const float *value, const float *sinks, const int64_t *positions,
                       const int64_t *sequences, int64_t n, const AttentionGeometry &g,
                       bf16 *keys, bf16 *values, float *out, cudaStream_t stream) {
    constexpr int shared = decodeTileBytes<S>();
    auto kernel = flashDecodeKernel<Dk, Dr, Dv>;
    static const int maxBlocks = [&] {
      if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, shared) !=
              cudaSuccess ||
          cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) !=
              cudaSuccess) {
        cudaGetLastError();
        return kPortableClusterBlocks;
      }
      cudaLaunchAttribute attribute{};
      attribute.id = cudaLaunchAttributeClusterDimension;
      attribute.val.clusterDim.x = kMaxClusterBlocks;
      attribute.val.clusterDim.y = attribute.val.clusterDim.z = 1;
      cudaLaunchConfig_t config{};
      config.gridDim = dim3(kMaxClusterBlocks);
      config.blockDim = dim3(kThreads);
      config.dynamicSmemBytes = shared;
      config.attrs = &attribute;
      config.numAttrs = 1;
      int clusters = 0;
      if (cudaOccupancyMaxActiveClusters(&clusters, kernel, &config) != cudaSuccess) {
        cudaGetLastError();
        clusters = 0;
      }
      return clusters > 0 ? kMaxClusterBlocks : kPortableClusterBlocks;
    }();
    MOEC_CUDA_TRY(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, shared));
    // Blocks of kWarps splits for at most kDecodeWarps warps (one wave: a
    // partial second wave costs more than fewer, longer splits), none under
    // kMinSplitPositions of a full cache unless a block is all there is.
    int64_t blocks = kDecodeWarps / (n * g.kvHeads * kWarps);
    blocks = std::min(blocks, (g.maxSeq / kMinSplitPositions + kWarps - 1) / kWarps);
    blocks = std::clamp<int64_t>(blocks, 1, maxBlocks);
    dim3 grid(static_cast<unsigned>(n * g.kvHeads * blocks));
    return detail::launchDependentClusters(kernel, grid, dim3(kThreads), shared, stream,
                                           dim3(static_cast<unsigned>(blocks), 1, 1), query, key,
                                           keyShared, value, sinks, positions,
                                           sequences, n, g, keys, values, out);
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

/// Whether a bf16 cache's step of n tokens takes the split-KV decode: up to
/// kDecodeTokens, or the cache's batch (a decode step of every sequence).
bool decodes(const DeviceKVCache &cache, int64_t n) {
  return n <= std::max(kDecodeTokens, cache.maxBatch());
}

/// The tensor-core path for head shape <Dk, Dr, Dv>, if it is the call's:
/// the decode (which writes the step's rows itself) or, after the cache's
/// write, the prefill.
template <int Dk, int Dr, int Dv>
std::optional<Status> tryFlash(const DeviceKVCache &cache, const float *query, const float *key,
                               const float *keyShared, const float *value, bf16 *keys,
                               bf16 *values, const float *sinks, const int64_t *positions,
                               const int64_t *sequences, int64_t n, const AttentionGeometry &g,
                               float *out, cudaStream_t stream) {
  using K = FlashKernels<Dk, Dr, Dv>;
  if (!K::fits(g))
    return std::nullopt;
  if (decodes(cache, n))
    return K::decode(query, key, keyShared, value, sinks, positions, sequences, n, g, keys, values,
                     out, stream);
  MOEC_RETURN_IF_ERROR(detail::launchDependent(
      writeCacheKernel<bf16>, dim3(blocksFor(n, 1, kMaxRowBlocks)), dim3(kThreads), 0, stream, key,
      keyShared, value, positions, sequences, n, g, keys, values));
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
  // The tensor-core kernels: G query heads of a KV head fill 16-row tiles
  // (G divides 16), positions index as int.
  int64_t group = heads / kvHeads;
  auto aligned8 = [](const void *p) { return reinterpret_cast<uintptr_t>(p) % 8 == 0; };
  if (valueDim > 0 && 16 % group == 0 && scale > 0.0f && aligned8(query) && aligned8(out) &&
      cache.maxSeq() < (int64_t(1) << 30) && cache.maxBatch() < (int64_t(1) << 30) &&
      n * group < (int64_t(1) << 36)) {
    std::optional<Status> launched;
    for (auto flash : {tryFlash<128, 0, 128>, tryFlash<64, 0, 64>, tryFlash<128, 64, 128>})
      if (!launched)
        launched = flash(cache, query, key, keyShared, value, k, v, sinks, positions, sequences, n,
                         g, out, stream);
    if (launched)
      return *launched;
  }
  MOEC_RETURN_IF_ERROR(detail::launchDependent(writeCacheKernel<bf16>, writeGrid, dim3(kThreads), 0,
                                               stream, key, keyShared, value, positions, sequences,
                                               n, g, k, v));
  if (valueDim <= 0)
    return Status::ok();
  return detail::launchDependent(attendKernel<bf16>, grid, dim3(kThreads), shared, stream, query,
                                 static_cast<const bf16 *>(k), static_cast<const bf16 *>(v), sinks,
                                 positions, sequences, n, g, out);
}

} // namespace moec::rt::cuda
