//===- ModelKernels.h - CUDA kernels for the whole-model ops ---*- C++ -*-===//
//
// The device twins of cpu/ModelKernels.h (dialect/include/moec/Dialect/MoE/
// ModelOps.td states each op's semantics): moe.embedding, moe.rms_norm,
// moe.rotary, moe.attention over a KV cache in device memory, and the residual
// sums. f32 storage, row-major token-major tensors [N, C], every size passed
// explicitly, each call queued on `stream` with no host synchronisation and
// no allocation, so that a step is captured in a CUDA graph and replayed with
// new token ids, positions and sequences (they are read on the device).
//
// Data checks: the kernels cannot fail a run on their data without a host
// synchronisation, so the checks of the CPU kernels (a token id outside the
// vocabulary, a sequence or position outside the cache, a gap) run on the
// host, before a step is queued, where the host can read the inputs
// (DeviceKVCache::checkStep). On the device an id outside the table gives a
// row of zeros, and a token whose sequence or position is outside the cache
// writes nothing and attends to nothing (a row of zeros); a gap that no host
// check saw reads the rows the cache held there (zeros in a fresh cache). No
// kernel reads or writes outside its buffers, whatever the data.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_CUDA_MODELKERNELS_H
#define MOEC_RUNTIME_CUDA_MODELKERNELS_H

#include "moec/runtime/Cuda.h"
#include "moec/runtime/Status.h"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace moec::rt::cuda {

/// How a KV cache stores its rows: f32, or bf16 (rounded to nearest even as
/// they are written; the attention kernels read them back exactly).
enum class KVCacheType { F32, BF16 };

/// The KV cache of a CUDA model artifact: one slot per moe.attention op (its
/// `layer` attribute), each holding keys [maxBatch][maxSeq][keyColumns] and
/// values [maxBatch][maxSeq][valueColumns] in device memory (f32 or bf16
/// elements, type()), zero-filled at creation. The sequences' lengths
/// (positions written, contiguous from 0) are kept on the host, per slot, for the checks: a step is
/// checked and its lengths counted when it is queued (checkStep), so they follow the order of the
/// runs. A length is unknown after a step whose positions the host could not read (device memory,
/// or a run queued on a caller's stream) unless the run was given a host copy of them
/// (moec_generate's device loop, DeviceGenerate.h): that sequence's gaps go unchecked until it
/// is reset.
class DeviceKVCache {
public:
  /// A slot's row widths: keyColumns = Hkv·Dk + Dr (each KV head's keys, then
  /// the shared slice), valueColumns = Hkv·Dv.
  struct Slot {
    int64_t keyColumns;
    int64_t valueColumns;
  };

  DeviceKVCache() = default;
  DeviceKVCache(const DeviceKVCache &) = delete;
  DeviceKVCache &operator=(const DeviceKVCache &) = delete;

  /// Allocates and zero-fills the storage on the current device (an error
  /// where the sizes are negative, overflow, or the memory cannot be had).
  Status create(int64_t maxBatch, int64_t maxSeq, std::vector<Slot> slots,
                KVCacheType type = KVCacheType::F32);
  KVCacheType type() const { return type_; }

  int64_t maxBatch() const { return maxBatch_; }
  int64_t maxSeq() const { return maxSeq_; }
  size_t slots() const { return slots_.size(); }
  const Slot &slot(size_t index) const { return slots_[index].shape; }
  /// A slot's keys and values, [maxBatch][maxSeq][columns] each, of type()
  /// elements (float or __nv_bfloat16), each at a multiple of 256 bytes.
  void *keys(size_t slot) const;
  void *values(size_t slot) const;
  /// Bytes of one element of the storage: 4 (F32) or 2 (BF16).
  size_t elementBytes() const { return type_ == KVCacheType::BF16 ? 2 : 4; }

  /// Every sequence (sequence < 0) or one sequence empty, in every slot (host
  /// state only: positions at or past a length are never read). A sequence
  /// out of range is a no-op.
  void reset(int64_t sequence = -1);
  /// Positions of `sequence` in `slot` as the host counts them; -1 unknown
  /// (0 for an index out of range).
  int64_t length(size_t slot, int64_t sequence) const;

  /// One step's host check, made before it is queued: the token ids of every
  /// moe.embedding whose table has `vocab[i]` rows (`ids[i]`), and the
  /// positions and sequences of every moe.attention (`positions[i]`,
  /// `sequences[i]` for slot `slotOf[i]`), all host pointers of `tokens`
  /// entries. The errors are the CPU kernels' messages; nothing is counted
  /// unless every check passes. Where the host cannot read the inputs
  /// (`readable` false) nothing is checked and the lengths of the sequences
  /// become unknown. Null ids are not checked: ids the host does not know
  /// (moec_generate's sampled tokens, within the vocabulary by construction).
  struct IdsCheck {
    const void *ids;
    int64_t vocab;
  };
  struct TokensCheck {
    const void *positions, *sequences;
    int64_t slot;
  };
  Status checkStep(bool readable, int64_t tokens, const IdsCheck *ids, size_t numIds,
                   const TokensCheck *checks, size_t numChecks);

private:
  struct Storage {
    Slot shape;
    size_t keyOffset = 0, valueOffset = 0; // bytes into storage_
    std::vector<int64_t> lengths;          // [maxBatch], -1 unknown
  };
  int64_t maxBatch_ = 0, maxSeq_ = 0;
  KVCacheType type_ = KVCacheType::F32;
  std::vector<Storage> slots_;
  DeviceBuffer storage_;
};

/// Whether the host may read `data` now: host memory (pageable or pinned),
/// not device or managed memory.
bool isHostMemory(const void *data);

/// moe.embedding: out[n] = table[ids[n]] for table [vocab, hidden]; an id
/// outside [0, vocab) gives a row of zeros.
Status embedding(const int64_t *ids, int64_t n, const float *table, int64_t vocab, int64_t hidden,
                 float *out, cudaStream_t stream);
/// The same with a bf16 table (its bits; moe-cast-model-bf16): the rows
/// widened to f32, exactly.
Status embeddingBF16(const int64_t *ids, int64_t n, const uint16_t *table, int64_t vocab,
                     int64_t hidden, float *out, cudaStream_t stream);

/// moe.rms_norm: each row of x [m, k] as k / group groups of `group`
/// contiguous columns, each y = x / sqrt(mean(x²) + epsilon) · (weightOffset +
/// weight[j]) with weight [group]; the mean in double. y may be x.
Status rmsNorm(const float *x, int64_t m, int64_t k, const float *weight, int64_t group,
               float epsilon, float weightOffset, float *y, cudaStream_t stream);

/// moe.add_rms_norm in one launch: sum = a + b (f32, an element at a time),
/// y = rmsNorm(sum), the bits of add and rmsNorm one after the other. sum may
/// be a or b; y must be none of them.
Status addRmsNorm(const float *a, const float *b, int64_t m, int64_t k, const float *weight,
                  int64_t group, float epsilon, float weightOffset, float *sum, float *y,
                  cudaStream_t stream);

/// moe.rotary: x [n, columns], columns a multiple of headDim; in each head the
/// 2·halfRotary columns from `offset` rotate by positions[t] · invFreq[i], the
/// angle, its cosine and sine in double (exact to a few ulps of double for any
/// position), pairs (i, i + halfRotary) or (2i, 2i + 1) when interleaved,
/// cosine and sine multiplied by `scale`. Other columns pass through. y may be
/// x.
Status rotary(const float *x, int64_t n, int64_t columns, const int64_t *positions,
              const float *invFreq, int64_t halfRotary, int64_t headDim, int64_t offset,
              bool interleaved, float scale, float *y, cudaStream_t stream);

/// moe.attention over slot `slot` of the cache, as cpu::attention: query [n,
/// heads·(keyDim + sharedDim)], key [n, kvHeads·keyDim], value [n,
/// kvHeads·valueDim], keyShared [n, sharedDim] (null when sharedDim is 0),
/// sinks [heads] or null, out [n, heads·valueDim]. First every token's key
/// row (key, then keyShared) and value row go to (sequences[t],
/// positions[t]) of the slot (one kernel; a bf16 cache rounds them to
/// nearest even); then each (token, head) attends with KV head h / (heads /
/// kvHeads) over its sequence's positions p <= positions[t] (and p >
/// positions[t] - window when window > 0), an online softmax in f32. An f32
/// cache takes the exact kernel (f32 throughout); a bf16 cache, at the head
/// shapes the tensor-core kernels are built for (Attention.cu), the split-KV
/// decode up to max(64, maxBatch) tokens and FlashAttention-2 tiles above,
/// which multiply the query and the softmax's weights in bf16. Positions
/// and sequences are read on the device (the file comment says what
/// out-of-range values do); the host picks the kernels from n and the
/// shapes alone, so a captured step replays with any. Fails, before queuing anything, on a slot or
/// shapes that do not match the cache.
Status attention(DeviceKVCache &cache, int64_t slot, const float *query, const float *key,
                 const float *value, const float *keyShared, const float *sinks,
                 const int64_t *positions, const int64_t *sequences, int64_t n, int64_t heads,
                 int64_t kvHeads, int64_t keyDim, int64_t sharedDim, int64_t valueDim, float scale,
                 int64_t window, float *out, cudaStream_t stream);

/// The residual sum: out[i] = a[i] + b[i]; out may be a or b.
Status add(const float *a, const float *b, int64_t count, float *out, cudaStream_t stream);

} // namespace moec::rt::cuda

#endif // MOEC_RUNTIME_CUDA_MODELKERNELS_H
