//===- Communicator.h - collective operations across ranks ------*- C++ -*-===//
//
// What expert parallelism needs of the ranks of a job: each rank's partial
// result summed into every rank's buffer, in place. Implementations:
// HostCommunicator (host memory, TCP; tests and CPU artifacts) and
// NcclCommunicator (device memory, NCCL; CUDA builds). Errors are Status
// values naming the operation, the peer and the reason; a communicator that
// failed once stays failed (its peers may be out of step with it).
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_DIST_COMMUNICATOR_H
#define MOEC_RUNTIME_DIST_COMMUNICATOR_H

#include "moec/runtime/Status.h"

#include <cstddef>
#include <cstdint>

namespace moec::rt::dist {

class Communicator {
public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  /// data[i] = the sum over ranks of data[i], on every rank, in place. `stream`
  /// is the cudaStream_t (the handle itself) that orders the operation for
  /// device memory, null for host memory (each implementation says which it
  /// takes).
  virtual Status allReduceSum(float *data, size_t count, void *stream) = 0;
  /// The same for bf16 values (their bits in uint16_t).
  virtual Status allReduceSumBF16(uint16_t *data, size_t count, void *stream) = 0;
  /// Waits for the work queued on `stream` (device memory), failing within
  /// the timeout when a peer died inside a collective. Host memory's
  /// all-reduces are done when they return: nothing to wait for.
  virtual Status synchronize(void *stream) {
    (void)stream;
    return Status::ok();
  }
};

} // namespace moec::rt::dist

#endif // MOEC_RUNTIME_DIST_COMMUNICATOR_H
