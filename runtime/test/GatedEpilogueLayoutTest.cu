//===- GatedEpilogueLayoutTest.cu - the gated epilogue's fragment layout --===//
//
// GatedEpilogueArrayOf (GatedEpilogueCutlass.cuh) writes wgmma's accumulator
// layout out by hand instead of asking CuTe per element (~40 instructions
// per output less). This checks, on the host, that the layout it assumes is
// the one CuTe gives GatedTiledMma and GatedTiledMmaFP8 (which the kernels'
// builder must produce: static_asserts in GroupedMatmulCutlass.cu and
// GroupedMatmulFP8Cutlass.cu), so that a CUTLASS upgrade that changed it
// fails here, on every machine, not only in the GPU tests.
//
//===----------------------------------------------------------------------===//

#include "GatedEpilogueCutlass.cuh"

#include <gtest/gtest.h>

namespace {

using namespace cute;
using moec::rt::cuda::detail::grouped::GatedEpilogueArray;
using moec::rt::cuda::detail::grouped::GatedEpilogueFP8;
using moec::rt::cuda::detail::grouped::GatedTiledMma;
using moec::rt::cuda::detail::grouped::GatedTiledMmaFP8;
using moec::rt::cuda::detail::grouped::GatedTiledMmaFP8Pingpong;
using moec::rt::cuda::detail::grouped::GatedTiledMmaPingpong;

/// Every thread of `TiledMma`'s warps (`warps` of them, 16 rows each) against
/// the reading of `Epilogue` (its tile's columns).
template <typename TiledMma, typename Epilogue = GatedEpilogueArray>
void expectTheEpiloguesLayout(int warps) {
  const int rows = warps * Epilogue::kWarpRows;
  constexpr int kColumns = 2 * Epilogue::kTileOutputs;
  auto tile = make_identity_tensor(make_shape(rows, Int<kColumns>{}));
  int mismatches = 0;
  for (int thread = 0; thread < warps * 32; ++thread) {
    auto coords = TiledMma{}.get_thread_slice(thread).partition_C(tile);
    ASSERT_EQ(int(size(coords)), 4 * (kColumns / 8)) << "elements per thread";
    const int lane = thread % 32, warp = thread / 32;
    for (int i = 0; i < int(size(coords)); ++i) {
      // The epilogue's reading: element 4j + 2h + v is row lane/4 + 8h of the
      // warp's 16, column 2 (lane % 4) + 8j + v (v = 0 the gate, 1 its up).
      const int row = Epilogue::kWarpRows * warp + lane / 4 + 8 * ((i / 2) % 2);
      const int column = 2 * (lane % 4) + 8 * (i / 4) + i % 2;
      if (int(get<0>(coords(i))) != row || int(get<1>(coords(i))) != column) {
        if (++mismatches <= 5)
          ADD_FAILURE() << "thread " << thread << ", element " << i << ": CuTe puts it at ("
                        << int(get<0>(coords(i))) << ", " << int(get<1>(coords(i)))
                        << "), the epilogue reads it as (" << row << ", " << column << ")";
      }
    }
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(GatedEpilogueLayout, AccumulatorsAreWhereTheEpilogueWritesThemFrom) {
  expectTheEpiloguesLayout<GatedTiledMma>(GatedEpilogueArray::kWarps);
}

/// The pingpong tile: one warp group, 64 rows.
TEST(GatedEpilogueLayout, PingpongAccumulatorsAreWhereTheEpilogueWritesThemFrom) {
  expectTheEpiloguesLayout<GatedTiledMmaPingpong>(GatedEpilogueArray::kWarps / 2);
}

/// The FP8 tiles: e4m3 m64n128k32, 128x128 cooperative and 64x128 pingpong.
TEST(GatedEpilogueLayout, FP8AccumulatorsAreWhereTheEpilogueWritesThemFrom) {
  expectTheEpiloguesLayout<GatedTiledMmaFP8, GatedEpilogueFP8>(GatedEpilogueFP8::kWarps);
  expectTheEpiloguesLayout<GatedTiledMmaFP8Pingpong, GatedEpilogueFP8>(GatedEpilogueFP8::kWarps /
                                                                       2);
}

} // namespace
