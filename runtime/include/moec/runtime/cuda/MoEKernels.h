//===- MoEKernels.h - CUDA kernels for the lowered moe ops -----*- C++ -*-===//
//
// The device twins of cpu/MoEKernels.h, with the same semantics
// (docs/dialect.md): f32 storage and accumulation, row-major tensors. Every
// size that depends on the routing (the valid row count, the offsets) stays in
// device memory and is read by the kernels themselves, so the whole chain from
// route to combine runs without a host synchronisation and can be captured in a
// CUDA graph. This first version is written for correctness; the tuned
// decode/prefill grouped GEMMs come with the performance work.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_CUDA_MOEKERNELS_H
#define MOEC_RUNTIME_CUDA_MOEKERNELS_H

#include "moec/runtime/Status.h"
#include "moec/runtime/cpu/MoEKernels.h"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace moec::rt::cuda {

using cpu::Epilogue;
using cpu::Routing;

/// Device workspace moe.sort needs for `slots` slots (CUB's radix sort).
Status sortWorkspaceBytes(int64_t slots, size_t &bytes);

/// moe.linear: y[M, N'] = epilogue(x[M, K] · w[N, K]ᵀ + bias[N]); M is known on
/// the host (the token count), so no offsets are read.
Status linear(const float *x, int64_t m, int64_t k, const float *w, int64_t n, const float *bias,
              const Epilogue &epilogue, float *y, cudaStream_t stream);

/// i64 expert ids as i32 for sortByExpert; ids outside i32's range become -1
/// (a sentinel), as on the CPU.
Status narrowIds(const int64_t *ids, int64_t count, int32_t *out, cudaStream_t stream);

Status route(const float *logits, int64_t tokens, int64_t experts, const float *correctionBias,
             const Routing &routing, int32_t *ids, float *weights, cudaStream_t stream);

/// `workspace` holds sortWorkspaceBytes(slots) bytes.
Status sortByExpert(const int32_t *ids, int64_t slots, int64_t numExperts, int64_t firstExpert,
                    int32_t *permutation, int32_t *offsets, int32_t *numValid, void *workspace,
                    size_t workspaceBytes, cudaStream_t stream);

Status permute(const float *hidden, int64_t hiddenSize, const int32_t *permutation,
               const int32_t *numValid, int64_t slots, int64_t topK, float *rows,
               cudaStream_t stream);

/// Rows at or past offsets[E-1] (read on the device) are not touched.
Status groupedMatmul(const float *lhs, int64_t slots, int64_t k, const float *weights,
                     int64_t experts, int64_t n, const int32_t *offsets, const float *bias,
                     const Epilogue &epilogue, float *out, cudaStream_t stream);

/// `rowOfSlot` is a workspace of `slots` int32 (the inverse permutation).
/// moe.grouped_matmul for few rows per expert (decode): bf16 weights [E, N, K]
/// streamed once per block of up to 8 rows, f32 rows and accumulation. Blocks
/// of experts with no rows exit before reading a byte of their weights, so the
/// bytes moved are those of the touched experts only. Rows at or past
/// offsets[E-1] are not touched.
Status groupedMatmulDecodeBF16(const float *lhs, int64_t slots, int64_t k,
                               const uint16_t *weightsBF16,
                               int64_t experts, int64_t n, const int32_t *offsets,
                               const float *bias, const Epilogue &epilogue, float *out,
                               cudaStream_t stream);

Status combine(const float *rows, const int32_t *permutation, int64_t slots, int64_t hiddenSize,
               const float *weights, int64_t tokens, int64_t topK, const int32_t *numValid,
               const float *addend, const float *addendGate, int32_t *rowOfSlot, float *out,
               cudaStream_t stream);

} // namespace moec::rt::cuda

#endif // MOEC_RUNTIME_CUDA_MOEKERNELS_H
