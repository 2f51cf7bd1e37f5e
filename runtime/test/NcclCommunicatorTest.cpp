//===- NcclCommunicatorTest.cpp - NCCL all-reduce and its failures (GPU) ---===//
//
// Ranks are threads of this process, one device each (NCCL allows that).
// With one GPU: a one-rank job, and a two-rank job whose second rank never
// comes (set-up must fail within the timeout, not hang). With two or more:
// sums of random data against the serial sum, and a rank that skips a call.
//
//===----------------------------------------------------------------------===//

#include "CudaTestUtil.h"
#include "DistTestUtil.h"
#include "moec/runtime/dist/CommunicatorABI.h"
#include "moec/runtime/dist/NcclCommunicator.h"

#include <cstring>

namespace moec::rt::test {
namespace {

using dist::NcclCommunicator;
using dist::NcclOptions;
using dist::TcpStore;

Status createOn(TcpStore &store, int device, milliseconds timeout,
                std::unique_ptr<NcclCommunicator> &out) {
  NcclOptions options;
  options.device = device;
  options.timeout = timeout;
  return NcclCommunicator::create(store, options, out);
}

TEST(NcclCommunicator, OneRankLeavesTheDataAsItIs) {
  TestServer server;
  auto statuses = runThreads(server.port, 1, milliseconds(30000), [](TcpStore &store) {
    std::unique_ptr<NcclCommunicator> comm;
    MOEC_RETURN_IF_ERROR(createOn(store, 0, milliseconds(30000), comm));
    std::mt19937 rng(1);
    std::vector<float> host = randomVector(4099, rng);
    DeviceBuffer data = upload(host);
    cudaStream_t stream = nullptr;
    MOEC_CUDA_TRY(cudaStreamCreate(&stream));
    MOEC_RETURN_IF_ERROR(comm->allReduceSum(data.dataAs<float>(), host.size(), stream));
    MOEC_RETURN_IF_ERROR(comm->synchronize(stream));
    if (download<float>(data, host.size()) != host)
      return Status::error("one rank's sum differs from its input");
    // Through the C struct, bf16, on the default stream.
    moec_communicator abi{};
    dist::fillCommunicatorABI(*comm, abi);
    std::vector<uint16_t> half(33, 0x3f80); // 1.0
    DeviceBuffer halfData = upload(half);
    char error[512] = "";
    if (abi.all_reduce_sum_bf16(abi.context, halfData.dataAs<uint16_t>(), half.size(), nullptr,
                                error, sizeof(error)) != 0)
      return Status::error(std::string("bf16 through the C struct: ") + error);
    if (download<uint16_t>(halfData, half.size()) != half)
      return Status::error("bf16 differs");
    MOEC_CUDA_TRY(cudaStreamDestroy(stream));
    return Status::ok();
  });
  EXPECT_TRUE(statuses[0].isOk()) << statuses[0].message();
  const char *nvls = std::getenv("NCCL_NVLS_ENABLE");
  EXPECT_TRUE(nvls && std::string(nvls) == "0");
}

// As a CUDA model runs it: the all-reduce captured into a CUDA graph on the
// model's stream after a copy, the graph launched, and the run's end waited
// for through the C struct's wait (the copy shows the graph ran).
TEST(NcclCommunicator, OneRankInsideACudaGraph) {
  TestServer server;
  auto statuses = runThreads(server.port, 1, milliseconds(30000), [](TcpStore &store) {
    std::unique_ptr<NcclCommunicator> comm;
    MOEC_RETURN_IF_ERROR(createOn(store, 0, milliseconds(30000), comm));
    moec_communicator abi{};
    dist::fillCommunicatorABI(*comm, abi);
    std::mt19937 rng(2);
    std::vector<float> host = randomVector(1031, rng);
    DeviceBuffer source = upload(host);
    DeviceBuffer data = upload(std::vector<float>(host.size(), -1.0f));
    cudaStream_t stream = nullptr;
    MOEC_CUDA_TRY(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    MOEC_CUDA_TRY(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed));
    MOEC_CUDA_TRY(cudaMemcpyAsync(data.dataAs<float>(), source.dataAs<float>(),
                                  sizeof(float) * host.size(), cudaMemcpyDeviceToDevice, stream));
    char error[512] = "";
    int reduced = abi.all_reduce_sum_f32(abi.context, data.dataAs<float>(), host.size(),
                                         static_cast<void *>(stream), error, sizeof(error));
    cudaGraph_t graph = nullptr;
    MOEC_CUDA_TRY(cudaStreamEndCapture(stream, &graph));
    if (reduced != 0)
      return Status::error(std::string("captured all-reduce: ") + error);
    cudaGraphExec_t exec = nullptr;
    MOEC_CUDA_TRY(cudaGraphInstantiate(&exec, graph, 0));
    for (int replay = 0; replay < 3; ++replay)
      MOEC_CUDA_TRY(cudaGraphLaunch(exec, stream));
    if (abi.wait(abi.context, static_cast<void *>(stream), error, sizeof(error)) != 0)
      return Status::error(std::string("wait: ") + error);
    if (download<float>(data, host.size()) != host)
      return Status::error("the graph's result differs from its input");
    MOEC_CUDA_TRY(cudaGraphExecDestroy(exec));
    MOEC_CUDA_TRY(cudaGraphDestroy(graph));
    MOEC_CUDA_TRY(cudaStreamDestroy(stream));
    return Status::ok();
  });
  EXPECT_TRUE(statuses[0].isOk()) << statuses[0].message();
}

TEST(NcclCommunicator, ARankThatNeverComesFailsSetUpInTime) {
  TestServer server;
  auto start = Clock::now();
  auto statuses = runThreads(server.port, 2, {0}, milliseconds(3000), [](TcpStore &store) {
    std::unique_ptr<NcclCommunicator> comm;
    return createOn(store, 0, milliseconds(3000), comm);
  });
  ASSERT_FALSE(statuses[0].isOk());
  EXPECT_NE(statuses[0].message().find("NCCL communicator setup (rank 0 of 2"), std::string::npos)
      << statuses[0].message();
  EXPECT_LT(elapsedMs(start), 3000 + 10000) << "ncclCommAbort took long";
  std::printf("  the error: %s\n", statuses[0].message().c_str());
}

TEST(NcclCommunicator, SumsAcrossDevices) {
  int devices = cudaDeviceCountOrZero();
  if (devices < 2)
    GTEST_SKIP() << "needs two GPUs";
  int n = std::min(devices, 4);
  const size_t count = (1u << 20) + 3;
  auto input = [&](int rank) {
    std::mt19937 rng(static_cast<uint32_t>(rank + 11));
    return randomVector(count, rng);
  };
  TestServer server;
  auto statuses = runThreads(server.port, n, milliseconds(60000), [&](TcpStore &store) {
    std::unique_ptr<NcclCommunicator> comm;
    MOEC_RETURN_IF_ERROR(createOn(store, store.rank(), milliseconds(60000), comm));
    MOEC_CUDA_TRY(cudaSetDevice(store.rank()));
    DeviceBuffer data = upload(input(store.rank()));
    MOEC_RETURN_IF_ERROR(comm->allReduceSum(data.dataAs<float>(), count, nullptr));
    std::vector<float> got = download<float>(data, count);
    // NCCL's order of summation is its own: compare with a float64 sum.
    std::vector<std::vector<float>> inputs;
    for (int r = 0; r < n; ++r)
      inputs.push_back(input(r));
    for (size_t i = 0; i < count; ++i) {
      double sum = 0, magnitude = 0;
      for (int r = 0; r < n; ++r) {
        sum += inputs[r][i];
        magnitude += std::fabs(inputs[r][i]);
      }
      if (std::fabs(got[i] - sum) > 1e-6 * magnitude + 1e-30)
        return Status::error("element " + std::to_string(i) + ": " + std::to_string(got[i]) +
                             " vs " + std::to_string(sum));
    }
    return Status::ok();
  });
  for (const Status &s : statuses)
    EXPECT_TRUE(s.isOk()) << s.message();
}

TEST(NcclCommunicator, ARankThatSkipsACallIsAnErrorNotAHang) {
  if (cudaDeviceCountOrZero() < 2)
    GTEST_SKIP() << "needs two GPUs";
  TestServer server;
  auto start = Clock::now();
  auto statuses = runThreads(server.port, 2, milliseconds(30000), [&](TcpStore &store) {
    std::unique_ptr<NcclCommunicator> comm;
    MOEC_RETURN_IF_ERROR(createOn(store, store.rank(), milliseconds(3000), comm));
    MOEC_CUDA_TRY(cudaSetDevice(store.rank()));
    DeviceBuffer data = upload(std::vector<float>(1024, 1.0f));
    if (store.rank() == 1)
      return Status::ok(); // leaves (destroys its communicator) without the call
    return comm->allReduceSum(data.dataAs<float>(), 1024, nullptr);
  });
  ASSERT_FALSE(statuses[0].isOk());
  EXPECT_NE(statuses[0].message().find("NCCL all-reduce #0"), std::string::npos)
      << statuses[0].message();
  EXPECT_LT(elapsedMs(start), 3000 + 15000);
  std::printf("  the error: %s\n", statuses[0].message().c_str());
}

} // namespace
} // namespace moec::rt::test
