//===- Tuning.h - tile choices and thresholds of the CUDA kernels -*- C++ -*-===//
//
// Internal to the CUDA kernels (not installed): which tile a grouped matmul
// runs and where the sort changes algorithm. These are measurements
// (docs/performance.md), not part of what generated code calls
// (moec/runtime/cuda/MoEKernels.h declares that); the runtime's tests and the
// kernel benchmarks put this folder on their include path to pick tiles
// themselves.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_SRC_CUDA_TUNING_H
#define MOEC_RUNTIME_SRC_CUDA_TUNING_H

#include "moec/runtime/cuda/MoEKernels.h"

namespace moec::rt::cuda {

/// Up to this many slots sortByExpert is one launch of one block (decode);
/// from here on, up to kSortCountingMaxSlots slots over up to
/// kSortCountingMaxExperts local experts, a counting sort in one launch of one
/// block; past either, CUB's device-wide radix sort and an offsets scan.
inline constexpr int64_t kSortOneBlockMaxSlots = 1024;
inline constexpr int64_t kSortCountingMaxSlots = 16384;
inline constexpr int64_t kSortCountingMaxExperts = 256;

/// Tiles of groupedMatmulBF16: TOK rows (tokens) of one expert per block against
/// 128 weight rows, and the depth of the load pipeline; or CUTLASS's sm90
/// grouped GEMM (TMA + wgmma) for prefill, in runtimes built with CUTLASS:
/// Wgmma with 128x128 pingpong tiles (rows x weight rows), Wgmma128x256 with
/// 128x256 cooperative tiles (no clusters), Wgmma128x256C21 the same with 2x1
/// clusters (two row tiles share a weight tile, as torch's _grouped_mm does;
/// Auto takes no clusters), Wgmma128x256C12 with 1x2 clusters (two weight
/// tiles share a row tile), Wgmma64x256 with 64x256 pingpong tiles (each warp
/// group its own tile, so one's epilogue runs under the other's mainloop).
/// Auto picks by shape (chooseBF16Tile); the others exist for benchmarks and
/// tests.
enum class BF16Tile {
  Auto,
  Tok8,       // 8-row tiles; 4-warp blocks, or 2-warp ones for some grids (groupedMatmulBF16Impl)
  Tok8Warps2, // 8-row tiles on 2-warp blocks (64 weight rows) whatever the grid
  Tok16,
  Tok32,
  Tok64,
  Wgmma,
  Wgmma128x256,
  Wgmma128x256C21,
  Wgmma128x256C12,
  Wgmma64x256
};
/// Whether `tile` is one of CUTLASS's (TMA + wgmma) tiles.
inline bool isWgmmaTile(BF16Tile tile) {
  return tile == BF16Tile::Wgmma || tile == BF16Tile::Wgmma128x256 ||
         tile == BF16Tile::Wgmma128x256C21 || tile == BF16Tile::Wgmma128x256C12 ||
         tile == BF16Tile::Wgmma64x256;
}
/// From this many rows per touched expert on, Auto takes the wgmma tiles.
inline constexpr int64_t kWgmmaMinRows = 32;
const char *bf16TileName(BF16Tile tile);
/// The tile Auto runs for `slots` rows over `experts` experts, K deep; `gated`:
/// a gate/up projection (its epilogue halves the output); `biased`: with a bias.
BF16Tile chooseBF16Tile(int64_t slots, int64_t experts, int64_t k, bool gated, bool biased);
/// Whether this runtime has `tile` (Wgmma only with CUTLASS).
bool bf16TileAvailable(BF16Tile tile);

/// groupedMatmulBF16 and groupedMatmulBF16SettledOffsets on a tile of one's
/// choosing (Auto: what the public overloads run).
template <typename Lhs, typename Out>
Status groupedMatmulBF16(const Lhs *lhs, int64_t slots, int64_t k, const uint16_t *weightsBF16,
                         int64_t experts, int64_t n, const int32_t *offsets, const float *bias,
                         const Epilogue &epilogue, Out *out, cudaStream_t stream, BF16Tile tile);
template <typename Lhs, typename Out>
Status groupedMatmulBF16SettledOffsets(const Lhs *lhs, int64_t slots, int64_t k,
                                       const uint16_t *weightsBF16, int64_t experts, int64_t n,
                                       const int32_t *offsets, const float *bias,
                                       const Epilogue &epilogue, Out *out, cudaStream_t stream,
                                       BF16Tile tile);

/// Tiles of groupedMatmulMXFP4: TOK rows of one expert per block against 32·W
/// weight rows (W warps), each with as many 256-deep stages as its share of
/// shared memory holds: Tok8 on 4-warp blocks one an SM, Tok8Twice two an SM,
/// Tok8Quad four an SM (what Auto takes at decode on wide grids); Tok8Split on
/// 8-warp blocks whose two halves split each stage's K, one an SM, and
/// Tok8SplitTwice two an SM (Auto's on thin grids); Tok8Warps2 on 2-warp
/// blocks three an SM, Tok8Warps1 on 1-warp blocks five an SM. Auto picks by
/// shape (chooseMXFP4Tile); the others exist for benchmarks and tests.
/// DequantWgmma (prefill): the experts dequantised into bf16 scratch a chunk
/// at a time, each chunk multiplied by the bf16 kernel's CUTLASS GEMM
/// (GroupedMatmulMXFP4Wide.cu).
enum class MXFP4Tile {
  Auto,
  Tok8,
  Tok8Twice,
  Tok8Quad,
  Tok8Split,
  Tok8SplitTwice,
  Tok8Warps2,
  Tok8Warps1,
  Tok16,
  Tok32,
  Tok64,
  DequantWgmma
};
const char *mxfp4TileName(MXFP4Tile tile);
/// From this many rows per touched expert on, Auto takes DequantWgmma where
/// the runtime has it (mxfp4DequantAvailable): chooseMXFP4Tile says why.
inline constexpr int64_t kMXFP4DequantMinRows = 64;
/// Whether this runtime runs DequantWgmma for K and N (built with CUTLASS,
/// whose bf16 GEMM takes them).
bool mxfp4DequantAvailable(int64_t k, int64_t n);
/// The bf16 scratch DequantWgmma dequantises into, at most (1 GiB): a chunk of
/// as many experts as it holds, at least one. Tests lower it to cover several
/// chunks; 0 restores the default.
void setMXFP4DequantScratchBytes(int64_t bytes);
/// The experts per chunk DequantWgmma takes for `experts` experts N x K.
int64_t mxfp4DequantChunkExperts(int64_t experts, int64_t n, int64_t k);
/// The tile Auto runs for `slots` rows over `experts` experts, K deep, N wide
/// (by rows per touched expert: measurements, docs/performance.md).
MXFP4Tile chooseMXFP4Tile(int64_t slots, int64_t experts, int64_t k, int64_t n, bool gated);
/// groupedMatmulMXFP4 (or its SettledOffsets variant) on a tile of one's choosing.
template <typename Lhs, typename Out>
Status groupedMatmulMXFP4(const Lhs *lhs, int64_t slots, int64_t k, const uint8_t *weights,
                          const uint8_t *scales, int64_t experts, int64_t n,
                          const int32_t *offsets, const float *bias, const Epilogue &epilogue,
                          Out *out, cudaStream_t stream, MXFP4Tile tile,
                          bool settledOffsets = false);

/// Tiles of groupedMatmulFP8 (TOK rows x pipeline depth), as for bf16;
/// CUTLASS's sm90 grouped GEMM with blockwise scaling in runtimes built with
/// CUTLASS: Wgmma with 128x128 cooperative tiles and 1x2 clusters,
/// WgmmaPingpong with 64x128 pingpong tiles (one warp group's epilogue overlaps
/// the other's mainloop). Auto takes WgmmaPingpong where it takes no decode
/// tile (below) and Wgmma from kFP8CooperativeMinRows rows per touched expert.
/// Decode8 and Decode8Async: the decode tiles of 8 rows that stream the
/// weights into MMA fragments (FP8DecodeTile.cuh), through rings in registers
/// and in shared memory; Auto takes them up to 4 rows per touched expert below
/// kFP8DecodeMaxSlots slots and up to 8 below kFP8WgmmaMinSlots.
enum class FP8Tile { Auto, Tok8, Tok16, Tok32, Wgmma, WgmmaPingpong, Decode8, Decode8Async };
/// Whether `tile` is one of CUTLASS's (TMA + wgmma) tiles.
inline bool isWgmmaTile(FP8Tile tile) {
  return tile == FP8Tile::Wgmma || tile == FP8Tile::WgmmaPingpong;
}
inline constexpr int64_t kFP8WgmmaMinSlots = 16;
/// The emitter plans decode's f32 gate/up result for this many rows
/// (CudaPrinter.cpp, kDecodeSlots): keep them equal.
inline constexpr int64_t kFP8DecodeMaxSlots = 128;
inline constexpr int64_t kFP8CooperativeMinRows = 128;
/// The tile Auto runs for `slots` rows over `experts` experts, K deep, N wide;
/// `offsets`: whether there are per-expert offsets (the wgmma tiles need them).
FP8Tile chooseFP8Tile(int64_t slots, int64_t experts, int64_t k, int64_t n, bool offsets);
bool fp8TileAvailable(FP8Tile tile);
const char *fp8TileName(FP8Tile tile);

/// The operands the FP8 grouped matmuls share (MoEKernels.h's
/// groupedMatmulFP8*, whose parameters of the same names these are).
struct FP8MatmulOperands {
  const uint8_t *lhs;
  int64_t slots;
  const float *lhsScales;
  int64_t k;
  const uint8_t *weights;
  const float *weightScales;
  int64_t experts;
  int64_t n;
  const int32_t *offsets;
  const float *bias;
  const Epilogue &epilogue;
};

/// How the wgmma FP8 tiles finish their results (GroupedMatmulFP8Cutlass.cu).
/// Fused: CUTLASS's epilogue adds a lone bias and writes bf16 results itself
/// (exact: what the public groupedMatmulFP8 runs), and for a quantised result
/// writes h (interleaved SiLU gate/up) or else the product in bf16 for the
/// pass to quantise. Pass: an f32 product and the epilogue pass wherever
/// there is anything to apply (what the public groupedMatmulFP8Quantized
/// runs: the bf16 rounding before the e4m3 codes flips a few per cent of
/// them, which takes a whole block at the benchmark shapes past issue 34's
/// 1e-2 from a float64 emulation of the recipe, where the f32 product stays
/// well within it: CudaFP8RecipeTest, docs/performance.md). Both stay so
/// that one binary compares them (the GPU tests hold them to each other, the
/// kernel bench times both).
enum class FP8Epilogue { Fused, Pass };

/// The FP8 grouped matmuls on a tile of one's choosing (Auto: what the public
/// overloads run); `settledOffsets`: their SettledOffsets variants. Results
/// in f32 or (the same values rounded to nearest even) bf16.
Status groupedMatmulFP8(const FP8MatmulOperands &operands, float *out, cudaStream_t stream,
                        FP8Tile tile, bool settledOffsets = false,
                        FP8Epilogue finish = FP8Epilogue::Fused);
Status groupedMatmulFP8(const FP8MatmulOperands &operands, BF16 *out, cudaStream_t stream,
                        FP8Tile tile, bool settledOffsets = false,
                        FP8Epilogue finish = FP8Epilogue::Fused);
Status groupedMatmulFP8Quantized(const FP8MatmulOperands &operands, uint8_t *q, float *scales,
                                 float *scratch, int64_t scratchFloats, cudaStream_t stream,
                                 FP8Tile tile, bool settledOffsets = false,
                                 FP8Epilogue finish = FP8Epilogue::Pass);

} // namespace moec::rt::cuda

#endif // MOEC_RUNTIME_SRC_CUDA_TUNING_H
