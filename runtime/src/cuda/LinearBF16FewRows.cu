//===- LinearBF16FewRows.cu - dense bf16 projections at decode -----------===//
//
// moe.linear with a bf16 weight [N, K] and 1..64 rows: attention's q, k, v, o,
// dense MLPs and LM heads at decode. The work is streaming the weight once, so
// the grid must keep enough loads in flight on every SM whatever N is: the
// grouped kernel's one block per 128 weight rows was 4-32 blocks for the
// attention projections (3-30 % of copy bandwidth).
//
// Each block owns kBlockRows weight rows and one slice of K (blockIdx.y); its
// warps own 16 rows each and stream them with 16-byte loads straight into
// registers, one 128-deep step ahead (the first step requested before the
// dependent-launch wait: the weight is a constant). The rows, rounded to bf16,
// are staged in shared memory kChunkK at a time and multiplied on the tensor
// cores (mma.sync m16n8k16: the weights are the A operand, 16 weight rows, the
// rows the B operand, 8 per tile).
//
// The fragments' K order: a lane (g, t) loads weight rows g and g+8 at K
// offsets 8t..8t+7 of each 32-wide column group, and the row fragment it feeds
// is read from the same offsets; since both operands take the same permutation
// of the 16 K of an mma, the product is the same sum, with no shuffle.
//
// Split K: the slices of one row block form a thread-block cluster (Hopper):
// each block leaves its partial sums in its own shared memory and the
// cluster's blocks add them in slice order through distributed shared memory,
// then add the bias and apply the epilogue; no second kernel, no scratch. A
// gated epilogue pairs gate and up rows that can lie in different row blocks,
// so it keeps the older scheme: partial sums to stream-ordered scratch and a
// second kernel. The slices, the steps and the order of every sum depend on K
// and N alone (planLinearBF16FewRows), and each output of an mma depends only
// on its own row and column: a row's result has the same bits for any M up to
// 64.
//
// Siblings: several projections of the same rows (attention's q, k and v) in
// one launch, their row blocks side by side in the grid (moe.multi_linear).
//
//===----------------------------------------------------------------------===//

#include "LinearBF16FewRows.h"

#include "DependentLaunch.cuh"
#include "Epilogue.cuh"
#include "GridSize.h"
#include "StreamScratch.h"
#include "moec/runtime/Cuda.h"

#include <cooperative_groups.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <string>
#include <type_traits>

namespace moec::rt::cuda::detail {
namespace {

using cpu::GateUpLayout;

constexpr int kWarps = 4, kThreads = 32 * kWarps;
constexpr int kBlockRows = 16 * kWarps; // weight rows per block
constexpr int kStepK = 128;             // K per step: 4 column groups of 32
constexpr int kChunkK = 256;            // K of the rows staged at a time
constexpr int kRowStride = kChunkK + 32; // bf16; padded 64 bytes: conflict-free fragment reads
/// Blocks the plan aims at: about four per SM (registers allow four, and the
/// 64-row tile's staged rows, 36 KB, six).
constexpr int64_t kTargetBlocks = 4 * kSMs;
/// The most K slices, one cluster: 16 is Hopper's largest (non-portable)
/// cluster.
constexpr int64_t kMaxSplits = 16;

/// The projections of one launch: segment s owns row blocks
/// [firstBlock[s], firstBlock[s + 1]) of the grid.
template <typename Out> struct Segments {
  int count;
  const uint16_t *w[kLinearBF16MaxSiblings];
  const float *bias[kLinearBF16MaxSiblings];
  Out *y[kLinearBF16MaxSiblings];
  int64_t n[kLinearBF16MaxSiblings];
  int64_t firstBlock[kLinearBF16MaxSiblings + 1];
};

/// How the few-rows kernel finishes its sums.
enum class Finish { Direct, Cluster, Scratch };

__device__ inline unsigned packBF16(float lo, float hi) {
  __nv_bfloat162 pair = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<unsigned *>(&pair);
}

__device__ inline void mma16816(float (&c)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3,
                                unsigned b0, unsigned b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
               "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ inline uint4 loadWeights(const uint16_t *p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

/// Eight consecutive elements of a row, as bf16 (f32 rows rounded to nearest
/// even, as every bf16-weight kernel rounds them).
__device__ inline uint4 eightBF16(const float *p) {
  float4 lo = *reinterpret_cast<const float4 *>(p), hi = *reinterpret_cast<const float4 *>(p + 4);
  return make_uint4(packBF16(lo.x, lo.y), packBF16(lo.z, lo.w), packBF16(hi.x, hi.y),
                    packBF16(hi.z, hi.w));
}
__device__ inline uint4 eightBF16(const BF16 *p) { return *reinterpret_cast<const uint4 *>(p); }

__device__ inline void store(float *y, float v) { *y = v; }
__device__ inline void store(BF16 *y, float v) {
  y->bits = __bfloat16_as_ushort(__float2bfloat16_rn(v));
}

/// The weight rows [row0, row0 + 16) x [k0, k0 + 128) step of one warp: lane
/// (g, t) holds rows g and g+8 at k0 + 32j + 8t .. +8 for j < 4, zeros past N
/// or past kEnd (K is a multiple of 8, so a 16-byte chunk is all in or all out).
__device__ inline void loadStep(const uint16_t *rowA, const uint16_t *rowB, int64_t k0,
                                int64_t kEnd, int t, uint4 (&r)[2][4]) {
  const uint4 zero = make_uint4(0, 0, 0, 0);
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    int64_t kk = k0 + 32 * j + 8 * t;
    bool valid = kk < kEnd;
    r[0][j] = rowA && valid ? loadWeights(rowA + kk) : zero;
    r[1][j] = rowB && valid ? loadWeights(rowB + kk) : zero;
  }
}

/// Out (f32 or bf16) y[M, width] = epilogue(sum + bias): the one place both
/// kernels finish an output, so that a split and an unsplit plan agree.
template <typename Out>
__device__ inline void finish(const cpu::Epilogue &epilogue, float v, Out *y) {
  if (epilogue.enabled)
    v = device::activate(epilogue.kind, epilogue.alpha, v);
  store(y, v);
}

/// Four blocks per SM (128 registers) up to 16 rows; three (168) above, where
/// the staging of f32 rows beside 64 registers of weights and 16-32 of sums
/// spilled at 128.
template <int TOKEN_TILES, typename Lhs, typename Out, Finish FINISH>
__global__ void __launch_bounds__(kThreads, TOKEN_TILES >= 4 ? 3 : 4)
    linearFewRowsKernel(const Lhs *x, int64_t m, int64_t k, Segments<Out> segments,
                        int64_t perSplit, float *partial, cpu::Epilogue epilogue) {
  constexpr int kTokens = 8 * TOKEN_TILES;
  __shared__ __align__(16) uint16_t rows[kTokens][kRowStride];
  int s = 0;
  while (s + 1 < segments.count && blockIdx.x >= segments.firstBlock[s + 1])
    ++s;
  const uint16_t *w = segments.w[s];
  const int64_t n = segments.n[s];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int64_t block0 = (int64_t(blockIdx.x) - segments.firstBlock[s]) * kBlockRows;
  const int64_t row0 = block0 + warp * 16;
  const int64_t kBegin = int64_t(blockIdx.y) * perSplit;
  const int64_t kEnd = kBegin + perSplit < k ? kBegin + perSplit : k;
  const uint16_t *rowA = row0 + g < n ? w + (row0 + g) * k : nullptr;
  const uint16_t *rowB = row0 + g + 8 < n ? w + (row0 + g + 8) * k : nullptr;
  const int steps = static_cast<int>((kEnd - kBegin + kStepK - 1) / kStepK);

  uint4 current[2][4], next[2][4];
  loadStep(rowA, rowB, kBegin, kEnd, t, current); // a constant: before the wait
  device::awaitPrerequisites();                   // a dependent launch

  float acc[TOKEN_TILES][4] = {};
  for (int step = 0; step < steps; ++step) {
    const int64_t k0 = kBegin + int64_t(step) * kStepK;
    if (step + 1 < steps)
      loadStep(rowA, rowB, k0 + kStepK, kEnd, t, next);
    const int inChunk = (step * kStepK) % kChunkK;
    if (inChunk == 0) {
      // Stage rows [0, kTokens) x [k0, k0 + kChunkK) as bf16, zeros past M and kEnd.
      __syncthreads(); // the previous chunk is read
      for (int i = threadIdx.x; i < kTokens * (kChunkK / 8); i += kThreads) {
        int r = i / (kChunkK / 8), c = 8 * (i % (kChunkK / 8));
        int64_t kk = k0 + c;
        uint4 v = r < m && kk < kEnd ? eightBF16(x + r * k + kk) : make_uint4(0, 0, 0, 0);
        *reinterpret_cast<uint4 *>(&rows[r][c]) = v;
      }
      __syncthreads();
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
#pragma unroll
      for (int tile = 0; tile < TOKEN_TILES; ++tile) {
        uint4 b = *reinterpret_cast<const uint4 *>(&rows[tile * 8 + g][inChunk + 32 * j + 8 * t]);
        mma16816(acc[tile], current[0][j].x, current[1][j].x, current[0][j].y, current[1][j].y,
                 b.x, b.y);
        mma16816(acc[tile], current[0][j].z, current[1][j].z, current[0][j].w, current[1][j].w,
                 b.z, b.w);
      }
    }
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int j = 0; j < 4; ++j)
        current[h][j] = next[h][j];
  }

  const float *bias = segments.bias[s];
  Out *y = segments.y[s];
  if constexpr (FINISH == Finish::Cluster) {
    // This slice's sums [kTokens][kBlockRows] in the staging buffer (it holds
    // 576 bytes a token; the sums take 256), then the cluster's slices added
    // in slice order, each block finishing every splits-th output.
    namespace cg = cooperative_groups;
    cg::cluster_group cluster = cg::this_cluster();
    float *sums = reinterpret_cast<float *>(&rows[0][0]);
    __syncthreads(); // the last chunk is read
#pragma unroll
    for (int tile = 0; tile < TOKEN_TILES; ++tile)
#pragma unroll
      for (int f = 0; f < 4; ++f)
        sums[(tile * 8 + 2 * t + (f & 1)) * kBlockRows + warp * 16 + g + (f >= 2 ? 8 : 0)] =
            acc[tile][f];
    cluster.sync();
    const int splits = static_cast<int>(gridDim.y), rank = static_cast<int>(blockIdx.y);
    for (int64_t i = int64_t(rank) * kThreads + threadIdx.x; i < m * kBlockRows;
         i += int64_t(splits) * kThreads) {
      const int64_t token = i / kBlockRows, column = block0 + i % kBlockRows;
      if (column >= n)
        continue;
      float v = cluster.map_shared_rank(sums, 0)[i];
      for (int z = 1; z < splits; ++z)
        v += cluster.map_shared_rank(sums, z)[i];
      finish(epilogue, v + (bias ? bias[column] : 0.0f), y + token * n + column);
    }
    cluster.sync(); // the other blocks still read this one's sums
  } else {
    // Accumulator f of a tile: weight row g (+8 for f >= 2), token 2t (+1 for odd f).
#pragma unroll
    for (int tile = 0; tile < TOKEN_TILES; ++tile)
#pragma unroll
      for (int f = 0; f < 4; ++f) {
        int64_t column = row0 + g + (f >= 2 ? 8 : 0), token = tile * 8 + 2 * t + (f & 1);
        if (column >= n || token >= m)
          continue;
        if constexpr (FINISH == Finish::Scratch)
          partial[(int64_t(blockIdx.y) * m + token) * n + column] = acc[tile][f];
        else
          finish(epilogue, acc[tile][f] + (bias ? bias[column] : 0.0f), y + token * n + column);
      }
  }
}

/// Adds the slices' partial sums in slice order, then the bias, then the
/// epilogue (gated: gate and up rows per the layout; `width` outputs a row).
template <typename Out>
__global__ void reduceFewRows(const float *partial, int splits, int64_t m, int64_t n,
                              const float *bias, cpu::Epilogue epilogue, int64_t width, Out *y) {
  device::awaitPrerequisites(); // a dependent launch
  const bool gated = epilogue.enabled && epilogue.layout != GateUpLayout::None;
  const bool interleaved = epilogue.layout == GateUpLayout::Interleaved;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < m * width;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / width, c = i % width;
    auto sum = [&](int64_t column) {
      float v = partial[r * n + column];
      for (int z = 1; z < splits; ++z)
        v += partial[(z * m + r) * n + column];
      return v + (bias ? bias[column] : 0.0f);
    };
    if (gated) {
      int64_t gateRow = interleaved ? 2 * c : c, upRow = interleaved ? 2 * c + 1 : width + c;
      store(y + i, device::gatedEpilogue(epilogue, sum(gateRow), sum(upRow)));
    } else {
      finish(epilogue, sum(c), y + i);
    }
  }
}

template <int TOKEN_TILES, typename Lhs, typename Out, Finish FINISH>
Status launchFewRows(const FewRowsPlan &plan, const Lhs *x, int64_t m, int64_t k,
                     const Segments<Out> &segments, float *partial, const Epilogue &epilogue,
                     cudaStream_t stream) {
  auto kernel = linearFewRowsKernel<TOKEN_TILES, Lhs, Out, FINISH>;
  dim3 grid(static_cast<unsigned>(plan.rowBlocks), static_cast<unsigned>(plan.splits));
  if constexpr (FINISH == Finish::Cluster) {
    static const cudaError_t allowed =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
    MOEC_CUDA_TRY(allowed);
    return launchDependentClusters(kernel, grid, dim3(kThreads), 0, stream, dim3(1, grid.y, 1), x,
                                   m, k, segments, plan.perSplit, partial, epilogue);
  } else {
    return launchDependent(kernel, grid, dim3(kThreads), 0, stream, x, m, k, segments,
                           plan.perSplit, partial, epilogue);
  }
}

template <typename Lhs, typename Out, Finish FINISH>
Status launchFewRowsTiles(const FewRowsPlan &plan, const Lhs *x, int64_t m, int64_t k,
                          const Segments<Out> &segments, float *partial,
                          const Epilogue &epilogue, cudaStream_t stream) {
  auto launch = [&](auto tiles) { // tiles: the 8-row tiles of the rows
    return launchFewRows<decltype(tiles)::value, Lhs, Out, FINISH>(plan, x, m, k, segments, partial,
                                                                   epilogue, stream);
  };
  return m <= 8    ? launch(std::integral_constant<int, 1>{})
         : m <= 16 ? launch(std::integral_constant<int, 2>{})
         : m <= 32 ? launch(std::integral_constant<int, 4>{})
                   : launch(std::integral_constant<int, 8>{});
}

Status checkFewRows(int64_t m, int64_t k, const void *x) {
  if (m > kLinearBF16FewRowsMax)
    return Status::error("linearBF16FewRows: " + std::to_string(m) + " rows, more than " +
                         std::to_string(kLinearBF16FewRowsMax));
  if (k % 8 != 0)
    return Status::error("linearBF16FewRows: K = " + std::to_string(k) +
                         " is not a multiple of 8 (16-byte weight loads)");
  if (reinterpret_cast<uintptr_t>(x) % 16 != 0)
    return Status::error("linearBF16FewRows: the rows are not 16-byte aligned");
  return Status::ok();
}

} // namespace

FewRowsPlan planLinearBF16FewRows(int64_t k, int64_t n) {
  return planLinearBF16FewRowsBlocks(k, (n + kBlockRows - 1) / kBlockRows);
}

FewRowsPlan planLinearBF16FewRowsBlocks(int64_t k, int64_t rowBlocks) {
  rowBlocks = std::max<int64_t>(1, rowBlocks);
  int64_t steps = std::max<int64_t>(1, (k + kStepK - 1) / kStepK);
  int64_t splits = std::clamp<int64_t>(kTargetBlocks / rowBlocks, 1, std::min(steps, kMaxSplits));
  int64_t perSplit = (steps + splits - 1) / splits * kStepK;
  return {rowBlocks, std::max<int64_t>(1, (k + perSplit - 1) / perSplit), perSplit};
}

template <typename Lhs, typename Out>
Status linearBF16FewRows(const Lhs *x, int64_t m, int64_t k, const uint16_t *weightBF16, int64_t n,
                         const float *bias, const Epilogue &epilogue, Out *y,
                         cudaStream_t stream) {
  if (m <= 0 || n <= 0)
    return Status::ok();
  MOEC_RETURN_IF_ERROR(checkFewRows(m, k, x));
  if (reinterpret_cast<uintptr_t>(weightBF16) % 16 != 0)
    return Status::error("linearBF16FewRows: the weight is not 16-byte aligned");
  const bool gated = epilogue.enabled && epilogue.layout != GateUpLayout::None;
  if (gated && n % 2 != 0)
    return Status::error("linearBF16FewRows: gated N = " + std::to_string(n) + " is odd");
  FewRowsPlan plan = planLinearBF16FewRows(k, n);
  if (plan.rowBlocks > INT32_MAX)
    return Status::error("linearBF16FewRows: N = " + std::to_string(n) + ", K = " +
                         std::to_string(k) + " exceed the grid's limits");
  Segments<Out> segments{1, {weightBF16}, {bias}, {y}, {n}, {0, plan.rowBlocks}};
  if (!gated && plan.splits == 1)
    return launchFewRowsTiles<Lhs, Out, Finish::Direct>(plan, x, m, k, segments, nullptr,
                                                        epilogue, stream);
  if (!gated)
    return launchFewRowsTiles<Lhs, Out, Finish::Cluster>(plan, x, m, k, segments, nullptr,
                                                         epilogue, stream);
  // Gated, split or not: the gate and up rows of an output can lie in
  // different blocks, so the reduction kernel pairs them.
  StreamScratch scratch(stream);
  float *partial = nullptr;
  MOEC_RETURN_IF_ERROR(scratch.allocate(static_cast<size_t>(plan.splits * m * n), partial));
  auto scratchSums = launchFewRowsTiles<Lhs, Out, Finish::Scratch>;
  MOEC_RETURN_IF_ERROR(scratchSums(plan, x, m, k, segments, partial, epilogue, stream));
  int64_t width = n / 2;
  return launchDependent(reduceFewRows<Out>, dim3(blocksFor(m * width, 256, 4 * kSMs)), dim3(256),
                         0, stream, partial, static_cast<int>(plan.splits), m, n, bias, epilogue,
                         width, y);
}

template <typename Lhs, typename Out>
Status linearBF16FewRowsSiblings(const Lhs *x, int64_t m, int64_t k, int count,
                                 const uint16_t *const *weightsBF16, const int64_t *n,
                                 const float *const *biases, Out *const *ys, cudaStream_t stream) {
  if (count < 1 || count > kLinearBF16MaxSiblings)
    return Status::error("linearBF16FewRows: " + std::to_string(count) +
                         " sibling projections, not 1 to " +
                         std::to_string(kLinearBF16MaxSiblings));
  if (m <= 0)
    return Status::ok();
  MOEC_RETURN_IF_ERROR(checkFewRows(m, k, x));
  Segments<Out> segments{};
  segments.count = count;
  int64_t rowBlocks = 0;
  for (int s = 0; s < count; ++s) {
    if (n[s] <= 0)
      return Status::error("linearBF16FewRows: sibling " + std::to_string(s) + " has N = " +
                           std::to_string(n[s]));
    if (reinterpret_cast<uintptr_t>(weightsBF16[s]) % 16 != 0)
      return Status::error("linearBF16FewRows: the weight of sibling " + std::to_string(s) +
                           " is not 16-byte aligned");
    segments.w[s] = weightsBF16[s];
    segments.bias[s] = biases ? biases[s] : nullptr;
    segments.y[s] = ys[s];
    segments.n[s] = n[s];
    segments.firstBlock[s] = rowBlocks;
    rowBlocks += (n[s] + kBlockRows - 1) / kBlockRows;
  }
  segments.firstBlock[count] = rowBlocks;
  if (rowBlocks > INT32_MAX)
    return Status::error("linearBF16FewRows: the siblings exceed the grid's limits");
  FewRowsPlan plan = planLinearBF16FewRowsBlocks(k, rowBlocks);
  return plan.splits == 1 ? launchFewRowsTiles<Lhs, Out, Finish::Direct>(
                                plan, x, m, k, segments, nullptr, Epilogue{}, stream)
                          : launchFewRowsTiles<Lhs, Out, Finish::Cluster>(
                                plan, x, m, k, segments, nullptr, Epilogue{}, stream);
}

#define MOEC_INSTANTIATE(LHS, OUT)                                                                 \
  template Status linearBF16FewRows(const LHS *, int64_t, int64_t, const uint16_t *, int64_t,      \
                                    const float *, const Epilogue &, OUT *, cudaStream_t);       \
  template Status linearBF16FewRowsSiblings(const LHS *, int64_t, int64_t, int,                    \
                                            const uint16_t *const *, const int64_t *,              \
                                            const float *const *, OUT *const *, cudaStream_t);
MOEC_INSTANTIATE(float, float)
MOEC_INSTANTIATE(BF16, float)
MOEC_INSTANTIATE(float, BF16)
MOEC_INSTANTIATE(BF16, BF16)
#undef MOEC_INSTANTIATE

} // namespace moec::rt::cuda::detail
