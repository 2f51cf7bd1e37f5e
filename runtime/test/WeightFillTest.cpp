//===- WeightFillTest.cpp - the generator of weights filled at load -------===//
//
// moec/runtime/WeightFill.h: Philox against the published answers, the normals
// against a float64 Box-Muller of the same words, their statistics, the dtype
// conversions against the host encoders, and the host image (order and
// thread count do not change a bit). The GPU's bits against these:
// WeightFillCudaTest.cu.
//
//===----------------------------------------------------------------------===//

#include "moec/runtime/Float8.h"
#include "moec/runtime/MXFP4.h"
#include "moec/runtime/WeightFill.h"

#include "WeightFillPlan.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numbers>
#include <random>
#include <string>
#include <vector>

using namespace moec::rt;

namespace {

// Random123's known-answer vectors (kat_vectors: philox4x32 10).
TEST(WeightFill, PhiloxKnownAnswers) {
  fill::Words zero = fill::philox(0, 0, 0, 0, 0, 0);
  EXPECT_EQ(zero.x[0], 0x6627e8d5u);
  EXPECT_EQ(zero.x[1], 0xe169c58du);
  EXPECT_EQ(zero.x[2], 0xbc57ac4cu);
  EXPECT_EQ(zero.x[3], 0x9b00dbd8u);
  fill::Words ones = fill::philox(~0u, ~0u, ~0u, ~0u, ~0u, ~0u);
  EXPECT_EQ(ones.x[0], 0x408f276du);
  EXPECT_EQ(ones.x[1], 0x41c83b0eu);
  EXPECT_EQ(ones.x[2], 0xa20bc7c6u);
  EXPECT_EQ(ones.x[3], 0x6d5451fdu);
  fill::Words pi = fill::philox(0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u,
                                0xa4093822u, 0x299f31d0u);
  EXPECT_EQ(pi.x[0], 0xd16cfe09u);
  EXPECT_EQ(pi.x[1], 0x94fdccebu);
  EXPECT_EQ(pi.x[2], 0x5001e420u);
  EXPECT_EQ(pi.x[3], 0x24126ea1u);
}

/// Box-Muller of the same words in float64 with libm: the scalar reference.
void referenceNormals(uint64_t seed, uint64_t stream, uint64_t group, double out[4]) {
  fill::Words w = fill::philox(static_cast<uint32_t>(group), static_cast<uint32_t>(group >> 32),
                               static_cast<uint32_t>(stream), static_cast<uint32_t>(stream >> 32),
                               static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
  for (int pair = 0; pair < 2; ++pair) {
    uint32_t w1 = w.x[2 * pair], w2 = w.x[2 * pair + 1];
    double u1 = ((w1 >> 8) + 1.0) * 0x1p-24;
    double theta = 2 * std::numbers::pi * ((w2 >> 30) + ((w2 >> 6) & 0xFFFFFF) * 0x1p-24) / 4;
    double r = std::sqrt(-2 * std::log(u1));
    out[2 * pair] = r * std::cos(theta);
    out[2 * pair + 1] = r * std::sin(theta);
  }
}

TEST(WeightFill, NormalsFollowFloat64BoxMuller) {
  double worst = 0;
  for (uint64_t group = 0; group < (1u << 18); ++group) {
    float z[4];
    double expected[4];
    fill::normals(0x1234567890abcdefull, 77, group * 7919, z);
    referenceNormals(0x1234567890abcdefull, 77, group * 7919, expected);
    for (int i = 0; i < 4; ++i)
      worst = std::max(worst, std::fabs(z[i] - expected[i]) / (1 + std::fabs(expected[i])));
  }
  // The float path's log and sin/cos polynomials: a few f32 ulps.
  EXPECT_LT(worst, 2e-6);
}

TEST(WeightFill, LargeFillHasTheDeviation) {
  constexpr uint64_t kCount = uint64_t{1} << 22;
  std::vector<unsigned char> image(4 * kCount);
  moec_weight_fill f{};
  f.count = kCount;
  f.kind = MOEC_FILL_NORMAL;
  f.dtype = MOEC_FILL_F32;
  f.value = 0.02f;
  f.stream = weightStream("model.layers.0.mlp.experts.gate_up_proj", 39);
  fillWeightRange(f, 42, image.data(), 0, kCount);
  const float *values = reinterpret_cast<const float *>(image.data());
  double sum = 0, squares = 0, fourth = 0, largest = 0;
  for (uint64_t i = 0; i < kCount; ++i) {
    double z = values[i] / 0.02;
    sum += z;
    squares += z * z;
    fourth += z * z * z * z;
    largest = std::max(largest, std::fabs(z));
  }
  double mean = sum / kCount, variance = squares / kCount - mean * mean;
  // Standard errors over 4 Mi normals: mean 5e-4, deviation 3.5e-4, kurtosis 2.4e-3.
  EXPECT_NEAR(mean, 0, 3e-3);
  EXPECT_NEAR(std::sqrt(variance), 1, 2e-3);
  EXPECT_NEAR(fourth / kCount, 3, 2e-2);
  EXPECT_LT(largest, 6);      // u1 >= 2^-24 bounds |z| by 5.77
  EXPECT_GT(largest, 4.5);    // and the tails are there
}

// An expert-parallel rank's shard (fill.first = rank * count) holds the same
// values as its slice of the whole tensor's fill: one random model, however
// many ranks share it.
TEST(WeightFill, ShardsContinueTheWholeTensor) {
  constexpr uint64_t kCount = 4 * 1000, kRanks = 4, kShard = kCount / kRanks;
  moec_weight_fill whole{};
  whole.count = kCount;
  whole.kind = MOEC_FILL_NORMAL;
  whole.dtype = MOEC_FILL_BF16;
  whole.value = 0.5f;
  whole.stream = weightStream("experts.down_proj", 17);
  std::vector<unsigned char> all(2 * kCount), shards(2 * kCount, 0xFF);
  fillWeightRange(whole, 7, all.data(), 0, kCount);
  for (uint64_t rank = 0; rank < kRanks; ++rank) {
    moec_weight_fill shard = whole;
    shard.count = kShard;
    shard.first = rank * kShard;
    shard.offset = 2 * rank * kShard;
    fillWeightRange(shard, 7, shards.data(), 0, kShard);
    EXPECT_EQ(fill::value(shard, 7, 3), fill::value(whole, 7, rank * kShard + 3));
  }
  EXPECT_EQ(all, shards);
}

TEST(WeightFill, StreamsAndSeedsDiffer) {
  float a[4], b[4], c[4];
  fill::normals(1, 2, 3, a);
  fill::normals(1, 3, 3, b);
  fill::normals(2, 2, 3, c);
  EXPECT_NE(std::memcmp(a, b, sizeof(a)), 0);
  EXPECT_NE(std::memcmp(a, c, sizeof(a)), 0);
  EXPECT_NE(weightStream("a", 1), weightStream("b", 1));
}

TEST(WeightFill, ConversionsMatchTheHostEncoders) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 2000000; ++i) {
    uint32_t word = bits(rng);
    float value;
    std::memcpy(&value, &word, 4);
    if (!std::isfinite(value))
      continue;
    // Finite e4m3 range and below, where the fills land.
    float scaled = std::ldexp(std::fmod(value, 1.0f), static_cast<int>(word % 24) - 14);
    ASSERT_EQ(fill::toE4M3(scaled), encodeE4M3(scaled)) << scaled;
    ASSERT_EQ(fill::toE4M3(value), encodeE4M3(value)) << value;
    uint32_t rounded = static_cast<uint32_t>(fill::toBF16(value)) << 16;
    float back;
    std::memcpy(&back, &rounded, 4);
    if (!std::isfinite(back))
      continue; // beyond bf16's largest finite: no fill comes near
    // Nearest: no bf16 lies strictly closer, ties to an even last bit.
    double error = std::fabs(static_cast<double>(back) - value);
    for (int step : {-1, 1}) {
      uint32_t other = rounded + static_cast<uint32_t>(step * 0x10000);
      float neighbour;
      std::memcpy(&neighbour, &other, 4);
      if (std::isfinite(neighbour)) {
        double theirs = std::fabs(static_cast<double>(neighbour) - value);
        ASSERT_TRUE(error < theirs || (error == theirs && (rounded & 0x10000) == 0)) << value;
      }
    }
  }
  for (float edge : {448.0f, 464.0f, 1e30f, -500.0f, 0x1p-10f, 0x1.8p-10f, 0x1p-9f, 0x1.7fp-7f})
    EXPECT_EQ(fill::toE4M3(edge), encodeE4M3(edge)) << edge;
}

TEST(WeightFill, HostImageIsIndependentOfThreadsAndOrder) {
  WeightFillPlan p = makeWeightFillPlan();
  std::vector<unsigned char> one(p.plan.image_bytes, 0xAB), many(p.plan.image_bytes, 0xCD);
  fillWeightImage(p.plan, p.stored.data(), p.stored.size(), one.data(), 1);
  fillWeightImage(p.plan, p.stored.data(), p.stored.size(), many.data(), 7);
  ASSERT_EQ(one, many);
  // Stored bytes copied, zeros between the weights, constants in their dtype.
  EXPECT_EQ(std::memcmp(one.data() + 256, p.stored.data() + 256, 768), 0);
  for (uint64_t i = 0; i < 256; ++i)
    ASSERT_EQ(one[i], 0);
  float first;
  std::memcpy(&first, one.data() + p.fills[4].offset + 4 * 4098, 4);
  EXPECT_EQ(first, 1.0f);
  EXPECT_EQ(one[p.fills[6].offset + 1030], encodeE4M3(0.3125));
  EXPECT_EQ(one[p.plan.image_bytes - 1], 0);
  // A fill in pieces, back to front: the same bits.
  const moec_weight_fill &bf16 = p.fills[2];
  std::vector<unsigned char> pieces(p.plan.image_bytes, 0);
  for (uint64_t end = bf16.count; end > 0;) {
    uint64_t begin = end > 12345 ? end - 12345 : 0;
    fillWeightRange(bf16, p.plan.seed, pieces.data(), begin, end);
    end = begin;
  }
  EXPECT_EQ(std::memcmp(pieces.data() + bf16.offset, one.data() + bf16.offset, 2 * bf16.count),
            0);
  // The bf16 copy of a weight rounds the f32 values of the same name.
  moec_weight_fill f32 = bf16;
  f32.dtype = MOEC_FILL_F32;
  std::vector<unsigned char> wide(bf16.offset + 4 * bf16.count);
  fillWeightRange(f32, p.plan.seed, wide.data(), 0, bf16.count);
  for (uint64_t i = 0; i < bf16.count; i += 997) {
    float value;
    std::memcpy(&value, wide.data() + bf16.offset + 4 * i, 4);
    uint16_t half;
    std::memcpy(&half, one.data() + bf16.offset + 2 * i, 2);
    ASSERT_EQ(half, fill::toBF16(value));
  }
  // e4m3 codes of deviation 64: finite, spread over the range.
  int largest = 0;
  for (uint64_t i = 0; i < p.fills[3].count; ++i) {
    uint8_t code = one[p.fills[3].offset + i];
    ASSERT_NE(code & 0x7F, 0x7F);
    largest = std::max(largest, code & 0x7F);
  }
  EXPECT_GE(largest, encodeE4M3(256));
}

// MXFP4 fills: e2m1 codes two a byte (code 2j in the low nibble) that are
// MXFP4.h's encoding of the f32 normals, every code drawn; the e8m0 constant
// is the power of two's exponent byte.
TEST(WeightFill, MXFP4FillsAreTheHostEncoding) {
  WeightFillPlan p = makeWeightFillPlan();
  std::vector<unsigned char> image(p.plan.image_bytes, 0x77);
  fillWeightImage(p.plan, p.stored.data(), p.stored.size(), image.data(), 3);
  const moec_weight_fill &codes = p.fills[7], &scales = p.fills[8];
  ASSERT_EQ(codes.dtype, MOEC_FILL_E2M1);
  std::vector<int> seen(16, 0);
  for (uint64_t i = 0; i < codes.count; ++i) {
    uint8_t code = (image[codes.offset + i / 2] >> (4 * (i % 2))) & 0xF;
    float value = fill::value(codes, p.plan.seed, i);
    ASSERT_EQ(code, mxfp4::encodeE2M1(value)) << i << ": " << value;
    ++seen[code];
  }
  for (int c = 0; c < 16; ++c)
    EXPECT_GT(seen[c], 0) << "code " << c;
  EXPECT_EQ(image[codes.offset + codes.count / 2] >> 4, 0); // past the odd count: zero
  for (uint64_t i = 0; i < scales.count; ++i)
    ASSERT_EQ(image[scales.offset + i], 120); // 2^-7
  // Every code of the host encoder at and around its midpoints.
  for (float v : {0.0f, 0.25f, 0.2500001f, 0.75f, 0.7499999f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f,
                  5.0000005f, 6.0f, 100.0f, -0.25f, -0.3f, -1.75f, -5.0f, -7.0f})
    EXPECT_EQ(fill::toE2M1(v), mxfp4::encodeE2M1(v)) << v;
}

} // namespace
