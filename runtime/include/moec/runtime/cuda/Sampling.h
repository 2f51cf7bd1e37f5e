//===- Sampling.h - picking tokens from logits on the GPU ------*- C++ -*-===//
//
// The device twin of moec/runtime/Sampling.h: the same rule, the same token
// for the same logits and seed, queued on a stream with no host
// synchronisation and no allocation (so a generation's decode loop never
// waits for the host). Greedy is one block per row (a first-index argmax);
// sampling sorts each row's keys (one CUB radix sort of every row at once,
// on 64-bit keys row · 2^32 + the key's descending order, stable so ties keep
// ascending ids), weighs the kept ones in integers, scans them (CUB) and
// bisects each row's running mass for top-p and the draw.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_CUDA_SAMPLING_H
#define MOEC_RUNTIME_CUDA_SAMPLING_H

#include "moec/runtime/Cuda.h"
#include "moec/runtime/Sampling.h"
#include "moec/runtime/Status.h"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace moec::rt::cuda {

/// tokens[r] = the first index of the largest of logits[r][0, vocab) (NaN as
/// -inf), for r < rows; logits row-major [rows, vocab], tokens device memory.
Status greedyTokens(const float *logits, int64_t rows, int64_t vocab, int64_t *tokens,
                    cudaStream_t stream);

/// Sampling's device buffers for up to maxRows rows of `vocab` logits (about
/// 40 bytes per logit, and CUB's workspace), allocated once.
class DeviceSampler {
public:
  DeviceSampler() = default;
  DeviceSampler(const DeviceSampler &) = delete;
  DeviceSampler &operator=(const DeviceSampler &) = delete;

  /// Allocates the buffers (an error for sizes outside 1..2^31 logits).
  Status create(int64_t maxRows, int64_t vocab);
  int64_t maxRows() const { return maxRows_; }
  int64_t vocab() const { return vocab_; }

  /// tokens[r] (device memory) = the pick of row r of `logits` [rows, vocab]
  /// (device memory) for sequence firstSequence + r's new token number
  /// `step`: moec/runtime/Sampling.h's sampleToken with the draw
  /// samplingUniform(sampling.seed, firstSequence + r, step); greedyTokens
  /// when sampling.greedy(). Fails, before queuing anything, for more rows
  /// than the buffers hold.
  Status sample(const float *logits, int64_t rows, int64_t firstSequence, int64_t step,
                const Sampling &sampling, int64_t *tokens, cudaStream_t stream);

private:
  int64_t maxRows_ = 0, vocab_ = 0;
  size_t tempBytes_ = 0;
  DeviceBuffer keys_, sortedKeys_, ids_, sortedIds_, weights_, prefix_, temp_;
};

} // namespace moec::rt::cuda

#endif // MOEC_RUNTIME_CUDA_SAMPLING_H
