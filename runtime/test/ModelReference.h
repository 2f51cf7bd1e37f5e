//===- ModelReference.h - float64 references of the whole-model ops -*- C++ -*-===//
//
// What the CPU (ModelKernelsTest.cpp) and CUDA (CudaModelKernelsTest.cpp)
// whole-model kernels are checked against: references written from
// ModelOps.td in float64, the attention's shapes and whole generations
// (a chunked, packed prefill of two sequences, then decode steps) whose every
// output must equal the cache-free causal forward.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_TEST_MODELREFERENCE_H
#define MOEC_RUNTIME_TEST_MODELREFERENCE_H

#include "TestUtil.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace moec::rt::test {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

inline void expectClose(const std::vector<double> &want, const float *got, double rtol, double atol,
                        const std::string &what) {
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_LE(std::abs(got[i] - want[i]), atol + rtol * std::abs(want[i]))
        << what << "[" << i << "] = " << got[i] << ", expected " << want[i];
}

inline void expectBitwiseEqual(const std::vector<float> &a, const std::vector<float> &b,
                               const std::string &what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  ASSERT_EQ(std::memcmp(a.data(), b.data(), sizeof(float) * a.size()), 0) << what;
}

inline void expectMentions(const std::string &message, std::initializer_list<const char *> parts) {
  for (const char *part : parts)
    EXPECT_NE(message.find(part), std::string::npos)
        << "the message \"" << message << "\" does not mention \"" << part << "\"";
}

/// `n` token ids drawn from [0, vocab), the first 0 and the second vocab - 1.
inline std::vector<int64_t> randomIds(int64_t n, int64_t vocab, std::mt19937 &rng) {
  std::vector<int64_t> ids(n);
  std::uniform_int_distribution<int64_t> pick(0, vocab - 1);
  for (int64_t &id : ids)
    id = pick(rng);
  ids[0] = 0;
  ids[1] = vocab - 1;
  return ids;
}

//===----------------------------------------------------------------------===//
// float64 references
//===----------------------------------------------------------------------===//

inline std::vector<double> refRmsNorm(const std::vector<float> &x, int64_t m, int64_t k,
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

inline std::vector<double> refRotary(const std::vector<float> &x, int64_t n, int64_t columns,
                                     const std::vector<int64_t> &pos,
                                     const std::vector<float> &invFreq, int64_t headDim,
                                     int64_t offset, bool interleaved, double scale) {
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
  /// The widths of the cache slot that fits it.
  int64_t slotKeyColumns() const { return keyColumns() + sharedDim; }
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
inline std::vector<double> refAttention(const AttentionShape &s, const Sequence &seq,
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

  Call(const AttentionShape &s, const std::vector<Sequence> &seqs,
       const std::vector<Token> &tokens) {
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

/// A generation of two sequences, A (cache row 2, a prompt of 5) and B (row 0,
/// a prompt of 3): a packed prefill (A's first 3 tokens, then B's 3), A's
/// remaining prompt in a second call, then `steps` decode steps of one token
/// per sequence (B first).
inline std::vector<std::vector<Token>> generation(int64_t steps) {
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

inline constexpr int64_t kMaxBatch = 3, kMaxSeq = 16, kSteps = 5;

inline std::vector<AttentionShape> attentionShapes() {
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

/// A call that the attention's checks refuse after generation(2)'s first two
/// calls (A holds 5 positions in cache row 2, B 3 in row 0; the cache is
/// kMaxBatch × kMaxSeq), and what the message must mention. Each starts with
/// a valid token that would overwrite position 2 of A.
struct BadTokens {
  std::vector<Token> tokens;
  std::vector<const char *> mentions;
};

inline std::vector<BadTokens> badTokenCases() {
  return {
      {{{0, 2, 2}, {1, 3, 3}}, {"token 1", "sequence 3"}},
      {{{0, 2, 2}, {1, -1, 3}}, {"token 1", "sequence -1"}},
      {{{0, 2, 2}, {1, 0, 16}}, {"token 1", "position 16"}},
      {{{0, 2, 2}, {1, 0, -1}}, {"token 1", "position -1"}},
      {{{0, 2, 2}, {1, 0, 4}}, {"token 1", "position 4", "sequence 0", "gap"}},
      // Extends A to 6, then skips position 6: a gap counting the call's own tokens.
      {{{0, 2, 2}, {0, 2, 5}, {0, 2, 7}}, {"token 2", "position 7", "sequence 2", "gap"}},
  };
}

} // namespace moec::rt::test

#endif // MOEC_RUNTIME_TEST_MODELREFERENCE_H
