//===- E4M3EncoderTest.cu - the device's e4m3 quotient, run on the host ---===//
//
// E4M3Encoder (runtime/src/cuda/E4M3.cuh) divides by a group's scale with a
// reciprocal and FMA remainders, not the division in double that defines the
// codes (Float8.h). Its arithmetic is IEEE f32 (multiply, FMA, a correctly
// rounded division for the reciprocal) and the e4m3 cvt, the same bits on the
// host as on the device: so it is checked here, without a GPU, against the
// definition on every e4m3 value and midpoint times thousands of scales, the
// neighbours of each, random groups, and the special values.
//
//===----------------------------------------------------------------------===//

#include "E4M3.cuh"
#include "moec/runtime/Float8.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace {

using moec::rt::decodeE4M3;
using moec::rt::encodeE4M3;
using moec::rt::cuda::device::E4M3Encoder;
using moec::rt::cuda::device::e4m3Scale;

uint8_t definition(float v, float scale) { return encodeE4M3(static_cast<double>(v) / scale); }

float stepUlps(float v, int ulps) {
  int32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  bits += ulps;
  float out;
  std::memcpy(&out, &bits, sizeof out);
  return out;
}

/// Scales of every kind: powers of two, all-ones mantissas, the 1e-12 floor,
/// and random ones over the exponents a group's amax / 448 can take.
std::vector<float> scales(std::mt19937 &rng) {
  std::vector<float> out = {1.0f,       0.5f,        1e-12f, 1.0f / 448.0f, 3.0f / 448.0f,
                            1.9999999f, 0.99999994f, 448.0f, 1e-5f,         1234.5678f};
  for (int e = -40; e <= 20; e += 3)
    out.push_back(std::ldexp(1.0f, e));
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  std::uniform_int_distribution<int> exponent(-40, 20);
  while (out.size() < 2000)
    out.push_back(std::ldexp(mantissa(rng), exponent(rng)));
  return out;
}

TEST(E4M3Encoder, MatchesTheDivisionAtEveryValueAndMidpoint) {
  std::mt19937 rng(7);
  // Each finite positive e4m3 value and the midpoint above it (464 past 448):
  // the quotients where one rounding differs from two.
  std::vector<double> targets;
  for (int code = 0; code <= 0x7E; ++code) {
    double value = decodeE4M3(static_cast<uint8_t>(code));
    double next = code < 0x7E ? decodeE4M3(static_cast<uint8_t>(code + 1)) : 480.0;
    targets.push_back(value);
    targets.push_back((value + next) / 2);
  }
  int64_t checked = 0;
  for (float scale : scales(rng)) {
    const E4M3Encoder encode(scale);
    for (double target : targets)
      for (int ulps = -4; ulps <= 4; ++ulps)
        for (float sign : {1.0f, -1.0f}) {
          float v = sign * stepUlps(static_cast<float>(target * scale), ulps);
          ASSERT_EQ(encode(v), definition(v, scale))
              << "v " << v << " scale " << scale << " (target " << target << ")";
          ++checked;
        }
  }
  EXPECT_GT(checked, 4'000'000);
}

TEST(E4M3Encoder, MatchesTheDivisionOnRandomGroups) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-30, 30);
  for (int group = 0; group < 20000; ++group) {
    // A group's values over a few decades below its largest, as activations are.
    float amax = std::ldexp(1.0f, exponent(rng));
    std::vector<float> v(128);
    float biggest = 0.0f;
    for (float &x : v) {
      x = unit(rng) * std::ldexp(amax, -static_cast<int>(rng() % 12));
      biggest = std::max(biggest, std::fabs(x));
    }
    const E4M3Encoder encode(e4m3Scale(biggest, false));
    for (float x : v)
      ASSERT_EQ(encode(x), definition(x, encode.scale()))
          << "v " << x << " scale " << encode.scale();
  }
}

/// Four codes at once (the paired cvt, the signs by mask) are the four codes.
TEST(E4M3Encoder, FourAtOnceAreFourCodes) {
  std::mt19937 rng(13);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  const float specials[] = {
      0.0f, -0.0f, 600.0f, -1e30f, std::numeric_limits<float>::infinity(), std::nanf("")};
  for (float scale : {1.0f, 0.0123f, std::numeric_limits<float>::infinity()}) {
    const E4M3Encoder encode(scale);
    for (int i = 0; i < 100000; ++i) {
      float v[4];
      for (float &x : v)
        x = rng() % 16 == 0 ? specials[rng() % 6] * scale : unit(rng) * 448.0f * scale;
      uint32_t want = uint32_t(encode(v[0])) | uint32_t(encode(v[1])) << 8 |
                      uint32_t(encode(v[2])) << 16 | uint32_t(encode(v[3])) << 24;
      ASSERT_EQ(encode.encode4(v[0], v[1], v[2], v[3]), want)
          << v[0] << " " << v[1] << " " << v[2] << " " << v[3] << " scale " << scale;
      for (int t = 0; t < 4; ++t)
        ASSERT_EQ(want >> 8 * t & 0xFF, definition(v[t], scale)) << v[t] << " scale " << scale;
    }
  }
}

/// e4m3Scale's f32 division is the CPU's double one rounded to f32 (sampled
/// here; every non-negative f32 was checked once, exhaustively).
TEST(E4M3Encoder, ScaleMatchesTheDivisionInDouble) {
  for (uint32_t bits = 0; bits < 0x7f800000u; bits += 97) {
    float amax;
    std::memcpy(&amax, &bits, sizeof amax);
    ASSERT_EQ(e4m3Scale(amax, false), static_cast<float>(std::max(amax / 448.0, 1e-12)))
        << "amax " << amax;
  }
}

TEST(E4M3Encoder, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  const E4M3Encoder one(1.0f);
  EXPECT_EQ(one(0.0f), 0x00);
  EXPECT_EQ(one(-0.0f), 0x80);
  EXPECT_EQ(one(1e-30f), 0x00);  // far below 2^-10: zero
  EXPECT_EQ(one(-1e-30f), 0x80); // with its sign
  EXPECT_EQ(one(-1e-45f), 0x80); // a subnormal f32
  EXPECT_EQ(one(500.0f), 0x7E);  // past 448: saturates
  EXPECT_EQ(one(-1e30f), 0xFE);
  EXPECT_EQ(one(inf), 0x7E); // as Float8.h: saturated, no infinity in e4m3fn
  EXPECT_EQ(one(nan), 0x7F);
  // A group holding an infinity has an infinite scale: finite values are
  // signed zeros, the infinities inf / inf, a NaN, 0x7F whatever its sign.
  const E4M3Encoder infinite(inf);
  EXPECT_EQ(infinite(3.0f), 0x00);
  EXPECT_EQ(infinite(-3.0f), 0x80);
  EXPECT_EQ(infinite(inf), 0x7F);
  EXPECT_EQ(infinite(-inf), 0x7F);
  // A group holding a NaN has a NaN scale: every code NaN.
  const E4M3Encoder notANumber(e4m3Scale(1.0f, true));
  EXPECT_TRUE(std::isnan(notANumber.scale()));
  EXPECT_EQ(notANumber(1.0f), 0x7F);
  EXPECT_EQ(notANumber(-0.0f), 0x7F);
  // The scale's floor: an all-zero group, and values of 1e-10 under it.
  const E4M3Encoder floor(e4m3Scale(0.0f, false));
  EXPECT_EQ(floor.scale(), 1e-12f);
  EXPECT_EQ(floor(0.0f), 0x00);
  EXPECT_EQ(floor(1e-10f), definition(1e-10f, 1e-12f));
  EXPECT_EQ(one.encode4(1.0f, -1.0f, 448.0f, 0.0f), 0x007EB838u); // the first code lowest
}

} // namespace
