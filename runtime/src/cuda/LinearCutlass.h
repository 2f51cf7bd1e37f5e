//===- LinearCutlass.h - the f32 router on CUTLASS's 3xTF32 GEMM -*- C++ -*-===//
//
// Internal to the CUDA runtime: linear() (MoEKernels.h) hands its many-row,
// many-column, ungated shapes without an activation (prefill routers) here
// when the runtime was built with CUTLASS (MOEC_HAVE_CUTLASS).
//
//===----------------------------------------------------------------------===//
#ifndef MOEC_RUNTIME_SRC_CUDA_LINEARCUTLASS_H
#define MOEC_RUNTIME_SRC_CUDA_LINEARCUTLASS_H

#include "moec/runtime/Status.h"

#include <cuda_runtime_api.h>

#include <cstdint>

namespace moec::rt::cuda::detail {

/// Whether linearCutlass takes these operands: K and N multiples of 4 and
/// every pointer 16-byte aligned (CUTLASS's 128-bit f32 accesses).
bool linearCutlassSupports(const float *x, int64_t k, const float *w, int64_t n, const float *bias,
                           const float *y);

/// y[M, N] = x[M, K] · w[N, K]ᵀ + bias[N] (bias may be null) in 3xTF32.
Status linearCutlass(const float *x, int64_t m, int64_t k, const float *w, int64_t n,
                     const float *bias, float *y, cudaStream_t stream);

} // namespace moec::rt::cuda::detail

#endif // MOEC_RUNTIME_SRC_CUDA_LINEARCUTLASS_H
