//===- InvertPermutation.h - the sort's permutation, token-major ----------===//
//
// The sort's permutation says, for each slot, which (token, k) pair fills it.
// Kernels that walk tokens instead (combine, and permute once the hidden state
// outgrows L2) need the inverse: slotOf[token * topK + k], or -1 for the pairs
// that went past the valid count (sentinels: never computed, never read).
//
//===----------------------------------------------------------------------===//
#ifndef MOEC_RUNTIME_SRC_CUDA_INVERTPERMUTATION_H
#define MOEC_RUNTIME_SRC_CUDA_INVERTPERMUTATION_H

#include "StreamScratch.h"
#include "moec/runtime/Status.h"

#include <cuda_runtime_api.h>

#include <cstdint>

namespace moec::rt::cuda::detail {

/// From this many slots on, permute (f32, bf16, and fused with quantisation)
/// goes token-major: one read of each hidden row instead of top-k, at the price
/// of inverting the permutation first (two launches, which decode cannot afford).
inline constexpr int64_t kPermuteByTokenMinSlots = 4096;

/// slotOf[permutation[r]] = r for r < *numValid, -1 for every other entry of
/// slotOf[0, slots); on `stream`.
Status invertPermutation(const int32_t *permutation, int64_t slots, const int32_t *numValid,
                         int32_t *slotOf, cudaStream_t stream);

/// The token-major passes' slotOf: `rowOfSlot` where the caller has the sort's
/// inverse (sortByExpert), else the permutation inverted into `scratch`.
Status inversePermutation(const int32_t *rowOfSlot, const int32_t *permutation, int64_t slots,
                          const int32_t *numValid, StreamScratch &scratch, cudaStream_t stream,
                          const int32_t *&slotOf);

} // namespace moec::rt::cuda::detail

#endif // MOEC_RUNTIME_SRC_CUDA_INVERTPERMUTATION_H
