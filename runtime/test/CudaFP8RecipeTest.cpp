//===- CudaFP8RecipeTest.cpp - FP8 experts at the benchmark shapes --------===//
//
// Issue 34's whole-block accuracy bounds on the GPU at the expert shapes of
// the four benchmark models (Qwen3-30B-A3B, Mixtral-8x7B, gpt-oss-120b with
// its biases and clamped SwiGLU, DeepSeek-V3): the FP8 chain an artifact runs
// (rows quantised per token and 128 channels, the FP8 gate/up GEMM with its
// activation and the intermediate quantised again, the FP8 down GEMM; e4m3
// weights with 128x128 block scales), on the public entry points and their
// Auto tiles: a few rows (the decode tiles) and many (CUTLASS's), against
//   - a float64 emulation of the same recipe: relative L2 <= 1e-2;
//   - the unquantised expert in float64: relative L2 <= 8e-2 and DeepGEMM's
//     1 - 2·Σxy / (Σx² + Σy²) <= 3.2e-3.
// Also the opt-in fused finish of the CUTLASS tiles (FP8Epilogue::Fused,
// Tuning.h), whose bf16 rounding before the intermediate's e4m3 codes flips a
// few per cent of them: held to 2e-2 against the emulation (past 1e-2,
// which is why the public entry does not run it).
// The emulation is written here from the recipe (Float8.h's e4m3 rounding),
// not from moec's CPU kernels. Every CUDA call is checked; outputs are
// NaN-poisoned first.
//
//===----------------------------------------------------------------------===//

#include "moec/runtime/Cuda.h"
#include "moec/runtime/Float8.h"
#include "moec/runtime/cuda/MoEKernels.h"

#include "CudaTestUtil.h"
#include "TestUtil.h"
#include "Tuning.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace moec::rt;
using moec::rt::test::download;
using moec::rt::test::poisoned;
using moec::rt::test::upload;

namespace {

constexpr int64_t kBlock = moec::rt::kScaleBlock;

struct ExpertShape {
  const char *model;
  int64_t hidden, intermediate;
  bool gptOss; // interleaved gate/up, clamped SwiGLU (alpha 1.702, up + 1, limit 7), biases
};

/// The recipe's scale of a block whose largest magnitude is `amax`: amax / 448
/// in f32, 1 for an all-zero block.
float blockScale(float amax) { return amax > 0 ? amax / static_cast<float>(kE4M3Max) : 1.0f; }

/// A [rows, cols] matrix of e4m3 codes with one f32 scale per 128 x 128 block
/// (amax / 448, 1 for an all-zero block), and the values they stand for.
struct BlockQuantized {
  std::vector<uint8_t> codes;
  std::vector<float> scales;
  std::vector<double> values;
};
BlockQuantized quantizeBlocks(const std::vector<float> &w, int64_t matrices, int64_t rows,
                              int64_t cols) {
  const int64_t rb = (rows + kBlock - 1) / kBlock, cb = (cols + kBlock - 1) / kBlock;
  BlockQuantized q{std::vector<uint8_t>(w.size()), std::vector<float>(matrices * rb * cb),
                   std::vector<double>(w.size())};
  for (int64_t m = 0; m < matrices; ++m)
    for (int64_t bi = 0; bi < rb; ++bi)
      for (int64_t bj = 0; bj < cb; ++bj) {
        const int64_t r1 = std::min(rows, (bi + 1) * kBlock), c1 = std::min(cols, (bj + 1) * kBlock);
        float amax = 0;
        for (int64_t r = bi * kBlock; r < r1; ++r)
          for (int64_t c = bj * kBlock; c < c1; ++c)
            amax = std::max(amax, std::fabs(w[(m * rows + r) * cols + c]));
        const float scale = blockScale(amax);
        q.scales[(m * rb + bi) * cb + bj] = scale;
        for (int64_t r = bi * kBlock; r < r1; ++r)
          for (int64_t c = bj * kBlock; c < c1; ++c) {
            const int64_t i = (m * rows + r) * cols + c;
            q.codes[i] = encodeE4M3(double(w[i]) / scale);
            q.values[i] = double(decodeE4M3(q.codes[i])) * scale;
          }
      }
  return q;
}

/// Row `x` [k] as the recipe quantises it (per 128 channels, amax / 448),
/// dequantised.
std::vector<double> quantizedRow(const std::vector<double> &x) {
  std::vector<double> out(x.size());
  for (size_t c0 = 0; c0 < x.size(); c0 += kBlock) {
    const size_t c1 = std::min(x.size(), c0 + kBlock);
    double amax = 0;
    for (size_t c = c0; c < c1; ++c)
      amax = std::max(amax, std::fabs(x[c]));
    const double scale = blockScale(static_cast<float>(amax));
    for (size_t c = c0; c < c1; ++c)
      out[c] = double(decodeE4M3(encodeE4M3(x[c] / scale))) * scale;
  }
  return out;
}

/// One expert row in float64: gate/up (weights [2I, H]), activation, the
/// intermediate quantised again when `quantized`, down (weights [H, I]).
std::vector<double> expertRow(const ExpertShape &s, std::vector<double> x, const double *gateUp,
                              const double *down, const float *gateUpBias, const float *downBias,
                              bool quantized) {
  const int64_t H = s.hidden, I = s.intermediate;
  if (quantized)
    x = quantizedRow(x);
  std::vector<double> product(2 * I), h(I), y(H);
  for (int64_t j = 0; j < 2 * I; ++j) {
    double sum = gateUpBias ? gateUpBias[j] : 0.0;
    for (int64_t c = 0; c < H; ++c)
      sum += gateUp[j * H + c] * x[c];
    product[j] = sum;
  }
  for (int64_t j = 0; j < I; ++j) {
    double gate = s.gptOss ? product[2 * j] : product[j];
    double up = s.gptOss ? product[2 * j + 1] : product[I + j];
    double alpha = 1.0, beta = 0.0;
    if (s.gptOss) {
      gate = std::min(gate, 7.0);
      up = std::clamp(up, -7.0, 7.0);
      alpha = 1.702;
      beta = 1.0;
    }
    h[j] = gate / (1.0 + std::exp(-alpha * gate)) * (up + beta);
  }
  if (quantized)
    h = quantizedRow(h);
  for (int64_t j = 0; j < H; ++j) {
    double sum = downBias ? downBias[j] : 0.0;
    for (int64_t c = 0; c < I; ++c)
      sum += down[j * I + c] * h[c];
    y[j] = sum;
  }
  return y;
}

/// `body(r)` for r in [0, n) over the host's threads.
template <typename Body> void parallelRows(int64_t n, Body body) {
  const int64_t threads = std::clamp<int64_t>(std::thread::hardware_concurrency(), 1, 32);
  std::vector<std::thread> pool;
  for (int64_t t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      for (int64_t r = t; r < n; r += threads)
        body(r);
    });
  for (std::thread &thread : pool)
    thread.join();
}

void checkRecipe(const ExpertShape &s, const std::vector<int32_t> &offsets,
                 cuda::FP8Epilogue finish) {
  const int64_t H = s.hidden, I = s.intermediate, E = static_cast<int64_t>(offsets.size());
  const int64_t S = offsets.back();
  const char *finishName = finish == cuda::FP8Epilogue::Fused ? "fused" : "pass";
  SCOPED_TRACE(std::string(s.model) + ", " + std::to_string(S) + " rows, " + finishName);
  std::mt19937 rng(static_cast<unsigned>(H + I + S));
  std::normal_distribution<float> normal(0.0f, 1.0f), weight(0.0f, 0.02f);
  std::vector<float> x(S * H), gateUp(E * 2 * I * H), down(E * H * I), gateUpBias, downBias;
  for (float &v : x)
    v = normal(rng);
  for (float &v : gateUp)
    v = weight(rng);
  for (float &v : down)
    v = weight(rng);
  if (s.gptOss) {
    gateUpBias.resize(E * 2 * I);
    downBias.resize(E * H);
    for (float &v : gateUpBias)
      v = weight(rng);
    for (float &v : downBias)
      v = weight(rng);
  }
  const BlockQuantized gu = quantizeBlocks(gateUp, E, 2 * I, H), dn = quantizeBlocks(down, E, H, I);

  // The chain on the GPU, as an artifact runs it.
  cpu::Epilogue epilogue{true, cpu::ActivationKind::SiLU, cpu::GateUpLayout::Concatenated};
  if (s.gptOss)
    epilogue = {true, cpu::ActivationKind::SiLU, cpu::GateUpLayout::Interleaved, 1.702f, 1.0f, 7.0f};
  const int64_t hBlocks = (H + kBlock - 1) / kBlock, iBlocks = (I + kBlock - 1) / kBlock;
  DeviceBuffer dx = upload(x), dOffsets = upload(offsets), dGu = upload(gu.codes),
               dGuScales = upload(gu.scales), dDn = upload(dn.codes), dDnScales = upload(dn.scales),
               dGuBias = upload(s.gptOss ? gateUpBias : std::vector<float>{0.0f}),
               dDnBias = upload(s.gptOss ? downBias : std::vector<float>{0.0f});
  DeviceBuffer dxq = poisoned(S * H), dxs = poisoned(S * hBlocks * 4), dhq = poisoned(S * I),
               dhs = poisoned(S * iBlocks * 4), dy = poisoned(S * H * 4);
  const int32_t *o = dOffsets.dataAs<int32_t>();
  ASSERT_OK(cuda::quantizeE4M3(dx.dataAs<float>(), S, H, o + E - 1, dxq.dataAs<uint8_t>(),
                               dxs.dataAs<float>(), nullptr));
  const cuda::FP8MatmulOperands gateUpOperands{
      dxq.dataAs<uint8_t>(), S, dxs.dataAs<float>(), H, dGu.dataAs<uint8_t>(),
      dGuScales.dataAs<float>(), E, 2 * I, o, s.gptOss ? dGuBias.dataAs<float>() : nullptr,
      epilogue};
  if (finish == cuda::FP8Epilogue::Pass) // the public entry, as artifacts call it
    ASSERT_OK(cuda::groupedMatmulFP8Quantized(
        dxq.dataAs<uint8_t>(), S, dxs.dataAs<float>(), H, dGu.dataAs<uint8_t>(),
        dGuScales.dataAs<float>(), E, 2 * I, o, s.gptOss ? dGuBias.dataAs<float>() : nullptr,
        epilogue, dhq.dataAs<uint8_t>(), dhs.dataAs<float>(), nullptr, 0, nullptr));
  else
    ASSERT_OK(cuda::groupedMatmulFP8Quantized(gateUpOperands, dhq.dataAs<uint8_t>(),
                                              dhs.dataAs<float>(), nullptr, 0, nullptr,
                                              cuda::FP8Tile::Auto, false, finish));
  ASSERT_OK(cuda::groupedMatmulFP8(dhq.dataAs<uint8_t>(), S, dhs.dataAs<float>(), I,
                                   dDn.dataAs<uint8_t>(), dDnScales.dataAs<float>(), E, H, o,
                                   s.gptOss ? dDnBias.dataAs<float>() : nullptr, cpu::Epilogue{},
                                   dy.dataAs<float>(), nullptr));
  ASSERT_OK(moec::rt::test::synchronize());
  const std::vector<float> got = download<float>(dy, S * H);

  // The emulation and the unquantised expert, row by row.
  std::vector<double> emulated(S * H), exact(S * H);
  std::vector<double> gateUpExact(gateUp.begin(), gateUp.end()), downExact(down.begin(), down.end());
  parallelRows(S, [&](int64_t r) {
    const int64_t e = std::upper_bound(offsets.begin(), offsets.end(), r) - offsets.begin();
    std::vector<double> row(x.begin() + r * H, x.begin() + (r + 1) * H);
    const float *guBias = s.gptOss ? gateUpBias.data() + e * 2 * I : nullptr;
    const float *dnBias = s.gptOss ? downBias.data() + e * H : nullptr;
    std::vector<double> a = expertRow(s, row, gu.values.data() + e * 2 * I * H,
                                      dn.values.data() + e * H * I, guBias, dnBias, true);
    std::vector<double> b = expertRow(s, row, gateUpExact.data() + e * 2 * I * H,
                                      downExact.data() + e * H * I, guBias, dnBias, false);
    std::copy(a.begin(), a.end(), emulated.begin() + r * H);
    std::copy(b.begin(), b.end(), exact.begin() + r * H);
  });
  double errEmulated = 0, normEmulated = 0, errExact = 0, sxy = 0, sxx = 0, syy = 0;
  for (int64_t i = 0; i < S * H; ++i) {
    ASSERT_TRUE(std::isfinite(got[i])) << "output " << i << " = " << got[i];
    const double g = got[i];
    errEmulated += (g - emulated[i]) * (g - emulated[i]);
    normEmulated += emulated[i] * emulated[i];
    errExact += (g - exact[i]) * (g - exact[i]);
    sxy += g * exact[i];
    sxx += g * g;
    syy += exact[i] * exact[i];
  }
  const double relEmulated = std::sqrt(errEmulated / normEmulated);
  const double relExact = std::sqrt(errExact / syy), diff = 1.0 - 2.0 * sxy / (sxx + syy);
  std::printf("  %s, %lld rows, %s: relative L2 %.2e against the emulated recipe, %.2e against "
              "float64; DeepGEMM's difference %.2e\n",
              s.model, static_cast<long long>(S), finishName, relEmulated, relExact, diff);
  EXPECT_LE(relEmulated, finish == cuda::FP8Epilogue::Pass ? 1e-2 : 2e-2);
  EXPECT_LE(relExact, 8e-2);
  EXPECT_LE(diff, 3.2e-3);
}

const ExpertShape kShapes[] = {{"Qwen3-30B-A3B", 2048, 768, false},
                               {"Mixtral-8x7B", 4096, 14336, false},
                               {"gpt-oss-120b", 2880, 2880, true},
                               {"DeepSeek-V3", 7168, 2048, false}};

/// Two experts: 3 and 2 rows (Auto's decode tiles), then 40 and 136 rows
/// (CUTLASS's wgmma tiles, a partial 128-row tile; 16 and 32 rows for
/// Mixtral's and DeepSeek-V3's large experts, whose float64 reference is
/// slow). The public entry (Pass on the CUTLASS tiles), then the fused finish.
/// One test per shape, so that gtest's shards can run them side by side.
void checkShape(const ExpertShape &shape) {
  for (const std::vector<int32_t> &offsets :
       {std::vector<int32_t>{3, 5}, shape.hidden * shape.intermediate > 16 << 20
                                          ? std::vector<int32_t>{16, 48}
                                          : std::vector<int32_t>{40, 176}})
    for (cuda::FP8Epilogue finish : {cuda::FP8Epilogue::Pass, cuda::FP8Epilogue::Fused})
      ASSERT_NO_FATAL_FAILURE(checkRecipe(shape, offsets, finish));
}

TEST(CudaFP8Recipe, Qwen3WithinIssue34sBounds) { checkShape(kShapes[0]); }
TEST(CudaFP8Recipe, MixtralWithinIssue34sBounds) { checkShape(kShapes[1]); }
TEST(CudaFP8Recipe, GptOssWithinIssue34sBounds) { checkShape(kShapes[2]); }
TEST(CudaFP8Recipe, DeepSeekV3WithinIssue34sBounds) { checkShape(kShapes[3]); }

} // namespace
