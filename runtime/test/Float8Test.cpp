//===- Float8Test.cpp - e4m3 encoding and the CPU FP8 kernels ----------------===//
//
// The e4m3 codec against values derived by hand from the format, and the CPU
// FP8 kernels (quantizeE4M3, groupedMatmulFP8) against a float64 reference
// written from docs/dialect.md: random inputs, NaN-poisoned outputs, K and N
// that span whole 128-blocks and a partial one, idle experts and a sentinel
// tail that must stay unwritten.
//
//===----------------------------------------------------------------------===//

#include "moec/runtime/Float8.h"
#include "moec/runtime/cpu/MoEKernels.h"

#include "TestUtil.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

using namespace moec::rt;
using moec::rt::test::randomVector;

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

TEST(Float8, DecodesTheFormatsLandmarks) {
  EXPECT_EQ(decodeE4M3(0x00), 0.0f);
  EXPECT_TRUE(std::signbit(decodeE4M3(0x80)));
  EXPECT_EQ(decodeE4M3(0x01), std::ldexp(1.0f, -9)); // smallest subnormal
  EXPECT_EQ(decodeE4M3(0x07), 7 * std::ldexp(1.0f, -9));
  EXPECT_EQ(decodeE4M3(0x08), std::ldexp(1.0f, -6)); // smallest normal
  EXPECT_EQ(decodeE4M3(0x38), 1.0f);
  EXPECT_EQ(decodeE4M3(0x39), 1.125f);
  EXPECT_EQ(decodeE4M3(0x7E), 448.0f);
  EXPECT_EQ(decodeE4M3(0xFE), -448.0f);
  EXPECT_TRUE(std::isnan(decodeE4M3(0x7F)));
  EXPECT_TRUE(std::isnan(decodeE4M3(0xFF)));
}

TEST(Float8, EveryFiniteCodeRoundTripsAndCodesAreOrdered) {
  for (int code = 0; code < 256; ++code) {
    if ((code & 0x7F) == 0x7F)
      continue;
    EXPECT_EQ(encodeE4M3(decodeE4M3(static_cast<uint8_t>(code))), code) << "code " << code;
    if ((code & 0x7F) < 0x7E && code < 0x80) // positive codes increase with the value
      EXPECT_LT(decodeE4M3(static_cast<uint8_t>(code)), decodeE4M3(static_cast<uint8_t>(code + 1)));
  }
}

TEST(Float8, RoundsToNearestTiesToEvenAndSaturates) {
  EXPECT_EQ(encodeE4M3(1.0625), 0x38);   // midway 1.0 / 1.125: to the even 1.0
  EXPECT_EQ(encodeE4M3(1.1875), 0x3A);   // midway 1.125 / 1.25: to the even 1.25
  EXPECT_EQ(encodeE4M3(1.07), 0x39);     // above the midpoint
  EXPECT_EQ(encodeE4M3(1.9375), 0x40);   // midway 1.875 / 2: carries into the exponent
  EXPECT_EQ(encodeE4M3(std::ldexp(1.0, -10)), 0x00); // midway 0 / 2^-9: to 0
  EXPECT_EQ(encodeE4M3(3 * std::ldexp(1.0, -10)), 0x02); // midway 2^-9 / 2^-8: to the even 2^-8
  EXPECT_EQ(encodeE4M3(464.0), 0x7E);    // past 448: saturates, no infinity in e4m3fn
  EXPECT_EQ(encodeE4M3(1e9), 0x7E);
  EXPECT_EQ(encodeE4M3(-1e9), 0xFE);
  EXPECT_EQ(encodeE4M3(std::numeric_limits<double>::infinity()), 0x7E);
  EXPECT_EQ(encodeE4M3(std::nan("")), 0x7F);
  EXPECT_EQ(encodeE4M3(-0.0), 0x80);
}

class Float8Kernels : public ::testing::TestWithParam<unsigned> {
protected:
  cpu::ThreadPool pool{GetParam()};
  std::mt19937 rng{77};
};

/// quantizeE4M3 against the definition: per row and 128-group, scale =
/// f32(max(amax / 448, 1e-12)), q = e4m3(x / scale); rows past `rows` untouched.
TEST_P(Float8Kernels, QuantizeMatchesItsDefinition) {
  const int64_t rows = 5, k = 300, groups = 3, allocated = rows + 2;
  std::vector<float> x = randomVector(allocated * k, rng, 3.0f);
  for (int64_t i = 128; i < 256; ++i)
    x[2 * k + i] = 0.0f; // an all-zero group: the 1e-12 guard, q all zero
  std::vector<uint8_t> q(allocated * k, 0xAB);
  std::vector<float> scales(allocated * groups, kNaN);
  cpu::quantizeE4M3(pool, x.data(), rows, k, q.data(), scales.data());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t g = 0; g < groups; ++g) {
      double amax = 0;
      for (int64_t i = g * 128; i < std::min<int64_t>(k, g * 128 + 128); ++i)
        amax = std::max(amax, std::fabs(double(x[r * k + i])));
      float scale = static_cast<float>(std::max(amax / 448.0, 1e-12));
      ASSERT_EQ(scales[r * groups + g], scale) << "row " << r << " group " << g;
      for (int64_t i = g * 128; i < std::min<int64_t>(k, g * 128 + 128); ++i) {
        ASSERT_EQ(q[r * k + i], encodeE4M3(double(x[r * k + i]) / scale));
        // The group's largest magnitude lands on 448 (up to rounding of the scale).
        ASSERT_LE(std::fabs(decodeE4M3(q[r * k + i])), 448.0f);
      }
    }
  for (int64_t i = rows * k; i < allocated * k; ++i)
    ASSERT_EQ(q[i], 0xAB) << "row past `rows` written";
}

/// groupedMatmulFP8 against float64 sums of the dequantised operands.
TEST_P(Float8Kernels, GroupedMatmulMatchesFloat64OnPartialBlocks) {
  const int64_t E = 4, K = 200, N = 272, kBlocks = 2, nBlocks = 3;
  const std::vector<int32_t> offsets = {0, 6, 6, 9}; // expert 0 and 2 idle
  const int64_t valid = 9, S = valid + 3;
  std::vector<float> x = randomVector(S * K, rng), bias = randomVector(E * N, rng);
  std::vector<uint8_t> lq(S * K), wq(E * N * K);
  std::vector<float> lscale(S * kBlocks), wscale(E * nBlocks * kBlocks);
  cpu::quantizeE4M3(pool, x.data(), S, K, lq.data(), lscale.data());
  std::uniform_int_distribution<int> code(0, 0x7E);
  for (uint8_t &w : wq)
    w = static_cast<uint8_t>(code(rng) | (code(rng) & 1 ? 0x80 : 0));
  std::uniform_real_distribution<float> positive(1e-3f, 4e-3f);
  for (float &s : wscale)
    s = positive(rng);
  for (int64_t i = valid * kBlocks; i < S * kBlocks; ++i)
    lscale[i] = kNaN; // the sentinel tail: must never be read
  for (const cpu::Epilogue &epilogue :
       {cpu::Epilogue{}, cpu::Epilogue{true, cpu::ActivationKind::SiLU,
                                       cpu::GateUpLayout::Concatenated}}) {
    int64_t width = epilogue.enabled ? N / 2 : N;
    std::vector<float> out(S * width, kNaN);
    cpu::groupedMatmulFP8(pool, lq.data(), lscale.data(), K, wq.data(), wscale.data(), E, N,
                          offsets.data(), bias.data(), epilogue, out.data());
    int64_t e = 0;
    for (int64_t r = 0; r < valid; ++r) {
      while (r >= offsets[e])
        ++e;
      std::vector<double> acc(N);
      for (int64_t j = 0; j < N; ++j) {
        double sum = bias[e * N + j];
        for (int64_t i = 0; i < K; ++i)
          sum += double(decodeE4M3(lq[r * K + i])) * lscale[r * kBlocks + i / 128] *
                 decodeE4M3(wq[(e * N + j) * K + i]) *
                 wscale[(e * nBlocks + j / 128) * kBlocks + i / 128];
        acc[j] = sum;
      }
      for (int64_t j = 0; j < width; ++j) {
        double want = acc[j];
        if (epilogue.enabled) {
          double g = acc[j], u = acc[N / 2 + j];
          want = g / (1 + std::exp(-g)) * u;
        }
        ASSERT_NEAR(out[r * width + j], want, 1e-4 + 1e-4 * std::fabs(want))
            << "row " << r << " column " << j << " epilogue " << epilogue.enabled;
      }
    }
    for (int64_t i = valid * width; i < S * width; ++i)
      ASSERT_TRUE(std::isnan(out[i])) << "sentinel row element " << i << " was written";
  }
}

/// One FP8 GEMM of the recipe (rows per token and 128 columns, weights in
/// 128x128 blocks, both e4m3) against the float64 product of the unquantised
/// operands: DeepGEMM's difference 1 - 2·Σxy / (Σx² + Σy²) at most 1e-3
/// (issue 34; e4m3's 3 mantissa bits give about 7e-4). A wrong scale or block
/// index gives tens of percent. Shapes: Qwen3's gate/up and down, and K, N
/// with a partial block.
TEST_P(Float8Kernels, OneGemmWithinDeepGEMMsBoundOfTheUnquantisedProduct) {
  struct Shape {
    int64_t m, k, n;
  };
  for (Shape shape : {Shape{64, 2048, 1536}, Shape{64, 768, 2048}, Shape{33, 200, 272}}) {
    const int64_t m = shape.m, k = shape.k, n = shape.n;
    const int64_t kBlocks = (k + 127) / 128, nBlocks = (n + 127) / 128;
    std::vector<float> x = randomVector(m * k, rng), w = randomVector(n * k, rng, 0.02f);
    std::vector<uint8_t> xq(m * k), wq(n * k);
    std::vector<float> xs(m * kBlocks), ws(nBlocks * kBlocks);
    cpu::quantizeE4M3(pool, x.data(), m, k, xq.data(), xs.data());
    // The weights' 128x128 blocks, as moe-quantize-experts-fp8 casts them.
    for (int64_t bn = 0; bn < nBlocks; ++bn)
      for (int64_t bk = 0; bk < kBlocks; ++bk) {
        double amax = 0;
        for (int64_t j = bn * 128; j < std::min(n, bn * 128 + 128); ++j)
          for (int64_t i = bk * 128; i < std::min(k, bk * 128 + 128); ++i)
            amax = std::max(amax, std::fabs(double(w[j * k + i])));
        float scale = static_cast<float>(std::max(amax / kE4M3Max, 1e-12));
        ws[bn * kBlocks + bk] = scale;
        for (int64_t j = bn * 128; j < std::min(n, bn * 128 + 128); ++j)
          for (int64_t i = bk * 128; i < std::min(k, bk * 128 + 128); ++i)
            wq[j * k + i] = encodeE4M3(double(w[j * k + i]) / scale);
      }
    const int32_t offsets[] = {static_cast<int32_t>(m)};
    std::vector<float> out(m * n, kNaN);
    cpu::groupedMatmulFP8(pool, xq.data(), xs.data(), k, wq.data(), ws.data(), 1, n, offsets,
                          nullptr, cpu::Epilogue{}, out.data());
    double xy = 0, xx = 0, yy = 0;
    for (int64_t r = 0; r < m; ++r)
      for (int64_t j = 0; j < n; ++j) {
        double exact = 0;
        for (int64_t i = 0; i < k; ++i)
          exact += double(x[r * k + i]) * double(w[j * k + i]);
        double got = out[r * n + j];
        ASSERT_TRUE(std::isfinite(got)) << "row " << r << ", column " << j << " not written";
        xy += got * exact, xx += got * got, yy += exact * exact;
      }
    double diff = 1.0 - 2.0 * xy / (xx + yy);
    RecordProperty("deepgemm_diff_k" + std::to_string(k), std::to_string(diff));
    EXPECT_LE(diff, 1e-3) << "M " << m << ", K " << k << ", N " << n;
    EXPECT_GT(diff, 1e-5) << "M " << m << ", K " << k << ", N " << n
                          << ": no quantisation error at all, so the recipe did not run";
  }
}

INSTANTIATE_TEST_SUITE_P(Threads, Float8Kernels, ::testing::Values(1u, 3u));

} // namespace
