//===- MXFP4Test.cpp - the MXFP4 format's host rules --------------------------===//
//
// moec/runtime/MXFP4.h against definitions written here: e2m1 rounding against
// a search of the nearest code (ties to the even code), the scale rule against
// 2^ceil(log2(amax / 6)) of the f32 quotient, the packed layout against the
// nibble order gpt-oss's checkpoints use.
//
//===----------------------------------------------------------------------===//

#include "moec/runtime/MXFP4.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace mx = moec::rt::mxfp4;

namespace {

const double kMagnitudes[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};

/// The code nearest to `value` by search: ties to the even code, beyond 6 the
/// largest, the sign kept.
int nearestCode(double value) {
  double m = std::fabs(value);
  int best = 0;
  for (int c = 1; c < 8; ++c) {
    double d = std::fabs(kMagnitudes[c] - m), bestD = std::fabs(kMagnitudes[best] - m);
    if (d < bestD || (d == bestD && c % 2 == 0))
      best = c;
  }
  return (std::signbit(value) ? 8 : 0) | best;
}

TEST(MXFP4, DecodesEveryCodeAsTransformersTableDoes) {
  for (int code = 0; code < 16; ++code) {
    double want = (code & 8 ? -1.0 : 1.0) * kMagnitudes[code & 7];
    EXPECT_EQ(mx::decodeE2M1(static_cast<uint8_t>(code)), want) << code;
    EXPECT_EQ(std::signbit(mx::decodeE2M1(static_cast<uint8_t>(code))), code >= 8) << code;
    // Only the low nibble is the code.
    EXPECT_EQ(mx::decodeE2M1(static_cast<uint8_t>(0xA0 | code)), want) << code;
  }
}

TEST(MXFP4, EncodesToTheNearestCodeTiesToEven) {
  // Every multiple of 1/16 in [-8, 8] (every midpoint is one), then random values.
  for (int i = -128; i <= 128; ++i) {
    double value = i / 16.0;
    EXPECT_EQ(mx::encodeE2M1(value), nearestCode(value)) << value;
  }
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> uniform(-7.0, 7.0);
  for (int i = 0; i < 10000; ++i) {
    double value = uniform(rng);
    ASSERT_EQ(mx::encodeE2M1(value), nearestCode(value)) << value;
  }
  // The ties by name: 0.25 -> 0, 0.75 -> 1, 1.25 -> 1, 1.75 -> 2, 2.5 -> 2,
  // 3.5 -> 4, 5 -> 4; past 6 saturates; -0.1 is -0.
  EXPECT_EQ(mx::encodeE2M1(0.25), 0);
  EXPECT_EQ(mx::encodeE2M1(0.75), 2);
  EXPECT_EQ(mx::encodeE2M1(1.25), 2);
  EXPECT_EQ(mx::encodeE2M1(1.75), 4);
  EXPECT_EQ(mx::encodeE2M1(2.5), 4);
  EXPECT_EQ(mx::encodeE2M1(3.5), 6);
  EXPECT_EQ(mx::encodeE2M1(5.0), 6);
  EXPECT_EQ(mx::encodeE2M1(1e30), 7);
  EXPECT_EQ(mx::encodeE2M1(-1e30), 15);
  EXPECT_EQ(mx::encodeE2M1(-0.1), 8);
}

TEST(MXFP4, ScaleIsAmaxOverSixRoundedUpToAPowerOfTwo) {
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  std::uniform_int_distribution<int> exponent(-100, 100);
  for (int i = 0; i < 10000; ++i) {
    float amax = std::ldexp(mantissa(rng), exponent(rng));
    float d = amax / 6.0f;
    int want = static_cast<int>(std::ceil(std::log2(static_cast<double>(d)))) + mx::kScaleBias;
    uint8_t scale = mx::scaleFor(amax);
    ASSERT_EQ(scale, want) << amax;
    // So the block's largest value is at most 6 (at most rounded to it).
    ASSERT_LE(std::fabs(mx::decodeE2M1(mx::quantize(amax, scale))), 6.0f);
    ASSERT_EQ(mx::quantize(amax, scale) & 7, mx::encodeE2M1(amax / std::ldexp(1.0, want - 127)));
  }
  EXPECT_EQ(mx::scaleFor(6.0f), 127);  // 6 / 6 = 1 = 2^0
  EXPECT_EQ(mx::scaleFor(6.01f), 128); // just above: the next power
  EXPECT_EQ(mx::scaleFor(3.0f), 126);  // 0.5
  EXPECT_EQ(mx::scaleFor(0.0f), 0);
  EXPECT_EQ(mx::quantize(-1.0f, 0), 8); // an all-zero block's codes keep the sign
  EXPECT_EQ(mx::decodeE8M0(127), 1.0f);
  EXPECT_EQ(mx::decodeE8M0(0), std::ldexp(1.0f, -127));
  EXPECT_EQ(mx::decodeE8M0(254), std::ldexp(1.0f, 127));
  EXPECT_TRUE(std::isnan(mx::decodeE8M0(255)));
}

TEST(MXFP4, PacksRowsAsGptOssBlocks) {
  // K = 35: two blocks of 16 bytes; code i in byte i/2, low nibble when even.
  const int64_t k = 35;
  std::vector<uint8_t> codes(k);
  for (int64_t i = 0; i < k; ++i)
    codes[i] = static_cast<uint8_t>((i * 7 + 3) % 16);
  ASSERT_EQ(mx::packedRowBytes(k), 32);
  ASSERT_EQ(mx::packedRowBytes(32), 16);
  ASSERT_EQ(mx::packedRowBytes(1), 16);
  std::vector<uint8_t> packed(32, 0xEE);
  mx::packRow(codes.data(), k, packed.data());
  for (int64_t i = 0; i + 1 < k; i += 2)
    EXPECT_EQ(packed[i / 2], codes[i] | (codes[i + 1] << 4)) << i;
  EXPECT_EQ(packed[17], codes[34]); // the last code alone, its high nibble zero
  for (int64_t b = 18; b < 32; ++b)
    EXPECT_EQ(packed[b], 0) << b; // the pad past K
  for (int64_t i = 0; i < k; ++i)
    EXPECT_EQ(mx::codeAt(packed.data(), i), codes[i]) << i;
}

} // namespace
