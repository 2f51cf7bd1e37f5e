//===- NcclCommunicator.h - all-reduce of device memory with NCCL -*- C++ -*-===//
//
// CUDA builds only (library moec_dist_nccl, which links NCCL; this header
// needs neither NCCL's nor CUDA's headers). Rank 0 makes NCCL's unique id and
// publishes it in the store; every rank then joins with ncclCommInitRank on
// its device. NCCL_NVLS_ENABLE is set to 0 where unset: NVLink multicast
// stays off.
//
// The communicator is NCCL's non-blocking kind, so no call can wait forever:
// set-up, each enqueue and (with `watch`) each all-reduce's completion are
// polled against the timeout together with ncclCommGetAsyncError. An error
// or a timeout aborts the communicator (ncclCommAbort), which ends a dead
// peer's collective on this rank too, and is a Status with NCCL's message.
// Captured into a CUDA graph, an all-reduce is only enqueued; synchronize()
// then waits for a replay the same way.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_DIST_NCCLCOMMUNICATOR_H
#define MOEC_RUNTIME_DIST_NCCLCOMMUNICATOR_H

#include "moec/runtime/dist/Communicator.h"
#include "moec/runtime/dist/TcpStore.h"

#include <chrono>
#include <memory>

namespace moec::rt::dist {

struct NcclOptions {
  /// The CUDA device of this rank (usually the local rank).
  int device = 0;
  /// Bounds set-up and each wait.
  std::chrono::milliseconds timeout{300000};
  /// Wait for each all-reduce to complete (polling, with the timeout) before
  /// returning, so that a dead peer is an error of that call. Off: calls
  /// return once enqueued, and synchronize() does the waiting.
  bool watch = true;
};

class NcclCommunicator final : public Communicator {
public:
  static Status create(TcpStore &store, const NcclOptions &options,
                       std::unique_ptr<NcclCommunicator> &out);
  ~NcclCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  /// Device memory; `stream` is the cudaStream_t to run on (null: the default stream).
  Status allReduceSum(float *data, size_t count, void *stream) override;
  Status allReduceSumBF16(uint16_t *data, size_t count, void *stream) override;
  /// Waits, with the timeout, for the work enqueued on `stream`, checking
  /// NCCL's asynchronous errors; aborts the communicator on either failing.
  Status synchronize(void *stream);

  struct State;

private:
  NcclCommunicator() = default;
  Status allReduce(void *data, size_t count, int dtype, void *stream);

  std::unique_ptr<State> state_;
  int rank_ = 0, size_ = 1;
};

} // namespace moec::rt::dist

#endif // MOEC_RUNTIME_DIST_NCCLCOMMUNICATOR_H
