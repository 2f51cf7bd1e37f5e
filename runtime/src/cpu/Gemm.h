//===- Gemm.h - the CPU kernels' matrix product and epilogue ---*- C++ -*-===//
//
// One matrix product serves moe.linear, the experts' grouped matmuls (f32 and
// dequantised FP8 weights): C = A · Bᵀ (+ bias), both operands K-contiguous, as
// moe's [out, in] weights are. It is single-threaded; the kernels split their
// loops over the thread pool.
//
// Every element is the same sequence of f32 operations, fixed by K alone: 16
// partial sums (partial l holds the products of indices ≡ l mod 16, fused
// multiply-adds in ascending order, the last block zero-padded), then added in
// pairs (l, l+8), (l, l+4), (l, l+2), (l, l+1), then the bias. So an element
// does not depend on M or N, on its place in a tile, on the thread, nor on the
// instruction set (AVX-512, AVX2 with FMA, or scalar fmaf give the same bits):
// a row whose expert gains or loses other rows keeps its bits, as the sentinel
// checks require.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_SRC_CPU_GEMM_H
#define MOEC_RUNTIME_SRC_CPU_GEMM_H

#include <cstdint>

namespace moec::rt::cpu::detail {

/// C[i·ldc + j] = Σ_k A[i·lda + k] · B[j·ldb + k] (+ bias[j] when bias is not
/// null), for i < m, j < n.
void gemmNT(const float *a, int64_t lda, const float *b, int64_t ldb, const float *bias, float *c,
            int64_t ldc, int64_t m, int64_t n, int64_t k);

/// The gated SiLU epilogue of a row of n accumulators: out[j] = silu(g_j) ·
/// (u_j + beta), silu(x) = x / (1 + exp(-alpha·x)), with g_j = acc[j] and
/// u_j = acc[n/2 + j] (concatenated) or acc[2j] and acc[2j + 1] (interleaved),
/// g clamped above and u on both sides at `limit` when it is finite; or,
/// ungated, out[j] = silu(acc[j]). exp is moec's own (below), so the vector
/// and scalar bodies give the same bits.
void siluEpilogue(const float *acc, int64_t n, bool gated, bool interleaved, float alpha,
                  float beta, float limit, float *out);

/// exp(x) in f32 as the epilogue computes it: x clamped to [-87.33, 88],
/// x = n·ln2 + r (two-part ln2), Cephes' degree-6 polynomial of r, times 2^n;
/// within 2 ulp of expf over the clamped range; NaN stays NaN.
float expClamped(float x);

/// The instruction set gemmNT and siluEpilogue run on: "avx512", "avx2" or
/// "scalar" (the widest the processor has, at most MOEC_CPU_ISA's).
const char *gemmIsa();

/// The same computations on a given instruction set, for the tests that
/// compare them bit for bit: false where the processor lacks it.
bool gemmNTOn(const char *isa, const float *a, int64_t lda, const float *b, int64_t ldb,
              const float *bias, float *c, int64_t ldc, int64_t m, int64_t n, int64_t k);
bool siluEpilogueOn(const char *isa, const float *acc, int64_t n, bool gated, bool interleaved,
                    float alpha, float beta, float limit, float *out);

} // namespace moec::rt::cpu::detail

#endif // MOEC_RUNTIME_SRC_CPU_GEMM_H
