//===- CudaSamplingTest.cpp - the GPU's token picks against the host's -----===//
//
// cuda::greedyTokens and cuda::DeviceSampler against moec/runtime/Sampling.h's
// host pick on random logits (V = 151936, Qwen's vocabulary, and 201088,
// gpt-oss's), token outputs poisoned first, every CUDA call checked: greedy
// with ties planted at random places, temperature, top-k, top-p and both, over
// many seeds and steps; and logits of a few distinct values, where nearly
// every key ties, so the order of ties decides the token. Each row's token
// must be the host's for the same draw, exactly.
//
//===----------------------------------------------------------------------===//

#include "moec/runtime/Cuda.h"
#include "moec/runtime/Sampling.h"
#include "moec/runtime/cuda/Sampling.h"

#include "CudaTestUtil.h"
#include "TestUtil.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

using namespace moec::rt;
using namespace moec::rt::test;

namespace {

Status synchronize() { return cudaStatus(cudaDeviceSynchronize(), "sync", __FILE__, __LINE__); }

/// rows × vocab logits: normal · scale, or `levels` distinct values when not 0.
std::vector<float> randomLogits(int64_t rows, int64_t vocab, float scale, int levels,
                                std::mt19937 &rng) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::uniform_int_distribution<int> level(0, levels > 0 ? levels - 1 : 0);
  std::vector<float> logits(static_cast<size_t>(rows * vocab));
  for (float &x : logits)
    x = levels ? static_cast<float>(level(rng)) * 0.25f : normal(rng);
  return logits;
}

/// The host's token for row r, sequence firstSequence + r, new token `step`.
std::vector<int64_t> hostTokens(const std::vector<float> &logits, int64_t rows, int64_t vocab,
                                int64_t firstSequence, int64_t step, const Sampling &sampling) {
  SamplingScratch scratch;
  std::vector<int64_t> tokens;
  for (int64_t r = 0; r < rows; ++r)
    tokens.push_back(sampleToken(logits.data() + r * vocab, vocab, sampling,
                                 samplingUniform(sampling.seed, firstSequence + r, step), scratch));
  return tokens;
}

void expectSameTokens(cuda::DeviceSampler &sampler, const std::vector<float> &logits,
                      int64_t rows, int64_t vocab, int64_t firstSequence, int64_t step,
                      const Sampling &sampling, const std::string &what) {
  DeviceBuffer device = upload(logits);
  DeviceBuffer tokens = poisoned(sizeof(int64_t) * rows);
  ASSERT_OK(sampler.sample(device.dataAs<float>(), rows, firstSequence, step, sampling,
                           tokens.dataAs<int64_t>(), nullptr));
  ASSERT_OK(synchronize());
  EXPECT_EQ(download<int64_t>(tokens, rows),
            hostTokens(logits, rows, vocab, firstSequence, step, sampling))
      << what << " (temperature " << sampling.temperature << ", top-k " << sampling.topK
      << ", top-p " << sampling.topP << ", seed " << sampling.seed << ", step " << step << ")";
}

constexpr int64_t kQwenVocab = 151936;

std::vector<int64_t> hostGreedy(const std::vector<float> &logits, int64_t rows, int64_t vocab) {
  std::vector<int64_t> tokens;
  for (int64_t r = 0; r < rows; ++r)
    tokens.push_back(greedyToken(logits.data() + r * vocab, vocab));
  return tokens;
}

/// cuda::greedyTokens' picks, the tokens poisoned first; empty if a call fails.
std::vector<int64_t> deviceGreedy(const std::vector<float> &logits, int64_t rows, int64_t vocab) {
  DeviceBuffer device = upload(logits);
  DeviceBuffer tokens = poisoned(sizeof(int64_t) * rows);
  Status status =
      cuda::greedyTokens(device.dataAs<float>(), rows, vocab, tokens.dataAs<int64_t>(), nullptr);
  EXPECT_TRUE(status.ok()) << status.message();
  Status synced = synchronize();
  EXPECT_TRUE(synced.ok()) << synced.message();
  if (!status.ok() || !synced.ok())
    return {};
  return download<int64_t>(tokens, rows);
}

TEST(CudaSampling, GreedyTakesTheFirstOfTies) {
  constexpr int64_t rows = 5, vocab = kQwenVocab;
  std::mt19937 rng(3);
  for (int trial = 0; trial < 4; ++trial) {
    std::vector<float> logits = randomLogits(rows, vocab, 3.0f, 0, rng);
    std::uniform_int_distribution<int64_t> at(0, vocab - 1);
    for (int64_t r = 0; r < rows; ++r) {
      // The row's maximum planted at 2-4 random places (and a NaN, which never wins).
      float top = 100.0f + static_cast<float>(trial);
      for (int k = 0; k < 2 + static_cast<int>(r % 3); ++k)
        logits[r * vocab + at(rng)] = top;
      logits[r * vocab + at(rng)] = std::nanf("");
    }
    std::vector<int64_t> expected = hostGreedy(logits, rows, vocab);
    EXPECT_EQ(deviceGreedy(logits, rows, vocab), expected) << "trial " << trial;
  }
}

TEST(CudaSampling, GreedyEdgeRowsAsOnTheHost) {
  // Rows of several shapes: one chunk (vocab 5), a chunk and a bit, gpt-oss's
  // vocabulary over 49 chunks; rows that are all NaN (token 0), all -inf,
  // -0 before +0 (one key: the first wins), the maximum in the last element.
  std::mt19937 rng(9);
  for (int64_t vocab : {int64_t{5}, int64_t{4097}, int64_t{201088}}) {
    constexpr int64_t rows = 70;
    std::vector<float> logits = randomLogits(rows, vocab, 2.0f, 0, rng);
    float *r0 = logits.data(), *r1 = r0 + vocab, *r2 = r1 + vocab, *r3 = r2 + vocab;
    std::fill(r0, r0 + vocab, std::nanf(""));
    std::fill(r1, r1 + vocab, -std::numeric_limits<float>::infinity());
    std::fill(r2, r2 + vocab, -1.0f);
    r2[vocab - 1] = 0.0f;
    r2[vocab / 2] = -0.0f;
    r3[vocab - 1] = 1e30f;
    std::vector<int64_t> expected = hostGreedy(logits, rows, vocab);
    EXPECT_EQ(expected[0], 0);
    EXPECT_EQ(expected[2], vocab / 2);
    EXPECT_EQ(expected[3], vocab - 1);
    EXPECT_EQ(deviceGreedy(logits, rows, vocab), expected) << "vocab " << vocab;
  }
}

TEST(CudaSampling, SampledTokensAreTheHostsOnRandomLogits) {
  constexpr int64_t rows = 4, vocab = kQwenVocab;
  cuda::DeviceSampler sampler;
  ASSERT_OK(sampler.create(rows, vocab));
  std::mt19937 rng(11);
  const std::vector<Sampling> rules = {
      {1.0f, 0, 1.0f, 0},    {0.7f, 0, 1.0f, 0},  {1.5f, 0, 1.0f, 0},  {1.0f, 1, 1.0f, 0},
      {1.0f, 50, 1.0f, 0},   {0.8f, 1000, 1.0f, 0}, {1.0f, 0, 0.9f, 0}, {1.0f, 0, 0.5f, 0},
      {0.6f, 40, 0.95f, 0},  {2.0f, 0, 0.999f, 0}, {0.0f, 0, 1.0f, 0}};
  int checked = 0;
  for (int trial = 0; trial < 3; ++trial) {
    // Spread logits (a few tokens dominate) and flat ones (thousands matter).
    std::vector<float> logits = randomLogits(rows, vocab, trial == 1 ? 1.0f : 4.0f, 0, rng);
    for (Sampling rule : rules)
      for (uint64_t seed : {0ull, 1ull, 12345ull, 0xDEADBEEFull, 0xFFFFFFFFFFFFFFFFull}) {
        rule.seed = seed + static_cast<uint64_t>(trial);
        int64_t step = static_cast<int64_t>(seed % 7) + trial;
        expectSameTokens(sampler, logits, rows, vocab, trial, step, rule,
                         "trial " + std::to_string(trial));
        ++checked;
      }
  }
  EXPECT_EQ(checked, 3 * 11 * 5);
}

TEST(CudaSampling, TiesOrderByIdAsOnTheHost) {
  // Eight distinct values over 151936 logits: ~19000 tokens share each key.
  constexpr int64_t rows = 3, vocab = kQwenVocab;
  cuda::DeviceSampler sampler;
  ASSERT_OK(sampler.create(rows, vocab));
  std::mt19937 rng(5);
  std::vector<float> logits = randomLogits(rows, vocab, 0.0f, 8, rng);
  logits[7] = -0.0f; // -0 and +0 are one key
  for (Sampling rule : {Sampling{1.0f, 0, 1.0f, 0}, Sampling{1.0f, 25000, 1.0f, 0},
                        Sampling{0.5f, 0, 0.3f, 0}, Sampling{1.0f, 7, 1.0f, 0}})
    for (uint64_t seed = 0; seed < 8; ++seed) {
      rule.seed = seed;
      expectSameTokens(sampler, logits, rows, vocab, 0, static_cast<int64_t>(seed), rule, "ties");
    }
}

TEST(CudaSampling, GptOssVocabularyAndOneRowOfMany) {
  // 201088 logits; one row of a sampler sized for eight (the prefill's case:
  // one prompt's last row at a time, its own sequence number).
  constexpr int64_t vocab = 201088;
  cuda::DeviceSampler sampler;
  ASSERT_OK(sampler.create(8, vocab));
  std::mt19937 rng(17);
  std::vector<float> logits = randomLogits(8, vocab, 3.0f, 0, rng);
  for (uint64_t seed : {2ull, 99ull}) {
    expectSameTokens(sampler, logits, 8, vocab, 0, 3, Sampling{0.9f, 0, 0.95f, seed}, "8 rows");
    std::vector<float> row(logits.begin() + 5 * vocab, logits.begin() + 6 * vocab);
    expectSameTokens(sampler, row, 1, vocab, 5, 0, Sampling{1.0f, 64, 1.0f, seed}, "row 5");
  }
}

TEST(CudaSampling, RefusesMoreRowsThanItsBuffers) {
  cuda::DeviceSampler sampler;
  ASSERT_OK(sampler.create(2, 1000));
  DeviceBuffer logits = poisoned(sizeof(float) * 3 * 1000);
  DeviceBuffer tokens = poisoned(sizeof(int64_t) * 3);
  Status status = sampler.sample(logits.dataAs<float>(), 3, 0, 0, Sampling{1.0f, 0, 1.0f, 0},
                                 tokens.dataAs<int64_t>(), nullptr);
  ASSERT_FALSE(status.isOk());
  EXPECT_NE(status.message().find("3 rows, buffers for 2"), std::string::npos) << status.message();
  EXPECT_FALSE(sampler.create(1 << 16, 1 << 16).isOk()); // 2^32 logits
}

} // namespace
