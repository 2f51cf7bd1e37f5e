//===- FP8DecodeTile.cuh - the FP8 grouped matmul's decode tile -*- CUDA -*-===//
//
// moe.grouped_matmul with e4m3 weights [E, N, K] (one f32 scale per 128x128
// block) and e4m3 rows (one scale per row and 128 columns) at a few rows per
// expert, where the call is a stream of the touched experts' weight bytes.
//
// The 8-row shared-memory tile (GroupedMatmulFP8.cu) streamed them at 30-48 %
// of copy at T = 1: each 128-deep stage fetched its scales from global memory
// inside its compute step, and a block of 128 weight rows left a decode grid
// of a few experts under one wave. These tiles have neither:
//
//  * The weights' bytes are the MMA's A fragments as they are (mma.sync
//    m16n8k32 e4m3, "swap AB": weights on M, tokens on N): lane (g, t) of a
//    warp reads 16 bytes of weight rows g and g + 8 of each of its two m16
//    tiles, at byte 16t of a 64-byte step, and those 16 bytes are the A
//    operand of two MMAs. The MMA's K order is free as long as the rows agree,
//    so the lane reads the same 16 bytes of token g's row as its B operand. No
//    ldmatrix, no barrier in the loop.
//  * Each lane's bytes wait in a ring of DEPTH steps, 2 KB a warp a step:
//    in registers (fp8DecodeKernel), or in shared memory of the lane's own,
//    filled by cp.async (fp8DecodeAsyncKernel: more bytes in flight, and no
//    lane reads another's, so no barrier either). The L2 may fetch 128 or 256
//    bytes around each weight load (PREFETCH). The scales of each 128-deep
//    block travel in a ring of registers beside (loaded with the block's first
//    step, applied after its second: the partial sums are promoted into the
//    f32 accumulators with the weight row's and the token's scales, as the
//    shared-memory tiles and DeepGEMM do).
//  * A block is RW warps of 32 weight rows times KS warps splitting K (128-deep
//    blocks dealt round-robin), reduced through shared memory at the end: small
//    blocks, many of them. The tiling is otherwise ExpertTiles.cuh's (row
//    tiles ranked on the device, gate and up rows paired per warp, the
//    epilogue in registers).
//
// With settled offsets the first steps' weights are requested before the
// dependent launch's wait, the rows after it. GroupedMatmulFP8.cu
// (launchDecode, launchDecodeAsync) says which configurations run where, and
// why; bench/fp8_decode.cu times them.
//
//===----------------------------------------------------------------------===//
#ifndef MOEC_RUNTIME_SRC_CUDA_FP8DECODETILE_CUH
#define MOEC_RUNTIME_SRC_CUDA_FP8DECODETILE_CUH

#include "ExpertTiles.cuh"

#include <cstdint>

namespace moec::rt::cuda {

/// An FP8 grouped matmul as its tile kernels see it.
struct FP8Problem {
  tiles::Layout layout;
  const uint8_t *lhs;
  const float *lhsScales;
  const uint8_t *weights;
  const float *weightScales;
};

// Each CUDA translation unit that launches these kernels registers its own
// instantiations (the runtime's, the kernel bench's): internal linkage.
namespace {
namespace fp8decode {

using namespace tiles;

constexpr int kBlockK = 128; // a scale block's depth
constexpr int kStepK = 64;   // bytes of each weight row per step

__device__ inline void mma16832(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 "
               "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/// 16 weight bytes, read once: not allocated in L1. PREFETCH: the L2 fetches
/// the surrounding 128 (1) or 256 (2) bytes with them.
template <int PREFETCH> __device__ inline uint4 loadWeights16(const uint8_t *p) {
  uint4 v;
  if constexpr (PREFETCH == 2)
    asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
  else if constexpr (PREFETCH == 1)
    asm volatile("ld.global.nc.L1::no_allocate.L2::128B.v4.u32 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
  else
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
  return v;
}
/// copyAsync16 with the L2 fetching the surrounding 128 (PREFETCH 1) or 256
/// (2) bytes.
template <int PREFETCH>
__device__ inline void copyAsync16Prefetch(void *shared, const void *global, int bytes) {
  unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(shared));
  if constexpr (PREFETCH == 2)
    asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16, %2;\n" ::"r"(dst),
                 "l"(global), "r"(bytes));
  else if constexpr (PREFETCH == 1)
    asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;\n" ::"r"(dst),
                 "l"(global), "r"(bytes));
  else
    copyAsync16(shared, global, bytes);
}
/// 16 bytes of a row the previous kernel wrote (read after the launch's wait).
__device__ inline uint4 loadRow16(const uint8_t *p) {
  uint4 v;
  asm volatile("ld.global.v4.u32 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}
__device__ inline unsigned loadWord(const uint8_t *p) {
  unsigned v;
  asm volatile("ld.global.u32 %0, [%1];\n" : "=r"(v) : "l"(p));
  return v;
}
__device__ inline float loadScale(const float *p) {
  float v;
  asm volatile("ld.global.f32 %0, [%1];\n" : "=f"(v) : "l"(p));
  return v;
}

/// 16 bytes at `p` + `kk` of a row `k` bytes long, zero past its end (null:
/// all zero). VEC16: k % 16 == 0, one 16-byte load; else four 4-byte ones.
template <bool VEC16, bool WEIGHTS, int PREFETCH = 0>
__device__ inline uint4 load16(const uint8_t *row, int64_t kk, int64_t k) {
  uint4 v{0u, 0u, 0u, 0u};
  if constexpr (VEC16) {
    if (row && kk < k)
      v = WEIGHTS ? loadWeights16<PREFETCH>(row + kk) : loadRow16(row + kk);
  } else {
    if (row) {
      if (kk < k)
        v.x = loadWord(row + kk);
      if (kk + 4 < k)
        v.y = loadWord(row + kk + 4);
      if (kk + 8 < k)
        v.z = loadWord(row + kk + 8);
      if (kk + 12 < k)
        v.w = loadWord(row + kk + 12);
    }
  }
  return v;
}

/// One step's operands of a lane: 16 bytes of weight rows g + 8r of m-tile
/// `half`, and 16 bytes of token 8·tt + g's row, all at the step's byte 16t.
template <int TT> struct Step {
  uint4 w[2][2];
  uint4 x[TT];
};
/// One 128-deep block's scales of a lane: its four weight rows' and the
/// tokens 8·tt + 2t + j of its accumulators.
template <int TT> struct BlockScales {
  float w[2][2];
  float t[TT][2];
};

/// What a lane of the decode tile reads and accumulates: its four weight rows
/// and their scale rows (null past N), its token rows and its accumulators'
/// tokens' scales (null past the expert's rows), and its warp's steps: two per
/// 128-deep block kPart, kPart + KS, ... (64 bytes of K each).
template <int TT, int RW, int KS> struct Lane {
  const uint8_t *weightRow[2][2];
  const float *expertScales;  // the expert's weight scales
  int scaleRow[2][2];         // the weight rows' offsets in them (-1 past N)
  const uint8_t *tokenRow[TT];
  const float *tokenScales[TT][2];
  int64_t k;
  int steps, kPart, t;
  float acc[2][TT][4], partial[2][TT][4];

  __device__ Lane(const FP8Problem &problem, int64_t columnTile, int64_t expert, int64_t firstRow,
                  int rows, int rowWarp, int kPart, int lane)
      : k(problem.layout.k), kPart(kPart), t(lane % 4) {
    const Layout &p = problem.layout;
    const int g = lane / 4;
    const int64_t kBlocks = (k + kBlockK - 1) / kBlockK;
    const int64_t nBlocks = (p.n + kBlockK - 1) / kBlockK;
    expertScales = problem.weightScales + expert * nBlocks * kBlocks;
#pragma unroll
    for (int half = 0; half < 2; ++half)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        int64_t row =
            weightRowOf<RW>(p, columnTile, rowWarp * kRowsPerWarp + half * 16 + g + 8 * r);
        weightRow[half][r] = row >= 0 ? problem.weights + (expert * p.n + row) * k : nullptr;
        scaleRow[half][r] = row >= 0 ? static_cast<int>(row / kBlockK * kBlocks) : -1;
      }
#pragma unroll
    for (int tt = 0; tt < TT; ++tt) {
      int token = tt * 8 + g;
      tokenRow[tt] = token < rows ? problem.lhs + (firstRow + token) * k : nullptr;
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        int scaled = tt * 8 + 2 * t + j;
        tokenScales[tt][j] =
            scaled < rows ? problem.lhsScales + (firstRow + scaled) * kBlocks : nullptr;
      }
    }
    steps = kPart < kBlocks ? static_cast<int>(2 * ((kBlocks - 1 - kPart) / KS + 1)) : 0;
#pragma unroll
    for (int half = 0; half < 2; ++half)
#pragma unroll
      for (int tt = 0; tt < TT; ++tt)
#pragma unroll
        for (int i = 0; i < 4; ++i)
          acc[half][tt][i] = partial[half][tt][i] = 0.0f;
  }

  __device__ int blockOf(int s) const { return kPart + KS * (s >> 1); }
  /// The lane's byte of step s in each row; K (nothing) past the last step.
  __device__ int64_t byteOf(int s) const {
    return s < steps ? int64_t(blockOf(s)) * kBlockK + (s & 1) * kStepK + 16 * t : k;
  }

  __device__ void loadWeightScales(BlockScales<TT> &scales, int s) const {
    bool valid = s < steps;
    int b = blockOf(s);
#pragma unroll
    for (int half = 0; half < 2; ++half)
#pragma unroll
      for (int r = 0; r < 2; ++r)
        scales.w[half][r] =
            valid && scaleRow[half][r] >= 0 ? loadScale(expertScales + scaleRow[half][r] + b) : 0.0f;
  }
  __device__ void loadTokenScales(BlockScales<TT> &scales, int s) const {
    bool valid = s < steps;
    int b = blockOf(s);
#pragma unroll
    for (int tt = 0; tt < TT; ++tt)
#pragma unroll
      for (int j = 0; j < 2; ++j)
        scales.t[tt][j] = valid && tokenScales[tt][j] ? loadScale(tokenScales[tt][j] + b) : 0.0f;
  }

  /// The step's four 32-deep MMAs per token tile into the partial sums.
  __device__ void compute(const Step<TT> &step) {
#pragma unroll
    for (int m = 0; m < 2; ++m) // the 16 bytes' two 32-deep MMAs
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const uint4 &lo = step.w[half][0], &hi = step.w[half][1];
        const unsigned a[4] = {m ? lo.z : lo.x, m ? hi.z : hi.x, m ? lo.w : lo.y,
                               m ? hi.w : hi.y};
#pragma unroll
        for (int tt = 0; tt < TT; ++tt) {
          const uint4 &x = step.x[tt];
          mma16832(partial[half][tt], a, m ? x.z : x.x, m ? x.w : x.y);
        }
      }
  }
  /// A block's partial sums into the accumulators, with its scales.
  __device__ void promote(const BlockScales<TT> &scales) {
#pragma unroll
    for (int half = 0; half < 2; ++half)
#pragma unroll
      for (int tt = 0; tt < TT; ++tt)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          acc[half][tt][i] += partial[half][tt][i] * scales.w[half][i >= 2] * scales.t[tt][i & 1];
          partial[half][tt][i] = 0.0f;
        }
  }
};

/// The end of either decode kernel: the K parts' sums added (in part order)
/// by warp kPart 0 of each row warp, which stores.
template <int TT, int RW, int KS>
__device__ void reduceAndStore(const Layout &p, Lane<TT, RW, KS> &lane, int64_t expert,
                               int64_t columnTile, int64_t firstRow, int rows, int rowWarp) {
  const int kPart = lane.kPart, laneIndex = threadIdx.x % 32;
  if constexpr (KS > 1) {
    __shared__ float reduce[KS - 1][RW][2 * TT * 4][32];
    if (kPart > 0) {
#pragma unroll
      for (int half = 0; half < 2; ++half)
#pragma unroll
        for (int tt = 0; tt < TT; ++tt)
#pragma unroll
          for (int i = 0; i < 4; ++i)
            reduce[kPart - 1][rowWarp][(half * TT + tt) * 4 + i][laneIndex] =
                lane.acc[half][tt][i];
    }
    __syncthreads();
    if (kPart > 0)
      return;
#pragma unroll
    for (int part = 0; part < KS - 1; ++part)
#pragma unroll
      for (int half = 0; half < 2; ++half)
#pragma unroll
        for (int tt = 0; tt < TT; ++tt)
#pragma unroll
          for (int i = 0; i < 4; ++i)
            lane.acc[half][tt][i] += reduce[part][rowWarp][(half * TT + tt) * 4 + i][laneIndex];
  }
  storeOutputs<TT, RW>(p, expert, columnTile, firstRow, rows, lane.acc, rowWarp);
}

/// The decode tile with its ring in registers: TOK rows of one expert by
/// 32·RW weight rows, K split over KS warps, DEPTH steps (even) a warp;
/// PREFETCH as for loadWeights16; MINWARPS (0: any) warps an SM at least,
/// registers capped to fit them.
template <int TOK, int RW, int KS, int DEPTH, bool VEC16, int PREFETCH, int MINWARPS>
__global__ void __launch_bounds__(32 * RW * KS, MINWARPS ? MINWARPS / (RW * KS) : 1)
    fp8DecodeKernel(FP8Problem problem) {
  static_assert(DEPTH % 2 == 0 && DEPTH >= 2, "a block's two steps share a scale slot");
  constexpr int TT = TOK / 8; // token tiles
  const Layout &p = problem.layout;
  const int warp = threadIdx.x / 32, rowWarp = warp % RW;
  int64_t columnTile, expert, firstRow;
  int rows;
  if (!startTile<TOK, RW * KS>(p, columnTile, expert, firstRow, rows))
    return;
  Lane<TT, RW, KS> lane(problem, columnTile, expert, firstRow, rows, rowWarp, warp / RW,
                        threadIdx.x % 32);
  const int64_t k = lane.k;
  const int steps = lane.steps;
  auto loadWeights = [&](Step<TT> &step, int s) {
    int64_t kk = lane.byteOf(s);
#pragma unroll
    for (int half = 0; half < 2; ++half)
#pragma unroll
      for (int r = 0; r < 2; ++r)
        step.w[half][r] = load16<VEC16, true, PREFETCH>(lane.weightRow[half][r], kk, k);
  };
  auto loadRows = [&](Step<TT> &step, int s) {
    int64_t kk = lane.byteOf(s);
#pragma unroll
    for (int tt = 0; tt < TT; ++tt)
      step.x[tt] = load16<VEC16, false>(lane.tokenRow[tt], kk, k);
  };

  Step<TT> ring[DEPTH];
  BlockScales<TT> scales[DEPTH / 2];
#pragma unroll
  for (int i = 0; i < DEPTH; ++i) {
    loadWeights(ring[i], i);
    if (i % 2 == 0)
      lane.loadWeightScales(scales[i / 2], i);
  }
  if (p.settledOffsets)
    device::awaitPrerequisites(); // the rows are the previous kernel's
#pragma unroll
  for (int i = 0; i < DEPTH; ++i) {
    loadRows(ring[i], i);
    if (i % 2 == 0)
      lane.loadTokenScales(scales[i / 2], i);
  }
  // Each step computes on its ring slot, then refills it DEPTH steps ahead (the
  // MMAs first: they wait for the slot's bytes, the refill needs its registers);
  // a block's scales are refilled once its second step has promoted them.
  for (int base = 0; base < steps; base += DEPTH) {
#pragma unroll
    for (int i = 0; i < DEPTH; ++i) {
      const int s = base + i;
      if (s >= steps) // steps and DEPTH are even: whole blocks
        break;
      lane.compute(ring[i]);
      if (i % 2 == 1)
        lane.promote(scales[i / 2]);
      loadWeights(ring[i], s + DEPTH);
      loadRows(ring[i], s + DEPTH);
      if (i % 2 == 1) {
        lane.loadWeightScales(scales[i / 2], s - 1 + DEPTH);
        lane.loadTokenScales(scales[i / 2], s - 1 + DEPTH);
      }
    }
  }
  reduceAndStore(p, lane, expert, columnTile, firstRow, rows, rowWarp);
}

/// Shared bytes of one step of a warp's ring in fp8DecodeAsyncKernel: the
/// lanes' 16 bytes of four weight rows, then of TT token rows, lane-major
/// (each 512-byte item read back by its lanes in four conflict-free phases).
template <int TT> __host__ __device__ constexpr int asyncStepBytes() { return (4 + TT) * 32 * 16; }

/// The decode tile with its ring in shared memory: the same lanes, steps and
/// MMAs, each lane's bytes copied by cp.async into a ring of DEPTH steps of
/// its own (so no lane reads another's bytes: no barrier in the loop), for
/// more bytes in flight than registers hold. The scales keep their ring in
/// registers.
template <int TOK, int RW, int KS, int DEPTH, bool VEC16, int PREFETCH>
__global__ void __launch_bounds__(32 * RW * KS) fp8DecodeAsyncKernel(FP8Problem problem) {
  static_assert(DEPTH % 2 == 0 && DEPTH >= 2, "a block's two steps share a scale slot");
  constexpr int TT = TOK / 8;
  constexpr int kStep = asyncStepBytes<TT>();
  const Layout &p = problem.layout;
  extern __shared__ __align__(128) unsigned char shared[];
  const int warp = threadIdx.x / 32, rowWarp = warp % RW;
  int64_t columnTile, expert, firstRow;
  int rows;
  if (!startTile<TOK, RW * KS>(p, columnTile, expert, firstRow, rows))
    return;
  Lane<TT, RW, KS> lane(problem, columnTile, expert, firstRow, rows, rowWarp, warp / RW,
                        threadIdx.x % 32);
  const int64_t k = lane.k;
  const int steps = lane.steps;
  unsigned char *ring = shared + warp * DEPTH * kStep + (threadIdx.x % 32) * 16;

  auto copy16 = [&](unsigned char *dst, const uint8_t *row, int64_t kk, const void *fallback) {
    if constexpr (VEC16) {
      bool valid = row && kk < k;
      copyAsync16Prefetch<PREFETCH>(dst, valid ? row + kk : fallback, valid ? 16 : 0);
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        bool valid = row && kk + 4 * j < k;
        copyAsync4(dst + 4 * j, valid ? row + kk + 4 * j : fallback, valid);
      }
    }
  };
  auto loadWeights = [&](int s, int stage) {
    int64_t kk = lane.byteOf(s);
#pragma unroll
    for (int half = 0; half < 2; ++half)
#pragma unroll
      for (int r = 0; r < 2; ++r)
        copy16(ring + stage * kStep + (half * 2 + r) * 512, lane.weightRow[half][r], kk,
               problem.weights);
  };
  auto loadRows = [&](int s, int stage) {
    int64_t kk = lane.byteOf(s);
#pragma unroll
    for (int tt = 0; tt < TT; ++tt)
      copy16(ring + stage * kStep + (4 + tt) * 512, lane.tokenRow[tt], kk, problem.lhs);
  };
  auto read = [&](int stage) {
    Step<TT> step;
    const unsigned char *src = ring + stage * kStep;
#pragma unroll
    for (int half = 0; half < 2; ++half)
#pragma unroll
      for (int r = 0; r < 2; ++r)
        step.w[half][r] = *reinterpret_cast<const uint4 *>(src + (half * 2 + r) * 512);
#pragma unroll
    for (int tt = 0; tt < TT; ++tt)
      step.x[tt] = *reinterpret_cast<const uint4 *>(src + (4 + tt) * 512);
    return step;
  };

  // The prologue's weights (steps 0 to DEPTH - 2) are one commit group,
  // requested before the dependent launch's wait; each step's rows one group
  // after it, so that waiting for all but the newest DEPTH - 2 groups at step
  // s finds its weights and rows complete.
  BlockScales<TT> scales[DEPTH / 2];
#pragma unroll
  for (int i = 0; i < DEPTH - 1; ++i) {
    loadWeights(i, i);
    if (i % 2 == 0)
      lane.loadWeightScales(scales[i / 2], i);
  }
  commitGroup();
  if (p.settledOffsets)
    device::awaitPrerequisites();
#pragma unroll
  for (int i = 0; i < DEPTH - 1; ++i) {
    loadRows(i, i);
    commitGroup();
    if (i % 2 == 0)
      lane.loadTokenScales(scales[i / 2], i);
  }
  for (int base = 0; base < steps; base += DEPTH) {
#pragma unroll
    for (int i = 0; i < DEPTH; ++i) {
      const int s = base + i;
      if (s >= steps)
        break;
      waitGroup<DEPTH - 2>();
      Step<TT> step = read(i);
      // Refill the stage of step s - 1 (its MMAs have consumed what it read).
      const int refill = (i + DEPTH - 1) % DEPTH;
      loadWeights(s + DEPTH - 1, refill);
      loadRows(s + DEPTH - 1, refill);
      commitGroup();
      lane.compute(step);
      if (i % 2 == 1) {
        lane.promote(scales[i / 2]);
        lane.loadWeightScales(scales[i / 2], s + DEPTH - 1);
        lane.loadTokenScales(scales[i / 2], s + DEPTH - 1);
      }
    }
  }
  waitGroup<0>();
  reduceAndStore(p, lane, expert, columnTile, firstRow, rows, rowWarp);
}

/// Launches the decode tile for `slots` rows (K % 4 == 0): its ring in
/// shared memory (ASYNC) or in registers (MINWARPS as for fp8DecodeKernel).
template <int TOK, int RW, int KS, int DEPTH, bool ASYNC = false, int PREFETCH = 0,
          int MINWARPS = 0>
Status launchDecodeTile(FP8Problem problem, int64_t slots, cudaStream_t stream) {
  int64_t blocks = 0;
  MOEC_RETURN_IF_ERROR(planGrid(problem.layout, slots, TOK, RW, "groupedMatmulFP8", blocks));
  const bool vec16 = problem.layout.k % 16 == 0;
  const dim3 grid(static_cast<unsigned>(blocks)), block(32 * RW * KS);
  if constexpr (ASYNC) {
    auto *kernel = vec16 ? fp8DecodeAsyncKernel<TOK, RW, KS, DEPTH, true, PREFETCH>
                         : fp8DecodeAsyncKernel<TOK, RW, KS, DEPTH, false, PREFETCH>;
    constexpr int kShared = RW * KS * DEPTH * asyncStepBytes<TOK / 8>();
    MOEC_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kShared));
    return detail::launchDependent(kernel, grid, block, kShared, stream, problem);
  } else {
    auto *kernel = vec16 ? fp8DecodeKernel<TOK, RW, KS, DEPTH, true, PREFETCH, MINWARPS>
                         : fp8DecodeKernel<TOK, RW, KS, DEPTH, false, PREFETCH, MINWARPS>;
    return detail::launchDependent(kernel, grid, block, 0, stream, problem);
  }
}

} // namespace fp8decode
} // namespace
} // namespace moec::rt::cuda

#endif // MOEC_RUNTIME_SRC_CUDA_FP8DECODETILE_CUH
