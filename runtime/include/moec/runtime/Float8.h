//===- Float8.h - FP8 e4m3 (f8E4M3FN) encoding on the host ------*- C++ -*-===//
//
// The e4m3 format of moe's FP8 path (docs/dialect.md): 1 sign, 4 exponent
// (bias 7), 3 mantissa bits, no infinities, 0x7F/0xFF NaN, largest finite 448.
// Encoding rounds to nearest, ties to even, and saturates to +-448, as the
// quantisation of moe.quantize and the compile-time weight cast do.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_FLOAT8_H
#define MOEC_RUNTIME_FLOAT8_H

#include <cmath>
#include <cstdint>

namespace moec::rt {

inline constexpr double kE4M3Max = 448.0;
/// Scales cover blocks of 128 along K (and along N for the weights).
inline constexpr int64_t kScaleBlock = 128;

/// The value of e4m3 bits (NaN for 0x7F and 0xFF).
inline float decodeE4M3(uint8_t bits) {
  int exponent = (bits >> 3) & 0xF, mantissa = bits & 0x7;
  float magnitude;
  if (exponent == 0xF && mantissa == 0x7)
    magnitude = NAN;
  else if (exponent == 0)
    magnitude = std::ldexp(static_cast<float>(mantissa), -9); // subnormal: m * 2^-9
  else
    magnitude = std::ldexp(1.0f + mantissa / 8.0f, exponent - 7);
  return (bits & 0x80) ? -magnitude : magnitude;
}

/// `value` rounded to the nearest e4m3 (ties to even), saturating at +-448.
inline uint8_t encodeE4M3(double value) {
  if (std::isnan(value))
    return 0x7F;
  uint8_t sign = std::signbit(value) ? 0x80 : 0x00;
  double magnitude = std::fabs(value);
  if (magnitude >= kE4M3Max)
    return sign | 0x7E;
  if (magnitude < 0x1p-6) // subnormal range: steps of 2^-9 (8 steps reach 2^-6, code 0x08)
    return sign | static_cast<uint8_t>(std::nearbyint(magnitude * 0x1p9));
  int exponent = std::ilogb(magnitude); // magnitude in [2^e, 2^(e+1))
  double steps = std::nearbyint(std::ldexp(magnitude, 3 - exponent)); // in [8, 16]
  if (steps == 16) {
    steps = 8;
    ++exponent;
  }
  int code = ((exponent + 7) << 3) | (static_cast<int>(steps) - 8);
  return sign | static_cast<uint8_t>(code > 0x7E ? 0x7E : code);
}

} // namespace moec::rt

#endif // MOEC_RUNTIME_FLOAT8_H
