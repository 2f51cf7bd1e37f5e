//===- DequantizeLayoutTest.cpp - DequantizeLinear's scale layouts ---------===//
//
// The one statement of which scale each DequantizeLinear element uses, shared
// by the importer, the interpreter and moe-raise-onnx: every layout's index
// for every element against a direct computation, and each refused shape.
//
//===----------------------------------------------------------------------===//

#include "moec/Dialect/ONNX/DequantizeLayout.h"

#include <gtest/gtest.h>

using moec::onnx::DequantizeLayout;

namespace {

std::optional<DequantizeLayout> layout(llvm::ArrayRef<int64_t> x, llvm::ArrayRef<int64_t> scale,
                                       std::optional<int64_t> axis,
                                       std::optional<int64_t> block, std::string &why) {
  return DequantizeLayout::get(x, scale, axis, block, why);
}

TEST(DequantizeLayout, PerTensorUsesOneScale) {
  std::string why;
  for (llvm::SmallVector<int64_t, 1> scale : {llvm::SmallVector<int64_t, 1>{}, {1}}) {
    auto l = layout({2, 3, 5}, scale, std::nullopt, std::nullopt, why);
    ASSERT_TRUE(l) << why;
    for (int64_t i = 0; i < 30; ++i)
      EXPECT_EQ(l->scaleIndex(i), 0);
  }
}

TEST(DequantizeLayout, PerAxisFollowsTheAxis) {
  std::string why;
  auto l = layout({2, 3, 5}, {3}, 1, std::nullopt, why); // axis 1: the middle coordinate
  ASSERT_TRUE(l) << why;
  for (int64_t i = 0; i < 30; ++i)
    EXPECT_EQ(l->scaleIndex(i), (i / 5) % 3) << i;
  auto last = layout({2, 3, 5}, {5}, -1, std::nullopt, why); // negative axis
  ASSERT_TRUE(last) << why;
  for (int64_t i = 0; i < 30; ++i)
    EXPECT_EQ(last->scaleIndex(i), i % 5) << i;
}

TEST(DequantizeLayout, BlockedDividesOneAxisWithAPartialBlock) {
  std::string why;
  // x [2, 3, 10], blocks of 4 along axis 2: scale [2, 3, 3], the last block partial.
  auto l = layout({2, 3, 10}, {2, 3, 3}, 2, 4, why);
  ASSERT_TRUE(l) << why;
  for (int64_t e = 0; e < 2; ++e)
    for (int64_t r = 0; r < 3; ++r)
      for (int64_t c = 0; c < 10; ++c)
        EXPECT_EQ(l->scaleIndex((e * 3 + r) * 10 + c), (e * 3 + r) * 3 + c / 4) << e << r << c;
  // Along axis 1 instead: scale [2, 1, 10].
  auto rows = layout({2, 3, 10}, {2, 1, 10}, 1, 4, why);
  ASSERT_TRUE(rows) << why;
  EXPECT_EQ(rows->scaleIndex((1 * 3 + 2) * 10 + 7), 1 * 10 + 7);
}

TEST(DequantizeLayout, RefusesScalesThatFitNoLayout) {
  std::string why;
  EXPECT_FALSE(layout({2, 3}, {2}, 1, std::nullopt, why));
  EXPECT_NE(why.find("per-axis scale"), std::string::npos) << why;
  EXPECT_FALSE(layout({2, 3}, {3}, 2, std::nullopt, why));
  EXPECT_NE(why.find("out of range"), std::string::npos) << why;
  EXPECT_FALSE(layout({2, 3, 200}, {2, 3, 2}, 2, 64, why));
  EXPECT_NE(why.find("block_size 64 along axis 2 makes 4"), std::string::npos) << why;
  EXPECT_FALSE(layout({2, 3, 200}, {3, 2}, 2, 128, why));
  EXPECT_NE(why.find("x's rank"), std::string::npos) << why;
  EXPECT_FALSE(layout({4}, {1}, 0, -2, why));
  EXPECT_NE(why.find("negative"), std::string::npos) << why;
}

} // namespace
