//===- GroupedMatmulBF16.cu - tensor-core grouped matmul, bf16 weights -----===//
//
// moe.grouped_matmul with bf16 expert weights [E, N, K] and f32 or bf16 rows
// (results f32 or bf16), on the tensor cores (mma.sync m16n8k16, bf16 in, f32
// accumulate), for any number of rows per expert: decode, where each touched
// expert's weights must be streamed once at the copy bandwidth, and prefill,
// where the same tiles reuse them.
//
// Why "swap AB": at decode an expert has 1-16 rows but thousands of weight rows,
// so the weights take the MMA's M side (16 per instruction) and the tokens its N
// side (8 per instruction); a block computes 128 weight rows x TOK tokens.
//
// Work decomposition, without a host synchronisation: the grid is sized for the
// worst case the host can bound (slots/TOK tiles plus one partial tile per
// touched expert); each block ranks the experts' row tiles from the offsets on
// the device and takes one, or exits. Blocks of idle experts read no weights.
//
// Gate/up fusion: when gated, a block's 128 weight rows are 64 gate rows and the
// 64 matching up rows (either layout), arranged so that each thread holds the
// gate and up accumulators of the same outputs and applies the epilogue in
// registers.
//
//===----------------------------------------------------------------------===//

#include "ExpertTiles.cuh"
#include "GridSize.h"
#include "GroupedMatmulCutlass.h"
#include "LinearBF16FewRows.h"
#include "Tuning.h"
#include "moec/runtime/Cuda.h"
#include "moec/runtime/cuda/MoEKernels.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <string>

namespace moec::rt::cuda {
namespace {

using namespace tiles;

constexpr int kTileK = 64;             // K per pipeline stage: 128-byte weight rows
constexpr int kRowStride = kTileK + 8; // elements; padded: B-fragment loads are conflict-free

/// Shared bytes of one pipeline stage of a WARPS-warp block: the weight tile
/// (bf16, 128-byte rows, swizzled) and TOK activation rows (f32 or bf16,
/// padded).
template <typename Lhs, int WARPS> constexpr int weightTileBytes() {
  return weightRowsOf<WARPS> * kTileK * 2;
}
template <typename Lhs, int WARPS> constexpr int stageBytes(int tok) {
  return weightTileBytes<Lhs, WARPS>() + tok * kRowStride * static_cast<int>(sizeof(Lhs));
}

/// The B fragment (rows k = 2c, 2c+1 and 2c+8, 2c+9 of token column lane/4) from
/// a staged row: f32 rows are rounded here, bf16 rows are taken as they are --
/// the same bits either way.
__device__ inline void fragmentB(const float *x, unsigned &b0, unsigned &b1) {
  float2 lo = *reinterpret_cast<const float2 *>(x);
  float2 hi = *reinterpret_cast<const float2 *>(x + 8);
  b0 = packBF16(lo.x, lo.y);
  b1 = packBF16(hi.x, hi.y);
}
__device__ inline void fragmentB(const BF16 *x, unsigned &b0, unsigned &b1) {
  b0 = *reinterpret_cast<const unsigned *>(x);
  b1 = *reinterpret_cast<const unsigned *>(x + 8);
}

template <typename Lhs> struct Problem {
  Layout layout;
  const Lhs *lhs; // f32 rows, or bf16 rows (BF16)
  const uint16_t *weights;
};

template <int TOK, int STAGES, int WARPS, typename Lhs>
__global__ void __launch_bounds__(threadsOf<WARPS>) groupedMatmulBF16Kernel(Problem<Lhs> problem) {
  constexpr int kBlockThreads = threadsOf<WARPS>;
  constexpr int kStageBytes = stageBytes<Lhs, WARPS>(TOK);
  constexpr int kWeightTileBytes = weightTileBytes<Lhs, WARPS>();
  const Layout &p = problem.layout;
  extern __shared__ __align__(128) unsigned char shared[];
  constexpr int kTokenTiles = TOK / 8;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  int64_t columnTile, expert, firstRow;
  int rows;
  if (!startTile<TOK, WARPS>(p, columnTile, expert, firstRow, rows))
    return;

  // This thread's share of each stage's loads: 8 weight chunks, and 16-byte
  // chunks of the TOK rows (4 f32 or 8 bf16 each; idle threads past the last).
  const uint16_t *weightRow[8];
  weightRowsOfThread<WARPS>(p, columnTile, problem.weights + expert * p.n * p.k, weightRow);
  const int weightChunk = tid % 8;
  constexpr int kChunkElements = 16 / sizeof(Lhs);
  constexpr int kChunksPerRow = kTileK / kChunkElements;
  constexpr int kRowChunks = (TOK * kChunksPerRow + kBlockThreads - 1) / kBlockThreads;
  const Lhs *tokenRow[kRowChunks];
  int tokenChunk[kRowChunks], tokenIndex[kRowChunks];
#pragma unroll
  for (int i = 0; i < kRowChunks; ++i) {
    int q = tid + i * kBlockThreads; // chunk q: token q / kChunksPerRow, chunk q % kChunksPerRow
    tokenIndex[i] = q / kChunksPerRow;
    tokenChunk[i] = q % kChunksPerRow;
    tokenRow[i] = tokenIndex[i] < rows ? problem.lhs + (firstRow + tokenIndex[i]) * p.k : nullptr;
  }

  const int64_t kTiles = (p.k + kTileK - 1) / kTileK;
  auto loadWeights = [&](int64_t kt, int stage) {
    unsigned char *base = shared + stage * kStageBytes;
    int64_t k0 = kt * kTileK;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      int64_t kk = k0 + weightChunk * 8;
      bool valid = weightRow[i] && kk < p.k;
      copyAsync16(base + swizzled(weightTileRowOfThread<WARPS>(i), weightChunk),
                  valid ? weightRow[i] + kk : problem.weights, valid ? 16 : 0);
    }
  };
  auto loadRows = [&](int64_t kt, int stage) {
    unsigned char *base = shared + stage * kStageBytes;
    int64_t k0 = kt * kTileK;
    Lhs *rowsTile = reinterpret_cast<Lhs *>(base + kWeightTileBytes);
#pragma unroll
    for (int i = 0; i < kRowChunks; ++i) {
      if (tokenIndex[i] >= TOK)
        continue;
      int64_t kk = k0 + tokenChunk[i] * kChunkElements;
      bool valid = tokenRow[i] && kk < p.k;
      copyAsync16(rowsTile + tokenIndex[i] * kRowStride + tokenChunk[i] * kChunkElements,
                  valid ? tokenRow[i] + kk : problem.lhs, valid ? 16 : 0);
    }
  };

  float acc[2][kTokenTiles][4] = {};
  auto compute = [&](int64_t, int stage) {
    const unsigned char *base = shared + stage * kStageBytes;
    const Lhs *rowsTile = reinterpret_cast<const Lhs *>(base + kWeightTileBytes);
#pragma unroll
    for (int ks = 0; ks < kTileK / 16; ++ks) {
      unsigned a[2][4];
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        int row = warp * kRowsPerWarp + half * 16 + lane % 16;
        loadMatrixX4(a[half], base + swizzled(row, ks * 2 + lane / 16));
      }
#pragma unroll
      for (int t = 0; t < kTokenTiles; ++t) {
        unsigned b0, b1;
        fragmentB(rowsTile + (t * 8 + lane / 4) * kRowStride + ks * 16 + 2 * (lane % 4), b0, b1);
        mma16816(acc[0][t], a[0], b0, b1);
        mma16816(acc[1][t], a[1], b0, b1);
      }
    }
  };
  runTilePipeline<STAGES>(p, kTiles, loadWeights, loadRows, compute);
  storeOutputs<kTokenTiles, WARPS>(p, expert, columnTile, firstRow, rows, acc);
}

/// K up to which the 8-row tile may take 4 stages (launch<8, 4>).
constexpr int64_t kShortDecodeK = 1024;
/// The 8-row tile's blocks with rows, as the host can estimate them: one row
/// tile per touched expert (min(experts, slots)) times the column tiles.
inline int64_t shortDecodeBlocks(int64_t slots, int64_t experts, int64_t width, bool gated) {
  int64_t columnsPerTile = gated ? kWeightRows / 2 : kWeightRows;
  return std::min(experts, slots) * ((width + columnsPerTile - 1) / columnsPerTile);
}

template <int TOK, int STAGES, typename Lhs, int WARPS = kWarps>
Status launch(const Problem<Lhs> &problem, int64_t slots, cudaStream_t stream) {
  return launchTiles(groupedMatmulBF16Kernel<TOK, STAGES, WARPS, Lhs>, problem, slots, TOK,
                     STAGES * stageBytes<Lhs, WARPS>(TOK), "groupedMatmulBF16", stream, WARPS);
}

/// groupedMatmulBF16 for f32 or bf16 rows (Lhs) and results (Out).
template <typename Lhs, typename Out>
Status groupedMatmulBF16Impl(const Lhs *lhs, int64_t slots, int64_t k, const uint16_t *weightsBF16,
                             int64_t experts, int64_t n, const int32_t *offsets, const float *bias,
                             const Epilogue &epilogue, Out *out, cudaStream_t stream, BF16Tile tile,
                             bool settledOffsets) {
  if (k % 8 != 0)
    return Status::error("groupedMatmulBF16: K = " + std::to_string(k) +
                         " is not a multiple of 8 (16-byte weight loads)");
  if (reinterpret_cast<uintptr_t>(weightsBF16) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(lhs) % 16 != 0)
    return Status::error("groupedMatmulBF16: the weights or rows are not 16-byte aligned");
  Problem<Lhs> p{{}, lhs, weightsBF16};
  bool empty = false;
  MOEC_RETURN_IF_ERROR(planLayout("groupedMatmulBF16", slots, k, experts, n, offsets, bias,
                                  epilogue, out, settledOffsets, p.layout, empty));
  if (empty)
    return Status::ok();
  bool gated = p.layout.gated();
  float *outF32 = p.layout.out;
  uint16_t *outBF16 = p.layout.outBF16;
  if (tile == BF16Tile::Auto) {
    tile = chooseBF16Tile(slots, experts, k, gated, bias != nullptr);
    if (isWgmmaTile(tile) && !detail::groupedMatmulCutlassSupports(k, n))
      tile = BF16Tile::Tok64;
  }
  switch (tile) {
  case BF16Tile::Wgmma:
  case BF16Tile::Wgmma128x256:
  case BF16Tile::Wgmma128x256C21:
  case BF16Tile::Wgmma128x256C12:
  case BF16Tile::Wgmma64x256:
#ifdef MOEC_HAVE_CUTLASS
  {
    // One of each pair is null, as for the results above.
    detail::CutlassRows rows(lhs);
    return detail::groupedMatmulCutlass(rows.f32, rows.bf16, slots, k, weightsBF16, experts, n,
                                        offsets, bias, epilogue, outF32, outBF16,
                                        detail::cutlassTileOf(tile), stream);
  }
#else
    return Status::error("groupedMatmulBF16: the wgmma tiles need a runtime built with CUTLASS");
#endif
  case BF16Tile::Tok8:
    // Short K over more than two waves of blocks (Qwen3's down at T = 16,
    // K = 768: 12 stages of 64 per block): 4 stages, 75 KB of shared memory,
    // so three blocks share an SM and one block's pipeline fill and drain run
    // under the others' streams. Eight stages (150 KB, one block per SM) keep
    // more bytes in flight where a wave or less of long-K blocks must stream
    // alone (decode at T = 1, Mixtral's K = 14336). The kernel bench had
    // Qwen3's down at 69 % of copy on 8-row tiles (88.9 µs at T = 16), 75 % on
    // the 6-stage 16-row ones; with 4 stages, 71.7 against 84.6 µs (81 % of
    // copy).
    //
    //
    // Two-warp blocks (64 weight rows, three per SM) where 4-warp ones would
    // take one full wave and a second at most half full, which the 2-warp
    // blocks fit into one (kernel bench: gpt-oss's gate/up at T = 1, 180
    // blocks, 52.4 -> 47.2 µs; Mixtral's down at T = 4, 160 blocks, 183 ->
    // 159). Elsewhere they were level, or up to 7 % slower (DeepSeek-V3's
    // gate/up at T = 1, 256 blocks; Mixtral's at T = 1, 448, was 1-2 % slower
    // and its call 4 % slower in the artifact).
    {
      int64_t blocks = shortDecodeBlocks(slots, experts, p.layout.width, gated);
      if (k <= kShortDecodeK && blocks >= 2 * detail::kSMs)
        return launch<8, 4>(p, slots, stream);
      if (blocks > detail::kSMs && 2 * blocks <= 3 * detail::kSMs)
        return launch<8, 8, Lhs, 2>(p, slots, stream);
      return launch<8, 8>(p, slots, stream);
    }
  case BF16Tile::Tok8Warps2:
    return launch<8, 8, Lhs, 2>(p, slots, stream);
  case BF16Tile::Tok16:
    return launch<16, 6>(p, slots, stream);
  case BF16Tile::Tok32:
    return launch<32, 4>(p, slots, stream);
  case BF16Tile::Tok64:
  case BF16Tile::Auto:
    return launch<64, 3>(p, slots, stream);
  }
  return Status::ok();
}

} // namespace

const char *bf16TileName(BF16Tile tile) {
  switch (tile) {
  case BF16Tile::Auto: return "auto";
  case BF16Tile::Tok8: return "tok8x8";
  case BF16Tile::Tok8Warps2:
    return "tok8x8w2";
  case BF16Tile::Tok16: return "tok16x6";
  case BF16Tile::Tok32: return "tok32x4";
  case BF16Tile::Tok64: return "tok64x3";
  case BF16Tile::Wgmma: return "wgmma128x128";
  case BF16Tile::Wgmma128x256: return "wgmma128x256";
  case BF16Tile::Wgmma128x256C21:
    return "wgmma128x256c21";
  case BF16Tile::Wgmma128x256C12:
    return "wgmma128x256c12";
  case BF16Tile::Wgmma64x256:
    return "wgmma64x256";
  }
  return "?";
}

BF16Tile chooseBF16Tile(int64_t slots, int64_t experts, int64_t k, bool gated, bool biased) {
  // By the mean rows per touched expert, slots / min(experts, slots), as
  // measured on the H200 (bench/grouped_matmul.cpp): 8-row tiles up to ~4 rows
  // (decode), 32-row tiles up to 16 (Qwen3 at T = 128: 7-12 % faster than 16),
  // and CUTLASS's cooperative 128x256 tiles from 32 rows. Without clusters
  // (CUTLASS rounds each expert's row tiles up to the cluster) they are 7-18 %
  // ahead of the 32- and 64-row tiles at T = 1024 for gpt-oss and DeepSeek-V3
  // on skewed routing (30 % for Qwen3), level with them for Mixtral at T = 128.
  // Below 32 rows, and without CUTLASS: 32-row tiles for down projections of up
  // to 32 rows with K <= 4096 (24-32 % faster than 64; Mixtral's K = 14336 is
  // 14 % slower), 64-row tiles for the rest. 32-row gate/up tiles at <= 32
  // rows, faster in the bench, were slower in the artifact
  // (ChooseBF16TileFollowsTheMeasurements). 64x256 pingpong tiles (half the
  // padding of an expert's last row tile, one warp group's epilogue under the
  // other's mainloop) for projections without a bias up to 1024 rows (down at
  // T = 8192: DeepSeek-V3 11 % and Qwen3 5 % faster, Mixtral's 2048 rows 7 %
  // slower; 2-5 % faster at T = 1024; gpt-oss's biased down 19 % slower) and
  // for gate/up below 64 rows (gpt-oss and DeepSeek-V3 at T = 1024: 4 % faster;
  // level to 2 % either way from 64 rows). Tried and dropped: from 128 to 1024
  // rows, each expert's whole 128-row tiles on the 128x256 tiles and its last
  // rows on 64x256 ones in a second launch (half the padding): 10-19 % slower
  // at T = 8192 (gpt-oss 4.65 against 3.92 ms), because the second kernel
  // streams every expert's weights again (4.2 GB for gpt-oss's gate/up), where
  // the last row tile of one kernel finds them in L2.
  int64_t touched = std::max<int64_t>(1, std::min(experts, slots));
  int64_t rows = (slots + touched - 1) / touched;
  if (rows <= 4)
    return BF16Tile::Tok8;
  if (rows <= 16)
    return BF16Tile::Tok32;
#ifdef MOEC_HAVE_CUTLASS
  if (rows >= kWgmmaMinRows) {
    bool pingpong = gated ? rows < 64 : !biased && rows <= 1024;
    return pingpong ? BF16Tile::Wgmma64x256 : BF16Tile::Wgmma128x256;
  }
#endif
  if (rows <= 32 && !gated && k <= 4096)
    return BF16Tile::Tok32;
  return BF16Tile::Tok64;
}

detail::CutlassTile detail::cutlassTileOf(BF16Tile tile) {
  switch (tile) {
  case BF16Tile::Wgmma: return CutlassTile::Pingpong128x128;
  case BF16Tile::Wgmma128x256C21: return CutlassTile::Cooperative128x256Cluster21;
  case BF16Tile::Wgmma128x256C12: return CutlassTile::Cooperative128x256Cluster12;
  case BF16Tile::Wgmma64x256: return CutlassTile::Pingpong64x256;
  default: return CutlassTile::Cooperative128x256;
  }
}

bool bf16TileAvailable(BF16Tile tile) {
#ifdef MOEC_HAVE_CUTLASS
  return true;
#else
  return !isWgmmaTile(tile);
#endif
}

template <typename Lhs, typename Out>
Status groupedMatmulBF16(const Lhs *lhs, int64_t slots, int64_t k, const uint16_t *weightsBF16,
                         int64_t experts, int64_t n, const int32_t *offsets, const float *bias,
                         const Epilogue &epilogue, Out *out, cudaStream_t stream, BF16Tile tile) {
  return groupedMatmulBF16Impl(lhs, slots, k, weightsBF16, experts, n, offsets, bias, epilogue, out,
                               stream, tile, false);
}

template <typename Lhs, typename Out>
Status groupedMatmulBF16SettledOffsets(const Lhs *lhs, int64_t slots, int64_t k,
                                       const uint16_t *weightsBF16, int64_t experts, int64_t n,
                                       const int32_t *offsets, const float *bias,
                                       const Epilogue &epilogue, Out *out, cudaStream_t stream,
                                       BF16Tile tile) {
  return groupedMatmulBF16Impl(lhs, slots, k, weightsBF16, experts, n, offsets, bias, epilogue, out,
                               stream, tile, true);
}

template <typename Lhs, typename Out>
Status groupedMatmulBF16(const Lhs *lhs, int64_t slots, int64_t k, const uint16_t *weightsBF16,
                         int64_t experts, int64_t n, const int32_t *offsets, const float *bias,
                         const Epilogue &epilogue, Out *out, cudaStream_t stream) {
  return groupedMatmulBF16Impl(lhs, slots, k, weightsBF16, experts, n, offsets, bias, epilogue, out,
                               stream, BF16Tile::Auto, false);
}

template <typename Lhs, typename Out>
Status groupedMatmulBF16SettledOffsets(const Lhs *lhs, int64_t slots, int64_t k,
                                       const uint16_t *weightsBF16, int64_t experts, int64_t n,
                                       const int32_t *offsets, const float *bias,
                                       const Epilogue &epilogue, Out *out, cudaStream_t stream) {
  return groupedMatmulBF16Impl(lhs, slots, k, weightsBF16, experts, n, offsets, bias, epilogue, out,
                               stream, BF16Tile::Auto, true);
}

template <typename Lhs, typename Out>
Status linearBF16(const Lhs *x, int64_t m, int64_t k, const uint16_t *weightBF16, int64_t n,
                  const float *bias, const Epilogue &epilogue, Out *y, cudaStream_t stream) {
  // Decode: the few-rows kernel, whose grid fills the SMs for any N by
  // splitting K (LinearBF16FewRows.cu). Above: one expert whose rows are all m.
  if (m <= detail::kLinearBF16FewRowsMax)
    return detail::linearBF16FewRows(x, m, k, weightBF16, n, bias, epilogue, y, stream);
  return groupedMatmulBF16Impl(x, m, k, weightBF16, 1, n, nullptr, bias, epilogue, y, stream,
                               BF16Tile::Auto, false);
}

template <typename Lhs, typename Out>
Status linearBF16Siblings(const Lhs *x, int64_t m, int64_t k, int count,
                          const uint16_t *const *weightsBF16, const int64_t *n,
                          const float *const *biases, Out *const *ys, cudaStream_t stream) {
  // Decode: one launch for all of them. Above, each is compute-bound on its
  // own tiles, so they run one after the other.
  if (m <= detail::kLinearBF16FewRowsMax)
    return detail::linearBF16FewRowsSiblings(x, m, k, count, weightsBF16, n, biases, ys, stream);
  for (int s = 0; s < count; ++s)
    MOEC_RETURN_IF_ERROR(linearBF16(x, m, k, weightsBF16[s], n[s], biases ? biases[s] : nullptr,
                                    Epilogue{}, ys[s], stream));
  return Status::ok();
}

// Every combination of f32 and bf16 rows and results.
#define MOEC_INSTANTIATE(LHS, OUT)                                                                 \
  template Status groupedMatmulBF16(const LHS *, int64_t, int64_t, const uint16_t *, int64_t,      \
                                    int64_t, const int32_t *, const float *, const Epilogue &,     \
                                    OUT *, cudaStream_t, BF16Tile);                                \
  template Status groupedMatmulBF16SettledOffsets(                                                 \
      const LHS *, int64_t, int64_t, const uint16_t *, int64_t, int64_t, const int32_t *,          \
      const float *, const Epilogue &, OUT *, cudaStream_t, BF16Tile);                             \
  template Status groupedMatmulBF16(const LHS *, int64_t, int64_t, const uint16_t *, int64_t,      \
                                    int64_t, const int32_t *, const float *, const Epilogue &,     \
                                    OUT *, cudaStream_t);                                          \
  template Status groupedMatmulBF16SettledOffsets(                                                 \
      const LHS *, int64_t, int64_t, const uint16_t *, int64_t, int64_t, const int32_t *,          \
      const float *, const Epilogue &, OUT *, cudaStream_t);                                       \
  template Status linearBF16(const LHS *, int64_t, int64_t, const uint16_t *, int64_t,             \
                             const float *, const Epilogue &, OUT *, cudaStream_t);              \
  template Status linearBF16Siblings(const LHS *, int64_t, int64_t, int, const uint16_t *const *,  \
                                     const int64_t *, const float *const *, OUT *const *,          \
                                     cudaStream_t);
MOEC_INSTANTIATE(float, float)
MOEC_INSTANTIATE(BF16, float)
MOEC_INSTANTIATE(float, BF16)
MOEC_INSTANTIATE(BF16, BF16)
#undef MOEC_INSTANTIATE

} // namespace moec::rt::cuda
