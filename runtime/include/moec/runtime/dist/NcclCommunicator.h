//===- NcclCommunicator.h - all-reduce of device memory with NCCL -*- C++ -*-===//
//
// Part of moec_dist, which links neither NCCL nor CUDA: NCCL (libnccl.so.2)
// and the CUDA driver (libcuda.so.1) are opened at run time. NCCL is
// MOEC_NCCL_LIBRARY when set, else the loader's libnccl.so.2 (a copy already
// loaded, say by torch, too), else pip's nvidia-nccl package beside the
// Python environments in sight (VIRTUAL_ENV, CONDA_PREFIX, each python3 on
// PATH), else a CUDA toolkit's; none is an error saying where it looked. A
// runtime built without nccl.h refuses to create one. Rank 0 makes NCCL's
// unique id and publishes it in the store; every rank then joins with
// ncclCommInitRank on its device, and one eager all-reduce of one value
// settles NCCL's connections before any CUDA graph captures a collective.
// NCCL_NVLS_ENABLE is set to 0 where unset: NVLink multicast stays off.
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
#include <string>

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
  /// Device memory; `stream` is the cudaStream_t (its value) to run on (null:
  /// the legacy default stream).
  Status allReduceSum(float *data, size_t count, void *stream) override;
  Status allReduceSumBF16(uint16_t *data, size_t count, void *stream) override;
  /// Waits, with the timeout, for the work enqueued on `stream`, checking
  /// NCCL's asynchronous errors; aborts the communicator on either failing.
  Status synchronize(void *stream) override;
  /// The NCCL library opened (MOEC_NCCL_LIBRARY's value, libnccl.so.2 or the path found).
  std::string library() const;

  struct State;

private:
  NcclCommunicator() = default;
  Status allReduce(void *data, size_t count, int dtype, void *stream);

  std::unique_ptr<State> state_;
  int rank_ = 0, size_ = 1;
};

} // namespace moec::rt::dist

#endif // MOEC_RUNTIME_DIST_NCCLCOMMUNICATOR_H
