//===- ModelKernelsTest.cpp - CPU whole-model kernels against float64 -------===//
//
// Every kernel runs on random inputs into outputs poisoned with NaN and is
// compared with a float64 reference written here from ModelOps.td. Attention
// runs whole generations (a chunked, packed prefill of two sequences, then
// decode steps) through the KV cache and must equal the cache-free causal
// forward over the whole sequences; its errors must leave the cache usable.
//
//===----------------------------------------------------------------------===//

#include "moec/runtime/cpu/ModelKernels.h"

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
using moec::rt::test::randomVector;

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

void expectClose(const std::vector<double> &want, const float *got, double rtol, double atol,
                 const std::string &what) {
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_LE(std::abs(got[i] - want[i]), atol + rtol * std::abs(want[i]))
        << what << "[" << i << "] = " << got[i] << ", expected " << want[i];
}

void expectBitwiseEqual(const std::vector<float> &a, const std::vector<float> &b,
                        const std::string &what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  ASSERT_EQ(std::memcmp(a.data(), b.data(), sizeof(float) * a.size()), 0) << what;
}

void expectMentions(const std::string &message, std::initializer_list<const char *> parts) {
  for (const char *part : parts)
    EXPECT_NE(message.find(part), std::string::npos)
        << "the message \"" << message << "\" does not mention \"" << part << "\"";
}

//===----------------------------------------------------------------------===//
// float64 references
//===----------------------------------------------------------------------===//

std::vector<double> refRmsNorm(const std::vector<float> &x, int64_t m, int64_t k,
                               const std::vector<float> &w, int64_t group, double eps,
                               double offset) {
  std::vector<double> y(m * k);
  for (int64_t r = 0; r < m; ++r)
    for (int64_t g0 = 0; g0 < k; g0 += group) {
      double ms = 0;
      for (int64_t j = 0; j < group; ++j)
        ms += double(x[r * k + g0 + j]) * x[r * k + g0 + j];
      ms /= group;
      for (int64_t j = 0; j < group; ++j)
        y[r * k + g0 + j] = x[r * k + g0 + j] / std::sqrt(ms + eps) * (offset + w[j]);
    }
  return y;
}

std::vector<double> refRotary(const std::vector<float> &x, int64_t n, int64_t columns,
                              const std::vector<int64_t> &pos, const std::vector<float> &invFreq,
                              int64_t headDim, int64_t offset, bool interleaved, double scale) {
  std::vector<double> y(x.begin(), x.end());
  int64_t half = static_cast<int64_t>(invFreq.size());
  for (int64_t t = 0; t < n; ++t)
    for (int64_t h = 0; h < columns / headDim; ++h)
      for (int64_t i = 0; i < half; ++i) {
        int64_t base = t * columns + h * headDim + offset;
        int64_t a = interleaved ? base + 2 * i : base + i;
        int64_t b = interleaved ? base + 2 * i + 1 : base + half + i;
        double angle = double(pos[t]) * double(invFreq[i]);
        double c = std::cos(angle) * scale, s = std::sin(angle) * scale;
        y[a] = double(x[a]) * c - double(x[b]) * s;
        y[b] = double(x[b]) * c + double(x[a]) * s;
      }
  return y;
}

/// The shapes of one attention op.
struct AttentionShape {
  int64_t heads = 4, kvHeads = 2, keyDim = 8, sharedDim = 0, valueDim = 6;
  int64_t window = 0;
  bool sinks = false;

  int64_t queryColumns() const { return heads * (keyDim + sharedDim); }
  int64_t keyColumns() const { return kvHeads * keyDim; }
  int64_t valueColumns() const { return kvHeads * valueDim; }
  KVCache::Slot slot() const { return {keyColumns() + sharedDim, valueColumns()}; }
  double scale() const { return 1.0 / std::sqrt(double(keyDim + sharedDim)); }
  std::string name() const {
    return "GQA " + std::to_string(heads) + "/" + std::to_string(kvHeads) + ", window " +
           std::to_string(window) + (sinks ? ", sinks" : "") +
           (sharedDim ? ", shared " + std::to_string(sharedDim) : "");
  }
};

/// A whole sequence's projections: row t is position t.
struct Sequence {
  int64_t length;
  std::vector<float> query, key, keyShared, value;

  Sequence(const AttentionShape &s, int64_t length, std::mt19937 &rng)
      : length(length), query(randomVector(length * s.queryColumns(), rng)),
        key(randomVector(length * s.keyColumns(), rng)),
        keyShared(randomVector(length * s.sharedDim, rng)),
        value(randomVector(length * s.valueColumns(), rng)) {}
};

/// The cache-free causal forward of position t of a whole sequence, [heads·Dv].
std::vector<double> refAttention(const AttentionShape &s, const Sequence &seq,
                                 const std::vector<float> &sinks, int64_t t) {
  int64_t D = s.keyDim + s.sharedDim;
  std::vector<double> out(s.heads * s.valueDim, 0.0);
  for (int64_t h = 0; h < s.heads; ++h) {
    int64_t kv = h / (s.heads / s.kvHeads);
    int64_t lo = s.window > 0 ? std::max<int64_t>(0, t - s.window + 1) : 0;
    std::vector<double> logits;
    for (int64_t p = lo; p <= t; ++p) {
      double dot = 0;
      for (int64_t d = 0; d < s.keyDim; ++d)
        dot += double(seq.query[t * s.queryColumns() + h * D + d]) *
               seq.key[p * s.keyColumns() + kv * s.keyDim + d];
      for (int64_t d = 0; d < s.sharedDim; ++d)
        dot += double(seq.query[t * s.queryColumns() + h * D + s.keyDim + d]) *
               seq.keyShared[p * s.sharedDim + d];
      logits.push_back(s.scale() * dot);
    }
    double top = *std::max_element(logits.begin(), logits.end());
    if (s.sinks)
      top = std::max(top, double(sinks[h]));
    double denominator = s.sinks ? std::exp(sinks[h] - top) : 0.0;
    for (double l : logits)
      denominator += std::exp(l - top);
    for (int64_t p = lo; p <= t; ++p) {
      double w = std::exp(logits[p - lo] - top) / denominator;
      for (int64_t j = 0; j < s.valueDim; ++j)
        out[h * s.valueDim + j] += w * seq.value[p * s.valueColumns() + kv * s.valueDim + j];
    }
  }
  return out;
}

/// One token of a call: which sequence (its index in the test's list and its
/// cache row) at which position.
struct Token {
  size_t sequence;
  int64_t row, position;
};

/// The inputs of one attention call gathered from the sequences' rows.
struct Call {
  std::vector<float> query, key, keyShared, value;
  std::vector<int64_t> positions, rows;

  Call(const AttentionShape &s, const std::vector<Sequence> &seqs, const std::vector<Token> &tokens) {
    auto append = [](std::vector<float> &to, const std::vector<float> &from, int64_t row,
                     int64_t width) {
      to.insert(to.end(), from.begin() + row * width, from.begin() + (row + 1) * width);
    };
    for (const Token &t : tokens) {
      const Sequence &seq = seqs[t.sequence];
      // The data of some row for positions that the tests expect refused.
      int64_t row = std::clamp<int64_t>(t.position, 0, seq.length - 1);
      append(query, seq.query, row, s.queryColumns());
      append(key, seq.key, row, s.keyColumns());
      append(keyShared, seq.keyShared, row, s.sharedDim);
      append(value, seq.value, row, s.valueColumns());
      positions.push_back(t.position);
      rows.push_back(t.row);
    }
  }
};

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

/// A generation of two sequences, A (cache row 2, a prompt of 5) and B (row 0,
/// a prompt of 3): a packed prefill (A's first 3 tokens, then B's 3), A's
/// remaining prompt in a second call, then `steps` decode steps of one token
/// per sequence (B first).
std::vector<std::vector<Token>> generation(int64_t steps) {
  std::vector<std::vector<Token>> calls(2);
  for (int64_t p = 0; p < 3; ++p)
    calls[0].push_back({0, 2, p});
  for (int64_t p = 0; p < 3; ++p)
    calls[0].push_back({1, 0, p});
  for (int64_t p = 3; p < 5; ++p)
    calls[1].push_back({0, 2, p});
  for (int64_t step = 0; step < steps; ++step)
    calls.push_back({{1, 0, 3 + step}, {0, 2, 5 + step}});
  return calls;
}

constexpr int64_t kMaxBatch = 3, kMaxSeq = 16, kSteps = 5;

/// A cache of the test's size whose slot 1 fits `s` (slot 0 is another layer's).
KVCache makeCache(const AttentionShape &s) {
  return KVCache(kMaxBatch, kMaxSeq, {{24, 12}, s.slot()});
}

std::vector<AttentionShape> attentionShapes() {
  std::vector<AttentionShape> shapes(5);
  shapes[1].window = 3;
  shapes[1].sinks = true;
  shapes[2].sharedDim = 4;
  shapes[2].sinks = true;
  shapes[3].sharedDim = 4;
  shapes[3].window = 4;
  shapes[4].heads = shapes[4].kvHeads = 3; // plain multi-head, a window longer than any sequence
  shapes[4].window = 100;
  return shapes;
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
  std::vector<int64_t> ids(n);
  std::uniform_int_distribution<int64_t> pick(0, vocab - 1);
  for (int64_t &id : ids)
    id = pick(rng);
  ids[0] = 0;
  ids[1] = vocab - 1;
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
  struct Case { std::vector<Token> tokens; std::vector<const char *> mentions; };
  std::vector<Case> cases{
      {{{0, 2, 2}, {1, 3, 3}}, {"token 1", "sequence 3"}},
      {{{0, 2, 2}, {1, -1, 3}}, {"token 1", "sequence -1"}},
      {{{0, 2, 2}, {1, 0, 16}}, {"token 1", "position 16"}},
      {{{0, 2, 2}, {1, 0, -1}}, {"token 1", "position -1"}},
      {{{0, 2, 2}, {1, 0, 4}}, {"token 1", "position 4", "sequence 0", "gap"}},
      // Extends A to 6, then skips position 6: a gap counting the call's own tokens.
      {{{0, 2, 2}, {0, 2, 5}, {0, 2, 7}}, {"token 2", "position 7", "sequence 2", "gap"}},
  };
  for (const Case &c : cases) {
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
