//===- TestUtil.h - shared helpers of the runtime's tests ------*- C++ -*-===//

#ifndef MOEC_RUNTIME_TEST_TESTUTIL_H
#define MOEC_RUNTIME_TEST_TESTUTIL_H

#include "moec/runtime/Status.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace moec::rt::test {

/// Fails the test with the status's message unless it is OK.
#define ASSERT_OK(expr)                                                            \
  do {                                                                             \
    ::moec::rt::Status s_ = (expr);                                                \
    ASSERT_TRUE(s_.isOk()) << s_.message();                                        \
  } while (0)

/// Normal random values (never all zeros).
inline std::vector<float> randomVector(size_t n, std::mt19937 &rng, float scale = 1.0f) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (float &x : v)
    x = normal(rng);
  return v;
}

/// Random inputs of one MoE block in the grouped phase: T tokens, top-K slots,
/// E experts with gate/up [E, 2I, H] and down [E, H, I], routing weights, a
/// shared-expert addend with its gate, and uniformly drawn expert ids that the
/// test then overwrites with sentinels where it wants them.
struct RandomBlock {
  int64_t tokens, hidden, intermediate, experts, topK;
  std::vector<float> x, gateUp, down, gateUpBias, weights, shared, sharedGate;
  std::vector<int32_t> ids;

  RandomBlock(int64_t tokens, int64_t hidden, int64_t intermediate, int64_t experts, int64_t topK,
              std::mt19937 &rng)
      : tokens(tokens), hidden(hidden), intermediate(intermediate), experts(experts), topK(topK),
        x(randomVector(tokens * hidden, rng)),
        gateUp(randomVector(experts * 2 * intermediate * hidden, rng, 0.2f)),
        down(randomVector(experts * hidden * intermediate, rng, 0.2f)),
        gateUpBias(randomVector(experts * 2 * intermediate, rng)),
        weights(randomVector(tokens * topK, rng)), shared(randomVector(tokens * hidden, rng)),
        sharedGate(randomVector(tokens, rng)), ids(tokens * topK) {
    std::uniform_int_distribution<int> pick(0, static_cast<int>(experts) - 1);
    for (int32_t &id : ids)
      id = pick(rng);
  }
  int64_t slots() const { return tokens * topK; }
};

/// `value` rounded to bf16 (nearest even): its bits.
inline uint16_t toBF16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  bits += 0x7FFF + ((bits >> 16) & 1); // round to nearest even
  return static_cast<uint16_t>(bits >> 16);
}

inline float fromBF16(uint16_t bits) {
  uint32_t wide = uint32_t(bits) << 16;
  float value;
  std::memcpy(&value, &wide, 4);
  return value;
}

/// `values` rounded to bf16 in place; returns their bf16 bits (a kernel's
/// weights), so a reference runs on exactly the values the kernel reads.
inline std::vector<uint16_t> roundToBF16(std::vector<float> &values) {
  std::vector<uint16_t> bits(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    bits[i] = toBF16(values[i]);
    values[i] = fromBF16(bits[i]);
  }
  return bits;
}

} // namespace moec::rt::test

#endif // MOEC_RUNTIME_TEST_TESTUTIL_H
