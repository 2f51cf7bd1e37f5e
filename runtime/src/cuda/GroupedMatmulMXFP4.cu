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
// The codes are in the GPU's layout (MXFP4Layout.cuh, re-laid out once when
// a model is created): decodeMXFP4Word turns a 32-bit word of 8 codes into 4
// bf16x2 of code · 2^-126 with 8 integer instructions, pair p holding
// columns 2p and 2p + 1 of the word; one bf16x2 multiply by 2^(s - 1) (exact:
// a power of two; one multiply-add builds it from the scale byte) scales both.
// Scale bytes past 128 need a second multiply, which only a warp holding one
// runs. A thread's A fragments take adjacent columns as the MMA's k pairs, so
// its B fragments are the staged rows' adjacent columns as they lie.
//
// The decode tiles (8 rows) run more warps an SM the more the grid can fill:
// four 4-warp blocks, or on thin grids 8-warp blocks whose two halves (k-groups)
// take alternate chunks of each stage and add their accumulators at the end
// (chooseMXFP4Tile).
//
//===----------------------------------------------------------------------===//

#include "ExpertTiles.cuh"
#include "GridSize.h"
#include "MXFP4Layout.cuh"
#include "GroupedMatmulMXFP4Wide.h"
#include "Tuning.h"
#include "moec/runtime/Cuda.h"
#include "moec/runtime/MXFP4.h"
#include "moec/runtime/cuda/MoEKernels.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <climits>
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
  const uint8_t *weights;  // [E, N] rows of rowBytes packed codes (MXFP4Layout.cuh)
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
/// (e = 8·word) in adjacent pairs, as decodeMXFP4Word pairs the codes: (e, e +
/// 1), (e + 2, e + 3) for the first step, (e + 4, e + 5), (e + 6, e + 7) for
/// the second. bf16 rows: the staged bytes as they are.
__device__ inline void fragmentsB(const BF16 *rowsTile, int token, int e, unsigned (&b)[4]) {
  uint4 x = *reinterpret_cast<const uint4 *>(rowsTile + rowChunk<BF16>(token, e / 8) * 8);
  b[0] = x.x;
  b[1] = x.y;
  b[2] = x.z;
  b[3] = x.w;
}
__device__ inline void fragmentsB(const float *rowsTile, int token, int e, unsigned (&b)[4]) {
  float4 lo = *reinterpret_cast<const float4 *>(rowsTile + rowChunk<float>(token, e / 4) * 4);
  float4 hi = *reinterpret_cast<const float4 *>(rowsTile + rowChunk<float>(token, e / 4 + 1) * 4);
  b[0] = packBF16(lo.x, lo.y);
  b[1] = packBF16(lo.z, lo.w);
  b[2] = packBF16(hi.x, hi.y);
  b[3] = packBF16(hi.z, hi.w);
}

/// The kernel: WARPS row warps (32·WARPS weight rows) by TOK rows, each row
/// warp KSPLIT times over (KSPLIT = 2: the copies take alternate chunks of
/// each stage and add their accumulators at the end), at least MIN_BLOCKS
/// blocks an SM (the register bound).
template <int TOK, int STAGES, int WARPS, int KSPLIT, int MIN_BLOCKS, typename Lhs>
__global__ void __launch_bounds__(threadsOf<WARPS * KSPLIT>, MIN_BLOCKS)
    groupedMatmulMXFP4Kernel(Problem<Lhs> problem) {
  static_assert(KSPLIT == 1 || KSPLIT == 2, "a stage's two chunks a thread go to one or two warps");
  constexpr int kBlockThreads = threadsOf<WARPS * KSPLIT>;
  constexpr int kWeightRows = weightRowsOf<WARPS>;
  constexpr int kStageBytes = stageBytes<Lhs, WARPS>(TOK);
  constexpr int kScaleTile = weightTileBytes<WARPS>();
  constexpr int kRowsTile = kScaleTile + scaleTileBytes<WARPS>();
  const Layout &p = problem.layout;
  extern __shared__ __align__(128) unsigned char shared[];
  constexpr int kTokenTiles = TOK / 8;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int rowWarp = warp % WARPS, kGroup = warp / WARPS;
  int64_t columnTile, expert, firstRow;
  int rows;
  if (!startTile<TOK, WARPS * KSPLIT>(p, columnTile, expert, firstRow, rows))
    return;

  // The loads, set up once so that a stage costs a few instructions each.
  // Weights: 16-byte chunk tid % 8 of kWeightLoads tile rows, tid / 8 + i ·
  // kBlockThreads / 8, at these byte offsets within the expert (under 2^31:
  // checked on the host). Rows past N load row 0: their results are never
  // stored, and e2m1 codes are finite.
  constexpr int kWeightLoads = kWeightRows * 8 / kBlockThreads;
  constexpr int kLoadRowStep = kBlockThreads / 8;
  const uint8_t *expertWeights = problem.weights + expert * p.n * problem.rowBytes;
  const int weightChunk = tid % 8, weightSwizzle = swizzled(tid / 8, weightChunk);
  int weightOffset[kWeightLoads];
#pragma unroll
  for (int i = 0; i < kWeightLoads; ++i) {
    int64_t row = weightRowOf<WARPS>(p, columnTile, tid / 8 + kLoadRowStep * i);
    weightOffset[i] = static_cast<int>((row >= 0 ? row : 0) * problem.rowBytes) + weightChunk * 16;
  }
  // Scales: the first kWeightRows threads load row tid's, from its word-aligned
  // start, with the bytes readable there (to the end of the scales; none past N).
  const uint8_t *scaleWords = problem.scales;
  int64_t scaleBytes = 0;
  if (tid < kWeightRows) {
    int64_t row = weightRowOf<WARPS>(p, columnTile, tid);
    if (row >= 0) {
      uintptr_t start =
          reinterpret_cast<uintptr_t>(problem.scales + (expert * p.n + row) * problem.kBlocks);
      scaleWords = reinterpret_cast<const uint8_t *>(start & ~uintptr_t(3));
      scaleBytes = problem.scalesEnd - scaleWords;
    }
  }
  // Rows: chunk q = tid + i · kBlockThreads of the TOK staged rows (row q /
  // kChunksPerRow, chunk q % kChunksPerRow), whose row and chunk are this
  // thread's first plus constants; the rows from `rows` on are not read (the
  // next expert's, or past the end), nor the columns from K on.
  constexpr int kChunkElements = 16 / sizeof(Lhs);
  constexpr int kChunksPerRow = kTileK / kChunkElements;
  constexpr int kRowChunks = TOK * kChunksPerRow / kBlockThreads;
  static_assert(TOK * kChunksPerRow % kBlockThreads == 0, "the threads share the chunks evenly");
  constexpr bool kWholeRows = kBlockThreads % kChunksPerRow == 0;
  static_assert(kWholeRows || kChunksPerRow % kBlockThreads == 0,
                "a thread's row chunks lie a constant apart");
  const int firstToken = tid / kChunksPerRow, firstChunk = tid % kChunksPerRow;
  const Lhs *rowSource = problem.lhs + (firstRow + firstToken) * p.k + firstChunk * kChunkElements;
  const int64_t columnsLeft = p.k - firstChunk * kChunkElements; // from k0 = 0
  // Chunk i's row and chunk less this thread's first.
  auto tokenStep = [](int i) {
    if constexpr (kWholeRows)
      return i * (kBlockThreads / kChunksPerRow);
    else
      return i / (kChunksPerRow / kBlockThreads);
  };
  auto chunkStep = [](int i) {
    if constexpr (kWholeRows)
      return 0;
    else
      return i % (kChunksPerRow / kBlockThreads) * kBlockThreads;
  };

  const int64_t kTiles = (problem.kBlocks + kStageBlocks - 1) / kStageBlocks;
  auto loadWeights = [&](int64_t kt, int stage) {
    unsigned char *base = shared + stage * kStageBytes;
    const uint8_t *source = expertWeights + kt * kTileBytes;
    const bool inK = kt * kTileBytes + weightChunk * 16 < problem.rowBytes;
#pragma unroll
    for (int i = 0; i < kWeightLoads; ++i) {
      // (Rows a multiple of 8 apart share the swizzle.)
      int at = kLoadRowStep % 8 == 0
                   ? weightSwizzle + kLoadRowStep * i * kTileBytes
                   : swizzled(tid / 8 + kLoadRowStep * i, weightChunk);
      copyAsync16(base + at, inK ? source + weightOffset[i] : problem.weights, inK ? 16 : 0);
    }
    // The stage's 8 scale bytes of row tid lie in 3 aligned words; bytes past
    // the row (the next row's, or past the end: not read) are never used.
    if (KSPLIT > 1 && tid >= kWeightRows)
      return;
    int64_t left = scaleBytes - kt * kStageBlocks;
    int avail = left >= 12 ? 12 : left > 0 ? static_cast<int>(left) : 0;
#pragma unroll
    for (int w = 0; w < 3; ++w) {
      int bytes = min(max(avail - 4 * w, 0), 4);
      copyAsync4Partial(base + kScaleTile + tid * kScaleRowBytes + 4 * w,
                        bytes ? scaleWords + kt * kStageBlocks + 4 * w : problem.scales, bytes);
    }
  };
  auto loadRows = [&](int64_t kt, int stage) {
    unsigned char *base = shared + stage * kStageBytes;
    int64_t k0 = kt * kTileK;
    Lhs *rowsTile = reinterpret_cast<Lhs *>(base + kRowsTile);
    int64_t leftK = columnsLeft - k0;
    int left = leftK >= kTileK ? kTileK : leftK > 0 ? static_cast<int>(leftK) : 0;
#pragma unroll
    for (int i = 0; i < kRowChunks; ++i) {
      int token = firstToken + tokenStep(i), chunk = firstChunk + chunkStep(i);
      int dk = chunkStep(i) * kChunkElements;
      bool valid = token < rows && dk < left;
      copyAsync16(rowsTile + rowChunk<Lhs>(token, chunk) * kChunkElements,
                  valid ? rowSource + tokenStep(i) * p.k + k0 + dk : problem.lhs, valid ? 16 : 0);
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
      int v = rowWarp * kRowsPerWarp + half * 16 + group + 8 * r;
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
    // two scale blocks; with KSPLIT = 2 the first to k-group 0, the second to
    // 1), a word (8 codes, two k-steps) at a time.
    // (Deep tiles keep the two chunks apart: unrolled, their registers spill.)
#pragma unroll(TOK >= 32 ? 1 : 2)
    for (int j = 0; j < 2 / KSPLIT; ++j) {
      const int chunk = 2 * quad + kGroup + j;
      const bool inRow = kt * kStageBlocks + chunk < problem.kBlocks;
      uint4 codes[2][2];
      unsigned scale[2][2];
      bool large = false;
#pragma unroll
      for (int half = 0; half < 2; ++half)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          int v = tileRow[half][r];
          codes[half][r] = *reinterpret_cast<const uint4 *>(base + swizzled(v, chunk));
          unsigned s = base[kScaleTile + v * kScaleRowBytes + scaleOffset[half][r] + chunk];
          // Past the row's last block the codes are zero-filled and the scale
          // byte is another row's: any finite scale gives zero.
          scale[half][r] = inRow ? s : 127u;
          large |= scale[half][r] > 128u;
        }
      // The 4 words of the chunk, dequantised and multiplied; LARGE: some
      // scale of the warp's is past 128 and takes a second multiply (rare:
      // weights of 2^2 and more; warp-uniform, so the usual path has none).
      auto words = [&](auto largeTag) {
        constexpr bool kLarge = decltype(largeTag)::value;
        unsigned first[2][2], second[2][2];
#pragma unroll
        for (int half = 0; half < 2; ++half)
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            unsigned s = scale[half][r];
            first[half][r] = scaleMultiplier(kLarge ? min(s, 128u) : s);
            if constexpr (kLarge)
              second[half][r] = largeScaleSecond(s);
          }
#pragma unroll
        for (int word = 0; word < 4; ++word) {
          unsigned pairs[2][2][4];
#pragma unroll
          for (int half = 0; half < 2; ++half)
#pragma unroll
            for (int r = 0; r < 2; ++r) {
              const uint4 &c = codes[half][r];
              decodeMXFP4Word(word == 0 ? c.x : word == 1 ? c.y : word == 2 ? c.z : c.w,
                              pairs[half][r]);
#pragma unroll
              for (int i = 0; i < 4; ++i) {
                pairs[half][r][i] = mulBF16x2(pairs[half][r][i], first[half][r]);
                if constexpr (kLarge)
                  pairs[half][r][i] = mulBF16x2(pairs[half][r][i], second[half][r]);
              }
            }
          const int e = 32 * chunk + 8 * word; // the word's first column in the stage
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
      };
      if (__any_sync(0xffffffffu, large))
        words(std::true_type{});
      else
        words(std::false_type{});
    }
  };
  runTilePipeline<STAGES>(p, kTiles, loadWeights, loadRows, compute);
  if constexpr (KSPLIT > 1) {
    // k-group 1 hands its accumulators to k-group 0 through the (drained)
    // pipeline's shared memory: value i of thread (row warp, lane) at
    // i · kWeightRows + row warp · 32 + lane.
    static_assert(2 * kTokenTiles * 4 * kWeightRows * 4 <= kStageBytes, "a stage holds them");
    float *partial = reinterpret_cast<float *>(shared);
    const int slot = rowWarp * 32 + lane;
    auto exchange = [&](auto &&with) {
#pragma unroll
      for (int half = 0; half < 2; ++half)
#pragma unroll
        for (int t = 0; t < kTokenTiles; ++t)
#pragma unroll
          for (int i = 0; i < 4; ++i)
            with(acc[half][t][i], partial[((half * kTokenTiles + t) * 4 + i) * kWeightRows + slot]);
    };
    __syncthreads();
    if (kGroup == 1)
      exchange([](float &value, float &held) { held = value; });
    __syncthreads();
    if (kGroup == 1)
      return;
    exchange([](float &value, float &held) { value += held; });
  }
  storeOutputs<kTokenTiles, WARPS>(p, expert, columnTile, firstRow, rows, acc, rowWarp);
}

/// Stages of a TOK-row tile of WARPS warps: as many as fit `budget` bytes of
/// shared memory, at most 8.
template <typename Lhs, int TOK, int WARPS> constexpr int stagesWithin(int budget) {
  int stages = budget / stageBytes<Lhs, WARPS>(TOK);
  return stages > 8 ? 8 : stages;
}

template <int TOK, int STAGES, typename Lhs, int WARPS = kWarps, int KSPLIT = 1,
          int MIN_BLOCKS = 1>
Status launch(const Problem<Lhs> &problem, int64_t slots, cudaStream_t stream) {
  static_assert(STAGES >= 2, "the pipeline needs two stages");
  return launchTiles(groupedMatmulMXFP4Kernel<TOK, STAGES, WARPS, KSPLIT, MIN_BLOCKS, Lhs>,
                     problem, slots, TOK, STAGES * stageBytes<Lhs, WARPS>(TOK),
                     "groupedMatmulMXFP4", stream, WARPS, KSPLIT);
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
  if (n * mxfp4::packedRowBytes(k) > INT32_MAX)
    return Status::error("groupedMatmulMXFP4: an expert's codes (N = " + std::to_string(n) +
                         ", K = " + std::to_string(k) + ") exceed 2^31 bytes");
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
  // The decode tiles: 4-warp blocks deep (one an SM), two or four an SM;
  // 8-warp blocks whose warps split each stage's K in two, one or two an SM;
  // 2-warp blocks three an SM, 1-warp blocks five an SM.
  case MXFP4Tile::Tok8:
    return launch<8, stagesWithin<Lhs, 8, 4>(kSharedBudget)>(p, slots, stream);
  case MXFP4Tile::Tok8Twice:
    return launch<8, stagesWithin<Lhs, 8, 4>(sharedShare(2)), Lhs, 4, 1, 2>(p, slots, stream);
  case MXFP4Tile::Tok8Quad:
    return launch<8, stagesWithin<Lhs, 8, 4>(sharedShare(4)), Lhs, 4, 1, 4>(p, slots, stream);
  case MXFP4Tile::Tok8Split:
    return launch<8, stagesWithin<Lhs, 8, 4>(kSharedBudget), Lhs, 4, 2>(p, slots, stream);
  case MXFP4Tile::Tok8SplitTwice:
    return launch<8, stagesWithin<Lhs, 8, 4>(sharedShare(2)), Lhs, 4, 2, 2>(p, slots, stream);
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
  case MXFP4Tile::Tok8Quad: return "mx-tok8x4";
  case MXFP4Tile::Tok8Split: return "mx-tok8k2";
  case MXFP4Tile::Tok8SplitTwice: return "mx-tok8k2x2";
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
  // (bench/grouped_matmul.cpp, MOEC_BENCH_MXFP4; the figures are in
  // bench/results/h200-mxfp4-decode.txt, h200-mxfp4-prefill.txt and
  // docs/performance.md, "MXFP4 experts"). Up to 8 rows the 8-row tiles, by
  // how many warps an SM the grid can hold (more warps hide the dequantising
  // chains and the loads): four 4-warp blocks an SM where there are more than
  // two blocks' worth an SM (ahead of two 4-warp or two 8-warp blocks at every
  // such shape), else two 8-warp blocks that split K (ahead or level on those
  // thin grids). The blocks: one row tile per touched expert by the column
  // tiles, 128 weight rows each (gated: 64 columns of two rows). 16-row tiles
  // to 24 rows, 32-row tiles to kMXFP4DequantMinRows: the larger tiles reuse
  // each dequantised weight over more rows but hold one or two 4-warp blocks
  // an SM. From kMXFP4DequantMinRows rows the experts dequantised into bf16
  // and multiplied by CUTLASS's wgmma GEMM (DequantWgmma), ahead of the 32-
  // and 64-row tiles from 64 rows on; at 32 rows level with them on f32 rows
  // and behind on the bf16 rows whole models pass.
  (void)gated;
  int64_t touched = std::max<int64_t>(1, std::min(experts, slots));
  int64_t rows = (slots + touched - 1) / touched;
  if (rows >= kMXFP4DequantMinRows && mxfp4DequantAvailable(k, n))
    return MXFP4Tile::DequantWgmma;
  if (rows <= 8) {
    int64_t blocks = touched * ((n + weightRowsOf<kWarps> - 1) / weightRowsOf<kWarps>);
    return blocks > 2 * detail::kSMs ? MXFP4Tile::Tok8Quad : MXFP4Tile::Tok8SplitTwice;
  }
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
