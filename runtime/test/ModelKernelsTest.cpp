//===- ModelKernelsTest.cpp - CPU whole-model kernels against float64 -------===//
//
// Every kernel runs on random inputs into outputs poisoned with NaN and is
// compared with a float64 reference written from ModelOps.td (ModelReference.h,
// which the CUDA kernels' test, CudaModelKernelsTest.cpp, shares). Attention
// runs whole generations (a chunked, packed prefill of two sequences, then
// decode steps) through the KV cache and must equal the cache-free causal
// forward over the whole sequences; its errors must leave the cache usable.
//
//===----------------------------------------------------------------------===//

#include "moec/runtime/cpu/ModelKernels.h"

#include "ModelReference.h"
#include "TestUtil.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <new>
#include <random>
#include <string>
#include <vector>

using namespace moec::rt::cpu;
using namespace moec::rt::test;

namespace {

bool runAttention(ThreadPool &pool, KVCache &cache, int64_t slot, const AttentionShape &s,
                  const Call &call, const std::vector<float> &sinks, std::vector<float> &out,
                  std::string &error) {
  auto n = static_cast<int64_t>(call.positions.size());
  out.assign(n * s.heads * s.valueDim, kNaN);
  return attention(pool, cache, slot, call.query.data(), call.key.data(), call.value.data(),
                   s.sharedDim ? call.keyShared.data() : nullptr, s.sinks ? sinks.data() : nullptr,
                   call.positions.data(), call.rows.data(), n, s.heads, s.kvHeads, s.keyDim,
                   s.sharedDim, s.valueDim, static_cast<float>(s.scale()), s.window, out.data(),
                   error);
}

/// Runs the calls and checks every output row against the cache-free
/// reference; returns all outputs, concatenated.
std::vector<float> runAndCheck(ThreadPool &pool, KVCache &cache, int64_t slot,
                               const AttentionShape &s, const std::vector<Sequence> &seqs,
                               const std::vector<float> &sinks,
                               const std::vector<std::vector<Token>> &calls) {
  std::vector<float> all, out;
  for (size_t c = 0; c < calls.size(); ++c) {
    Call call(s, seqs, calls[c]);
    std::string error;
    EXPECT_TRUE(runAttention(pool, cache, slot, s, call, sinks, out, error)) << error;
    for (size_t i = 0; i < calls[c].size(); ++i) {
      const Token &t = calls[c][i];
      expectClose(refAttention(s, seqs[t.sequence], sinks, t.position),
                  out.data() + i * s.heads * s.valueDim, 1e-4, 2e-5,
                  s.name() + ", call " + std::to_string(c) + ", token " + std::to_string(i));
    }
    all.insert(all.end(), out.begin(), out.end());
  }
  return all;
}

/// A cache of the test's size whose slot 1 fits `s` (slot 0 is another layer's).
KVCache makeCache(const AttentionShape &s) {
  return KVCache(kMaxBatch, kMaxSeq, {{24, 12}, {s.slotKeyColumns(), s.valueColumns()}});
}

/// The rows the test writes into every kernel's output, run on `pool`: used
/// for the thread-count comparison.
std::vector<float> everyKernel(ThreadPool &pool) {
  std::mt19937 rng(99);
  std::vector<float> all;
  int64_t m = 9, k = 96;
  std::vector<float> x = randomVector(m * k, rng), w = randomVector(32, rng), y(m * k, kNaN);
  rmsNorm(pool, x.data(), m, k, w.data(), 32, 1e-6f, 1.0f, y.data());
  all.insert(all.end(), y.begin(), y.end());
  std::vector<int64_t> pos(m);
  for (int64_t t = 0; t < m; ++t)
    pos[t] = 1000 * t + 7;
  std::vector<float> invFreq = randomVector(8, rng, 0.5f);
  rotary(pool, x.data(), m, k, pos.data(), invFreq.data(), 8, 48, 16, false, 1.1f, y.data());
  all.insert(all.end(), y.begin(), y.end());
  add(pool, x.data(), y.data(), m * k, y.data());
  all.insert(all.end(), y.begin(), y.end());
  for (const AttentionShape &s : attentionShapes()) {
    KVCache cache = makeCache(s);
    std::vector<Sequence> seqs{Sequence(s, 5 + kSteps, rng), Sequence(s, 3 + kSteps, rng)};
    std::vector<float> sinks = randomVector(s.heads, rng);
    std::vector<float> out = runAndCheck(pool, cache, 1, s, seqs, sinks, generation(kSteps));
    all.insert(all.end(), out.begin(), out.end());
  }
  return all;
}

/// Resident memory of this process, in bytes.
int64_t residentBytes() {
  long pages = 0, resident = 0;
  if (FILE *f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2)
      resident = 0;
    std::fclose(f);
  }
  return int64_t(resident) * 4096;
}

class ModelKernels : public ::testing::TestWithParam<unsigned> {
protected:
  ThreadPool pool{GetParam()};
  std::mt19937 rng{4321};
};

//===----------------------------------------------------------------------===//
// embedding, rmsNorm, rotary, add
//===----------------------------------------------------------------------===//

TEST_P(ModelKernels, EmbeddingCopiesTableRows) {
  int64_t vocab = 37, hidden = 19, n = 11;
  std::vector<float> table = randomVector(vocab * hidden, rng);
  std::vector<int64_t> ids = randomIds(n, vocab, rng);
  std::vector<float> out(n * hidden, kNaN);
  std::string error;
  ASSERT_TRUE(embedding(pool, ids.data(), n, table.data(), vocab, hidden, out.data(), error));
  for (int64_t t = 0; t < n; ++t)
    for (int64_t j = 0; j < hidden; ++j)
      ASSERT_EQ(out[t * hidden + j], table[ids[t] * hidden + j]) << "token " << t;
}

TEST_P(ModelKernels, EmbeddingRejectsIdsOutsideTheTable) {
  int64_t vocab = 8, hidden = 4;
  std::vector<float> table = randomVector(vocab * hidden, rng);
  for (auto [bad, text] : {std::pair<int64_t, const char *>{8, "id 8"}, {-1, "id -1"},
                           {int64_t(1) << 40, "id 1099511627776"}}) {
    std::vector<int64_t> ids{3, 7, bad, 2};
    std::vector<float> out(ids.size() * hidden, kNaN);
    std::string error;
    EXPECT_FALSE(embedding(pool, ids.data(), 4, table.data(), vocab, hidden, out.data(), error));
    expectMentions(error, {"moe.embedding", "token 2", text});
  }
}

TEST_P(ModelKernels, RmsNormPerRowAndPerHeadGroup) {
  struct Case { int64_t m, k, group; float eps, offset; };
  for (Case c : {Case{7, 48, 48, 1e-6f, 0.0f}, Case{5, 64, 16, 1e-5f, 1.0f},
                 Case{1, 12, 3, 1e-2f, 0.5f}}) {
    std::vector<float> x = randomVector(c.m * c.k, rng, 2.0f), w = randomVector(c.group, rng);
    std::vector<float> y(c.m * c.k, kNaN);
    rmsNorm(pool, x.data(), c.m, c.k, w.data(), c.group, c.eps, c.offset, y.data());
    std::string what = "rms_norm group " + std::to_string(c.group);
    expectClose(refRmsNorm(x, c.m, c.k, w, c.group, c.eps, c.offset), y.data(), 1e-5, 1e-6, what);
    // In place: the same bits.
    std::vector<float> inPlace = x;
    rmsNorm(pool, inPlace.data(), c.m, c.k, w.data(), c.group, c.eps, c.offset, inPlace.data());
    expectBitwiseEqual(inPlace, y, what + " in place");
  }
}

TEST_P(ModelKernels, RotaryHalvesAndInterleavedPairsAtLargePositions) {
  int64_t n = 6, heads = 3, headDim = 40, half = 12, offset = 8, columns = heads * headDim;
  std::vector<float> invFreq(half);
  for (int64_t i = 0; i < half; ++i)
    invFreq[i] = static_cast<float>(std::pow(1e6, -2.0 * i / (2 * half)));
  std::vector<int64_t> pos{0, 1, 17, 4095, 131071, 1000003};
  for (bool interleaved : {false, true}) {
    std::vector<float> x = randomVector(n * columns, rng), y(n * columns, kNaN);
    float scale = 1.25f;
    rotary(pool, x.data(), n, columns, pos.data(), invFreq.data(), half, headDim, offset,
           interleaved, scale, y.data());
    std::string what = interleaved ? "rotary interleaved" : "rotary half";
    expectClose(refRotary(x, n, columns, pos, invFreq, headDim, offset, interleaved, scale),
                y.data(), 1e-5, 1e-5, what);
    // Columns outside the rotated slice pass through unchanged.
    for (int64_t t = 0; t < n; ++t)
      for (int64_t c = 0; c < columns; ++c) {
        int64_t inHead = c % headDim;
        if (inHead < offset || inHead >= offset + 2 * half) {
          ASSERT_EQ(y[t * columns + c], x[t * columns + c]) << what << " column " << c;
        }
      }
    std::vector<float> inPlace = x;
    rotary(pool, inPlace.data(), n, columns, pos.data(), invFreq.data(), half, headDim, offset,
           interleaved, scale, inPlace.data());
    expectBitwiseEqual(inPlace, y, what + " in place");
  }
}

TEST_P(ModelKernels, AddInPlaceAndNot) {
  int64_t count = 3 * 4096 + 123;
  std::vector<float> a = randomVector(count, rng), b = randomVector(count, rng);
  std::vector<float> out(count, kNaN);
  add(pool, a.data(), b.data(), count, out.data());
  for (int64_t i = 0; i < count; ++i)
    ASSERT_EQ(out[i], a[i] + b[i]) << i;
  add(pool, a.data(), b.data(), count, a.data());
  expectBitwiseEqual(a, out, "add in place");
}

//===----------------------------------------------------------------------===//
// attention and the KV cache
//===----------------------------------------------------------------------===//

TEST_P(ModelKernels, AttentionPrefillThenDecodeEqualsCacheFreeForward) {
  for (const AttentionShape &s : attentionShapes()) {
    SCOPED_TRACE(s.name());
    KVCache cache = makeCache(s);
    std::vector<Sequence> seqs{Sequence(s, 5 + kSteps, rng), Sequence(s, 3 + kSteps, rng)};
    std::vector<float> sinks = randomVector(s.heads, rng);
    runAndCheck(pool, cache, 1, s, seqs, sinks, generation(kSteps));
    EXPECT_EQ(cache.length(1, 2), 5 + kSteps);
    EXPECT_EQ(cache.length(1, 0), 3 + kSteps);
    EXPECT_EQ(cache.length(1, 1), 0);
    EXPECT_EQ(cache.length(0, 2), 0); // another layer's slot
  }
}

TEST_P(ModelKernels, AttentionRewritingAPositionOverwritesIt) {
  AttentionShape s;
  s.sinks = true;
  KVCache cache = makeCache(s);
  std::vector<Sequence> seqs{Sequence(s, 6, rng), Sequence(s, 4, rng)};
  std::vector<float> sinks = randomVector(s.heads, rng);
  auto calls = generation(1);
  runAndCheck(pool, cache, 1, s, seqs, sinks, calls);
  // A step run again (a retry) gives the same rows and lengths.
  runAndCheck(pool, cache, 1, s, seqs, sinks, {calls.back()});
  EXPECT_EQ(cache.length(1, 2), 6);
  // Position 2 of A rewritten with other data: the positions after it read
  // the new row. Then A's own row again.
  Sequence other(s, 6, rng), hybrid = seqs[0];
  auto copyRow = [](std::vector<float> &to, const std::vector<float> &from, int64_t width) {
    std::copy(from.begin() + 2 * width, from.begin() + 3 * width, to.begin() + 2 * width);
  };
  copyRow(hybrid.query, other.query, s.queryColumns());
  copyRow(hybrid.key, other.key, s.keyColumns());
  copyRow(hybrid.value, other.value, s.valueColumns());
  std::vector<Sequence> rewritten{hybrid, seqs[1]};
  runAndCheck(pool, cache, 1, s, rewritten, sinks, {{{0, 2, 2}}, {{0, 2, 5}}});
  runAndCheck(pool, cache, 1, s, seqs, sinks, {{{0, 2, 2}}, calls.back()});
  EXPECT_EQ(cache.length(1, 2), 6);
}

TEST_P(ModelKernels, AttentionErrorsNameTheValueAndLeaveTheCacheUsable) {
  AttentionShape s;
  s.sharedDim = 2;
  KVCache cache = makeCache(s);
  std::vector<Sequence> seqs{Sequence(s, 7, rng), Sequence(s, 5, rng)};
  std::vector<float> sinks;
  auto calls = generation(2);
  runAndCheck(pool, cache, 1, s, seqs, sinks, {calls[0], calls[1]});
  ASSERT_EQ(cache.length(1, 2), 5);
  ASSERT_EQ(cache.length(1, 0), 3);

  // Each bad call starts with a valid token that would overwrite position 2
  // of A with NaN: were it written, every later row of A would be NaN.
  Sequence poison = seqs[0];
  std::fill(poison.key.begin(), poison.key.end(), kNaN);
  std::fill(poison.keyShared.begin(), poison.keyShared.end(), kNaN);
  std::fill(poison.value.begin(), poison.value.end(), kNaN);
  std::vector<Sequence> bad{poison, seqs[1]};
  for (const BadTokens &c : badTokenCases()) {
    std::vector<float> out;
    std::string error;
    EXPECT_FALSE(runAttention(pool, cache, 1, s, Call(s, bad, c.tokens), sinks, out, error));
    expectMentions(error, {"moe.attention"});
    for (const char *m : c.mentions)
      expectMentions(error, {m});
    EXPECT_EQ(cache.length(1, 2), 5) << error;
    EXPECT_EQ(cache.length(1, 0), 3) << error;
  }

  // A wrong slot, or shapes that do not match the slot.
  {
    Call call(s, seqs, {{0, 2, 5}});
    std::vector<float> out;
    std::string error;
    EXPECT_FALSE(runAttention(pool, cache, 2, s, call, sinks, out, error));
    expectMentions(error, {"moe.attention", "layer 2"});
    EXPECT_FALSE(runAttention(pool, cache, 0, s, call, sinks, out, error));
    expectMentions(error, {"moe.attention", "slot 0"});
  }

  // The generation goes on as if nothing had happened.
  runAndCheck(pool, cache, 1, s, seqs, sinks, {calls[2], calls[3]});
  EXPECT_EQ(cache.length(1, 2), 7);
  EXPECT_EQ(cache.length(1, 0), 5);
}

TEST_P(ModelKernels, CacheResetsOneSequenceOrAll) {
  AttentionShape s;
  s.window = 2;
  KVCache cache = makeCache(s);
  EXPECT_EQ(cache.maxBatch(), kMaxBatch);
  EXPECT_EQ(cache.maxSeq(), kMaxSeq);
  EXPECT_EQ(cache.slots(), 2u);
  std::vector<Sequence> seqs{Sequence(s, 6, rng), Sequence(s, 4, rng)};
  std::vector<float> sinks;
  auto calls = generation(1);
  runAndCheck(pool, cache, 1, s, seqs, sinks, calls);

  cache.reset(-1); // out of range: no-op
  cache.reset(kMaxBatch);
  EXPECT_EQ(cache.length(1, 2), 6);
  EXPECT_EQ(cache.length(1, 0), 4);
  EXPECT_EQ(cache.length(7, 0), 0); // out of range: 0
  EXPECT_EQ(cache.length(1, -1), 0);

  // B alone starts over: a fresh prompt in row 0, A keeps decoding.
  cache.reset(0);
  EXPECT_EQ(cache.length(1, 0), 0);
  EXPECT_EQ(cache.length(1, 2), 6);
  std::vector<Sequence> fresh{seqs[0], Sequence(s, 3, rng)};
  runAndCheck(pool, cache, 1, s, fresh, sinks, {{{1, 0, 0}, {1, 0, 1}, {1, 0, 2}}});
  EXPECT_EQ(cache.length(1, 0), 3);
  // Position 4 of B, written before the reset, is a gap now.
  std::string error;
  std::vector<float> out;
  EXPECT_FALSE(runAttention(pool, cache, 1, s, Call(s, seqs, {{1, 0, 4}}), sinks, out, error));
  expectMentions(error, {"position 4", "sequence 0", "gap"});

  cache.reset();
  for (int64_t row = 0; row < kMaxBatch; ++row)
    for (size_t slot = 0; slot < cache.slots(); ++slot)
      EXPECT_EQ(cache.length(slot, row), 0);
  // A whole generation again on the emptied cache.
  runAndCheck(pool, cache, 1, s, seqs, sinks, calls);
}

INSTANTIATE_TEST_SUITE_P(Threads, ModelKernels, ::testing::Values(1u, 4u));

TEST(ModelKernelsThreads, ResultsDoNotDependOnTheThreadCount) {
  ThreadPool one(1), four(4);
  expectBitwiseEqual(everyKernel(one), everyKernel(four), "1 thread vs 4");
}

TEST(KVCacheStorage, ConstructsAsGeneratedCodeDoesAndRejectsOverflow) {
  KVCache none(2, 8, {});
  EXPECT_EQ(none.slots(), 0u);
  KVCache one(2, 8, {{6, 4}});
  ASSERT_EQ(one.slots(), 1u);
  EXPECT_EQ(one.slot(0).keyColumns, 6);
  EXPECT_EQ(one.slot(0).valueColumns, 4);
  KVCache unused(1, 4, {{0, 0}, {6, 4}}); // a layer number that no attention op has
  EXPECT_EQ(unused.length(0, 0), 0);
  EXPECT_THROW(KVCache(int64_t(1) << 40, int64_t(1) << 40, {{1, 1}}), std::bad_alloc);
  EXPECT_THROW(KVCache(1, int64_t(1) << 40, {{int64_t(1) << 40, 1}}), std::bad_alloc);
  EXPECT_THROW(KVCache(-1, 8, {{1, 1}}), std::invalid_argument);
}

TEST(KVCacheStorage, UntouchedStorageCostsNoMemory) {
  // 4 GiB of keys and values; a few written rows must not make them resident.
  int64_t before = residentBytes();
  std::unique_ptr<KVCache> cache;
  try {
    cache = std::make_unique<KVCache>(8, 32768, std::vector<KVCache::Slot>{{1024, 1024},
                                                                          {1024, 1024}});
  } catch (const std::bad_alloc &) {
    GTEST_SKIP() << "this machine does not overcommit 4 GiB of address space";
  }
  ThreadPool pool(2);
  AttentionShape s;
  s.heads = s.kvHeads = 8;
  s.keyDim = s.valueDim = 128;
  std::mt19937 rng(5);
  std::vector<Sequence> seqs{Sequence(s, 4, rng)};
  std::vector<Token> tokens;
  for (int64_t p = 0; p < 4; ++p)
    tokens.push_back({0, 7, p});
  std::vector<float> out;
  std::string error;
  ASSERT_TRUE(runAttention(pool, *cache, 1, s, Call(s, seqs, tokens), {}, out, error)) << error;
  EXPECT_LT(residentBytes() - before, int64_t(256) << 20);
}

} // namespace
