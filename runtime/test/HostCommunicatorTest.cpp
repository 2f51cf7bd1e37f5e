//===- HostCommunicatorTest.cpp - all-reduce over TCP, and its failures ----===//

#include "DistTestUtil.h"
#include "moec/runtime/dist/CommunicatorABI.h"
#include "moec/runtime/dist/HostCommunicator.h"

#include <cmath>
#include <cstring>

extern "C" int moecSumThroughCommunicatorABI(const moec_communicator *communicator, float *data,
                                             uint64_t count, char *error, size_t error_bytes);

namespace moec::rt::test {
namespace {

using dist::HostCommunicator;
using dist::TcpStore;

/// Rank r's input of a call: normal values of mixed scales (so that the order
/// of the sum shows in its bits).
std::vector<float> input(int rank, size_t count, int call) {
  std::mt19937 rng(static_cast<uint32_t>(rank * 7919 + count * 31 + call));
  std::vector<float> v = randomVector(count, rng);
  for (size_t i = 0; i < count; i += 3)
    v[i] *= 1e4f;
  return v;
}

/// The serial sum in rank order, in float.
std::vector<float> serialSum(int worldSize, size_t count, int call) {
  std::vector<float> sum = input(0, count, call);
  for (int r = 1; r < worldSize; ++r) {
    std::vector<float> x = input(r, count, call);
    for (size_t i = 0; i < count; ++i)
      sum[i] += x[i];
  }
  return sum;
}

const std::vector<size_t> kCounts = {0, 1, 2, 7, 1023, 1u << 20};

Status sumEachCount(TcpStore &store) {
  std::unique_ptr<HostCommunicator> comm;
  MOEC_RETURN_IF_ERROR(HostCommunicator::create(store, milliseconds(10000), comm));
  if (comm->rank() != store.rank() || comm->size() != store.worldSize())
    return Status::error("rank or size differ from the store's");
  for (int call = 0; call < static_cast<int>(kCounts.size()); ++call) {
    size_t count = kCounts[call];
    std::vector<float> data = input(store.rank(), count, call);
    MOEC_RETURN_IF_ERROR(comm->allReduceSum(data.data(), count, nullptr));
    std::vector<float> expected = serialSum(store.worldSize(), count, call);
    if (count && std::memcmp(data.data(), expected.data(), count * sizeof(float)) != 0)
      return Status::error("rank " + std::to_string(store.rank()) + ": count " +
                           std::to_string(count) + " differs from the serial sum in rank order");
  }
  return Status::ok();
}

TEST(HostCommunicator, SumIsTheSerialSumInRankOrderBitwise) {
  for (int n : {1, 2, 3, 4}) {
    TestServer server;
    for (const Status &s : runThreads(server.port, n, milliseconds(10000), sumEachCount))
      EXPECT_TRUE(s.isOk()) << "world size " << n << ": " << s.message();
  }
}

TEST(HostCommunicator, SumWithProcesses) {
  TestServer server;
  for (const ProcessResult &r :
       runProcesses(server.port, 3, milliseconds(10000), milliseconds(15000), sumEachCount))
    EXPECT_TRUE(r.exited && r.code == 0) << r.message;
}

uint16_t toBF16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}
float fromBF16(uint16_t b) {
  uint32_t bits = uint32_t(b) << 16;
  float x;
  std::memcpy(&x, &bits, sizeof(x));
  return x;
}

TEST(HostCommunicator, BF16IsSummedInFloatAndRoundedOnce) {
  TestServer server;
  const size_t count = 1001;
  auto bf16Input = [&](int rank) {
    std::vector<uint16_t> v;
    for (float x : input(rank, count, 0))
      v.push_back(toBF16(x));
    return v;
  };
  auto statuses = runThreads(server.port, 3, milliseconds(10000), [&](TcpStore &store) {
    std::unique_ptr<HostCommunicator> comm;
    MOEC_RETURN_IF_ERROR(HostCommunicator::create(store, milliseconds(10000), comm));
    std::vector<uint16_t> data = bf16Input(store.rank());
    MOEC_RETURN_IF_ERROR(comm->allReduceSumBF16(data.data(), count, nullptr));
    for (size_t i = 0; i < count; ++i) {
      float sum = 0;
      for (int r = 0; r < 3; ++r)
        sum = r == 0 ? fromBF16(bf16Input(0)[i]) : sum + fromBF16(bf16Input(r)[i]);
      if (data[i] != toBF16(sum))
        return Status::error("element " + std::to_string(i) + " differs");
    }
    return Status::ok();
  });
  for (const Status &s : statuses)
    EXPECT_TRUE(s.isOk()) << s.message();
}

TEST(HostCommunicator, ARankThatNeverJoinsFailsTheOthersInTime) {
  TestServer server;
  auto start = Clock::now();
  auto statuses = runThreads(server.port, 3, {0, 1}, milliseconds(1000), [](TcpStore &store) {
    std::unique_ptr<HostCommunicator> comm;
    return HostCommunicator::create(store, milliseconds(1000), comm);
  });
  EXPECT_LT(elapsedMs(start), 2500);
  for (const Status &s : statuses) {
    ASSERT_FALSE(s.isOk());
    EXPECT_NE(s.message().find("rank(s) 2 did not connect"), std::string::npos) << s.message();
  }
}

/// Ranks 0, 1 all-reduce; rank 2 leaves once connected (`leave`), without
/// ever calling it.
Status leaveMidAllReduce(TcpStore &store, const std::function<void()> &leave) {
  std::unique_ptr<HostCommunicator> comm;
  MOEC_RETURN_IF_ERROR(HostCommunicator::create(store, milliseconds(1500), comm));
  MOEC_RETURN_IF_ERROR(store.barrier());
  if (store.rank() == 2) {
    leave();
    comm.reset();
    return Status::ok();
  }
  std::vector<float> data(1u << 16, 1.0f);
  auto start = Clock::now();
  Status status = comm->allReduceSum(data.data(), data.size(), nullptr);
  if (status.isOk())
    return Status::error("the all-reduce succeeded without rank 2");
  if (elapsedMs(start) > 1500 + 500)
    return Status::error("the error came after " + std::to_string(elapsedMs(start)) + " ms");
  // Failed once, failed for good.
  Status again = comm->allReduceSum(data.data(), data.size(), nullptr);
  if (again.isOk() || again.message().find("failed earlier") == std::string::npos)
    return Status::error("a second call after the failure: " + again.message());
  return status;
}

TEST(HostCommunicator, ARankThatLeavesMidAllReduceIsAnErrorNotAHang) {
  TestServer server;
  auto statuses = runThreads(server.port, 3, milliseconds(3000), [](TcpStore &store) {
    return leaveMidAllReduce(store, [] {});
  });
  EXPECT_TRUE(statuses[2].isOk()) << statuses[2].message();
  // Each names the rank it lost: rank 2, or the other, which failed first
  // and closed its connections so that no rank waits for its deadline.
  bool named = false;
  for (int r : {0, 1}) {
    ASSERT_FALSE(statuses[r].isOk());
    EXPECT_NE(statuses[r].message().find("host all-reduce #0"), std::string::npos)
        << statuses[r].message();
    EXPECT_NE(statuses[r].message().find("(exited or failed)"), std::string::npos)
        << statuses[r].message();
    named |= statuses[r].message().find("rank 2 ") != std::string::npos;
  }
  EXPECT_TRUE(named) << statuses[0].message();
}

TEST(HostCommunicator, AProcessKilledMidAllReduceIsAnErrorNotAHang) {
  TestServer server;
  auto results = runProcesses(server.port, 3, milliseconds(3000), milliseconds(15000),
                              [](TcpStore &store) {
                                return leaveMidAllReduce(store, [] { raise(SIGKILL); });
                              });
  ASSERT_EQ(results.size(), 3u);
  EXPECT_FALSE(results[2].exited); // killed
  bool named = false;
  for (int r : {0, 1}) {
    EXPECT_TRUE(results[r].exited && results[r].code == 1) << results[r].message;
    EXPECT_NE(results[r].message.find("(exited or failed)"), std::string::npos)
        << results[r].message;
    named |= results[r].message.find("rank 2 ") != std::string::npos;
  }
  EXPECT_TRUE(named) << results[0].message;
}

TEST(HostCommunicator, RanksThatDisagreeOnTheCountFail) {
  TestServer server;
  auto statuses = runThreads(server.port, 3, milliseconds(2000), [](TcpStore &store) {
    std::unique_ptr<HostCommunicator> comm;
    MOEC_RETURN_IF_ERROR(HostCommunicator::create(store, milliseconds(2000), comm));
    std::vector<float> data(12, 1.0f);
    return comm->allReduceSum(data.data(), store.rank() == 1 ? 10 : 12, nullptr);
  });
  bool named = false;
  for (const Status &s : statuses) {
    ASSERT_FALSE(s.isOk());
    named |= s.message().find("disagree on the call") != std::string::npos;
  }
  EXPECT_TRUE(named) << statuses[0].message();
}

TEST(HostCommunicator, TakesNoStreamAndFillsTheCStruct) {
  TestServer server;
  auto statuses = runThreads(server.port, 2, milliseconds(5000), [](TcpStore &store) {
    std::unique_ptr<HostCommunicator> comm;
    MOEC_RETURN_IF_ERROR(HostCommunicator::create(store, milliseconds(5000), comm));
    moec_communicator abi{};
    dist::fillCommunicatorABI(*comm, abi);
    if (abi.rank != store.rank() || abi.size != 2)
      return Status::error("the C struct's rank or size");
    std::vector<float> data = {1.5f, 2.0f, float(store.rank())};
    char error[256] = "poison";
    if (moecSumThroughCommunicatorABI(&abi, data.data(), data.size(), error, sizeof(error)) != 0)
      return Status::error(std::string("through the C struct: ") + error);
    if (data != std::vector<float>{3.0f, 4.0f, 1.0f})
      return Status::error("wrong sum through the C struct");
    std::vector<uint16_t> half = {toBF16(0.5f)};
    if (abi.all_reduce_sum_bf16(abi.context, half.data(), 1, nullptr, error, sizeof(error)) != 0 ||
        half[0] != toBF16(1.0f))
      return Status::error("bf16 through the C struct");
    // Host memory's all-reduces are done when they return: nothing to wait for.
    if (!abi.wait || abi.wait(abi.context, nullptr, error, sizeof(error)) != 0)
      return Status::error("the C struct's wait");
    // An error, truncated to the buffer, NUL-terminated.
    int stream = 0;
    char small[16];
    std::memset(small, 'x', sizeof(small));
    if (abi.all_reduce_sum_f32(abi.context, data.data(), 1, &stream, small, sizeof(small)) == 0)
      return Status::error("a stream was accepted");
    if (std::strlen(small) != sizeof(small) - 1)
      return Status::error("the message was not truncated and terminated");
    Status direct = comm->allReduceSum(data.data(), 1, &stream);
    if (direct.isOk() || direct.message().find("no stream") == std::string::npos)
      return Status::error("stream: " + direct.message());
    return Status::ok();
  });
  for (const Status &s : statuses)
    EXPECT_TRUE(s.isOk()) << s.message();
}

} // namespace
} // namespace moec::rt::test
