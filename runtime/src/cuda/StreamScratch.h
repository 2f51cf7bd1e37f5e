//===- StreamScratch.h - per-call device scratch, stream-ordered -*- C++ -*-===//
//
// Kernels that need temporary device memory the generated code did not plan
// (CUTLASS's operands and arguments, split-K partial sums) take it from the
// stream-ordered allocator for the duration of one call. Inside a CUDA graph
// capture that becomes graph memory; eagerly, the device's default pool.
//
//===----------------------------------------------------------------------===//
#ifndef MOEC_RUNTIME_SRC_CUDA_STREAMSCRATCH_H
#define MOEC_RUNTIME_SRC_CUDA_STREAMSCRATCH_H

#include "moec/runtime/Cuda.h"
#include "moec/runtime/Status.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace moec::rt::cuda::detail {

/// Stream-ordered scratch, returned to the pool at the end of the call's work.
/// The device's default pool keeps what it was given (release threshold: no
/// limit) instead of handing it back to the driver at every synchronisation, so
/// eager calls after the first allocate nothing (prefill scratch is gigabytes).
class StreamScratch {
public:
  explicit StreamScratch(cudaStream_t stream) : stream_(stream) {
    static thread_local int configured = -1;
    int device = 0;
    cudaMemPool_t pool = nullptr;
    if (cudaGetDevice(&device) == cudaSuccess && device != configured &&
        cudaDeviceGetDefaultMemPool(&pool, device) == cudaSuccess) {
      uint64_t keepAll = UINT64_MAX;
      cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keepAll);
      configured = device;
    }
  }
  ~StreamScratch() {
    for (void *p : blocks_)
      cudaFreeAsync(p, stream_);
  }
  template <typename T> Status allocate(size_t count, T *&out) {
    void *p = nullptr;
    MOEC_CUDA_TRY(cudaMallocAsync(&p, std::max<size_t>(count * sizeof(T), 16), stream_));
    blocks_.push_back(p);
    out = static_cast<T *>(p);
    return Status::ok();
  }

private:
  cudaStream_t stream_;
  std::vector<void *> blocks_;
};

} // namespace moec::rt::cuda::detail

#endif // MOEC_RUNTIME_SRC_CUDA_STREAMSCRATCH_H
