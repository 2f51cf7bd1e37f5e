//===- E4M3.cuh - moe.quantize's arithmetic on the device ------*- CUDA -*-===//
//
// One definition of the e4m3 group scale and code (docs/dialect.md, FP8) for
// every CUDA kernel that quantises: the quantise kernels and the gate/up pass
// that quantises its own outputs (EpiloguePass.cuh). The same arithmetic as
// the CPU's, so the same codes.
//
//===----------------------------------------------------------------------===//
#ifndef MOEC_RUNTIME_SRC_CUDA_E4M3_CUH
#define MOEC_RUNTIME_SRC_CUDA_E4M3_CUH

#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstring>

namespace moec::rt::cuda::device {

/// The scale of a 128-column group from its largest magnitude: amax / 448 (at
/// least 1e-12), NaN if any element is NaN. The CPU divides in double and
/// rounds to f32 (MoEKernels.cpp); the f32 division gives the same bits for
/// every non-negative f32 amax (checked exhaustively on the host: a / 448
/// is a / 7 / 64, whose binary expansion repeats with period 3, so it never
/// lies close enough to an f32 midpoint for the double's rounding to matter).
__host__ __device__ inline float e4m3Scale(float amax, bool nan) {
  return nan ? NAN : fmaxf(amax / 448.0f, 1e-12f);
}

/// The scale of a 128-column group that a warp holds: each lane's largest
/// magnitude and NaN flag, reduced over the warp by shuffles, then e4m3Scale.
/// Every lane gets it.
__device__ inline float warpE4M3Scale(float laneAmax, bool laneNan) {
#pragma unroll
  for (int d = 16; d > 0; d /= 2)
    laneAmax = fmaxf(laneAmax, __shfl_xor_sync(0xffffffffu, laneAmax, d));
  return e4m3Scale(laneAmax, __any_sync(0xffffffffu, laneNan));
}

/// The e4m3 codes of one group's values v / scale, each quotient rounded once
/// to nearest, as the CPU does with the division in double (Float8.h). The
/// hardware's cvt rounds an f32 to e4m3; so the quotient is first rounded to
/// odd into f32 (toward zero, the last bit set when inexact): with 24 bits
/// against e4m3's 4, the two roundings equal the one (Boldo and Melquiond's
/// round-to-odd theorem).
///
/// The quotient of |v| comes from the group's f32 reciprocal and FMA
/// remainders, not a division per value: q = |v|·r, then q += (|v| - q·s)·r,
/// which leaves q within an ulp of |v| / s, so that |v| - q·s is exact and its
/// sign says which side of q the quotient lies; v's sign is then the code's top
/// bit. (The division in double was ~45 % of the instructions of the FP8 gate/up
/// pass in ncu's source counters, and ncu had that pass issue-bound.)
/// Quotients up to 512 only: larger ones, NaN and infinite values and scales
/// take the division in double. Host and device compute the same bits
/// (E4M3EncoderTest checks the host's against Float8.h on every e4m3 midpoint).
class E4M3Encoder {
public:
  __host__ __device__ explicit E4M3Encoder(float scale)
      : scale_(scale), reciprocal_(1.0f / scale),
        limit_(scale >= 0x1p-100f && scale <= 0x1p100f ? 512.0f * scale : -1.0f) {}

  __host__ __device__ float scale() const { return scale_; }

  __host__ __device__ uint8_t operator()(float v) const {
    if (!(fabsf(v) <= limit_))
      return byDivision(v);
    return roundToE4M3(oddQuotient(fabsf(v))) | static_cast<uint8_t>(bitsOf(v) >> 24 & 0x80u);
  }

  /// Four codes in one word, the first in the low byte (the codes' memory order).
  __host__ __device__ uint32_t encode4(float a, float b, float c, float d) const {
    if (!(fabsf(a) <= limit_ && fabsf(b) <= limit_ && fabsf(c) <= limit_ && fabsf(d) <= limit_))
      return uint32_t((*this)(a)) | uint32_t((*this)(b)) << 8 | uint32_t((*this)(c)) << 16 |
             uint32_t((*this)(d)) << 24;
    uint32_t low = __nv_cvt_float2_to_fp8x2(
        make_float2(oddQuotient(fabsf(a)), oddQuotient(fabsf(b))), __NV_SATFINITE, __NV_E4M3);
    uint32_t high = __nv_cvt_float2_to_fp8x2(
        make_float2(oddQuotient(fabsf(c)), oddQuotient(fabsf(d))), __NV_SATFINITE, __NV_E4M3);
    uint32_t signs = (bitsOf(a) >> 24 & 0x80u) | (bitsOf(b) >> 16 & 0x8000u) |
                     (bitsOf(c) >> 8 & 0x800000u) | (bitsOf(d) & 0x80000000u);
    return (low | high << 16) | signs;
  }

private:
  /// magnitude / scale rounded to odd into f32 (magnitude <= limit_).
  __host__ __device__ float oddQuotient(float magnitude) const {
    float q = magnitude * reciprocal_;
    q = fmaf(fmaf(-q, scale_, magnitude), reciprocal_, q);
    float remainder = fmaf(-q, scale_, magnitude); // exact: q is within an ulp
    if (remainder != 0.0f) // inexact: toward zero (q is above when the remainder is negative), odd
      q = floatOf((bitsOf(q) - (remainder < 0.0f ? 1u : 0u)) | 1u);
    return q;
  }

  /// The reference's arithmetic: the division in double, rounded to odd into
  /// f32; a NaN quotient is 0x7F whatever its sign, as on the CPU (inf / inf,
  /// in a group holding an infinity, is the device's negative default NaN).
  __host__ __device__ uint8_t byDivision(float v) const {
    double q = static_cast<double>(v) / scale_;
    if (q != q)
      return 0x7F;
    float f = static_cast<float>(q);
    if (fabs(static_cast<double>(f)) > fabs(q)) // rounded away from zero: step back
      f = floatOf(bitsOf(f) - 1u);
    if (static_cast<double>(f) != q)
      f = floatOf(bitsOf(f) | 1u);
    return roundToE4M3(f);
  }

  __host__ __device__ static uint8_t roundToE4M3(float f) {
    return static_cast<uint8_t>(__nv_cvt_float_to_fp8(f, __NV_SATFINITE, __NV_E4M3));
  }
  __host__ __device__ static uint32_t bitsOf(float f) {
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    return bits;
  }
  __host__ __device__ static float floatOf(uint32_t bits) {
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
  }

  float scale_, reciprocal_;
  float limit_; // the largest |v| of the fast path; -1 where the scale has none
};

} // namespace moec::rt::cuda::device

#endif // MOEC_RUNTIME_SRC_CUDA_E4M3_CUH
