//===- CudaKernelsTest.cpp - CUDA moe kernels against the CPU kernels -------===//
//
// The CPU kernels are checked against float64 references (CpuKernelsTest.cpp);
// here every CUDA kernel must agree with them on random inputs, with device
// outputs poisoned (NaN) before each run and every CUDA call checked. Integer
// results (ids, permutation, offsets) must match exactly.
// (Past 800 lines on purpose: one GPU test binary whose cases share the
// device-buffer, poisoning and CPU-comparison helpers at its top; grouped by
// kernel, in pipeline order.)
//
//===----------------------------------------------------------------------===//

#include "moec/runtime/Cuda.h"
#include "moec/runtime/cpu/MoEKernels.h"
#include "moec/runtime/cuda/MoEKernels.h"

#include "DependentLaunch.cuh"
#include "Tuning.h"
#include "CudaTestUtil.h"
#include "TestUtil.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

using namespace moec::rt;
using moec::rt::test::download;
using moec::rt::test::fromBF16;
using moec::rt::test::roundToBF16;
using moec::rt::test::toBF16;
using moec::rt::test::poisoned;
using moec::rt::test::randomVector;
using moec::rt::test::upload;
using moec::rt::test::RandomBlock;

namespace {

/// Random e4m3 codes of either sign, never NaN (magnitude codes 0 to 0x7E).
std::vector<uint8_t> randomE4M3(size_t count, std::mt19937 &rng) {
  std::vector<uint8_t> codes(count);
  std::uniform_int_distribution<int> code(0, 0x7E), sign(0, 1);
  for (uint8_t &c : codes)
    c = static_cast<uint8_t>(code(rng) | (sign(rng) ? 0x80 : 0));
  return codes;
}

/// Random positive FP8 block scales, 1e-3 to 4e-3.
std::vector<float> randomBlockScales(size_t count, std::mt19937 &rng) {
  std::vector<float> scales(count);
  std::uniform_real_distribution<float> positive(1e-3f, 4e-3f);
  for (float &s : scales)
    s = positive(rng);
  return scales;
}

void expectNear(const std::vector<float> &want, const std::vector<float> &got, double rtol,
                double atol, const char *what, size_t count = SIZE_MAX) {
  count = std::min(count, want.size());
  for (size_t i = 0; i < count; ++i)
    ASSERT_LE(std::abs(double(got[i]) - want[i]), atol + rtol * std::abs(want[i]))
        << what << "[" << i << "] = " << got[i] << ", expected " << want[i];
}

void checkRoute(int64_t E, bool ties);

TEST(CudaKernels, RouteMatchesCpuForEveryKind) {
  // Without expert groups and up to 256 experts a warp routes a token
  // (routeWarpKernel: 1, 2, 4 and 8 experts per lane); with groups, or 300
  // experts, a block (fewer experts than threads: idle warps; more: several per
  // thread).
  for (int64_t experts : {8, 64, 128, 256, 300})
    ASSERT_NO_FATAL_FAILURE(checkRoute(experts, false));
}

TEST(CudaKernels, RouteBreaksTiesLikeCpu) {
  // Logits on a grid of halves, a third of them ±0: most choices are ties, which
  // go to the lower expert id in every kernel (-0 and +0 are equal).
  for (int64_t experts : {8, 64, 128, 256, 300})
    ASSERT_NO_FATAL_FAILURE(checkRoute(experts, true));
}

void checkRoute(int64_t E, bool ties) {
  SCOPED_TRACE("experts " + std::to_string(E) + (ties ? ", ties" : ""));
  std::mt19937 rng(11);
  const int64_t T = 67;
  auto logits = randomVector(T * E, rng, 2.0f), bias = randomVector(E, rng, 0.3f);
  if (ties) {
    for (size_t i = 0; i < logits.size(); ++i)
      logits[i] = i % 3 == 0 ? (i % 2 ? -0.0f : 0.0f) : std::round(logits[i] * 2.0f) / 2.0f;
    for (float &b : bias)
      b = std::round(b * 4.0f) / 4.0f;
  }
  cpu::ThreadPool pool(2);
  std::vector<cpu::Routing> routings = {
      {cpu::RoutingKind::SoftmaxTopK, 2, true},
      {cpu::RoutingKind::SoftmaxTopK, 8, false},
      {cpu::RoutingKind::SoftmaxTopK, 40, true}, // past routeWarpKernel's 32 kept choices
      {cpu::RoutingKind::TopKSoftmax, 4, false},
      {cpu::RoutingKind::SigmoidGroupTopK, 8, true, 8, 4, 2.5f},
      {cpu::RoutingKind::SigmoidGroupTopK, 4, true, 1, 1, 1.5f},
  };
  DeviceBuffer dLogits = upload(logits), dBias = upload(bias);
  for (const cpu::Routing &r : routings) {
    if (r.topK > E ||
        (r.kind == cpu::RoutingKind::SigmoidGroupTopK && r.numGroups > 1 && (E < 64 || E % 8)))
      continue; // 8 groups of two best need 16 experts; keep them plentiful
    bool withBias = r.kind == cpu::RoutingKind::SigmoidGroupTopK;
    std::vector<int32_t> ids(T * r.topK);
    std::vector<float> weights(T * r.topK);
    cpu::route(pool, logits.data(), T, E, withBias ? bias.data() : nullptr, r, ids.data(),
               weights.data());
    DeviceBuffer dIds = poisoned(ids.size() * 4), dWeights = poisoned(weights.size() * 4);
    ASSERT_OK(cuda::route(dLogits.dataAs<float>(), T, E, withBias ? dBias.dataAs<float>() : nullptr,
                          r, dIds.dataAs<int32_t>(), dWeights.dataAs<float>(), nullptr));
    ASSERT_OK(cudaStatus(cudaDeviceSynchronize(), "sync", __FILE__, __LINE__));
    EXPECT_EQ(download<int32_t>(dIds, ids.size()), ids);
    expectNear(std::vector<float>(weights.begin(), weights.end()),
               download<float>(dWeights, weights.size()), 1e-5, 1e-7, "weights");
  }
}

void checkSort(int64_t S, int64_t E, int64_t firstExpert);

TEST(CudaKernels, SortByExpertMatchesCpuWithInverse) {
  // Up to kSortOneBlockMaxSlots: one block (128 x 2 up to 256 slots, 256 x 4
  // beyond); then up to kSortCountingMaxSlots over up to 256 experts, the
  // counting sort (one block, 32 warps: 1025 leaves most warps without slots);
  // past either, CUB's device-wide sort and an inversion of its own. E = 4096:
  // the most local experts; first expert 5: expert parallel.
  // 5003 and 16000: a last warp with a partial share, the warps' shares of 160
  // and 512 slots (5 and 16 rounds).
  static_assert(cuda::kSortOneBlockMaxSlots == 1024 && cuda::kSortCountingMaxSlots == 16384 &&
                cuda::kSortCountingMaxExperts == 256);
  for (int64_t S : {1, 8, 255, 256, 257, 1000, 1024, 1025, 5003, 16000, 16384, 16385})
    for (auto [E, first] :
         {std::pair<int64_t, int64_t>{8, 0}, {128, 0}, {256, 3}, {300, 5}, {4096, 0}})
      ASSERT_NO_FATAL_FAILURE(checkSort(S, E, first));
}

void checkSort(int64_t S, int64_t E, int64_t firstExpert) {
  SCOPED_TRACE("slots " + std::to_string(S) + ", experts " + std::to_string(E) + ", first " +
               std::to_string(firstExpert));
  std::mt19937 rng(static_cast<unsigned>(S * 131 + E));
  // Few distinct ids so that ties (stability) are common; about one in nine
  // invalid: below the local range, past it, negative.
  std::uniform_int_distribution<int64_t> pick(0, std::min<int64_t>(E, 40) + 4);
  std::vector<int32_t> ids(S);
  for (auto &id : ids) {
    int64_t v = pick(rng);
    id = static_cast<int32_t>(v < 2 ? -1 - v : v < 4 ? firstExpert + E + v : firstExpert + v - 4);
  }
  ids[0] = static_cast<int32_t>(firstExpert + E - 1); // the last local expert
  std::vector<int32_t> perm(S), offsets(E);
  int32_t numValid = 0;
  cpu::sortByExpert(ids.data(), S, E, firstExpert, perm.data(), offsets.data(), &numValid);
  std::vector<int32_t> inverse(S, -1);
  for (int32_t r = 0; r < numValid; ++r)
    inverse[perm[r]] = r;

  DeviceBuffer dIds = upload(ids), dPerm = poisoned(S * 4), dOffsets = poisoned(E * 4),
               dValid = poisoned(4), dInverse = poisoned(S * 4);
  size_t workspaceBytes = 0;
  ASSERT_OK(cuda::sortWorkspaceBytes(S, workspaceBytes));
  DeviceBuffer workspace = poisoned(workspaceBytes);
  ASSERT_OK(cuda::sortByExpert(dIds.dataAs<int32_t>(), S, E, firstExpert, dPerm.dataAs<int32_t>(),
                               dOffsets.dataAs<int32_t>(), dValid.dataAs<int32_t>(),
                               dInverse.dataAs<int32_t>(), workspace.data(), workspaceBytes,
                               nullptr));
  ASSERT_OK(cudaStatus(cudaDeviceSynchronize(), "sync", __FILE__, __LINE__));
  ASSERT_EQ(download<int32_t>(dValid, 1)[0], numValid);
  ASSERT_GT(numValid, 0);
  EXPECT_EQ(download<int32_t>(dPerm, S), perm);
  EXPECT_EQ(download<int32_t>(dOffsets, E), offsets);
  EXPECT_EQ(download<int32_t>(dInverse, S), inverse);
}

void checkGroupedPipeline(int64_t H, int64_t E, int64_t T, bool sortsInverse);

TEST(CudaKernels, GroupedPipelineMatchesCpuWithSentinels) {
  // H = 96: combine's 16-byte path; 1030: its element path over three column
  // chunks. E = 300: the offsets' scan spans many threads' items.
  // T = 129 (258 slots): the one-block sort; 2100 (4200): the counting sort
  // (8 experts) or CUB's (300), and the token-major permute. Each with the sort's inverse given to
  // permute and combineRows, captured in a CUDA graph, and without it, eagerly (combine and permute
  // invert on their own).
  for (auto [hidden, experts] : {std::pair<int64_t, int64_t>{96, 8}, {1030, 8}, {96, 300}})
    for (int64_t T : {129, 2100})
      for (bool sortsInverse : {true, false})
        ASSERT_NO_FATAL_FAILURE(checkGroupedPipeline(hidden, experts, T, sortsInverse));
}

void checkGroupedPipeline(int64_t H, int64_t E, int64_t T, bool sortsInverse) {
  SCOPED_TRACE("hidden " + std::to_string(H) + ", experts " + std::to_string(E) + ", tokens " +
               std::to_string(T) + (sortsInverse ? ", the sort's inverse" : ""));
  std::mt19937 rng(5);
  const int64_t I = 48, K = 2, S = T * K;
  RandomBlock block(T, H, I, E, K, rng);
  const auto &x = block.x, &gu = block.gateUp, &down = block.down, &gub = block.gateUpBias,
             &w = block.weights, &shared = block.shared, &gate = block.sharedGate;
  auto &ids = block.ids;
  ids[0] = E;             // out of range
  ids[7] = -1;            // negative
  ids[40] = ids[41] = static_cast<int32_t>(E + 99); // token 20: all slots sentinels
  cpu::Epilogue act{true, cpu::ActivationKind::SiLU, cpu::GateUpLayout::Interleaved, 1.702f, 1.0f,
                    7.0f};

  // CPU: the reference.
  cpu::ThreadPool pool(2);
  std::vector<int32_t> perm(S), offsets(E);
  int32_t numValid;
  cpu::sortByExpert(ids.data(), S, E, 0, perm.data(), offsets.data(), &numValid);
  std::vector<float> rows(S * H), h(S * I), y(S * H), out(T * H);
  cpu::permute(pool, x.data(), H, perm.data(), numValid, K, rows.data());
  cpu::groupedMatmul(pool, rows.data(), H, gu.data(), E, 2 * I, offsets.data(), gub.data(), act,
                     h.data());
  cpu::groupedMatmul(pool, h.data(), I, down.data(), E, H, offsets.data(), nullptr, {}, y.data());
  cpu::combine(pool, y.data(), perm.data(), S, H, w.data(), T, K, numValid, shared.data(),
               gate.data(), out.data());

  // CUDA: the same chain with no host synchronisation until the end.
  DeviceBuffer dIds = upload(ids), dX = upload(x), dGu = upload(gu), dDown = upload(down),
               dGub = upload(gub), dW = upload(w), dShared = upload(shared), dGate = upload(gate);
  DeviceBuffer dPerm = poisoned(S * 4), dOffsets = poisoned(E * 4), dNumValid = poisoned(4),
               dRows = poisoned(S * H * 4), dH = poisoned(S * I * 4), dY = poisoned(S * H * 4),
               dOut = poisoned(T * H * 4), dRowOfSlot = poisoned(S * 4);
  size_t workspaceBytes = 0;
  ASSERT_OK(cuda::sortWorkspaceBytes(S, workspaceBytes));
  DeviceBuffer workspace = poisoned(workspaceBytes);
  // With the inverse, the chain runs as an artifact runs it: captured in a CUDA
  // graph, then replayed. At T = 129 on a non-blocking stream known before the
  // capture, as the artifacts' (programmatic edges between the dependent
  // launches); at 2100 on a blocking one (plain launches while captured:
  // DependentLaunch.cuh).
  cudaStream_t stream;
  ASSERT_OK(cudaStatus(
      cudaStreamCreateWithFlags(&stream, T < 1000 ? cudaStreamNonBlocking : cudaStreamDefault),
      "stream", __FILE__, __LINE__));
  cuda::detail::noteStream(stream);
  // A failed call must not leave the stream capturing (every later test would
  // fail with it); the stream is destroyed on every way out.
  struct DestroyOnExit {
    cudaStream_t stream;
    ~DestroyOnExit() {
      cudaStreamCaptureStatus status;
      cudaGraph_t graph = nullptr;
      if (cudaStreamIsCapturing(stream, &status) == cudaSuccess &&
          status != cudaStreamCaptureStatusNone &&
          cudaStreamEndCapture(stream, &graph) == cudaSuccess)
        cudaGraphDestroy(graph);
      cudaStreamDestroy(stream);
      cudaGetLastError();
    }
  } destroyStream{stream};
  int32_t *inverse = sortsInverse ? dRowOfSlot.dataAs<int32_t>() : nullptr;
  if (sortsInverse)
    ASSERT_OK(cudaStatus(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed), "capture",
                         __FILE__, __LINE__));
  ASSERT_OK(cuda::sortByExpert(dIds.dataAs<int32_t>(), S, E, 0, dPerm.dataAs<int32_t>(),
                               dOffsets.dataAs<int32_t>(), dNumValid.dataAs<int32_t>(), inverse,
                               workspace.data(), workspaceBytes, stream));
  ASSERT_OK(cuda::permute(dX.dataAs<float>(), H, dPerm.dataAs<int32_t>(),
                          dNumValid.dataAs<int32_t>(), inverse, S, K, dRows.dataAs<float>(),
                          stream));
  ASSERT_OK(cuda::groupedMatmul(dRows.dataAs<float>(), S, H, dGu.dataAs<float>(), E, 2 * I,
                                dOffsets.dataAs<int32_t>(), dGub.dataAs<float>(), act,
                                dH.dataAs<float>(), stream));
  ASSERT_OK(cuda::groupedMatmul(dH.dataAs<float>(), S, I, dDown.dataAs<float>(), E, H,
                                dOffsets.dataAs<int32_t>(), nullptr, {}, dY.dataAs<float>(),
                                stream));
  if (sortsInverse)
    ASSERT_OK(cuda::combineRows(dY.dataAs<float>(), inverse, H, dW.dataAs<float>(), T, K,
                                dShared.dataAs<float>(), dGate.dataAs<float>(),
                                dOut.dataAs<float>(), stream));
  else
    ASSERT_OK(cuda::combine(dY.dataAs<float>(), dPerm.dataAs<int32_t>(), S, H, dW.dataAs<float>(),
                            T, K, dNumValid.dataAs<int32_t>(), dShared.dataAs<float>(),
                            dGate.dataAs<float>(), dRowOfSlot.dataAs<int32_t>(),
                            dOut.dataAs<float>(), stream));
  if (sortsInverse) {
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    ASSERT_OK(cudaStatus(cudaStreamEndCapture(stream, &graph), "capture", __FILE__, __LINE__));
    ASSERT_OK(cudaStatus(cudaGraphInstantiate(&exec, graph, 0), "graph", __FILE__, __LINE__));
    ASSERT_OK(cudaStatus(cudaGraphLaunch(exec, stream), "graph launch", __FILE__, __LINE__));
    ASSERT_OK(cudaStatus(cudaStreamSynchronize(stream), "sync", __FILE__, __LINE__));
    ASSERT_OK(cudaStatus(cudaGraphExecDestroy(exec), "graph", __FILE__, __LINE__));
    ASSERT_OK(cudaStatus(cudaGraphDestroy(graph), "graph", __FILE__, __LINE__));
  }
  ASSERT_OK(cudaStatus(cudaStreamSynchronize(stream), "sync", __FILE__, __LINE__));

  EXPECT_EQ(download<int32_t>(dPerm, S), perm);
  EXPECT_EQ(download<int32_t>(dOffsets, E), offsets);
  EXPECT_EQ(download<int32_t>(dNumValid, 1)[0], numValid);
  ASSERT_EQ(numValid, S - 4);
  if (sortsInverse) {
    std::vector<int32_t> rowOfSlot(S, -1);
    for (int32_t r = 0; r < numValid; ++r)
      rowOfSlot[perm[r]] = r;
    EXPECT_EQ(download<int32_t>(dRowOfSlot, S), rowOfSlot);
  }
  std::vector<float> gotY = download<float>(dY, S * H);
  // Both sides sum in f32, in different orders, and the sums over H cancel:
  // an element's error scales with the whole tensor's magnitude (its RMS), not
  // its own (a wrong row or weight is off by about the RMS itself).
  auto rms = [](const std::vector<float> &v, size_t count) {
    double sum = 0;
    for (size_t i = 0; i < count; ++i)
      sum += double(v[i]) * v[i];
    return std::sqrt(sum / std::max<size_t>(1, count));
  };
  expectNear(y, gotY, 1e-4, 1e-4 * rms(y, size_t(numValid) * H), "down rows",
             size_t(numValid) * H);
  for (int64_t i = int64_t(numValid) * H; i < S * H; ++i)
    ASSERT_TRUE(std::isnan(gotY[i])) << "sentinel row element " << i << " was written";
  expectNear(out, download<float>(dOut, T * H), 1e-4, 1e-4 * rms(out, out.size()), "output");
}

} // namespace

namespace {

/// Columns of a grouped matmul's output: N, or N / 2 when a gated epilogue halves it.
int64_t outputWidth(const cpu::Epilogue &epilogue, int64_t n) {
  return epilogue.enabled && epilogue.layout != cpu::GateUpLayout::None ? n / 2 : n;
}

/// The rows of `got` below `valid` match `want`; the sentinel rows after them
/// were never written (they still hold the NaN poison).
void expectRowsThenUntouchedTail(const std::vector<float> &want, const std::vector<float> &got,
                                 int64_t valid, int64_t width, const char *what,
                                 double atol = 1e-4) {
  expectNear(want, got, 1e-4, atol, what, valid * width);
  for (size_t i = valid * width; i < got.size(); ++i)
    ASSERT_TRUE(std::isnan(got[i])) << what << ": sentinel row element " << i << " was written";
}

/// groupedMatmulBF16 with `tile` on the GPU (into NaN-poisoned output, read back
/// into `got`) and cpu::groupedMatmul on the same bf16-rounded weights (`want`).
void runOnGpuAndCpu(cuda::BF16Tile tile, const std::vector<float> &lhs, int64_t S,
                    int64_t K, const std::vector<float> &weights,
                    const std::vector<uint16_t> &weightsBF16, int64_t E, int64_t N,
                    const std::vector<int32_t> &offsets, const std::vector<float> &bias,
                    const cpu::Epilogue &epilogue, std::vector<float> &want,
                    std::vector<float> &got) {
  int64_t width = outputWidth(epilogue, N);
  cpu::ThreadPool pool(2);
  want.assign(S * width, 0.0f);
  // An empty bias is no bias (a null pointer on both sides).
  cpu::groupedMatmul(pool, lhs.data(), K, weights.data(), E, N, offsets.data(),
                     bias.empty() ? nullptr : bias.data(), epilogue, want.data());
  DeviceBuffer dLhs = upload(lhs), dWeights = upload(weightsBF16), dOffsets = upload(offsets),
               dBias = upload(bias.empty() ? std::vector<float>{0.0f} : bias);
  DeviceBuffer dOut = poisoned(S * width * 4);
  ASSERT_OK(cuda::groupedMatmulBF16(dLhs.dataAs<float>(), S, K, dWeights.dataAs<uint16_t>(), E,
                                    N, dOffsets.dataAs<int32_t>(),
                                    bias.empty() ? nullptr : dBias.dataAs<float>(), epilogue,
                                    dOut.dataAs<float>(), nullptr, tile));
  ASSERT_OK(cudaStatus(cudaDeviceSynchronize(), "sync", __FILE__, __LINE__));
  got = download<float>(dOut, S * width);
}

/// Every epilogue the grouped matmul fuses: none, SwiGLU concatenated, the
/// gpt-oss clamped interleaved form, an ungated activation.
std::vector<cpu::Epilogue> allEpilogues() {
  return {
      {},
      {true, cpu::ActivationKind::SiLU, cpu::GateUpLayout::Concatenated},
      {true, cpu::ActivationKind::SiLU, cpu::GateUpLayout::Interleaved, 1.702f, 1.0f, 1.0f},
      {true, cpu::ActivationKind::GELU, cpu::GateUpLayout::None},
  };
}

/// The tensor-core grouped matmul, every tile and epilogue, against the CPU on
/// the same bf16-rounded rows and weights: K not a multiple of the 64-wide
/// stage, N not a multiple of the 128-row tile, idle experts first, in the
/// middle and last, an expert with more rows than one 64-row tile (and than
/// eight 8-row ones), and a NaN-poisoned sentinel tail that must stay unwritten.
TEST(CudaKernels, TensorCoreGroupedMatmulMatchesCpu) {
  std::mt19937 rng(11);
  const int64_t E = 12, K = 264, N = 200;
  const std::vector<int32_t> offsets = {0, 0, 3, 3, 73, 74, 74, 90, 107, 107, 108, 108};
  const int64_t valid = 108, S = valid + 5;
  auto lhs = randomVector(S * K, rng), bias = randomVector(E * N, rng);
  auto weights = randomVector(E * N * K, rng, 0.2f);
  roundToBF16(lhs); // the kernel multiplies bf16 rows: give it exactly those
  std::vector<uint16_t> weightsBF16 = roundToBF16(weights);
  for (cuda::BF16Tile tile :
       {cuda::BF16Tile::Auto, cuda::BF16Tile::Tok8, cuda::BF16Tile::Tok8Warps2,
        cuda::BF16Tile::Tok16, cuda::BF16Tile::Tok32, cuda::BF16Tile::Tok64, cuda::BF16Tile::Wgmma,
        cuda::BF16Tile::Wgmma128x256}) {
    if (!cuda::bf16TileAvailable(tile))
      continue;
    for (const cpu::Epilogue &epilogue : allEpilogues()) {
      SCOPED_TRACE(std::string("tile ") + cuda::bf16TileName(tile) + ", layout " +
                   std::to_string(int(epilogue.layout)) + ", enabled " +
                   std::to_string(epilogue.enabled));
      int64_t width = outputWidth(epilogue, N);
      std::vector<float> want, got;
      ASSERT_NO_FATAL_FAILURE(runOnGpuAndCpu(tile, lhs, S, K, weights,
                                             weightsBF16, E, N, offsets, bias, epilogue, want,
                                             got));
      ASSERT_NO_FATAL_FAILURE(
          expectRowsThenUntouchedTail(want, got, valid, width, "tensor-core grouped matmul"));
    }
  }
}

void checkManyBlocks(int64_t K);

/// The 8-row tile over more than two waves of blocks (96 experts x 8 column
/// tiles: 768 blocks, a tail wave of 108 on 132 SMs), one or two rows per
/// expert, some idle: with K = 776 (12 stages and a partial one) the 4-stage
/// pipeline, as Qwen3's down at T = 16 runs it; with K = 1032 the 8-stage one.
/// (The 2-warp blocks, which Tok8 takes for 133-198 blocks, are tested above
/// as Tok8Warps2.)
TEST(CudaKernels, TensorCoreGroupedMatmulShortKManyBlocks) {
  for (int64_t K : {776, 1032}) {
    SCOPED_TRACE("K " + std::to_string(K));
    ASSERT_NO_FATAL_FAILURE(checkManyBlocks(K));
  }
}

void checkManyBlocks(int64_t K) {
  std::mt19937 rng(23);
  const int64_t E = 96, N = 1000;
  std::vector<int32_t> offsets(E);
  int32_t end = 0;
  for (int64_t e = 0; e < E; ++e)
    offsets[e] = end += static_cast<int32_t>(e % 3); // 0, 1, 2 rows in turn
  const int64_t valid = end, S = valid + 5;
  auto lhs = randomVector(S * K, rng), bias = randomVector(E * N, rng);
  auto weights = randomVector(E * N * K, rng, 0.2f);
  roundToBF16(lhs);
  std::vector<uint16_t> weightsBF16 = roundToBF16(weights);
  for (const cpu::Epilogue &epilogue : allEpilogues()) {
    SCOPED_TRACE("layout " + std::to_string(int(epilogue.layout)) + ", enabled " +
                 std::to_string(epilogue.enabled));
    std::vector<float> want, got;
    ASSERT_NO_FATAL_FAILURE(runOnGpuAndCpu(cuda::BF16Tile::Tok8, lhs, S, K, weights, weightsBF16, E,
                                           N, offsets, bias, epilogue, want, got));
    ASSERT_NO_FATAL_FAILURE(expectRowsThenUntouchedTail(want, got, valid, outputWidth(epilogue, N),
                                                        "8-row tiles, many blocks"));
  }
}

void checkPrefill(int64_t N);

/// Prefill shapes, where Auto takes the wgmma tiles (runtimes with CUTLASS):
/// experts of 0, 1, 129, 300 and 420 rows (partial and whole 128-row tiles),
/// K over several 64-deep stages, N over several 128-wide tiles, every
/// epilogue, and a NaN tail of sentinel rows that must stay unwritten. N = 392
/// takes the epilogue pass's 16-byte path, N = 396 (not a multiple of 8) its
/// one-column path.
TEST(CudaKernels, TensorCoreGroupedMatmulPrefill) {
  for (int64_t N : {392, 396}) {
    SCOPED_TRACE("N " + std::to_string(N));
    ASSERT_NO_FATAL_FAILURE(checkPrefill(N));
  }
}


void checkPrefill(int64_t N) {
  std::mt19937 rng(17);
  const int64_t E = 6, K = 520;
  const std::vector<int32_t> offsets = {0, 1, 130, 430, 430, 850};
  const int64_t valid = 850, S = valid + 9;
  // Biased: the 128x256 tiles (unbiased projections of these rows take the
  // 64x256 pingpong ones, which the loop below runs by name).
  ASSERT_EQ(cuda::chooseBF16Tile(valid, E, K, /*gated=*/false, /*biased=*/true),
            cuda::bf16TileAvailable(cuda::BF16Tile::Wgmma128x256) ? cuda::BF16Tile::Wgmma128x256
                                                                  : cuda::BF16Tile::Tok64);
  auto lhs = randomVector(S * K, rng), bias = randomVector(E * N, rng);
  auto weights = randomVector(E * N * K, rng, 0.2f);
  roundToBF16(lhs);
  std::vector<uint16_t> weightsBF16 = roundToBF16(weights);
  for (cuda::BF16Tile tile : {cuda::BF16Tile::Auto, cuda::BF16Tile::Wgmma,
                              cuda::BF16Tile::Wgmma128x256, cuda::BF16Tile::Wgmma128x256C21,
                              cuda::BF16Tile::Wgmma128x256C12, cuda::BF16Tile::Wgmma64x256})
    for (const cpu::Epilogue &epilogue : allEpilogues()) {
      if (!cuda::bf16TileAvailable(tile))
        continue;
      for (bool withBias : {false, true}) {
        SCOPED_TRACE(std::string("tile ") + cuda::bf16TileName(tile) + ", layout " +
                     std::to_string(int(epilogue.layout)) + ", enabled " +
                     std::to_string(epilogue.enabled) + ", bias " + std::to_string(withBias));
        int64_t width = outputWidth(epilogue, N);
        std::vector<float> want, got;
        ASSERT_NO_FATAL_FAILURE(runOnGpuAndCpu(tile, lhs, S, K, weights, weightsBF16, E, N, offsets,
                                               withBias ? bias : std::vector<float>{}, epilogue,
                                               want, got));
        ASSERT_NO_FATAL_FAILURE(
            expectRowsThenUntouchedTail(want, got, valid, width, "grouped matmul, prefill"));
      }
    }
}

/// bf16 rows in and/or bf16 results out (the activations between kernels under
/// --expert-weights=bf16) change nothing but the storage: for every tile and
/// epilogue, bf16 rows give the f32 rows' results bit for bit (every tile
/// rounds f32 rows to bf16 first), bf16 results are the f32 results rounded to
/// nearest even, and the sentinel tail stays unwritten (0xFFFF poison).
void checkBF16Activations(int64_t K, int64_t N, const std::vector<int32_t> &offsets, int64_t S,
                          cuda::BF16Tile tile) {
  std::mt19937 rng(23);
  const int64_t E = static_cast<int64_t>(offsets.size()), valid = offsets.back();
  auto lhs = randomVector(S * K, rng), bias = randomVector(E * N, rng);
  auto weights = randomVector(E * N * K, rng, 0.2f);
  std::vector<uint16_t> weightsBF16 = roundToBF16(weights);
  std::vector<uint16_t> lhsBF16(lhs.size());
  for (size_t i = 0; i < lhs.size(); ++i)
    lhsBF16[i] = toBF16(lhs[i]); // lhs itself stays f32: the kernels round it
  DeviceBuffer dLhs = upload(lhs), dLhsBF16 = upload(lhsBF16), dWeights = upload(weightsBF16),
               dOffsets = upload(offsets), dBias = upload(bias);
  for (const cpu::Epilogue &epilogue : allEpilogues())
    for (bool withBias : {true, false}) {
      SCOPED_TRACE(std::string("tile ") + cuda::bf16TileName(tile) + ", layout " +
                   std::to_string(int(epilogue.layout)) + ", enabled " +
                   std::to_string(epilogue.enabled) + ", bias " + std::to_string(withBias));
      int64_t width = outputWidth(epilogue, N);
      DeviceBuffer dRef = poisoned(S * width * 4), dFromBF16 = poisoned(S * width * 4),
                   dToBF16 = poisoned(S * width * 2), dBoth = poisoned(S * width * 2);
      auto run = [&](auto *in, auto *out) {
        return cuda::groupedMatmulBF16(
            in, S, K, dWeights.dataAs<uint16_t>(), E, N, dOffsets.dataAs<int32_t>(),
            withBias ? dBias.dataAs<float>() : nullptr, epilogue, out, nullptr, tile);
      };
      ASSERT_OK(run(dLhs.dataAs<float>(), dRef.dataAs<float>()));
      ASSERT_OK(run(dLhsBF16.dataAs<cuda::BF16>(), dFromBF16.dataAs<float>()));
      ASSERT_OK(run(dLhs.dataAs<float>(), dToBF16.dataAs<cuda::BF16>()));
      ASSERT_OK(run(dLhsBF16.dataAs<cuda::BF16>(), dBoth.dataAs<cuda::BF16>()));
      ASSERT_OK(cudaStatus(cudaDeviceSynchronize(), "sync", __FILE__, __LINE__));
      std::vector<float> ref = download<float>(dRef, S * width);
      std::vector<uint32_t> refBits(ref.size()),
          fromBits = download<uint32_t>(dFromBF16, S * width);
      std::memcpy(refBits.data(), ref.data(), ref.size() * 4);
      std::vector<uint16_t> toBits = download<uint16_t>(dToBF16, S * width),
                            bothBits = download<uint16_t>(dBoth, S * width);
      for (int64_t i = 0; i < valid * width; ++i) {
        ASSERT_FALSE(std::isnan(ref[i])) << "element " << i;
        ASSERT_EQ(fromBits[i], refBits[i]) << "bf16 rows in, element " << i;
        ASSERT_EQ(toBits[i], toBF16(ref[i])) << "bf16 results out, element " << i;
        ASSERT_EQ(bothBits[i], toBits[i]) << "bf16 in and out, element " << i;
      }
      for (int64_t i = valid * width; i < S * width; ++i) {
        ASSERT_EQ(toBits[i], 0xFFFF) << "sentinel element " << i << " written (bf16 out)";
        ASSERT_EQ(bothBits[i], 0xFFFF) << "sentinel element " << i << " written (bf16 in and out)";
      }
    }
}

TEST(CudaKernels, TensorCoreGroupedMatmulBF16Activations) {
  // Decode-like (idle experts, partial tiles) on every mma.sync tile, and a
  // prefill shape on the wgmma tiles.
  const std::vector<int32_t> decode = {0, 0, 3, 3, 73, 74, 74, 90, 107, 107, 108, 108};
  for (cuda::BF16Tile tile : {cuda::BF16Tile::Tok8, cuda::BF16Tile::Tok8Warps2,
                              cuda::BF16Tile::Tok16, cuda::BF16Tile::Tok32, cuda::BF16Tile::Tok64})
    ASSERT_NO_FATAL_FAILURE(checkBF16Activations(264, 200, decode, 113, tile));
  for (cuda::BF16Tile tile :
       {cuda::BF16Tile::Wgmma, cuda::BF16Tile::Wgmma128x256, cuda::BF16Tile::Wgmma128x256C21,
        cuda::BF16Tile::Wgmma128x256C12, cuda::BF16Tile::Wgmma64x256})
    if (cuda::bf16TileAvailable(tile)) {
      ASSERT_NO_FATAL_FAILURE(
          checkBF16Activations(520, 392, {0, 1, 130, 430, 430, 850}, 859, tile));
    }
}

/// interleaveGateUp reorders rows exactly: 16-byte, 4-byte and 6-byte rows
/// (its three copy widths), few and many experts.
TEST(CudaKernels, InterleaveGateUpReordersRows) {
  std::mt19937 rng(31);
  for (int64_t rowBytes : {48, 4, 6})
    for (int64_t E : {3, 2000}) {
      SCOPED_TRACE("row bytes " + std::to_string(rowBytes) + ", experts " + std::to_string(E));
      const int64_t N = 10, half = N / 2;
      std::vector<uint8_t> rows(static_cast<size_t>(E * N * rowBytes));
      for (uint8_t &b : rows)
        b = static_cast<uint8_t>(rng());
      DeviceBuffer d = upload(rows);
      ASSERT_OK(cuda::interleaveGateUp(d.data(), E, N, rowBytes, nullptr));
      ASSERT_OK(cudaStatus(cudaDeviceSynchronize(), "sync", __FILE__, __LINE__));
      std::vector<uint8_t> got = download<uint8_t>(d, rows.size());
      for (int64_t e = 0; e < E; ++e)
        for (int64_t r = 0; r < N; ++r) {
          int64_t from = e * N + (r % 2) * half + r / 2;
          ASSERT_EQ(0, std::memcmp(&got[(e * N + r) * rowBytes], &rows[from * rowBytes],
                                   static_cast<size_t>(rowBytes)))
              << "expert " << e << ", row " << r;
        }
    }
  EXPECT_FALSE(cuda::interleaveGateUp(nullptr, 1, 3, 4, nullptr));
}

/// A gate/up projection with concatenated halves gives the same results, bit
/// for bit, on its interleaved weights (and bias): every bf16 tile, f32 and bf16
/// results. On the 128x256 tiles the bf16 results come from the activation
/// inside CUTLASS's epilogue (GatedEpilogueCutlass.cuh) when N / 2 is a multiple
/// of 8, the f32 ones from the epilogue pass over the f32 product.
void checkInterleavedGateUp(int64_t N, const std::vector<int32_t> &offsets,
                            const std::vector<cuda::BF16Tile> &tiles);

const std::vector<cuda::BF16Tile> kEveryBF16Tile = {
    cuda::BF16Tile::Auto,         cuda::BF16Tile::Tok64,           cuda::BF16Tile::Wgmma,
    cuda::BF16Tile::Wgmma128x256, cuda::BF16Tile::Wgmma128x256C21, cuda::BF16Tile::Wgmma128x256C12,
    cuda::BF16Tile::Wgmma64x256};

TEST(CudaKernels, InterleavedGateUpMatchesConcatenated) {
  // N / 2 = 200: the fused epilogue's 16-byte chunks, a partial last tile of
  // 144 columns; 196: chunks that would straddle rows, so the f32 product and
  // the pass.
  for (int64_t N : {400, 392}) {
    SCOPED_TRACE("N " + std::to_string(N));
    ASSERT_NO_FATAL_FAILURE(checkInterleavedGateUp(N, {0, 1, 130, 430, 430, 850}, kEveryBF16Tile));
  }
}

/// Some 420 tiles of 128x256 (840 of 64x256), so each of the persistent
/// kernel's CTAs takes three or more, of different experts: the gated
/// epilogue's bias pipeline (two stages) wraps around, and a stage read for the
/// wrong tile would show; with pingpong tiles the two warp groups alternate.
TEST(CudaKernels, InterleavedGateUpMatchesConcatenatedOverManyTiles) {
  ASSERT_NO_FATAL_FAILURE(
      checkInterleavedGateUp(400, {9000, 9001, 20000, 20000, 26900},
                             {cuda::BF16Tile::Wgmma128x256, cuda::BF16Tile::Wgmma128x256C21,
                              cuda::BF16Tile::Wgmma64x256}));
}

void checkInterleavedGateUp(int64_t N, const std::vector<int32_t> &offsets,
                            const std::vector<cuda::BF16Tile> &tiles) {
  std::mt19937 rng(37);
  const int64_t E = static_cast<int64_t>(offsets.size()), K = 520, width = N / 2;
  const int64_t valid = offsets.back(), S = valid + 9;
  auto lhs = randomVector(S * K, rng), bias = randomVector(E * N, rng);
  auto weights = randomVector(E * N * K, rng, 0.2f);
  roundToBF16(lhs);
  std::vector<uint16_t> weightsBF16 = roundToBF16(weights);
  DeviceBuffer dLhs = upload(lhs), dOffsets = upload(offsets);
  DeviceBuffer dWeights = upload(weightsBF16), dBias = upload(bias);
  DeviceBuffer dWeightsI = upload(weightsBF16), dBiasI = upload(bias);
  ASSERT_OK(cuda::interleaveGateUp(dWeightsI.data(), E, N, K * 2, nullptr));
  ASSERT_OK(cuda::interleaveGateUp(dBiasI.data(), E, N, 4, nullptr));
  const cpu::Epilogue concatenated{true, cpu::ActivationKind::SiLU,
                                   cpu::GateUpLayout::Concatenated};
  cpu::Epilogue interleaved = concatenated;
  interleaved.layout = cpu::GateUpLayout::Interleaved;
  for (cuda::BF16Tile tile : tiles)
    for (bool withBias : {false, true}) {
      if (!cuda::bf16TileAvailable(tile))
        continue;
      SCOPED_TRACE(std::string("tile ") + cuda::bf16TileName(tile) + ", bias " +
                   std::to_string(withBias));
      DeviceBuffer want = poisoned(S * width * 4), got = poisoned(S * width * 4),
                   gotBF16 = poisoned(S * width * 2);
      ASSERT_OK(cuda::groupedMatmulBF16(dLhs.dataAs<float>(), S, K, dWeights.dataAs<uint16_t>(),
                                        E, N, dOffsets.dataAs<int32_t>(),
                                        withBias ? dBias.dataAs<float>() : nullptr, concatenated,
                                        want.dataAs<float>(), nullptr, tile));
      for (bool bf16Out : {false, true}) {
        const float *b = withBias ? dBiasI.dataAs<float>() : nullptr;
        const uint16_t *w = dWeightsI.dataAs<uint16_t>();
        const int32_t *o = dOffsets.dataAs<int32_t>();
        ASSERT_OK(bf16Out ? cuda::groupedMatmulBF16(dLhs.dataAs<float>(), S, K, w, E, N, o, b,
                                                    interleaved, gotBF16.dataAs<cuda::BF16>(),
                                                    nullptr, tile)
                          : cuda::groupedMatmulBF16(dLhs.dataAs<float>(), S, K, w, E, N, o, b,
                                                    interleaved, got.dataAs<float>(), nullptr,
                                                    tile));
      }
      ASSERT_OK(cudaStatus(cudaDeviceSynchronize(), "sync", __FILE__, __LINE__));
      std::vector<float> ref = download<float>(want, S * width);
      std::vector<uint32_t> refBits(ref.size()), bits = download<uint32_t>(got, S * width);
      std::memcpy(refBits.data(), ref.data(), ref.size() * 4);
      std::vector<uint16_t> bf16Bits = download<uint16_t>(gotBF16, S * width);
      for (int64_t i = 0; i < valid * width; ++i) {
        ASSERT_FALSE(std::isnan(ref[i])) << "element " << i;
        ASSERT_EQ(bits[i], refBits[i]) << "f32 results, element " << i;
        ASSERT_EQ(bf16Bits[i], toBF16(ref[i])) << "bf16 results, element " << i;
      }
      for (int64_t i = valid * width; i < S * width; ++i)
        ASSERT_EQ(bf16Bits[i], 0xFFFF) << "sentinel element " << i << " written";
    }
}

/// permute into bf16 rows: the f32 permute's rows rounded to nearest even,
/// the rows past the valid count unwritten; H = 1030 takes the element path.
TEST(CudaKernels, PermuteBF16IsTheRoundedF32Permute) {
  std::mt19937 rng(29);
  // 37 tokens: slot-major; 1501 tokens (4503 slots): token-major, through the
  // inverse permutation. Hidden 96: 16-byte accesses; 1030: element by element.
  for (int64_t T : {37, 1501})
    for (int64_t H : {96, 1030}) {
      SCOPED_TRACE("tokens " + std::to_string(T) + ", hidden " + std::to_string(H));
      const int64_t K = 3, S = T * K, valid = S - 5;
      auto x = randomVector(T * H, rng);
      std::vector<int32_t> perm(S);
      for (int64_t i = 0; i < S; ++i)
        perm[i] = static_cast<int32_t>((i * 7) % S);
      DeviceBuffer dX = upload(x), dPerm = upload(perm),
                   dValid = upload(std::vector<int32_t>{int32_t(valid)});
      DeviceBuffer dRows = poisoned(S * H * 4), dRowsBF16 = poisoned(S * H * 2);
      ASSERT_OK(cuda::permute(dX.dataAs<float>(), H, dPerm.dataAs<int32_t>(),
                              dValid.dataAs<int32_t>(), nullptr, S, K, dRows.dataAs<float>(),
                              nullptr));
      ASSERT_OK(cuda::permute(dX.dataAs<float>(), H, dPerm.dataAs<int32_t>(),
                              dValid.dataAs<int32_t>(), nullptr, S, K,
                              dRowsBF16.dataAs<cuda::BF16>(), nullptr));
      ASSERT_OK(cudaStatus(cudaDeviceSynchronize(), "sync", __FILE__, __LINE__));
      std::vector<float> rows = download<float>(dRows, S * H);
      std::vector<uint16_t> bits = download<uint16_t>(dRowsBF16, S * H);
      for (int64_t i = 0; i < valid * H; ++i) {
        ASSERT_EQ(rows[i], x[(perm[i / H] / K) * H + i % H]) << "f32 row element " << i;
        ASSERT_EQ(bits[i], toBF16(rows[i])) << "bf16 row element " << i;
      }
      for (int64_t i = valid * H; i < S * H; ++i) {
        ASSERT_EQ(bits[i], 0xFFFF) << "bf16 row element " << i << " past the valid count written";
        ASSERT_TRUE(std::isnan(rows[i]))
            << "f32 row element " << i << " past the valid count written";
      }
    }
}

/// combine over bf16 expert rows (--expert-outputs=bf16) reads each bf16 value
/// as the f32 it is exactly, so it gives bit for bit what combine gives over
/// those values held in f32, and both match a float64 sum of the rounded rows.
/// Sentinel slots (-1 in the inverse) read nothing; hidden 96 takes the
/// vector path (8-byte bf16 loads), 1030 the element path over three column
/// chunks; with and without a gated addend (the shared expert), through
/// combineRows and through combine (which inverts the permutation itself).
TEST(CudaKernels, CombineBF16RowsIsTheF32CombineOfTheRoundedRows) {
  std::mt19937 rng(31);
  // Top-3 and top-10 (combineKernel loads 8 slots' rows at a time: two batches,
  // the second partly used).
  for (auto [K, H] : {std::pair<int64_t, int64_t>{3, 96}, {3, 1030}, {10, 96}, {10, 1030}})
    for (bool withAddend : {false, true}) {
      SCOPED_TRACE("hidden " + std::to_string(H) + ", addend " + std::to_string(withAddend) +
                   ", top-" + std::to_string(K));
      const int64_t T = 45, S = T * K, valid = S - 7;
      auto rows = randomVector(S * H, rng), w = randomVector(T * K, rng);
      auto addend = randomVector(T * H, rng), gate = randomVector(T, rng);
      std::vector<uint16_t> bits = roundToBF16(rows); // rows now hold the bf16 values
      // Slots 0..S-1 land on rows by a permutation; the last 7 sort as sentinels.
      std::vector<int32_t> perm(S), rowOfSlot(S, -1);
      for (int64_t r = 0; r < S; ++r)
        perm[r] = static_cast<int32_t>((r * 11) % S);
      for (int64_t r = 0; r < valid; ++r)
        rowOfSlot[perm[r]] = static_cast<int32_t>(r);
      std::vector<double> want(T * H);
      for (int64_t t = 0; t < T; ++t)
        for (int64_t h = 0; h < H; ++h) {
          double sum = 0;
          for (int64_t k = 0; k < K; ++k)
            if (int32_t r = rowOfSlot[t * K + k]; r >= 0)
              sum += double(w[t * K + k]) * rows[r * H + h];
          if (withAddend)
            sum += addend[t * H + h] / (1.0 + std::exp(-double(gate[t])));
          want[t * H + h] = sum;
        }
      DeviceBuffer dRows = upload(rows), dBits = upload(bits), dW = upload(w),
                   dInverse = upload(rowOfSlot), dPerm = upload(perm),
                   dValid = upload(std::vector<int32_t>{int32_t(valid)}),
                   dAddend = upload(addend), dGate = upload(gate);
      DeviceBuffer dF32 = poisoned(T * H * 4), dBF16 = poisoned(T * H * 4),
                   dBF16Inverted = poisoned(T * H * 4), dScratch = poisoned(S * 4);
      const float *a = withAddend ? dAddend.dataAs<float>() : nullptr;
      const float *g = withAddend ? dGate.dataAs<float>() : nullptr;
      ASSERT_OK(cuda::combineRows(dRows.dataAs<float>(), dInverse.dataAs<int32_t>(), H,
                                  dW.dataAs<float>(), T, K, a, g, dF32.dataAs<float>(), nullptr));
      ASSERT_OK(cuda::combineRows(dBits.dataAs<cuda::BF16>(), dInverse.dataAs<int32_t>(), H,
                                  dW.dataAs<float>(), T, K, a, g, dBF16.dataAs<float>(), nullptr));
      ASSERT_OK(cuda::combine(dBits.dataAs<cuda::BF16>(), dPerm.dataAs<int32_t>(), S, H,
                              dW.dataAs<float>(), T, K, dValid.dataAs<int32_t>(), a, g,
                              dScratch.dataAs<int32_t>(), dBF16Inverted.dataAs<float>(), nullptr));
      ASSERT_OK(cudaStatus(cudaDeviceSynchronize(), "sync", __FILE__, __LINE__));
      std::vector<uint32_t> f32Bits = download<uint32_t>(dF32, T * H),
                            bf16Bits = download<uint32_t>(dBF16, T * H),
                            invertedBits = download<uint32_t>(dBF16Inverted, T * H);
      std::vector<float> got = download<float>(dBF16, T * H);
      for (int64_t i = 0; i < T * H; ++i) {
        ASSERT_EQ(bf16Bits[i], f32Bits[i]) << "element " << i;
        ASSERT_EQ(invertedBits[i], f32Bits[i]) << "element " << i << " (combine)";
        ASSERT_LE(std::abs(got[i] - want[i]), 1e-5 + 1e-5 * std::abs(want[i]))
            << "element " << i << " = " << got[i] << ", float64 " << want[i];
      }
    }
}

/// Decode shapes for the tensor-core kernel: 1-3 slots, spread and all in one
/// expert, with the tile the dispatcher picks.
TEST(CudaKernels, TensorCoreGroupedMatmulFewSlots) {
  std::mt19937 rng(13);
  const int64_t E = 4, K = 72, N = 24;
  const std::vector<std::pair<int64_t, std::vector<int32_t>>> cases = {
      {1, {0, 1, 1, 1}}, {2, {1, 1, 2, 2}}, {2, {0, 0, 2, 2}}, {3, {0, 0, 0, 3}}};
  for (const auto &[S, offsets] : cases) {
    auto lhs = randomVector(S * K, rng), bias = randomVector(E * N, rng);
    auto weights = randomVector(E * N * K, rng, 0.2f);
    roundToBF16(lhs);
    std::vector<uint16_t> weightsBF16 = roundToBF16(weights);
    cpu::Epilogue epilogue{true, cpu::ActivationKind::SiLU, cpu::GateUpLayout::Concatenated};
    std::vector<float> want, got;
    ASSERT_NO_FATAL_FAILURE(runOnGpuAndCpu(cuda::BF16Tile::Auto, lhs, S, K,
                                           weights, weightsBF16, E, N, offsets, bias, epilogue,
                                           want, got));
    expectNear(want, got, 1e-4, 1e-4, "tensor-core grouped matmul, few slots", S * (N / 2));
  }
}

/// Runs `chain` (which enqueues on the stream it is given) on a new
/// non-blocking stream known to DependentLaunch.cuh: launched eagerly, or
/// captured in a CUDA graph (programmatic edges) and replayed; then waits.
void runChain(bool captured, const std::function<Status(cudaStream_t)> &chain) {
  cudaStream_t stream;
  ASSERT_OK(cudaStatus(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream",
                       __FILE__, __LINE__));
  cuda::detail::noteStream(stream);
  if (captured)
    ASSERT_OK(cudaStatus(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed), "capture",
                         __FILE__, __LINE__));
  Status status = chain(stream);
  if (captured) {
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    cudaError_t ended = cudaStreamEndCapture(stream, &graph);
    if (ended != cudaSuccess)
      cudaGetLastError(); // not left for the next test's calls to find
    ASSERT_OK(status);
    ASSERT_OK(cudaStatus(ended, "capture", __FILE__, __LINE__));
    ASSERT_OK(cudaStatus(cudaGraphInstantiate(&exec, graph, 0), "graph", __FILE__, __LINE__));
    ASSERT_OK(cudaStatus(cudaGraphLaunch(exec, stream), "graph launch", __FILE__, __LINE__));
    ASSERT_OK(cudaStatus(cudaStreamSynchronize(stream), "sync", __FILE__, __LINE__));
    ASSERT_OK(cudaStatus(cudaGraphExecDestroy(exec), "graph", __FILE__, __LINE__));
    ASSERT_OK(cudaStatus(cudaGraphDestroy(graph), "graph", __FILE__, __LINE__));
  }
  ASSERT_OK(status);
  ASSERT_OK(cudaStatus(cudaStreamSynchronize(stream), "sync", __FILE__, __LINE__));
  ASSERT_OK(cudaStatus(cudaStreamDestroy(stream), "stream", __FILE__, __LINE__));
}

/// The first `valid` rows of `dY` ([*, H] f32), each element written (poison is NaN).
void downloadValidRows(const DeviceBuffer &dValid, const DeviceBuffer &dY, int64_t H,
                       std::vector<float> &rows) {
  int32_t valid = download<int32_t>(dValid, 1)[0];
  ASSERT_GT(valid, 0);
  rows = download<float>(dY, size_t(valid) * H);
  for (float v : rows)
    ASSERT_FALSE(std::isnan(v)) << "a valid row was not written";
}

void expectSameBits(const std::vector<float> (&results)[2]) {
  ASSERT_EQ(results[0].size(), results[1].size());
  for (size_t i = 0; i < results[0].size(); ++i)
    ASSERT_EQ(results[0][i], results[1][i]) << "down row element " << i;
}

/// The decode chain as an artifact runs it, captured in a CUDA graph on a
/// non-blocking stream: sort, bf16 permute, then both projections with settled
/// offsets (their first weights requested before the predecessor completes,
/// runPipelinePrefetched), against the same chain launched plainly, eagerly:
/// the same bits. T = 3 and 40 tokens of top-2 over 8 experts: the 8-row
/// tiles, K = 136 and 72 (partial K tiles; fewer K tiles than stages).
TEST(CudaKernels, SettledOffsetsChainMatchesPlainInAGraph) {
  std::mt19937 rng(41);
  const int64_t E = 8, H = 136, I = 72, K = 2;
  for (int64_t T : {3, 40}) {
    SCOPED_TRACE("tokens " + std::to_string(T));
    const int64_t S = T * K;
    auto x = randomVector(T * H, rng);
    auto gateUp = randomVector(E * 2 * I * H, rng, 0.2f), down = randomVector(E * H * I, rng, 0.2f);
    std::vector<uint16_t> gateUpBF16 = roundToBF16(gateUp), downBF16 = roundToBF16(down);
    std::vector<int32_t> ids(S);
    for (auto &id : ids)
      id = static_cast<int32_t>(rng() % (E + 1)); // E: a sentinel
    ids[0] = 0;
    DeviceBuffer dX = upload(x), dIds = upload(ids), dGateUp = upload(gateUpBF16),
                 dDown = upload(downBF16);
    size_t workspaceBytes = 0;
    ASSERT_OK(cuda::sortWorkspaceBytes(S, workspaceBytes));
    const cpu::Epilogue act{true, cpu::ActivationKind::SiLU, cpu::GateUpLayout::Concatenated};
    std::vector<float> results[2];
    for (int settled = 0; settled < 2; ++settled) {
      DeviceBuffer workspace = poisoned(workspaceBytes), dPerm = poisoned(S * 4),
                   dOffsets = poisoned(E * 4), dValid = poisoned(4), dInverse = poisoned(S * 4),
                   dRows = poisoned(S * H * 2), dH = poisoned(S * I * 2), dY = poisoned(S * H * 4);
      runChain(settled, [&](cudaStream_t stream) -> Status {
        Status status = cuda::sortByExpert(dIds.dataAs<int32_t>(), S, E, 0, dPerm.dataAs<int32_t>(),
                                           dOffsets.dataAs<int32_t>(), dValid.dataAs<int32_t>(),
                                           dInverse.dataAs<int32_t>(), workspace.data(),
                                           workspaceBytes, stream);
        if (status)
          status = cuda::permute(dX.dataAs<float>(), H, dPerm.dataAs<int32_t>(),
                                 dValid.dataAs<int32_t>(), dInverse.dataAs<int32_t>(), S, K,
                                 dRows.dataAs<cuda::BF16>(), stream);
        // (The tile overloads of Tuning.h, so lambdas rather than pointers.)
        auto matmul = [&](auto &&...args) {
          return settled ? cuda::groupedMatmulBF16SettledOffsets<cuda::BF16, cuda::BF16>(args...)
                         : cuda::groupedMatmulBF16<cuda::BF16, cuda::BF16>(args...);
        };
        auto matmulDown = [&](auto &&...args) {
          return settled ? cuda::groupedMatmulBF16SettledOffsets<cuda::BF16, float>(args...)
                         : cuda::groupedMatmulBF16<cuda::BF16, float>(args...);
        };
        if (status)
          status = matmul(dRows.dataAs<cuda::BF16>(), S, H, dGateUp.dataAs<uint16_t>(), E, 2 * I,
                          dOffsets.dataAs<int32_t>(), nullptr, act, dH.dataAs<cuda::BF16>(), stream,
                          cuda::BF16Tile::Auto);
        if (status)
          status = matmulDown(dH.dataAs<cuda::BF16>(), S, I, dDown.dataAs<uint16_t>(), E, H,
                              dOffsets.dataAs<int32_t>(), nullptr, cuda::Epilogue{},
                              dY.dataAs<float>(), stream, cuda::BF16Tile::Auto);
        return status;
      });
      ASSERT_NO_FATAL_FAILURE(downloadValidRows(dValid, dY, H, results[settled]));
    }
    ASSERT_NO_FATAL_FAILURE(expectSameBits(results));
  }
}

/// The FP8 decode chain as an artifact runs it, in a CUDA graph on a known
/// non-blocking stream: sort, permute-and-quantise, the gate/up matmul with its
/// result quantised, the down matmul, both with settled offsets (weights
/// requested before the wait), against the same chain launched plainly,
/// eagerly: the same bits. T = 3 and 7 of top-2 over 8 experts: the 8-row
/// mma.sync tiles (fewer than 16 slots); K = 256 and 128.
TEST(CudaKernels, FP8SettledOffsetsChainMatchesPlainInAGraph) {
  std::mt19937 rng(43);
  const int64_t E = 8, H = 256, I = 64, K = 2;
  for (int64_t T : {3, 7}) {
    SCOPED_TRACE("tokens " + std::to_string(T));
    const int64_t S = T * K;
    auto x = randomVector(T * H, rng);
    std::vector<uint8_t> gateUp = randomE4M3(E * 2 * I * H, rng), down = randomE4M3(E * H * I, rng);
    std::vector<float> gateUpScales =
        randomBlockScales(E * ((2 * I + 127) / 128) * ((H + 127) / 128), rng);
    std::vector<float> downScales =
        randomBlockScales(E * ((H + 127) / 128) * ((I + 127) / 128), rng);
    std::vector<int32_t> ids(S);
    for (auto &id : ids)
      id = static_cast<int32_t>(rng() % (E + 1)); // E: a sentinel
    ids[0] = 0;
    DeviceBuffer dX = upload(x), dIds = upload(ids), dGateUp = upload(gateUp), dDown = upload(down),
                 dGateUpScales = upload(gateUpScales), dDownScales = upload(downScales);
    size_t workspaceBytes = 0;
    ASSERT_OK(cuda::sortWorkspaceBytes(S, workspaceBytes));
    const cpu::Epilogue act{true, cpu::ActivationKind::SiLU, cpu::GateUpLayout::Concatenated};
    std::vector<float> results[2];
    for (int settled = 0; settled < 2; ++settled) {
      DeviceBuffer workspace = poisoned(workspaceBytes), dPerm = poisoned(S * 4),
                   dOffsets = poisoned(E * 4), dValid = poisoned(4), dInverse = poisoned(S * 4),
                   dRows = poisoned(S * H), dRowScales = poisoned(S * ((H + 127) / 128) * 4),
                   dH = poisoned(S * I), dHScales = poisoned(S * ((I + 127) / 128) * 4),
                   dY = poisoned(S * H * 4), dPlanned = poisoned(S * I * 4);
      // The settled chain also takes the gate/up's f32 result from planned
      // scratch (no allocation in the graph), the plain one from the pool.
      runChain(settled, [&](cudaStream_t stream) -> Status {
        Status status = cuda::sortByExpert(dIds.dataAs<int32_t>(), S, E, 0, dPerm.dataAs<int32_t>(),
                                           dOffsets.dataAs<int32_t>(), dValid.dataAs<int32_t>(),
                                           dInverse.dataAs<int32_t>(), workspace.data(),
                                           workspaceBytes, stream);
        if (status)
          status = cuda::permuteQuantizeE4M3(dX.dataAs<float>(), H, dPerm.dataAs<int32_t>(),
                                             dValid.dataAs<int32_t>(), dInverse.dataAs<int32_t>(),
                                             S, K, dRows.dataAs<uint8_t>(),
                                             dRowScales.dataAs<float>(), stream);
        if (status)
          status = cuda::groupedMatmulFP8Quantized(
              {dRows.dataAs<uint8_t>(), S, dRowScales.dataAs<float>(), H,
               dGateUp.dataAs<uint8_t>(), dGateUpScales.dataAs<float>(), E, 2 * I,
               dOffsets.dataAs<int32_t>(), nullptr, act},
              dH.dataAs<uint8_t>(), dHScales.dataAs<float>(),
              settled ? dPlanned.dataAs<float>() : nullptr, settled ? S * I : 0, stream,
              cuda::FP8Tile::Auto, settled);
        if (status)
          status = cuda::groupedMatmulFP8({dH.dataAs<uint8_t>(), S, dHScales.dataAs<float>(), I,
                                           dDown.dataAs<uint8_t>(), dDownScales.dataAs<float>(), E,
                                           H, dOffsets.dataAs<int32_t>(), nullptr, cuda::Epilogue{}},
                                          dY.dataAs<float>(), stream, cuda::FP8Tile::Auto, settled);
        return status;
      });
      ASSERT_NO_FATAL_FAILURE(downloadValidRows(dValid, dY, H, results[settled]));
    }
    ASSERT_NO_FATAL_FAILURE(expectSameBits(results));
  }
}

/// Bad calls are refused with a message, before any launch.
TEST(CudaKernels, TensorCoreGroupedMatmulRefusesBadShapes) {
  DeviceBuffer rows = poisoned(4096), weights = poisoned(4096), offsets = poisoned(64),
               out = poisoned(4096);
  cpu::Epilogue gated{true, cpu::ActivationKind::SiLU, cpu::GateUpLayout::Concatenated};
  Status notMultipleOf8 = cuda::groupedMatmulBF16(
      rows.dataAs<float>(), 2, 12, weights.dataAs<uint16_t>(), 2, 8, offsets.dataAs<int32_t>(),
      nullptr, {}, out.dataAs<float>(), nullptr);
  ASSERT_FALSE(notMultipleOf8.isOk());
  EXPECT_NE(notMultipleOf8.message().find("K = 12"), std::string::npos) << notMultipleOf8.message();
  Status oddGated = cuda::groupedMatmulBF16(rows.dataAs<float>(), 2, 16, weights.dataAs<uint16_t>(),
                                            2, 7, offsets.dataAs<int32_t>(), nullptr, gated,
                                            out.dataAs<float>(), nullptr);
  ASSERT_FALSE(oddGated.isOk());
  EXPECT_NE(oddGated.message().find("odd"), std::string::npos) << oddGated.message();
  Status misaligned = cuda::groupedMatmulBF16(
      rows.dataAs<float>() + 1, 2, 16, weights.dataAs<uint16_t>(), 2, 8,
      offsets.dataAs<int32_t>(), nullptr, {}, out.dataAs<float>(), nullptr);
  ASSERT_FALSE(misaligned.isOk());
  EXPECT_NE(misaligned.message().find("aligned"), std::string::npos) << misaligned.message();
}

void checkLinear(int64_t M, int64_t K, int64_t N, bool gated = true);

/// moe.linear on the device, f32 (the router) and bf16 weights (shared experts),
/// against the CPU for every epilogue: rows not a multiple of the 16-row block,
/// K not a multiple of the staged chunk, gated and not, with a bias; and 300
/// rows, where the f32 kernel tiles on the tensor cores in 3xTF32 (rows,
/// columns and K not multiples of its 128 x 128 x 8 tiles), once with K = 1104,
/// which it splits over blocks.
TEST(CudaKernels, LinearMatchesCpu) {
  // {rows, K, N}: up to 4 rows, K % 4 == 0 and ungated: one pass (Mixtral's
  // router at T = 1, 8 columns; Qwen3's at T = 3; K = 300 over 7 columns: a
  // partly used last block, parts of unequal length); few rows otherwise (warp
  // per column; K split over blocks from 1104 on, a last split shorter than the
  // others; K = 297 with one row: not a multiple of 4),
  // 64+ rows (tiled, split K; 100: one partial row tile; K = 297: the tiles'
  // element loads, f32 only),
  // 1024+ rows and at most 16 columns, ungated (Mixtral's router: a warp per four
  // rows, or two of 16 columns; 4097 and 4101: a last block partly used; 8 and
  // 12 columns: the 8-column kernel full, the 16-column one partly used;
  // K = 1000: a last 512-deep staged chunk and its last 128-column slice partly
  // inside K; K = 297: the warp-per-column kernel;
  // 301 rows, K = 4096: the warp-per-column kernel below 1024 rows; 1024 and
  // 1500 rows: the skinny kernel from its threshold).
  for (auto [rows, depth, n] : {std::tuple<int64_t, int64_t, int64_t>{37, 296, 140},
                                {5, 1104, 140},
                                {1, 4096, 8},
                                {3, 2048, 128},
                                {4, 300, 7},
                                {1, 297, 140},
                                {100, 296, 140},
                                {300, 296, 140},
                                {300, 1104, 140},
                                {300, 297, 140},
                                {300, 1104, 8},
                                {301, 4096, 16},
                                {1024, 4096, 8},
                                {1500, 1000, 16},
                                {4097, 1024, 16},
                                {4097, 1024, 8},
                                {4097, 1024, 12},
                                {4097, 1000, 8},
                                {4101, 1000, 16},
                                {4097, 297, 8}})
    ASSERT_NO_FATAL_FAILURE(checkLinear(rows, depth, n));
  // 1024+ rows, 64+ columns: CUTLASS's 3xTF32 GEMM where the runtime has it
  // (no activation: the bias through a zero-stride source; 1100: a partial row
  // tile; K = 1104 and 140 columns: 4 K splits, a partial column tile), the
  // tiled kernel with an activation. Ungated: at 2048 rows of K = 2048 one
  // gated output near a zero gate was off by 2.24e-4 against 2.22e-4 in
  // linearBF16, the conditioning the DeepSeek-V3 case below explains.
  for (auto [rows, depth, n] :
       {std::tuple<int64_t, int64_t, int64_t>{1100, 1104, 140}, {2048, 2048, 128}})
    ASSERT_NO_FATAL_FAILURE(checkLinear(rows, depth, n, /*gated=*/false));
  // DeepSeek-V3's router at T = 16 (K split over blocks), ungated only: at
  // K = 7168 the gate and up sums reach ~40, and a gated output near a zero
  // gate multiplies the two sides' f32 summation-order difference in the gate
  // by the up value (1.4e-3 against a tolerance of 7e-4 for linearBF16 on the
  // H200), a conditioning no fixed tolerance follows.
  ASSERT_NO_FATAL_FAILURE(checkLinear(16, 7168, 256, /*gated=*/false));
}

/// The f32 router is as accurate as f32 at the routers' shapes: every 61st
/// row's logits within 4e-6 of the largest against float64 (the statistical
/// error of a K-deep f32 dot product, sqrt(K) * 2^-24, is ~5e-6 at K = 7168).
/// The tiled kernel's 3584-deep splits at DeepSeek-V3's 8192 rows were off by
/// 2.7e-5 (the tensor cores' truncated adds into a running sum, LinearCutlass.cu).
TEST(CudaKernels, LinearIsAsAccurateAsF32) {
  for (auto [rows, depth, n] : {std::tuple<int64_t, int64_t, int64_t>{8192, 7168, 256},
                                {1024, 7168, 256},
                                {2048, 2048, 128},
                                {4096, 2880, 128},
                                {1000, 7168, 256},
                                {4096, 7168, 252}}) {
    SCOPED_TRACE("rows " + std::to_string(rows) + ", K " + std::to_string(depth) + ", N " +
                 std::to_string(n));
    std::mt19937 rng(23);
    // Activations of unit scale, router weights of 0.02: logits of a few units.
    auto x = randomVector(rows * depth, rng), w = randomVector(n * depth, rng, 0.02f);
    auto bias = randomVector(n, rng, 0.1f);
    DeviceBuffer dX = upload(x), dW = upload(w), dBias = upload(bias);
    DeviceBuffer dY = poisoned(rows * n * 4);
    ASSERT_OK(cuda::linear(dX.dataAs<float>(), rows, depth, dW.dataAs<float>(), n,
                           dBias.dataAs<float>(), cpu::Epilogue{}, dY.dataAs<float>(), nullptr));
    ASSERT_OK(cudaStatus(cudaDeviceSynchronize(), "sync", __FILE__, __LINE__));
    std::vector<float> got = download<float>(dY, rows * n);
    double worst = 0, largest = 0;
    int64_t worstRow = -1;
    for (int64_t r = 0; r < rows; r += 61)
      for (int64_t j = 0; j < n; ++j) {
        double exact = bias[j];
        for (int64_t c = 0; c < depth; ++c)
          exact += double(x[r * depth + c]) * double(w[j * depth + c]);
        largest = std::max(largest, std::fabs(exact));
        ASSERT_TRUE(std::isfinite(got[r * n + j])) << "row " << r << ", column " << j;
        if (double d = std::fabs(got[r * n + j] - exact); d > worst) {
          worst = d;
          worstRow = r;
        }
      }
    EXPECT_LE(worst, 4e-6 * largest)
        << "worst at row " << worstRow << "; largest logit " << largest;
  }
}

void checkLinear(int64_t M, int64_t K, int64_t N, bool gated) {
  SCOPED_TRACE("rows " + std::to_string(M) + ", K " + std::to_string(K) + ", N " +
               std::to_string(N));
  std::mt19937 rng(17);
  // Full f32 rows for the f32 kernel (its 3xTF32 tiles split both operands);
  // the bf16 kernel multiplies bf16 rows: it gets exactly those, on both sides.
  auto x = randomVector(M * K, rng), w = randomVector(N * K, rng, 0.2f), bias = randomVector(N, rng);
  std::vector<float> xBF16 = x;
  roundToBF16(xBF16);
  std::vector<uint16_t> wBF16 = roundToBF16(w);
  cpu::ThreadPool pool(2);
  DeviceBuffer dX = upload(x), dXBF16 = upload(xBF16), dW = upload(w), dWBF16 = upload(wBF16),
               dBias = upload(bias);
  for (const cpu::Epilogue &epilogue : allEpilogues()) {
    SCOPED_TRACE("layout " + std::to_string(int(epilogue.layout)) + ", enabled " +
                 std::to_string(epilogue.enabled));
    if (!gated && epilogue.enabled && epilogue.layout != cpu::GateUpLayout::None)
      continue;
    if (epilogue.layout != cpu::GateUpLayout::None && epilogue.enabled && N % 2 != 0) {
      // A gated N is even; an odd one is an error naming the call.
      DeviceBuffer dY = poisoned(M * N * 4);
      Status odd = cuda::linear(dX.dataAs<float>(), M, K, dW.dataAs<float>(), N,
                                dBias.dataAs<float>(), epilogue, dY.dataAs<float>(), nullptr);
      EXPECT_NE(odd.message().find("linear: gated N = " + std::to_string(N) + " is odd"),
                std::string::npos)
          << odd.message();
      continue;
    }
    int64_t width = outputWidth(epilogue, N);
    for (bool bf16 : {false, true}) {
      if (bf16 && K % 8 != 0)
        continue; // the bf16 kernel loads 8 weights at a time
      std::vector<float> want(M * width);
      cpu::linear(pool, (bf16 ? xBF16 : x).data(), M, K, w.data(), N, bias.data(), epilogue,
                  want.data());
      DeviceBuffer dY = poisoned(M * width * 4);
      if (bf16)
        ASSERT_OK(cuda::linearBF16(dXBF16.dataAs<float>(), M, K, dWBF16.dataAs<uint16_t>(), N,
                                   dBias.dataAs<float>(), epilogue, dY.dataAs<float>(), nullptr));
      else
        ASSERT_OK(cuda::linear(dX.dataAs<float>(), M, K, dW.dataAs<float>(), N,
                               dBias.dataAs<float>(), epilogue, dY.dataAs<float>(), nullptr));
      ASSERT_OK(cudaStatus(cudaDeviceSynchronize(), "sync", __FILE__, __LINE__));
      // Both sides sum K f32 products in different orders, so their rounding
      // differences grow with K (3.0e-4 for linearBF16 at K = 4096, gated).
      double tolerance = 1e-4 * std::max(1.0, double(K) / 1024);
      expectNear(want, download<float>(dY, M * width), tolerance, tolerance,
                 bf16 ? "linearBF16" : "linear");
    }
  }
}

/// After a device quantisation into poisoned buffers: the first `valid` rows'
/// codes and scales equal the CPU's bit for bit; the rest were not written.
void expectSameCodes(const std::vector<uint8_t> &want, const std::vector<float> &wantScales,
                     const DeviceBuffer &dQ, const DeviceBuffer &dScales, int64_t valid,
                     int64_t slots, int64_t k) {
  int64_t groups = (k + 127) / 128;
  ASSERT_OK(cudaStatus(cudaDeviceSynchronize(), "sync", __FILE__, __LINE__));
  std::vector<uint8_t> got = download<uint8_t>(dQ, slots * k);
  std::vector<float> gotScales = download<float>(dScales, slots * groups);
  for (int64_t i = 0; i < valid * k; ++i)
    ASSERT_EQ(got[i], want[i]) << "code " << i;
  for (int64_t i = 0; i < valid * groups; ++i)
    ASSERT_TRUE(gotScales[i] == wantScales[i] ||
                (std::isnan(gotScales[i]) && std::isnan(wantScales[i])))
        << "scale " << i << ": " << gotScales[i] << ", the CPU's " << wantScales[i];
  for (int64_t i = valid * k; i < slots * k; ++i)
    ASSERT_EQ(got[i], 0xFF) << "row " << i / k << " (past the valid count) written";
  for (int64_t i = valid * groups; i < slots * groups; ++i)
    ASSERT_TRUE(std::isnan(gotScales[i]))
        << "scale of row " << i / groups << " (past the valid count) written";
}

void checkQuantize(int64_t k);

/// quantizeE4M3 on the device: bit for bit the CPU's codes and scales, rows at
/// or past the device's valid count left as they were (poisoned).
TEST(CudaKernels, QuantizeE4M3MatchesCpuExactly) {
  // K = 300: 16-byte loads (K % 4 == 0) and a partial last group; 301: the
  // element-wise path.
  for (int64_t k : {300, 301}) {
    SCOPED_TRACE("K " + std::to_string(k));
    ASSERT_NO_FATAL_FAILURE(checkQuantize(k));
  }
}

void expectQuantizeMatchesCpu(const std::vector<float> &x, int64_t slots, int64_t valid,
                              int64_t k);

/// Values whose quotients by their group's scale sit on e4m3 midpoints or a
/// few f32 ulps beside them (every midpoint below 448, both signs): where an
/// encoding that rounds the quotient twice without rounding to odd first would
/// disagree with the CPU's single rounding. (Two f32 encodings, one from
/// __fdiv_rz and one from the reciprocal, were also run against it: both exact, and
/// neither made the FP8 gate/up pass faster.)
TEST(CudaKernels, QuantizeE4M3NearMidpointsMatchesCpuExactly) {
  std::vector<float> midpoints; // halfway between adjacent positive e4m3 values
  for (int code = 0; code < 0x7E; ++code) {
    auto value = [](int c) {
      int exponent = c >> 3, mantissa = c & 7;
      return exponent == 0 ? std::ldexp(mantissa / 8.0, -6)
                           : std::ldexp(1.0 + mantissa / 8.0, exponent - 7);
    };
    midpoints.push_back(static_cast<float>((value(code) + value(code + 1)) / 2));
  }
  std::mt19937 rng(23);
  const int64_t k = 256, rows = 16, groups = 2;
  std::vector<float> x(rows * k);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t g = 0; g < groups; ++g) {
      // The group's scale: amax / 448 with amax its first element.
      float amax = 448.0f * (0.3f + 0.05f * float(r * groups + g));
      float scale = static_cast<float>(std::max(double(amax) / 448.0, 1e-12));
      float *group = x.data() + r * k + g * 128;
      group[0] = amax;
      for (int i = 1; i < 128; ++i) {
        float m = midpoints[(r * 131 + g * 17 + i) % midpoints.size()];
        float v = m * scale;
        for (int nudge = int(rng() % 5) - 2; nudge != 0; nudge += nudge > 0 ? -1 : 1)
          v = std::nextafter(v, nudge > 0 ? INFINITY : 0.0f);
        group[i] = rng() % 2 ? -v : v;
      }
    }
  ASSERT_NO_FATAL_FAILURE(expectQuantizeMatchesCpu(x, rows, rows, k));
}

void checkQuantize(int64_t k) {
  std::mt19937 rng(19);
  const int64_t slots = 11, valid = 8;
  auto x = randomVector(slots * k, rng, 5.0f);
  std::fill(x.begin() + (3 * k + 128), x.begin() + (3 * k + 256), 0.0f); // an all-zero group
  // A group with a NaN (a NaN scale, and NaN quotients everywhere), one with an
  // infinity (an infinite scale: zero codes, and inf / inf a NaN one), one with
  // a negative infinity, and a negative zero.
  x[5 * k + 7] = NAN;
  x[6 * k + 130] = INFINITY;
  x[7 * k + 3] = -INFINITY;
  x[4 * k + 9] = -0.0f;
  ASSERT_NO_FATAL_FAILURE(expectQuantizeMatchesCpu(x, slots, valid, k));
}

/// cuda::quantizeE4M3 of x's first `valid` of `slots` rows into poisoned
/// buffers: the CPU's codes and scales, bit for bit, and nothing past them.
void expectQuantizeMatchesCpu(const std::vector<float> &x, int64_t slots, int64_t valid,
                              int64_t k) {
  const int64_t groups = (k + 127) / 128;
  std::vector<uint8_t> want(slots * k);
  std::vector<float> wantScales(slots * groups);
  cpu::ThreadPool pool(2);
  cpu::quantizeE4M3(pool, x.data(), valid, k, want.data(), wantScales.data());
  DeviceBuffer dX = upload(x), dValid = upload(std::vector<int32_t>{int32_t(valid)});
  DeviceBuffer dQ = poisoned(slots * k), dScales = poisoned(slots * groups * 4);
  ASSERT_OK(cuda::quantizeE4M3(dX.dataAs<float>(), slots, k, dValid.dataAs<int32_t>(),
                               dQ.dataAs<uint8_t>(), dScales.dataAs<float>(), nullptr));
  ASSERT_NO_FATAL_FAILURE(expectSameCodes(want, wantScales, dQ, dScales, valid, slots, k));
}

void checkPermuteQuantize(const std::vector<float> &hidden, int64_t T, int64_t topK, int64_t H,
                          const std::vector<int32_t> &permutation, int32_t numValid);

/// moe.permute fused into moe.quantize: the codes and scales of the permuted
/// rows, bit for bit the CPU's permute followed by its quantisation; the
/// sentinel tail (rows at or past num_valid) left as it was.
TEST(CudaKernels, PermuteQuantizeE4M3MatchesCpuExactly) {
  std::mt19937 rng(29);
  const int64_t T = 5, topK = 2;
  const std::vector<int32_t> permutation = {3, 0, 9, 4, 7, 1, 6, 2, 5, 8};
  const int32_t numValid = 7;
  for (int64_t H : {200, 201}) { // 16-byte loads; element by element
    SCOPED_TRACE("H " + std::to_string(H));
    auto hidden = randomVector(T * H, rng, 3.0f);
    ASSERT_NO_FATAL_FAILURE(checkPermuteQuantize(hidden, T, topK, H, permutation, numValid));
  }
}

/// The token-major path (from 4096 slots): 1501 tokens x 3, a permutation that
/// scatters each token's slots, the last 5 slots sentinels; K = 200 and 201 (a
/// partial 128-column group).
TEST(CudaKernels, PermuteQuantizeE4M3ByTokenMatchesCpuExactly) {
  std::mt19937 rng(31);
  const int64_t T = 1501, topK = 3, slots = T * topK;
  std::vector<int32_t> permutation(slots);
  for (int64_t i = 0; i < slots; ++i)
    permutation[i] = static_cast<int32_t>((i * 7) % slots);
  for (int64_t H : {200, 201}) { // 16-byte loads; element by element
    SCOPED_TRACE("H " + std::to_string(H));
    auto hidden = randomVector(T * H, rng, 3.0f);
    ASSERT_NO_FATAL_FAILURE(
        checkPermuteQuantize(hidden, T, topK, H, permutation, static_cast<int32_t>(slots - 5)));
  }
}

void checkPermuteQuantize(const std::vector<float> &hidden, int64_t T, int64_t topK, int64_t H,
                          const std::vector<int32_t> &permutation, int32_t numValid) {
  const int64_t slots = T * topK, groups = (H + 127) / 128;
  cpu::ThreadPool pool(2);
  std::vector<float> rows(slots * H);
  cpu::permute(pool, hidden.data(), H, permutation.data(), numValid, topK, rows.data());
  std::vector<uint8_t> want(slots * H);
  std::vector<float> wantScales(slots * groups);
  cpu::quantizeE4M3(pool, rows.data(), numValid, H, want.data(), wantScales.data());
  DeviceBuffer dHidden = upload(hidden), dPerm = upload(permutation),
               dValid = upload(std::vector<int32_t>{numValid});
  // Without the inverse (inverted here where token-major), and with it.
  std::vector<int32_t> inverse(slots, -1);
  for (int32_t r = 0; r < numValid; ++r)
    inverse[permutation[r]] = r;
  DeviceBuffer dInverse = upload(inverse);
  for (const int32_t *rowOfSlot : {static_cast<const int32_t *>(nullptr),
                                   static_cast<const int32_t *>(dInverse.dataAs<int32_t>())}) {
    SCOPED_TRACE(rowOfSlot ? "the sort's inverse" : "no inverse");
    DeviceBuffer dQ = poisoned(slots * H), dScales = poisoned(slots * groups * 4);
    ASSERT_OK(cuda::permuteQuantizeE4M3(dHidden.dataAs<float>(), H, dPerm.dataAs<int32_t>(),
                                        dValid.dataAs<int32_t>(), rowOfSlot, slots, topK,
                                        dQ.dataAs<uint8_t>(), dScales.dataAs<float>(), nullptr));
    ASSERT_NO_FATAL_FAILURE(expectSameCodes(want, wantScales, dQ, dScales, numValid, slots, H));
  }
}

/// Whether `tile` runs a CUTLASS QGMMA kernel: the wgmma tiles, and Auto where
/// chooseFP8Tile takes them.
bool runsOnQgmma(cuda::FP8Tile tile, int64_t slots, int64_t experts, int64_t k, int64_t n) {
  return cuda::isWgmmaTile(tile) ||
         (tile == cuda::FP8Tile::Auto &&
          cuda::isWgmmaTile(cuda::chooseFP8Tile(slots, experts, k, n, /*offsets=*/true)));
}


/// The output's root mean square over its first `count` elements.
double rootMeanSquare(const std::vector<float> &values, size_t count) {
  double sumSquares = 0;
  for (size_t i = 0; i < count; ++i)
    sumSquares += double(values[i]) * values[i];
  return std::sqrt(sumSquares / std::max<size_t>(count, 1));
}

/// The other forms of `got`, groupedMatmulFP8's f32 result on `tile` with
/// FP8Epilogue::Fused (the default): with FP8Epilogue::Pass (an f32 product
/// and the epilogue pass on QGMMA) the same bits, and in bf16, by either
/// finish, those values rounded to nearest even (CUTLASS's bf16 epilogues,
/// the gated one among them, the pass, and the mma.sync and decode tiles'
/// stores all round the same f32 values); sentinel rows untouched in both.
void expectFP8ResultForms(const cuda::FP8MatmulOperands &operands, cuda::FP8Tile tile,
                          bool qgmma, const std::vector<float> &got, int64_t valid,
                          int64_t width) {
  const int64_t S = operands.slots;
  std::vector<uint16_t> want(S * width, 0xFFFF);
  for (int64_t i = 0; i < valid * width; ++i)
    want[i] = toBF16(got[i]);
  for (cuda::FP8Epilogue finish : {cuda::FP8Epilogue::Fused, cuda::FP8Epilogue::Pass}) {
    if (!qgmma && finish == cuda::FP8Epilogue::Pass)
      continue; // only QGMMA has two finishes
    SCOPED_TRACE(finish == cuda::FP8Epilogue::Fused ? "fused epilogue" : "epilogue pass");
    if (finish == cuda::FP8Epilogue::Pass) {
      DeviceBuffer dOut = poisoned(S * width * 4);
      ASSERT_OK(cuda::groupedMatmulFP8(operands, dOut.dataAs<float>(), nullptr, tile, false,
                                       finish));
      ASSERT_OK(cudaStatus(cudaDeviceSynchronize(), "sync", __FILE__, __LINE__));
      std::vector<uint32_t> passBits = download<uint32_t>(dOut, S * width);
      for (int64_t i = 0; i < S * width; ++i) {
        uint32_t fusedBits;
        std::memcpy(&fusedBits, &got[i], 4);
        ASSERT_EQ(passBits[i], fusedBits) << "f32 element " << i;
      }
    }
    DeviceBuffer dBF16 = poisoned(S * width * 2);
    ASSERT_OK(cuda::groupedMatmulFP8(operands, dBF16.dataAs<cuda::BF16>(), nullptr, tile, false,
                                     finish));
    ASSERT_OK(cudaStatus(cudaDeviceSynchronize(), "sync", __FILE__, __LINE__));
    std::vector<uint16_t> bits = download<uint16_t>(dBF16, S * width);
    for (int64_t i = 0; i < S * width; ++i)
      ASSERT_EQ(bits[i], want[i]) << "bf16 element " << i << " (row " << i / width << ")";
  }
}

/// The generated code's entries with bf16 results (groupedMatmulFP8 and its
/// SettledOffsets variant, BF16 *out: --expert-outputs=bf16 under --fp8)
/// give `got`, Auto's f32 result, rounded to nearest even, and leave the
/// sentinel tail alone.
void expectBF16Entries(const cuda::FP8MatmulOperands &o, const std::vector<float> &got,
                       int64_t valid, int64_t width) {
  const int64_t S = o.slots;
  for (bool settled : {false, true}) {
    SCOPED_TRACE(settled ? "groupedMatmulFP8SettledOffsets, bf16 results"
                         : "groupedMatmulFP8, bf16 results");
    DeviceBuffer dOut = poisoned(S * width * 2);
    auto *out = dOut.dataAs<cuda::BF16>();
    if (settled)
      ASSERT_OK(cuda::groupedMatmulFP8SettledOffsets(o.lhs, S, o.lhsScales, o.k, o.weights,
                                                     o.weightScales, o.experts, o.n, o.offsets,
                                                     o.bias, o.epilogue, out, nullptr));
    else
      ASSERT_OK(cuda::groupedMatmulFP8(o.lhs, S, o.lhsScales, o.k, o.weights, o.weightScales,
                                       o.experts, o.n, o.offsets, o.bias, o.epilogue, out,
                                       nullptr));
    ASSERT_OK(cudaStatus(cudaDeviceSynchronize(), "sync", __FILE__, __LINE__));
    std::vector<uint16_t> bits = download<uint16_t>(dOut, S * width);
    for (int64_t i = 0; i < S * width; ++i)
      ASSERT_EQ(bits[i], i < valid * width ? toBF16(got[i]) : uint16_t(0xFFFF))
          << "bf16 element " << i << " (row " << i / width << ")";
  }
}

/// How checkFP8 draws its operands.
enum class FP8Operands {
  /// Activations quantised from random floats, weights random e4m3 codes with
  /// random scales: every mantissa bit in play.
  Random,
  /// Codes of +-1 and +-2 and power-of-two scales: every 128-deep block sum is
  /// an integer below 2^10, which any accumulator holds exactly, so even QGMMA
  /// must match the float64 reference to rounding. What checks QGMMA's
  /// pointers, scale layouts and K and N tails at the tight bound.
  ExactSums,
};

/// The FP8 grouped matmul against cpu::groupedMatmulFP8 on the same codes and
/// scales, for each K, epilogue (with the bias, and on QGMMA without) and tile, into
/// NaN-poisoned output whose sentinel tail must stay unwritten, and in its
/// other forms (expectFP8ResultForms). The wgmma tiles need K % 16 == 0.
/// !deviceOffsets: one expert whose rows are all S (moe.linear), no offsets
/// passed to the device (the CPU's are {S}).
///
/// With Random operands, QGMMA (CUTLASS's kernel) is allowed 2^-4 of the
/// output's RMS: Hopper's FP8 tensor cores add e4m3 products with about 14
/// significant bits, truncating (DeepSeek-V3 report, section 3.3.2), so their
/// error grows with the 128-deep block sums, not with the element, and the
/// gated epilogues multiply it; the H200 measured up to 2^-8.5 of the RMS
/// without an epilogue and 2^-5.7 with one (the largest error is printed).
/// A dropped 16-deep K tail errs by about 2^-2 of the RMS; ExactSums holds
/// QGMMA's layouts, scales and tails to the f32 tiles' 1e-4.
void checkFP8(int64_t E, int64_t N, const std::vector<int32_t> &offsets, int64_t S,
              const std::vector<int64_t> &depths, const std::vector<cuda::FP8Tile> &tiles,
              FP8Operands operands = FP8Operands::Random, bool deviceOffsets = true) {
  std::mt19937 rng(23);
  const int64_t valid = offsets.back();
  cpu::ThreadPool pool(2);
  for (int64_t K : depths) {
    int64_t kBlocks = (K + 127) / 128, nBlocks = (N + 127) / 128;
    auto bias = randomVector(E * N, rng);
    std::vector<uint8_t> lq(S * K), wq(E * N * K);
    std::vector<float> lscale(S * kBlocks), wscale(E * nBlocks * kBlocks);
    std::uniform_int_distribution<int> sign(0, 1);
    if (operands == FP8Operands::Random) {
      auto x = randomVector(S * K, rng);
      cpu::quantizeE4M3(pool, x.data(), S, K, lq.data(), lscale.data());
      wq = randomE4M3(wq.size(), rng);
      wscale = randomBlockScales(wscale.size(), rng);
    } else {
      // e4m3 exponent fields 7 and 8 with a zero mantissa: 1 and 2.
      std::uniform_int_distribution<int> exponent(7, 8), shift(6, 9);
      for (std::vector<uint8_t> *codes : {&lq, &wq})
        for (uint8_t &c : *codes)
          c = static_cast<uint8_t>(exponent(rng) << 3 | (sign(rng) ? 0x80 : 0));
      for (std::vector<float> *scales : {&lscale, &wscale})
        for (float &v : *scales)
          v = std::ldexp(1.0f, -shift(rng));
    }
    DeviceBuffer dLq = upload(lq), dLs = upload(lscale), dWq = upload(wq), dWs = upload(wscale),
                 dOffsets = upload(offsets), dBias = upload(bias);
    for (const cpu::Epilogue &epilogue : allEpilogues())
      for (bool withBias : {true, false}) {
        int64_t width = outputWidth(epilogue, N);
        std::vector<float> want(S * width);
        cpu::groupedMatmulFP8(pool, lq.data(), lscale.data(), K, wq.data(), wscale.data(), E, N,
                              offsets.data(), withBias ? bias.data() : nullptr, epilogue,
                              want.data());
        const cuda::FP8MatmulOperands deviceOperands{
            dLq.dataAs<uint8_t>(), S, dLs.dataAs<float>(), K, dWq.dataAs<uint8_t>(),
            dWs.dataAs<float>(), E, N, deviceOffsets ? dOffsets.dataAs<int32_t>() : nullptr,
            withBias ? dBias.dataAs<float>() : nullptr, epilogue};
        for (cuda::FP8Tile tile : tiles) {
          if (!cuda::fp8TileAvailable(tile) || (cuda::isWgmmaTile(tile) && K % 16 != 0))
            continue;
          // Without the bias only where that changes what runs: QGMMA's
          // epilogues (the other tiles add a bias in the same registers).
          const bool qgmma = runsOnQgmma(tile, S, E, K, N);
          if (!withBias && !qgmma)
            continue;
          SCOPED_TRACE("K " + std::to_string(K) + ", tile " + cuda::fp8TileName(tile) +
                       ", layout " + std::to_string(int(epilogue.layout)) + ", enabled " +
                       std::to_string(epilogue.enabled) + (withBias ? ", bias" : ", no bias"));
          DeviceBuffer dOut = poisoned(S * width * 4);
          ASSERT_OK(cuda::groupedMatmulFP8(deviceOperands, dOut.dataAs<float>(), nullptr, tile));
          ASSERT_OK(cudaStatus(cudaDeviceSynchronize(), "sync", __FILE__, __LINE__));
          std::vector<float> got = download<float>(dOut, S * width);
          ASSERT_NO_FATAL_FAILURE(
              expectFP8ResultForms(deviceOperands, tile, qgmma, got, valid, width));
          if (tile == cuda::FP8Tile::Auto)
            ASSERT_NO_FATAL_FAILURE(expectBF16Entries(deviceOperands, got, valid, width));
          double atol = 1e-4;
          if (operands == FP8Operands::Random && qgmma) {
            double rms = rootMeanSquare(want, valid * width), worst = 0;
            for (int64_t i = 0; i < valid * width; ++i)
              worst = std::max(worst, std::abs(double(got[i]) - want[i]));
            std::printf("QGMMA K %lld, epilogue %d/%d%s: largest error %.2e = 2^%.1f of the RMS\n",
                        static_cast<long long>(K), int(epilogue.layout), int(epilogue.enabled),
                        withBias ? " + bias" : "", worst, std::log2(worst / rms));
            atol = std::ldexp(rms, -4);
          }
          ASSERT_NO_FATAL_FAILURE(
              expectRowsThenUntouchedTail(want, got, valid, width, "FP8 grouped matmul", atol));
        }
      }
  }
}

/// Codes and scales quantised from a result rounded to bf16 before its
/// epilogue (QGMMA's bf16 product) against those of the f32 result, on random
/// operands, whose products bf16 does not hold: sentinel rows untouched, the
/// valid rows' scales written, and at most a quarter of the codes different
/// (the rounding moves a few % across e4m3's midpoints, and where a bias
/// cancels the product more; a wrong row, column or bias moves nearly all of
/// them; the count is printed). ExactBF16 operands hold the same path to the
/// f32 one's bits.
void expectMostCodesAgree(const std::vector<uint8_t> &wantQ, const std::vector<uint8_t> &gotQ,
                          const std::vector<uint32_t> &gotScaleBits, int64_t valid,
                          int64_t width) {
  const int64_t groups = (width + 127) / 128;
  ASSERT_EQ(gotQ.size(), wantQ.size());
  for (int64_t i = valid * width; i < int64_t(gotQ.size()); ++i)
    ASSERT_EQ(gotQ[i], 0xFF) << "code " << i << " past the valid rows written";
  for (int64_t i = 0; i < int64_t(gotScaleBits.size()); ++i)
    ASSERT_EQ(gotScaleBits[i] == 0xFFFFFFFFu, i >= valid * groups) << "scale " << i;
  int64_t differing = 0;
  for (int64_t i = 0; i < valid * width; ++i)
    differing += gotQ[i] != wantQ[i];
  std::printf("bf16 product: %lld of %lld codes differ from the f32 result's\n",
              static_cast<long long>(differing), static_cast<long long>(valid * width));
  EXPECT_LE(differing, valid * width / 4) << "codes that differ";
}

/// How checkFP8Quantized draws its operands.
enum class QuantizedOperands {
  /// Rows quantised from random floats, random weight codes and scales.
  Random,
  /// Codes of +-1 and every scale 2^-4: each product is 2^-8 times an integer
  /// of at most 256, which bf16 holds, so a bf16 product is the f32 one.
  ExactBF16,
};

/// groupedMatmulFP8Quantized gives the codes and scales of groupedMatmulFP8
/// followed by quantizeE4M3, bit for bit, and leaves the sentinel tail alone:
/// on QGMMA with FP8Epilogue::Pass its epilogue pass quantises (N = 264:
/// 16-byte loads, 4-byte code stores; 276: column by column), on the mma.sync
/// tiles the quantise kernel follows, its f32 result in the pool's scratch or
/// in planned scratch (one float short of the rows: the pool again). 36000
/// rows: more (row, group) items than the pass's warps, so each warp takes
/// several. With FP8Epilogue::Fused, QGMMA's epilogue writes bf16 for the
/// pass: interleaved SiLU gate/up (N = 2064: h of whole 16-byte chunks, the
/// last N tile partial) gives quantizeE4M3 of the f32 result rounded to bf16,
/// bit for bit; the other epilogues read a bf16 product where N % 8 == 0,
/// which gives the f32 path's bits on ExactBF16 operands (and most of them
/// on random ones: expectMostCodesAgree), and the f32 product elsewhere (276:
/// bit for bit again).
void checkFP8Quantized(const std::vector<int32_t> &offsets, QuantizedOperands kind);

TEST(CudaKernels, FP8GroupedMatmulQuantizedMatchesUnfused) {
  for (QuantizedOperands kind : {QuantizedOperands::Random, QuantizedOperands::ExactBF16})
    for (const std::vector<int32_t> &offsets :
         {std::vector<int32_t>{0, 1, 130, 430, 430, 850},
          std::vector<int32_t>{0, 9000, 20000, 20000, 26001, 36000}}) {
      SCOPED_TRACE("rows " + std::to_string(offsets.back()) +
                   (kind == QuantizedOperands::Random ? ", random" : ", exact in bf16"));
      ASSERT_NO_FATAL_FAILURE(checkFP8Quantized(offsets, kind));
    }
}

void checkFP8Quantized(const std::vector<int32_t> &offsets, QuantizedOperands kind) {
  std::mt19937 rng(41);
  const int64_t E = 6, K = 256, kBlocks = 2;
  const int64_t valid = offsets.back(), S = valid + 9;
  cpu::ThreadPool pool(2);
  for (int64_t N : {264, 276, 2064}) {
    int64_t nBlocks = (N + 127) / 128;
    auto x = randomVector(S * K, rng), bias = randomVector(E * N, rng);
    std::vector<uint8_t> lq(S * K);
    std::vector<float> lscale(S * kBlocks);
    cpu::quantizeE4M3(pool, x.data(), S, K, lq.data(), lscale.data());
    std::vector<uint8_t> wq = randomE4M3(E * N * K, rng);
    std::vector<float> wscale = randomBlockScales(E * nBlocks * kBlocks, rng);
    if (kind == QuantizedOperands::ExactBF16) {
      std::uniform_int_distribution<int> sign(0, 1);
      for (std::vector<uint8_t> *codes : {&lq, &wq})
        for (uint8_t &c : *codes)
          c = static_cast<uint8_t>(0x38 | (sign(rng) ? 0x80 : 0)); // +-1
      std::fill(lscale.begin(), lscale.end(), 0.0625f);
      std::fill(wscale.begin(), wscale.end(), 0.0625f);
    }
    DeviceBuffer dLq = upload(lq), dLs = upload(lscale), dWq = upload(wq), dWs = upload(wscale),
                 dOffsets = upload(offsets), dBias = upload(bias);
    for (cuda::FP8Tile tile : {cuda::FP8Tile::Auto, cuda::FP8Tile::Tok32, cuda::FP8Tile::Wgmma,
                               cuda::FP8Tile::WgmmaPingpong})
      for (const cpu::Epilogue &epilogue : allEpilogues()) {
        if (!cuda::fp8TileAvailable(tile))
          continue;
        SCOPED_TRACE("N " + std::to_string(N) + ", tile " + cuda::fp8TileName(tile) + ", layout " +
                     std::to_string(int(epilogue.layout)) + ", enabled " +
                     std::to_string(epilogue.enabled));
        int64_t width = outputWidth(epilogue, N), groups = (width + 127) / 128;
        DeviceBuffer dResult = poisoned(S * width * 4), dWantQ = poisoned(S * width),
                     dWantScales = poisoned(S * groups * 4);
        const int32_t *o = dOffsets.dataAs<int32_t>();
        cuda::FP8MatmulOperands operands{dLq.dataAs<uint8_t>(), S, dLs.dataAs<float>(), K,
                                         dWq.dataAs<uint8_t>(), dWs.dataAs<float>(), E, N, o,
                                         dBias.dataAs<float>(), epilogue};
        ASSERT_OK(cuda::groupedMatmulFP8(operands, dResult.dataAs<float>(), nullptr, tile, false,
                                         cuda::FP8Epilogue::Pass));
        ASSERT_OK(cuda::quantizeE4M3(dResult.dataAs<float>(), S, width, o + E - 1,
                                     dWantQ.dataAs<uint8_t>(), dWantScales.dataAs<float>(),
                                     nullptr));
        // What Fused gives on QGMMA (see above): the codes of the f32 result
        // rounded to bf16, the bf16 product's, or those of the f32 result.
        const bool qgmma = runsOnQgmma(tile, S, E, K, N);
        const bool fusedGate = qgmma && epilogue.enabled &&
                               epilogue.layout == cpu::GateUpLayout::Interleaved &&
                               epilogue.kind == cpu::ActivationKind::SiLU && (N / 2) % 8 == 0;
        const bool bf16Product = qgmma && !fusedGate && N % 8 == 0;
        DeviceBuffer dRoundedQ = poisoned(S * width), dRoundedScales = poisoned(S * groups * 4);
        if (fusedGate) {
          std::vector<float> rounded = download<float>(dResult, S * width);
          for (int64_t i = 0; i < valid * width; ++i)
            rounded[i] = fromBF16(toBF16(rounded[i]));
          DeviceBuffer dRounded = upload(rounded);
          ASSERT_OK(cuda::quantizeE4M3(dRounded.dataAs<float>(), S, width, o + E - 1,
                                       dRoundedQ.dataAs<uint8_t>(),
                                       dRoundedScales.dataAs<float>(), nullptr));
        }
        for (cuda::FP8Epilogue finish : {cuda::FP8Epilogue::Pass, cuda::FP8Epilogue::Fused})
          for (int64_t plannedFloats : {int64_t(0), S * width, S * width - 1}) {
            if (plannedFloats && tile != cuda::FP8Tile::Tok32)
              continue; // the other tiles here take QGMMA, which has no f32 result
            SCOPED_TRACE("planned scratch " + std::to_string(plannedFloats) +
                         (finish == cuda::FP8Epilogue::Fused ? ", fused" : ", pass"));
            DeviceBuffer dPlanned = poisoned(std::max<int64_t>(1, plannedFloats) * 4),
                         dQ = poisoned(S * width), dScales = poisoned(S * groups * 4);
            ASSERT_OK(cuda::groupedMatmulFP8Quantized(
                operands, dQ.dataAs<uint8_t>(), dScales.dataAs<float>(),
                plannedFloats ? dPlanned.dataAs<float>() : nullptr, plannedFloats, nullptr, tile,
                false, finish));
            ASSERT_OK(cudaStatus(cudaDeviceSynchronize(), "sync", __FILE__, __LINE__));
            std::vector<uint8_t> q = download<uint8_t>(dQ, S * width);
            std::vector<uint32_t> scaleBits = download<uint32_t>(dScales, S * groups);
            const bool fused = finish == cuda::FP8Epilogue::Fused;
            if (fused && bf16Product && kind == QuantizedOperands::Random) {
              ASSERT_NO_FATAL_FAILURE(expectMostCodesAgree(download<uint8_t>(dWantQ, S * width),
                                                           q, scaleBits, valid, width));
              continue;
            }
            // Both whole buffers, sentinel tails (still poisoned) included; the
            // valid rows' scales written, the tail's not.
            const std::vector<uint8_t> wantQ =
                download<uint8_t>(fused && fusedGate ? dRoundedQ : dWantQ, S * width);
            const std::vector<uint32_t> wantScaleBits = download<uint32_t>(
                fused && fusedGate ? dRoundedScales : dWantScales, S * groups);
            for (int64_t i = 0; i < S * width; ++i)
              ASSERT_EQ(q[i], wantQ[i]) << "code " << i << " (row " << i / width << ")";
            for (int64_t i = 0; i < S * groups; ++i) {
              ASSERT_EQ(scaleBits[i], wantScaleBits[i]) << "scale " << i;
              ASSERT_EQ(scaleBits[i] == 0xFFFFFFFFu, i >= valid * groups) << "scale " << i;
            }
          }
      }
  }
}

TEST(CudaKernels, FP8GroupedMatmulMatchesCpu) {
  // Decode-like: every tile (wgmma too where K allows), partial K and N blocks.
  for (FP8Operands operands : {FP8Operands::ExactSums, FP8Operands::Random})
    ASSERT_NO_FATAL_FAILURE(
        checkFP8(5, 272, {0, 3, 3, 40, 41}, 45, {200, 272},
                 {cuda::FP8Tile::Auto, cuda::FP8Tile::Tok8, cuda::FP8Tile::Tok16,
                  cuda::FP8Tile::Tok32, cuda::FP8Tile::Wgmma, cuda::FP8Tile::WgmmaPingpong,
                  cuda::FP8Tile::Decode8},
                 operands));
}

/// The decode tiles (FP8DecodeTile.cuh, rings in registers and in shared
/// memory) at the edges of their steps, scale blocks and K split: K of one partial step (12, 4-byte
/// loads), of a block and a 16-byte tail (144), of nine blocks over two K
/// warps (1040, and 1044 with 4-byte loads), of 33 over four (4112: rings
/// of 6 in shared memory); N whose
/// gated halves end inside a 16-row group (200: the up rows' scale block
/// changes between a lane's two rows) and inside a column tile (392); one row
/// (T = 1), and 16 rows of one expert (two row tiles) beside 5 of another,
/// experts without rows and sentinel slots after; one expert without offsets
/// (moe.linear).
TEST(CudaKernels, FP8DecodeTileMatchesCpu) {
  const std::vector<cuda::FP8Tile> tiles = {cuda::FP8Tile::Decode8, cuda::FP8Tile::Decode8Async};
  for (FP8Operands operands : {FP8Operands::ExactSums, FP8Operands::Random}) {
    ASSERT_NO_FATAL_FAILURE(checkFP8(4, 200, {0, 0, 1, 1}, 3, {12, 144, 1040}, tiles, operands));
    ASSERT_NO_FATAL_FAILURE(
        checkFP8(5, 392, {0, 16, 16, 21, 21}, 24, {144, 1044, 4112}, tiles, operands));
    ASSERT_NO_FATAL_FAILURE(checkFP8(1, 392, {11}, 11, {1040}, tiles, operands, false));
  }
}

/// Prefill: experts of 0, 1, 129, 300 and 420 rows, where Auto takes the wgmma
/// tiles in runtimes with CUTLASS; partial K and N blocks (K = 272, N = 392).
TEST(CudaKernels, FP8GroupedMatmulPrefill) {
  ASSERT_EQ(cuda::chooseFP8Tile(859, 6, 272, 392, /*offsets=*/true),
            cuda::fp8TileAvailable(cuda::FP8Tile::Wgmma) ? cuda::FP8Tile::Wgmma
                                                         : cuda::FP8Tile::Tok32);
  // N = 400: the gated h in whole 16-byte chunks (the fused gated epilogue
  // of the bf16 results), its last N tile partial; 392: h in 8-byte ones.
  for (int64_t N : {392, 400})
    for (FP8Operands operands : {FP8Operands::ExactSums, FP8Operands::Random})
      ASSERT_NO_FATAL_FAILURE(checkFP8(
          6, N, {0, 1, 130, 430, 430, 850}, 859, {272, 528},
          {cuda::FP8Tile::Auto, cuda::FP8Tile::Tok32, cuda::FP8Tile::WgmmaPingpong,
           cuda::FP8Tile::Decode8},
          operands));
}

} // namespace
