//===- MXFP4LayoutTest.cu - the GPU's MXFP4 code layout, on the host -------===//
//
// MXFP4Layout.cuh's decoding and its inverse are host-callable: checked here,
// without a GPU, against MXFP4.h's packed order and e2m1 values. Every code
// at every place of a word decodes to its value times 2^-126 (bf16 bits read
// as the top half of an f32), the encoder inverts the decoding on random
// words, and the layout is linear (zero words stay zero: the padding past K).
//
//===----------------------------------------------------------------------===//

#include "MXFP4Layout.cuh"
#include "moec/runtime/MXFP4.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>

namespace {

using moec::rt::cuda::compressMXFP4Pairs;
using moec::rt::cuda::decodeMXFP4Word;
using moec::rt::cuda::kMXFP4Encoder;
using moec::rt::cuda::kMXFP4PairBits;
namespace mx = moec::rt::mxfp4;

/// The bf16 in half `high` of `pair`, as a float.
float halfOf(uint32_t pair, bool high) {
  uint32_t bits = (high ? pair >> 16 : pair & 0xFFFFu) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

/// A stored word of 8 codes packed as MXFP4.h packs a row (of one block).
uint32_t storedWord(const uint8_t (&codes)[8]) {
  uint8_t bytes[mx::kBlockBytes];
  mx::packRow(codes, 8, bytes);
  uint32_t word;
  std::memcpy(&word, bytes, sizeof word);
  return word;
}

TEST(MXFP4Layout, EveryCodeDecodesToItsValueAtEveryColumn) {
  std::mt19937 rng(11);
  for (int column = 0; column < 8; ++column)
    for (int code = 0; code < 16; ++code)
      for (int trial = 0; trial < 8; ++trial) {
        uint8_t codes[8];
        for (uint8_t &c : codes)
          c = static_cast<uint8_t>(rng() % 16);
        codes[column] = static_cast<uint8_t>(code);
        uint32_t pair[4];
        decodeMXFP4Word(kMXFP4Encoder(storedWord(codes)), pair);
        for (int i = 0; i < 8; ++i) {
          float got = std::ldexp(halfOf(pair[i / 2], i % 2 == 1), 126);
          float want = mx::decodeE2M1(codes[i]);
          ASSERT_EQ(got, want) << "column " << i << ", code " << int(codes[i]);
          ASSERT_EQ(std::signbit(got), std::signbit(want)) << "column " << i;
        }
        for (uint32_t p : pair)
          ASSERT_EQ(p & ~kMXFP4PairBits, 0u);
      }
}

TEST(MXFP4Layout, EncoderInvertsTheDecoding) {
  std::mt19937 rng(12);
  for (int trial = 0; trial < 200000; ++trial) {
    uint32_t stored = rng();
    uint32_t pair[4];
    decodeMXFP4Word(kMXFP4Encoder(stored), pair);
    ASSERT_EQ(compressMXFP4Pairs(pair), stored) << std::hex << stored;
  }
  // A bijection: distinct stored words, distinct GPU words.
  for (int bit = 0; bit < 32; ++bit)
    EXPECT_NE(kMXFP4Encoder(1u << bit), 0u) << bit;
}

TEST(MXFP4Layout, IsLinearSoZeroWordsStayZero) {
  EXPECT_EQ(kMXFP4Encoder(0u), 0u);
  std::mt19937 rng(13);
  for (int trial = 0; trial < 10000; ++trial) {
    uint32_t a = rng(), b = rng();
    ASSERT_EQ(kMXFP4Encoder(a ^ b), kMXFP4Encoder(a) ^ kMXFP4Encoder(b));
  }
}

} // namespace
