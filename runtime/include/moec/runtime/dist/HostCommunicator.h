//===- HostCommunicator.h - all-reduce of host memory over TCP --*- C++ -*-===//
//
// N processes (or N threads of one process, for tests) summing host buffers
// over a full mesh of TCP connections, set up through the store: each rank
// publishes the address it listens on, connects to the ranks below it and
// accepts the ranks above it.
//
// The sum has one fixed order: data of rank 0 + rank 1 + ... + rank N-1, in
// float, left to right, so every rank gets bitwise the same result, equal to
// a serial sum in rank order. The buffer is cut into N chunks; rank r
// receives chunk r from every rank, sums it in that order and sends the sum
// back to all (reduce-scatter, then all-gather). bf16 is summed in float in
// the same order and rounded to bf16 once, at the end.
//
// What it is for: CPU artifacts split across processes, and tests of
// everything around the collective (rendezvous, handshake, weight slicing,
// error paths) on machines without GPUs. Every transfer has a deadline; a
// peer that closes, dies or stalls is an error on every rank, never a hang.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_DIST_HOSTCOMMUNICATOR_H
#define MOEC_RUNTIME_DIST_HOSTCOMMUNICATOR_H

#include "moec/runtime/dist/Communicator.h"
#include "moec/runtime/dist/TcpStore.h"

#include <chrono>
#include <memory>
#include <string>

namespace moec::rt::dist {

class HostCommunicator final : public Communicator {
public:
  /// Connects this rank (store.rank() of store.worldSize()) to all others.
  /// `timeout` bounds the setup and each later all-reduce.
  static Status create(TcpStore &store, std::chrono::milliseconds timeout,
                       std::unique_ptr<HostCommunicator> &out);
  ~HostCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  /// Host memory only: `stream` must be null.
  Status allReduceSum(float *data, size_t count, void *stream) override;
  Status allReduceSumBF16(uint16_t *data, size_t count, void *stream) override;

  struct Peers;

private:
  HostCommunicator() = default;
  template <typename T> Status allReduce(T *data, size_t count, void *stream);

  std::unique_ptr<Peers> peers_;
  int rank_ = 0, size_ = 1;
  std::chrono::milliseconds timeout_{0};
  uint64_t calls_ = 0;
  std::string broken_; // the first error; "" while healthy
};

} // namespace moec::rt::dist

#endif // MOEC_RUNTIME_DIST_HOSTCOMMUNICATOR_H
