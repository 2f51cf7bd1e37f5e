//===- GroupedMatmulMXFP4.cu - grouped matmul, MXFP4 weights, bf16 MMA -----===//
//
// moe.grouped_matmul with MXFP4 expert weights (moec/runtime/MXFP4.h: e2m1
// codes two a byte, one e8m0 scale per 32 along K) and f32 or bf16 rows
// (results f32 or bf16): W4A16. Hopper has no FP4 tensor cores, so the kernel
// streams the packed codes and their scales, dequantises them in registers to
// bf16 and multiplies on the bf16 tensor cores (mma.sync m16n8k16, f32
// accumulate). Decode is memory-bound: 0.53 bytes per weight (codes and
// scales) instead of bf16's 2.
//
// The tiling is the bf16 kernel's (ExpertTiles.cuh: 32·W weight rows by TOK
// rows of one expert per block, "swap AB", the expert's row tiles ranked on
// the device, idle experts read nothing, gate and up rows paired per warp for
// the epilogue in registers, sentinel rows never touched). A pipeline stage
// holds 256 codes of each weight row (128 bytes, the bf16 stage's shape, 4x
// the K), their 8 scale bytes, and the same 256 columns of the TOK rows.
//
// The dequantisation, per 32-bit word w of 8 codes (code i in nibble i):
// bf16 bits (mag << 6) | (sign << 15) hold code · 2^-126 exactly (the
// magnitude bits land in the exponent's two low bits and the mantissa's top
// bit; code 0.5 becomes a bf16 subnormal), so 4 instructions per pair of codes
// place codes i and i + 4 in the two halves of a bf16x2, and one bf16x2
// multiply by 2^(s - 1) (exact: a power of two) scales both. The MMA's K order
// is free as long as weights and rows agree: a thread's A fragment takes codes
// (i, i + 4) as one k pair, and its B fragment pairs the row's columns alike
// (a byte permute of the staged row).
//
//===----------------------------------------------------------------------===//

#include "ExpertTiles.cuh"
#include "GroupedMatmulMXFP4Wide.h"
#include "Tuning.h"
#include "moec/runtime/Cuda.h"
#include "moec/runtime/MXFP4.h"
#include "moec/runtime/cuda/MoEKernels.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>

namespace moec::rt::cuda {
namespace {

using namespace tiles;

constexpr int kTileK = 256;        // codes of each weight row per stage
constexpr int kTileBytes = 128;    // their bytes
constexpr int kStageBlocks = 8;    // their scale blocks (32 codes each)
constexpr int kScaleRowBytes = 16; // shared bytes per weight row's scales: three words and a pad

template <int WARPS> constexpr int weightTileBytes() { return weightRowsOf<WARPS> * kTileBytes; }
template <int WARPS> constexpr int scaleTileBytes() { return weightRowsOf<WARPS> * kScaleRowBytes; }
template <typename Lhs, int WARPS> constexpr int stageBytes(int tok) {
  return weightTileBytes<WARPS>() + scaleTileBytes<WARPS>() +
         tok * kTileK * static_cast<int>(sizeof(Lhs));
}

template <typename Lhs> struct Problem {
  Layout layout;
  const Lhs *lhs;          // f32 rows, or bf16 rows (BF16)
  const uint8_t *weights;  // [E, N] rows of rowBytes packed codes
  const uint8_t *scales;   // [E, N, kBlocks] scale bytes, 4-byte aligned
  int64_t rowBytes, kBlocks;
  const uint8_t *scalesEnd; // one past the last scale byte
};

/// 4 bytes global -> shared with `bytes` (0-4) of them read, the rest zero.
__device__ inline void copyAsync4Partial(void *shared, const void *global, int bytes) {
  unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(shared));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(global),
               "r"(bytes));
}

__device__ inline unsigned mulBF16x2(unsigned a, unsigned b) {
  unsigned d;
  asm("mul.rn.bf16x2 %0, %1, %2;\n" : "=r"(d) : "r"(a), "r"(b));
  return d;
}

/// A scale byte's multipliers as bf16x2: `first` = 2^(min(s, 128) - 1) (the
/// 2^126 that undoes the codes' placement, times 2^(s - 127)); `second`, for
/// s > 128 only (no bf16 holds 2^128), 2^(s - 128), or NaN for 0xFF.
struct Scale {
  unsigned first, second;
  bool large;
};
__device__ inline Scale scaleOf(unsigned s) {
  unsigned e = min(s, 128u) + 126u; // the exponent field of 2^(min(s, 128) - 1)
  Scale scale;
  scale.first = (e << 7) | (e << 23);
  scale.large = s > 128u;
  unsigned second = s == mxfp4::kScaleNaN ? 0x7FC0u : (s - 1u) << 7;
  scale.second = second | (second << 16);
  return scale;
}

/// The 8 codes of `w` as 4 bf16x2: pair[i] holds codes i (low half) and i + 4
/// (high half), times the scale.
__device__ inline void dequantise(unsigned w, const Scale &scale, unsigned (&pair)[4]) {
  constexpr unsigned kMagnitude = 0x01C001C0u, kSign = 0x80008000u;
  pair[0] = ((w << 6) & kMagnitude) | ((w << 12) & kSign);
  pair[1] = ((w << 2) & kMagnitude) | ((w << 8) & kSign);
  pair[2] = ((w >> 2) & kMagnitude) | ((w << 4) & kSign);
  pair[3] = ((w >> 6) & kMagnitude) | (w & kSign);
#pragma unroll
  for (int i = 0; i < 4; ++i)
    pair[i] = mulBF16x2(pair[i], scale.first);
  if (scale.large) {
#pragma unroll
    for (int i = 0; i < 4; ++i)
      pair[i] = mulBF16x2(pair[i], scale.second);
  }
}

/// The staged rows' 16-byte chunk `q` of row `token`, XOR-swizzled so that the
/// B-fragment reads (8 lanes: two rows, four threads 64 columns apart) hit 8
/// distinct 16-byte bank groups: bf16 rows (32 chunks each) flip q's low bits
/// by q / 8 and bit 2 by the row's parity; f32 rows (64 chunks) flip bits 1-2
/// by q / 16 and bit 0 by the parity.
template <typename Lhs> __device__ inline int rowChunk(int token, int q) {
  if constexpr (std::is_same_v<Lhs, BF16>)
    return token * 32 + (q ^ ((q >> 3) & 3) ^ ((token & 1) << 2));
  else
    return token * 64 + (q ^ (((q >> 4) & 3) << 1) ^ (token & 1));
}

/// B fragments for one word's two k-steps: columns e .. e + 7 of a staged row
/// (e = 8·word), paired as the weights are, (e, e + 4), (e + 1, e + 5) for the
/// first step and (e + 2, e + 6), (e + 3, e + 7) for the second.
__device__ inline void fragmentsB(const BF16 *rowsTile, int token, int e, unsigned (&b)[4]) {
  uint4 x = *reinterpret_cast<const uint4 *>(rowsTile + rowChunk<BF16>(token, e / 8) * 8);
  b[0] = __byte_perm(x.x, x.z, 0x5410);
  b[1] = __byte_perm(x.x, x.z, 0x7632);
  b[2] = __byte_perm(x.y, x.w, 0x5410);
  b[3] = __byte_perm(x.y, x.w, 0x7632);
}
__device__ inline void fragmentsB(const float *rowsTile, int token, int e, unsigned (&b)[4]) {
  float4 lo = *reinterpret_cast<const float4 *>(rowsTile + rowChunk<float>(token, e / 4) * 4);
  float4 hi = *reinterpret_cast<const float4 *>(rowsTile + rowChunk<float>(token, e / 4 + 1) * 4);
  b[0] = packBF16(lo.x, hi.x);
  b[1] = packBF16(lo.y, hi.y);
  b[2] = packBF16(lo.z, hi.z);
  b[3] = packBF16(lo.w, hi.w);
}

template <int TOK, int STAGES, int WARPS, typename Lhs>
__global__ void __launch_bounds__(threadsOf<WARPS>) groupedMatmulMXFP4Kernel(Problem<Lhs> problem) {
  constexpr int kBlockThreads = threadsOf<WARPS>;
  constexpr int kStageBytes = stageBytes<Lhs, WARPS>(TOK);
  constexpr int kScaleTile = weightTileBytes<WARPS>();
  constexpr int kRowsTile = kScaleTile + scaleTileBytes<WARPS>();
  const Layout &p = problem.layout;
  extern __shared__ __align__(128) unsigned char shared[];
  constexpr int kTokenTiles = TOK / 8;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  int64_t columnTile, expert, firstRow;
  int rows;
  if (!startTile<TOK, WARPS>(p, columnTile, expert, firstRow, rows))
    return;

  // Loads: 16-byte chunk tid % 8 of 8 weight rows, and the scale words of
  // weight row tid (as many threads as weight rows), per stage.
  const uint8_t *expertWeights = problem.weights + expert * p.n * problem.rowBytes;
  const uint8_t *weightRow[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    int64_t row = weightRowOf<WARPS>(p, columnTile, weightTileRowOfThread<WARPS>(i));
    weightRow[i] = row >= 0 ? expertWeights + row * problem.rowBytes : nullptr;
  }
  const int weightChunk = tid % 8;
  const uint8_t *scaleRow = nullptr; // the word-aligned start of row tid's scales
  {
    int64_t row = weightRowOf<WARPS>(p, columnTile, tid);
    if (row >= 0)
      scaleRow = problem.scales + (expert * p.n + row) * problem.kBlocks;
  }
  constexpr int kChunkElements = 16 / sizeof(Lhs);
  constexpr int kChunksPerRow = kTileK / kChunkElements;
  constexpr int kRowChunks = (TOK * kChunksPerRow + kBlockThreads - 1) / kBlockThreads;
  const Lhs *firstLhs = problem.lhs + firstRow * p.k;

  const int64_t kTiles = (problem.kBlocks + kStageBlocks - 1) / kStageBlocks;
  auto loadWeights = [&](int64_t kt, int stage) {
    unsigned char *base = shared + stage * kStageBytes;
    int64_t byte = kt * kTileBytes + weightChunk * 16;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      bool valid = weightRow[i] && byte < problem.rowBytes;
      copyAsync16(base + swizzled(weightTileRowOfThread<WARPS>(i), weightChunk),
                  valid ? weightRow[i] + byte : problem.weights, valid ? 16 : 0);
    }
    // The stage's 8 scale bytes of row tid lie in 3 aligned words; bytes past
    // the row (the next row's, or past the end: not read) are never used.
    // Rows past N get zeros.
    uintptr_t first =
        scaleRow ? reinterpret_cast<uintptr_t>(scaleRow + kt * kStageBlocks) & ~uintptr_t(3) : 0;
#pragma unroll
    for (int w = 0; w < 3; ++w) {
      const uint8_t *word = reinterpret_cast<const uint8_t *>(first) + 4 * w;
      int64_t left = scaleRow ? problem.scalesEnd - word : 0;
      int bytes = left >= 4 ? 4 : left > 0 ? static_cast<int>(left) : 0;
      copyAsync4Partial(base + kScaleTile + tid * kScaleRowBytes + 4 * w,
                        bytes ? word : problem.scales, bytes);
    }
  };
  auto loadRows = [&](int64_t kt, int stage) {
    unsigned char *base = shared + stage * kStageBytes;
    int64_t k0 = kt * kTileK;
    Lhs *rowsTile = reinterpret_cast<Lhs *>(base + kRowsTile);
    // Chunk q: row q / kChunksPerRow, chunk q % kChunksPerRow (computed here
    // rather than held: registers are the deep tiles' limit).
#pragma unroll
    for (int i = 0; i < kRowChunks; ++i) {
      int q = tid + i * kBlockThreads, token = q / kChunksPerRow, chunk = q % kChunksPerRow;
      if (token >= TOK)
        continue;
      int64_t kk = k0 + chunk * kChunkElements;
      bool valid = token < rows && kk < p.k;
      copyAsync16(rowsTile + rowChunk<Lhs>(token, chunk) * kChunkElements,
                  valid ? firstLhs + token * p.k + kk : problem.lhs, valid ? 16 : 0);
    }
  };

  // This thread's weight rows: m-tile `half`, rows lane / 4 and lane / 4 + 8;
  // the byte offset of each row's scales within its first word.
  const int group = lane / 4, quad = lane % 4;
  int tileRow[2][2], scaleOffset[2][2];
#pragma unroll
  for (int half = 0; half < 2; ++half)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      int v = warp * kRowsPerWarp + half * 16 + group + 8 * r;
      tileRow[half][r] = v;
      int64_t row = weightRowOf<WARPS>(p, columnTile, v);
      scaleOffset[half][r] =
          row >= 0 ? static_cast<int>(reinterpret_cast<uintptr_t>(
                                          problem.scales + (expert * p.n + row) * problem.kBlocks) &
                                      3)
                   : 0;
    }

  float acc[2][kTokenTiles][4] = {};
  auto compute = [&](int64_t kt, int stage) {
    const unsigned char *base = shared + stage * kStageBytes;
    const Lhs *rowsTile = reinterpret_cast<const Lhs *>(base + kRowsTile);
    // Thread quad takes chunks 2·quad and 2·quad + 1 of each row (64 codes,
    // two scale blocks), a word (8 codes, two k-steps) at a time.
    // (Deep tiles keep the two chunks apart: unrolled, their registers spill.)
#pragma unroll(TOK >= 32 ? 1 : 2)
    for (int j = 0; j < 2; ++j) {
      const int chunk = 2 * quad + j;
      const bool inRow = kt * kStageBlocks + chunk < problem.kBlocks;
      uint4 codes[2][2];
      Scale scale[2][2];
#pragma unroll
      for (int half = 0; half < 2; ++half)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          int v = tileRow[half][r];
          codes[half][r] = *reinterpret_cast<const uint4 *>(base + swizzled(v, chunk));
          unsigned s = base[kScaleTile + v * kScaleRowBytes + scaleOffset[half][r] + chunk];
          // Past the row's last block the codes are zero-filled and the scale
          // byte is another row's: any finite scale gives zero.
          scale[half][r] = scaleOf(inRow ? s : 127u);
        }
#pragma unroll
      for (int word = 0; word < 4; ++word) {
        unsigned pairs[2][2][4];
#pragma unroll
        for (int half = 0; half < 2; ++half)
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            const uint4 &c = codes[half][r];
            unsigned w = word == 0 ? c.x : word == 1 ? c.y : word == 2 ? c.z : c.w;
            dequantise(w, scale[half][r], pairs[half][r]);
          }
        const int e = 64 * quad + 32 * j + 8 * word; // the word's first column in the stage
#pragma unroll
        for (int t = 0; t < kTokenTiles; ++t) {
          unsigned b[4];
          fragmentsB(rowsTile, t * 8 + group, e, b);
#pragma unroll
          for (int step = 0; step < 2; ++step)
#pragma unroll
            for (int half = 0; half < 2; ++half) {
              const unsigned a[4] = {pairs[half][0][2 * step], pairs[half][1][2 * step],
                                     pairs[half][0][2 * step + 1], pairs[half][1][2 * step + 1]};
              mma16816(acc[half][t], a, b[2 * step], b[2 * step + 1]);
            }
        }
      }
    }
  };
  runTilePipeline<STAGES>(p, kTiles, loadWeights, loadRows, compute);
  storeOutputs<kTokenTiles, WARPS>(p, expert, columnTile, firstRow, rows, acc);
}

/// Stages of a TOK-row tile of WARPS warps: as many as fit `budget` bytes of
/// shared memory, at most 8.
template <typename Lhs, int TOK, int WARPS> constexpr int stagesWithin(int budget) {
  int stages = budget / stageBytes<Lhs, WARPS>(TOK);
  return stages > 8 ? 8 : stages;
}

template <int TOK, int STAGES, typename Lhs, int WARPS = kWarps>
Status launch(const Problem<Lhs> &problem, int64_t slots, cudaStream_t stream) {
  static_assert(STAGES >= 2, "the pipeline needs two stages");
  return launchTiles(groupedMatmulMXFP4Kernel<TOK, STAGES, WARPS, Lhs>, problem, slots, TOK,
                     STAGES * stageBytes<Lhs, WARPS>(TOK), "groupedMatmulMXFP4", stream, WARPS);
}

/// Dynamic shared memory for `blocks` blocks an SM: the SM's 228 KB less 1 KB
/// the runtime reserves per block, at most a block's 227 KB.
constexpr int sharedShare(int blocks) {
  int share = 228 * 1024 / blocks - 1024;
  return share > 227 * 1024 ? 227 * 1024 : share;
}
constexpr int kSharedBudget = sharedShare(1);

template <typename Lhs, typename Out>
Status groupedMatmulMXFP4Impl(const Lhs *lhs, int64_t slots, int64_t k, const uint8_t *weights,
                              const uint8_t *scales, int64_t experts, int64_t n,
                              const int32_t *offsets, const float *bias, const Epilogue &epilogue,
                              Out *out, cudaStream_t stream, MXFP4Tile tile, bool settledOffsets) {
  if (k <= 0 || k % 8 != 0)
    return Status::error("groupedMatmulMXFP4: K = " + std::to_string(k) +
                         " is not a positive multiple of 8 (16-byte row loads)");
  if (reinterpret_cast<uintptr_t>(weights) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(lhs) % 16 != 0 || reinterpret_cast<uintptr_t>(scales) % 4 != 0)
    return Status::error("groupedMatmulMXFP4: the weights or rows are not 16-byte aligned, or "
                         "the scales not 4-byte aligned");
  int64_t kBlocks = (k + mxfp4::kBlock - 1) / mxfp4::kBlock;
  Problem<Lhs> p{
      {}, lhs, weights, scales, mxfp4::packedRowBytes(k), kBlocks, scales + experts * n * kBlocks};
  bool empty = false;
  MOEC_RETURN_IF_ERROR(planLayout("groupedMatmulMXFP4", slots, k, experts, n, offsets, bias,
                                  epilogue, out, settledOffsets, p.layout, empty));
  if (empty)
    return Status::ok();
  bool gated = p.layout.gated();
  if (tile == MXFP4Tile::Auto)
    tile = chooseMXFP4Tile(slots, experts, k, n, gated);
  switch (tile) {
  case MXFP4Tile::DequantWgmma:
    return detail::groupedMatmulMXFP4Wide(lhs, slots, k, weights, scales, experts, n, offsets, bias,
                                          epilogue, p.layout.out, p.layout.outBF16, stream);
  // The decode tiles: 4-warp blocks deep (one an SM) or two an SM, 2-warp
  // blocks three an SM, 1-warp blocks five an SM.
  case MXFP4Tile::Tok8:
    return launch<8, stagesWithin<Lhs, 8, 4>(kSharedBudget)>(p, slots, stream);
  case MXFP4Tile::Tok8Twice:
    return launch<8, stagesWithin<Lhs, 8, 4>(sharedShare(2))>(p, slots, stream);
  case MXFP4Tile::Tok8Warps2:
    return launch<8, stagesWithin<Lhs, 8, 2>(sharedShare(3)), Lhs, 2>(p, slots, stream);
  case MXFP4Tile::Tok8Warps1:
    return launch<8, stagesWithin<Lhs, 8, 1>(sharedShare(5)), Lhs, 1>(p, slots, stream);
  case MXFP4Tile::Tok16:
    return launch<16, stagesWithin<Lhs, 16, 4>(sharedShare(2))>(p, slots, stream);
  case MXFP4Tile::Tok32:
    return launch<32, stagesWithin<Lhs, 32, 4>(kSharedBudget)>(p, slots, stream);
  case MXFP4Tile::Tok64:
  case MXFP4Tile::Auto:
    return launch<64, stagesWithin<Lhs, 64, 4>(kSharedBudget)>(p, slots, stream);
  }
  return Status::ok();
}

} // namespace

const char *mxfp4TileName(MXFP4Tile tile) {
  switch (tile) {
  case MXFP4Tile::Auto: return "auto";
  case MXFP4Tile::Tok8: return "mx-tok8";
  case MXFP4Tile::Tok8Twice: return "mx-tok8x2";
  case MXFP4Tile::Tok8Warps2: return "mx-tok8w2";
  case MXFP4Tile::Tok8Warps1: return "mx-tok8w1";
  case MXFP4Tile::Tok16: return "mx-tok16";
  case MXFP4Tile::Tok32: return "mx-tok32";
  case MXFP4Tile::Tok64: return "mx-tok64";
  case MXFP4Tile::DequantWgmma: return "mx-dequant-wgmma";
  }
  return "?";
}

MXFP4Tile chooseMXFP4Tile(int64_t slots, int64_t experts, int64_t k, int64_t n, bool gated) {
  // By the mean rows per touched expert, as measured on the H200
  // (bench/grouped_matmul.cpp, MOEC_BENCH_MXFP4; docs/performance.md): up to
  // 8 rows the 8-row tiles two 4-warp blocks an SM, ahead of every other
  // decode tile at every benchmark shape, thin grids included (Mixtral's down
  // at T = 1, 64 blocks: 73.6 us against 82.5 on 2-warp and 107.6 on 1-warp
  // blocks); 16-row tiles to 24 rows (Mixtral at T = 64, 16 rows: 491 against
  // 635 us on the 8-row tiles and 789 on the 32-row ones), 32-row tiles to 192
  // (Mixtral at T = 512, 146 rows: 3.40 against 3.65 ms), 64-row tiles beyond
  // (1-10 % ahead of 32 at T = 8192). The larger tiles
  // reuse each dequantised weight over more rows but stay issue-bound on the
  // B fragments and the MMAs (docs/performance.md, "MXFP4 experts").
  // From kMXFP4DequantMinRows rows the experts dequantised into bf16 and
  // multiplied by CUTLASS's wgmma GEMM (DequantWgmma), ahead of the 32- and
  // 64-row tiles from 64 rows on; at 32 rows level with them on f32 rows and
  // behind on the bf16 rows whole models pass (docs/performance.md).
  (void)gated;
  int64_t touched = std::max<int64_t>(1, std::min(experts, slots));
  int64_t rows = (slots + touched - 1) / touched;
  if (rows >= kMXFP4DequantMinRows && mxfp4DequantAvailable(k, n))
    return MXFP4Tile::DequantWgmma;
  if (rows <= 8)
    return MXFP4Tile::Tok8Twice;
  if (rows <= 24)
    return MXFP4Tile::Tok16;
  if (rows <= 192)
    return MXFP4Tile::Tok32;
  return MXFP4Tile::Tok64;
}

template <typename Lhs, typename Out>
Status groupedMatmulMXFP4(const Lhs *lhs, int64_t slots, int64_t k, const uint8_t *weights,
                          const uint8_t *scales, int64_t experts, int64_t n,
                          const int32_t *offsets, const float *bias, const Epilogue &epilogue,
                          Out *out, cudaStream_t stream, MXFP4Tile tile, bool settledOffsets) {
  return groupedMatmulMXFP4Impl(lhs, slots, k, weights, scales, experts, n, offsets, bias,
                                epilogue, out, stream, tile, settledOffsets);
}

template <typename Lhs, typename Out>
Status groupedMatmulMXFP4(const Lhs *lhs, int64_t slots, int64_t k, const uint8_t *weights,
                          const uint8_t *scales, int64_t experts, int64_t n,
                          const int32_t *offsets, const float *bias, const Epilogue &epilogue,
                          Out *out, cudaStream_t stream) {
  return groupedMatmulMXFP4Impl(lhs, slots, k, weights, scales, experts, n, offsets, bias,
                                epilogue, out, stream, MXFP4Tile::Auto, false);
}

template <typename Lhs, typename Out>
Status groupedMatmulMXFP4SettledOffsets(const Lhs *lhs, int64_t slots, int64_t k,
                                        const uint8_t *weights, const uint8_t *scales,
                                        int64_t experts, int64_t n, const int32_t *offsets,
                                        const float *bias, const Epilogue &epilogue, Out *out,
                                        cudaStream_t stream) {
  return groupedMatmulMXFP4Impl(lhs, slots, k, weights, scales, experts, n, offsets, bias,
                                epilogue, out, stream, MXFP4Tile::Auto, true);
}

// Every combination of f32 and bf16 rows and results.
#define MOEC_INSTANTIATE(LHS, OUT)                                                                 \
  template Status groupedMatmulMXFP4(const LHS *, int64_t, int64_t, const uint8_t *,              \
                                     const uint8_t *, int64_t, int64_t, const int32_t *,          \
                                     const float *, const Epilogue &, OUT *, cudaStream_t,        \
                                     MXFP4Tile, bool);                                             \
  template Status groupedMatmulMXFP4(const LHS *, int64_t, int64_t, const uint8_t *,              \
                                     const uint8_t *, int64_t, int64_t, const int32_t *,          \
                                     const float *, const Epilogue &, OUT *, cudaStream_t);       \
  template Status groupedMatmulMXFP4SettledOffsets(                                                \
      const LHS *, int64_t, int64_t, const uint8_t *, const uint8_t *, int64_t, int64_t,          \
      const int32_t *, const float *, const Epilogue &, OUT *, cudaStream_t);
MOEC_INSTANTIATE(float, float)
MOEC_INSTANTIATE(BF16, float)
MOEC_INSTANTIATE(float, BF16)
MOEC_INSTANTIATE(BF16, BF16)
#undef MOEC_INSTANTIATE

} // namespace moec::rt::cuda
