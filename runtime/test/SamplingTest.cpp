//===- SamplingTest.cpp - the shared token rule (moec/runtime/Sampling.h) --===//
//
// The counter-based draw (pinned values, range, independence of its three
// counters, uniformity), the deterministic exp against std::exp, and the
// host's pick: greedy's first index and NaN, each kept token drawn with its
// integer weight's share of draws on a fine grid of u, top-k and top-p's cuts.
//
//===----------------------------------------------------------------------===//

#include "moec/runtime/Sampling.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <vector>

using namespace moec::rt;

namespace {

TEST(Sampling, SplitMixIsTheReferenceGenerator) {
  // The first outputs of splitmix64 seeded with 0 (its state advances by the
  // golden gamma, so output n is splitmix64(n · gamma) here).
  EXPECT_EQ(splitmix64(0), 0xE220A8397B1DCDAFull);
  EXPECT_EQ(splitmix64(0x9E3779B97F4A7C15ull), 0x6E789E6AA1B965F4ull);
}

TEST(Sampling, UniformDrawsAreInRangeAndDependOnEveryCounter) {
  std::set<double> seen;
  for (uint64_t seed : {0ull, 1ull, 7ull, 0xFFFFFFFFFFFFFFFFull})
    for (uint64_t sequence = 0; sequence < 8; ++sequence)
      for (uint64_t step = 0; step < 64; ++step) {
        double u = samplingUniform(seed, sequence, step);
        ASSERT_GE(u, 0.0);
        ASSERT_LT(u, 1.0);
        EXPECT_EQ(u, samplingUniform(seed, sequence, step)); // no hidden state
        seen.insert(u);
      }
  EXPECT_EQ(seen.size(), 4u * 8u * 64u); // no two counters collide
  // Swapping sequence and step gives another draw.
  EXPECT_NE(samplingUniform(3, 1, 2), samplingUniform(3, 2, 1));
}

TEST(Sampling, UniformDrawsFillTheirBuckets) {
  constexpr int kBuckets = 64, kDraws = 1 << 18;
  std::vector<int> counts(kBuckets);
  double sum = 0.0;
  for (int i = 0; i < kDraws; ++i) {
    double u = samplingUniform(42, static_cast<uint64_t>(i % 5), static_cast<uint64_t>(i / 5));
    ++counts[static_cast<int>(u * kBuckets)];
    sum += u;
  }
  EXPECT_NEAR(sum / kDraws, 0.5, 0.005);
  double chi2 = 0.0, expected = static_cast<double>(kDraws) / kBuckets;
  for (int c : counts)
    chi2 += (c - expected) * (c - expected) / expected;
  EXPECT_LT(chi2, 120.0); // 63 degrees of freedom: p < 1e-5 above 120
}

TEST(Sampling, ExpIsExpWhereItMatters) {
  for (double x = -30.0; x <= 0.0; x += 0.0137)
    EXPECT_NEAR(samplingExp(x) / std::exp(x), 1.0, 1e-14) << x;
  EXPECT_EQ(samplingExp(0.0), 1.0);
  EXPECT_EQ(samplingExp(-31.0), 0.0);
  EXPECT_EQ(samplingExp(-std::numeric_limits<double>::infinity()), 0.0);
  EXPECT_EQ(samplingExp(std::nan("")), 0.0);
  EXPECT_EQ(samplingWeight(2.5f, 2.5f), uint64_t(1) << 40);
  EXPECT_EQ(samplingWeight(1.5f, 2.5f), static_cast<uint64_t>(std::exp(-1.0) * 0x1p40));
}

TEST(Sampling, KeysOrderTotally) {
  EXPECT_EQ(std::signbit(samplingKey(-0.0f, 1.0f)), false);
  EXPECT_EQ(samplingKey(std::nanf(""), 2.0f), -std::numeric_limits<float>::infinity());
  EXPECT_EQ(samplingKey(3.0f, 2.0f), 1.5f);
}

TEST(Sampling, GreedyTakesTheFirstOfTies) {
  std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f};
  EXPECT_EQ(greedyToken(logits.data(), 5), 1);
  logits[0] = std::nanf("");
  EXPECT_EQ(greedyToken(logits.data(), 5), 1); // NaN counts as -inf
  std::vector<float> none(4, -std::numeric_limits<float>::infinity());
  none[2] = std::nanf("");
  EXPECT_EQ(greedyToken(none.data(), 4), 0);
  SamplingScratch scratch;
  EXPECT_EQ(sampleToken(logits.data(), 5, Sampling{}, 0.99, scratch), 1); // temperature 0
}

/// Each token's count of draws over u = (i + 0.5) / N, i < N.
std::map<int64_t, int> drawsOnGrid(const std::vector<float> &logits, const Sampling &sampling,
                                   int n) {
  SamplingScratch scratch;
  std::map<int64_t, int> counts;
  for (int i = 0; i < n; ++i)
    ++counts[sampleToken(logits.data(), static_cast<int64_t>(logits.size()), sampling,
                         (i + 0.5) / n, scratch)];
  return counts;
}

TEST(Sampling, DrawsFollowTheSoftmax) {
  // Weights 1, 2, 4, 1 (ids 0..3) at temperature 1: logits log(w).
  std::vector<float> logits = {0.0f, std::log(2.0f), std::log(4.0f), 0.0f};
  Sampling sampling{1.0f, 0, 1.0f, 0};
  constexpr int kDraws = 8000;
  auto counts = drawsOnGrid(logits, sampling, kDraws);
  EXPECT_NEAR(counts[0], kDraws / 8, 2);
  EXPECT_NEAR(counts[1], kDraws / 4, 2);
  EXPECT_NEAR(counts[2], kDraws / 2, 2);
  EXPECT_NEAR(counts[3], kDraws / 8, 2);
  // The largest first, ties by id: the lowest draws pick token 2.
  SamplingScratch scratch;
  EXPECT_EQ(sampleToken(logits.data(), 4, sampling, 0.0, scratch), 2);
  EXPECT_EQ(sampleToken(logits.data(), 4, sampling, 0.999999, scratch), 3);
  // Temperature 2 flattens: weights 1, √2, 2, 1.
  sampling.temperature = 2.0f;
  counts = drawsOnGrid(logits, sampling, kDraws);
  double total = 1 + std::sqrt(2.0) + 2 + 1;
  EXPECT_NEAR(counts[2], kDraws * 2 / total, 2);
  EXPECT_NEAR(counts[1], kDraws * std::sqrt(2.0) / total, 2);
}

TEST(Sampling, TopKAndTopPCut) {
  std::vector<float> logits = {0.0f, std::log(2.0f), std::log(4.0f), 0.0f, std::log(3.0f)};
  // Sorted: 2 (4), 4 (3), 1 (2), 0 (1), 3 (1); total 11.
  Sampling topK{1.0f, 2, 1.0f, 0};
  auto counts = drawsOnGrid(logits, topK, 7000);
  EXPECT_EQ(counts.size(), 2u);
  EXPECT_NEAR(counts[2], 4000, 2);
  EXPECT_NEAR(counts[4], 3000, 2);
  // top-p 0.6 of 11: 4 + 3 = 7 >= 6.6 keeps two; 0.63 keeps two; 0.64 three.
  for (auto [p, kept] : std::vector<std::pair<float, size_t>>{{0.6f, 2}, {0.63f, 2}, {0.64f, 3},
                                                               {0.3f, 1}, {1e-6f, 1}, {1.0f, 5}}) {
    Sampling topP{1.0f, 0, p, 0};
    EXPECT_EQ(drawsOnGrid(logits, topP, 1000).size(), kept) << p;
  }
  // Both: top-p within the top 3 (total 9): 0.7 of 9 = 6.3 keeps two.
  Sampling both{1.0f, 3, 0.7f, 0};
  counts = drawsOnGrid(logits, both, 700);
  EXPECT_EQ(counts.size(), 2u);
  // A top-k past the vocabulary keeps it all.
  Sampling wide{1.0f, 100, 1.0f, 0};
  EXPECT_EQ(drawsOnGrid(logits, wide, 1000).size(), 5u);
}

TEST(Sampling, InfiniteAndNaNLogits) {
  float inf = std::numeric_limits<float>::infinity();
  std::vector<float> logits = {1.0f, inf, std::nanf(""), inf, -inf};
  // The infinite keys tie at weight 1; nothing else weighs.
  auto counts = drawsOnGrid(logits, Sampling{1.0f, 0, 1.0f, 0}, 1000);
  EXPECT_EQ(counts.size(), 2u);
  EXPECT_EQ(counts[1], 500);
  EXPECT_EQ(counts[3], 500);
  std::vector<float> hopeless = {-inf, std::nanf(""), -inf};
  counts = drawsOnGrid(hopeless, Sampling{1.0f, 0, 1.0f, 0}, 999);
  EXPECT_EQ(counts.size(), 3u); // every key -inf: equal weights
}

} // namespace
