//===- Sampling.h - picking a token from logits, on the host or the GPU -*- C++ -*-===//
//
// moec_generate's rule for the next token (moec.h, moec_sampling), written once
// so that the host (runtime/src/Generate.cpp) and the GPU
// (moec/runtime/cuda/Sampling.h) pick the same token from the same logits and
// seed, bit for bit:
//
// * Greedy (temperature 0): the first index of the largest logit; a NaN counts
//   as -inf (a row of NaN and -inf gives 0).
// * Sampling: each logit divided by the temperature (an f32 division, -0 made
//   +0, NaN made -inf) is a key; the keys in descending order, ties by
//   ascending id; the first top_k of them are kept (0: all). Each kept key's
//   weight is exp(key - largest key) computed by samplingExp (only IEEE
//   operations and fused multiply-adds, so every compiler and the GPU get the
//   same double) and stored as an integer number of 2^-40 units, so that sums
//   do not depend on their order; the largest key weighs 2^40. top_p (< 1)
//   keeps the shortest prefix whose integer mass reaches top_p times the kept
//   total (at least one token). A draw u in [0, 1) picks the first kept token
//   whose running mass exceeds floor(u · mass).
// * The draw of sequence s's new token number n (0 for the prefill's token) is
//   samplingUniform(seed, s, n): a counter-based hash (splitmix64), so neither
//   side keeps generator state and every (sequence, token) draw is
//   independent of the batch and of the order in which steps are queued.
//
// The functions marked MOEC_HOST_DEVICE compile for both sides; the host's
// whole pick (greedyToken, sampleToken) is the reference that the GPU kernels
// are tested against (runtime/test/CudaSamplingTest.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_SAMPLING_H
#define MOEC_RUNTIME_SAMPLING_H

#include <math.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#ifdef __CUDACC__
#define MOEC_HOST_DEVICE __host__ __device__
#else
#define MOEC_HOST_DEVICE
#endif

namespace moec::rt {

/// The sampling parameters of moec_sampling (moec.h), checked by the caller:
/// temperature >= 0, topK >= 0, topP in (0, 1].
struct Sampling {
  float temperature = 0.0f;
  int32_t topK = 0;
  float topP = 1.0f;
  uint64_t seed = 0;
  bool greedy() const { return !(temperature > 0.0f); }
};

/// A kept token's weight is an integer count of 2^-kSamplingWeightBits.
constexpr int kSamplingWeightBits = 40;

/// splitmix64's output function (Steele, Lea and Flood; as in Java's
/// SplittableRandom): a bijection of 64-bit words that mixes every bit.
MOEC_HOST_DEVICE inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// The uniform draw in [0, 1) (a multiple of 2^-53) of `sequence`'s new token
/// number `step` under `seed`.
MOEC_HOST_DEVICE inline double samplingUniform(uint64_t seed, uint64_t sequence, uint64_t step) {
  uint64_t h = splitmix64(seed);
  h = splitmix64(h ^ sequence);
  h = splitmix64(h ^ step);
  return static_cast<double>(h >> 11) * 0x1p-53;
}

/// The sort key of a logit: logit / temperature in f32 (correctly rounded on
/// both sides), -0 as +0 and NaN as -inf, so that the keys order totally.
MOEC_HOST_DEVICE inline float samplingKey(float logit, float temperature) {
#ifdef __CUDA_ARCH__
  float key = __fdiv_rn(logit, temperature);
#else
  float key = logit / temperature;
#endif
  if (key != key)
    return -std::numeric_limits<float>::infinity();
  return key + 0.0f; // -0 + +0 is +0
}

/// exp(x) for x <= 0 where it matters (x >= -30; below that, and for NaN, 0):
/// x = k·ln2 + r with |r| <= ln2/2, exp(r) by its Taylor series to r^13 in
/// Horner form, times 2^k. Only multiplications by constants, fused
/// multiply-adds and exact scalings, so the host and the GPU compute the same
/// double (the error, about 1e-15 relative, does not matter for that).
MOEC_HOST_DEVICE inline double samplingExp(double x) {
  if (!(x >= -30.0))
    return 0.0;
  if (x > 0.0)
    x = 0.0;
  double k = rint(x * 1.4426950408889634); // 1 / ln 2
  double r = fma(k, -6.93147180369123816490e-01, x); // ln 2, high part
  r = fma(k, -1.90821492927058770002e-10, r);        // ln 2, low part
  double p = 1.0 / 6227020800.0;                     // 1/13!
  p = fma(p, r, 1.0 / 479001600.0);
  p = fma(p, r, 1.0 / 39916800.0);
  p = fma(p, r, 1.0 / 3628800.0);
  p = fma(p, r, 1.0 / 362880.0);
  p = fma(p, r, 1.0 / 40320.0);
  p = fma(p, r, 1.0 / 5040.0);
  p = fma(p, r, 1.0 / 720.0);
  p = fma(p, r, 1.0 / 120.0);
  p = fma(p, r, 1.0 / 24.0);
  p = fma(p, r, 1.0 / 6.0);
  p = fma(p, r, 0.5);
  p = fma(p, r, 1.0);
  p = fma(p, r, 1.0);
  return ldexp(p, static_cast<int>(k)); // k in [-44, 0]: exact
}

/// A kept key's integer weight: floor(exp(key - top) · 2^40); the top key's
/// is 2^40 exactly.
MOEC_HOST_DEVICE inline uint64_t samplingWeight(float key, float top) {
  if (key == top)
    return uint64_t(1) << kSamplingWeightBits;
  double w = samplingExp(static_cast<double>(key) - static_cast<double>(top));
  return static_cast<uint64_t>(w * 0x1p40);
}

/// How many of `kept` sorted tokens top-p keeps: the first n (>= 1) whose mass
/// prefix(n - 1) reaches topP · prefix(kept - 1), `prefix` being the running
/// integer sums. Monotone in n, so the GPU finds n by bisection.
MOEC_HOST_DEVICE inline bool samplingReaches(uint64_t prefix, uint64_t total, float topP) {
  return static_cast<double>(prefix) >= static_cast<double>(topP) * static_cast<double>(total);
}

/// The draw's threshold in integer mass: floor(u · mass), below mass.
MOEC_HOST_DEVICE inline uint64_t samplingThreshold(double u, uint64_t mass) {
  uint64_t draw = static_cast<uint64_t>(u * static_cast<double>(mass));
  return draw < mass ? draw : mass - 1;
}

/// Greedy on the host: the first index of the largest logit (NaN as -inf).
inline int64_t greedyToken(const float *logits, int64_t vocab) {
  int64_t best = 0;
  float bestKey = -std::numeric_limits<float>::infinity();
  for (int64_t v = 0; v < vocab; ++v) {
    float key = logits[v] != logits[v] ? -std::numeric_limits<float>::infinity() : logits[v];
    if (key > bestKey) {
      bestKey = key;
      best = v;
    }
  }
  return best;
}

/// Scratch that sampleToken reuses between calls.
struct SamplingScratch {
  std::vector<std::pair<float, int64_t>> keys;
  std::vector<uint64_t> prefix;
};

/// The host's pick from `vocab` logits with draw `u` (the file comment's rule).
inline int64_t sampleToken(const float *logits, int64_t vocab, const Sampling &sampling,
                           double u, SamplingScratch &scratch) {
  if (sampling.greedy())
    return greedyToken(logits, vocab);
  auto &keys = scratch.keys;
  keys.clear();
  for (int64_t v = 0; v < vocab; ++v)
    keys.push_back({samplingKey(logits[v], sampling.temperature), v});
  auto before = [](const std::pair<float, int64_t> &a, const std::pair<float, int64_t> &b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  size_t kept = sampling.topK > 0 ? std::min<size_t>(sampling.topK, keys.size()) : keys.size();
  std::partial_sort(keys.begin(), keys.begin() + static_cast<std::ptrdiff_t>(kept), keys.end(),
                    before);
  auto &prefix = scratch.prefix;
  prefix.resize(kept);
  uint64_t sum = 0;
  for (size_t i = 0; i < kept; ++i)
    prefix[i] = sum += samplingWeight(keys[i].first, keys[0].first);
  size_t n = kept;
  if (sampling.topP < 1.0f) {
    n = 1;
    while (n < kept && !samplingReaches(prefix[n - 1], prefix[kept - 1], sampling.topP))
      ++n;
  }
  uint64_t draw = samplingThreshold(u, prefix[n - 1]);
  size_t i = 0;
  while (prefix[i] <= draw)
    ++i;
  return keys[i].second;
}

} // namespace moec::rt

#endif // MOEC_RUNTIME_SAMPLING_H
