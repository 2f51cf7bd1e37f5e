//===- CudaTest.cpp - device memory, pinned staging, checked calls ----------===//

#include "moec/runtime/Cuda.h"
#include "moec/runtime/cuda/Artifact.h"

#include "TestUtil.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
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

/// uploadThroughPinned moves every byte, whatever the size against its chunks:
/// smaller than one chunk, several chunks wrapping a two-buffer ring with a
/// short last one, and again after the process's staging is cached (a bigger
/// upload must not reuse smaller cached buffers).
TEST(Cuda, UploadThroughPinnedIsExact) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> byte(0, 255);
  struct Case {
    size_t bytes;
    cuda::UploadPlan plan;
  };
  const Case cases[] = {
      {12345, {}},                                       // below one chunk
      {(size_t(5) << 20) + 77, {size_t(1) << 20, 2, 4}}, // 6 chunks over 2 buffers
      {(size_t(5) << 20) + 77, {size_t(1) << 20, 2, 4}}, // the same, staging cached
      {(size_t(9) << 20) + 5, {size_t(2) << 20, 3, 16}}, // bigger chunks than cached
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(std::to_string(c.bytes) + " bytes in chunks of " +
                 std::to_string(c.plan.chunkBytes));
    std::vector<unsigned char> host(c.bytes);
    for (unsigned char &b : host)
      b = static_cast<unsigned char>(byte(rng));
    DeviceBuffer device;
    ASSERT_OK(DeviceBuffer::allocate(c.bytes, device));
    ASSERT_OK(poisonDeviceMemory(device.data(), c.bytes, nullptr));
    ASSERT_OK(cuda::uploadThroughPinned(host.data(), c.bytes, device.data(), c.plan));
    std::vector<unsigned char> back(c.bytes);
    ASSERT_OK(cudaStatus(cudaMemcpy(back.data(), device.data(), c.bytes, cudaMemcpyDeviceToHost),
                         "download", __FILE__, __LINE__));
    ASSERT_EQ(std::memcmp(back.data(), host.data(), c.bytes), 0);
  }
  // A plan without a ring is refused.
  DeviceBuffer device;
  ASSERT_OK(DeviceBuffer::allocate(64, device));
  unsigned char host[64] = {};
  EXPECT_FALSE(cuda::uploadThroughPinned(host, 64, device.data(), {size_t(1) << 20, 1, 1}).isOk());
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

/// GraphCache::inPlace: device buffers of this device, 256-byte aligned, no
/// output overlapping another buffer; host memory, misalignment and overlap
/// take the copies; and once kMaxInPlace address sets have graphs, new sets
/// take the copies while the cached ones still run in place.
TEST(Cuda, GraphCacheRunsInPlaceOnlyOnDeviceBuffersItMayKeep) {
  constexpr size_t kBytes = 4096;
  DeviceBuffer device;
  ASSERT_OK(DeviceBuffer::allocate(64 * kBytes, device));
  auto *base = device.dataAs<unsigned char>();
  std::vector<unsigned char> host(kBytes);
  cuda::GraphCache graphs;
  auto buffer = [&](size_t slot, size_t shift = 0) {
    return cuda::CallerBuffer{base + slot * kBytes + shift, kBytes};
  };
  cuda::CallerBuffer input = buffer(0), output = buffer(1);
  EXPECT_TRUE(graphs.inPlace(4, &input, 1, &output, 1));
  cuda::CallerBuffer hostInput{host.data(), kBytes};
  EXPECT_FALSE(graphs.inPlace(4, &hostInput, 1, &output, 1));
  cuda::CallerBuffer misaligned = buffer(2, 64);
  EXPECT_FALSE(graphs.inPlace(4, &input, 1, &misaligned, 1));
  cuda::CallerBuffer overlapping{base + kBytes / 2, kBytes};
  EXPECT_FALSE(graphs.inPlace(4, &input, 1, &overlapping, 1));
  cuda::CallerBuffer outputs[] = {buffer(1), {base + kBytes + 256, 256}};
  EXPECT_FALSE(graphs.inPlace(4, &input, 1, outputs, 2));

  // kMaxInPlace graphs, each clearing its output (captured as a memset).
  cudaStream_t stream = nullptr;
  ASSERT_OK(cudaStatus(cudaStreamCreate(&stream), "stream", __FILE__, __LINE__));
  int runs = 0;
  void *target = nullptr;
  auto compute = [&]() -> Status {
    ++runs;
    MOEC_CUDA_TRY(cudaMemsetAsync(target, 0, 256, stream));
    return Status::ok();
  };
  for (size_t set = 0; set < cuda::GraphCache::kMaxInPlace; ++set) {
    cuda::CallerBuffer in = buffer(2 * set), out = buffer(2 * set + 1);
    ASSERT_TRUE(graphs.inPlace(4, &in, 1, &out, 1)) << "set " << set;
    target = const_cast<void *>(out.data);
    ASSERT_OK(graphs.run(4, stream, compute, &in, 1, &out, 1));
  }
  EXPECT_EQ(runs, int(cuda::GraphCache::kMaxInPlace)); // each captured once
  cuda::CallerBuffer in = buffer(2 * cuda::GraphCache::kMaxInPlace),
                     out = buffer(2 * cuda::GraphCache::kMaxInPlace + 1);
  EXPECT_FALSE(graphs.inPlace(4, &in, 1, &out, 1));
  EXPECT_TRUE(graphs.inPlace(4, &input, 1, &output, 1)); // set 0, cached
  target = nullptr; // a capture now would fail: the cached graph must replay
  ASSERT_OK(graphs.run(4, stream, compute, &input, 1, &output, 1));
  EXPECT_EQ(runs, int(cuda::GraphCache::kMaxInPlace)); // replayed, not captured
  ASSERT_OK(cudaStatus(cudaStreamSynchronize(stream), "sync", __FILE__, __LINE__));
  cudaStreamDestroy(stream);
}

/// A capture that fails (here: compute itself fails while captured) leaves
/// the run eager from then on, says so once on stderr, and the eager run's own
/// result is what the caller gets.
TEST(Cuda, GraphCacheFallsBackToEagerAndSaysSo) {
  if (const char *graphs = std::getenv("MOEC_CUDA_GRAPHS"); graphs && std::strcmp(graphs, "0") == 0)
    GTEST_SKIP() << "MOEC_CUDA_GRAPHS=0: nothing is captured";
  DeviceBuffer device;
  ASSERT_OK(DeviceBuffer::allocate(256, device));
  cudaStream_t stream = nullptr;
  ASSERT_OK(cudaStatus(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream",
                       __FILE__, __LINE__));
  cuda::GraphCache graphs;
  int runs = 0;
  auto compute = [&]() -> Status {
    ++runs;
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    MOEC_CUDA_TRY(cudaStreamIsCapturing(stream, &capture));
    if (capture != cudaStreamCaptureStatusNone)
      return Status::error("refused while captured");
    MOEC_CUDA_TRY(cudaMemsetAsync(device.data(), 0, 256, stream));
    return Status::ok();
  };
  testing::internal::CaptureStderr();
  Status first = graphs.run(3, stream, compute);
  Status second = graphs.run(3, stream, compute);
  std::string said = testing::internal::GetCapturedStderr();
  ASSERT_OK(first);
  ASSERT_OK(second);
  EXPECT_EQ(runs, 3); // the failed capture, its eager rerun, the second call eagerly
  EXPECT_NE(said.find("capturing the CUDA graph for 3 tokens failed (refused while captured); "
                      "running without CUDA graphs"),
            std::string::npos)
      << said;
  EXPECT_EQ(said.find("moec:"), said.rfind("moec:")) << "said more than once: " << said;
  ASSERT_OK(cudaStatus(cudaStreamSynchronize(stream), "sync", __FILE__, __LINE__));
  cudaStreamDestroy(stream);
}

/// The artifact's side stream (the shared expert's): work queued on it between
/// forkSide and joinSide sees what the main stream queued before the fork, and
/// the main stream's work after the join sees its results -- captured into one
/// graph (an unjoined side stream would fail the capture, and GraphCache would
/// say so) and eagerly. 16 MiB per copy, so that a missing edge would race.
TEST(Cuda, DeviceModelSideStreamForksAndJoins) {
  constexpr size_t kFloats = size_t(4) << 20;
  constexpr size_t kBytes = kFloats * sizeof(float);
  const unsigned char weights[256] = {};
  cuda::DeviceModel model;
  ASSERT_OK(model.create(weights, sizeof(weights), 3 * kBytes));
  auto *a = reinterpret_cast<float *>(model.workspace());
  float *b = a + kFloats, *c = b + kFloats;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::vector<float> want(kFloats);
  for (float &v : want)
    v = value(rng);
  ASSERT_OK(cudaStatus(cudaMemcpy(a, want.data(), kBytes, cudaMemcpyHostToDevice), "upload",
                       __FILE__, __LINE__));
  cudaStream_t stream = model.stream(), side = model.sideStream();
  ASSERT_NE(side, nullptr);
  ASSERT_NE(side, stream);
  auto compute = [&]() -> Status {
    MOEC_RETURN_IF_ERROR(model.forkSide());
    MOEC_CUDA_TRY(cudaMemcpyAsync(b, a, kBytes, cudaMemcpyDeviceToDevice, side));
    MOEC_RETURN_IF_ERROR(model.joinSide());
    MOEC_CUDA_TRY(cudaMemcpyAsync(c, b, kBytes, cudaMemcpyDeviceToDevice, stream));
    return Status::ok();
  };
  cuda::GraphCache cached; // captured on the first pass, replayed on the second
  for (const char *mode : {"captured", "replayed", "eager"}) {
    SCOPED_TRACE(mode);
    ASSERT_OK(cudaStatus(cudaMemsetAsync(b, 0xFF, 2 * kBytes, stream), "poison", __FILE__,
                         __LINE__)); // NaN in b and c
    testing::internal::CaptureStderr();
    Status status = std::strcmp(mode, "eager") == 0 ? compute() : cached.run(7, stream, compute);
    std::string said = testing::internal::GetCapturedStderr();
    ASSERT_OK(status);
    EXPECT_EQ(said, "") << "the capture fell back to eager";
    std::vector<float> got(kFloats);
    ASSERT_OK(cudaStatus(cudaMemcpyAsync(got.data(), c, kBytes, cudaMemcpyDeviceToHost, stream),
                         "download", __FILE__, __LINE__));
    ASSERT_OK(cudaStatus(cudaStreamSynchronize(stream), "sync", __FILE__, __LINE__));
    ASSERT_EQ(std::memcmp(got.data(), want.data(), kBytes), 0);
  }
}

} // namespace
