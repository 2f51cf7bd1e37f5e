//===- WeightFillCudaTest.cpp - the device's weight image, bit for bit ----===//
//
// cuda/WeightFill.cu against the host's fill (WeightFill.cpp): the same plan
// built on the device and on the host must be the same bytes, every one; and
// the fill rate of a large image (MOEC_FILL_RATE_GB, default 4) is printed.
//
//===----------------------------------------------------------------------===//

#include "moec/runtime/Cuda.h"
#include "moec/runtime/WeightFill.h"
#include "moec/runtime/cuda/Artifact.h"

#include "TestUtil.h"
#include "WeightFillPlan.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

using namespace moec::rt;

namespace {

#define CUDA_OK(expr) ASSERT_OK(cudaStatus((expr), #expr, __FILE__, __LINE__))

TEST(WeightFillCuda, DeviceImageIsTheHostImage) {
  WeightFillPlan p = makeWeightFillPlan();
  std::vector<unsigned char> host(p.plan.image_bytes);
  fillWeightImage(p.plan, p.stored.data(), p.stored.size(), host.data());
  DeviceBuffer device;
  ASSERT_OK(DeviceBuffer::allocate(p.plan.image_bytes, device));
  ASSERT_OK(poisonDeviceMemory(device.data(), device.size(), nullptr)); // memset must clear it
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreate(&stream));
  ASSERT_OK(cuda::buildWeightImage(p.plan, p.stored.data(), device.dataAs<unsigned char>(), stream));
  std::vector<unsigned char> back(p.plan.image_bytes, 0x5A);
  CUDA_OK(cudaMemcpy(back.data(), device.data(), back.size(), cudaMemcpyDeviceToHost));
  CUDA_OK(cudaStreamDestroy(stream));
  size_t differ = 0, first = back.size();
  for (size_t i = 0; i < back.size(); ++i)
    if (back[i] != host[i]) {
      ++differ;
      first = std::min(first, i);
    }
  EXPECT_EQ(differ, 0u) << "first differing byte at " << first;
}

TEST(WeightFillCuda, FillRate) {
  double gigabytes = 4;
  if (const char *text = std::getenv("MOEC_FILL_RATE_GB"))
    gigabytes = std::atof(text);
  // bf16 normals in tensors of 1 GiB, as a model's experts are filled.
  constexpr uint64_t kTensorBytes = uint64_t{1} << 30;
  uint64_t tensors = std::max<uint64_t>(1, static_cast<uint64_t>(gigabytes * 1e9 / kTensorBytes));
  size_t free = 0, total = 0;
  CUDA_OK(cudaMemGetInfo(&free, &total));
  tensors = std::min<uint64_t>(tensors, (free - (uint64_t{2} << 30)) / kTensorBytes);
  std::vector<moec_weight_fill> fills(tensors);
  for (uint64_t t = 0; t < tensors; ++t) {
    fills[t] = {};
    fills[t].offset = t * kTensorBytes;
    fills[t].count = kTensorBytes / 2;
    fills[t].stream = t;
    fills[t].value = 0.02f;
    fills[t].kind = MOEC_FILL_NORMAL;
    fills[t].dtype = MOEC_FILL_BF16;
  }
  moec_weight_plan plan{tensors * kTensorBytes, 1, fills.data(), fills.size()};
  DeviceBuffer device;
  ASSERT_OK(DeviceBuffer::allocate(plan.image_bytes, device));
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreate(&stream));
  ASSERT_OK(cuda::buildWeightImage(plan, nullptr, device.dataAs<unsigned char>(), stream)); // warm-up
  auto start = std::chrono::steady_clock::now();
  ASSERT_OK(cuda::buildWeightImage(plan, nullptr, device.dataAs<unsigned char>(), stream));
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CUDA_OK(cudaStreamDestroy(stream));
  std::printf("filled %.1f GB of bf16 normals in %.3f s: %.0f GB/s\n", plan.image_bytes / 1e9,
              seconds, plan.image_bytes / 1e9 / seconds);
  RecordProperty("fill_GB_per_s", std::to_string(plan.image_bytes / 1e9 / seconds));
}

} // namespace
