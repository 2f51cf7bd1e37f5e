//===- LinearBF16FewRows.h - dense bf16 projections at decode -*- C++ -*-===//
//
// Internal to the CUDA runtime: linearBF16 (MoEKernels.h) hands its calls of
// up to kLinearBF16FewRowsMax rows here (LinearBF16FewRows.cu says how the
// weights are streamed); the tests and the dense GEMM bench call it directly.
//
//===----------------------------------------------------------------------===//
#ifndef MOEC_RUNTIME_SRC_CUDA_LINEARBF16FEWROWS_H
#define MOEC_RUNTIME_SRC_CUDA_LINEARBF16FEWROWS_H

#include "moec/runtime/cuda/MoEKernels.h"

#include <cstdint>

namespace moec::rt::cuda::detail {

/// linearBF16 takes the few-rows kernel up to this many rows.
inline constexpr int64_t kLinearBF16FewRowsMax = 64;
/// The most sibling projections of one launch (linearBF16FewRowsSiblings).
inline constexpr int kLinearBF16MaxSiblings = 4;

/// How the few-rows kernel cuts a [N, K] weight: blocks of kFewRowsBlockRows
/// weight rows, K in `splits` slices of `perSplit` (the last one shorter). A
/// function of K and N alone, never of the row count: a row's sums run in the
/// same order whatever else is in the step.
struct FewRowsPlan {
  int64_t rowBlocks, splits, perSplit;
};
FewRowsPlan planLinearBF16FewRows(int64_t k, int64_t n);
/// The plan of siblings whose row blocks add up to `rowBlocks`.
FewRowsPlan planLinearBF16FewRowsBlocks(int64_t k, int64_t rowBlocks);

/// linearBF16 for 1..kLinearBF16FewRowsMax rows (K a multiple of 8, x and the
/// weight 16-byte aligned): y[M, N] = epilogue(x · wᵀ + bias), bf16 products
/// of the rounded rows, f32 sums.
template <typename Lhs, typename Out>
Status linearBF16FewRows(const Lhs *x, int64_t m, int64_t k, const uint16_t *weightBF16, int64_t n,
                         const float *bias, const Epilogue &epilogue, Out *y, cudaStream_t stream);

/// `count` projections of the same rows in one launch, no epilogue: ys[s][M,
/// n[s]] = x · weightsBF16[s]ᵀ + biases[s] (biases null: none), each with the
/// bits linearBF16FewRows gives it alone at the siblings' plan.
template <typename Lhs, typename Out>
Status linearBF16FewRowsSiblings(const Lhs *x, int64_t m, int64_t k, int count,
                                 const uint16_t *const *weightsBF16, const int64_t *n,
                                 const float *const *biases, Out *const *ys, cudaStream_t stream);

} // namespace moec::rt::cuda::detail

#endif // MOEC_RUNTIME_SRC_CUDA_LINEARBF16FEWROWS_H
