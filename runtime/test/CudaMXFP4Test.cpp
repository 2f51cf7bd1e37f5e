//===- CudaMXFP4Test.cpp - the CUDA MXFP4 grouped matmul against f64 -------===//
//
// cuda::groupedMatmulMXFP4 on random MXFP4 weights (codes and scale bytes
// drawn directly, packed as moec/runtime/MXFP4.h lays them out, re-laid out on
// the device by cuda::relayoutMXFP4 as a model's create() does) against a
// float64 reference that dequantises them exactly: every tile, every fused
// epilogue, f32 and bf16 rows and results, K not a multiple of 32 (a partial
// last block) nor of the 256-deep stage, N not a multiple of the tiles, idle
// experts and a NaN-poisoned sentinel tail that must stay unwritten, scale
// bytes past 128 and NaN ones; the dequantising tile (DequantWgmma) also over
// several chunks of experts, with and without a bias. relayoutMXFP4 itself
// against the host's encoder (MXFP4Layout.cuh). Every CUDA call is checked.
//
//===----------------------------------------------------------------------===//

#include "moec/runtime/Cuda.h"
#include "moec/runtime/MXFP4.h"
#include "moec/runtime/cuda/MoEKernels.h"

#include "CudaTestUtil.h"
#include "MXFP4Layout.cuh"
#include "TestUtil.h"
#include "Tuning.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

using namespace moec::rt;
using moec::rt::test::download;
using moec::rt::test::fromBF16;
using moec::rt::test::poisoned;
using moec::rt::test::randomVector;
using moec::rt::test::toBF16;
using moec::rt::test::upload;

namespace {

namespace mx = moec::rt::mxfp4;

/// MXFP4 weights [E, N, K]: one code a byte (for the reference) and packed (for
/// the kernel), scale bytes [E, N, ceil(K/32)].
struct Weights {
  int64_t experts, n, k, kBlocks;
  std::vector<uint8_t> codes, packed, scales;

  Weights(int64_t experts, int64_t n, int64_t k)
      : experts(experts), n(n), k(k), kBlocks((k + mx::kBlock - 1) / mx::kBlock),
        codes(experts * n * k), packed(experts * n * mx::packedRowBytes(k)),
        scales(experts * n * kBlocks) {}

  /// Packs `codes` (after they are set) into `packed`.
  void pack() {
    int64_t rowBytes = mx::packedRowBytes(k);
    for (int64_t row = 0; row < experts * n; ++row)
      mx::packRow(codes.data() + row * k, k, packed.data() + row * rowBytes);
  }
  double value(int64_t e, int64_t row, int64_t i) const {
    int64_t r = e * n + row;
    return double(mx::kE2M1Values[codes[r * k + i]]) *
           std::ldexp(1.0, int(scales[r * kBlocks + i / mx::kBlock]) - mx::kScaleBias);
  }
};

/// Random codes of every value, and scale bytes drawn from `scaleBytes`.
Weights randomWeights(int64_t experts, int64_t n, int64_t k, const std::vector<int> &scaleBytes,
                      std::mt19937 &rng) {
  Weights w(experts, n, k);
  std::uniform_int_distribution<int> code(0, 15);
  std::uniform_int_distribution<size_t> pick(0, scaleBytes.size() - 1);
  for (uint8_t &c : w.codes)
    c = static_cast<uint8_t>(code(rng));
  for (uint8_t &s : w.scales)
    s = static_cast<uint8_t>(scaleBytes[pick(rng)]);
  w.pack();
  return w;
}

double activate(const cpu::Epilogue &e, double x) {
  switch (e.kind) {
  case cpu::ActivationKind::SiLU: return x / (1.0 + std::exp(-double(e.alpha) * x));
  case cpu::ActivationKind::GELU: return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
  case cpu::ActivationKind::ReLU: return x > 0 ? x : 0.0;
  case cpu::ActivationKind::Identity: return x;
  }
  return x;
}

bool gatedOf(const cpu::Epilogue &e) {
  return e.enabled && e.layout != cpu::GateUpLayout::None;
}
int64_t widthOf(const cpu::Epilogue &e, int64_t n) { return gatedOf(e) ? n / 2 : n; }

/// The f64 reference of rows [0, offsets[E-1]): exact products of `lhs` with
/// the dequantised weights, bias, epilogue.
std::vector<double> reference(const std::vector<float> &lhs, const Weights &w,
                              const std::vector<int32_t> &offsets, const std::vector<float> &bias,
                              const cpu::Epilogue &epilogue) {
  int64_t width = widthOf(epilogue, w.n), valid = offsets.back();
  std::vector<double> out(valid * width);
  std::vector<double> acc(w.n);
  std::vector<double> dense(w.experts * w.n * w.k); // the weights, dequantised once
  for (int64_t e = 0; e < w.experts; ++e)
    for (int64_t j = 0; j < w.n; ++j)
      for (int64_t i = 0; i < w.k; ++i)
        dense[(e * w.n + j) * w.k + i] = w.value(e, j, i);
  int64_t e = 0;
  for (int64_t r = 0; r < valid; ++r) {
    while (offsets[e] <= r)
      ++e;
    for (int64_t j = 0; j < w.n; ++j) {
      double sum = bias.empty() ? 0.0 : bias[e * w.n + j];
      const double *weights = dense.data() + (e * w.n + j) * w.k;
      for (int64_t i = 0; i < w.k; ++i)
        sum += double(lhs[r * w.k + i]) * weights[i];
      acc[j] = sum;
    }
    for (int64_t j = 0; j < width; ++j) {
      double v;
      if (gatedOf(epilogue)) {
        bool interleaved = epilogue.layout == cpu::GateUpLayout::Interleaved;
        double gate = acc[interleaved ? 2 * j : j], up = acc[interleaved ? 2 * j + 1 : width + j];
        if (std::isfinite(epilogue.limit)) {
          gate = std::min(gate, double(epilogue.limit));
          up = std::clamp(up, -double(epilogue.limit), double(epilogue.limit));
        }
        v = activate(epilogue, gate) * (up + epilogue.beta);
      } else {
        v = epilogue.enabled ? activate(epilogue, acc[j]) : acc[j];
      }
      out[r * width + j] = v;
    }
  }
  return out;
}

std::vector<cuda::BF16> toBF16Rows(const std::vector<float> &rows) {
  std::vector<cuda::BF16> out(rows.size());
  for (size_t i = 0; i < rows.size(); ++i)
    out[i].bits = toBF16(rows[i]);
  return out;
}

/// One call of the kernel (rows Lhs, results Out) into a NaN-poisoned result,
/// read back as f32: `got` holds all S rows.
template <typename Lhs, typename Out>
void runKernel(cuda::MXFP4Tile tile, bool settled, const std::vector<float> &lhs, int64_t S,
               const Weights &w, const std::vector<int32_t> &offsets,
               const std::vector<float> &bias, const cpu::Epilogue &epilogue,
               std::vector<float> &got) {
  int64_t width = widthOf(epilogue, w.n);
  DeviceBuffer dLhs;
  if constexpr (std::is_same_v<Lhs, cuda::BF16>)
    dLhs = upload(toBF16Rows(lhs));
  else
    dLhs = upload(lhs);
  DeviceBuffer dWeights = upload(w.packed), dScales = upload(w.scales),
               dOffsets = upload(offsets),
               dBias = upload(bias.empty() ? std::vector<float>{0.0f} : bias);
  ASSERT_OK(cuda::relayoutMXFP4(dWeights.dataAs<uint8_t>(), static_cast<int64_t>(w.packed.size()),
                                nullptr));
  DeviceBuffer dOut = poisoned(S * width * sizeof(Out));
  ASSERT_OK(cuda::groupedMatmulMXFP4(
      dLhs.dataAs<Lhs>(), S, w.k, dWeights.dataAs<uint8_t>(), dScales.dataAs<uint8_t>(),
      w.experts, w.n, dOffsets.dataAs<int32_t>(), bias.empty() ? nullptr : dBias.dataAs<float>(),
      epilogue, dOut.dataAs<Out>(), nullptr, tile, settled));
  ASSERT_OK(moec::rt::test::synchronize());
  got.assign(S * width, 0.0f);
  if constexpr (std::is_same_v<Out, cuda::BF16>) {
    std::vector<uint16_t> bits = download<uint16_t>(dOut, S * width);
    for (size_t i = 0; i < bits.size(); ++i)
      got[i] = fromBF16(bits[i]);
  } else {
    got = download<float>(dOut, S * width);
  }
}

/// Relative L2 error of the first want.size() values, and NaN (poison, never
/// written) in every value after them.
void expectClose(const std::vector<double> &want, const std::vector<float> &got, double tolerance,
                 const std::string &what) {
  double err = 0, norm = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_TRUE(std::isfinite(got[i])) << what << ": element " << i << " = " << got[i];
    err += (got[i] - want[i]) * (got[i] - want[i]);
    norm += want[i] * want[i];
  }
  ASSERT_GT(norm, 0.0) << what;
  EXPECT_LE(std::sqrt(err / norm), tolerance) << what;
  for (size_t i = want.size(); i < got.size(); ++i)
    ASSERT_TRUE(std::isnan(got[i])) << what << ": sentinel element " << i << " was written";
}

std::vector<cpu::Epilogue> allEpilogues() {
  return {
      {},
      {true, cpu::ActivationKind::SiLU, cpu::GateUpLayout::Concatenated},
      {true, cpu::ActivationKind::SiLU, cpu::GateUpLayout::Interleaved, 1.702f, 1.0f, 7.0f},
      {true, cpu::ActivationKind::GELU, cpu::GateUpLayout::None},
  };
}

/// Every tile this runtime has for K and N (DequantWgmma needs CUTLASS).
std::vector<cuda::MXFP4Tile> allTiles(int64_t k, int64_t n) {
  std::vector<cuda::MXFP4Tile> tiles = {
      cuda::MXFP4Tile::Auto,       cuda::MXFP4Tile::Tok8,       cuda::MXFP4Tile::Tok8Twice,
      cuda::MXFP4Tile::Tok8Quad,   cuda::MXFP4Tile::Tok8Split,  cuda::MXFP4Tile::Tok8SplitTwice,
      cuda::MXFP4Tile::Tok8Warps2, cuda::MXFP4Tile::Tok8Warps1, cuda::MXFP4Tile::Tok16,
      cuda::MXFP4Tile::Tok32,      cuda::MXFP4Tile::Tok64};
  if (cuda::mxfp4DequantAvailable(k, n))
    tiles.push_back(cuda::MXFP4Tile::DequantWgmma);
  return tiles;
}

/// Scale bytes of weights of magnitude about 2^-7 to 6 (the cast's range for
/// N(0, 0.02) to O(1) weights).
const std::vector<int> kUsualScales = {118, 120, 122, 124, 125, 126, 127};

/// Every tile (or those of `only`), epilogue and row/result type on one
/// shape: rows f32 as given within `exactBound` (1e-2: the kernel rounds the
/// rows to bf16, ~1e-3) of the reference of those rows (0: not compared), and
/// within 1e-4 of the reference of the rows rounded to bf16 (the kernel's own
/// arithmetic), as bf16 rows are. With a bias unless `withBias` is false.
void checkShape(int64_t E, int64_t N, int64_t K, const std::vector<int32_t> &offsets,
                int64_t tail, const std::vector<int> &scaleBytes, unsigned seed,
                double exactBound = 1e-2, const std::vector<cuda::MXFP4Tile> &only = {},
                bool withBias = true) {
  std::mt19937 rng(seed);
  const int64_t valid = offsets.back(), S = valid + tail;
  Weights w = randomWeights(E, N, K, scaleBytes, rng);
  std::vector<float> lhs = randomVector(S * K, rng), bias = randomVector(E * N, rng);
  if (!withBias)
    bias.clear();
  const std::vector<cuda::MXFP4Tile> tiles = only.empty() ? allTiles(K, N) : only;
  std::vector<float> lhsRounded = lhs;
  for (float &x : lhsRounded)
    x = fromBF16(toBF16(x));
  for (const cpu::Epilogue &epilogue : allEpilogues()) {
    std::vector<double> want = reference(lhs, w, offsets, bias, epilogue);
    std::vector<double> wantRounded = reference(lhsRounded, w, offsets, bias, epilogue);
    for (cuda::MXFP4Tile tile : tiles) {
      std::string what = std::string(cuda::mxfp4TileName(tile)) + ", layout " +
                         std::to_string(int(epilogue.layout)) + ", enabled " +
                         std::to_string(epilogue.enabled);
      SCOPED_TRACE(what);
      std::vector<float> got;
      ASSERT_NO_FATAL_FAILURE((runKernel<float, float>(tile, false, lhs, S, w, offsets, bias,
                                                       epilogue, got)));
      if (exactBound > 0) {
        ASSERT_NO_FATAL_FAILURE(expectClose(want, got, exactBound, what + ", f32 rows"));
      }
      ASSERT_NO_FATAL_FAILURE(expectClose(wantRounded, got, 1e-4, what + ", f32 rows rounded"));
      ASSERT_NO_FATAL_FAILURE((runKernel<cuda::BF16, float>(tile, true, lhsRounded, S, w, offsets,
                                                            bias, epilogue, got)));
      ASSERT_NO_FATAL_FAILURE(expectClose(wantRounded, got, 1e-4, what + ", bf16 rows"));
      // bf16 results: one more rounding (2^-9 relative at most).
      ASSERT_NO_FATAL_FAILURE((runKernel<cuda::BF16, cuda::BF16>(tile, false, lhsRounded, S, w,
                                                                 offsets, bias, epilogue, got)));
      ASSERT_NO_FATAL_FAILURE(expectClose(wantRounded, got, 4e-3, what + ", bf16 results"));
      ASSERT_NO_FATAL_FAILURE((runKernel<float, cuda::BF16>(tile, true, lhs, S, w, offsets, bias,
                                                            epilogue, got)));
      ASSERT_NO_FATAL_FAILURE(expectClose(exactBound > 0 ? want : wantRounded, got,
                                          exactBound > 0 ? exactBound : 4e-3,
                                          what + ", f32 rows, bf16 results"));
    }
  }
}

/// K = 264: 8 whole blocks and a partial one (one stage and a bit); N = 200
/// (a partial 128-row tile, and gated 100 columns: a partial 64-column one);
/// idle experts first, in the middle and last; an expert of 70 rows (several
/// tiles of every size); 5 sentinel rows.
TEST(CudaMXFP4, GroupedMatmulMatchesF64Reference) {
  checkShape(12, 200, 264, {0, 0, 3, 3, 73, 74, 74, 90, 107, 107, 108, 108}, 5, kUsualScales, 1);
}

/// gpt-oss-like depth with a partial block (K = 2888: 90 blocks and 8 codes,
/// 12 stages, the last nearly empty) and K = 8 (one partial block, less than a
/// stage's chunk), over few rows per expert (the decode tiles).
TEST(CudaMXFP4, GroupedMatmulDeepAndShallowK) {
  checkShape(4, 392, 2888, {2, 3, 3, 9}, 3, kUsualScales, 2);
  checkShape(6, 136, 8, {1, 1, 2, 40, 41, 45}, 2, kUsualScales, 3);
}

/// Scale bytes at the ends of the range: 0 and 1 (codes times 2^-127 and
/// 2^-126: bf16 subnormals, whose contributions vanish beside the rest), and
/// large ones, 129 to 140, whose multiplier 2^(s - 1) no bf16 holds (the
/// kernel's second multiply). Against the reference of the rows rounded to
/// bf16 only: sums of terms up to 2^15 that cancel to the clamped gpt-oss
/// gate's range make the rows' rounding a 1e-1 error there (as in any W4A16
/// or bf16 kernel), which says nothing of the kernel.
TEST(CudaMXFP4, GroupedMatmulExtremeScales) {
  checkShape(3, 136, 520, {4, 4, 21}, 2, {0, 1, 2, 126, 127, 128, 129, 133, 140}, 4,
             /*exactBound=*/0);
}

/// Every code at scale bytes 2 to 252 (every value that f32 holds as a normal
/// number) comes out exactly: one-hot rows pick single weights, whose product
/// with 1 and sum with zeros are exact.
TEST(CudaMXFP4, GroupedMatmulDequantisesExactly) {
  const int64_t K = 96, N = 160;
  Weights w(1, N, K);
  for (int64_t row = 0; row < N; ++row)
    for (int64_t i = 0; i < K; ++i)
      w.codes[row * K + i] = static_cast<uint8_t>((row * 7 + i) % 16);
  for (int64_t b = 0; b < N * w.kBlocks; ++b)
    w.scales[b] = static_cast<uint8_t>(2 + (b * 37) % 251);
  w.pack();
  std::vector<float> lhs(K * K, 0.0f);
  for (int64_t r = 0; r < K; ++r)
    lhs[r * K + r] = 1.0f;
  std::vector<int32_t> offsets = {static_cast<int32_t>(K)};
  for (cuda::MXFP4Tile tile : allTiles(K, N)) {
    SCOPED_TRACE(cuda::mxfp4TileName(tile));
    std::vector<float> got;
    ASSERT_NO_FATAL_FAILURE((runKernel<float, float>(tile, false, lhs, K, w, offsets, {},
                                                     cpu::Epilogue{}, got)));
    for (int64_t r = 0; r < K; ++r)
      for (int64_t j = 0; j < N; ++j)
        ASSERT_EQ(double(got[r * N + j]), w.value(0, j, r))
            << "weight [" << j << ", " << r << "]: code " << int(w.codes[j * K + r])
            << ", scale byte " << int(w.scales[j * w.kBlocks + r / 32]);
  }
}

/// Many experts with one or two rows each (decode): the 8-row tiles over more
/// blocks than SMs, and the grid Auto sizes for them.
TEST(CudaMXFP4, GroupedMatmulDecodeManyExperts) {
  std::vector<int32_t> offsets(64);
  int32_t end = 0;
  for (int e = 0; e < 64; ++e)
    offsets[e] = end += e % 3;
  checkShape(64, 520, 776, offsets, 4, kUsualScales, 5);
}

/// A NaN scale byte (0xFF) makes its row's outputs NaN and no other's, in a
/// whole block and in the partial last one (K = 72: blocks of 32, 32 and 8),
/// beside scale bytes past 128 in other rows (the warps' two-multiply path)
/// and usual ones; the other outputs match the reference.
TEST(CudaMXFP4, GroupedMatmulNaNScale) {
  const int64_t N = 136, K = 72, S = 11;
  std::mt19937 rng(6);
  Weights w = randomWeights(1, N, K, kUsualScales, rng);
  const int64_t nanRows[] = {5, 77};
  w.scales[5 * w.kBlocks + 1] = mx::kScaleNaN;
  w.scales[77 * w.kBlocks + 2] = mx::kScaleNaN;
  for (int64_t row : {6, 40, 100})
    w.scales[row * w.kBlocks] = static_cast<uint8_t>(129 + row % 7);
  std::vector<float> lhs = randomVector(S * K, rng);
  for (float &x : lhs)
    x = fromBF16(toBF16(x));
  std::vector<int32_t> offsets = {static_cast<int32_t>(S)};
  std::vector<double> want = reference(lhs, w, offsets, {}, cpu::Epilogue{});
  for (cuda::MXFP4Tile tile : allTiles(K, N)) {
    SCOPED_TRACE(cuda::mxfp4TileName(tile));
    std::vector<float> got;
    ASSERT_NO_FATAL_FAILURE(
        (runKernel<float, float>(tile, false, lhs, S, w, offsets, {}, cpu::Epilogue{}, got)));
    double err = 0, norm = 0;
    for (int64_t r = 0; r < S; ++r)
      for (int64_t j = 0; j < N; ++j) {
        double g = got[r * N + j], v = want[r * N + j];
        if (j == nanRows[0] || j == nanRows[1]) {
          ASSERT_TRUE(std::isnan(g)) << "row " << r << ", column " << j << " = " << g;
          continue;
        }
        ASSERT_TRUE(std::isfinite(g)) << "row " << r << ", column " << j << " = " << g;
        err += (g - v) * (g - v);
        norm += v * v;
      }
    EXPECT_LE(std::sqrt(err / norm), 1e-4);
  }
}

/// The device's re-layout is the host encoder's, word by word, over buffers
/// of a few words to many blocks' worth; it refuses partial or misaligned
/// words.
TEST(CudaMXFP4, RelayoutMatchesTheHostEncoder) {
  std::mt19937 rng(7);
  for (int64_t words : {1, 3, 4, 1000, 123457}) {
    std::vector<uint32_t> stored(words);
    for (uint32_t &x : stored)
      x = rng();
    DeviceBuffer device = upload(stored);
    ASSERT_OK(cuda::relayoutMXFP4(device.dataAs<uint8_t>(), words * 4, nullptr));
    ASSERT_OK(moec::rt::test::synchronize());
    std::vector<uint32_t> got = download<uint32_t>(device, words);
    for (int64_t i = 0; i < words; ++i)
      ASSERT_EQ(got[i], cuda::kMXFP4Encoder(stored[i])) << words << " words, word " << i;
  }
  DeviceBuffer buffer = poisoned(64);
  EXPECT_FALSE(cuda::relayoutMXFP4(buffer.dataAs<uint8_t>(), 6, nullptr).isOk());
  EXPECT_FALSE(cuda::relayoutMXFP4(buffer.dataAs<uint8_t>() + 2, 8, nullptr).isOk());
  ASSERT_OK(cuda::relayoutMXFP4(buffer.dataAs<uint8_t>(), 0, nullptr));
}

/// DequantWgmma's bf16 scratch for `bytes` within a scope (the default after).
struct DequantScratch {
  explicit DequantScratch(int64_t bytes) { cuda::setMXFP4DequantScratchBytes(bytes); }
  ~DequantScratch() { cuda::setMXFP4DequantScratchBytes(0); }
};

/// DequantWgmma over chunks of 3 experts (scratch for 3.5): 11 experts, so the
/// last chunk is short; idle experts first in a chunk (0, 6), last (5), a
/// whole idle chunk (6-8), the last expert idle; experts of 1 to 300 rows
/// (several of CUTLASS's 128-row tiles, a partial last one); N = 272 (a
/// partial 256-column tile, and gated 136 columns: whole 16-byte chunks, so
/// the activation runs in CUTLASS's epilogue for bf16 results); with a bias
/// and without (then CUTLASS writes the plain product itself); 7 sentinel
/// rows.
TEST(CudaMXFP4, GroupedMatmulDequantChunks) {
  const int64_t E = 11, N = 272, K = 264;
  if (!cuda::mxfp4DequantAvailable(K, N))
    GTEST_SKIP() << "this runtime has no DequantWgmma (built without CUTLASS)";
  DequantScratch scratch(N * K * 2 * 7 / 2);
  ASSERT_EQ(cuda::mxfp4DequantChunkExperts(E, N, K), 3);
  std::vector<int32_t> offsets = {0, 300, 301, 340, 469, 469, 469, 469, 469, 600, 600};
  checkShape(E, N, K, offsets, 7, kUsualScales, 6, 1e-2, {cuda::MXFP4Tile::DequantWgmma});
  checkShape(E, N, K, offsets, 7, kUsualScales, 7, 1e-2, {cuda::MXFP4Tile::DequantWgmma},
             /*withBias=*/false);
}

/// The default scratch takes a chunk of experts up to 1 GiB of bf16 weights,
/// and at least one expert however large.
TEST(CudaMXFP4, DequantChunkExpertsFollowTheScratch) {
  EXPECT_EQ(cuda::mxfp4DequantChunkExperts(128, 5760, 2880), 32);
  EXPECT_EQ(cuda::mxfp4DequantChunkExperts(8, 28672, 4096), 4);
  EXPECT_EQ(cuda::mxfp4DequantChunkExperts(4, 8, 8), 4);
  DequantScratch scratch(1000);
  EXPECT_EQ(cuda::mxfp4DequantChunkExperts(128, 5760, 2880), 1);
}

/// Auto dequantises from kMXFP4DequantMinRows rows per touched expert where
/// the runtime can, and takes the register tiles below.
TEST(CudaMXFP4, ChooseTileDequantisesAtManyRows) {
  const int64_t E = 128, N = 5760, K = 2880, rows = cuda::kMXFP4DequantMinRows;
  EXPECT_NE(cuda::chooseMXFP4Tile(E * (rows - 1), E, K, N, true), cuda::MXFP4Tile::DequantWgmma);
  if (cuda::mxfp4DequantAvailable(K, N))
    EXPECT_EQ(cuda::chooseMXFP4Tile(E * rows, E, K, N, true), cuda::MXFP4Tile::DequantWgmma);
  else
    EXPECT_NE(cuda::chooseMXFP4Tile(E * rows, E, K, N, true), cuda::MXFP4Tile::DequantWgmma);
  // K and N that CUTLASS's GEMM does not take (N not a multiple of 4) stay on the register tiles.
  EXPECT_NE(cuda::chooseMXFP4Tile(E * rows, E, K, 5762, true), cuda::MXFP4Tile::DequantWgmma);
}

TEST(CudaMXFP4, GroupedMatmulRefusesBadShapes) {
  DeviceBuffer rows = poisoned(4096), weights = poisoned(4096), scales = poisoned(4096),
               out = poisoned(4096);
  cpu::Epilogue gated{true, cpu::ActivationKind::SiLU, cpu::GateUpLayout::Concatenated};
  Status notMultipleOf8 = cuda::groupedMatmulMXFP4(
      rows.dataAs<float>(), 2, 12, weights.dataAs<uint8_t>(), scales.dataAs<uint8_t>(), 1, 4,
      nullptr, nullptr, cpu::Epilogue{}, out.dataAs<float>(), nullptr);
  EXPECT_FALSE(notMultipleOf8.isOk());
  Status oddGated = cuda::groupedMatmulMXFP4(
      rows.dataAs<float>(), 2, 16, weights.dataAs<uint8_t>(), scales.dataAs<uint8_t>(), 1, 5,
      nullptr, nullptr, gated, out.dataAs<float>(), nullptr);
  EXPECT_FALSE(oddGated.isOk());
  Status misaligned = cuda::groupedMatmulMXFP4(
      rows.dataAs<float>(), 2, 16, weights.dataAs<uint8_t>() + 1, scales.dataAs<uint8_t>(), 1, 4,
      nullptr, nullptr, cpu::Epilogue{}, out.dataAs<float>(), nullptr);
  EXPECT_FALSE(misaligned.isOk());
  EXPECT_NE(misaligned.message().find("aligned"), std::string::npos) << misaligned.message();
}

} // namespace
