//===- MXFP4.h - MXFP4 (e2m1 codes, e8m0 scales) on the host ----*- C++ -*-===//
//
// The MXFP4 format of moe's expert weights (docs/dialect.md, "MXFP4 layout";
// gpt-oss's checkpoint format): e2m1 codes (1 sign, 2 exponent, 1 mantissa
// bit: ±{0, 0.5, 1, 1.5, 2, 3, 4, 6}) with one e8m0 scale byte s, meaning
// 2^(s - 127), per 32 consecutive values along K.
//
// Stored (weights.bin, docs/artifact.md "MXFP4 weights") as gpt-oss stores its
// `*_blocks`: a row of K codes is ceil(K/32) blocks of 16 bytes, code 2j of a
// block in byte j's low nibble and code 2j+1 in its high nibble, the codes
// past K zero. Scales are one byte each, [E, N, ceil(K/32)].
//
// The compile-time cast (moe-quantize-experts-mxfp4) quantises as OpenAI's
// triton_kernels `downcast_to_mxfp` does by default (DequantScaleRoundingMode
// ROUND_UP), which transformers' `quantize_to_mxfp4` calls: per block,
// d = f32(amax / 6) rounded up to a power of two, and each value x / d
// rounded to the nearest e2m1, ties to even, saturating at 6.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_MXFP4_H
#define MOEC_RUNTIME_MXFP4_H

#include <cmath>
#include <cstdint>
#include <cstring>

namespace moec::rt::mxfp4 {

/// Values per scale along K, and the bytes they pack into.
inline constexpr int64_t kBlock = 32;
inline constexpr int64_t kBlockBytes = kBlock / 2;
/// A scale byte s means 2^(s - kScaleBias); 0xFF is NaN.
inline constexpr int kScaleBias = 127;
inline constexpr uint8_t kScaleNaN = 0xFF;
/// The largest e2m1 magnitude.
inline constexpr double kE2M1Max = 6.0;

/// The value of each e2m1 code (transformers' FP4_VALUES).
inline constexpr float kE2M1Values[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                          -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

/// The value of the code in the low nibble of `bits`.
inline float decodeE2M1(uint8_t bits) { return kE2M1Values[bits & 0xF]; }

/// 2^(bits - 127) (an f32 subnormal below 2^-126, exact), NaN for 0xFF.
inline float decodeE8M0(uint8_t bits) {
  return bits == kScaleNaN ? NAN : std::ldexp(1.0f, static_cast<int>(bits) - kScaleBias);
}

/// `value` rounded to the nearest e2m1 code, ties to the even code, saturating
/// at ±6; the sign is kept (-0.1 is code 0x8, -0). NaN has no code: callers
/// reject it first.
inline uint8_t encodeE2M1(double value) {
  uint8_t sign = std::signbit(value) ? 0x8 : 0x0;
  double m = std::fabs(value);
  // Midpoints between neighbours, each tie going to the even code (0, 2, 4, 6).
  uint8_t code = m <= 0.25 ? 0 : m < 0.75 ? 1 : m <= 1.25 ? 2 : m < 1.75 ? 3
               : m <= 2.5  ? 4 : m < 3.5  ? 5 : m <= 5.0  ? 6 : 7;
  return sign | code;
}

/// The scale byte of a block whose largest magnitude is `amax` (finite, >= 0):
/// the exponent field of f32(amax / 6) rounded up to a power of two, as
/// triton_kernels computes it on the f32 bits. 0 for amax = 0 (or amax / 6
/// below f32's range), whose codes are then all zero.
inline uint8_t scaleFor(float amax) {
  float d = amax / static_cast<float>(kE2M1Max);
  uint32_t bits;
  std::memcpy(&bits, &d, 4);
  return static_cast<uint8_t>(((bits + 0x007FFFFFu) & 0x7F800000u) >> 23);
}

/// The code of `value` in a block of scale byte `scale` (scaleFor): value /
/// 2^(scale - 127), exact in f64, rounded once; all zero for scale 0.
inline uint8_t quantize(float value, uint8_t scale) {
  double x = scale == 0 ? 0.0 * value : std::ldexp(static_cast<double>(value), kScaleBias - scale);
  return encodeE2M1(x);
}

/// Bytes of one packed row of `k` codes.
inline int64_t packedRowBytes(int64_t k) { return (k + kBlock - 1) / kBlock * kBlockBytes; }

/// Packs a row of `k` codes (one per byte, low nibble) into packedRowBytes(k)
/// bytes at `out`.
inline void packRow(const uint8_t *codes, int64_t k, uint8_t *out) {
  std::memset(out, 0, static_cast<size_t>(packedRowBytes(k)));
  for (int64_t i = 0; i < k; ++i)
    out[i / 2] |= static_cast<uint8_t>((codes[i] & 0xF) << (4 * (i % 2)));
}

/// The code of element `i` of a packed row.
inline uint8_t codeAt(const uint8_t *row, int64_t i) {
  return (row[i / 2] >> (4 * (i % 2))) & 0xF;
}

} // namespace moec::rt::mxfp4

#endif // MOEC_RUNTIME_MXFP4_H
