//===- NcclCommunicator.cpp - all-reduce of device memory with NCCL --------===//

#include "moec/runtime/dist/NcclCommunicator.h"

#include "Socket.h"

#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include <cuda_runtime_api.h>
#include <nccl.h>

namespace moec::rt::dist {

struct NcclCommunicator::State {
  ncclComm_t comm = nullptr;
  cudaEvent_t done = nullptr;
  NcclOptions options;
  std::string broken; // the first error; "" while healthy
  uint64_t calls = 0;
};

namespace {

std::string ncclText(ncclResult_t result, ncclComm_t comm) {
  std::string text = ncclGetErrorString(result);
  const char *last = comm ? ncclGetLastError(comm) : ncclGetLastError(nullptr);
  if (last && *last)
    text += std::string(" (") + last + ")";
  return text;
}

Status cudaCheck(cudaError_t error, const char *what) {
  if (error == cudaSuccess)
    return Status::ok();
  return Status::error(std::string(what) + " failed: " + cudaGetErrorName(error) + ": " +
                       cudaGetErrorString(error));
}

/// Polls the communicator until it leaves ncclInProgress (and, if `event`,
/// until the event completes), or an error, or the deadline.
Status poll(ncclComm_t comm, cudaEvent_t event, const Deadline &deadline,
            std::chrono::milliseconds timeout, const char *what) {
  for (unsigned spins = 0;; ++spins) {
    ncclResult_t state = ncclSuccess;
    ncclResult_t rc = ncclCommGetAsyncError(comm, &state);
    if (rc != ncclSuccess)
      return Status::error(std::string("ncclCommGetAsyncError failed: ") + ncclText(rc, comm));
    if (state != ncclSuccess && state != ncclInProgress)
      return Status::error(std::string(what) + ": NCCL error: " + ncclText(state, comm));
    bool finished = state == ncclSuccess;
    if (finished && event) {
      cudaError_t query = cudaEventQuery(event);
      if (query != cudaSuccess && query != cudaErrorNotReady)
        return cudaCheck(query, "cudaEventQuery");
      finished = query == cudaSuccess;
    }
    if (finished)
      return Status::ok();
    if (deadline.expired())
      return Status::error(std::string(what) + ": not complete after " + formatSeconds(timeout) +
                           " (a peer stalled or died)");
    // Spin briefly (all-reduces of a decode step take microseconds), then yield.
    if (spins > 1000)
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

} // namespace

/// A failed call leaves the ranks out of step: the communicator is aborted
/// (which also ends a collective that waits for a dead peer) and stays failed.
static Status abortOnError(NcclCommunicator::State &state, Status status,
                           const std::string &where) {
  if (status.isOk())
    return status;
  state.broken = status.message();
  (void)ncclCommAbort(state.comm);
  state.comm = nullptr;
  return status.withContext(where);
}

Status NcclCommunicator::create(TcpStore &store, const NcclOptions &options,
                                std::unique_ptr<NcclCommunicator> &out) {
  const int rank = store.rank(), size = store.worldSize();
  std::string where = "NCCL communicator setup (rank " + std::to_string(rank) + " of " +
                      std::to_string(size) + ", device " + std::to_string(options.device) + ")";
  std::unique_ptr<NcclCommunicator> result(new NcclCommunicator());
  result->rank_ = rank;
  result->size_ = size;
  result->state_ = std::make_unique<State>();
  State &state = *result->state_;
  state.options = options;
  std::string prefix = store.nextPrefix("nccl");

  auto setUp = [&]() -> Status {
    Deadline deadline(options.timeout);
    // NVLink multicast (NVLS) stays off unless the user set it.
    setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/0);
    MOEC_RETURN_IF_ERROR(cudaCheck(cudaSetDevice(options.device), "cudaSetDevice"));
    MOEC_RETURN_IF_ERROR(cudaCheck(cudaEventCreateWithFlags(&state.done, cudaEventDisableTiming),
                                   "cudaEventCreateWithFlags"));
    ncclUniqueId id;
    if (rank == 0) {
      ncclResult_t rc = ncclGetUniqueId(&id);
      if (rc != ncclSuccess)
        return Status::error("ncclGetUniqueId failed: " + ncclText(rc, nullptr));
      MOEC_RETURN_IF_ERROR(
          store.set(prefix + "unique-id", std::string(reinterpret_cast<char *>(&id), sizeof(id))));
    } else {
      std::string bytes;
      MOEC_RETURN_IF_ERROR(store.get(prefix + "unique-id", bytes,
                                     std::chrono::milliseconds(deadline.remainingMs())));
      if (bytes.size() != sizeof(id))
        return Status::error("NCCL's unique id in the store has " + std::to_string(bytes.size()) +
                             " bytes, not " + std::to_string(sizeof(id)));
      std::memcpy(&id, bytes.data(), sizeof(id));
    }
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclResult_t rc = ncclCommInitRankConfig(&state.comm, size, id, rank, &config);
    if (rc != ncclSuccess && rc != ncclInProgress)
      return Status::error("ncclCommInitRankConfig failed: " + ncclText(rc, state.comm));
    return poll(state.comm, nullptr, deadline, options.timeout, "ncclCommInitRankConfig");
  };
  Status status = setUp();
  if (!status.isOk()) {
    state.broken = status.message();
    status = status.withContext(where);
    store.abort(status.message());
    return status; // the destructor aborts what was made
  }
  out = std::move(result);
  return Status::ok();
}

NcclCommunicator::~NcclCommunicator() {
  if (!state_)
    return;
  State &state = *state_;
  if (state.comm) {
    bool clean = false;
    if (state.broken.empty() && ncclCommFinalize(state.comm) == ncclSuccess)
      clean = poll(state.comm, nullptr, Deadline(state.options.timeout), state.options.timeout,
                   "ncclCommFinalize")
                  .isOk();
    if (clean)
      (void)ncclCommDestroy(state.comm);
    else
      (void)ncclCommAbort(state.comm);
  }
  if (state.done)
    (void)cudaEventDestroy(state.done);
}

Status NcclCommunicator::allReduce(void *data, size_t count, int dtype, void *stream) {
  State &state = *state_;
  uint64_t call = state.calls++;
  std::string where = "NCCL all-reduce #" + std::to_string(call) + " of " +
                      std::to_string(count) + (dtype == 0 ? " f32" : " bf16") + " values (rank " +
                      std::to_string(rank_) + " of " + std::to_string(size_) + ")";
  if (!state.broken.empty())
    return Status::error(where + ": the communicator failed earlier: " + state.broken);
  auto s = static_cast<cudaStream_t>(stream);
  auto run = [&]() -> Status {
    Deadline deadline(state.options.timeout);
    ncclResult_t rc = ncclAllReduce(data, data, count, dtype == 0 ? ncclFloat : ncclBfloat16,
                                    ncclSum, state.comm, s);
    if (rc != ncclSuccess && rc != ncclInProgress)
      return Status::error("ncclAllReduce failed: " + ncclText(rc, state.comm));
    MOEC_RETURN_IF_ERROR(poll(state.comm, nullptr, deadline, state.options.timeout,
                              "ncclAllReduce (enqueue)"));
    if (!state.options.watch)
      return Status::ok();
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    MOEC_RETURN_IF_ERROR(cudaCheck(cudaStreamIsCapturing(s, &capture), "cudaStreamIsCapturing"));
    if (capture != cudaStreamCaptureStatusNone)
      return Status::ok(); // a graph's node: synchronize() watches its replay
    MOEC_RETURN_IF_ERROR(cudaCheck(cudaEventRecord(state.done, s), "cudaEventRecord"));
    return poll(state.comm, state.done, deadline, state.options.timeout, "ncclAllReduce");
  };
  return abortOnError(state, run(), where);
}

Status NcclCommunicator::allReduceSum(float *data, size_t count, void *stream) {
  return allReduce(data, count, 0, stream);
}

Status NcclCommunicator::allReduceSumBF16(uint16_t *data, size_t count, void *stream) {
  return allReduce(data, count, 1, stream);
}

Status NcclCommunicator::synchronize(void *stream) {
  State &state = *state_;
  std::string where = "NCCL synchronize (rank " + std::to_string(rank_) + ")";
  if (!state.broken.empty())
    return Status::error(where + ": the communicator failed earlier: " + state.broken);
  auto s = static_cast<cudaStream_t>(stream);
  Status status = cudaCheck(cudaEventRecord(state.done, s), "cudaEventRecord");
  if (status.isOk())
    status = poll(state.comm, state.done, Deadline(state.options.timeout), state.options.timeout,
                  "the stream's work");
  return abortOnError(state, status, where);
}

} // namespace moec::rt::dist
