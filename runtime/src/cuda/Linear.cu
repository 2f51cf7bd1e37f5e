//===- Linear.cu - moe.linear in f32: the router, and f32 shared experts ---===//
//
// The router's logits decide which experts run, so they are computed from f32
// weights in f32, as the CPU and the reference do: a bf16 router would flip
// near-tied top-k choices. Few rows (decode): the weight [N, K] is read once
// per 16 input rows: each warp owns one output column (its gate and up rows
// when gated) and walks K with coalesced loads, against the 16 rows staged in
// shared memory; K is split over blocks when the columns are few. Many rows
// and columns (prefill) and no gate: a 3xTF32 tensor-core tile, from 1024 rows
// and without an activation CUTLASS's (LinearCutlass.cu) where the runtime has it.
//
//===----------------------------------------------------------------------===//

#include "DependentLaunch.cuh"
#include "Epilogue.cuh"
#include "ExpertTiles.cuh"
#include "GridSize.h"
#ifdef MOEC_HAVE_CUTLASS
#include "LinearCutlass.h"
#endif
#include "StreamScratch.h"
#include "moec/runtime/Cuda.h"
#include "moec/runtime/cuda/MoEKernels.h"

#include <algorithm>

namespace moec::rt::cuda {
namespace {

using cpu::GateUpLayout;

constexpr int kThreads = 256;
constexpr int kColumnsPerBlock = kThreads / 32; // one output column per warp
constexpr int kRowsPerBlock = 16;
constexpr int kChunk = 256; // K staged per step: 16 rows x 256 floats = 16 KB
/// From this many rows on, ungated linears of enough columns take the tiled
/// kernel below (ncu, DeepSeek-V3's router at T = 128: 188 µs on the
/// warp-per-column kernel, which re-reads 16 rows of K = 7168 per 8 columns).
constexpr int64_t kTiledMinRows = 64;

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

/// Split K (blockIdx.z; `partial` non-null, ungated only): each split sums
/// [z·kPerSplit, (z+1)·kPerSplit) into partial[z] and reduceSplits finishes, so
/// that a router of 8 experts at T = 1 runs on 16 blocks instead of one.
__global__ void __launch_bounds__(kThreads)
linearKernel(const float *x, int64_t m, int64_t k, const float *w, int64_t n, const float *bias,
             cpu::Epilogue epilogue, int64_t width, float *y, int64_t kPerSplit, float *partial) {
  device::awaitPrerequisites(); // a dependent launch
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
  const int64_t kBegin = int64_t(blockIdx.z) * kPerSplit;
  const int64_t kEnd = kBegin + kPerSplit < k ? kBegin + kPerSplit : k;
  for (int64_t k0 = kBegin; k0 < kEnd; k0 += kChunk) {
    __syncthreads();
    for (int i = threadIdx.x; i < kRowsPerBlock * kChunk; i += kThreads) {
      int r = i / kChunk, c = i % kChunk;
      rows[r][c] = r < rowCount && k0 + c < kEnd ? x[(firstRow + r) * k + k0 + c] : 0.0f;
    }
    __syncthreads();
    if (!active)
      continue;
    accumulate(w + weightRow[0] * k + k0, kEnd - k0, lane, rows, acc[0]);
    if (gated)
      accumulate(w + weightRow[1] * k + k0, kEnd - k0, lane, rows, acc[1]);
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
    if (partial) {
      partial[int64_t(blockIdx.z) * m * n + (firstRow + r) * n + column] = acc[0][r];
      continue;
    }
    float g = acc[0][r] + (bias ? bias[weightRow[0]] : 0.0f);
    float result = g;
    if (gated)
      result = device::gatedEpilogue(epilogue, g, acc[1][r] + (bias ? bias[weightRow[1]] : 0.0f));
    else if (epilogue.enabled)
      result = device::activate(epilogue.kind, epilogue.alpha, g);
    y[(firstRow + r) * width + column] = result;
  }
}

/// Decode routers: up to kFewRows rows, ungated, K % 4 == 0 and 16-byte
/// aligned rows. One pass, no split over blocks, so no scratch and no second
/// kernel: a timeline had the split router (linearKernel, then
/// reduceSplits, then the scratch's free, which a dependent launch cannot
/// overlap) at 6.6 µs of Qwen3's call at T = 1, before route could start. A
/// block computes kFewColumns columns; its warps split each column's K in
/// kFewParts and walk it with 16-byte loads, and the parts are added in shared
/// memory in a fixed order (logits do not depend on timing).
constexpr int64_t kFewRows = 4;
constexpr int kFewColumns = 2;
constexpr int kFewParts = kThreads / 32 / kFewColumns;

__global__ void __launch_bounds__(kThreads)
    linearFewRowsKernel(const float *x, int64_t m, int64_t k, const float *w, int64_t n,
                        const float *bias, cpu::Epilogue epilogue, float *y) {
  device::awaitPrerequisites(); // a dependent launch
  __shared__ float parts[kFewParts][kFewColumns][kFewRows];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int c = warp % kFewColumns, part = warp / kFewColumns;
  const int64_t column = int64_t(blockIdx.x) * kFewColumns + c;
  const int64_t quads = k / 4, perPart = (quads + kFewParts - 1) / kFewParts;
  const int64_t begin = part * perPart, end = begin + perPart < quads ? begin + perPart : quads;
  float acc[kFewRows] = {};
  if (column < n) {
    const float4 *wRow = reinterpret_cast<const float4 *>(w + column * k);
#pragma unroll 4
    for (int64_t q = begin + lane; q < end; q += 32) {
      float4 wv = __ldg(wRow + q);
#pragma unroll
      for (int r = 0; r < kFewRows; ++r) {
        if (r >= m)
          break;
        float4 xv = __ldg(reinterpret_cast<const float4 *>(x + r * k) + q);
        acc[r] = fmaf(wv.x, xv.x, acc[r]);
        acc[r] = fmaf(wv.y, xv.y, acc[r]);
        acc[r] = fmaf(wv.z, xv.z, acc[r]);
        acc[r] = fmaf(wv.w, xv.w, acc[r]);
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kFewRows; ++r) {
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2)
      acc[r] += __shfl_xor_sync(0xffffffffu, acc[r], offset);
    if (lane == 0)
      parts[part][c][r] = acc[r];
  }
  __syncthreads();
  const int t = threadIdx.x;
  if (t >= kFewColumns * kFewRows)
    return;
  const int outColumn = t / kFewRows, r = t % kFewRows;
  const int64_t j = int64_t(blockIdx.x) * kFewColumns + outColumn;
  if (j >= n || r >= m)
    return;
  float sum = parts[0][outColumn][r];
  for (int p = 1; p < kFewParts; ++p)
    sum += parts[p][outColumn][r];
  sum += bias ? bias[j] : 0.0f;
  if (epilogue.enabled)
    sum = device::activate(epilogue.kind, epilogue.alpha, sum);
  y[r * n + j] = sum;
}

/// Many rows and columns (prefill routers of 64+ experts): f32 on the tensor
/// cores in 3xTF32. Each operand v splits into big = tf32(v) and small =
/// tf32(v - big), and a·b is summed as small·big + big·small + big·big (the
/// small·small term is below f32's last bit), in f32 accumulators: f32-level
/// accuracy at the tensor cores' rate (ncu: a SIMT tile ran DeepSeek-V3's
/// 8192 x 7168 x 256 router at 29 TFLOP/s, 1.03 ms). Each block owns 128 rows x
/// 128 columns, each of its 8 warps 64 x 32 (4 x 4 mma.m16n8k8 tiles). Not
/// gated: the bias and an activation only.
///
/// K streams through a cp.async pipeline of kTiledStages stages 32 deep, both
/// operands K-contiguous in shared memory as in global (rows padded to 36
/// floats: a fragment's lanes, rows g and k t, hit banks 4g + t, all distinct).
/// A kernel that staged 16-deep steps through registers, transposed, one step
/// ahead waited out one load latency per 16 k: 0.93 ms for DeepSeek-V3's router
/// at T = 8192 (32 TFLOP/s); this one took 612 µs in ncu, at 0.54 issues per
/// scheduler cycle with 4 warps per scheduler (registers and shared memory
/// allow 2 blocks per SM). Issuing each of the three terms over the four column
/// tiles before the next measured the same (617 µs): the compiler already
/// interleaves them.
constexpr int kTileRows = 128, kTileColumns = 128, kTileK = 32, kMmaK = 8;
constexpr int kTiledStages = 3;
constexpr int kTileStride = kTileK + 4; // floats per staged row
constexpr int kTiledStageFloats = (kTileRows + kTileColumns) * kTileStride;
constexpr int kTiledSharedBytes = kTiledStages * kTiledStageFloats * 4; // 108 KB: 2 blocks per SM
/// From this many columns on the tiled kernel; fewer (Mixtral's 8 experts)
/// would leave most of a 128-column tile idle, and the warp-per-column kernel
/// reads each row once for all of them.
constexpr int64_t kTiledMinColumns = 64;
/// The deepest K split of the tiled kernel: its logits' error against float64
/// grew with the depth, 5e-7 of the largest logit at 64 deep, 3.3e-6 at 448,
/// 3.8e-6 at 512, 2.7e-5 at 3584 (bench/router_probe.cu). A multiple of kTileK.
constexpr int64_t kTiledMaxDepth = 256;
/// From this many rows, CUTLASS's 3xTF32 GEMM where the runtime has it.
constexpr int64_t kCutlassMinRows = 1024;

/// v as the big and small tf32 halves of 3xTF32 (bit patterns for mma).
__device__ inline void splitTF32(float v, uint32_t &big, uint32_t &small) {
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(big) : "f"(v));
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(small) : "f"(v - __uint_as_float(big)));
}

/// d += a·b, one m16n8k8 tf32 tile (row-major A, K-major B, f32 accumulators).
__device__ inline void mmaTF32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, "
               "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/// Issues the copies of one operand's 128-row, 32-deep tile (rows [row0, row0 +
/// 128) of `rows`, columns [k0, k0 + 32) clipped to kEnd) into `tile`, zeros
/// outside: 16-byte copies when `vector` (K % 4 == 0, aligned), else 4-byte ones.
__device__ inline void loadTile(float *tile, const float *base, int64_t row0, int64_t rows,
                                int64_t k, int64_t k0, int64_t kEnd, bool vector) {
  constexpr int kChunks = kTileRows * kTileK / 4; // 16-byte chunks per tile
#pragma unroll
  for (int i = 0; i < kChunks / kThreads; ++i) {
    int q = threadIdx.x + i * kThreads, r = q / (kTileK / 4), c = 4 * (q % (kTileK / 4));
    int64_t row = row0 + r, kk = k0 + c;
    float *dst = tile + r * kTileStride + c;
    const float *src = base + (row < rows ? row : 0) * k + kk;
    if (vector) {
      bool valid = row < rows && kk < kEnd; // kEnd - kk >= 4: K % 4 == 0
      tiles::copyAsync16(dst, valid ? src : base, valid ? 16 : 0);
    } else {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        bool valid = row < rows && kk + e < kEnd;
        tiles::copyAsync4(dst + e, valid ? src + e : base, valid);
      }
    }
  }
}

/// Split K (blockIdx.z; `partial` non-null): too few tiles to fill the SMs --
/// each split writes its own partial sums and reduceSplits adds them in a fixed
/// order, so logits do not depend on timing.
__global__ void __launch_bounds__(kThreads, 2) // two blocks per SM: at most 128 registers
    linearTiledKernel(const float *x, int64_t m, int64_t k, const float *w, int64_t n,
                      const float *bias, cpu::Epilogue epilogue, float *y, int64_t kPerSplit,
                      float *partial) {
  device::awaitPrerequisites(); // a dependent launch

  extern __shared__ __align__(16) float staged[]; // [stage][x rows, then w rows][kTileStride]
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int g = lane / 4, t = lane % 4; // the mma fragments' row and k
  const int warpRow = (warp / 4) * 64, warpColumn = (warp % 4) * 32;
  const int64_t row0 = int64_t(blockIdx.y) * kTileRows, col0 = int64_t(blockIdx.x) * kTileColumns;
  const int64_t kBegin = int64_t(blockIdx.z) * kPerSplit, kEnd = min(k, kBegin + kPerSplit);
  const bool vector = k % 4 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
                      reinterpret_cast<uintptr_t>(w) % 16 == 0;
  float acc[4][4][4] = {}; // [row tile][column tile][fragment]
  const int64_t steps = (kEnd - kBegin + kTileK - 1) / kTileK;
  tiles::runPipeline<kTiledStages>(
      steps,
      [&](int64_t step, int stage) {
        float *xs = staged + stage * kTiledStageFloats, *ws = xs + kTileRows * kTileStride;
        int64_t k0 = kBegin + step * kTileK;
        loadTile(xs, x, row0, m, k, k0, kEnd, vector);
        loadTile(ws, w, col0, n, k, k0, kEnd, vector);
      },
      [&](int64_t, int stage) {
        const float *xs = staged + stage * kTiledStageFloats, *ws = xs + kTileRows * kTileStride;
#pragma unroll 1 // unrolled, the steps' fragments spilled (128 registers)
        for (int kk = 0; kk < kTileK; kk += kMmaK) {
          // B fragments (k = t and t + 4, column g) of the warp's 4 column tiles.
          uint32_t bBig[4][2], bSmall[4][2];
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            const float *column = ws + (warpColumn + j * 8 + g) * kTileStride + kk + t;
            splitTF32(column[0], bBig[j][0], bSmall[j][0]);
            splitTF32(column[4], bBig[j][1], bSmall[j][1]);
          }
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            // A fragment: rows g and g + 8 of the row tile, k = t and t + 4.
            const float *row = xs + (warpRow + i * 16 + g) * kTileStride + kk + t;
            uint32_t aBig[4], aSmall[4];
            splitTF32(row[0], aBig[0], aSmall[0]);
            splitTF32(row[8 * kTileStride], aBig[1], aSmall[1]);
            splitTF32(row[4], aBig[2], aSmall[2]);
            splitTF32(row[8 * kTileStride + 4], aBig[3], aSmall[3]);
#pragma unroll
            for (int j = 0; j < 4; ++j) {
              mmaTF32(acc[i][j], aSmall, bBig[j]);
              mmaTF32(acc[i][j], aBig, bSmall[j]);
              mmaTF32(acc[i][j], aBig, bBig[j]);
            }
          }
        }
      });
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int f = 0; f < 4; ++f) {
        // Accumulator f: row g (+8 for f >= 2), column 2t (+1 for odd f).
        int64_t r = row0 + warpRow + i * 16 + g + (f >= 2 ? 8 : 0);
        int64_t c = col0 + warpColumn + j * 8 + 2 * t + (f & 1);
        if (r >= m || c >= n)
          continue;
        if (partial) {
          partial[(int64_t(blockIdx.z) * m + r) * n + c] = acc[i][j][f];
          continue;
        }
        float v = acc[i][j][f] + (bias ? bias[c] : 0.0f);
        y[r * n + c] = epilogue.enabled ? device::activate(epilogue.kind, epilogue.alpha, v) : v;
      }
}

__global__ void reduceSplits(const float *partial, int splits, int64_t m, int64_t n,
                             const float *bias, cpu::Epilogue epilogue, float *y) {
  device::awaitPrerequisites(); // a dependent launch
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < m * n;
       i += int64_t(gridDim.x) * blockDim.x) {
    float v = 0.0f;
    for (int z = 0; z < splits; ++z)
      v += partial[z * m * n + i];
    v += bias ? bias[i % n] : 0.0f;
    y[i] = epilogue.enabled ? device::activate(epilogue.kind, epilogue.alpha, v) : v;
  }
}

/// How deep each K split is: as many splits as `blocks` blocks per split fit in
/// `waves` waves of the SMs, each split at least `minDepth` deep and a multiple
/// of `step`; the count is then what that depth needs.
struct KSplit {
  int64_t splits, perSplit;
};
/// `maxDepth` (a multiple of `step`) bounds the depth whatever the waves.
KSplit planSplits(int64_t k, int64_t blocks, int64_t minDepth, int64_t step, int64_t waves = 2,
                  int64_t maxDepth = INT64_MAX) {
  if (k <= 0)
    return {1, 0}; // nothing to sum: one split writes the bias
  // At most `waves` full waves: rounding up put 8 of DeepSeek-V3's 272 router
  // blocks at T = 1024 (264 slots) into a wave of their own.
  int64_t splits =
      std::clamp<int64_t>(waves * detail::kSMs / blocks, 1, std::max<int64_t>(1, k / minDepth));
  int64_t perSplit = std::min(maxDepth, ((k + splits - 1) / splits + step - 1) / step * step);
  return {(k + perSplit - 1) / perSplit, perSplit};
}

/// Many rows and few columns (Mixtral's router: 8 experts), not gated: a warp
/// per kSkinnyRows<COLUMNS> rows, each lane summing its quarter-K slices (16-byte
/// loads of the rows) for every column, then a shuffle reduction. The weights,
/// 8 x 4096 f32 = 128 KB, are staged into shared memory a 512-deep chunk at a
/// time for the block's 8 warps.
/// The warp-per-column kernel took 272 µs per call for Mixtral at T = 8192
/// (134 MB of rows: ~35 µs of copy). A first skinny kernel, each warp reading
/// the weights from L1 and L2 for its two rows, took 123-126 µs (0.12-0.18 ms
/// in a later profile); with four slices of the rows loaded ahead, 179 µs. This
/// one loads a chunk of its rows (4 rows x 512 columns per warp: 8 KB in
/// flight) before staging the weights, and reads the weights from shared
/// memory. The sums run in the same order as the first one's, so the same bits.
/// It starts at kSkinnyMinRows: at T = 1024 the warp-per-column kernel took
/// 29 µs against the first skinny kernel's 92, but against this one
/// (decode-front, Mixtral's router) 27.9 against 22.7 at T = 1024 and 52.2
/// against 24.4 at T = 2048 (level at 4096: 38.4).
template <int COLUMNS> constexpr int kSkinnyRows = 32 / COLUMNS; // 32 accumulators per lane
constexpr int kSkinnyChunk = 512;                                // K staged per step
constexpr int64_t kSkinnyMaxColumns = 16;
constexpr int64_t kSkinnyMinRows = 1024;
template <int COLUMNS>
__global__ void __launch_bounds__(kThreads)
    linearSkinnyKernel(const float *x, int64_t m, int64_t k, const float *w, int64_t n,
                       const float *bias, cpu::Epilogue epilogue, float *y) {
  device::awaitPrerequisites(); // a dependent launch
  constexpr int kRows = kSkinnyRows<COLUMNS>, kSlices = kSkinnyChunk / 128;
  __shared__ __align__(16) float4 weights[COLUMNS][kSkinnyChunk / 4];
  const int lane = threadIdx.x % 32;
  const int64_t first = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / 32 * kRows;
  const float4 zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  float acc[kRows][COLUMNS] = {}; // reduced over the warp at the end: in every lane
  for (int64_t k0 = 0; k0 < k; k0 += kSkinnyChunk) {
    // Lane l's columns of the chunk: k0 + 128 i + 4 l, for i < kSlices.
    float4 rows[kRows][kSlices];
#pragma unroll
    for (int r = 0; r < kRows; ++r)
#pragma unroll
      for (int i = 0; i < kSlices; ++i) {
        int64_t kk = k0 + 128 * i + 4 * lane;
        rows[r][i] = first + r < m && kk < k
                         ? __ldg(reinterpret_cast<const float4 *>(x + (first + r) * k + kk))
                         : zero;
      }
    __syncthreads(); // the previous chunk's weights are read
    for (int q = threadIdx.x; q < COLUMNS * kSkinnyChunk / 4; q += blockDim.x) {
      int c = q / (kSkinnyChunk / 4);
      int64_t kk = k0 + 4 * (q % (kSkinnyChunk / 4));
      weights[c][q % (kSkinnyChunk / 4)] =
          c < n && kk < k ? __ldg(reinterpret_cast<const float4 *>(w + c * k + kk)) : zero;
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kSlices; ++i)
#pragma unroll
      for (int c = 0; c < COLUMNS; ++c) {
        float4 wv = weights[c][32 * i + lane];
#pragma unroll
        for (int r = 0; r < kRows; ++r)
          acc[r][c] = fmaf(rows[r][i].w, wv.w,
                           fmaf(rows[r][i].z, wv.z,
                                fmaf(rows[r][i].y, wv.y, fmaf(rows[r][i].x, wv.x, acc[r][c]))));
      }
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int c = 0; c < COLUMNS; ++c)
#pragma unroll
      for (int offset = 16; offset > 0; offset /= 2)
        acc[r][c] += __shfl_xor_sync(0xffffffffu, acc[r][c], offset);
#pragma unroll
  for (int r = 0; r < kRows; ++r) // lane r * COLUMNS + c writes (row r, column c)
#pragma unroll
    for (int c = 0; c < COLUMNS; ++c)
      if (lane == r * COLUMNS + c && c < n && first + r < m) {
        float v = acc[r][c] + (bias ? bias[c] : 0.0f);
        y[(first + r) * n + c] =
            epilogue.enabled ? device::activate(epilogue.kind, epilogue.alpha, v) : v;
      }
}

/// Runs `launch(partial)`: with null when `splits` is 1 (the kernel writes y),
/// else with scratch for `splits` partial sums, which reduceSplits then adds in
/// a fixed order (with the bias and activation) into y.
template <typename Launch>
Status launchSplit(int64_t m, int64_t n, int64_t splits, const float *bias,
                   const cpu::Epilogue &epilogue, float *y, cudaStream_t stream, Launch &&launch) {
  detail::StreamScratch scratch(stream);
  float *partial = nullptr;
  if (splits > 1)
    MOEC_RETURN_IF_ERROR(scratch.allocate(static_cast<size_t>(splits * m * n), partial));
  MOEC_RETURN_IF_ERROR(launch(partial));
  if (!partial)
    return Status::ok();
  return detail::launchDependent(
      reduceSplits, dim3(detail::blocksFor(m * n, 256, 8 * detail::kSMs)), dim3(256), 0, stream,
      partial, static_cast<int>(splits), m, n, bias, epilogue, y);
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
  auto aligned = [](const void *p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  if (!gated && m <= kFewRows && k % 4 == 0 && aligned(x) && aligned(w)) {
    int64_t blocks = (n + kFewColumns - 1) / kFewColumns;
    if (blocks > INT32_MAX)
      return Status::error("linear: " + std::to_string(n) + " columns exceed the grid's limit");
    return detail::launchDependent(linearFewRowsKernel, dim3(static_cast<unsigned>(blocks)),
                                   dim3(kThreads), 0, stream, x, m, k, w, n, bias, epilogue, y);
  }
  if (!gated && m >= kSkinnyMinRows && n <= kSkinnyMaxColumns && k % 4 == 0 && aligned(x) &&
      aligned(w)) {
    auto blocks = [&](int rowsPerWarp) {
      return static_cast<unsigned>(
          detail::blocksFor((m + rowsPerWarp - 1) / rowsPerWarp * 32, kThreads, INT32_MAX));
    };
    if (n <= 8)
      return detail::launchDependent(linearSkinnyKernel<8>, dim3(blocks(kSkinnyRows<8>)),
                                     dim3(kThreads), 0, stream, x, m, k, w, n, bias, epilogue, y);
    return detail::launchDependent(linearSkinnyKernel<16>, dim3(blocks(kSkinnyRows<16>)),
                                   dim3(kThreads), 0, stream, x, m, k, w, n, bias, epilogue, y);
  }
#ifdef MOEC_HAVE_CUTLASS
  // From 1024 rows, CUTLASS's 3xTF32 GEMM: as accurate as f32 at any depth and
  // 27-35 % faster than the tiled kernel below (LinearCutlass.cu); below, the
  // tiled kernel was faster (Qwen3 at T = 128: 14.4 µs against 18.6).
  if (!gated && !epilogue.enabled && m >= kCutlassMinRows && n >= kTiledMinColumns &&
      detail::linearCutlassSupports(x, k, w, n, bias, y))
    return detail::linearCutlass(x, m, k, w, n, bias, y, stream);
#endif
  if (!gated && m >= kTiledMinRows && n >= kTiledMinColumns) {
    int64_t rowTiles = (m + kTileRows - 1) / kTileRows;
    if (rowTiles > 65535)
      return Status::error("linear: " + std::to_string(m) + " rows exceed the grid's limit");
    int64_t columnTiles = (n + kTileColumns - 1) / kTileColumns;
    // Splits as shallow as 64 (two pipeline stages, both loaded at once): a
    // tile's 3xTF32 step is ~48 serial mma.sync per warp, and a profile had
    // the 128-row routers (one tile, 11 splits of 33 steps) at 35-37 us for
    // gpt-oss, Qwen3 and DeepSeek-V3.
    // Each split at most kTiledMaxDepth deep: the tensor cores' adds into the
    // running sums truncate, about an ulp of the sum per mma, so the error grows
    // with a split's depth (LinearCutlass.cu).
    KSplit split = planSplits(k, columnTiles * rowTiles, 64, kTileK, 2, kTiledMaxDepth);
    MOEC_CUDA_TRY(cudaFuncSetAttribute(
        linearTiledKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kTiledSharedBytes));
    return launchSplit(m, n, split.splits, bias, epilogue, y, stream, [&](float *partial) {
      dim3 grid(static_cast<unsigned>(columnTiles), static_cast<unsigned>(rowTiles),
                static_cast<unsigned>(split.splits));
      return detail::launchDependent(linearTiledKernel, grid, dim3(kThreads), kTiledSharedBytes,
                                     stream, x, m, k, w, n, bias, epilogue, y, split.perSplit,
                                     partial);
    });
  }
  int64_t rowBlocks = (m + kRowsPerBlock - 1) / kRowsPerBlock;
  if (rowBlocks > 65535)
    return Status::error("linear: " + std::to_string(m) + " rows exceed the grid's limit");
  int64_t columnBlocks = (width + kColumnsPerBlock - 1) / kColumnsPerBlock;
  // Decode routers are a few blocks deep: split K (ungated; the gated epilogue
  // needs both halves' full sums), each split at least one staged chunk deep.
  // Four waves: each block's 8 warps wait out a staged chunk's loads between
  // short bursts of FMAs (DeepSeek-V3's router at T = 16, 32 column
  // blocks in 9 splits, took 31 us to read 7.3 MB). Measured with four, it
  // still took 31 us: that router is not limited by
  // the blocks in flight, and two waves would do as well.
  KSplit split = gated ? KSplit{1, k} : planSplits(k, columnBlocks * rowBlocks, kChunk, kChunk, 4);
  return launchSplit(m, n, split.splits, bias, epilogue, y, stream, [&](float *partial) {
    dim3 grid(static_cast<unsigned>(columnBlocks), static_cast<unsigned>(rowBlocks),
              static_cast<unsigned>(split.splits));
    return detail::launchDependent(linearKernel, grid, dim3(kThreads), 0, stream, x, m, k, w, n,
                                   bias, epilogue, width, y, split.perSplit, partial);
  });
}

} // namespace moec::rt::cuda
