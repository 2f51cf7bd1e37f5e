//===- CpuKernelsTest.cpp - CPU moe kernels against float64 references ------===//
//
// Every kernel runs on random inputs (never zeros) into outputs poisoned with
// NaN, and is compared with a float64 reference written here from
// docs/dialect.md. The sentinel rules get their own regression tests.
//
//===----------------------------------------------------------------------===//

#include "moec/runtime/cpu/MoEKernels.h"

#include "../src/cpu/Gemm.h"
#include "TestUtil.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

using namespace moec::rt::cpu;
using moec::rt::test::randomVector;
using moec::rt::test::RandomBlock;

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();


double refActivation(ActivationKind kind, double alpha, double x) {
  switch (kind) {
  case ActivationKind::SiLU: return x / (1 + std::exp(-alpha * x));
  case ActivationKind::GELU: return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
  case ActivationKind::ReLU: return std::max(x, 0.0);
  case ActivationKind::Identity: return x;
  }
  return x;
}

/// float64 reference of one projected row with its epilogue.
std::vector<double> refRow(const float *x, int64_t k, const float *w, int64_t n, const float *bias,
                           const Epilogue &e) {
  std::vector<double> acc(n);
  for (int64_t j = 0; j < n; ++j) {
    double s = bias ? bias[j] : 0.0;
    for (int64_t i = 0; i < k; ++i)
      s += double(x[i]) * w[j * k + i];
    acc[j] = s;
  }
  if (!e.enabled)
    return acc;
  if (e.layout == GateUpLayout::None) {
    for (double &v : acc)
      v = refActivation(e.kind, e.alpha, v);
    return acc;
  }
  std::vector<double> out(n / 2);
  for (int64_t j = 0; j < n / 2; ++j) {
    bool inter = e.layout == GateUpLayout::Interleaved;
    double g = inter ? acc[2 * j] : acc[j], u = inter ? acc[2 * j + 1] : acc[n / 2 + j];
    if (std::isfinite(e.limit)) {
      g = std::min<double>(g, e.limit);
      u = std::clamp<double>(u, -e.limit, e.limit);
    }
    out[j] = refActivation(e.kind, e.alpha, g) * (u + e.beta);
  }
  return out;
}

void expectClose(const std::vector<double> &want, const float *got, double rtol, double atol,
                 const char *what) {
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_LE(std::abs(got[i] - want[i]), atol + rtol * std::abs(want[i]))
        << what << "[" << i << "] = " << got[i] << ", expected " << want[i];
}

class CpuKernels : public ::testing::TestWithParam<unsigned> {
protected:
  ThreadPool pool{GetParam()};
  std::mt19937 rng{1234};
};

TEST_P(CpuKernels, LinearWithEveryEpilogue) {
  const int64_t m = 37, k = 70, n = 24;
  auto x = randomVector(m * k, rng), w = randomVector(n * k, rng, 0.3f), b = randomVector(n, rng);
  std::vector<Epilogue> epilogues = {
      {},
      {true, ActivationKind::SiLU, GateUpLayout::Concatenated},
      {true, ActivationKind::SiLU, GateUpLayout::Interleaved, 1.702f, 1.0f, 1.5f},
      {true, ActivationKind::GELU, GateUpLayout::Concatenated},
      {true, ActivationKind::ReLU, GateUpLayout::None},
  };
  for (const Epilogue &e : epilogues) {
    int64_t width = e.enabled && e.layout != GateUpLayout::None ? n / 2 : n;
    std::vector<float> y(m * width, kNaN);
    linear(pool, x.data(), m, k, w.data(), n, b.data(), e, y.data());
    for (int64_t r = 0; r < m; ++r)
      expectClose(refRow(&x[r * k], k, w.data(), n, b.data(), e), &y[r * width], 1e-5, 1e-5,
                  "linear");
  }
}

/// float64 routing of one token per docs/dialect.md.
void refRoute(const float *l, int64_t E, const float *bias, const Routing &r, std::vector<int> &ids,
              std::vector<double> &w) {
  std::vector<double> s(E), sel(E);
  double mx = *std::max_element(l, l + E), sum = 0;
  for (int64_t e = 0; e < E; ++e)
    s[e] = r.kind == RoutingKind::SoftmaxTopK ? std::exp(l[e] - mx)
           : r.kind == RoutingKind::TopKSoftmax ? l[e]
                                                : 1 / (1 + std::exp(-double(l[e])));
  if (r.kind == RoutingKind::SoftmaxTopK) {
    for (double v : s)
      sum += v;
    for (double &v : s)
      v /= sum;
  }
  for (int64_t e = 0; e < E; ++e)
    sel[e] = s[e] + (bias ? bias[e] : 0.0);
  auto rank = [&](std::vector<double> v, int64_t k) {
    std::vector<int> o(v.size());
    std::iota(o.begin(), o.end(), 0);
    std::stable_sort(o.begin(), o.end(), [&](int a, int b) { return v[a] > v[b]; });
    o.resize(k);
    return o;
  };
  if (r.kind == RoutingKind::SigmoidGroupTopK && r.numGroups > 1) {
    int64_t size = E / r.numGroups;
    std::vector<double> gs(r.numGroups);
    for (int64_t g = 0; g < r.numGroups; ++g) {
      std::vector<double> part(sel.begin() + g * size, sel.begin() + (g + 1) * size);
      auto best = rank(part, 2);
      gs[g] = part[best[0]] + part[best[1]];
    }
    auto kept = rank(gs, r.topkGroups);
    for (int64_t e = 0; e < E; ++e)
      if (std::find(kept.begin(), kept.end(), e / size) == kept.end())
        sel[e] = -INFINITY;
  }
  ids = rank(sel, r.topK);
  w.assign(r.topK, 0);
  if (r.kind == RoutingKind::TopKSoftmax) {
    double m2 = -INFINITY, z = 0;
    for (int id : ids)
      m2 = std::max<double>(m2, l[id]);
    for (int i = 0; i < r.topK; ++i)
      z += w[i] = std::exp(l[ids[i]] - m2);
    for (double &v : w)
      v /= z;
  } else {
    for (int i = 0; i < r.topK; ++i)
      w[i] = s[ids[i]];
  }
  if (r.normalize) {
    double z = 0;
    for (double v : w)
      z += v;
    for (double &v : w)
      v /= z + 1e-20;
  }
  for (double &v : w)
    v *= r.scalingFactor;
}

TEST_P(CpuKernels, RouteEveryKind) {
  const int64_t T = 19, E = 16;
  auto logits = randomVector(T * E, rng, 2.0f), bias = randomVector(E, rng, 0.3f);
  std::vector<Routing> routings = {
      {RoutingKind::SoftmaxTopK, 2, true},
      {RoutingKind::SoftmaxTopK, 4, false},
      {RoutingKind::TopKSoftmax, 4, false},
      {RoutingKind::SigmoidGroupTopK, 4, true, 4, 2, 2.5f},
  };
  for (const Routing &r : routings) {
    const float *b = r.kind == RoutingKind::SigmoidGroupTopK ? bias.data() : nullptr;
    std::vector<int32_t> ids(T * r.topK, -7);
    std::vector<float> w(T * r.topK, kNaN);
    route(pool, logits.data(), T, E, b, r, ids.data(), w.data());
    for (int64_t t = 0; t < T; ++t) {
      std::vector<int> wantIds;
      std::vector<double> wantW;
      refRoute(&logits[t * E], E, b, r, wantIds, wantW);
      for (int i = 0; i < r.topK; ++i)
        ASSERT_EQ(ids[t * r.topK + i], wantIds[i]) << "token " << t << " slot " << i;
      expectClose(wantW, &w[t * r.topK], 1e-5, 1e-7, "route weights");
    }
  }
}

TEST_P(CpuKernels, GroupLimitedRoutingMasksWithMinusInfinity) {
  // Two groups of two experts; every score is sigmoid(0) = 0.5, so the biased
  // scores are -0.6 (group 0) and -0.1 (group 1). Group 1 wins (-0.2 vs -1.2)
  // and group 0 is masked. A mask of 0 instead of -inf would rank group 0's
  // masked experts (0) above group 1's (-0.1) and pick them.
  const float logits[4] = {0, 0, 0, 0}; // sigmoid 0.5 each
  const float bias[4] = {-1.1f, -1.1f, -0.6f, -0.6f};
  Routing r{RoutingKind::SigmoidGroupTopK, 2, false, 2, 1, 1.0f};
  int32_t ids[2];
  float w[2];
  route(pool, logits, 1, 4, bias, r, ids, w);
  EXPECT_EQ(ids[0], 2);
  EXPECT_EQ(ids[1], 3);
  EXPECT_FLOAT_EQ(w[0], 0.5f); // weights are the unbiased scores
}

TEST_P(CpuKernels, SortIsStableWithSentinelTail) {
  // 5 tokens, top-2; local experts [2, 5) of a rank (first_expert 2, 3 experts).
  const int32_t ids[10] = {4, 2, 9, 3, -1, 2, 3, 4, 2, 7};
  int32_t perm[10], offsets[3], numValid = -1;
  std::fill(std::begin(perm), std::end(perm), -99);
  sortByExpert(ids, 10, 3, 2, perm, offsets, &numValid);
  // local ids: 2 0 S 1 S 0 1 2 0 S  -> expert 0: slots 1,5,8; 1: 3,6; 2: 0,7; sentinel 2,4,9
  const int32_t wantPerm[10] = {1, 5, 8, 3, 6, 0, 7, 2, 4, 9};
  for (int i = 0; i < 10; ++i)
    EXPECT_EQ(perm[i], wantPerm[i]) << i;
  EXPECT_EQ(offsets[0], 3);
  EXPECT_EQ(offsets[1], 5);
  EXPECT_EQ(offsets[2], 7);
  EXPECT_EQ(numValid, 7);
}

/// The whole grouped pipeline against a float64 per-token reference, with
/// out-of-range ids and NaN planted in every row the kernels must not read.
TEST_P(CpuKernels, GroupedPipelineMatchesDenseReferenceAndKeepsSentinelsOut) {
  const int64_t T = 23, H = 40, I = 24, E = 6, K = 2, S = T * K;
  RandomBlock block(T, H, I, E, K, rng);
  const auto &x = block.x, &gu = block.gateUp, &down = block.down, &gub = block.gateUpBias,
             &w = block.weights, &shared = block.shared, &gate = block.sharedGate;
  auto &ids = block.ids;
  ids[3] = E;      // out of range
  ids[4] = -3;     // negative
  ids[10] = 1000;  // far out of range
  ids[11] = E + 1; // token 5: both slots are sentinels
  Epilogue act{true, ActivationKind::SiLU, GateUpLayout::Concatenated};

  std::vector<int32_t> perm(S), offsets(E);
  int32_t numValid;
  sortByExpert(ids.data(), S, E, 0, perm.data(), offsets.data(), &numValid);
  ASSERT_EQ(numValid, S - 4);
  std::vector<float> rows(S * H, kNaN), h(S * I, kNaN), y(S * H, kNaN), out(T * H, kNaN);
  permute(pool, x.data(), H, perm.data(), numValid, K, rows.data());
  groupedMatmul(pool, rows.data(), H, gu.data(), E, 2 * I, offsets.data(), gub.data(), act, h.data());
  groupedMatmul(pool, h.data(), I, down.data(), E, H, offsets.data(), nullptr, {}, y.data());
  // Rows past num_valid were never written: still NaN, and must not leak.
  for (int64_t r = numValid; r < S; ++r)
    ASSERT_TRUE(std::isnan(y[r * H])) << "sentinel row " << r << " was computed";
  combine(pool, y.data(), perm.data(), S, H, w.data(), T, K, numValid, nullptr, nullptr, out.data());

  for (int64_t t = 0; t < T; ++t) {
    std::vector<double> want(H, 0.0);
    for (int64_t k = 0; k < K; ++k) {
      int32_t e = ids[t * K + k];
      if (e < 0 || e >= E)
        continue;
      auto hidden = refRow(&x[t * H], H, &gu[e * 2 * I * H], 2 * I, &gub[e * 2 * I], act);
      std::vector<float> hf(hidden.begin(), hidden.end());
      auto o = refRow(hf.data(), I, &down[e * H * I], H, nullptr, {});
      for (int64_t j = 0; j < H; ++j)
        want[j] += w[t * K + k] * o[j];
    }
    expectClose(want, &out[t * H], 1e-4, 1e-5, "combined output");
  }
  // Token 5 (all slots sentinel) is exactly zero, not NaN·0.
  for (int64_t j = 0; j < H; ++j)
    ASSERT_EQ(out[5 * H + j], 0.0f);

  // The shared-expert addend, gated, joins every token, the all-sentinel one too.
  std::vector<float> withShared(T * H, kNaN);
  combine(pool, y.data(), perm.data(), S, H, w.data(), T, K, numValid, shared.data(), gate.data(),
          withShared.data());
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < H; ++j) {
      double g = 1 / (1 + std::exp(-double(gate[t])));
      ASSERT_NEAR(withShared[t * H + j], out[t * H + j] + g * shared[t * H + j], 1e-5);
    }
}

/// The value of MXFP4 weight [row, i] as docs/dialect.md defines it, decoded
/// here independently of the runtime's tables: the e2m1 code in byte i/2 of the
/// row's packed blocks (low nibble for even i) times 2^(s - 127) of its block.
double refMXFP4(const std::vector<uint8_t> &packed, const std::vector<uint8_t> &scales,
                int64_t row, int64_t i, int64_t k) {
  static const double magnitudes[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  int64_t blocks = (k + 31) / 32;
  uint8_t byte = packed[row * blocks * 16 + i / 2];
  uint8_t code = i % 2 ? byte >> 4 : byte & 0xF;
  double value = (code & 8 ? -1.0 : 1.0) * magnitudes[code & 7];
  return std::ldexp(value, int(scales[row * blocks + i / 32]) - 127);
}

// MXFP4 weights against float64 on random codes and scales: K with a partial
// last block (and odd, so a row's last byte holds one code), an idle expert,
// rows past offsets[E-1] never written, a gated epilogue and a plain one.
TEST_P(CpuKernels, GroupedMatmulMXFP4MatchesFloat64Reference) {
  for (int64_t k : {70, 33, 64}) {
    const int64_t S = 29, E = 4, N = 18, blocks = (k + 31) / 32;
    auto lhs = randomVector(S * k, rng);
    auto bias = randomVector(E * N, rng);
    std::uniform_int_distribution<int> code(0, 255), exponent(122, 128);
    std::vector<uint8_t> packed(E * N * blocks * 16), scales(E * N * blocks);
    for (int64_t row = 0; row < E * N; ++row)
      for (int64_t b = 0; b < blocks * 16; ++b) {
        // Zero past K, as the format stores it; random codes (both nibbles) before.
        int64_t i = b * 2;
        uint8_t byte = static_cast<uint8_t>(code(rng));
        if (i + 1 >= k)
          byte &= i < k ? 0x0F : 0x00;
        packed[row * blocks * 16 + b] = byte;
      }
    for (uint8_t &s : scales)
      s = static_cast<uint8_t>(exponent(rng));
    std::vector<float> dequantized(E * N * k);
    for (int64_t row = 0; row < E * N; ++row)
      for (int64_t i = 0; i < k; ++i)
        dequantized[row * k + i] = static_cast<float>(refMXFP4(packed, scales, row, i, k));
    const int32_t offsets[4] = {9, 9, 20, 26}; // expert 1 idle; rows 26-28 past the end
    Epilogue gated{true, ActivationKind::SiLU, GateUpLayout::Interleaved, 1.702f, 1.0f, 7.0f};
    for (const Epilogue &act : {gated, Epilogue{}}) {
      int64_t width = act.enabled ? N / 2 : N;
      std::vector<float> out(S * width, kNaN);
      groupedMatmulMXFP4(pool, lhs.data(), k, packed.data(), scales.data(), E, N, offsets,
                         bias.data(), act, out.data());
      int64_t row = 0;
      for (int64_t e = 0; e < E; ++e)
        for (; row < offsets[e]; ++row) {
          // dequantized holds the f64 values exactly (they are f32 numbers).
          auto want = refRow(&lhs[row * k], k, &dequantized[e * N * k], N, &bias[e * N], act);
          expectClose(want, &out[row * width], 1e-5, 1e-5, "MXFP4 grouped matmul");
        }
      for (int64_t i = offsets[E - 1] * width; i < S * width; ++i)
        ASSERT_TRUE(std::isnan(out[i])) << "row past offsets[E-1] written at " << i;
    }
  }
}

TEST(CpuKernelsThreads, ResultsDoNotDependOnTheThreadCount) {
  std::mt19937 rng(7);
  const int64_t S = 101, K = 33, E = 5, N = 18;
  auto lhs = randomVector(S * K, rng), w = randomVector(E * N * K, rng);
  const int32_t offsets[5] = {10, 10, 47, 80, 95}; // expert 1 empty; 6 sentinel rows
  Epilogue act{true, ActivationKind::SiLU, GateUpLayout::Interleaved, 1.702f, 1.0f, 7.0f};
  std::vector<float> one(S * N / 2, kNaN), many(S * N / 2, kNaN);
  ThreadPool single(1), several(4);
  groupedMatmul(single, lhs.data(), K, w.data(), E, N, offsets, nullptr, act, one.data());
  groupedMatmul(several, lhs.data(), K, w.data(), E, N, offsets, nullptr, act, many.data());
  for (int64_t i = 0; i < 95 * N / 2; ++i)
    ASSERT_EQ(one[i], many[i]) << i;
  for (int64_t i = 95 * N / 2; i < S * N / 2; ++i)
    ASSERT_TRUE(std::isnan(many[i])) << "row past offsets[E-1] written at " << i;
}

// Loops large enough to split over the workers: every index exactly once,
// hundreds of loops back to back (the workers spin between them) and after
// pauses (they sleep).
TEST(CpuThreadPool, EveryIndexOnceInEveryLoop) {
  for (unsigned threads : {2u, 3u, 5u}) {
    ThreadPool pool(threads);
    for (int loop = 0; loop < 400; ++loop) {
      int64_t count = 1 + loop % 37;
      std::vector<std::atomic<int>> hits(count);
      pool.parallelFor(count, 1e9, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i)
          hits[i].fetch_add(1);
      });
      for (int64_t i = 0; i < count; ++i)
        ASSERT_EQ(hits[i].load(), 1) << threads << " threads, loop " << loop << ", index " << i;
      if (loop % 100 == 99)
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
}

TEST(CpuThreadPool, SmallLoopsRunOnTheCaller) {
  ThreadPool pool(4);
  EXPECT_EQ(pool.chunksFor(1000, ThreadPool::kMinChunkWork - 1), 1u);
  EXPECT_EQ(pool.chunksFor(1000, 2.5 * ThreadPool::kMinChunkWork), 2u);
  EXPECT_EQ(pool.chunksFor(3, 1e12), 3u);
  std::thread::id caller = std::this_thread::get_id(), ran;
  pool.parallelFor(100, 10.0, [&](int64_t, int64_t) { ran = std::this_thread::get_id(); });
  EXPECT_EQ(ran, caller);
}

// The product's every element is one sequence of operations fixed by K
// (src/cpu/Gemm.h): the same bits on every instruction set, for any M and N,
// and for a row computed alone or among others.
TEST(CpuGemm, SameBitsOnEveryInstructionSetAndTile) {
  std::mt19937 rng(11);
  for (int64_t k : {1, 7, 16, 24, 40, 64, 100}) {
    const int64_t m = 11, n = 13;
    auto a = randomVector(m * k, rng), b = randomVector(n * k, rng), bias = randomVector(n, rng);
    std::vector<float> want(m * n, kNaN);
    ASSERT_TRUE(moec::rt::cpu::detail::gemmNTOn("scalar", a.data(), k, b.data(), k, bias.data(),
                                                want.data(), n, m, n, k));
    for (const char *isa : {"avx2", "avx512"}) {
      std::vector<float> got(m * n, kNaN);
      if (!moec::rt::cpu::detail::gemmNTOn(isa, a.data(), k, b.data(), k, bias.data(), got.data(),
                                           n, m, n, k))
        continue; // not on this processor
      ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0)
          << isa << " differs from scalar at k = " << k;
    }
    // Row 5 alone, and columns 3..9 alone: the same bits as in the whole.
    std::vector<float> row(n, kNaN), cols(m * 7, kNaN);
    moec::rt::cpu::detail::gemmNT(a.data() + 5 * k, k, b.data(), k, bias.data(), row.data(), n, 1,
                                  n, k);
    moec::rt::cpu::detail::gemmNT(a.data(), k, b.data() + 3 * k, k, bias.data() + 3, cols.data(), 7,
                                  m, 7, k);
    std::vector<float> whole(m * n, kNaN);
    moec::rt::cpu::detail::gemmNT(a.data(), k, b.data(), k, bias.data(), whole.data(), n, m, n, k);
    for (int64_t j = 0; j < n; ++j)
      ASSERT_EQ(row[j], whole[5 * n + j]) << "k = " << k << ", column " << j;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < 7; ++j)
        ASSERT_EQ(cols[i * 7 + j], whole[i * n + 3 + j]) << "k = " << k;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = bias[j];
        for (int64_t x = 0; x < k; ++x)
          s += double(a[i * k + x]) * b[j * k + x];
        ASSERT_NEAR(whole[i * n + j], s, 1e-5 * (1 + std::abs(s)));
      }
  }
}

TEST(CpuGemm, SiluEpilogueSameBitsOnEveryInstructionSet) {
  std::mt19937 rng(12);
  std::uniform_real_distribution<float> wide(-100.0f, 100.0f);
  for (int64_t n : {2, 10, 34, 80}) {
    std::vector<float> acc(n);
    for (float &v : acc)
      v = wide(rng) * (rng() % 2 ? 1.0f : 0.05f);
    acc[0] = kNaN;
    for (bool gated : {false, true})
      for (bool interleaved : {false, true})
        for (float limit : {7.0f, std::numeric_limits<float>::infinity()}) {
          int64_t width = gated ? n / 2 : n;
          std::vector<float> want(width, -1.0f);
          moec::rt::cpu::detail::siluEpilogueOn("scalar", acc.data(), n, gated, interleaved,
                                                1.702f, 1.0f, limit, want.data());
          for (const char *isa : {"avx2", "avx512"}) {
            std::vector<float> got(width, -1.0f);
            if (!moec::rt::cpu::detail::siluEpilogueOn(isa, acc.data(), n, gated, interleaved,
                                                       1.702f, 1.0f, limit, got.data()))
              continue;
            for (int64_t j = 0; j < width; ++j) // NaN as NaN (its sign and payload vary)
              ASSERT_TRUE(std::memcmp(&got[j], &want[j], sizeof(float)) == 0 ||
                          (std::isnan(got[j]) && std::isnan(want[j])))
                  << isa << " n " << n << " gated " << gated << " j " << j << ": " << got[j]
                  << " vs " << want[j];
          }
        }
  }
  // exp within a few ulp of the library's over the clamped range.
  for (float x = -87.0f; x < 88.0f; x += 0.173f)
    ASSERT_NEAR(moec::rt::cpu::detail::expClamped(x), std::exp(x), 3e-7f * std::exp(x)) << x;
  EXPECT_TRUE(std::isnan(moec::rt::cpu::detail::expClamped(kNaN)));
}

// groupedMatmul split over threads (enough work for several chunks).
TEST(CpuKernelsThreads, SplitLoopsGiveTheSameBits) {
  std::mt19937 rng(8);
  const int64_t S = 300, K = 64, E = 6, N = 80;
  auto lhs = randomVector(S * K, rng), w = randomVector(E * N * K, rng);
  const int32_t offsets[6] = {40, 40, 150, 151, 260, 290};
  for (Epilogue act : {Epilogue{}, Epilogue{true, ActivationKind::SiLU, GateUpLayout::Concatenated,
                                            1.0f, 0.0f, std::numeric_limits<float>::infinity()}}) {
    int64_t width = act.enabled ? N / 2 : N;
    std::vector<float> one(S * width, kNaN), many(S * width, kNaN), lin1(S * width, kNaN),
        lin3(S * width, kNaN);
    ThreadPool single(1), several(3);
    ASSERT_GT(several.chunksFor(290, 290.0 * N * K), 1u);
    groupedMatmul(single, lhs.data(), K, w.data(), E, N, offsets, nullptr, act, one.data());
    groupedMatmul(several, lhs.data(), K, w.data(), E, N, offsets, nullptr, act, many.data());
    linear(single, lhs.data(), S, K, w.data(), N, nullptr, act, lin1.data());
    linear(several, lhs.data(), S, K, w.data(), N, nullptr, act, lin3.data());
    ASSERT_EQ(std::memcmp(one.data(), many.data(), 290 * width * sizeof(float)), 0);
    ASSERT_EQ(std::memcmp(lin1.data(), lin3.data(), lin1.size() * sizeof(float)), 0);
    // Decode-sized linear, split by columns.
    std::vector<float> col1(2 * 4096, kNaN), col3(2 * 4096, kNaN);
    auto wide = randomVector(4096 * K, rng);
    linear(single, lhs.data(), 2, K, wide.data(), 4096, nullptr, Epilogue{}, col1.data());
    linear(several, lhs.data(), 2, K, wide.data(), 4096, nullptr, Epilogue{}, col3.data());
    ASSERT_EQ(std::memcmp(col1.data(), col3.data(), col1.size() * sizeof(float)), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Threads, CpuKernels, ::testing::Values(1u, 3u));

} // namespace
