//===- CudaLinearBF16Test.cpp - the decode kernel of dense bf16 projections -===//
//
// linearBF16 up to 64 rows (LinearBF16FewRows.cu): against a float64 reference
// on the same bf16 operands, every output written (outputs poisoned first),
// and a row's bits the same whatever the row count.
//
//===----------------------------------------------------------------------===//

#include "moec/runtime/Cuda.h"
#include "moec/runtime/cuda/MoEKernels.h"

#include "CudaTestUtil.h"
#include "DependentLaunch.cuh"
#include "LinearBF16FewRows.h"
#include "TestUtil.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace moec::rt;
using moec::rt::test::download;
using moec::rt::test::poisoned;
using moec::rt::test::randomVector;
using moec::rt::test::roundToBF16;
using moec::rt::test::synchronize;
using moec::rt::test::toBF16;
using moec::rt::test::upload;

namespace {

/// A random problem: rows x [M, K] and weight w [N, K] already rounded to bf16
/// (the kernel multiplies bf16 values; the reference gets exactly those), bias [N].
struct Problem {
  int64_t m, k, n;
  std::vector<float> x, w, bias;
  std::vector<uint16_t> wBits;
  DeviceBuffer dX, dW, dBias;

  Problem(int64_t m, int64_t k, int64_t n, unsigned seed) : m(m), k(k), n(n) {
    std::mt19937 rng(seed);
    x = randomVector(m * k, rng);
    w = randomVector(n * k, rng, 0.2f);
    bias = randomVector(n, rng);
    roundToBF16(x);
    wBits = roundToBF16(w);
    dX = upload(x);
    dW = upload(wBits);
    dBias = upload(bias);
  }

  /// y = x · wᵀ + bias in float64 for row r, column j, and the sum of the
  /// products' magnitudes (the scale of the f32 summation error).
  double exact(int64_t r, int64_t j, double &magnitude) const {
    double sum = 0;
    magnitude = 0;
    const float *xr = x.data() + r * k, *wj = w.data() + j * k;
    for (int64_t c = 0; c < k; ++c) {
      double p = double(xr[c]) * double(wj[c]);
      sum += p;
      magnitude += std::fabs(p);
    }
    return sum + bias[j];
  }

  /// linearBF16 of rows [first, first + rows) into a poisoned f32 result.
  std::vector<float> run(int64_t first, int64_t rows, const cpu::Epilogue &epilogue,
                         int64_t width) const {
    DeviceBuffer dY = poisoned(rows * width * 4);
    Status status = cuda::linearBF16(dX.dataAs<float>() + first * k, rows, k,
                                     dW.dataAs<uint16_t>(), n, dBias.dataAs<float>(), epilogue,
                                     dY.dataAs<float>(), nullptr);
    EXPECT_TRUE(status.isOk()) << status.message();
    status = synchronize();
    EXPECT_TRUE(status.isOk()) << status.message();
    return download<float>(dY, rows * width);
  }
};

/// The products' f32 sums (tensor-core adds, in K/16 steps) stay within this
/// fraction of the sum of the products' magnitudes; a lost or doubled product
/// of a K-deep row is ~1/K of it (2.4e-4 at K = 4096).
constexpr double kRelative = 2e-5;

/// Every output of the first `m` rows of y = x · wᵀ + bias (no epilogue)
/// within kRelative of float64.
void expectMatchesFloat64(const Problem &p, int64_t m, const std::vector<float> &got) {
  for (int64_t r = 0; r < m; ++r)
    for (int64_t j = 0; j < p.n; ++j) {
      double magnitude = 0, want = p.exact(r, j, magnitude);
      float v = got[r * p.n + j];
      ASSERT_TRUE(std::isfinite(v)) << "row " << r << ", column " << j << " not written";
      ASSERT_LE(std::fabs(v - want), kRelative * magnitude + 1e-6 * std::fabs(want))
          << "row " << r << ", column " << j << ": " << v << ", expected " << want;
    }
}

/// M = 1 to 64 rows (one to eight 8-row tiles, partly used), N from one block
/// partly used (8) to 64 blocks, 1000 (a last block of 40 rows), K from 8 (one
/// step, mostly zeros) to 4096 and 2880 (gpt-oss: a last step partly inside K),
/// with a bias: within kRelative of float64, every output written.
TEST(CudaLinearBF16, FewRowsMatchFloat64) {
  for (int64_t k : {8, 2048, 2880, 4096})
    for (int64_t n : {8, 512, 1000, 4096}) {
      Problem p(64, k, n, static_cast<unsigned>(k * 31 + n));
      for (int64_t m : {1, 2, 7, 16, 33, 64}) {
        SCOPED_TRACE("M " + std::to_string(m) + ", K " + std::to_string(k) + ", N " +
                     std::to_string(n));
        ASSERT_NO_FATAL_FAILURE(expectMatchesFloat64(p, m, p.run(0, m, cpu::Epilogue{}, n)));
      }
    }
}

/// The batch invariance a decode step relies on: a row's result has the same
/// bits computed alone (M = 1), among the first 2, 7, 16 or 33 rows, or among
/// 64, at shapes that split K over blocks (q, k/v, o of Qwen3 and gpt-oss's
/// K = 2880) and one that does not (N = 151936 would; 8192 x 2048 keeps the
/// test short while giving 128 row blocks).
TEST(CudaLinearBF16, FewRowsResultsDoNotDependOnTheRowCount) {
  for (auto [k, n] : {std::pair<int64_t, int64_t>{2048, 4096},
                      {2048, 512},
                      {4096, 2048},
                      {2880, 1000},
                      {2048, 8192}}) {
    SCOPED_TRACE("K " + std::to_string(k) + ", N " + std::to_string(n));
    Problem p(64, k, n, 7);
    std::vector<float> all = p.run(0, 64, cpu::Epilogue{}, n);
    for (int64_t m : {1, 2, 7, 16, 33}) {
      std::vector<float> some = p.run(0, m, cpu::Epilogue{}, n);
      for (int64_t i = 0; i < m * n; ++i)
        ASSERT_EQ(std::memcmp(&some[i], &all[i], 4), 0)
            << "M " << m << ", element " << i << ": " << some[i] << " against " << all[i];
    }
    for (int64_t r : {0, 5, 63}) {
      std::vector<float> one = p.run(r, 1, cpu::Epilogue{}, n);
      for (int64_t j = 0; j < n; ++j)
        ASSERT_EQ(std::memcmp(&one[j], &all[r * n + j], 4), 0)
            << "row " << r << " alone, column " << j << ": " << one[j] << " against "
            << all[r * n + j];
    }
  }
}

/// The epilogues: an activation after the bias, and gate/up pairs (both
/// layouts, the gpt-oss clamp and beta) finished by the reduction kernel.
TEST(CudaLinearBF16, FewRowsEpiloguesMatchFloat64) {
  // K = 2048 splits K over a cluster; K = 64 (a tiny model's dense MLP) is one
  // slice, where the gated layouts still go through the reduction kernel.
  for (int64_t k : {2048, 64}) {
    SCOPED_TRACE("K " + std::to_string(k));
    const int64_t n = 1000;
    Problem p(33, k, n, 11);
    const cpu::Epilogue epilogues[] = {
        {true, cpu::ActivationKind::SiLU, cpu::GateUpLayout::None},
        {true, cpu::ActivationKind::SiLU, cpu::GateUpLayout::Concatenated},
        {true, cpu::ActivationKind::SiLU, cpu::GateUpLayout::Interleaved, 1.702f, 1.0f, 7.0f},
        {true, cpu::ActivationKind::GELU, cpu::GateUpLayout::Concatenated}};
    for (const cpu::Epilogue &epilogue : epilogues) {
      bool gated = epilogue.layout != cpu::GateUpLayout::None;
      int64_t width = gated ? n / 2 : n;
      for (int64_t m : {1, 33}) {
        SCOPED_TRACE("M " + std::to_string(m) + ", layout " + std::to_string(int(epilogue.layout)) +
                     ", kind " + std::to_string(int(epilogue.kind)));
        std::vector<float> got = p.run(0, m, epilogue, width);
        for (int64_t r = 0; r < m; ++r)
          for (int64_t c = 0; c < width; ++c) {
            double magnitude = 0, gateMagnitude = 0, upMagnitude = 0, want = 0;
            auto act = [&](double v) {
              double a = epilogue.alpha * v;
              if (epilogue.kind == cpu::ActivationKind::SiLU)
                return v / (1 + std::exp(-a));
              return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
            };
            if (gated) {
              bool interleaved = epilogue.layout == cpu::GateUpLayout::Interleaved;
              double gate = p.exact(r, interleaved ? 2 * c : c, gateMagnitude);
              double up = p.exact(r, interleaved ? 2 * c + 1 : width + c, upMagnitude);
              if (std::isfinite(epilogue.limit)) {
                gate = std::min<double>(gate, epilogue.limit);
                up = std::clamp<double>(up, -epilogue.limit, epilogue.limit);
              }
              want = act(gate) * (up + epilogue.beta);
              // The product's error: each side's, scaled by the other's size.
              magnitude = gateMagnitude * (std::fabs(up) + epilogue.beta + 1) +
                          upMagnitude * std::fabs(act(gate));
            } else {
              want = act(p.exact(r, c, magnitude));
            }
            float v = got[r * width + c];
            ASSERT_TRUE(std::isfinite(v)) << "row " << r << ", column " << c << " not written";
            ASSERT_LE(std::fabs(v - want), kRelative * magnitude + 1e-5 * std::fabs(want) + 1e-6)
                << "row " << r << ", column " << c << ": " << v << ", expected " << want;
          }
      }
    }
  }
}

/// bf16 rows give the f32 rows' results bit for bit (the kernel rounds f32 rows
/// first), and bf16 results are the f32 results rounded to nearest even.
TEST(CudaLinearBF16, FewRowsBF16RowsAndResults) {
  const int64_t m = 7, k = 2880, n = 1000;
  Problem p(m, k, n, 13);
  std::vector<float> f32 = p.run(0, m, cpu::Epilogue{}, n);
  std::vector<uint16_t> xBits(p.x.size());
  for (size_t i = 0; i < xBits.size(); ++i)
    xBits[i] = toBF16(p.x[i]);
  DeviceBuffer dXBF16 = upload(xBits), dFromBF16 = poisoned(m * n * 4),
               dToBF16 = poisoned(m * n * 2);
  ASSERT_OK(cuda::linearBF16(dXBF16.dataAs<cuda::BF16>(), m, k, p.dW.dataAs<uint16_t>(), n,
                             p.dBias.dataAs<float>(), cpu::Epilogue{}, dFromBF16.dataAs<float>(),
                             nullptr));
  ASSERT_OK(cuda::linearBF16(p.dX.dataAs<float>(), m, k, p.dW.dataAs<uint16_t>(), n,
                             p.dBias.dataAs<float>(), cpu::Epilogue{},
                             dToBF16.dataAs<cuda::BF16>(), nullptr));
  ASSERT_OK(synchronize());
  std::vector<float> fromBF16 = download<float>(dFromBF16, m * n);
  std::vector<uint16_t> toBF16Bits = download<uint16_t>(dToBF16, m * n);
  for (int64_t i = 0; i < m * n; ++i) {
    ASSERT_EQ(std::memcmp(&fromBF16[i], &f32[i], 4), 0) << "bf16 rows, element " << i;
    ASSERT_EQ(toBF16Bits[i], toBF16(f32[i])) << "bf16 results, element " << i;
  }
}

/// Captured in a CUDA graph on a non-blocking stream (dependent launches, the
/// split-K scratch from the stream-ordered pool) and replayed twice: the eager
/// call's bits.
TEST(CudaLinearBF16, FewRowsInAGraphMatchEager) {
  const int64_t m = 3, k = 2048, n = 512; // 8 row blocks: K split over blocks
  Problem p(m, k, n, 17);
  std::vector<float> eager = p.run(0, m, cpu::Epilogue{}, n);
  cudaStream_t stream;
  ASSERT_OK(cudaStatus(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream",
                       __FILE__, __LINE__));
  cuda::detail::noteStream(stream);
  DeviceBuffer dY = poisoned(m * n * 4);
  ASSERT_OK(cudaStatus(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed), "capture",
                       __FILE__, __LINE__));
  Status status = cuda::linearBF16(p.dX.dataAs<float>(), m, k, p.dW.dataAs<uint16_t>(), n,
                                   p.dBias.dataAs<float>(), cpu::Epilogue{}, dY.dataAs<float>(),
                                   stream);
  cudaGraph_t graph = nullptr;
  cudaError_t ended = cudaStreamEndCapture(stream, &graph);
  ASSERT_OK(status);
  ASSERT_OK(cudaStatus(ended, "capture", __FILE__, __LINE__));
  cudaGraphExec_t exec = nullptr;
  ASSERT_OK(cudaStatus(cudaGraphInstantiate(&exec, graph, 0), "graph", __FILE__, __LINE__));
  for (int replay = 0; replay < 2; ++replay) {
    ASSERT_OK(cudaStatus(cudaGraphLaunch(exec, stream), "graph launch", __FILE__, __LINE__));
    ASSERT_OK(cudaStatus(cudaStreamSynchronize(stream), "sync", __FILE__, __LINE__));
    std::vector<float> got = download<float>(dY, m * n);
    for (int64_t i = 0; i < m * n; ++i)
      ASSERT_EQ(std::memcmp(&got[i], &eager[i], 4), 0) << "replay " << replay << ", element " << i;
  }
  ASSERT_OK(cudaStatus(cudaGraphExecDestroy(exec), "graph", __FILE__, __LINE__));
  ASSERT_OK(cudaStatus(cudaGraphDestroy(graph), "graph", __FILE__, __LINE__));
  ASSERT_OK(cudaStatus(cudaStreamDestroy(stream), "stream", __FILE__, __LINE__));
}

/// Sibling projections of the same rows in one launch (moe.multi_linear): each
/// within kRelative of float64 with its own bias, every output written, and a
/// row's bits the same at any row count. Shapes: Qwen3's q, k, v (K = 2048,
/// split K, a cluster per row block), gpt-oss's with biases (K = 2880), and
/// N not a multiple of the 64-row block (1000, 40) beside a wide one.
TEST(CudaLinearBF16, SiblingsMatchFloat64AndDoNotDependOnTheRowCount) {
  struct Case {
    int64_t k;
    std::vector<int64_t> n;
    bool bias;
  };
  for (const Case &c : {Case{2048, {4096, 512, 512}, false}, Case{2880, {4096, 512, 512}, true},
                        Case{4096, {1000, 40}, true}, Case{2048, {8}, false},
                        Case{1024, {64, 64, 64, 64}, true}}) {
    std::vector<Problem> problems;
    for (size_t s = 0; s < c.n.size(); ++s)
      problems.emplace_back(64, c.k, c.n[s], static_cast<unsigned>(101 + s));
    // The siblings share the first problem's rows.
    for (size_t s = 1; s < problems.size(); ++s) {
      problems[s].x = problems[0].x;
      problems[s].dX = upload(problems[0].x);
    }
    auto run = [&](int64_t first, int64_t m) {
      std::vector<DeviceBuffer> outs;
      std::vector<const uint16_t *> w;
      std::vector<const float *> bias;
      std::vector<float *> y;
      for (const Problem &p : problems) {
        outs.push_back(poisoned(m * p.n * 4));
        w.push_back(p.dW.dataAs<uint16_t>());
        bias.push_back(p.dBias.dataAs<float>());
        y.push_back(outs.back().dataAs<float>());
      }
      Status status = cuda::linearBF16Siblings(
          problems[0].dX.dataAs<float>() + first * c.k, m, c.k, static_cast<int>(problems.size()),
          w.data(), c.n.data(), c.bias ? bias.data() : nullptr, y.data(), nullptr);
      EXPECT_TRUE(status.isOk()) << status.message();
      EXPECT_TRUE(synchronize().isOk());
      std::vector<std::vector<float>> got;
      for (size_t s = 0; s < problems.size(); ++s)
        got.push_back(download<float>(outs[s], m * problems[s].n));
      return got;
    };
    std::vector<std::vector<float>> all = run(0, 64);
    for (size_t s = 0; s < problems.size(); ++s) {
      SCOPED_TRACE("K " + std::to_string(c.k) + ", sibling " + std::to_string(s) + " of " +
                   std::to_string(problems.size()));
      Problem &p = problems[s];
      if (!c.bias)
        std::fill(p.bias.begin(), p.bias.end(), 0.0f);
      ASSERT_NO_FATAL_FAILURE(expectMatchesFloat64(p, 64, all[s]));
    }
    for (int64_t m : {1, 7, 33}) {
      std::vector<std::vector<float>> some = run(64 - m, m);
      for (size_t s = 0; s < problems.size(); ++s)
        for (int64_t i = 0; i < m * c.n[s]; ++i)
          ASSERT_EQ(std::memcmp(&some[s][i], &all[s][(64 - m) * c.n[s] + i], 4), 0)
              << "K " << c.k << ", sibling " << s << ", M " << m << ", element " << i;
    }
  }
  // Above 64 rows each sibling runs on its own: the same as linearBF16 alone.
  Problem q(100, 2048, 512, 5), k(100, 2048, 64, 6);
  DeviceBuffer dQ = poisoned(100 * 512 * 4), dK = poisoned(100 * 64 * 4);
  const uint16_t *w[] = {q.dW.dataAs<uint16_t>(), k.dW.dataAs<uint16_t>()};
  const int64_t n[] = {512, 64};
  float *y[] = {dQ.dataAs<float>(), dK.dataAs<float>()};
  ASSERT_OK(
      cuda::linearBF16Siblings(q.dX.dataAs<float>(), 100, 2048, 2, w, n, nullptr, y, nullptr));
  ASSERT_OK(synchronize());
  std::fill(q.bias.begin(), q.bias.end(), 0.0f);
  ASSERT_NO_FATAL_FAILURE(expectMatchesFloat64(q, 100, download<float>(dQ, 100 * 512)));
}

/// Bad sibling counts are refused before any launch.
TEST(CudaLinearBF16, SiblingsRefuseBadCounts) {
  DeviceBuffer x = poisoned(4096), w = poisoned(4096), y = poisoned(4096);
  const uint16_t *weights[5] = {};
  const int64_t n[5] = {8, 8, 8, 8, 8};
  float *ys[5] = {};
  for (int i = 0; i < 5; ++i) {
    weights[i] = w.dataAs<uint16_t>();
    ys[i] = y.dataAs<float>();
  }
  for (int count : {0, 5}) {
    Status status = cuda::linearBF16Siblings(x.dataAs<float>(), 1, 8, count, weights, n, nullptr,
                                             ys, nullptr);
    EXPECT_NE(status.message().find(std::to_string(count) + " sibling projections"),
              std::string::npos)
        << status.message();
  }
}

/// Bad calls are refused with a message naming the problem, before any launch.
TEST(CudaLinearBF16, FewRowsRefuseBadShapes) {
  DeviceBuffer x = poisoned(4096), w = poisoned(4096), y = poisoned(4096);
  Status notMultipleOf8 = cuda::detail::linearBF16FewRows(
      x.dataAs<float>(), 1, 12, w.dataAs<uint16_t>(), 8, nullptr, cpu::Epilogue{},
      y.dataAs<float>(), nullptr);
  EXPECT_NE(notMultipleOf8.message().find("K = 12 is not a multiple of 8"), std::string::npos)
      << notMultipleOf8.message();
  Status tooMany = cuda::detail::linearBF16FewRows(x.dataAs<float>(), 65, 8,
                                                   w.dataAs<uint16_t>(), 8, nullptr,
                                                   cpu::Epilogue{}, y.dataAs<float>(), nullptr);
  EXPECT_NE(tooMany.message().find("65 rows"), std::string::npos) << tooMany.message();
  Status odd = cuda::detail::linearBF16FewRows(
      x.dataAs<float>(), 1, 8, w.dataAs<uint16_t>(), 7, nullptr,
      cpu::Epilogue{true, cpu::ActivationKind::SiLU, cpu::GateUpLayout::Concatenated},
      y.dataAs<float>(), nullptr);
  EXPECT_NE(odd.message().find("gated N = 7 is odd"), std::string::npos) << odd.message();
}

} // namespace
