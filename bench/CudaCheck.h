//===- CudaCheck.h - the benchmarks' CUDA error check -----------*- C++ -*-===//
//
// A benchmark has nothing to recover: a failed CUDA call (or runtime call)
// prints where and why, and the program exits 1.
//
//===----------------------------------------------------------------------===//
#ifndef MOEC_BENCH_CUDACHECK_H
#define MOEC_BENCH_CUDACHECK_H

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>

#define CHECK_CUDA(expr)                                                                           \
  do {                                                                                             \
    cudaError_t e_ = (expr);                                                                       \
    if (e_ != cudaSuccess) {                                                                       \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(e_));  \
      std::exit(1);                                                                                \
    }                                                                                              \
  } while (0)

/// A failed runtime call (its moec::rt::Status) prints what and why, and the
/// program exits 1.
template <class Status> void require(const Status &status, const char *what) {
  if (!status) {
    std::fprintf(stderr, "%s: %s\n", what, status.message().c_str());
    std::exit(1);
  }
}

#endif // MOEC_BENCH_CUDACHECK_H
