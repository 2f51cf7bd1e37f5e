//===- Gemm.cpp - the CPU kernels' matrix product ---------------------------===//
//
// C = A · Bᵀ with every element's arithmetic fixed by K (Gemm.h). Three bodies
// of the same arithmetic, picked once by the processor: AVX-512 (4×4 tiles of
// 16-lane accumulators, the 16 sums of a tile reduced together), AVX2 with FMA
// (each 16-lane accumulator as two 8-lane halves, 2×2 tiles), and scalar
// fmaf. The library is built for the baseline x86-64; the bodies carry their
// own target attributes.
//
//===----------------------------------------------------------------------===//

#include "Gemm.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#define MOEC_GEMM_X86 1
#endif

namespace moec::rt::cpu::detail {
namespace {

using GemmFn = void (*)(const float *, int64_t, const float *, int64_t, const float *, float *,
                        int64_t, int64_t, int64_t, int64_t);

//===----------------------------------------------------------------------===//
// Scalar: the reference arithmetic
//===----------------------------------------------------------------------===//

float dotScalar(const float *a, const float *b, int64_t k) {
  float p[16] = {};
  for (int64_t i = 0; i < k; i += 16)
    for (int l = 0; l < 16; ++l) {
      bool in = i + l < k;
      p[l] = std::fma(in ? a[i + l] : 0.0f, in ? b[i + l] : 0.0f, p[l]);
    }
  for (int l = 0; l < 8; ++l)
    p[l] += p[l + 8];
  for (int l = 0; l < 4; ++l)
    p[l] += p[l + 4];
  for (int l = 0; l < 2; ++l)
    p[l] += p[l + 2];
  return p[0] + p[1];
}

void gemmScalar(const float *a, int64_t lda, const float *b, int64_t ldb, const float *bias,
                float *c, int64_t ldc, int64_t m, int64_t n, int64_t k) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float s = dotScalar(a + i * lda, b + j * ldb, k);
      c[i * ldc + j] = bias ? s + bias[j] : s;
    }
}

// exp's constants (Gemm.h, expClamped): Cephes' expf.
constexpr float kExpLo = -87.33654f, kExpHi = 88.0f, kLog2e = 1.44269504088896341f;
constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
constexpr float kExpPoly[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                               4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};

float expScalar(float x) {
  if (std::isnan(x))
    return x;
  float xc = kExpLo > x ? kExpLo : x; // as maxps(lo, x)
  xc = kExpHi < xc ? kExpHi : xc;     // as minps(hi, xc)
  float n = std::nearbyint(xc * kLog2e);
  float r = std::fma(n, -kLn2Hi, xc);
  r = std::fma(n, -kLn2Lo, r);
  float p = kExpPoly[0];
  for (int i = 1; i < 6; ++i)
    p = std::fma(p, r, kExpPoly[i]);
  float y = std::fma(p, r * r, r) + 1.0f;
  uint32_t bits = static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return y * scale;
}

float siluScalar(float x, float alpha) { return x * (1.0f / (1.0f + expScalar(-(alpha * x)))); }

void siluEpilogueScalar(const float *acc, int64_t n, bool gated, bool interleaved, float alpha,
                        float beta, float limit, float *out) {
  if (!gated) {
    for (int64_t j = 0; j < n; ++j)
      out[j] = siluScalar(acc[j], alpha);
    return;
  }
  int64_t half = n / 2;
  bool clamp = std::isfinite(limit);
  for (int64_t j = 0; j < half; ++j) {
    float g = interleaved ? acc[2 * j] : acc[j];
    float u = interleaved ? acc[2 * j + 1] : acc[half + j];
    if (clamp) {
      g = limit < g ? limit : g;   // minps(limit, g)
      u = -limit > u ? -limit : u; // maxps(-limit, u)
      u = limit < u ? limit : u;
    }
    out[j] = siluScalar(g, alpha) * (u + beta);
  }
}

#ifdef MOEC_GEMM_X86

//===----------------------------------------------------------------------===//
// AVX-512
//===----------------------------------------------------------------------===//

#define MOEC_AVX512 __attribute__((target("avx512f"), always_inline)) inline

/// Lanes (l, l+8), (l, l+4), (l, l+2), (l, l+1) added: the reduction of Gemm.h.
MOEC_AVX512 float reduce16(__m512 v) {
  __m256 lo = _mm512_castps512_ps256(v);
  // (A shuffle, not an extract: GCC 12 warns of the extracts' undefined operand.)
  __m256 hi = _mm512_castps512_ps256(_mm512_shuffle_f32x4(v, v, 0xEE));
  __m256 v8 = _mm256_add_ps(lo, hi);
  __m128 v4 = _mm_add_ps(_mm256_castps256_ps128(v8), _mm256_extractf128_ps(v8, 1));
  __m128 v2 = _mm_add_ps(v4, _mm_movehl_ps(v4, v4));
  __m128 v1 = _mm_add_ss(v2, _mm_shuffle_ps(v2, v2, 1));
  return _mm_cvtss_f32(v1);
}

/// The 16 accumulators acc[c·4 + r] of a 4×4 tile reduced together, as
/// reduce16 reduces each: 128-bit quarter r of the result is row r, columns
/// 0..3.
MOEC_AVX512 __m512 reduce4x4(const __m512 *acc) {
  // (l, l+8): pairs of accumulators, each half of a vector one accumulator's 8.
  __m512 s[8];
  for (int p = 0; p < 8; ++p)
    s[p] = _mm512_add_ps(_mm512_shuffle_f32x4(acc[2 * p], acc[2 * p + 1], 0x44),
                         _mm512_shuffle_f32x4(acc[2 * p], acc[2 * p + 1], 0xEE));
  // (l, l+4): each quarter one accumulator's 4.
  __m512 t[4];
  for (int p = 0; p < 4; ++p)
    t[p] = _mm512_add_ps(_mm512_shuffle_f32x4(s[2 * p], s[2 * p + 1], 0x88),
                         _mm512_shuffle_f32x4(s[2 * p], s[2 * p + 1], 0xDD));
  // (l, l+2): quarter q holds accumulators 4p+q's 2 and 4(p+1)+q's 2.
  __m512 u0 = _mm512_add_ps(_mm512_shuffle_ps(t[0], t[1], 0x44), _mm512_shuffle_ps(t[0], t[1], 0xEE));
  __m512 u1 = _mm512_add_ps(_mm512_shuffle_ps(t[2], t[3], 0x44), _mm512_shuffle_ps(t[2], t[3], 0xEE));
  // (l, l+1): lane 4q + j is accumulator q + 4j.
  return _mm512_add_ps(_mm512_shuffle_ps(u0, u1, 0x88), _mm512_shuffle_ps(u0, u1, 0xDD));
}

/// One MR×NR tile over the whole K: acc[c·MR + r] for row r, column c.
template <int MR, int NR>
MOEC_AVX512 void accumulate512(const float *a, int64_t lda, const float *b, int64_t ldb, int64_t k,
                               __m512 *acc) {
  for (int x = 0; x < MR * NR; ++x)
    acc[x] = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= k; i += 16) {
    __m512 bv[NR];
    for (int c = 0; c < NR; ++c)
      bv[c] = _mm512_loadu_ps(b + c * ldb + i);
    for (int r = 0; r < MR; ++r) {
      __m512 av = _mm512_loadu_ps(a + r * lda + i);
      for (int c = 0; c < NR; ++c)
        acc[c * MR + r] = _mm512_fmadd_ps(av, bv[c], acc[c * MR + r]);
    }
  }
  if (i < k) {
    auto mask = static_cast<__mmask16>((1u << (k - i)) - 1);
    __m512 bv[NR];
    for (int c = 0; c < NR; ++c)
      bv[c] = _mm512_maskz_loadu_ps(mask, b + c * ldb + i);
    for (int r = 0; r < MR; ++r) {
      __m512 av = _mm512_maskz_loadu_ps(mask, a + r * lda + i);
      for (int c = 0; c < NR; ++c)
        acc[c * MR + r] = _mm512_fmadd_ps(av, bv[c], acc[c * MR + r]);
    }
  }
}

template <int MR, int NR>
MOEC_AVX512 void edge512(const float *a, int64_t lda, const float *b, int64_t ldb,
                         const float *bias, float *c, int64_t ldc, int64_t k) {
  __m512 acc[MR * NR];
  accumulate512<MR, NR>(a, lda, b, ldb, k, acc);
  for (int r = 0; r < MR; ++r)
    for (int j = 0; j < NR; ++j) {
      float s = reduce16(acc[j * MR + r]);
      c[r * ldc + j] = bias ? s + bias[j] : s;
    }
}

/// Rows [0, MR) against the columns [0, n), MR < 4 (the rows' edge).
template <int MR>
MOEC_AVX512 void rows512(const float *a, int64_t lda, const float *b, int64_t ldb,
                         const float *bias, float *c, int64_t ldc, int64_t n, int64_t k) {
  int64_t j = 0;
  for (; j + 4 <= n; j += 4)
    edge512<MR, 4>(a, lda, b + j * ldb, ldb, bias ? bias + j : nullptr, c + j, ldc, k);
  for (; j < n; ++j)
    edge512<MR, 1>(a, lda, b + j * ldb, ldb, bias ? bias + j : nullptr, c + j, ldc, k);
}

__attribute__((target("avx512f"))) void blockAvx512(const float *a, int64_t lda, const float *b,
                                                    int64_t ldb, const float *bias, float *c,
                                                    int64_t ldc, int64_t m, int64_t n, int64_t k) {
  int64_t fullRows = m / 4 * 4;
  // Column blocks outside, so a block of B stays in cache over every row tile.
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    const float *bj = b + j * ldb;
    __m512 biasQuarters = _mm512_setzero_ps();
    if (bias)
      biasQuarters = _mm512_broadcast_f32x4(_mm_loadu_ps(bias + j));
    for (int64_t i = 0; i < fullRows; i += 4) {
      __m512 acc[16];
      accumulate512<4, 4>(a + i * lda, lda, bj, ldb, k, acc);
      __m512 sums = reduce4x4(acc);
      if (bias)
        sums = _mm512_add_ps(sums, biasQuarters);
      float *ci = c + i * ldc + j;
      _mm512_mask_storeu_ps(ci, 0x000F, sums);
      _mm512_mask_storeu_ps(ci + ldc - 4, 0x00F0, sums);
      _mm512_mask_storeu_ps(ci + 2 * ldc - 8, 0x0F00, sums);
      _mm512_mask_storeu_ps(ci + 3 * ldc - 12, 0xF000, sums);
    }
  }
  for (; j < n; ++j)
    for (int64_t i = 0; i < fullRows; i += 4)
      edge512<4, 1>(a + i * lda, lda, b + j * ldb, ldb, bias ? bias + j : nullptr,
                    c + i * ldc + j, ldc, k);
  const float *ar = a + fullRows * lda;
  float *cr = c + fullRows * ldc;
  switch (m - fullRows) {
  case 1: rows512<1>(ar, lda, b, ldb, bias, cr, ldc, n, k); break;
  case 2: rows512<2>(ar, lda, b, ldb, bias, cr, ldc, n, k); break;
  case 3: rows512<3>(ar, lda, b, ldb, bias, cr, ldc, n, k); break;
  default: break;
  }
}

MOEC_AVX512 __m512 exp512(__m512 x) {
  __m512 xc = _mm512_min_ps(_mm512_set1_ps(kExpHi), _mm512_max_ps(_mm512_set1_ps(kExpLo), x));
  __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(kLog2e)),
                                  _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(-kLn2Hi), xc);
  r = _mm512_fmadd_ps(n, _mm512_set1_ps(-kLn2Lo), r);
  __m512 p = _mm512_set1_ps(kExpPoly[0]);
  for (int i = 1; i < 6; ++i)
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExpPoly[i]));
  __m512 y = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
  __m512i bits = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
  return _mm512_mul_ps(y, _mm512_castsi512_ps(bits));
}

MOEC_AVX512 __m512 silu512(__m512 x, __m512 alpha) {
  __m512 e = exp512(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_mul_ps(alpha, x)));
  return _mm512_mul_ps(x, _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_add_ps(_mm512_set1_ps(1.0f), e)));
}

MOEC_AVX512 __mmask16 mask16(int64_t left) {
  return left >= 16 ? static_cast<__mmask16>(0xFFFF)
                    : static_cast<__mmask16>(left <= 0 ? 0 : (1u << left) - 1);
}

__attribute__((target("avx512f"))) void siluEpilogueAvx512(const float *acc, int64_t n, bool gated,
                                                           bool interleaved, float alpha,
                                                           float beta, float limit, float *out) {
  __m512 va = _mm512_set1_ps(alpha);
  if (!gated) {
    for (int64_t j = 0; j < n; j += 16) {
      __mmask16 m = mask16(n - j);
      _mm512_mask_storeu_ps(out + j, m, silu512(_mm512_maskz_loadu_ps(m, acc + j), va));
    }
    return;
  }
  int64_t half = n / 2;
  bool clamp = std::isfinite(limit);
  __m512 hi = _mm512_set1_ps(limit), lo = _mm512_set1_ps(-limit), vb = _mm512_set1_ps(beta);
  __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  for (int64_t j = 0; j < half; j += 16) {
    __mmask16 m = mask16(half - j);
    __m512 g, u;
    if (interleaved) {
      __m512 first = _mm512_maskz_loadu_ps(mask16(2 * (half - j)), acc + 2 * j);
      __m512 second = _mm512_maskz_loadu_ps(mask16(2 * (half - j) - 16), acc + 2 * j + 16);
      g = _mm512_permutex2var_ps(first, even, second);
      u = _mm512_permutex2var_ps(first, odd, second);
    } else {
      g = _mm512_maskz_loadu_ps(m, acc + j);
      u = _mm512_maskz_loadu_ps(m, acc + half + j);
    }
    if (clamp) {
      g = _mm512_min_ps(hi, g);
      u = _mm512_min_ps(hi, _mm512_max_ps(lo, u));
    }
    _mm512_mask_storeu_ps(out + j, m, _mm512_mul_ps(silu512(g, va), _mm512_add_ps(u, vb)));
  }
}

/// Blocks of rows and columns whose A and B rows fit in the core's L2 cache
/// together (a large K streams A once per block of B otherwise); the
/// blocking changes no element's arithmetic.
template <typename Block>
void blocked(Block block, const float *a, int64_t lda, const float *b, int64_t ldb,
             const float *bias, float *c, int64_t ldc, int64_t m, int64_t n, int64_t k) {
  constexpr int64_t kBlockBytes = 512 * 1024; // of A's rows, and of B's
  int64_t rows = std::max<int64_t>(4, kBlockBytes / (4 * std::max<int64_t>(k, 1)) / 4 * 4);
  for (int64_t i = 0; i < m; i += rows)
    for (int64_t j = 0; j < n; j += rows)
      block(a + i * lda, lda, b + j * ldb, ldb, bias ? bias + j : nullptr, c + i * ldc + j, ldc,
            std::min(rows, m - i), std::min(rows, n - j), k);
}

void gemmAvx512(const float *a, int64_t lda, const float *b, int64_t ldb, const float *bias,
                float *c, int64_t ldc, int64_t m, int64_t n, int64_t k) {
  blocked(blockAvx512, a, lda, b, ldb, bias, c, ldc, m, n, k);
}

//===----------------------------------------------------------------------===//
// AVX2 with FMA: each 16-lane accumulator as two 8-lane halves
//===----------------------------------------------------------------------===//

#define MOEC_AVX2 __attribute__((target("avx2,fma"), always_inline)) inline

/// Lanes l < 8 and 8 + l of a 16-lane accumulator: (l, l+8), then as reduce16.
MOEC_AVX2 float reduce2x8(__m256 lo, __m256 hi) {
  __m256 v8 = _mm256_add_ps(lo, hi);
  __m128 v4 = _mm_add_ps(_mm256_castps256_ps128(v8), _mm256_extractf128_ps(v8, 1));
  __m128 v2 = _mm_add_ps(v4, _mm_movehl_ps(v4, v4));
  __m128 v1 = _mm_add_ss(v2, _mm_shuffle_ps(v2, v2, 1));
  return _mm_cvtss_f32(v1);
}

/// The mask of the first `left` of 8 lanes (left may be <= 0 or >= 8).
MOEC_AVX2 __m256i mask8(int64_t left) {
  __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  int32_t bound = static_cast<int32_t>(left < 0 ? 0 : (left > 8 ? 8 : left));
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(bound), lanes);
}

template <int MR, int NR>
MOEC_AVX2 void tile256(const float *a, int64_t lda, const float *b, int64_t ldb, const float *bias,
                       float *c, int64_t ldc, int64_t k) {
  __m256 lo[MR * NR], hi[MR * NR];
  for (int x = 0; x < MR * NR; ++x)
    lo[x] = hi[x] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= k; i += 16) {
    __m256 bl[NR], bh[NR];
    for (int j = 0; j < NR; ++j) {
      bl[j] = _mm256_loadu_ps(b + j * ldb + i);
      bh[j] = _mm256_loadu_ps(b + j * ldb + i + 8);
    }
    for (int r = 0; r < MR; ++r) {
      __m256 al = _mm256_loadu_ps(a + r * lda + i), ah = _mm256_loadu_ps(a + r * lda + i + 8);
      for (int j = 0; j < NR; ++j) {
        lo[j * MR + r] = _mm256_fmadd_ps(al, bl[j], lo[j * MR + r]);
        hi[j * MR + r] = _mm256_fmadd_ps(ah, bh[j], hi[j * MR + r]);
      }
    }
  }
  if (i < k) {
    // Zero-padded, and both halves multiplied, as the 16 lanes of AVX-512 are.
    __m256i ml = mask8(k - i), mh = mask8(k - i - 8);
    __m256 bl[NR], bh[NR];
    for (int j = 0; j < NR; ++j) {
      bl[j] = _mm256_maskload_ps(b + j * ldb + i, ml);
      bh[j] = _mm256_maskload_ps(b + j * ldb + i + 8, mh);
    }
    for (int r = 0; r < MR; ++r) {
      __m256 al = _mm256_maskload_ps(a + r * lda + i, ml);
      __m256 ah = _mm256_maskload_ps(a + r * lda + i + 8, mh);
      for (int j = 0; j < NR; ++j) {
        lo[j * MR + r] = _mm256_fmadd_ps(al, bl[j], lo[j * MR + r]);
        hi[j * MR + r] = _mm256_fmadd_ps(ah, bh[j], hi[j * MR + r]);
      }
    }
  }
  for (int r = 0; r < MR; ++r)
    for (int j = 0; j < NR; ++j) {
      float s = reduce2x8(lo[j * MR + r], hi[j * MR + r]);
      c[r * ldc + j] = bias ? s + bias[j] : s;
    }
}

__attribute__((target("avx2,fma"))) void blockAvx2(const float *a, int64_t lda, const float *b,
                                                   int64_t ldb, const float *bias, float *c,
                                                   int64_t ldc, int64_t m, int64_t n, int64_t k) {
  int64_t j = 0;
  for (; j + 2 <= n; j += 2) {
    int64_t i = 0;
    for (; i + 2 <= m; i += 2)
      tile256<2, 2>(a + i * lda, lda, b + j * ldb, ldb, bias ? bias + j : nullptr,
                    c + i * ldc + j, ldc, k);
    if (i < m)
      tile256<1, 2>(a + i * lda, lda, b + j * ldb, ldb, bias ? bias + j : nullptr,
                    c + i * ldc + j, ldc, k);
  }
  if (j < n) {
    int64_t i = 0;
    for (; i + 2 <= m; i += 2)
      tile256<2, 1>(a + i * lda, lda, b + j * ldb, ldb, bias ? bias + j : nullptr,
                    c + i * ldc + j, ldc, k);
    if (i < m)
      tile256<1, 1>(a + i * lda, lda, b + j * ldb, ldb, bias ? bias + j : nullptr,
                    c + i * ldc + j, ldc, k);
  }
}

void gemmAvx2(const float *a, int64_t lda, const float *b, int64_t ldb, const float *bias,
              float *c, int64_t ldc, int64_t m, int64_t n, int64_t k) {
  blocked(blockAvx2, a, lda, b, ldb, bias, c, ldc, m, n, k);
}

MOEC_AVX2 __m256 exp256(__m256 x) {
  __m256 xc = _mm256_min_ps(_mm256_set1_ps(kExpHi), _mm256_max_ps(_mm256_set1_ps(kExpLo), x));
  __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(kLog2e)),
                             _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-kLn2Hi), xc);
  r = _mm256_fmadd_ps(n, _mm256_set1_ps(-kLn2Lo), r);
  __m256 p = _mm256_set1_ps(kExpPoly[0]);
  for (int i = 1; i < 6; ++i)
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kExpPoly[i]));
  __m256 y = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0f));
  __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(y, _mm256_castsi256_ps(bits));
}

MOEC_AVX2 __m256 silu256(__m256 x, __m256 alpha) {
  __m256 e = exp256(_mm256_sub_ps(_mm256_setzero_ps(), _mm256_mul_ps(alpha, x)));
  return _mm256_mul_ps(x, _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_add_ps(_mm256_set1_ps(1.0f), e)));
}

__attribute__((target("avx2,fma"))) void siluEpilogueAvx2(const float *acc, int64_t n, bool gated,
                                                          bool interleaved, float alpha,
                                                          float beta, float limit, float *out) {
  __m256 va = _mm256_set1_ps(alpha);
  if (!gated) {
    for (int64_t j = 0; j < n; j += 8) {
      __m256i m = mask8(n - j);
      _mm256_maskstore_ps(out + j, m, silu256(_mm256_maskload_ps(acc + j, m), va));
    }
    return;
  }
  int64_t half = n / 2;
  bool clamp = std::isfinite(limit);
  __m256 hi = _mm256_set1_ps(limit), lo = _mm256_set1_ps(-limit), vb = _mm256_set1_ps(beta);
  for (int64_t j = 0; j < half; j += 8) {
    __m256i m = mask8(half - j);
    __m256 g, u;
    if (interleaved) {
      __m256 first = _mm256_maskload_ps(acc + 2 * j, mask8(2 * (half - j)));
      __m256 second = _mm256_maskload_ps(acc + 2 * j + 8, mask8(2 * (half - j) - 8));
      // Lanes 0 2 | 8 10 | 4 6 | 12 14 of the pair, then the 64-bit blocks in order.
      g = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(first, second, 0x88)), 0xD8));
      u = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(first, second, 0xDD)), 0xD8));
    } else {
      g = _mm256_maskload_ps(acc + j, m);
      u = _mm256_maskload_ps(acc + half + j, m);
    }
    if (clamp) {
      g = _mm256_min_ps(hi, g);
      u = _mm256_min_ps(hi, _mm256_max_ps(lo, u));
    }
    _mm256_maskstore_ps(out + j, m, _mm256_mul_ps(silu256(g, va), _mm256_add_ps(u, vb)));
  }
}

#endif // MOEC_GEMM_X86

using SiluFn = void (*)(const float *, int64_t, bool, bool, float, float, float, float *);

struct Choice {
  GemmFn fn;
  SiluFn silu;
  const char *isa;
};

/// The bodies of instruction set `isa`, if this processor runs them.
bool bodiesOf(const char *isa, Choice &out) {
  if (std::strcmp(isa, "scalar") == 0) {
    out = {gemmScalar, siluEpilogueScalar, "scalar"};
    return true;
  }
#ifdef MOEC_GEMM_X86
  __builtin_cpu_init();
  if (std::strcmp(isa, "avx512") == 0 && __builtin_cpu_supports("avx512f")) {
    out = {gemmAvx512, siluEpilogueAvx512, "avx512"};
    return true;
  }
  if (std::strcmp(isa, "avx2") == 0 && __builtin_cpu_supports("avx2") &&
      __builtin_cpu_supports("fma")) {
    out = {gemmAvx2, siluEpilogueAvx2, "avx2"};
    return true;
  }
#endif
  return false;
}

/// The widest bodies this processor runs; MOEC_CPU_ISA (avx512, avx2,
/// scalar) narrows the choice (tests, measurements).
Choice choose() {
  const char *asked = std::getenv("MOEC_CPU_ISA");
  const char *order[] = {"avx512", "avx2", "scalar"};
  bool allowed = !asked || !*asked;
  Choice choice{};
  for (const char *isa : order) {
    allowed = allowed || std::strcmp(asked, isa) == 0;
    if (allowed && bodiesOf(isa, choice))
      return choice;
  }
  bodiesOf("scalar", choice);
  return choice;
}

const Choice &chosen() {
  static const Choice choice = choose();
  return choice;
}

} // namespace

void gemmNT(const float *a, int64_t lda, const float *b, int64_t ldb, const float *bias, float *c,
            int64_t ldc, int64_t m, int64_t n, int64_t k) {
  if (m <= 0 || n <= 0)
    return;
  chosen().fn(a, lda, b, ldb, bias, c, ldc, m, n, k);
}

void siluEpilogue(const float *acc, int64_t n, bool gated, bool interleaved, float alpha,
                  float beta, float limit, float *out) {
  chosen().silu(acc, n, gated, interleaved, alpha, beta, limit, out);
}

float expClamped(float x) { return expScalar(x); }

const char *gemmIsa() { return chosen().isa; }

bool gemmNTOn(const char *isa, const float *a, int64_t lda, const float *b, int64_t ldb,
              const float *bias, float *c, int64_t ldc, int64_t m, int64_t n, int64_t k) {
  Choice choice;
  if (!bodiesOf(isa, choice))
    return false;
  if (m > 0 && n > 0)
    choice.fn(a, lda, b, ldb, bias, c, ldc, m, n, k);
  return true;
}

bool siluEpilogueOn(const char *isa, const float *acc, int64_t n, bool gated, bool interleaved,
                    float alpha, float beta, float limit, float *out) {
  Choice choice;
  if (!bodiesOf(isa, choice))
    return false;
  choice.silu(acc, n, gated, interleaved, alpha, beta, limit, out);
  return true;
}

} // namespace moec::rt::cpu::detail
