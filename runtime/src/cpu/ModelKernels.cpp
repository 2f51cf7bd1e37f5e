//===- ModelKernels.cpp - CPU kernels for the whole-model ops ---------------===//

#include "moec/runtime/cpu/ModelKernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <new>
#include <stdexcept>

namespace moec::rt::cpu {
namespace {

/// Elements per parallel chunk of the elementwise kernels: small enough to
/// spread a hidden state over the pool, large enough to pay for the wake-up.
constexpr int64_t kElementBlock = 4096;

/// Zero-filled storage of `count` floats from calloc (lazily backed by the
/// kernel's zero pages when large); null for count 0.
float *allocateZeroed(int64_t count) {
  if (count == 0)
    return nullptr;
  auto *p = static_cast<float *>(std::calloc(static_cast<size_t>(count), sizeof(float)));
  if (!p)
    throw std::bad_alloc();
  return p;
}

/// a · b, or std::bad_alloc where it overflows what one allocation can hold.
int64_t checkedProduct(int64_t a, int64_t b) {
  int64_t limit = static_cast<int64_t>(std::numeric_limits<size_t>::max() / sizeof(float));
  limit = std::min(limit, std::numeric_limits<int64_t>::max());
  if (a != 0 && b > limit / a)
    throw std::bad_alloc();
  return a * b;
}

/// Σ a[i]·b[i] in f32 over four independent partial sums (vectorisable
/// without reassociation; the same order whatever the thread count).
float innerProduct(const float *a, const float *b, int64_t count) {
  float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int64_t i = 0;
  for (; i + 4 <= count; i += 4) {
    s0 += a[i] * b[i];
    s1 += a[i + 1] * b[i + 1];
    s2 += a[i + 2] * b[i + 2];
    s3 += a[i + 3] * b[i + 3];
  }
  for (; i < count; ++i)
    s0 += a[i] * b[i];
  return (s0 + s1) + (s2 + s3);
}

} // namespace

//===----------------------------------------------------------------------===//
// KVCache
//===----------------------------------------------------------------------===//

KVCache::KVCache(int64_t maxBatch, int64_t maxSeq, std::vector<Slot> slots)
    : maxBatch_(maxBatch), maxSeq_(maxSeq) {
  if (maxBatch < 0 || maxSeq < 0)
    throw std::invalid_argument("KVCache: negative batch or sequence size");
  int64_t rows = checkedProduct(maxBatch, maxSeq);
  slots_.reserve(slots.size());
  for (const Slot &shape : slots) {
    if (shape.keyColumns < 0 || shape.valueColumns < 0)
      throw std::invalid_argument("KVCache: negative slot width");
    Storage storage;
    storage.shape = shape;
    storage.keys.reset(allocateZeroed(checkedProduct(rows, shape.keyColumns)));
    storage.values.reset(allocateZeroed(checkedProduct(rows, shape.valueColumns)));
    storage.lengths.assign(static_cast<size_t>(maxBatch), 0);
    slots_.push_back(std::move(storage));
  }
}

void KVCache::reset() {
  for (Storage &storage : slots_)
    std::fill(storage.lengths.begin(), storage.lengths.end(), 0);
}

void KVCache::reset(int64_t sequence) {
  if (sequence < 0 || sequence >= maxBatch_)
    return;
  for (Storage &storage : slots_)
    storage.lengths[sequence] = 0;
}

int64_t KVCache::length(size_t slot, int64_t sequence) const {
  if (slot >= slots_.size() || sequence < 0 || sequence >= maxBatch_)
    return 0;
  return slots_[slot].lengths[sequence];
}

float *KVCache::keys(size_t slot, int64_t sequence) {
  return slots_[slot].keys.get() + sequence * maxSeq_ * slots_[slot].shape.keyColumns;
}

float *KVCache::values(size_t slot, int64_t sequence) {
  return slots_[slot].values.get() + sequence * maxSeq_ * slots_[slot].shape.valueColumns;
}

const float *KVCache::keys(size_t slot, int64_t sequence) const {
  return const_cast<KVCache *>(this)->keys(slot, sequence);
}

const float *KVCache::values(size_t slot, int64_t sequence) const {
  return const_cast<KVCache *>(this)->values(slot, sequence);
}

void KVCache::setLength(size_t slot, int64_t sequence, int64_t length) {
  slots_[slot].lengths[sequence] = length;
}

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

bool checkIds(const int64_t *ids, int64_t n, int64_t vocab, std::string &error) {
  for (int64_t t = 0; t < n; ++t)
    if (ids[t] < 0 || ids[t] >= vocab) {
      error = "moe.embedding: token " + std::to_string(t) + " has id " + std::to_string(ids[t]) +
              ", outside the table's rows [0, " + std::to_string(vocab) + ")";
      return false;
    }
  return true;
}

bool embedding(ThreadPool &pool, const int64_t *ids, int64_t n, const float *table, int64_t vocab,
               int64_t hidden, float *out, std::string &error) {
  if (!checkIds(ids, n, vocab, error))
    return false;
  pool.parallelFor(n, static_cast<double>(n) * hidden / 4, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t)
      std::memcpy(out + t * hidden, table + ids[t] * hidden, sizeof(float) * hidden);
  });
  return true;
}

void rmsNorm(ThreadPool &pool, const float *x, int64_t m, int64_t k, const float *weight,
             int64_t group, float epsilon, float weightOffset, float *y) {
  if (group <= 0)
    return; // the op's verifier rules it out
  int64_t groupsPerRow = k / group;
  pool.parallelFor(m * groupsPerRow, static_cast<double>(m) * k * 2, [&](int64_t begin,
                                                                         int64_t end) {
    for (int64_t g = begin; g < end; ++g) {
      const float *in = x + (g / groupsPerRow) * k + (g % groupsPerRow) * group;
      float *o = y + (g / groupsPerRow) * k + (g % groupsPerRow) * group;
      double squares = 0;
      for (int64_t j = 0; j < group; ++j)
        squares += static_cast<double>(in[j]) * in[j];
      auto inverse = static_cast<float>(
          1.0 / std::sqrt(squares / static_cast<double>(group) + static_cast<double>(epsilon)));
      // Each element is read before it is written: y may be x.
      for (int64_t j = 0; j < group; ++j)
        o[j] = in[j] * inverse * (weightOffset + weight[j]);
    }
  });
}

void rotary(ThreadPool &pool, const float *x, int64_t n, int64_t columns, const int64_t *positions,
            const float *invFreq, int64_t halfRotary, int64_t headDim, int64_t offset,
            bool interleaved, float scale, float *y) {
  if (headDim <= 0)
    return; // the op's verifier rules it out
  int64_t headCount = columns / headDim;
  // Work: the angles' cosines and sines in double, then the rotations.
  double work = static_cast<double>(n) * (halfRotary * 40 + headCount * halfRotary * 4);
  pool.parallelFor(n, work, [&](int64_t begin, int64_t end) {
    std::vector<double> cosine(halfRotary), sine(halfRotary);
    for (int64_t t = begin; t < end; ++t) {
      float *row = y + t * columns;
      if (row != x + t * columns)
        std::memcpy(row, x + t * columns, sizeof(float) * columns);
      // The angle in double: positions times a frequency lose too much in f32.
      auto position = static_cast<double>(positions[t]);
      for (int64_t i = 0; i < halfRotary; ++i) {
        double angle = position * static_cast<double>(invFreq[i]);
        cosine[i] = std::cos(angle) * scale;
        sine[i] = std::sin(angle) * scale;
      }
      for (int64_t head = 0; head < headCount; ++head) {
        float *slice = row + head * headDim + offset;
        for (int64_t i = 0; i < halfRotary; ++i) {
          float &first = interleaved ? slice[2 * i] : slice[i];
          float &second = interleaved ? slice[2 * i + 1] : slice[i + halfRotary];
          double a = first, b = second;
          first = static_cast<float>(a * cosine[i] - b * sine[i]);
          second = static_cast<float>(b * cosine[i] + a * sine[i]);
        }
      }
    }
  });
}

namespace {

/// The checks of one attention call before anything is written: the slot and
/// its shapes, then every token's sequence and position in token order (a
/// position may overwrite or extend its sequence, never leave a gap).
bool checkAttention(const KVCache &cache, int64_t slot, const float *keyShared,
                    const int64_t *positions, const int64_t *sequences, int64_t n, int64_t heads,
                    int64_t kvHeads, int64_t keyDim, int64_t sharedDim, int64_t valueDim,
                    std::string &error) {
  const std::string op = "moe.attention: ";
  if (slot < 0 || static_cast<size_t>(slot) >= cache.slots()) {
    error = op + "layer " + std::to_string(slot) + " has no slot in the KV cache (" +
            std::to_string(cache.slots()) + " slots)";
    return false;
  }
  if (kvHeads <= 0 || heads <= 0 || heads % kvHeads != 0) {
    error = op + std::to_string(heads) + " query heads are not a multiple of " +
            std::to_string(kvHeads) + " KV heads";
    return false;
  }
  const KVCache::Slot &shape = cache.slot(static_cast<size_t>(slot));
  if (shape.keyColumns != kvHeads * keyDim + sharedDim ||
      shape.valueColumns != kvHeads * valueDim) {
    error = op + "slot " + std::to_string(slot) + " holds key rows of " +
            std::to_string(shape.keyColumns) + " columns and value rows of " +
            std::to_string(shape.valueColumns) + ", the op writes " +
            std::to_string(kvHeads * keyDim + sharedDim) + " and " +
            std::to_string(kvHeads * valueDim);
    return false;
  }
  if (sharedDim > 0 && !keyShared) {
    error = op + "a shared key slice of " + std::to_string(sharedDim) + " columns without data";
    return false;
  }
  std::vector<int64_t> lengths(static_cast<size_t>(cache.maxBatch()));
  for (int64_t s = 0; s < cache.maxBatch(); ++s)
    lengths[s] = cache.length(static_cast<size_t>(slot), s);
  return checkTokens(positions, sequences, n, cache.maxBatch(), cache.maxSeq(), lengths, error);
}

} // namespace

bool checkTokens(const int64_t *positions, const int64_t *sequences, int64_t n, int64_t maxBatch,
                 int64_t maxSeq, std::vector<int64_t> &lengths, std::string &error) {
  const std::string op = "moe.attention: ";
  lengths.resize(static_cast<size_t>(maxBatch), 0);
  for (int64_t t = 0; t < n; ++t) {
    int64_t sequence = sequences[t], position = positions[t];
    std::string token = op + "token " + std::to_string(t);
    if (sequence < 0 || sequence >= maxBatch) {
      error = token + " has sequence " + std::to_string(sequence) +
              ", outside the KV cache's [0, " + std::to_string(maxBatch) + ")";
      return false;
    }
    if (position < 0 || position >= maxSeq) {
      error = token + " has position " + std::to_string(position) +
              ", outside the KV cache's [0, " + std::to_string(maxSeq) + ")";
      return false;
    }
    int64_t &length = lengths[sequence];
    if (length < 0)
      continue; // unknown: not checked
    if (position > length) {
      error = token + " has position " + std::to_string(position) + " of sequence " +
              std::to_string(sequence) + ", which holds " + std::to_string(length) +
              " positions: a gap";
      return false;
    }
    length = std::max(length, position + 1);
  }
  return true;
}

bool attention(ThreadPool &pool, KVCache &cache, int64_t slot, const float *query,
               const float *key, const float *value, const float *keyShared, const float *sinks,
               const int64_t *positions, const int64_t *sequences, int64_t n, int64_t heads,
               int64_t kvHeads, int64_t keyDim, int64_t sharedDim, int64_t valueDim, float scale,
               int64_t window, float *out, std::string &error) {
  if (!checkAttention(cache, slot, keyShared, positions, sequences, n, heads, kvHeads, keyDim,
                      sharedDim, valueDim, error))
    return false;
  auto index = static_cast<size_t>(slot);
  const int64_t keyColumns = kvHeads * keyDim + sharedDim, valueColumns = kvHeads * valueDim;

  // The writes, in token order (a position written twice keeps the later row).
  for (int64_t t = 0; t < n; ++t) {
    int64_t sequence = sequences[t], position = positions[t];
    float *keyRow = cache.keys(index, sequence) + position * keyColumns;
    std::memcpy(keyRow, key + t * kvHeads * keyDim, sizeof(float) * kvHeads * keyDim);
    if (sharedDim > 0)
      std::memcpy(keyRow + kvHeads * keyDim, keyShared + t * sharedDim, sizeof(float) * sharedDim);
    std::memcpy(cache.values(index, sequence) + position * valueColumns, value + t * valueColumns,
                sizeof(float) * valueColumns);
    cache.setLength(index, sequence, std::max(cache.length(index, sequence), position + 1));
  }

  // The reads: one (token, head) pair an item.
  const int64_t queryDim = keyDim + sharedDim, group = heads / kvHeads;
  double attended = 0; // the attended positions of every token, for the work
  for (int64_t t = 0; t < n; ++t)
    attended += static_cast<double>(window > 0 ? std::min(positions[t] + 1, window)
                                               : positions[t] + 1);
  double work = attended * heads * (queryDim + valueDim + 8);
  pool.parallelFor(n * heads, work, [&](int64_t begin, int64_t end) {
    std::vector<float> scores, sum(valueDim);
    for (int64_t item = begin; item < end; ++item) {
      int64_t t = item / heads, h = item % heads, kv = h / group;
      int64_t position = positions[t];
      int64_t first = window > 0 ? std::max<int64_t>(0, position - window + 1) : 0;
      const float *q = query + t * heads * queryDim + h * queryDim;
      const float *keys = cache.keys(index, sequences[t]);
      const float *values = cache.values(index, sequences[t]);

      scores.resize(position - first + 1);
      float best = sinks ? sinks[h] : -std::numeric_limits<float>::infinity();
      for (int64_t p = first; p <= position; ++p) {
        const float *k = keys + p * keyColumns;
        float s = innerProduct(q, k + kv * keyDim, keyDim);
        if (sharedDim > 0)
          s += innerProduct(q + keyDim, k + kvHeads * keyDim, sharedDim);
        scores[p - first] = s * scale;
        best = std::max(best, scores[p - first]);
      }
      // softmax with the maximum subtracted; the sink counts in the
      // denominator only.
      double denominator = sinks ? std::exp(static_cast<double>(sinks[h]) - best) : 0.0;
      std::fill(sum.begin(), sum.end(), 0.0f);
      for (int64_t p = first; p <= position; ++p) {
        float weight = std::exp(scores[p - first] - best);
        denominator += weight;
        const float *v = values + p * valueColumns + kv * valueDim;
        for (int64_t j = 0; j < valueDim; ++j)
          sum[j] += weight * v[j];
      }
      auto inverse = static_cast<float>(1.0 / denominator);
      float *o = out + t * heads * valueDim + h * valueDim;
      for (int64_t j = 0; j < valueDim; ++j)
        o[j] = sum[j] * inverse;
    }
  });
  return true;
}

void add(ThreadPool &pool, const float *a, const float *b, int64_t count, float *out) {
  pool.parallelFor((count + kElementBlock - 1) / kElementBlock, static_cast<double>(count) / 4,
                   [&](int64_t begin, int64_t end) {
    int64_t last = std::min(count, end * kElementBlock);
    for (int64_t i = begin * kElementBlock; i < last; ++i)
      out[i] = a[i] + b[i];
  });
}

void addRmsNorm(ThreadPool &pool, const float *a, const float *b, int64_t m, int64_t k,
                const float *weight, int64_t group, float epsilon, float weightOffset, float *sum,
                float *y) {
  add(pool, a, b, m * k, sum);
  rmsNorm(pool, sum, m, k, weight, group, epsilon, weightOffset, y);
}

} // namespace moec::rt::cpu
