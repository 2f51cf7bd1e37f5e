//===- NcclLoadTest.cpp - NCCL that cannot be opened is an error (CPU) -----===//
//
// The NCCL communicator opens libnccl.so.2 and the CUDA driver at run time;
// where either is missing, setting up is an error that says what is missing
// and where it was looked for, every rank's wait ends, and nothing crashes.
// No GPU is needed: the error comes before any device is touched. (Its own
// process: the communicator keeps the outcome of its one attempt to load.)
//
//===----------------------------------------------------------------------===//

#include "DistTestUtil.h"
#include "moec/runtime/dist/NcclCommunicator.h"

#include <cstdio>
#include <cstdlib>

namespace moec::rt::test {
namespace {

TEST(NcclCommunicatorLoad, AMissingLibraryIsAClearError) {
  ASSERT_EQ(setenv("MOEC_NCCL_LIBRARY", "/nonexistent/libnccl.so.2", 1), 0);
  TestServer server;
  auto start = Clock::now();
  auto statuses = runThreads(server.port, 2, milliseconds(20000), [](dist::TcpStore &store) {
    std::unique_ptr<dist::NcclCommunicator> comm;
    dist::NcclOptions options;
    options.timeout = milliseconds(20000);
    Status status = dist::NcclCommunicator::create(store, options, comm);
    if (status.isOk() || comm)
      return Status::error("set up without NCCL");
    return status;
  });
  EXPECT_LT(elapsedMs(start), 10000) << "a rank waited for its timeout";
#ifdef MOEC_TEST_HAVE_NCCL
  const char *expected = "cannot load NCCL from MOEC_NCCL_LIBRARY=/nonexistent/libnccl.so.2";
#else
  const char *expected = "built without NCCL's header";
#endif
  for (const Status &status : statuses) {
    ASSERT_FALSE(status.isOk());
    EXPECT_NE(status.message().find(expected), std::string::npos) << status.message();
  }
  std::printf("  the error: %s\n", statuses[0].message().c_str());
}

} // namespace
} // namespace moec::rt::test
