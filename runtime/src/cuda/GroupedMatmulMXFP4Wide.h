//===- GroupedMatmulMXFP4Wide.h - MXFP4 experts through the bf16 GEMM -*- C++ -*-===//
//
// Internal to the CUDA runtime: groupedMatmulMXFP4's DequantWgmma tile
// (Tuning.h), which GroupedMatmulMXFP4.cu dispatches to. Same contract as
// groupedMatmulMXFP4 (MoEKernels.h); results in f32 (`out`) or bf16
// (`outBF16`), one of them null.
//
//===----------------------------------------------------------------------===//
#ifndef MOEC_RUNTIME_SRC_CUDA_GROUPEDMATMULMXFP4WIDE_H
#define MOEC_RUNTIME_SRC_CUDA_GROUPEDMATMULMXFP4WIDE_H

#include "moec/runtime/KernelParams.h"
#include "moec/runtime/Status.h"

#include <cuda_runtime_api.h>

#include <cstdint>

namespace moec::rt::cuda::detail {

/// Rows f32 or bf16 (Lhs: float or cuda::BF16).
template <typename Lhs>
Status groupedMatmulMXFP4Wide(const Lhs *lhs, int64_t slots, int64_t k, const uint8_t *weights,
                              const uint8_t *scales, int64_t experts, int64_t n,
                              const int32_t *offsets, const float *bias,
                              const cpu::Epilogue &epilogue, float *out, uint16_t *outBF16,
                              cudaStream_t stream);

} // namespace moec::rt::cuda::detail

#endif // MOEC_RUNTIME_SRC_CUDA_GROUPEDMATMULMXFP4WIDE_H
