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

#include <cstdint>

namespace moec::rt::cuda::device {

/// The scale of a 128-column group from its largest magnitude: amax / 448 (at
/// least 1e-12), NaN if any element is NaN.
__device__ inline float e4m3Scale(float amax, bool nan) {
  return nan ? __int_as_float(0x7fc00000) : static_cast<float>(fmax(amax / 448.0, 1e-12));
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

/// v / scale as an e4m3 code, rounded once from the exact quotient, as the
/// CPU's division in double and single rounding give. The quotient is rounded
/// to odd into f32 (toward zero, the last bit set when inexact) and the
/// hardware's cvt rounds that to nearest: with 24 bits against e4m3's 4, at
/// least two to spare, the two roundings equal the one (Boldo and Melquiond's
/// round-to-odd theorem). v14: the f32 division toward zero and an FMA's exact
/// remainder give the rounding to odd; until then a division in double did (a
/// double division per element: ncu had the FP8 gate/up pass issue-bound, 74 %
/// of the SM busy at 52 % of DRAM bandwidth). The remainder is exact where it
/// can matter (quotients near 2^-10 and up, scales from 1e-12), and a NaN
/// quotient takes the double conversion as before.
__device__ inline uint8_t encodeE4M3(float v, float scale) {
  float f = __fdiv_rz(v, scale);
  if (isnan(f)) // as before v14, bit for bit
    return static_cast<uint8_t>(
        __nv_cvt_double_to_fp8(static_cast<double>(v) / scale, __NV_SATFINITE, __NV_E4M3));
  if (fmaf(-f, scale, v) != 0.0f)
    f = __int_as_float(__float_as_int(f) | 1);
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(f, __NV_SATFINITE, __NV_E4M3));
}

} // namespace moec::rt::cuda::device

#endif // MOEC_RUNTIME_SRC_CUDA_E4M3_CUH
