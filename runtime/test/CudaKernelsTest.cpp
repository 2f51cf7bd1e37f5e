//===- CudaKernelsTest.cpp - CUDA moe kernels against the CPU kernels -------===//
//
// The CPU kernels are checked against float64 references (CpuKernelsTest.cpp);
// here every CUDA kernel must agree with them on random inputs, with device
// outputs poisoned (NaN) before each run and every CUDA call checked. Integer
// results (ids, permutation, offsets) must match exactly.
//
//===----------------------------------------------------------------------===//

#include "moec/runtime/Cuda.h"
#include "moec/runtime/cuda/MoEKernels.h"

#include "TestUtil.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

using namespace moec::rt;
using moec::rt::test::randomVector;
using moec::rt::test::RandomBlock;

namespace {



/// A device copy of a host vector.
template <typename T> DeviceBuffer upload(const std::vector<T> &host) {
  DeviceBuffer buffer;
  Status status = DeviceBuffer::allocate(host.size() * sizeof(T), buffer);
  EXPECT_TRUE(status.isOk()) << status.message();
  status = cudaStatus(cudaMemcpy(buffer.data(), host.data(), host.size() * sizeof(T),
                                 cudaMemcpyHostToDevice),
                      "upload", __FILE__, __LINE__);
  EXPECT_TRUE(status.isOk()) << status.message();
  return buffer;
}

/// A device buffer of `count` elements filled with 0xFF bytes (NaN, or -1).
DeviceBuffer poisoned(size_t bytes) {
  DeviceBuffer buffer;
  EXPECT_TRUE(DeviceBuffer::allocate(bytes, buffer).isOk());
  EXPECT_TRUE(poisonDeviceMemory(buffer.data(), bytes, nullptr).isOk());
  return buffer;
}

template <typename T> std::vector<T> download(const DeviceBuffer &buffer, size_t count) {
  std::vector<T> host(count);
  Status status = cudaStatus(cudaMemcpy(host.data(), buffer.data(), count * sizeof(T),
                                        cudaMemcpyDeviceToHost),
                             "download", __FILE__, __LINE__);
  EXPECT_TRUE(status.isOk()) << status.message();
  return host;
}

void expectNear(const std::vector<float> &want, const std::vector<float> &got, double rtol,
                double atol, const char *what, size_t count = SIZE_MAX) {
  count = std::min(count, want.size());
  for (size_t i = 0; i < count; ++i)
    ASSERT_LE(std::abs(double(got[i]) - want[i]), atol + rtol * std::abs(want[i]))
        << what << "[" << i << "] = " << got[i] << ", expected " << want[i];
}

TEST(CudaKernels, RouteMatchesCpuForEveryKind) {
  std::mt19937 rng(11);
  const int64_t T = 67, E = 64;
  auto logits = randomVector(T * E, rng, 2.0f), bias = randomVector(E, rng, 0.3f);
  cpu::ThreadPool pool(2);
  std::vector<cpu::Routing> routings = {
      {cpu::RoutingKind::SoftmaxTopK, 2, true},
      {cpu::RoutingKind::SoftmaxTopK, 8, false},
      {cpu::RoutingKind::TopKSoftmax, 4, false},
      {cpu::RoutingKind::SigmoidGroupTopK, 8, true, 8, 4, 2.5f},
  };
  DeviceBuffer dLogits = upload(logits), dBias = upload(bias);
  for (const cpu::Routing &r : routings) {
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

TEST(CudaKernels, GroupedPipelineMatchesCpuWithSentinels) {
  std::mt19937 rng(5);
  const int64_t T = 129, H = 96, I = 48, E = 8, K = 2, S = T * K;
  RandomBlock block(T, H, I, E, K, rng);
  const auto &x = block.x, &gu = block.gateUp, &down = block.down, &gub = block.gateUpBias,
             &w = block.weights, &shared = block.shared, &gate = block.sharedGate;
  auto &ids = block.ids;
  ids[0] = E;             // out of range
  ids[7] = -1;            // negative
  ids[40] = ids[41] = 99; // token 20: all slots sentinels
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
  cudaStream_t stream;
  ASSERT_OK(cudaStatus(cudaStreamCreate(&stream), "stream", __FILE__, __LINE__));
  ASSERT_OK(cuda::sortByExpert(dIds.dataAs<int32_t>(), S, E, 0, dPerm.dataAs<int32_t>(),
                               dOffsets.dataAs<int32_t>(), dNumValid.dataAs<int32_t>(),
                               workspace.data(), workspaceBytes, stream));
  ASSERT_OK(cuda::permute(dX.dataAs<float>(), H, dPerm.dataAs<int32_t>(),
                          dNumValid.dataAs<int32_t>(), S, K, dRows.dataAs<float>(), stream));
  ASSERT_OK(cuda::groupedMatmul(dRows.dataAs<float>(), S, H, dGu.dataAs<float>(), E, 2 * I,
                                dOffsets.dataAs<int32_t>(), dGub.dataAs<float>(), act,
                                dH.dataAs<float>(), stream));
  ASSERT_OK(cuda::groupedMatmul(dH.dataAs<float>(), S, I, dDown.dataAs<float>(), E, H,
                                dOffsets.dataAs<int32_t>(), nullptr, {}, dY.dataAs<float>(),
                                stream));
  ASSERT_OK(cuda::combine(dY.dataAs<float>(), dPerm.dataAs<int32_t>(), S, H, dW.dataAs<float>(), T,
                          K, dNumValid.dataAs<int32_t>(), dShared.dataAs<float>(),
                          dGate.dataAs<float>(), dRowOfSlot.dataAs<int32_t>(),
                          dOut.dataAs<float>(), stream));
  ASSERT_OK(cudaStatus(cudaStreamSynchronize(stream), "sync", __FILE__, __LINE__));
  ASSERT_OK(cudaStatus(cudaStreamDestroy(stream), "stream", __FILE__, __LINE__));

  EXPECT_EQ(download<int32_t>(dPerm, S), perm);
  EXPECT_EQ(download<int32_t>(dOffsets, E), offsets);
  EXPECT_EQ(download<int32_t>(dNumValid, 1)[0], numValid);
  ASSERT_EQ(numValid, S - 4);
  std::vector<float> gotY = download<float>(dY, S * H);
  expectNear(y, gotY, 1e-4, 1e-5, "down rows", size_t(numValid) * H);
  for (int64_t i = int64_t(numValid) * H; i < S * H; ++i)
    ASSERT_TRUE(std::isnan(gotY[i])) << "sentinel row element " << i << " was written";
  expectNear(out, download<float>(dOut, T * H), 1e-4, 1e-5, "output");
}

} // namespace

namespace {

uint16_t toBF16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  bits += 0x7FFF + ((bits >> 16) & 1); // round to nearest even
  return static_cast<uint16_t>(bits >> 16);
}

float fromBF16(uint16_t bits) {
  uint32_t wide = uint32_t(bits) << 16;
  float value;
  std::memcpy(&value, &wide, 4);
  return value;
}

/// `values` rounded to bf16 in place; returns their bf16 bits (the kernel's
/// weights), so the CPU reference runs on exactly the values the kernel reads.
std::vector<uint16_t> roundToBF16(std::vector<float> &values) {
  std::vector<uint16_t> bits(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    bits[i] = toBF16(values[i]);
    values[i] = fromBF16(bits[i]);
  }
  return bits;
}

/// groupedMatmulDecodeBF16 on the GPU (into NaN-poisoned output, read back
/// into `got`) and cpu::groupedMatmul on the same bf16-rounded weights (`want`).
void runDecodeAndCpu(const std::vector<float> &lhs, int64_t S, int64_t K,
                     const std::vector<float> &weights, const std::vector<uint16_t> &weightsBF16,
                     int64_t E, int64_t N, const std::vector<int32_t> &offsets,
                     const std::vector<float> &bias, const cpu::Epilogue &epilogue,
                     std::vector<float> &want, std::vector<float> &got) {
  int64_t width = epilogue.enabled && epilogue.layout != cpu::GateUpLayout::None ? N / 2 : N;
  cpu::ThreadPool pool(2);
  want.assign(S * width, 0.0f);
  cpu::groupedMatmul(pool, lhs.data(), K, weights.data(), E, N, offsets.data(), bias.data(),
                     epilogue, want.data());
  DeviceBuffer dLhs = upload(lhs), dWeights = upload(weightsBF16), dOffsets = upload(offsets),
               dBias = upload(bias);
  DeviceBuffer dOut = poisoned(S * width * 4);
  ASSERT_OK(cuda::groupedMatmulDecodeBF16(dLhs.dataAs<float>(), S, K, dWeights.dataAs<uint16_t>(),
                                          E, N, dOffsets.dataAs<int32_t>(), dBias.dataAs<float>(),
                                          epilogue, dOut.dataAs<float>(), nullptr));
  ASSERT_OK(cudaStatus(cudaDeviceSynchronize(), "sync", __FILE__, __LINE__));
  got = download<float>(dOut, S * width);
}

/// The decode grouped matmul (bf16 weights streamed once) against the CPU
/// kernel on the same bf16-rounded weights, for every epilogue, with experts
/// that have no rows, an expert with more rows than one pass, and a sentinel tail.
TEST(CudaKernels, DecodeGroupedMatmulMatchesCpu) {
  std::mt19937 rng(3);
  const int64_t E = 16, K = 264, N = 96;
  const std::vector<int32_t> offsets = {0, 3, 3, 3, 4, 4, 15, 15, 15, 15, 16, 16, 16, 17, 17, 17};
  const int64_t S = 21; // 4 sentinel rows past offsets[E-1] = 17
  auto lhs = randomVector(S * K, rng), bias = randomVector(E * N, rng);
  auto weights = randomVector(E * N * K, rng, 0.2f);
  std::vector<uint16_t> weightsBF16 = roundToBF16(weights);
  std::vector<cpu::Epilogue> epilogues = {
      {},
      {true, cpu::ActivationKind::SiLU, cpu::GateUpLayout::Concatenated},
      {true, cpu::ActivationKind::SiLU, cpu::GateUpLayout::Interleaved, 1.702f, 1.0f, 1.0f},
      {true, cpu::ActivationKind::GELU, cpu::GateUpLayout::None},
  };
  for (const cpu::Epilogue &epilogue : epilogues) {
    int64_t width = epilogue.enabled && epilogue.layout != cpu::GateUpLayout::None ? N / 2 : N;
    std::vector<float> want, got;
    ASSERT_NO_FATAL_FAILURE(runDecodeAndCpu(lhs, S, K, weights, weightsBF16, E, N, offsets, bias,
                                            epilogue, want, got));
    expectNear(want, got, 1e-4, 1e-4, "decode grouped matmul", 17 * width);
    for (int64_t i = 17 * width; i < S * width; ++i)
      ASSERT_TRUE(std::isnan(got[i])) << "sentinel row element " << i << " was written";
  }
}

/// Few slots (decode at T = 1): the block stages at most `slots` rows, so an
/// expert that owns every slot still gets all its rows in one pass; checked for
/// 1, 2 and 3 slots with the rows spread and all in one expert.
TEST(CudaKernels, DecodeGroupedMatmulFewSlots) {
  std::mt19937 rng(5);
  const int64_t E = 4, K = 72, N = 24;
  const std::vector<std::pair<int64_t, std::vector<int32_t>>> cases = {
      {1, {0, 1, 1, 1}}, {2, {1, 1, 2, 2}}, {2, {0, 0, 2, 2}}, {3, {0, 0, 0, 3}}};
  for (const auto &[S, offsets] : cases) {
    auto lhs = randomVector(S * K, rng), bias = randomVector(E * N, rng);
    auto weights = randomVector(E * N * K, rng, 0.2f);
    std::vector<uint16_t> weightsBF16 = roundToBF16(weights);
    cpu::Epilogue epilogue{true, cpu::ActivationKind::SiLU, cpu::GateUpLayout::Concatenated};
    int64_t width = N / 2;
    std::vector<float> want, got;
    ASSERT_NO_FATAL_FAILURE(runDecodeAndCpu(lhs, S, K, weights, weightsBF16, E, N, offsets, bias,
                                            epilogue, want, got));
    expectNear(want, got, 1e-4, 1e-4, "decode grouped matmul, few slots", S * width);
  }
}

} // namespace
