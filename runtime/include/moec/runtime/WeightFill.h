//===- WeightFill.h - weights filled at load, the same bits everywhere -*- C++ -*-===//
//
// The generator behind `moec compile --random-weights` (docs/artifact.md,
// "Weights filled at load"): element i of a weight filled `normal STD` is
//
//   STD * z(seed, stream, i), rounded to the weight's dtype,
//
// where z is a standard normal from Philox4x32-10 (counter: i / 4 and the
// stream, the weight's name hashed; key: the manifest's seed) through
// Box-Muller: each Philox call gives four 32-bit words, two pairs (u1, u2),
// four normals r·cos θ, r·sin θ. Counter-based, so any element is computed on
// its own, by the CPU loader or a GPU thread, in any order.
//
// The same bits on the CPU and the GPU: the math uses only IEEE-rounded single
// operations (add, multiply, divide, square root), never a fused multiply-add
// nor a library's log/sin/cos (whose last bits differ between libm and CUDA):
// ln by its atanh series, sin and cos by Taylor polynomials. On the device the
// _rn intrinsics forbid contraction; on the host every file including this one
// for filling is compiled with -ffp-contract=off (runtime/CMakeLists.txt).
// The conversions to bf16 and e4m3 are integer operations on the f32 bits.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_WEIGHTFILL_H
#define MOEC_RUNTIME_WEIGHTFILL_H

#include "moec/runtime/ArtifactABI.h"

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define MOEC_FILL_FN __host__ __device__ __forceinline__
#else
#define MOEC_FILL_FN inline
#endif

namespace moec::rt::fill {

MOEC_FILL_FN float add(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
MOEC_FILL_FN float sub(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
MOEC_FILL_FN float mul(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
MOEC_FILL_FN float div(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
MOEC_FILL_FN float sqrtRn(float a) {
#if defined(__CUDA_ARCH__)
  return __fsqrt_rn(a);
#else
  return __builtin_sqrtf(a);
#endif
}

MOEC_FILL_FN uint32_t floatBits(float value) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(value);
#else
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  return bits;
#endif
}
MOEC_FILL_FN float bitsFloat(uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float value;
  std::memcpy(&value, &bits, 4);
  return value;
#endif
}

MOEC_FILL_FN uint32_t mulHi(uint32_t a, uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __umulhi(a, b);
#else
  return static_cast<uint32_t>((static_cast<uint64_t>(a) * b) >> 32);
#endif
}

/// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2,
/// 3", 2011): four words of counter, two of key.
struct Words {
  uint32_t x[4];
};
MOEC_FILL_FN Words philox(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0,
                          uint32_t k1) {
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0 = mulHi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
    uint32_t hi1 = mulHi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
    uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return {{c0, c1, c2, c3}};
}

/// ln(u) for u in (0, 1]: u = m·2^e with m in [√½, √2), ln m = 2 atanh(s),
/// s = (m - 1)/(m + 1), |s| < 0.172, by its series to s^11 (relative error
/// below 1e-7).
MOEC_FILL_FN float logUnit(float u) {
  uint32_t bits = floatBits(u);
  int exponent = static_cast<int>((bits >> 23) & 0xFF) - 127;
  float m = bitsFloat((bits & 0x007FFFFFu) | 0x3F800000u); // [1, 2)
  if (m > 1.41421356f) {
    m = mul(m, 0.5f);
    ++exponent;
  }
  float s = div(sub(m, 1.0f), add(m, 1.0f));
  float s2 = mul(s, s);
  float series = add(1.0f / 9.0f, mul(s2, 1.0f / 11.0f));
  series = add(1.0f / 7.0f, mul(s2, series));
  series = add(1.0f / 5.0f, mul(s2, series));
  series = add(1.0f / 3.0f, mul(s2, series));
  series = add(1.0f, mul(s2, series));
  float lnM = mul(mul(2.0f, s), series);
  return add(mul(static_cast<float>(exponent), 0.693147182f), lnM);
}

/// sin and cos of a in [0, π/2] by their Taylor polynomials to a^13 / a^14
/// (absolute error below 1e-7).
MOEC_FILL_FN void sinCosQuarter(float a, float &sine, float &cosine) {
  float a2 = mul(a, a);
  float s = sub(1.0f / 39916800.0f, mul(a2, 1.0f / 6227020800.0f));
  s = sub(1.0f / 362880.0f, mul(a2, s));
  s = sub(1.0f / 5040.0f, mul(a2, s));
  s = sub(1.0f / 120.0f, mul(a2, s));
  s = sub(1.0f / 6.0f, mul(a2, s));
  s = sub(1.0f, mul(a2, s));
  sine = mul(a, s);
  float c = sub(1.0f / 3628800.0f, mul(a2, 1.0f / 479001600.0f));
  c = sub(1.0f / 40320.0f, mul(a2, c));
  c = sub(1.0f / 720.0f, mul(a2, c));
  c = sub(1.0f / 24.0f, mul(a2, c));
  c = sub(0.5f, mul(a2, c));
  cosine = sub(1.0f, mul(a2, c));
}

/// Box-Muller of two words: r = sqrt(-2 ln u1), u1 in (0, 1] from the top 24
/// bits of `w1`; θ = 2π u2 from `w2` (its top two bits the quadrant, the next
/// 24 the angle inside it). Returns r·cos θ and r·sin θ.
MOEC_FILL_FN void boxMuller(uint32_t w1, uint32_t w2, float &z0, float &z1) {
  float u1 = mul(static_cast<float>((w1 >> 8) + 1u), 0x1p-24f);
  float r = sqrtRn(mul(-2.0f, logUnit(u1)));
  float angle = mul(mul(static_cast<float>((w2 >> 6) & 0xFFFFFFu), 0x1p-24f), 1.57079637f);
  float s, c;
  sinCosQuarter(angle, s, c);
  float cosine, sine;
  switch (w2 >> 30) {
  case 0:
    cosine = c, sine = s;
    break;
  case 1:
    cosine = -s, sine = c;
    break;
  case 2:
    cosine = -c, sine = -s;
    break;
  default:
    cosine = s, sine = -c;
    break;
  }
  z0 = mul(r, cosine);
  z1 = mul(r, sine);
}

/// The four standard normals of group `group` (elements 4·group .. 4·group+3)
/// of stream `stream`.
MOEC_FILL_FN void normals(uint64_t seed, uint64_t stream, uint64_t group, float out[4]) {
  Words w = philox(static_cast<uint32_t>(group), static_cast<uint32_t>(group >> 32),
                   static_cast<uint32_t>(stream), static_cast<uint32_t>(stream >> 32),
                   static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
  boxMuller(w.x[0], w.x[1], out[0], out[1]);
  boxMuller(w.x[2], w.x[3], out[2], out[3]);
}

/// f32 bits to bf16, nearest even (fills are finite).
MOEC_FILL_FN uint16_t toBF16(float value) {
  uint32_t bits = floatBits(value);
  return static_cast<uint16_t>((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}

/// f32 to e4m3 (f8E4M3FN), nearest even, saturating at ±448 (fills are
/// finite): moec::rt::encodeE4M3 (Float8.h) on integers.
MOEC_FILL_FN uint8_t toE4M3(float value) {
  uint32_t bits = floatBits(value);
  uint8_t sign = static_cast<uint8_t>((bits >> 24) & 0x80u);
  uint32_t magnitude = bits & 0x7FFFFFFFu;
  if (magnitude >= 0x43E00000u) // 448
    return sign | 0x7E;
  int exponent = static_cast<int>(magnitude >> 23) - 127;
  uint32_t mantissa = magnitude & 0x007FFFFFu;
  if (exponent >= -6) { // e4m3 normal: 3 mantissa bits
    uint32_t kept = mantissa >> 20, rest = mantissa & 0xFFFFFu;
    if (rest > 0x80000u || (rest == 0x80000u && (kept & 1u)))
      ++kept;
    uint32_t code = (static_cast<uint32_t>(exponent + 7) << 3) + kept; // a carry bumps the exponent
    return sign | static_cast<uint8_t>(code > 0x7Eu ? 0x7Eu : code);
  }
  // Subnormal: k·2^-9, k = nearest even of |x|·2^9 (k = 8 is code 0x08, 2^-6).
  if (magnitude < 0x00800000u) // an f32 subnormal: far below 2^-10
    return sign;
  uint64_t significand = mantissa | 0x00800000u;
  int shift = 14 - exponent; // |x|·2^9 = significand·2^-(14 - exponent)
  if (shift > 24)
    return sign;
  uint64_t k = significand >> shift, rest = significand & ((uint64_t{1} << shift) - 1);
  uint64_t half = uint64_t{1} << (shift - 1);
  if (rest > half || (rest == half && (k & 1u)))
    ++k;
  return sign | static_cast<uint8_t>(k);
}

/// f32 to the nearest e2m1 code, ties to the even code, saturating at ±6
/// (mxfp4::encodeE2M1: exact comparisons, the same on host and device).
MOEC_FILL_FN uint8_t toE2M1(float value) {
  uint32_t bits = floatBits(value);
  uint8_t sign = static_cast<uint8_t>((bits >> 28) & 0x8u);
  float m = bitsFloat(bits & 0x7FFFFFFFu);
  uint8_t code = m <= 0.25f ? 0 : m < 0.75f ? 1 : m <= 1.25f ? 2 : m < 1.75f ? 3
               : m <= 2.5f  ? 4 : m < 3.5f  ? 5 : m <= 5.0f  ? 6 : 7;
  return sign | code;
}

/// A power of two (a constant fill's value, checked by parseManifest) as its
/// e8m0 byte: its f32 exponent field.
MOEC_FILL_FN uint8_t toE8M0(float value) {
  return static_cast<uint8_t>((floatBits(value) >> 23) & 0xFFu);
}

/// Bytes per element of a fill dtype (e2m1: two elements a byte).
MOEC_FILL_FN int dtypeBytes(int32_t dtype) {
  return dtype == MOEC_FILL_F32 ? 4 : dtype == MOEC_FILL_BF16 ? 2 : 1;
}
/// Bytes of `count` elements of a fill dtype.
MOEC_FILL_FN uint64_t fillBytes(int32_t dtype, uint64_t count) {
  return dtype == MOEC_FILL_E2M1 ? (count + 1) / 2 : count * dtypeBytes(dtype);
}

/// Stores `value` as element `index` of `out` in `dtype` (an e2m1 code into
/// its nibble, the other kept).
MOEC_FILL_FN void store(int32_t dtype, float value, unsigned char *out, uint64_t index) {
  if (dtype == MOEC_FILL_F32) {
    uint32_t bits = floatBits(value);
    std::memcpy(out + 4 * index, &bits, 4);
  } else if (dtype == MOEC_FILL_BF16) {
    uint16_t bits = toBF16(value);
    std::memcpy(out + 2 * index, &bits, 2);
  } else if (dtype == MOEC_FILL_E2M1) {
    int shift = 4 * static_cast<int>(index & 1);
    unsigned char &byte = out[index / 2];
    byte = static_cast<unsigned char>((byte & ~(0xF << shift)) | (toE2M1(value) << shift));
  } else if (dtype == MOEC_FILL_E8M0) {
    out[index] = toE8M0(value);
  } else {
    out[index] = toE4M3(value);
  }
}

/// Element `index` of a constant or normal fill, as f32 before the dtype's
/// rounding.
MOEC_FILL_FN float value(const moec_weight_fill &fill, uint64_t seed, uint64_t index) {
  if (fill.kind == MOEC_FILL_CONSTANT)
    return fill.value;
  float z[4];
  normals(seed, fill.stream, (fill.first >> 2) + (index >> 2), z);
  return mul(fill.value, z[index & 3]);
}

} // namespace moec::rt::fill

namespace moec::rt {

/// The generator stream of the weight named `name`: its content hash
/// (ArtifactFormat.h), so a weight's values do not depend on its place in the
/// manifest, and two copies of one weight (f32 and bf16) round the same values.
uint64_t weightStream(const char *name, size_t length);

/// Builds the weight image on the host: zeros, the stored weights copied from
/// `stored` (weights.bin, `storedBytes`), the others filled, on up to
/// `threads` threads (0: the hardware's). The plan is checked (parseManifest).
void fillWeightImage(const moec_weight_plan &plan, const unsigned char *stored,
                     uint64_t storedBytes, unsigned char *image, unsigned threads = 0);

/// One fill's elements [begin, end) into `image` (a constant or normal fill).
void fillWeightRange(const moec_weight_fill &fill, uint64_t seed, unsigned char *image,
                     uint64_t begin, uint64_t end);

} // namespace moec::rt

#endif // MOEC_RUNTIME_WEIGHTFILL_H
