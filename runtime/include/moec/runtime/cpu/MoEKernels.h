//===- MoEKernels.h - CPU kernels for the lowered moe ops ------*- C++ -*-===//
//
// One function per op of the grouped phase (docs/dialect.md states each op's
// semantics; these follow it rule by rule): f32 storage, f32 accumulation,
// row-major tensors, every size passed explicitly. Rows at or past num_valid
// are never read or written (the sentinel tail), and a token whose slots are
// all sentinels gets an exact zero row from the combine. The kernels split work
// over a ThreadPool; results do not depend on the number of threads.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_CPU_MOEKERNELS_H
#define MOEC_RUNTIME_CPU_MOEKERNELS_H

#include "moec/runtime/KernelParams.h"
#include "moec/runtime/cpu/ThreadPool.h"

#include <cmath>
#include <cstdint>
#include <limits>

namespace moec::rt::cpu {

/// moe.linear: y[M, N'] = epilogue(x[M, K] · w[N, K]ᵀ + bias[N]).
void linear(ThreadPool &pool, const float *x, int64_t m, int64_t k, const float *w, int64_t n,
            const float *bias, const Epilogue &epilogue, float *y);

/// moe.route: ids[T, K] and weights[T, K] from logits[T, E].
void route(ThreadPool &pool, const float *logits, int64_t tokens, int64_t experts,
           const float *correctionBias, const Routing &routing, int32_t *ids, float *weights);

/// moe.sort: a stable sort of the T·K slots by local id; ids outside
/// [firstExpert, firstExpert + numExperts) become the sentinel numExperts.
/// offsets are inclusive ends; *numValid = offsets[numExperts - 1].
void sortByExpert(const int32_t *ids, int64_t slots, int64_t numExperts, int64_t firstExpert,
                  int32_t *permutation, int32_t *offsets, int32_t *numValid);

/// moe.permute: rows[r] = hidden[permutation[r] / topK] for r < numValid.
void permute(ThreadPool &pool, const float *hidden, int64_t hiddenSize,
             const int32_t *permutation, int64_t numValid, int64_t topK, float *rows);

/// moe.grouped_matmul: out[r] = epilogue(lhs[r] · w[e]ᵀ + bias[e]) for the rows
/// r of each expert e; rows at or past offsets[E-1] are not touched.
void groupedMatmul(ThreadPool &pool, const float *lhs, int64_t k, const float *weights,
                   int64_t experts, int64_t n, const int32_t *offsets, const float *bias,
                   const Epilogue &epilogue, float *out);

/// moe.quantize: per row and 128-column group, scale = f32(max(amax / 448,
/// 1e-12)) and q = e4m3(x / scale), nearest even, saturating (Float8.h); NaN
/// in a group makes its scale NaN. Rows at or past `rows` are not read.
void quantizeE4M3(ThreadPool &pool, const float *x, int64_t rows, int64_t k, uint8_t *q,
                  float *scales);

/// moe.grouped_matmul with FP8 operands: lhs e4m3 [S, K] with per-row scales
/// [S, ceil(K/128)], weights e4m3 [E, N, K] with block scales [E, ceil(N/128),
/// ceil(K/128)] (dequantisation multipliers). Computes with the dequantised
/// values in f32; rows at or past offsets[E-1] are neither read nor written.
void groupedMatmulFP8(ThreadPool &pool, const uint8_t *lhs, const float *lhsScales, int64_t k,
                      const uint8_t *weights, const float *weightScales, int64_t experts,
                      int64_t n, const int32_t *offsets, const float *bias,
                      const Epilogue &epilogue, float *out);

/// The same with f32 rows (weight-only FP8: no moe.quantize before it).
void groupedMatmulFP8Weights(ThreadPool &pool, const float *lhs, int64_t k,
                             const uint8_t *weights, const float *weightScales, int64_t experts,
                             int64_t n, const int32_t *offsets, const float *bias,
                             const Epilogue &epilogue, float *out);

/// moe.grouped_matmul with MXFP4 weights (moec/runtime/MXFP4.h) and f32
/// rows [S, K]: weights packed, [E, N] rows of ceil(K/32) blocks of 16 bytes
/// (two e2m1 codes a byte, low nibble first), scales [E, N, ceil(K/32)] e8m0
/// bytes. Computes with the dequantised values in f32; rows at or past
/// offsets[E-1] are neither read nor written.
void groupedMatmulMXFP4(ThreadPool &pool, const float *lhs, int64_t k, const uint8_t *weights,
                        const uint8_t *scales, int64_t experts, int64_t n, const int32_t *offsets,
                        const float *bias, const Epilogue &epilogue, float *out);

/// moe.combine: out[t] = Σ_k weights[t, k] · rows[r(t, k)] over valid slots,
/// plus addend[t] (scaled by sigmoid(addendGate[t]) when given).
void combine(ThreadPool &pool, const float *rows, const int32_t *permutation, int64_t slots,
             int64_t hiddenSize, const float *weights, int64_t tokens, int64_t topK,
             int64_t numValid, const float *addend, const float *addendGate, float *out);

} // namespace moec::rt::cpu

#endif // MOEC_RUNTIME_CPU_MOEKERNELS_H
