//===- GroupedMatmulCutlass.h - prefill grouped matmul on wgmma -*- C++ -*-===//
//
// Internal to the CUDA runtime: groupedMatmulBF16 (MoEKernels.h) hands its
// prefill shapes here when the runtime was built with CUTLASS
// (MOEC_HAVE_CUTLASS). Same contract as groupedMatmulBF16.
//
//===----------------------------------------------------------------------===//
#ifndef MOEC_RUNTIME_SRC_CUDA_GROUPEDMATMULCUTLASS_H
#define MOEC_RUNTIME_SRC_CUDA_GROUPEDMATMULCUTLASS_H

#include "moec/runtime/Status.h"
#include "moec/runtime/cpu/MoEKernels.h"

#include <cuda_runtime_api.h>

#include <cstdint>

namespace moec::rt::cuda::detail {

/// Whether the kernel takes K and N (16-byte rows of bf16 operands and f32 output).
bool groupedMatmulCutlassSupports(int64_t k, int64_t n);

/// Rows in f32 (`lhs`, rounded here) or bf16 (`lhsBF16`), results out in f32
/// (`out`) or bf16 (`outBF16`): one of each pair is null.
Status groupedMatmulCutlass(const float *lhs, const uint16_t *lhsBF16, int64_t rows, int64_t k,
                            const uint16_t *weights, int64_t experts, int64_t n,
                            const int32_t *offsets, const float *bias,
                            const cpu::Epilogue &epilogue, float *out, uint16_t *outBF16,
                            cudaStream_t stream);

} // namespace moec::rt::cuda::detail

#endif // MOEC_RUNTIME_SRC_CUDA_GROUPEDMATMULCUTLASS_H
