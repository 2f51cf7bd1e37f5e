//===- MXFP4ExpertsTest.cpp - gpt-oss's MXFP4 blocks as moe.layer's codes ----===//
//
// unpackMXFP4 against the layout written here: gpt-oss's `_blocks` hold code 2j
// of a 32-block in byte j's low nibble and 2j+1 in its high nibble (what
// transformers' convert_moe_packed_tensors reads), one scale byte per block.
//
//===----------------------------------------------------------------------===//

#include "MXFP4Experts.h"

#include <gtest/gtest.h>

#include <vector>

using moec::checkpoint::MXFP4Experts;
using moec::checkpoint::unpackMXFP4;

namespace {

/// Two rows of K = 35 (two blocks of 16 bytes each): code i of row r is
/// (3i + r) % 16, zero past K.
struct Rows {
  static constexpr int64_t k = 35, rows = 2;
  std::vector<char> blocks = std::vector<char>(rows * 32, 0), scales = {127, 3, (char)200, 0};
  Rows() {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < k; ++i)
        blocks[r * 32 + i / 2] |= static_cast<char>(code(r, i) << (i % 2 ? 4 : 0));
  }
  static int code(int64_t r, int64_t i) { return (3 * i + r) % 16; }
};

TEST(MXFP4Experts, UnpacksLowNibbleFirst) {
  Rows in;
  std::string why;
  std::optional<MXFP4Experts> out = unpackMXFP4(in.blocks, in.scales, Rows::rows, Rows::k, why);
  ASSERT_TRUE(out) << why;
  ASSERT_EQ(out->codes.size(), size_t(Rows::rows * Rows::k));
  for (int64_t r = 0; r < Rows::rows; ++r)
    for (int64_t i = 0; i < Rows::k; ++i)
      EXPECT_EQ(out->codes[r * Rows::k + i], Rows::code(r, i)) << r << ", " << i;
  EXPECT_EQ(out->scales, in.scales);
}

TEST(MXFP4Experts, RejectsACodePastK) {
  Rows in;
  in.blocks[32 + 17] = 0x10; // row 1, column 35: past K
  std::string why;
  EXPECT_FALSE(unpackMXFP4(in.blocks, in.scales, Rows::rows, Rows::k, why));
  EXPECT_EQ(why, "holds a nonzero code past the row's 35 columns (row 1, column 35)");
}

TEST(MXFP4Experts, RejectsTheNaNScale) {
  Rows in;
  in.scales[3] = static_cast<char>(0xFF);
  std::string why;
  EXPECT_FALSE(unpackMXFP4(in.blocks, in.scales, Rows::rows, Rows::k, why));
  EXPECT_EQ(why, "holds the e8m0 NaN scale 0xFF (row 1, block 1)");
}

} // namespace
