//===- CudaTest.cpp - device memory, pinned staging, checked calls ----------===//

#include "moec/runtime/Cuda.h"

#include "TestUtil.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

using namespace moec::rt;

namespace {


TEST(Cuda, PoisonIsNaNInEveryFloatFormat) {
  constexpr size_t kCount = 1 << 16;
  DeviceBuffer device;
  ASSERT_OK(DeviceBuffer::allocate(kCount * sizeof(float), device));
  ASSERT_OK(poisonDeviceMemory(device.data(), device.size(), nullptr));
  std::vector<float> host(kCount, 1.0f);
  ASSERT_OK(cudaStatus(cudaMemcpy(host.data(), device.data(), device.size(),
                                  cudaMemcpyDeviceToHost),
                       "cudaMemcpy", __FILE__, __LINE__));
  for (float value : host)
    ASSERT_TRUE(std::isnan(value));
}

TEST(Cuda, PinnedRoundTripIsExact) {
  constexpr size_t kCount = (1 << 20) + 3;
  std::mt19937 rng(42);
  std::normal_distribution<float> normal;
  PinnedBuffer staging;
  ASSERT_OK(PinnedBuffer::allocate(kCount * sizeof(float), staging));
  auto *values = static_cast<float *>(staging.data());
  std::vector<float> expected(kCount);
  for (size_t i = 0; i < kCount; ++i)
    expected[i] = values[i] = normal(rng);

  DeviceBuffer device;
  ASSERT_OK(DeviceBuffer::allocate(kCount * sizeof(float), device));
  cudaStream_t stream;
  ASSERT_OK(cudaStatus(cudaStreamCreate(&stream), "cudaStreamCreate", __FILE__, __LINE__));
  ASSERT_OK(poisonDeviceMemory(device.data(), device.size(), stream));
  ASSERT_OK(cudaStatus(cudaMemcpyAsync(device.data(), staging.data(), device.size(),
                                       cudaMemcpyHostToDevice, stream),
                       "upload", __FILE__, __LINE__));
  // The upload reads pinned memory asynchronously: wait before overwriting it.
  ASSERT_OK(cudaStatus(cudaStreamSynchronize(stream), "sync", __FILE__, __LINE__));
  std::memset(staging.data(), 0xFF, staging.size());
  ASSERT_OK(cudaStatus(cudaMemcpyAsync(staging.data(), device.data(), device.size(),
                                       cudaMemcpyDeviceToHost, stream),
                       "download", __FILE__, __LINE__));
  ASSERT_OK(cudaStatus(cudaStreamSynchronize(stream), "sync", __FILE__, __LINE__));
  ASSERT_OK(cudaStatus(cudaStreamDestroy(stream), "cudaStreamDestroy", __FILE__, __LINE__));
  EXPECT_EQ(std::memcmp(values, expected.data(), kCount * sizeof(float)), 0);
}

Status copyFromBogusPointer() {
  float host = 0;
  MOEC_CUDA_TRY(cudaMemcpy(&host, reinterpret_cast<void *>(0x10), sizeof(float),
                           cudaMemcpyDeviceToHost));
  return Status::ok();
}

TEST(Cuda, FailedCallsNameTheCallAndTheLine) {
  Status status = copyFromBogusPointer();
  ASSERT_FALSE(status.isOk());
  EXPECT_NE(status.message().find("cudaMemcpy(&host"), std::string::npos) << status.message();
  EXPECT_NE(status.message().find("CudaTest.cpp:"), std::string::npos) << status.message();
  cudaGetLastError();
}

} // namespace
