//===- MoEKernels.cu - CUDA kernels for the lowered moe ops -----------------===//
//
// Routing (one block per token), CUB's stable radix sort, permute, combine, and
// the f32-weight grouped matmul (one thread per output: the reference path; bf16
// weights take GroupedMatmulBF16.cu, moe.linear takes Linear.cu). Every count
// that depends on the routing is read on the device.
// (Past 800 lines on purpose: the kernels of the grouped phase's data movement
// share their launch helpers and the sentinel conventions stated once here;
// the matmuls live in files of their own.)
//
//===----------------------------------------------------------------------===//

#include "../RoutingWeights.h"
#include "DependentLaunch.cuh"
#include "Epilogue.cuh"
#include "GridSize.h"
#include "InvertPermutation.h"
#include "StreamScratch.h"
#include "Tuning.h"
#include "moec/runtime/Cuda.h"
#include "moec/runtime/cuda/MoEKernels.h"

#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <cuda_bf16.h>

#include <algorithm>
#include <cfloat>
#include <climits>
#include <cstdint>

namespace moec::rt::cuda {
namespace {

using cpu::ActivationKind;
using cpu::GateUpLayout;
using cpu::RoutingKind;

constexpr int kRouteThreads = 128;

using detail::blocksFor;
using detail::kSMs;
using device::activate;
using device::sigmoidf;

/// The better of two (value, index) candidates: larger value, ties to the lower index.
__device__ bool better(float a, int ia, float b, int ib) {
  return a > b || (a == b && ia < ib) || (ib < 0 && ia >= 0);
}

constexpr int kRouteWarps = kRouteThreads / 32;

/// The warp's best (value, index) by `better`, in every lane, and the
/// winner's `payload`.
__device__ void warpArgmax(float &best, int &bestIndex, float &payload) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    float otherValue = __shfl_xor_sync(0xffffffffu, best, offset);
    float otherPayload = __shfl_xor_sync(0xffffffffu, payload, offset);
    int otherIndex = __shfl_xor_sync(0xffffffffu, bestIndex, offset);
    if (better(otherValue, otherIndex, best, bestIndex)) {
      best = otherValue;
      payload = otherPayload;
      bestIndex = otherIndex;
    }
  }
}

/// A key whose unsigned order is the order of the values: -0 and +0 the same
/// key, as they compare equal. Not for NaN.
__device__ __forceinline__ unsigned orderedKey(float v) {
  unsigned bits = __float_as_uint(v + 0.0f); // -0 + 0 is +0
  return bits & 0x80000000u ? ~bits : bits | 0x80000000u;
}

/// warpArgmax's winner by two warp reductions (redux.sync) where its five
/// shuffle rounds take three shuffles each: the largest value, then the lowest
/// index holding it -- the order of `better` whenever no lane's candidate is
/// NaN, which takes warpArgmax itself (`better` does not order NaN). A lane
/// without a candidate passes bestIndex -1. Returns the winner's index (-1:
/// none) and its `payload`, in every lane.
__device__ __forceinline__ int warpArgmaxFast(float best, int bestIndex, float &payload) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if (!__any_sync(0xffffffffu, bestIndex >= 0 && isnan(best))) {
    unsigned key = bestIndex >= 0 ? orderedKey(best) : 0u; // orderedKey(-inf) > 0
    unsigned top = __reduce_max_sync(0xffffffffu, key);
    int index = bestIndex >= 0 && key == top ? bestIndex : INT_MAX;
    int chosen = __reduce_min_sync(0xffffffffu, index);
    if (chosen == INT_MAX)
      return -1;
    payload = __shfl_sync(0xffffffffu, payload, chosen % 32); // expert e is lane e % 32's
    return chosen;
  }
#endif
  warpArgmax(best, bestIndex, payload);
  return bestIndex;
}

/// Per-warp partial results of the block reductions below, double-buffered so
/// that consecutive reductions need one barrier each.
struct RouteScratch {
  float value[2][kRouteWarps];
  int index[2][kRouteWarps];
  double sum[kRouteWarps];
};

/// The index of the largest `values[i]` not yet `taken`, ties to the lower
/// index, in every thread: warp shuffles, then the warps' winners through
/// `scratch` (buffer `parity`): one barrier. `better` is a total order, so the
/// result does not depend on the reduction's shape.
__device__ int blockArgmax(const float *values, const bool *taken, int n, RouteScratch &scratch,
                           int parity) {
  float best = -INFINITY;
  int bestIndex = -1;
  for (int i = threadIdx.x; i < n; i += blockDim.x)
    if (!taken[i] && better(values[i], i, best, bestIndex)) {
      best = values[i];
      bestIndex = i;
    }
  float unused = 0.0f;
  warpArgmax(best, bestIndex, unused);
  if (threadIdx.x % 32 == 0) {
    scratch.value[parity][threadIdx.x / 32] = best;
    scratch.index[parity][threadIdx.x / 32] = bestIndex;
  }
  __syncthreads();
  best = scratch.value[parity][0];
  bestIndex = scratch.index[parity][0];
  for (int w = 1; w < kRouteWarps; ++w)
    if (better(scratch.value[parity][w], scratch.index[parity][w], best, bestIndex)) {
      best = scratch.value[parity][w];
      bestIndex = scratch.index[parity][w];
    }
  return bestIndex;
}

/// max over the block of `v`, in every thread (exact in any order).
__device__ float blockMax(float v, RouteScratch &scratch) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  if (threadIdx.x % 32 == 0)
    scratch.value[0][threadIdx.x / 32] = v;
  __syncthreads();
  v = scratch.value[0][0];
  for (int w = 1; w < kRouteWarps; ++w)
    v = fmaxf(v, scratch.value[0][w]);
  return v;
}

/// The sum over the block of `v` (double), in every thread.
__device__ double blockSum(double v, RouteScratch &scratch) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2)
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  if (threadIdx.x % 32 == 0)
    scratch.sum[threadIdx.x / 32] = v;
  __syncthreads();
  v = scratch.sum[0];
  for (int w = 1; w < kRouteWarps; ++w)
    v += scratch.sum[w];
  return v;
}

/// One block per token. Shared memory: scores[E], selection[E], taken[E].
__global__ void routeKernel(const float *logits, int experts, const float *bias, Routing routing,
                            int32_t *ids, float *weights) {
  device::awaitPrerequisites(); // a dependent launch
  extern __shared__ unsigned char shared[];
  float *scores = reinterpret_cast<float *>(shared);
  float *selection = scores + experts;
  bool *taken = reinterpret_cast<bool *>(selection + experts);
  __shared__ RouteScratch scratch;
  const float *l = logits + static_cast<int64_t>(blockIdx.x) * experts;
  int k = routing.topK;

  if (routing.kind == RoutingKind::SoftmaxTopK) {
    // Softmax over all experts: max and sum reduced over the block (the sum in
    // double, as the CPU kernel keeps it).
    float m = -INFINITY;
    for (int e = threadIdx.x; e < experts; e += blockDim.x)
      m = fmaxf(m, l[e]);
    m = blockMax(m, scratch);
    double partial = 0;
    for (int e = threadIdx.x; e < experts; e += blockDim.x)
      partial += expf(l[e] - m);
    float sum = static_cast<float>(blockSum(partial, scratch));
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
    // mask the rest to -inf. A warp scores a group (lane-local best two, then
    // merged with shuffles: the largest value and the largest of the others,
    // whatever the order); thread 0 picks the groups (at most 64).
    __shared__ float groupScore[64];
    __shared__ bool kept[64];
    const int groups = routing.numGroups, size = experts / groups;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    for (int g = warp; g < groups; g += kRouteWarps) {
      float a = -INFINITY, b = -INFINITY;
      int ia = -1;
      for (int i = lane; i < size; i += 32) {
        float v = selection[g * size + i];
        if (ia < 0 || v > a) {
          b = a;
          a = v;
          ia = i;
        } else if (v > b) {
          b = v;
        }
      }
#pragma unroll
      for (int offset = 16; offset > 0; offset /= 2) {
        float otherA = __shfl_xor_sync(0xffffffffu, a, offset);
        float otherB = __shfl_xor_sync(0xffffffffu, b, offset);
        int otherIa = __shfl_xor_sync(0xffffffffu, ia, offset);
        if (better(otherA, otherIa, a, ia)) {
          b = fmaxf(a, otherB);
          a = otherA;
          ia = otherIa;
        } else {
          b = fmaxf(b, otherA);
        }
      }
      if (lane == 0)
        groupScore[g] = a + b;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      for (int g = 0; g < groups; ++g)
        kept[g] = false;
      for (int round = 0; round < routing.topkGroups; ++round) {
        int best = -1;
        for (int g = 0; g < groups; ++g)
          if (!kept[g] && (best < 0 || groupScore[g] > groupScore[best]))
            best = g;
        kept[best] = true;
      }
    }
    __syncthreads();
    for (int e = threadIdx.x; e < experts; e += blockDim.x)
      if (!kept[e / size])
        selection[e] = -INFINITY;
    __syncthreads();
  }

  int32_t *tokenIds = ids + static_cast<int64_t>(blockIdx.x) * k;
  float *w = weights + static_cast<int64_t>(blockIdx.x) * k;
  for (int i = 0; i < k; ++i) {
    // Every thread learns `chosen`; the thread that scans index `chosen` marks
    // it, so the next round needs no barrier of its own.
    int chosen = blockArgmax(selection, taken, experts, scratch, i % 2);
    if (threadIdx.x == 0)
      tokenIds[i] = chosen;
    if (chosen >= 0 && chosen % blockDim.x == threadIdx.x)
      taken[chosen] = true;
  }
  if (threadIdx.x == 0) {
    for (int i = 0; i < k; ++i)
      w[i] = scores[tokenIds[i]];
    finishRoutingWeights(l, tokenIds, routing, w);
  }
}

/// One warp per token, for up to 32·kItems experts and no expert groups: lane
/// j holds experts j, j + 32, ... in registers, and every reduction is a warp
/// shuffle, where routeKernel's block takes a barrier per reduction and per
/// top-k round (78 µs of Qwen3's call at T = 8192). The same arithmetic
/// (softmax sum in double, `better`'s order, finishRoutingWeights), so the same ids.
template <int kItems>
__global__ void routeWarpKernel(const float *logits, int64_t tokens, int experts,
                                const float *bias, Routing routing, int32_t *ids,
                                float *weights) {
  device::awaitPrerequisites(); // a dependent launch
  const int lane = threadIdx.x % 32;
  const int64_t token = blockIdx.x * int64_t(blockDim.x / 32) + threadIdx.x / 32;
  if (token >= tokens)
    return;
  const float *l = logits + token * experts;
  float score[kItems], selection[kItems];
#pragma unroll
  for (int j = 0; j < kItems; ++j) {
    int e = lane + 32 * j;
    score[j] = e < experts ? l[e] : -INFINITY;
  }
  if (routing.kind == RoutingKind::SoftmaxTopK) {
    float m = -INFINITY;
#pragma unroll
    for (int j = 0; j < kItems; ++j)
      m = fmaxf(m, score[j]);
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2)
      m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, offset));
    double partial = 0;
#pragma unroll
    for (int j = 0; j < kItems; ++j)
      if (lane + 32 * j < experts)
        partial += expf(score[j] - m);
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2)
      partial += __shfl_xor_sync(0xffffffffu, partial, offset);
    float sum = static_cast<float>(partial);
#pragma unroll
    for (int j = 0; j < kItems; ++j)
      score[j] = expf(score[j] - m) / sum;
  } else if (routing.kind != RoutingKind::TopKSoftmax) {
#pragma unroll
    for (int j = 0; j < kItems; ++j)
      score[j] = sigmoidf(score[j]);
  }
#pragma unroll
  for (int j = 0; j < kItems; ++j) {
    int e = lane + 32 * j;
    selection[j] = score[j] + (bias && e < experts ? bias[e] : 0.0f);
  }
  const int k = routing.topK;
  int32_t *tokenIds = ids + token * k;
  float *w = weights + token * k;
  // Up to kLocalTopK choices, lane 0 keeps them in its own (local) memory
  // until finishRoutingWeights has made them weights: read back from the
  // outputs, the finish's loads were round trips to L2 after the stores.
  constexpr int kLocalTopK = 32;
  const bool local = k <= kLocalTopK;
  int32_t localIds[kLocalTopK];
  float localWeights[kLocalTopK];
  unsigned taken = 0; // bit j: expert lane + 32 j is chosen
  for (int i = 0; i < k; ++i) {
    float best = -INFINITY, bestScore = 0.0f;
    int bestIndex = -1;
#pragma unroll
    for (int j = 0; j < kItems; ++j) {
      int e = lane + 32 * j;
      if (e < experts && !(taken >> j & 1u) && better(selection[j], e, best, bestIndex)) {
        best = selection[j];
        bestScore = score[j];
        bestIndex = e;
      }
    }
    bestIndex = warpArgmaxFast(best, bestIndex, bestScore);
    if (bestIndex >= 0 && bestIndex % 32 == lane)
      taken |= 1u << (bestIndex / 32);
    if (lane == 0) {
      if (local) {
        localIds[i] = bestIndex;
        localWeights[i] = bestScore;
      } else {
        tokenIds[i] = bestIndex;
        w[i] = bestScore;
      }
    }
  }
  if (lane != 0)
    return;
  if (!local) {
    finishRoutingWeights(l, tokenIds, routing, w);
    return;
  }
  finishRoutingWeights(l, localIds, routing, localWeights);
  for (int i = 0; i < k; ++i) {
    tokenIds[i] = localIds[i];
    w[i] = localWeights[i];
  }
}

/// The sort key of an id less the first local expert: the local expert, or
/// numExperts (the sentinel) for an id that is invalid or not local.
__device__ __forceinline__ uint32_t sortKeyOf(int64_t local, int64_t numExperts) {
  return local >= 0 && local < numExperts ? uint32_t(local) : uint32_t(numExperts);
}

/// Local ids as sort keys (the sentinel is numExperts), slot indices as values,
/// and the per-expert counts (counts[numExperts] gathers the sentinels).
__global__ void sortKeysKernel(const int32_t *ids, int64_t slots, int64_t numExperts,
                               int64_t firstExpert, uint32_t *keys, int32_t *values,
                               int32_t *counts) {
  for (int64_t s = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; s < slots;
       s += int64_t(gridDim.x) * blockDim.x) {
    uint32_t key = sortKeyOf(static_cast<int64_t>(ids[s]) - firstExpert, numExperts);
    keys[s] = key;
    values[s] = static_cast<int32_t>(s);
    atomicAdd(&counts[key], 1);
  }
}

/// Decode's sort: one block sorts up to kThreads * kItems slots in shared
/// memory (CUB's block radix sort, stable like the device-wide one, so equal
/// ids keep ascending slot order) and writes the permutation, the offsets (by
/// binary search in the sorted keys), the valid count and the inverse. One
/// launch where the device-wide sort takes five (a memset, the keys, CUB's
/// sort, the offsets' scan, and the inverse later): at T = 1 each is a few µs
/// of a call whose weights stream in tens.
/// Slots past `slots` are padded with the sentinel key and, being last in
/// slot order, sort after every real slot.
template <int kThreads, int kItems>
__global__ void __launch_bounds__(kThreads)
    sortOneBlockKernel(const int32_t *ids, int slots, int numExperts, int64_t firstExpert,
                       int endBit, int32_t *permutation, int32_t *offsets, int32_t *numValid,
                       int32_t *rowOfSlot) {
  device::awaitPrerequisites(); // a dependent launch
  using Sort = cub::BlockRadixSort<uint32_t, kThreads, kItems, int32_t>;
  constexpr int kSlots = kThreads * kItems;
  __shared__ union {
    typename Sort::TempStorage sort;
    uint32_t sortedKeys[kSlots];
  } shared;
  uint32_t keys[kItems];
  int32_t values[kItems];
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    int s = threadIdx.x * kItems + i;
    int64_t local = s < slots ? static_cast<int64_t>(ids[s]) - firstExpert : -1;
    keys[i] = sortKeyOf(local, numExperts);
    values[i] = s;
  }
  Sort(shared.sort).Sort(keys, values, 0, endBit);
  __syncthreads(); // the sort's storage becomes the sorted keys
#pragma unroll
  for (int i = 0; i < kItems; ++i)
    shared.sortedKeys[threadIdx.x * kItems + i] = keys[i];
  __syncthreads();
  // The first rank whose key exceeds e: slots with ids up to e (keys sorted).
  auto ranksUpTo = [&](uint32_t e) {
    int lo = 0, hi = slots;
    while (lo < hi) {
      int mid = (lo + hi) / 2;
      if (shared.sortedKeys[mid] > e)
        hi = mid;
      else
        lo = mid + 1;
    }
    return lo;
  };
  for (int e = threadIdx.x; e < numExperts; e += kThreads)
    offsets[e] = ranksUpTo(uint32_t(e));
  int valid = numExperts > 0 ? ranksUpTo(uint32_t(numExperts - 1)) : 0;
  if (threadIdx.x == 0)
    *numValid = valid;
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    int r = threadIdx.x * kItems + i;
    if (r < slots) {
      permutation[r] = values[i];
      if (rowOfSlot)
        rowOfSlot[values[i]] = r < valid ? r : -1;
    }
  }
}

/// The sort of kSortOneBlockMaxSlots < slots <= kSortCountingMaxSlots over up
/// to kSortCountingMaxExperts local experts, in one launch of one block, where
/// CUB's device-wide sort is eleven graph nodes (memsets, keys, histogram,
/// scan, onesweep, offsets, inverse): 25.8 µs alone for Qwen3 at T = 1024 and
/// 36 for DeepSeek-V3, 10.5 and 10.8 this way (bench/decode_front.cu). A
/// stable counting sort. Warp w owns the contiguous slots
/// [w * share, (w + 1) * share), share a multiple of 32, and takes them 32 at a
/// time (round r: lane l holds slot w * share + 32 r + l), every key held in a
/// register from one load per round. Per round, one ballot per key bit groups
/// the lanes of equal keys; the lowest adds the group's size to the warp's
/// count of that key, and every lane keeps its rank among the warp's slots of
/// that key. One exclusive scan over count[key][warp] then gives each warp's
/// first row for each key, in key order and within a key in warp (so slot)
/// order: equal ids keep ascending slot order. Writes what sortOneBlockKernel
/// writes.
constexpr int kCountingWarps = 32;
constexpr int kCountingKeyBits = 9; // keys 0..256, and -1 (past the slots) as 511

/// The lanes of the warp whose key equals this lane's, from one ballot per key
/// bit: with __match_any_sync instead the sort took 22.5 µs at 8192 slots, this
/// way 20.7.
__device__ __forceinline__ unsigned lanesWithKey(int key) {
  unsigned peers = 0xffffffffu;
#pragma unroll
  for (int b = 0; b < kCountingKeyBits; ++b) {
    bool set = (key >> b) & 1;
    unsigned lanes = __ballot_sync(0xffffffffu, set);
    peers &= set ? lanes : ~lanes;
  }
  return peers;
}
constexpr int kCountingRounds = int(kSortCountingMaxSlots / (32 * kCountingWarps));
static_assert(kSortCountingMaxSlots % (32 * kCountingWarps) == 0);
constexpr int kCountingKeys = kSortCountingMaxExperts + 1; // + the sentinel
static_assert(kCountingKeys < (1 << kCountingKeyBits) - 1);
constexpr int kCountingScanItems =
    (kCountingKeys * kCountingWarps + 32 * kCountingWarps - 1) / (32 * kCountingWarps);

__global__ void __launch_bounds__(32 * kCountingWarps, 1)
    sortCountingKernel(const int32_t *__restrict__ ids, int slots, int numExperts,
                       int64_t firstExpert, int32_t *__restrict__ permutation,
                       int32_t *__restrict__ offsets, int32_t *__restrict__ numValid,
                       int32_t *__restrict__ rowOfSlot) {
  using Scan = cub::BlockScan<int32_t, 32 * kCountingWarps>;
  // Counts, then first rows, of (key, warp) at [warp][key]: a warp's leaders
  // touch their distinct keys in distinct banks. At [key][warp] every access of
  // a warp fell in one bank (~28-way conflicts): 20.7 µs at 8192 slots against
  // 16.6.
  __shared__ int32_t first[kCountingWarps * kCountingKeys];
  __shared__ typename Scan::TempStorage scan;
  auto cell = [](int key, int warp) { return warp * kCountingKeys + key; };
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int cells = (numExperts + 1) * kCountingWarps; // scanned in (key, warp) order
  for (int c = threadIdx.x; c < kCountingWarps * kCountingKeys; c += blockDim.x)
    first[c] = 0; // shared memory only: before the wait, beside the predecessor
  const int share = (slots + kCountingWarps * 32 - 1) / (kCountingWarps * 32) * 32;
  const int begin = warp * share;
  device::awaitPrerequisites(); // a dependent launch
  // Round r's slot of this lane: its key + 1 in the high half (0: past the
  // slots), then its rank in the low half (below share <= 512): one register a
  // round. A key and a rank array spilled 312 bytes at 64 registers (ptxas -v);
  // this spills 88, around the scan.
  uint32_t held[kCountingRounds];
#pragma unroll
  for (int r = 0; r < kCountingRounds; ++r) {
    int s = begin + 32 * r + lane;
    held[r] = 0;
    if (32 * r < share && s < slots)
      held[r] = (sortKeyOf(static_cast<int64_t>(ids[s]) - firstExpert, numExperts) + 1) << 16;
  }
  __syncthreads(); // the counts are zero
  const unsigned below = (1u << lane) - 1;
#pragma unroll
  for (int r = 0; r < kCountingRounds; ++r) {
    if (32 * r < share) { // the same for every warp: the branch is uniform
      int key = int(held[r] >> 16) - 1;
      unsigned peers = lanesWithKey(key);
      int leader = __ffs(peers) - 1, before = 0;
      if (lane == leader && key >= 0) {
        int &count = first[cell(key, warp)]; // this warp's alone
        before = count;
        count = before + __popc(peers);
      }
      // The rank among the warp's slots of the same key so far.
      held[r] |= uint32_t(__shfl_sync(0xffffffffu, before, leader) + __popc(peers & below));
      __syncwarp(); // the leaders' counts before the next round reads them
    }
  }
  __syncthreads();
  int32_t items[kCountingScanItems];
#pragma unroll
  for (int i = 0; i < kCountingScanItems; ++i) {
    int c = threadIdx.x * kCountingScanItems + i;
    items[i] = c < cells ? first[cell(c / kCountingWarps, c % kCountingWarps)] : 0;
  }
  Scan(scan).ExclusiveSum(items, items);
  __syncthreads();
#pragma unroll
  for (int i = 0; i < kCountingScanItems; ++i) {
    int c = threadIdx.x * kCountingScanItems + i;
    if (c < cells)
      first[cell(c / kCountingWarps, c % kCountingWarps)] = items[i];
  }
  __syncthreads();
  // Expert e's rows end where expert e + 1's (or the sentinel's) begin.
  for (int e = threadIdx.x; e < numExperts; e += blockDim.x)
    offsets[e] = first[cell(e + 1, 0)];
  const int valid = first[cell(numExperts, 0)];
  if (threadIdx.x == 0)
    *numValid = valid;
  // The permutation goes through shared memory (`slots` ints, dynamic): its
  // rows are scattered across the warp, and one SM's scattered 4-byte stores, a
  // sector each, were most of the ~1.6 µs a round of 1024 slots took (16.6 µs
  // at 8192 slots; 10.5 staged). The inverse's stores are the slots in order,
  // coalesced as they are.
  extern __shared__ int32_t slotOfRow[];
#pragma unroll
  for (int r = 0; r < kCountingRounds; ++r) {
    int key = int(held[r] >> 16) - 1;
    if (key < 0)
      continue;
    int s = begin + 32 * r + lane;
    int row = first[cell(key, warp)] + int(held[r] & 0xFFFFu);
    slotOfRow[row] = s;
    if (rowOfSlot)
      rowOfSlot[s] = row < valid ? row : -1;
  }
  __syncthreads();
  for (int row = threadIdx.x; row < slots; row += blockDim.x)
    permutation[row] = slotOfRow[row];
}

/// Inclusive ends of the experts' rows: one block scans the counts (up to
/// kMaxLocalExperts, kOffsetsItems per thread), where one thread walking 128
/// counts in global memory took 9 µs of a decode step.
constexpr int kOffsetsThreads = 256, kOffsetsItems = 16;
constexpr int64_t kMaxLocalExperts = kOffsetsThreads * kOffsetsItems;

__global__ void offsetsKernel(const int32_t *counts, int64_t numExperts, int32_t *offsets,
                              int32_t *numValid) {
  using Scan = cub::BlockScan<int32_t, kOffsetsThreads>;
  __shared__ typename Scan::TempStorage storage;
  int32_t items[kOffsetsItems];
  int64_t first = int64_t(threadIdx.x) * kOffsetsItems;
#pragma unroll
  for (int i = 0; i < kOffsetsItems; ++i)
    items[i] = first + i < numExperts ? counts[first + i] : 0;
  int32_t total = 0;
  Scan(storage).InclusiveSum(items, items, total);
#pragma unroll
  for (int i = 0; i < kOffsetsItems; ++i)
    if (first + i < numExperts)
      offsets[first + i] = items[i];
  if (threadIdx.x == 0)
    *numValid = total;
}

__device__ inline void storeRow(float *to, float4 v) { *reinterpret_cast<float4 *>(to) = v; }
__device__ inline void storeRow(BF16 *to, float4 v) {
  __nv_bfloat162 lo = __floats2bfloat162_rn(v.x, v.y), hi = __floats2bfloat162_rn(v.z, v.w);
  uint2 bits{*reinterpret_cast<unsigned *>(&lo), *reinterpret_cast<unsigned *>(&hi)};
  *reinterpret_cast<uint2 *>(to) = bits;
}
__device__ inline void storeElement(float *to, float v) { *to = v; }
__device__ inline void storeElement(BF16 *to, float v) {
  to->bits = __bfloat16_as_ushort(__float2bfloat16_rn(v));
}

/// A block per row (grid-stride): 16-byte loads when rows allow them, and no
/// 64-bit division per element. Rows are written in f32, or rounded to bf16
/// (nearest even) for a bf16-weight grouped matmul.
template <typename Row>
__global__ void permuteKernel(const float *hidden, int64_t hiddenSize, const int32_t *permutation,
                              const int32_t *numValid, int64_t topK, Row *rows) {
  device::awaitPrerequisites(); // a dependent launch
  int64_t valid = *numValid;
  bool vector = hiddenSize % 4 == 0 && reinterpret_cast<uintptr_t>(hidden) % 16 == 0 &&
                reinterpret_cast<uintptr_t>(rows) % (4 * sizeof(Row)) == 0;
  for (int64_t r = blockIdx.x; r < valid; r += gridDim.x) {
    const float *src = hidden + (permutation[r] / topK) * hiddenSize;
    Row *dst = rows + r * hiddenSize;
    if (vector) {
      for (int64_t h = threadIdx.x; h < hiddenSize / 4; h += blockDim.x)
        storeRow(dst + 4 * h, reinterpret_cast<const float4 *>(src)[h]);
    } else {
      for (int64_t h = threadIdx.x; h < hiddenSize; h += blockDim.x)
        storeElement(dst + h, src[h]);
    }
  }
}

/// Token-major permute for many slots: a block per token (grid-stride) reads
/// the token's hidden row once and writes it to each of its valid slots
/// (slotOf[token * topK + k]: the slot, or -1 past the valid count). The
/// slot-major kernel above reads each row top-k times, from DRAM once the
/// hidden state outgrows L2 (ncu, DeepSeek-V3 at T = 8192: 1.67 GB read for
/// 0.24 GB of hidden state, 656 us).
template <typename Row>
__global__ void permuteByTokenKernel(const float *hidden, int64_t hiddenSize,
                                     const int32_t *slotOf, int64_t tokens, int64_t topK,
                                     Row *rows) {
  device::awaitPrerequisites(); // a dependent launch
  bool vector = hiddenSize % 4 == 0 && reinterpret_cast<uintptr_t>(hidden) % 16 == 0 &&
                reinterpret_cast<uintptr_t>(rows) % (4 * sizeof(Row)) == 0;
  for (int64_t t = blockIdx.x; t < tokens; t += gridDim.x) {
    const float *src = hidden + t * hiddenSize;
    const int32_t *slots = slotOf + t * topK;
    if (vector) {
      for (int64_t h = threadIdx.x; h < hiddenSize / 4; h += blockDim.x) {
        float4 v = reinterpret_cast<const float4 *>(src)[h];
        for (int64_t k = 0; k < topK; ++k)
          if (int32_t slot = slots[k]; slot >= 0)
            storeRow(rows + slot * hiddenSize + 4 * h, v);
      }
    } else {
      for (int64_t h = threadIdx.x; h < hiddenSize; h += blockDim.x) {
        float v = src[h];
        for (int64_t k = 0; k < topK; ++k)
          if (int32_t slot = slots[k]; slot >= 0)
            storeElement(rows + slot * hiddenSize + h, v);
      }
    }
  }
}

/// One thread per output element (gated epilogues: per output column, both
/// halves). The expert of a row is found by binary search in the offsets.
__global__ void groupedMatmulKernel(const float *lhs, int64_t k,
                                    const float *weights, int64_t experts, int64_t n,
                                    const int32_t *offsets, const float *bias, Epilogue epilogue,
                                    int64_t width, float *out) {
  int64_t valid = offsets[experts - 1]; // rows past it are sentinels: never computed
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
      result = device::gatedEpilogue(epilogue, project(interleaved ? 2 * j : j),
                                     project(interleaved ? 2 * j + 1 : width + j));
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

/// Columns of one token that a combine block writes: 128 threads x 4.
constexpr int kCombineThreads = 128, kCombineColumns = 4 * kCombineThreads;
constexpr int kCombineBatch = 8;

/// Four adjacent row values as f32: one 16-byte load of f32 rows, one 8-byte
/// load of bf16 ones (--expert-outputs=bf16).
__device__ inline float4 loadFour(const float *p) { return *reinterpret_cast<const float4 *>(p); }
__device__ inline float4 loadFour(const BF16 *p) {
  uint2 bits = *reinterpret_cast<const uint2 *>(p);
  return make_float4(__uint_as_float(bits.x << 16), __uint_as_float(bits.x & 0xffff0000u),
                     __uint_as_float(bits.y << 16), __uint_as_float(bits.y & 0xffff0000u));
}
__device__ inline float loadOne(const float *p) { return *p; }
__device__ inline float loadOne(const BF16 *p) { return __uint_as_float(uint32_t(p->bits) << 16); }

/// Block (token, column chunk); a sentinel slot (row -1) adds nothing and is
/// never read. The token's rows and weights are read once into shared memory,
/// and each thread sums 4 adjacent columns (16-byte accesses of f32 rows, 8 of
/// bf16 ones, when aligned), the slots in order, so that a decode step is a few
/// blocks of short chains rather than one block walking the whole row.
template <typename Row>
__global__ void combineKernel(const Row *rows, const int32_t *rowOfSlot, int64_t hiddenSize,
                              const float *weights, int64_t topK, const float *addend,
                              const float *addendGate, float *out) {
  device::awaitPrerequisites(); // a dependent launch
  extern __shared__ unsigned char shared[];
  int32_t *slotRow = reinterpret_cast<int32_t *>(shared);
  float *slotWeight = reinterpret_cast<float *>(slotRow + topK);
  int64_t t = blockIdx.x;
  for (int64_t k = threadIdx.x; k < topK; k += blockDim.x) {
    slotRow[k] = rowOfSlot[t * topK + k];
    slotWeight[k] = weights[t * topK + k];
  }
  __syncthreads();
  float gate = addendGate ? sigmoidf(addendGate[t]) : 1.0f;
  int64_t h0 = int64_t(blockIdx.y) * kCombineColumns + 4 * threadIdx.x;
  bool vector = hiddenSize % 4 == 0 && reinterpret_cast<uintptr_t>(rows) % (4 * sizeof(Row)) == 0 &&
                reinterpret_cast<uintptr_t>(out) % 16 == 0 &&
                reinterpret_cast<uintptr_t>(addend) % 16 == 0;
  if (vector) {
    if (h0 >= hiddenSize)
      return;
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    // kCombineBatch slots' loads issued before their sums (in slot order): one
    // at a time, each waited for its row from L2 in turn (~3 µs of a decode
    // step's tail at top-8).
    for (int64_t k0 = 0; k0 < topK; k0 += kCombineBatch) {
      float4 v[kCombineBatch];
#pragma unroll
      for (int j = 0; j < kCombineBatch; ++j) {
        int32_t r = k0 + j < topK ? slotRow[k0 + j] : -1;
        v[j] = r >= 0 ? loadFour(rows + int64_t(r) * hiddenSize + h0)
                      : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      }
#pragma unroll
      for (int j = 0; j < kCombineBatch; ++j) {
        if (k0 + j >= topK || slotRow[k0 + j] < 0)
          continue;
        float w = slotWeight[k0 + j];
        acc.x += w * v[j].x, acc.y += w * v[j].y, acc.z += w * v[j].z, acc.w += w * v[j].w;
      }
    }
    if (addend) {
      float4 a = *reinterpret_cast<const float4 *>(addend + t * hiddenSize + h0);
      acc.x += gate * a.x, acc.y += gate * a.y, acc.z += gate * a.z, acc.w += gate * a.w;
    }
    *reinterpret_cast<float4 *>(out + t * hiddenSize + h0) = acc;
    return;
  }
  for (int64_t h = h0; h < h0 + 4 && h < hiddenSize; ++h) {
    float acc = 0.0f;
    for (int64_t k = 0; k < topK; ++k) {
      int32_t r = slotRow[k];
      if (r >= 0)
        acc += slotWeight[k] * loadOne(rows + int64_t(r) * hiddenSize + h);
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
  // keys in, keys out, values in, counts (the local experts + the sentinel), CUB's own.
  bytes = 3 * alignUp(slots * 4) + alignUp((kMaxLocalExperts + 1) * 4) + alignUp(cubBytes);
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
  bool grouped = routing.kind == RoutingKind::SigmoidGroupTopK && routing.numGroups > 1;
  if (!grouped && experts <= 256 && routing.topK <= experts) {
    constexpr int kWarpsPerBlock = 8;
    unsigned blocks = static_cast<unsigned>((tokens + kWarpsPerBlock - 1) / kWarpsPerBlock);
    auto launch = [&](auto kernel) {
      return detail::launchDependent(kernel, dim3(blocks), dim3(32 * kWarpsPerBlock), 0, stream,
                                     logits, tokens, static_cast<int>(experts), correctionBias,
                                     routing, ids, weights);
    };
    if (experts <= 32)
      return launch(routeWarpKernel<1>);
    if (experts <= 64)
      return launch(routeWarpKernel<2>);
    if (experts <= 128)
      return launch(routeWarpKernel<4>);
    return launch(routeWarpKernel<8>);
  }
  size_t shared = experts * (2 * sizeof(float) + sizeof(bool));
  MOEC_RETURN_IF_ERROR(detail::launchDependent(
      routeKernel, dim3(static_cast<unsigned>(tokens)), dim3(kRouteThreads), shared, stream, logits,
      static_cast<int>(experts), correctionBias, routing, ids, weights));
  return Status::ok();
}

Status sortByExpert(const int32_t *ids, int64_t slots, int64_t numExperts, int64_t firstExpert,
                    int32_t *permutation, int32_t *offsets, int32_t *numValid, int32_t *rowOfSlot,
                    void *workspace, size_t workspaceBytes, cudaStream_t stream) {
  if (numExperts > kMaxLocalExperts)
    return Status::error("sortByExpert: more than " + std::to_string(kMaxLocalExperts) +
                         " local experts");
  if (slots <= kSortOneBlockMaxSlots) {
    auto launch = [&](auto kernel, int threads) {
      return detail::launchDependent(kernel, dim3(1), dim3(threads), 0, stream, ids,
                                     static_cast<int>(slots), static_cast<int>(numExperts),
                                     firstExpert, keyBits(numExperts), permutation, offsets,
                                     numValid, rowOfSlot);
    };
    if (slots <= 256)
      return launch(sortOneBlockKernel<128, 2>, 128);
    return launch(sortOneBlockKernel<256, 4>, 256);
  }
  if (slots <= kSortCountingMaxSlots && numExperts <= kSortCountingMaxExperts) {
    const size_t shared = static_cast<size_t>(slots) * sizeof(int32_t); // the staged permutation
    MOEC_CUDA_TRY(cudaFuncSetAttribute(sortCountingKernel,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(kSortCountingMaxSlots * sizeof(int32_t))));
    return detail::launchDependent(sortCountingKernel, dim3(1), dim3(32 * kCountingWarps), shared,
                                   stream, ids, static_cast<int>(slots),
                                   static_cast<int>(numExperts), firstExpert, permutation, offsets,
                                   numValid, rowOfSlot);
  }
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
  void *cubTemp = base + 3 * alignUp(slots * 4) + alignUp((kMaxLocalExperts + 1) * 4);
  size_t cubBytes = needed - (3 * alignUp(slots * 4) + alignUp((kMaxLocalExperts + 1) * 4));
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
  offsetsKernel<<<1, kOffsetsThreads, 0, stream>>>(counts, numExperts, offsets, numValid);
  MOEC_CUDA_TRY(cudaGetLastError());
  if (rowOfSlot)
    MOEC_RETURN_IF_ERROR(
        detail::invertPermutation(permutation, slots, numValid, rowOfSlot, stream));
  return Status::ok();
}

Status detail::inversePermutation(const int32_t *rowOfSlot, const int32_t *permutation,
                                  int64_t slots, const int32_t *numValid, StreamScratch &scratch,
                                  cudaStream_t stream, const int32_t *&slotOf) {
  if (rowOfSlot) {
    slotOf = rowOfSlot;
    return Status::ok();
  }
  int32_t *inverse = nullptr;
  MOEC_RETURN_IF_ERROR(scratch.allocate(static_cast<size_t>(slots), inverse));
  MOEC_RETURN_IF_ERROR(invertPermutation(permutation, slots, numValid, inverse, stream));
  slotOf = inverse;
  return Status::ok();
}

Status detail::invertPermutation(const int32_t *permutation, int64_t slots,
                                 const int32_t *numValid, int32_t *slotOf, cudaStream_t stream) {
  // -1 everywhere (bytes 0xFF), then the valid slots: sentinel pairs stay -1.
  MOEC_CUDA_TRY(cudaMemsetAsync(slotOf, 0xFF, slots * sizeof(int32_t), stream));
  inversePermutationKernel<<<blocksFor(slots, 256), 256, 0, stream>>>(permutation, slots,
                                                                      numValid, slotOf);
  MOEC_CUDA_TRY(cudaGetLastError());
  return Status::ok();
}

namespace {
/// permute's launch for f32 or bf16 rows.
template <typename Row>
Status permuteRows(const float *hidden, int64_t hiddenSize, const int32_t *permutation,
                   const int32_t *numValid, const int32_t *rowOfSlot, int64_t slots, int64_t topK,
                   Row *rows, cudaStream_t stream) {
  if (slots == 0)
    return Status::ok();
  if (slots < detail::kPermuteByTokenMinSlots || topK <= 0 || slots % topK != 0) {
    return detail::launchDependent(permuteKernel<Row>, dim3(blocksFor(slots, 1, 16 * kSMs)),
                                   dim3(256), 0, stream, hidden, hiddenSize, permutation, numValid,
                                   topK, rows);
  }
  detail::StreamScratch scratch(stream);
  const int32_t *slotOf = nullptr;
  MOEC_RETURN_IF_ERROR(
      detail::inversePermutation(rowOfSlot, permutation, slots, numValid, scratch, stream, slotOf));
  int64_t tokens = slots / topK;
  return detail::launchDependent(permuteByTokenKernel<Row>, dim3(blocksFor(tokens, 1, 16 * kSMs)),
                                 dim3(256), 0, stream, hidden, hiddenSize, slotOf, tokens, topK,
                                 rows);
}
} // namespace

Status permute(const float *hidden, int64_t hiddenSize, const int32_t *permutation,
               const int32_t *numValid, const int32_t *rowOfSlot, int64_t slots, int64_t topK,
               float *rows, cudaStream_t stream) {
  return permuteRows(hidden, hiddenSize, permutation, numValid, rowOfSlot, slots, topK, rows,
                     stream);
}

Status permute(const float *hidden, int64_t hiddenSize, const int32_t *permutation,
               const int32_t *numValid, const int32_t *rowOfSlot, int64_t slots, int64_t topK,
               BF16 *rows, cudaStream_t stream) {
  return permuteRows(hidden, hiddenSize, permutation, numValid, rowOfSlot, slots, topK, rows,
                     stream);
}

Status groupedMatmul(const float *lhs, int64_t slots, int64_t k, const float *weights,
                     int64_t experts, int64_t n, const int32_t *offsets, const float *bias,
                     const Epilogue &epilogue, float *out, cudaStream_t stream) {
  int64_t width = epilogue.enabled && epilogue.layout != GateUpLayout::None ? n / 2 : n;
  groupedMatmulKernel<<<blocksFor(slots * width, 256), 256, 0, stream>>>(
      lhs, k, weights, experts, n, offsets, bias, epilogue, width, out);
  MOEC_CUDA_TRY(cudaGetLastError());
  return Status::ok();
}

template <typename Row>
Status combineRows(const Row *rows, const int32_t *rowOfSlot, int64_t hiddenSize,
                   const float *weights, int64_t tokens, int64_t topK, const float *addend,
                   const float *addendGate, float *out, cudaStream_t stream) {
  if (tokens == 0)
    return Status::ok();
  int64_t chunks = (hiddenSize + kCombineColumns - 1) / kCombineColumns;
  if (tokens > INT32_MAX || chunks > 65535)
    return Status::error("combine: " + std::to_string(tokens) + " tokens of " +
                         std::to_string(hiddenSize) + " exceed the grid's limit");
  if (topK > 4096)
    return Status::error("combine: top-k " + std::to_string(topK) + " exceeds 4096");
  size_t shared = static_cast<size_t>(topK) * (sizeof(int32_t) + sizeof(float));
  return detail::launchDependent(combineKernel<Row>,
                                 dim3(static_cast<unsigned>(tokens), static_cast<unsigned>(chunks)),
                                 dim3(kCombineThreads), shared, stream, rows, rowOfSlot, hiddenSize,
                                 weights, topK, addend, addendGate, out);
}

template <typename Row>
Status combine(const Row *rows, const int32_t *permutation, int64_t slots, int64_t hiddenSize,
               const float *weights, int64_t tokens, int64_t topK, const int32_t *numValid,
               const float *addend, const float *addendGate, int32_t *rowOfSlot, float *out,
               cudaStream_t stream) {
  if (tokens == 0)
    return Status::ok();
  MOEC_RETURN_IF_ERROR(detail::invertPermutation(permutation, slots, numValid, rowOfSlot, stream));
  return combineRows(rows, rowOfSlot, hiddenSize, weights, tokens, topK, addend, addendGate, out,
                     stream);
}

#define MOEC_INSTANTIATE(ROW)                                                                      \
  template Status combineRows(const ROW *, const int32_t *, int64_t, const float *, int64_t,       \
                              int64_t, const float *, const float *, float *, cudaStream_t);       \
  template Status combine(const ROW *, const int32_t *, int64_t, int64_t, const float *, int64_t,  \
                          int64_t, const int32_t *, const float *, const float *, int32_t *,       \
                          float *, cudaStream_t);
MOEC_INSTANTIATE(float)
MOEC_INSTANTIATE(BF16)
#undef MOEC_INSTANTIATE

} // namespace moec::rt::cuda
