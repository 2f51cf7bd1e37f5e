//===- MXFP4Layout.cuh - MXFP4 codes as the GPU stores them ----*- CUDA -*-===//
//
// weights.bin, the checkpoints and the CPU runtime keep MXFP4 codes as gpt-oss
// does (moec/runtime/MXFP4.h): a row is 32-bit little-endian words of 8 codes,
// word j holding columns 8j .. 8j + 7, column 8j + i in nibble i (bits 4i ..
// 4i + 2 the magnitude, 4i + 3 the sign). The GPU re-lays out every word once,
// in place, when a model is created (relayoutMXFP4, RelayoutMXFP4.cu; the
// generated create() calls it for each MXFP4 weight), so that the kernels turn
// a word into bf16 with 8 integer instructions (two a pair of codes) where the
// stored order takes 15. Words stay where they are, and a zero word stays
// zero (the layout is linear over GF(2)): the padding past K is still zeros.
//
// The GPU layout is defined by its decoding, decodeMXFP4Word: with the mask
// P = 0x81C081C0 (bf16x2 bits 6-8 and 15 of each half),
//
//   pair[0] = w & P                    pair[1] = (w << 6) & P
//   pair[2] = rotl(w, 12) & P          pair[3] = ((w << 2) ^ (w >> 6)) & P
//
// pair[p] is columns 8j + 2p (low half) and 8j + 2p + 1 (high half) as bf16
// bits (magnitude << 6) | (sign << 15), which hold code · 2^-126 exactly (the
// magnitude's exponent bits land in the exponent's two low bits and its
// mantissa bit in the mantissa's top bit; code 0.5 is a bf16 subnormal):
// multiplying by 2^(s - 1) applies scale byte s. Each pair's bits P are a
// byte of the stored word (byte p: columns 2p and 2p + 1), so the stored word
// is compressMXFP4Pairs(decode(w)), a linear bijection whose inverse
// MXFP4Encoder applies (four disjoint shifts of P cannot tile a word: one pair
// XORs two of them, and the inverse solves for it).
//
// Anything that reads MXFP4 weights on the GPU (groupedMatmulMXFP4, a
// dequantising prefill pass) decodes with decodeMXFP4Word.
//
//===----------------------------------------------------------------------===//
#ifndef MOEC_RUNTIME_SRC_CUDA_MXFP4LAYOUT_CUH
#define MOEC_RUNTIME_SRC_CUDA_MXFP4LAYOUT_CUH

#include "moec/runtime/MXFP4.h"

#include <cuda_runtime.h>

#include <cstdint>

namespace moec::rt::cuda {

/// The bits of a bf16x2 that a pair of codes sets: each half's bits 6-8 (the
/// magnitude) and 15 (the sign).
inline constexpr uint32_t kMXFP4PairBits = 0x81C081C0u;

/// A word of 8 codes in the GPU layout as 4 bf16x2, code · 2^-126 each:
/// pair[p] holds columns 2p (low half) and 2p + 1 (high half) of the word.
/// (The rotation compiles to one funnel shift.)
__host__ __device__ constexpr void decodeMXFP4Word(uint32_t w, uint32_t (&pair)[4]) {
  pair[0] = w & kMXFP4PairBits;
  pair[1] = (w << 6) & kMXFP4PairBits;
  pair[2] = ((w << 12) | (w >> 20)) & kMXFP4PairBits;
  pair[3] = ((w << 2) ^ (w >> 6)) & kMXFP4PairBits;
}

#ifdef __CUDACC__
/// a · b for bf16x2 operands, rounded to nearest (exact for the powers of two
/// that scale the decoded pairs, subnormals included).
__device__ inline unsigned mulBF16x2(unsigned a, unsigned b) {
  unsigned d;
  asm("mul.rn.bf16x2 %0, %1, %2;\n" : "=r"(d) : "r"(a), "r"(b));
  return d;
}

/// bf16x2 of 2^(s - 1) for a scale byte s <= 128: the 2^126 that undoes the
/// codes' placement (decodeMXFP4Word) times 2^(s - 127). One multiply-add:
/// the exponent field s + 126 in both halves.
__device__ inline unsigned scaleMultiplier(unsigned s) { return s * 0x00800080u + 0x3F003F00u; }
/// For s > 128 (no bf16 holds 2^(s - 1)): 2^127 first (scaleMultiplier(128)),
/// then `second` = 2^(s - 128), or NaN for 0xFF.
__device__ inline unsigned largeScaleSecond(unsigned s) {
  unsigned second = s == mxfp4::kScaleNaN ? 0x7FC0u : s > 128u ? (s - 1u) << 7 : 0x3F80u;
  return second | (second << 16);
}
#endif

/// The codes of 4 pairs (bits kMXFP4PairBits of each) as a stored word: pair
/// p's low half is nibble 2p, its high half nibble 2p + 1 (the sign of each
/// from bit 15 of its half, the magnitude from bits 6-8).
__host__ __device__ constexpr uint32_t compressMXFP4Pairs(const uint32_t (&pair)[4]) {
  uint32_t word = 0;
  for (int p = 0; p < 4; ++p) {
    uint32_t x = pair[p];
    uint32_t lo = ((x >> 6) & 7u) | (((x >> 15) & 1u) << 3);
    uint32_t hi = ((x >> 22) & 7u) | (((x >> 31) & 1u) << 3);
    word |= (lo | (hi << 4)) << (8 * p);
  }
  return word;
}

/// The inverse of the GPU layout: stored word -> GPU word, as the XOR of
/// column[i] over the stored word's set bits i. The columns solve
/// compressMXFP4Pairs(decodeMXFP4Word(w)) = 2^i by Gauss-Jordan elimination
/// over GF(2) (constexpr: computed once, by the compiler).
struct MXFP4Encoder {
  uint32_t column[32];

  __host__ __device__ uint32_t operator()(uint32_t stored) const {
    uint32_t word = 0;
    for (int i = 0; i < 32; ++i)
      word ^= (stored >> i & 1u) ? column[i] : 0u;
    return word;
  }
};

/// The encoder; `ok` false if the layout were not invertible (a static
/// assertion below says it is).
struct MXFP4EncoderBuild {
  MXFP4Encoder encoder;
  bool ok;
};
__host__ __device__ constexpr MXFP4EncoderBuild buildMXFP4Encoder() {
  // image[j]: the stored word that GPU word preimage[j] decodes to; start
  // from the unit GPU words and reduce image to the unit stored words.
  uint32_t image[32] = {}, preimage[32] = {};
  for (int j = 0; j < 32; ++j) {
    uint32_t pair[4] = {};
    decodeMXFP4Word(1u << j, pair);
    image[j] = compressMXFP4Pairs(pair);
    preimage[j] = 1u << j;
  }
  for (int bit = 0; bit < 32; ++bit) {
    int pivot = -1;
    for (int j = bit; j < 32 && pivot < 0; ++j)
      if (image[j] >> bit & 1u)
        pivot = j;
    if (pivot < 0)
      return {{}, false};
    uint32_t t = image[bit];
    image[bit] = image[pivot];
    image[pivot] = t;
    t = preimage[bit];
    preimage[bit] = preimage[pivot];
    preimage[pivot] = t;
    for (int j = 0; j < 32; ++j)
      if (j != bit && (image[j] >> bit & 1u)) {
        image[j] ^= image[bit];
        preimage[j] ^= preimage[bit];
      }
  }
  MXFP4EncoderBuild build{{}, true};
  for (int i = 0; i < 32; ++i)
    build.encoder.column[i] = preimage[i];
  return build;
}
static_assert(buildMXFP4Encoder().ok, "the GPU's MXFP4 layout must be invertible");

/// The encoder, for the host and for kernels (passed by value).
inline constexpr MXFP4Encoder kMXFP4Encoder = buildMXFP4Encoder().encoder;

} // namespace moec::rt::cuda

#endif // MOEC_RUNTIME_SRC_CUDA_MXFP4LAYOUT_CUH
