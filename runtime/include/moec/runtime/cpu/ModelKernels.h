//===- ModelKernels.h - CPU kernels for the whole-model ops ----*- C++ -*-===//
//
// One function per op that a whole decoder-only model adds around moe.layer
// (dialect/include/moec/Dialect/MoE/ModelOps.td states each op's semantics;
// these follow it rule by rule): moe.embedding, moe.rms_norm, moe.rotary,
// moe.attention over the KV cache, and the residual sums (arith.addf). f32
// storage, row-major token-major tensors [N, C], every size passed explicitly.
// The kernels split work over a ThreadPool; results do not depend on the
// number of threads. Kernels that can fail on their inputs return false and
// set `error` to a message naming the op, the token index and the bad value.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_CPU_MODELKERNELS_H
#define MOEC_RUNTIME_CPU_MODELKERNELS_H

#include "moec/runtime/cpu/ThreadPool.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

namespace moec::rt::cpu {

/// The KV cache of a model artifact: one slot per moe.attention op (its `layer`
/// attribute), each holding keys [maxBatch][maxSeq][keyColumns] and values
/// [maxBatch][maxSeq][valueColumns] in f32, and per sequence the number of
/// positions written (contiguous from 0). Positions at or past a sequence's
/// length hold nothing meaningful and are never read.
class KVCache {
public:
  /// A slot's row widths: keyColumns = Hkv·Dk + Dr (each KV head's keys, then
  /// the shared slice), valueColumns = Hkv·Dv.
  struct Slot {
    int64_t keyColumns;
    int64_t valueColumns;
  };

  /// Throws std::bad_alloc where the storage cannot be had (or its size
  /// overflows), std::invalid_argument on a negative size. The storage is
  /// zero-filled lazily (calloc): pages never written cost no memory.
  KVCache(int64_t maxBatch, int64_t maxSeq, std::vector<Slot> slots);
  KVCache(KVCache &&) noexcept = default;
  KVCache &operator=(KVCache &&) noexcept = default;
  KVCache(const KVCache &) = delete;
  KVCache &operator=(const KVCache &) = delete;

  int64_t maxBatch() const { return maxBatch_; }
  int64_t maxSeq() const { return maxSeq_; }
  size_t slots() const { return slots_.size(); }
  const Slot &slot(size_t index) const { return slots_[index].shape; }

  /// Every sequence of every slot empty.
  void reset();
  /// One sequence empty in every slot; a sequence out of range is a no-op.
  void reset(int64_t sequence);
  /// Positions written of `sequence` in `slot` (0 for either out of range).
  int64_t length(size_t slot, int64_t sequence) const;

  /// The rows of one sequence: keys [maxSeq][keyColumns], values
  /// [maxSeq][valueColumns]. Indices must be in range.
  float *keys(size_t slot, int64_t sequence);
  float *values(size_t slot, int64_t sequence);
  const float *keys(size_t slot, int64_t sequence) const;
  const float *values(size_t slot, int64_t sequence) const;
  /// Sets a sequence's length (attention does, after writing its rows).
  void setLength(size_t slot, int64_t sequence, int64_t length);

private:
  struct Free {
    void operator()(float *p) const { std::free(p); }
  };
  struct Storage {
    Slot shape;
    std::unique_ptr<float, Free> keys, values;
    std::vector<int64_t> lengths; // [maxBatch]
  };
  int64_t maxBatch_, maxSeq_;
  std::vector<Storage> slots_;
};

/// moe.embedding's check: every id in [0, vocab); else false and a message
/// naming the first bad token in token order. (The CUDA target runs it on the
/// host, before a step is queued.)
bool checkIds(const int64_t *ids, int64_t n, int64_t vocab, std::string &error);

/// moe.attention's check of a step's tokens against the sequences' lengths
/// [maxBatch] before it (the positions each holds): every sequence in [0,
/// maxBatch), every position in [0, maxSeq) and at most its sequence's length
/// counting the step's earlier tokens (no gap). On success `lengths` are the
/// lengths after the step; on failure, false, a message naming the token and
/// the value, and `lengths` unspecified. A negative length means unknown: that
/// sequence's gaps are not checked and its length stays unknown.
bool checkTokens(const int64_t *positions, const int64_t *sequences, int64_t n, int64_t maxBatch,
                 int64_t maxSeq, std::vector<int64_t> &lengths, std::string &error);

/// moe.embedding: out[n] = table[ids[n]] for table [vocab, hidden]. An id
/// outside [0, vocab) fails (the first in token order is named) and nothing
/// is written.
bool embedding(ThreadPool &pool, const int64_t *ids, int64_t n, const float *table, int64_t vocab,
               int64_t hidden, float *out, std::string &error);

/// moe.rms_norm: each row of x [m, k] as k / group groups of `group`
/// contiguous columns, each y = x / sqrt(mean(x²) + epsilon) · (weightOffset +
/// weight[j]) with weight [group]; the mean in double. y may be x.
void rmsNorm(ThreadPool &pool, const float *x, int64_t m, int64_t k, const float *weight,
             int64_t group, float epsilon, float weightOffset, float *y);

/// moe.add_rms_norm: sum = a + b (f32, an element at a time), then y =
/// rmsNorm(sum); the bits of add and rmsNorm one after the other. sum may be a
/// or b; y must be none of them.
void addRmsNorm(ThreadPool &pool, const float *a, const float *b, int64_t m, int64_t k,
                const float *weight, int64_t group, float epsilon, float weightOffset, float *sum,
                float *y);

/// moe.rotary: x [n, columns], columns a multiple of headDim; in each head the
/// 2·halfRotary columns from `offset` rotate by positions[t] · invFreq[i]
/// (the angle in double), pairs (i, i + halfRotary) or (2i, 2i + 1) when
/// interleaved, cosine and sine multiplied by `scale`. Other columns pass
/// through. y may be x.
void rotary(ThreadPool &pool, const float *x, int64_t n, int64_t columns, const int64_t *positions,
            const float *invFreq, int64_t halfRotary, int64_t headDim, int64_t offset,
            bool interleaved, float scale, float *y);

/// moe.attention over slot `slot` of the cache. query [n, heads·(keyDim +
/// sharedDim)], key [n, kvHeads·keyDim], value [n, kvHeads·valueDim],
/// keyShared [n, sharedDim] (null when sharedDim is 0), sinks [heads] or null,
/// out [n, heads·valueDim]. First every token's key row (key, then keyShared)
/// and value row go to (sequences[t], positions[t]); then token t, head h
/// attends with KV head h / (heads / kvHeads) over its sequence's positions
/// p <= positions[t] (and p > positions[t] - window when window > 0).
/// Fails, with the cache untouched, on a sequence outside [0, maxBatch), a
/// position outside [0, maxSeq), a position past its sequence's length (a
/// gap; checked in token order, counting the call's earlier tokens), or
/// shapes that do not match the slot.
bool attention(ThreadPool &pool, KVCache &cache, int64_t slot, const float *query,
               const float *key, const float *value, const float *keyShared, const float *sinks,
               const int64_t *positions, const int64_t *sequences, int64_t n, int64_t heads,
               int64_t kvHeads, int64_t keyDim, int64_t sharedDim, int64_t valueDim, float scale,
               int64_t window, float *out, std::string &error);

/// The residual sum: out[i] = a[i] + b[i]; out may be a or b.
void add(ThreadPool &pool, const float *a, const float *b, int64_t count, float *out);

} // namespace moec::rt::cpu

#endif // MOEC_RUNTIME_CPU_MODELKERNELS_H
