//===- TileChoiceTest.cpp - the CUDA runtime's tile rules, without a GPU --===//
//
// chooseBF16Tile, chooseFP8Tile and chooseMXFP4Tile are measurements written
// down as rules
// (the kernel bench, bench/grouped_matmul.cpp; the figures are in their
// comments); these tests pin them at the benchmark models' shapes.
// They call no CUDA API, so they run everywhere the CUDA runtime builds, CI's
// machines without a GPU included.
//
//===----------------------------------------------------------------------===//

#include "LinearBF16FewRows.h"
#include "Tuning.h"

#include <gtest/gtest.h>

#include <tuple>

namespace {

using namespace moec::rt;

/// chooseBF16Tile's rule at the benchmark models' shapes. 32-row tiles for
/// gate/up projections of up to 32 rows over many experts (gpt-oss and
/// DeepSeek-V3 at T = 1024: 7 % and 3 % faster in the kernel bench, whose
/// routing is uniform) were tried; in the artifact DeepSeek-V3 at T = 1024 went
/// from 8.2 to 9.1 ms (its router is uneven, and each expert's weights are
/// streamed once per row tile), so 64-row tiles stayed. CUTLASS's 128x256 tiles
/// without clusters beat both from 32 rows (gpt-oss and DeepSeek-V3 at
/// T = 1024, skewed routing: 16-18 % faster than 64-row tiles for gate/up).
/// 64x256 pingpong tiles for gate/up below 64 rows and for unbiased projections
/// up to 1024 rows.
TEST(TileChoice, ChooseBF16TileFollowsTheMeasurements) {
  using cuda::BF16Tile;
  const bool cutlass = cuda::bf16TileAvailable(BF16Tile::Wgmma128x256);
  auto wide = [&](BF16Tile otherwise) { return cutlass ? BF16Tile::Wgmma128x256 : otherwise; };
  auto pingpong = [&](BF16Tile otherwise) { return cutlass ? BF16Tile::Wgmma64x256 : otherwise; };
  // gpt-oss's and DeepSeek-V3's gate/up at T = 1024: 32 rows over 128 and 256 experts.
  EXPECT_EQ(cuda::chooseBF16Tile(1024 * 4, 128, 2880, /*gated=*/true, /*biased=*/true),
            pingpong(BF16Tile::Tok64));
  EXPECT_EQ(cuda::chooseBF16Tile(1024 * 8, 256, 7168, /*gated=*/true, /*biased=*/false),
            pingpong(BF16Tile::Tok64));
  // Qwen3's gate/up at T = 1024 (64 rows), Mixtral's at T = 8192 (2048).
  EXPECT_EQ(cuda::chooseBF16Tile(1024 * 8, 128, 2048, /*gated=*/true, /*biased=*/false),
            wide(BF16Tile::Tok64));
  EXPECT_EQ(cuda::chooseBF16Tile(8192 * 2, 8, 4096, /*gated=*/true, /*biased=*/false),
            wide(BF16Tile::Tok64));
  // Mixtral's at T = 128: 32 rows over 8 experts; its down (K = 14336) too.
  EXPECT_EQ(cuda::chooseBF16Tile(128 * 2, 8, 4096, /*gated=*/true, /*biased=*/false),
            pingpong(BF16Tile::Tok64));
  EXPECT_EQ(cuda::chooseBF16Tile(128 * 2, 8, 14336, /*gated=*/false, /*biased=*/false),
            pingpong(BF16Tile::Tok64));
  // Down projections: DeepSeek-V3's at T = 1024 (K = 2048) and 8192 (256 rows),
  // Mixtral's at T = 8192 (2048 rows), gpt-oss's (biased) at T = 8192.
  EXPECT_EQ(cuda::chooseBF16Tile(1024 * 8, 256, 2048, /*gated=*/false, /*biased=*/false),
            pingpong(BF16Tile::Tok32));
  EXPECT_EQ(cuda::chooseBF16Tile(8192 * 8, 256, 2048, /*gated=*/false, /*biased=*/false),
            pingpong(BF16Tile::Tok64));
  EXPECT_EQ(cuda::chooseBF16Tile(8192 * 2, 8, 14336, /*gated=*/false, /*biased=*/false),
            wide(BF16Tile::Tok64));
  EXPECT_EQ(cuda::chooseBF16Tile(8192 * 4, 128, 2880, /*gated=*/false, /*biased=*/true),
            wide(BF16Tile::Tok64));
  // Qwen3's at T = 128 (8 rows over 128 experts) and decode rows.
  EXPECT_EQ(cuda::chooseBF16Tile(128 * 8, 128, 2048, /*gated=*/true, /*biased=*/false),
            BF16Tile::Tok32);
  EXPECT_EQ(cuda::chooseBF16Tile(16 * 8, 256, 7168, /*gated=*/true, /*biased=*/false),
            BF16Tile::Tok8);
}

/// chooseFP8Tile's rule at the benchmark models' shapes (the kernel bench):
/// 64x128 pingpong tiles at T = 1024 for gpt-oss, DeepSeek-V3 (32 rows per
/// expert) and Qwen3 (64), 128x128 cooperative ones for Mixtral (256) and at
/// T = 8192; the pingpong tiles from 16 slots (Qwen3 at T = 128: 8
/// rows), the decode tiles below (gpt-oss at T = 16: one row per touched
/// expert); the mma.sync tiles without offsets from 128 slots.
TEST(TileChoice, ChooseFP8TileFollowsTheMeasurements) {
  using cuda::FP8Tile;
  const bool cutlass = cuda::fp8TileAvailable(FP8Tile::Wgmma);
  auto orTok32 = [&](FP8Tile tile) { return cutlass ? tile : FP8Tile::Tok32; };
  EXPECT_EQ(cuda::chooseFP8Tile(1024 * 4, 128, 2880, 5760, true), orTok32(FP8Tile::WgmmaPingpong));
  EXPECT_EQ(cuda::chooseFP8Tile(1024 * 8, 256, 7168, 4096, true), orTok32(FP8Tile::WgmmaPingpong));
  EXPECT_EQ(cuda::chooseFP8Tile(1024 * 8, 128, 2048, 1536, true), orTok32(FP8Tile::WgmmaPingpong));
  EXPECT_EQ(cuda::chooseFP8Tile(1024 * 2, 8, 4096, 28672, true), orTok32(FP8Tile::Wgmma));
  EXPECT_EQ(cuda::chooseFP8Tile(8192 * 4, 128, 2880, 2880, true), orTok32(FP8Tile::Wgmma));
  // Without offsets (one expert: moe.linear) only the mma.sync tiles run.
  EXPECT_EQ(cuda::chooseFP8Tile(8192, 1, 2880, 2880, false), FP8Tile::Tok32);
  EXPECT_EQ(cuda::chooseFP8Tile(128 * 8, 128, 2048, 1536, true),
            cutlass ? FP8Tile::WgmmaPingpong : FP8Tile::Tok16);
  // The decode tiles up to 4 rows per touched expert below 128 slots: T = 1
  // (Qwen3's gate/up, Mixtral's gate/up), gpt-oss at T = 3 and 16 (64 slots),
  // Qwen3 at T = 2 (16), Mixtral at T = 16 (32 slots, 4 rows); their register
  // rings where K is 32 blocks deep or more over at most two blocks an SM
  // (Mixtral's down at T = 1, DeepSeek-V3's shared expert without offsets).
  EXPECT_EQ(cuda::chooseFP8Tile(8, 128, 2048, 1536, true), FP8Tile::Decode8Async);
  EXPECT_EQ(cuda::chooseFP8Tile(2, 8, 4096, 28672, true), FP8Tile::Decode8Async);
  EXPECT_EQ(cuda::chooseFP8Tile(12, 128, 2880, 5760, true), FP8Tile::Decode8Async);
  EXPECT_EQ(cuda::chooseFP8Tile(16 * 4, 128, 2880, 5760, true), FP8Tile::Decode8Async);
  EXPECT_EQ(cuda::chooseFP8Tile(16, 128, 2048, 1536, true), FP8Tile::Decode8Async);
  EXPECT_EQ(cuda::chooseFP8Tile(16 * 2, 8, 14336, 4096, true), FP8Tile::Decode8Async);
  EXPECT_EQ(cuda::chooseFP8Tile(2, 8, 14336, 4096, true), FP8Tile::Decode8);
  EXPECT_EQ(cuda::chooseFP8Tile(1, 1, 7168, 4096, false), FP8Tile::Decode8);
  // From 128 slots (Qwen3's and DeepSeek-V3's T = 16), and from 5 rows per
  // touched expert at 16 slots or more (Mixtral at T = 32), the pingpong tiles.
  EXPECT_EQ(cuda::chooseFP8Tile(16 * 8, 128, 768, 2048, true),
            cutlass ? FP8Tile::WgmmaPingpong : FP8Tile::Tok8);
  EXPECT_EQ(cuda::chooseFP8Tile(32 * 2, 8, 14336, 4096, true),
            cutlass ? FP8Tile::WgmmaPingpong : FP8Tile::Tok16);
  EXPECT_EQ(cuda::chooseFP8Tile(128 * 8, 128, 2048, 1536, false), FP8Tile::Tok16);
}

/// linearBF16's decode plan (LinearBF16FewRows.cu): the slices cover K
/// exactly, each a multiple of the 128-deep step, none empty; narrow
/// projections split K until about four blocks per SM (528) run, in at most
/// 16 slices (one thread-block cluster), wide ones (an LM head) do not split. Its signature has no row count: the plan, and so
/// every sum's order, cannot depend on M.
/// chooseMXFP4Tile's rule at the benchmark models' shapes (MOEC_BENCH_MXFP4):
/// at decode four 4-warp blocks an SM where the grid holds more than two
/// blocks an SM, two 8-warp K-split blocks where it is thinner (Mixtral's down
/// at T = 1 and 8: 64 and 256 blocks; every T = 1 but Mixtral's gate/up);
/// 16-row tiles for Mixtral at T = 64 (16 rows an expert).
TEST(TileChoice, ChooseMXFP4TileFollowsTheMeasurements) {
  using cuda::MXFP4Tile;
  // Qwen3-30B-A3B (top 8 of 128): gate/up N 1536, down N 2048.
  EXPECT_EQ(cuda::chooseMXFP4Tile(8, 128, 2048, 1536, true), MXFP4Tile::Tok8SplitTwice);
  EXPECT_EQ(cuda::chooseMXFP4Tile(8, 128, 768, 2048, false), MXFP4Tile::Tok8SplitTwice);
  EXPECT_EQ(cuda::chooseMXFP4Tile(64, 128, 2048, 1536, true), MXFP4Tile::Tok8Quad);
  EXPECT_EQ(cuda::chooseMXFP4Tile(512, 128, 768, 2048, false), MXFP4Tile::Tok8Quad);
  // Mixtral-8x7B (top 2 of 8): gate/up N 28672, down N 4096.
  EXPECT_EQ(cuda::chooseMXFP4Tile(2, 8, 4096, 28672, true), MXFP4Tile::Tok8Quad);
  EXPECT_EQ(cuda::chooseMXFP4Tile(2, 8, 14336, 4096, false), MXFP4Tile::Tok8SplitTwice);
  EXPECT_EQ(cuda::chooseMXFP4Tile(16, 8, 14336, 4096, false), MXFP4Tile::Tok8SplitTwice);
  EXPECT_EQ(cuda::chooseMXFP4Tile(128, 8, 4096, 28672, true), MXFP4Tile::Tok16);
  // gpt-oss-120b (top 4 of 128): gate/up N 5760, down N 2880.
  EXPECT_EQ(cuda::chooseMXFP4Tile(4, 128, 2880, 5760, true), MXFP4Tile::Tok8SplitTwice);
  EXPECT_EQ(cuda::chooseMXFP4Tile(32, 128, 2880, 2880, false), MXFP4Tile::Tok8Quad);
  EXPECT_EQ(cuda::chooseMXFP4Tile(256, 128, 2880, 5760, true), MXFP4Tile::Tok8Quad);
  // Prefill: the experts dequantised for CUTLASS's GEMM where the runtime has it.
  EXPECT_EQ(cuda::chooseMXFP4Tile(8192 * 4, 128, 2880, 5760, true),
            cuda::mxfp4DequantAvailable(2880, 5760) ? MXFP4Tile::DequantWgmma : MXFP4Tile::Tok64);
  EXPECT_EQ(cuda::chooseMXFP4Tile(128 * 40, 128, 2880, 5760, true), MXFP4Tile::Tok32);
}

TEST(TileChoice, LinearBF16FewRowsPlanCoversKAndFillsTheSMs) {
  // {K, N, row blocks, splits}: Qwen3's q, k/v, o, fused q/k/v and LM head,
  // gpt-oss's K = 2880, and K shorter than one step.
  for (auto [k, n, rowBlocks, splits] :
       {std::tuple<int64_t, int64_t, int64_t, int64_t>{2048, 4096, 64, 8},
        {2048, 512, 8, 16},
        {4096, 2048, 32, 16},
        {2048, 5120, 80, 6},
        {2048, 151936, 2374, 1},
        {2880, 1000, 16, 12},
        {4096, 1024, 16, 16},
        {8, 8, 1, 1}}) {
    SCOPED_TRACE("K " + std::to_string(k) + ", N " + std::to_string(n));
    cuda::detail::FewRowsPlan plan = cuda::detail::planLinearBF16FewRows(k, n);
    EXPECT_EQ(plan.rowBlocks, rowBlocks);
    EXPECT_EQ(plan.splits, splits);
    EXPECT_EQ(plan.perSplit % 128, 0);
    EXPECT_GE(plan.splits * plan.perSplit, k);
    EXPECT_LT((plan.splits - 1) * plan.perSplit, k);
  }
}

} // namespace
