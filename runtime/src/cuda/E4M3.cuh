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

/// v / scale as an e4m3 code: the division in double, rounded once, as on the
/// CPU. CUDA converts double to e4m3 in software (~40 integer instructions); so
/// the quotient is rounded to odd into f32 (toward zero, the last bit set when
/// inexact) and the hardware's cvt rounds that to nearest: with 24 bits against
/// e4m3's 4, at least two to spare, the two roundings equal the one (Boldo and
/// Melquiond's round-to-odd theorem; a host emulation agreed on 5e7 quotients,
/// e4m3 midpoints and their neighbours among them). NaN takes the software path.
__device__ inline uint8_t encodeE4M3(float v, float scale) {
  double q = static_cast<double>(v) / scale;
  if (isnan(q))
    return static_cast<uint8_t>(__nv_cvt_double_to_fp8(q, __NV_SATFINITE, __NV_E4M3));
  float f = __double2float_rz(q);
  if (static_cast<double>(f) != q)
    f = __int_as_float(__float_as_int(f) | 1);
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(f, __NV_SATFINITE, __NV_E4M3));
}

} // namespace moec::rt::cuda::device

#endif // MOEC_RUNTIME_SRC_CUDA_E4M3_CUH
