//===- GroupedMatmulFP8.cu - FP8 e4m3 grouped matmul and quantisation -----===//
//
// moe.grouped_matmul with e4m3 weights [E, N, K] (one f32 dequantisation scale
// per 128x128 block) and e4m3 rows [S, K] (one scale per row and 128 columns,
// from quantizeE4M3 below), on the tensor cores: mma.sync m16n8k32 e4m3 x e4m3
// -> f32 (sm_89+). The tiling is the bf16 kernel's (ExpertTiles.cuh). A
// pipeline stage is one 128-wide K block, so the block's partial sums are
// promoted into the f32 accumulators with the weight row's and the token's
// scales once per stage, as DeepGEMM does. Weights stream at 1 byte per
// element: half the bf16 bytes at decode.
//
// K % 16 == 0 loads 16-byte chunks; other K (a multiple of 4) 4-byte ones.
//
//===----------------------------------------------------------------------===//

#include "E4M3.cuh"
#include "ExpertTiles.cuh"
#include "FP8DecodeTile.cuh"
#include "GridSize.h"
#include "GroupedMatmulCutlass.h"
#include "InvertPermutation.h"
#include "StreamScratch.h"
#include "Tuning.h"
#include "moec/runtime/Cuda.h"
#include "moec/runtime/cuda/MoEKernels.h"

#include <cuda_fp8.h>

#include <algorithm>
#include <cstdint>
#include <string>

namespace moec::rt::cuda {
namespace detail {
/// The CUTLASS configuration of a wgmma FP8Tile.
inline FP8CutlassTile fp8CutlassTile(FP8Tile tile) {
  return tile == FP8Tile::WgmmaPingpong ? FP8CutlassTile::Pingpong64x128
                                        : FP8CutlassTile::Cooperative128x128;
}
} // namespace detail

namespace {

using namespace tiles;

constexpr int kBlockK = 128;            // K per stage: one scale block, 128-byte rows
constexpr int kRowStride = kBlockK + 16; // activation rows padded: B loads conflict-free

constexpr int stageBytes(int tok) { return kWeightRows * kBlockK + tok * kRowStride; }

__device__ inline void mma16832(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 "
               "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

using Problem = FP8Problem;

/// One 16-byte chunk of a row, as one 16-byte or four 4-byte async copies,
/// zero-filled past `valid` bytes.
template <bool VEC16>
__device__ inline void copyChunk(unsigned char *dst, const uint8_t *src, int64_t valid,
                                 const void *fallback) {
  if constexpr (VEC16) {
    copyAsync16(dst, valid > 0 ? src : fallback, valid >= 16 ? 16 : (valid > 0 ? valid : 0));
  } else {
#pragma unroll
    for (int j = 0; j < 4; ++j)
      copyAsync4(dst + 4 * j, valid > 4 * j ? src + 4 * j : fallback, valid > 4 * j);
  }
}

template <int TOK, int STAGES, bool VEC16>
__global__ void __launch_bounds__(kThreads)
groupedMatmulFP8Kernel(Problem problem) {
  const Layout &p = problem.layout;
  extern __shared__ __align__(128) unsigned char shared[];
  constexpr int kTokenTiles = TOK / 8;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  int64_t columnTile, expert, firstRow;
  int rows;
  if (!startTile<TOK>(p, columnTile, expert, firstRow, rows))
    return;
  const int64_t kBlocks = (p.k + kBlockK - 1) / kBlockK;
  const int64_t nBlocks = (p.n + kBlockK - 1) / kBlockK;

  const uint8_t *weightRow[8];
  weightRowsOfThread(p, columnTile, problem.weights + expert * p.n * p.k, weightRow);
  const int weightChunk = tid % 8;
  constexpr int kRowChunks = (TOK * 8 + kThreads - 1) / kThreads; // 16-byte chunks per thread
  const uint8_t *tokenRow[kRowChunks];
  int tokenChunk[kRowChunks], tokenIndex[kRowChunks];
#pragma unroll
  for (int i = 0; i < kRowChunks; ++i) {
    int q = tid + i * kThreads; // chunk q: token q / 8, chunk q % 8
    tokenIndex[i] = q / 8;
    tokenChunk[i] = q % 8;
    tokenRow[i] = q < TOK * 8 && tokenIndex[i] < rows
                      ? problem.lhs + (firstRow + tokenIndex[i]) * p.k
                      : nullptr;
  }
  // The scales this thread applies: its 4 weight rows' N blocks, its tokens.
  int64_t scaleRow[2][2]; // [i >= 2][half]: row of weightScales (or -1)
#pragma unroll
  for (int hi = 0; hi < 2; ++hi)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      int64_t row = weightRowOf(p, columnTile, warp * kRowsPerWarp + half * 16 + lane / 4 + 8 * hi);
      scaleRow[hi][half] = row >= 0 ? (expert * nBlocks + row / kBlockK) * kBlocks : -1;
    }

  auto loadWeights = [&](int64_t kb, int stage) {
    unsigned char *base = shared + stage * stageBytes(TOK);
    int64_t k0 = kb * kBlockK;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      int64_t kk = k0 + weightChunk * 16;
      int64_t valid = weightRow[i] ? p.k - kk : 0;
      copyChunk<VEC16>(base + swizzled(tid / 8 + 16 * i, weightChunk),
                       weightRow[i] ? weightRow[i] + kk : nullptr, valid, problem.weights);
    }
  };
  auto loadRows = [&](int64_t kb, int stage) {
    unsigned char *base = shared + stage * stageBytes(TOK);
    int64_t k0 = kb * kBlockK;
    unsigned char *rowsTile = base + kWeightRows * kBlockK;
#pragma unroll
    for (int i = 0; i < kRowChunks; ++i) {
      if (tid + i * kThreads >= TOK * 8)
        break;
      int64_t kk = k0 + tokenChunk[i] * 16;
      int64_t valid = tokenRow[i] ? p.k - kk : 0;
      copyChunk<VEC16>(rowsTile + tokenIndex[i] * kRowStride + tokenChunk[i] * 16,
                       tokenRow[i] ? tokenRow[i] + kk : nullptr, valid, problem.lhs);
    }
  };

  float acc[2][kTokenTiles][4] = {};
  auto compute = [&](int64_t kb, int stage) {
    // The scales of this K block, fetched before the MMAs hide their latency.
    float weightScale[2][2], tokenScale[kTokenTiles][2];
#pragma unroll
    for (int hi = 0; hi < 2; ++hi)
#pragma unroll
      for (int half = 0; half < 2; ++half)
        weightScale[hi][half] =
            scaleRow[hi][half] >= 0 ? __ldg(problem.weightScales + scaleRow[hi][half] + kb) : 0.0f;
#pragma unroll
    for (int t = 0; t < kTokenTiles; ++t)
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        int token = t * 8 + 2 * (lane % 4) + j;
        tokenScale[t][j] =
            token < rows ? __ldg(problem.lhsScales + (firstRow + token) * kBlocks + kb) : 0.0f;
      }

    const unsigned char *base = shared + stage * stageBytes(TOK);
    const unsigned char *rowsTile = base + kWeightRows * kBlockK;
    float partial[2][kTokenTiles][4] = {};
#pragma unroll
    for (int ks = 0; ks < kBlockK / 32; ++ks) {
      unsigned a[2][4];
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        int row = warp * kRowsPerWarp + half * 16 + lane % 16;
        loadMatrixX4(a[half], base + swizzled(row, ks * 2 + lane / 16));
      }
#pragma unroll
      for (int t = 0; t < kTokenTiles; ++t) {
        const unsigned char *x = rowsTile + (t * 8 + lane / 4) * kRowStride + ks * 32 + 4 * (lane % 4);
        unsigned b0 = *reinterpret_cast<const unsigned *>(x);
        unsigned b1 = *reinterpret_cast<const unsigned *>(x + 16);
        mma16832(partial[0][t], a[0], b0, b1);
        mma16832(partial[1][t], a[1], b0, b1);
      }
    }
    // Promote: acc += partial * weight scale (row's N block) * token scale.
#pragma unroll
    for (int half = 0; half < 2; ++half)
#pragma unroll
      for (int t = 0; t < kTokenTiles; ++t)
#pragma unroll
        for (int i = 0; i < 4; ++i)
          acc[half][t][i] += partial[half][t][i] * weightScale[i >= 2][half] * tokenScale[t][i & 1];
  };
  runTilePipeline<STAGES>(p, kBlocks, loadWeights, loadRows, compute);
  storeOutputs<kTokenTiles>(p, expert, columnTile, firstRow, rows, acc);
}

template <int TOK, int STAGES>
Status launch(const Problem &problem, int64_t slots, cudaStream_t stream) {
  auto *kernel = problem.layout.k % 16 == 0 ? groupedMatmulFP8Kernel<TOK, STAGES, true>
                                            : groupedMatmulFP8Kernel<TOK, STAGES, false>;
  return launchTiles(kernel, problem, slots, TOK, STAGES * stageBytes(TOK), "groupedMatmulFP8",
                     stream);
}

/// The decode tiles (FP8DecodeTile.cuh), as measured on the H200
/// (bench/fp8_decode.cu; bench/results/h200-fp8-decode.txt, its "pdl" column:
/// graphs of launches with settled offsets, as artifacts run them). Blocks of
/// one warp of 32 weight rows; the L2 fetching 128 bytes per weight load (3-16
/// % faster than without at every T = 1 shape: Mixtral's down 48.2 -> 40.5
/// µs). K split over 4 warps from kDecodeSplit4MinBlocks blocks of 128, and
/// from 16 where the grid has few blocks (fewer than 3 K-split-2 warps an SM:
/// gpt-oss's down at T = 1, 11.3 against 13.7 µs; Qwen3's gate/up 8.1 against
/// 8.7); over 2 below (fewer, longer streams per warp where K is short:
/// Qwen3's down, K = 768, 5.0 against 6.9 µs at T = 1, 16.7 against 23.4 at
/// T = 4; DeepSeek-V3's, 31.7 against 36.5). The shared-memory rings
/// (Decode8Async: 4 steps, 6 where K is split 4 ways from 32 blocks) keep more
/// bytes in flight than registers do: 6-62 % faster at T = 1 on the same split
/// (Qwen3's down 5.0 against 8.1 µs, Mixtral's gate/up 62.0 against 72.8);
/// the register rings (Decode8: 4 steps) where a long K meets few blocks
/// (Mixtral's down at T = 1, 256 blocks: 32.5 against 33.8 µs, and 39.9
/// against 47.5 with the L2 flushed). Tried and slower or level: two or
/// four row warps a block, splits of 1 and 8, rings of 2 or 6 steps in
/// registers and of 8 in shared memory, registers capped for 12 warps an SM,
/// a 256-byte L2 fetch.
constexpr int64_t kDecodeSplit4MinBlocks = 32;
constexpr int64_t kDecodeFewBlocksSplit4MinBlocks = 16;
Status launchDecode(const Problem &p, int64_t slots, cudaStream_t stream) {
  if ((p.layout.k + 127) / 128 >= kDecodeSplit4MinBlocks)
    return fp8decode::launchDecodeTile<8, 1, 4, 4, false, 1>(p, slots, stream);
  return fp8decode::launchDecodeTile<8, 1, 2, 4, false, 1>(p, slots, stream);
}
Status launchDecodeAsync(const Problem &p, int64_t slots, cudaStream_t stream) {
  const Layout &l = p.layout;
  int64_t kBlocks = (l.k + 127) / 128;
  if (kBlocks >= kDecodeSplit4MinBlocks)
    return fp8decode::launchDecodeTile<8, 1, 4, 6, true, 1>(p, slots, stream);
  // The blocks with rows, one per touched expert and column tile of 32 rows.
  int64_t columns = l.gated() ? kRowsPerWarp / 2 : kRowsPerWarp;
  int64_t blocks = std::min(l.experts, slots) * ((l.width + columns - 1) / columns);
  if (kBlocks >= kDecodeFewBlocksSplit4MinBlocks && 2 * blocks < 6 * detail::kSMs)
    return fp8decode::launchDecodeTile<8, 1, 4, 4, true, 1>(p, slots, stream);
  return fp8decode::launchDecodeTile<8, 1, 2, 4, true, 1>(p, slots, stream);
}

/// The e4m3 scale of row[first, last) (a 128-column group), computed by one
/// warp: amax / 448 by shuffles (1e-12 at least; NaN if any element is NaN).
__device__ inline float groupScale(const float *row, int64_t first, int64_t last, int lane) {
  float amax = 0.0f;
  bool nan = false;
  for (int64_t i = first + lane; i < last; i += 32) {
    float v = row[i];
    nan |= isnan(v);
    amax = fmaxf(amax, fabsf(v));
  }
  return device::warpE4M3Scale(amax, nan);
}

/// One 128-column group [first, last) of `row` quantised by one warp with 16-byte
/// loads (K % 4 == 0, so 16-byte aligned rows): lane l holds columns first + 4l
/// to first + 4l + 3, reads them once, and returns their four codes in one word
/// (`active`: the columns are inside the group). groupScale's and E4M3Encoder's
/// arithmetic, so the same codes and scale. Element-wise kernels, which read
/// each value twice and stored bytes, at about a quarter of the copy bandwidth
/// (Mixtral's gate/up result at T = 8192: 1.0 ms), were replaced by it.
struct GroupCodes4 {
  float scale;
  uint32_t codes;
  bool active;
};
__device__ inline GroupCodes4 quantizeGroup4(const float *row, int64_t first, int64_t last,
                                             int lane) {
  int64_t i = first + 4 * lane;
  GroupCodes4 out{0.0f, 0u, i < last};
  float4 v = out.active ? *reinterpret_cast<const float4 *>(row + i) : float4{0, 0, 0, 0};
  bool nan = isnan(v.x) || isnan(v.y) || isnan(v.z) || isnan(v.w);
  float amax = fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w)));
  const device::E4M3Encoder encode(device::warpE4M3Scale(amax, nan));
  out.scale = encode.scale();
  out.codes = encode.encode4(v.x, v.y, v.z, v.w);
  return out;
}

/// Group g of `row` (columns [128g, 128g + 128) of k) quantised by one warp --
/// 16-byte loads when K % 4 == 0 (16-byte aligned rows), else element by element,
/// the same codes either way -- and its scale and codes written to row
/// destination(s) of `scales` and `q` for each s < count where that is >= 0.
template <typename Destination>
__device__ void quantizeGroupTo(const float *row, int64_t k, int64_t g, int lane, uint8_t *q,
                                float *scales, int64_t count, Destination destination) {
  int64_t groups = (k + kBlockK - 1) / kBlockK;
  int64_t first = g * kBlockK, last = first + kBlockK < k ? first + kBlockK : k;
  if (k % 4 == 0) {
    GroupCodes4 c = quantizeGroup4(row, first, last, lane);
    for (int64_t s = 0; s < count; ++s)
      if (int64_t d = destination(s); d >= 0) {
        if (lane == 0)
          scales[d * groups + g] = c.scale;
        if (c.active)
          *reinterpret_cast<uint32_t *>(q + d * k + first + 4 * lane) = c.codes;
      }
    return;
  }
  const device::E4M3Encoder encode(groupScale(row, first, last, lane));
  if (lane == 0)
    for (int64_t s = 0; s < count; ++s)
      if (int64_t d = destination(s); d >= 0)
        scales[d * groups + g] = encode.scale();
  for (int64_t i = first + lane; i < last; i += 32) {
    uint8_t code = encode(row[i]);
    for (int64_t s = 0; s < count; ++s)
      if (int64_t d = destination(s); d >= 0)
        q[d * k + i] = code;
  }
}

/// One warp per (row, 128-column group): amax by shuffles, then the scale and
/// the e4m3 codes (E4M3Encoder: each quotient rounded once, as on the CPU). Row r
/// is x's row r, or with a permutation (moe.permute fused in) row
/// permutation[r] / topK of the hidden states.
__global__ void quantizeE4M3Kernel(const float *x, int64_t slots, int64_t k,
                                   const int32_t *validRows, const int32_t *permutation,
                                   int64_t topK, uint8_t *q, float *scales) {
  device::awaitPrerequisites(); // a dependent launch
  int64_t groups = (k + kBlockK - 1) / kBlockK;
  int64_t rows = validRows ? *validRows : slots;
  int lane = threadIdx.x % 32;
  for (int64_t item = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / 32; item < rows * groups;
       item += int64_t(gridDim.x) * blockDim.x / 32) {
    int64_t r = item / groups, g = item % groups;
    const float *row = x + (permutation ? permutation[r] / topK : r) * k;
    quantizeGroupTo(row, k, g, lane, q, scales, 1, [r](int64_t) { return r; });
  }
}

/// moe.permute + moe.quantize token-major (many slots): a permuted row is its
/// token's hidden row, so each token's row is quantised once -- one warp per
/// (token, 128-column group), the same arithmetic as quantizeE4M3Kernel -- and
/// its codes and scale written to each of the token's valid slots
/// (slotOf[token * topK + k], -1 past the valid count). Reads each hidden row
/// once instead of top-k times and quantises top-k times less.
__global__ void quantizeTokensToSlotsKernel(const float *hidden, int64_t tokens, int64_t k,
                                            const int32_t *slotOf, int64_t topK, uint8_t *q,
                                            float *scales) {
  device::awaitPrerequisites(); // a dependent launch
  int64_t groups = (k + kBlockK - 1) / kBlockK;
  int lane = threadIdx.x % 32;
  for (int64_t item = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / 32;
       item < tokens * groups; item += int64_t(gridDim.x) * blockDim.x / 32) {
    int64_t t = item / groups, g = item % groups;
    const int32_t *slots = slotOf + t * topK;
    quantizeGroupTo(hidden + t * k, k, g, lane, q, scales, topK,
                    [slots](int64_t s) { return int64_t(slots[s]); });
  }
}

} // namespace

const char *fp8TileName(FP8Tile tile) {
  switch (tile) {
  case FP8Tile::Auto: return "auto";
  case FP8Tile::Tok8: return "tok8x6";
  case FP8Tile::Tok16: return "tok16x5";
  case FP8Tile::Tok32: return "tok32x4";
  case FP8Tile::Wgmma: return "wgmma128x128";
  case FP8Tile::WgmmaPingpong:
    return "wgmma64x128pp";
  case FP8Tile::Decode8: return "dec8";
  case FP8Tile::Decode8Async: return "dec8async";
  }
  return "?";
}

FP8Tile chooseFP8Tile(int64_t slots, int64_t experts, int64_t k, int64_t n, bool offsets) {
  // As for bf16 (chooseBF16Tile), capped at 32 rows: the promoted partial sums
  // double the accumulators, and a 64-row tile spills (224 bytes) and measured
  // no faster than 32 anywhere on the H200. CUTLASS's QGMMA tiles from 16 rows:
  // 1.7-3.5x faster than 32-row tiles at 32-64 rows (Mixtral at T = 128, every
  // shape at T = 1024), even with Qwen3 at 8 rows, 10-25 % slower than 8-row
  // tiles at 4. Below 128 rows, 64x128 pingpong tiles (T = 1024: 18-26 % faster
  // for gpt-oss and DeepSeek-V3 at 32 rows, 9-12 % for Qwen3 at 64; 6 % slower
  // for Mixtral at 256, and at T = 8192 mostly slower: Mixtral by 20-35 %), and
  // they run from 16 slots whatever the rows (kernel bench at T = 16 and 128, 1
  // to 18 rows per expert: the pingpong tiles 0-35 % faster than the best
  // mma.sync tile in all 16 cases, gpt-oss gate/up at T = 128 543 against
  // 679 µs). The slots, not the rows per expert, tell decode from T = 16: both
  // have one row per touched expert by that estimate when the experts outnumber
  // the slots. The mma.sync tiles stay for moe.linear (no offsets) and
  // runtimes without CUTLASS.
  //
  // Up to 4 rows per touched expert below kFP8DecodeMaxSlots slots, and up to
  // 8 below kFP8WgmmaMinSlots, the decode tiles (launchDecodeAsync above;
  // launchDecode's register rings where K is at least 32 blocks deep and the
  // grid at most two blocks an SM). Against the pingpong tiles in graphs with
  // settled offsets, T = 2-8 for Qwen3 and DeepSeek-V3 (16-64 slots), up to
  // 16 for gpt-oss (64) and Mixtral (32): 2-39 % less time (Qwen3's gate/up
  // at T = 2 15.4 against 25.3 µs), Mixtral's gate/up at T = 16 level; at 128
  // slots (Qwen3 and DeepSeek-V3 at T = 16) the pingpong tiles win the down
  // projections (Qwen3: 43.3 against 47.7 µs).
  int64_t touched = std::max<int64_t>(1, std::min(experts, slots));
  int64_t rows = (slots + touched - 1) / touched;
  if ((rows <= 4 && slots < kFP8DecodeMaxSlots) || (rows <= 8 && slots < kFP8WgmmaMinSlots)) {
    bool shallow = touched * ((n + 31) / 32) <= 2 * detail::kSMs;
    return (k + 127) / 128 >= kDecodeSplit4MinBlocks && shallow ? FP8Tile::Decode8
                                                                 : FP8Tile::Decode8Async;
  }
  FP8Tile tile = rows <= 4 ? FP8Tile::Tok8 : rows <= 8 ? FP8Tile::Tok16 : FP8Tile::Tok32;
#ifdef MOEC_HAVE_CUTLASS
  if (slots >= kFP8WgmmaMinSlots && offsets && detail::groupedMatmulFP8CutlassSupports(k, n))
    tile = rows >= kFP8CooperativeMinRows ? FP8Tile::Wgmma : FP8Tile::WgmmaPingpong;
#else
  (void)k, (void)n, (void)offsets;
#endif
  return tile;
}

bool fp8TileAvailable(FP8Tile tile) {
#ifdef MOEC_HAVE_CUTLASS
  return true;
#else
  return !isWgmmaTile(tile);
#endif
}

namespace {
Status launchQuantize(const float *x, int64_t slots, int64_t k, const int32_t *validRows,
                      const int32_t *permutation, int64_t topK, uint8_t *q, float *scales,
                      cudaStream_t stream) {
  if (slots <= 0)
    return Status::ok();
  int64_t groups = (k + kBlockK - 1) / kBlockK;
  int64_t warps = slots * groups;
  int64_t blocks = std::min<int64_t>((warps * 32 + 255) / 256, 65535);
  return detail::launchDependent(quantizeE4M3Kernel, dim3(static_cast<unsigned>(blocks)), dim3(256),
                                 0, stream, x, slots, k, validRows, permutation, topK, q, scales);
}
} // namespace

Status quantizeE4M3(const float *x, int64_t slots, int64_t k, const int32_t *validRows,
                    uint8_t *q, float *scales, cudaStream_t stream) {
  return launchQuantize(x, slots, k, validRows, nullptr, 1, q, scales, stream);
}

Status permuteQuantizeE4M3(const float *hidden, int64_t hiddenSize, const int32_t *permutation,
                           const int32_t *numValid, const int32_t *rowOfSlot, int64_t slots,
                           int64_t topK, uint8_t *q, float *scales, cudaStream_t stream) {
  if (slots < detail::kPermuteByTokenMinSlots || topK <= 0 || slots % topK != 0)
    return launchQuantize(hidden, slots, hiddenSize, numValid, permutation, topK, q, scales,
                          stream);
  detail::StreamScratch scratch(stream);
  const int32_t *slotOf = nullptr;
  MOEC_RETURN_IF_ERROR(
      detail::inversePermutation(rowOfSlot, permutation, slots, numValid, scratch, stream, slotOf));
  int64_t tokens = slots / topK, groups = (hiddenSize + kBlockK - 1) / kBlockK;
  int64_t blocks = std::min<int64_t>((tokens * groups * 32 + 255) / 256, 65535);
  return detail::launchDependent(quantizeTokensToSlotsKernel, dim3(static_cast<unsigned>(blocks)),
                                 dim3(256), 0, stream, hidden, tokens, hiddenSize, slotOf, topK, q,
                                 scales);
}

namespace {
// `settledOffsets` as for groupedMatmulBF16SettledOffsets; results in `out`
// (f32) or `outBF16`, the other null.
Status runFP8(const FP8MatmulOperands &operands, float *out, uint16_t *outBF16,
              cudaStream_t stream, FP8Tile tile, bool settledOffsets, FP8Epilogue finish) {
  const auto &[lhs, slots, lhsScales, k, weights, weightScales, experts, n, offsets, bias,
               epilogue] = operands;
  if (k % 4 != 0)
    return Status::error("groupedMatmulFP8: K = " + std::to_string(k) +
                         " is not a multiple of 4 (4-byte loads of e4m3 rows)");
  bool gated = epilogue.enabled && epilogue.layout != GateUpLayout::None;
  if (gated && n % 2 != 0)
    return Status::error("groupedMatmulFP8: gated N = " + std::to_string(n) + " is odd");
  if (slots <= 0 || experts <= 0)
    return Status::ok();
  Problem p{{k, experts, n, gated ? n / 2 : n, offsets, slots, bias, epilogue, 0, 0, out, outBF16},
            lhs,
            lhsScales,
            weights,
            weightScales};
  p.layout.settledOffsets = settledOffsets && offsets;
  if (tile == FP8Tile::Auto)
    tile = chooseFP8Tile(slots, experts, k, n, offsets != nullptr);
  switch (tile) {
  case FP8Tile::Wgmma:
  case FP8Tile::WgmmaPingpong:
#ifdef MOEC_HAVE_CUTLASS
    return detail::groupedMatmulFP8Cutlass(lhs, lhsScales, slots, k, weights, weightScales, experts,
                                           n, offsets, bias, epilogue, out, outBF16, nullptr,
                                           nullptr, detail::fp8CutlassTile(tile),
                                           finish == FP8Epilogue::Fused, stream);
#else
    (void)finish;
    return Status::error("groupedMatmulFP8: the wgmma tiles need a runtime built with CUTLASS");
#endif
  case FP8Tile::Decode8: return launchDecode(p, slots, stream);
  case FP8Tile::Decode8Async: return launchDecodeAsync(p, slots, stream);
  case FP8Tile::Tok8: return launch<8, 6>(p, slots, stream);
  case FP8Tile::Tok16: return launch<16, 5>(p, slots, stream);
  case FP8Tile::Tok32:
  case FP8Tile::Auto: return launch<32, 4>(p, slots, stream);
  }
  return Status::ok();
}
} // namespace

Status groupedMatmulFP8(const FP8MatmulOperands &operands, float *out, cudaStream_t stream,
                        FP8Tile tile, bool settledOffsets, FP8Epilogue finish) {
  return runFP8(operands, out, nullptr, stream, tile, settledOffsets, finish);
}

Status groupedMatmulFP8(const FP8MatmulOperands &operands, BF16 *out, cudaStream_t stream,
                        FP8Tile tile, bool settledOffsets, FP8Epilogue finish) {
  return runFP8(operands, nullptr, reinterpret_cast<uint16_t *>(out), stream, tile,
                settledOffsets, finish);
}

Status groupedMatmulFP8Quantized(const FP8MatmulOperands &operands, uint8_t *q, float *scales,
                                 float *planned, int64_t plannedFloats, cudaStream_t stream,
                                 FP8Tile tile, bool settledOffsets, FP8Epilogue finish) {
  const auto &[lhs, slots, lhsScales, k, weights, weightScales, experts, n, offsets, bias,
               epilogue] = operands;
  bool gated = epilogue.enabled && epilogue.layout != GateUpLayout::None;
  if (gated && n % 2 != 0)
    return Status::error("groupedMatmulFP8Quantized: gated N = " + std::to_string(n) + " is odd");
  if (slots <= 0 || experts <= 0)
    return Status::ok();
  if (tile == FP8Tile::Auto)
    tile = chooseFP8Tile(slots, experts, k, n, offsets != nullptr);
#ifdef MOEC_HAVE_CUTLASS
  if (isWgmmaTile(tile)) // the epilogue pass quantises: no f32 result
    return detail::groupedMatmulFP8Cutlass(lhs, lhsScales, slots, k, weights, weightScales, experts,
                                           n, offsets, bias, epilogue, nullptr, nullptr, q, scales,
                                           detail::fp8CutlassTile(tile),
                                           finish == FP8Epilogue::Fused, stream);
#else
  (void)finish;
#endif
  // The mma.sync tiles apply the epilogue in registers: their f32 result, then
  // the quantise kernel (rows up to offsets[E-1]).
  int64_t width = gated ? n / 2 : n;
  detail::StreamScratch scratch(stream);
  float *result = planned && slots * width <= plannedFloats ? planned : nullptr;
  if (!result)
    MOEC_RETURN_IF_ERROR(scratch.allocate(static_cast<size_t>(slots * width), result));
  MOEC_RETURN_IF_ERROR(groupedMatmulFP8(operands, result, stream, tile, settledOffsets));
  return quantizeE4M3(result, slots, width, offsets ? offsets + experts - 1 : nullptr, q, scales,
                      stream);
}

// What generated code calls: the tile Auto picks, f32 or bf16 results.
template <typename Out>
Status groupedMatmulFP8(const uint8_t *lhs, int64_t slots, const float *lhsScales, int64_t k,
                        const uint8_t *weights, const float *weightScales, int64_t experts,
                        int64_t n, const int32_t *offsets, const float *bias,
                        const Epilogue &epilogue, Out *out, cudaStream_t stream) {
  return groupedMatmulFP8({lhs, slots, lhsScales, k, weights, weightScales, experts, n, offsets,
                           bias, epilogue},
                          out, stream, FP8Tile::Auto);
}

template <typename Out>
Status groupedMatmulFP8SettledOffsets(const uint8_t *lhs, int64_t slots, const float *lhsScales,
                                      int64_t k, const uint8_t *weights, const float *weightScales,
                                      int64_t experts, int64_t n, const int32_t *offsets,
                                      const float *bias, const Epilogue &epilogue, Out *out,
                                      cudaStream_t stream) {
  return groupedMatmulFP8({lhs, slots, lhsScales, k, weights, weightScales, experts, n, offsets,
                           bias, epilogue},
                          out, stream, FP8Tile::Auto, /*settledOffsets=*/true);
}

#define MOEC_INSTANTIATE(OUT)                                                                      \
  template Status groupedMatmulFP8(const uint8_t *, int64_t, const float *, int64_t,              \
                                   const uint8_t *, const float *, int64_t, int64_t,              \
                                   const int32_t *, const float *, const Epilogue &, OUT *,       \
                                   cudaStream_t);                                                 \
  template Status groupedMatmulFP8SettledOffsets(const uint8_t *, int64_t, const float *,         \
                                                 int64_t, const uint8_t *, const float *,         \
                                                 int64_t, int64_t, const int32_t *,               \
                                                 const float *, const Epilogue &, OUT *,          \
                                                 cudaStream_t);
MOEC_INSTANTIATE(float)
MOEC_INSTANTIATE(BF16)
#undef MOEC_INSTANTIATE

Status groupedMatmulFP8Quantized(const uint8_t *lhs, int64_t slots, const float *lhsScales,
                                 int64_t k, const uint8_t *weights, const float *weightScales,
                                 int64_t experts, int64_t n, const int32_t *offsets,
                                 const float *bias, const Epilogue &epilogue, uint8_t *q,
                                 float *scales, float *scratch, int64_t scratchFloats,
                                 cudaStream_t stream) {
  return groupedMatmulFP8Quantized({lhs, slots, lhsScales, k, weights, weightScales, experts, n,
                                    offsets, bias, epilogue},
                                   q, scales, scratch, scratchFloats, stream, FP8Tile::Auto);
}

Status groupedMatmulFP8QuantizedSettledOffsets(const uint8_t *lhs, int64_t slots,
                                               const float *lhsScales, int64_t k,
                                               const uint8_t *weights, const float *weightScales,
                                               int64_t experts, int64_t n, const int32_t *offsets,
                                               const float *bias, const Epilogue &epilogue,
                                               uint8_t *q, float *scales, float *scratch,
                                               int64_t scratchFloats, cudaStream_t stream) {
  return groupedMatmulFP8Quantized({lhs, slots, lhsScales, k, weights, weightScales, experts, n,
                                    offsets, bias, epilogue},
                                   q, scales, scratch, scratchFloats, stream, FP8Tile::Auto,
                                   /*settledOffsets=*/true);
}

} // namespace moec::rt::cuda
