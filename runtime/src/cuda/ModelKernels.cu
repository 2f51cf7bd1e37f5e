//===- ModelKernels.cu - CUDA kernels for the whole-model ops ---------------===//
//
// Correctness first, and friendly to decode (a few tokens a step): one block
// per token (embedding, rotary, the cache's writes), per RMSNorm group, and
// per (token, head) of attention, whose warps take the positions in turn with
// an online softmax and merge at the end. Every kernel is launched
// programmatically dependent (DependentLaunch.cuh) and waits for its
// predecessor before touching memory; none allocates or synchronises, so a
// step is captured in a CUDA graph. Data the kernels read on the device
// (token ids, positions, sequences) is never trusted as an index: the header
// says what out-of-range values do.
//
//===----------------------------------------------------------------------===//

#include "DependentLaunch.cuh"
#include "GridSize.h"
#include "moec/runtime/cpu/ModelKernels.h"
#include "moec/runtime/cuda/ModelKernels.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace moec::rt::cuda {
namespace {

using detail::blocksFor;
using detail::kSMs;

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
/// Blocks of the kernels that loop over rows: enough to fill the device a few
/// times over.
constexpr int64_t kMaxRowBlocks = 16 * kSMs;

__device__ __forceinline__ float warpSum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2)
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ double warpSum(double v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2)
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

//===----------------------------------------------------------------------===//
// embedding, rmsNorm, rotary, add
//===----------------------------------------------------------------------===//

__global__ void embeddingKernel(const int64_t *ids, int64_t n, const float *table, int64_t vocab,
                                int64_t hidden, float *out) {
  device::awaitPrerequisites();
  for (int64_t t = blockIdx.x; t < n; t += gridDim.x) {
    int64_t id = ids[t];
    bool valid = id >= 0 && id < vocab;
    const float *row = table + (valid ? id : 0) * hidden;
    for (int64_t j = threadIdx.x; j < hidden; j += blockDim.x)
      out[t * hidden + j] = valid ? row[j] : 0.0f;
  }
}

/// One block per group of `group` contiguous columns (row r's groups are
/// groups r·k/group onwards, so group g starts at g·group).
__global__ void rmsNormKernel(const float *x, int64_t groups, int64_t group, const float *weight,
                              float epsilon, float weightOffset, float *y) {
  device::awaitPrerequisites();
  __shared__ double partial[kWarps];
  for (int64_t g = blockIdx.x; g < groups; g += gridDim.x) {
    const float *in = x + g * group;
    float *o = y + g * group;
    double squares = 0;
    for (int64_t j = threadIdx.x; j < group; j += blockDim.x)
      squares += static_cast<double>(in[j]) * in[j];
    squares = warpSum(squares);
    if (threadIdx.x % 32 == 0)
      partial[threadIdx.x / 32] = squares;
    __syncthreads();
    double total = 0;
    for (int w = 0; w < kWarps; ++w)
      total += partial[w];
    __syncthreads(); // partial is rewritten by the next group
    auto inverse = static_cast<float>(
        1.0 / sqrt(total / static_cast<double>(group) + static_cast<double>(epsilon)));
    // Each element is read and written by one thread: y may be x.
    for (int64_t j = threadIdx.x; j < group; j += blockDim.x)
      o[j] = in[j] * inverse * (weightOffset + weight[j]);
  }
}

/// One block per token; its cosines and sines (scaled, in double) in shared
/// memory, [halfRotary] each.
__global__ void rotaryKernel(const float *x, int64_t n, int64_t columns, const int64_t *positions,
                             const float *invFreq, int64_t half, int64_t headDim, int64_t offset,
                             bool interleaved, float scale, float *y) {
  device::awaitPrerequisites();
  extern __shared__ double trig[];
  double *cosine = trig, *sine = trig + half;
  int64_t heads = columns / headDim;
  for (int64_t t = blockIdx.x; t < n; t += gridDim.x) {
    auto position = static_cast<double>(positions[t]);
    for (int64_t i = threadIdx.x; i < half; i += blockDim.x) {
      double s, c;
      // The angle in double: positions times a frequency lose too much in f32.
      sincos(position * static_cast<double>(invFreq[i]), &s, &c);
      cosine[i] = c * scale;
      sine[i] = s * scale;
    }
    __syncthreads();
    const float *row = x + t * columns;
    float *o = y + t * columns;
    if (o != row)
      for (int64_t c = threadIdx.x; c < columns; c += blockDim.x) {
        int64_t inHead = c % headDim;
        if (inHead < offset || inHead >= offset + 2 * half)
          o[c] = row[c];
      }
    // A thread per pair reads both before writing both: y may be x.
    for (int64_t p = threadIdx.x; p < heads * half; p += blockDim.x) {
      int64_t i = p % half, base = (p / half) * headDim + offset;
      int64_t a = interleaved ? base + 2 * i : base + i;
      int64_t b = interleaved ? base + 2 * i + 1 : base + half + i;
      double first = row[a], second = row[b];
      // Products and sums rounded one by one, as the CPU kernel's (no FMA).
      o[a] = static_cast<float>(__dsub_rn(__dmul_rn(first, cosine[i]), __dmul_rn(second, sine[i])));
      o[b] = static_cast<float>(__dadd_rn(__dmul_rn(second, cosine[i]), __dmul_rn(first, sine[i])));
    }
    __syncthreads(); // the next token rewrites cosine and sine
  }
}

__global__ void addKernel(const float *a, const float *b, int64_t count, float *out) {
  device::awaitPrerequisites();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = __fadd_rn(a[i], b[i]);
}

//===----------------------------------------------------------------------===//
// attention
//===----------------------------------------------------------------------===//

/// The geometry of one attention call, as the kernels take it.
struct AttentionGeometry {
  int64_t heads, kvHeads, keyDim, sharedDim, valueDim;
  int64_t maxBatch, maxSeq;
  int64_t window;
  float scale;

  __host__ __device__ int64_t queryDim() const { return keyDim + sharedDim; }
  __host__ __device__ int64_t keyColumns() const { return kvHeads * keyDim + sharedDim; }
  __host__ __device__ int64_t valueColumns() const { return kvHeads * valueDim; }
  /// Whether (sequence, position) is a row of the cache.
  __device__ bool inCache(int64_t sequence, int64_t position) const {
    return sequence >= 0 && sequence < maxBatch && position >= 0 && position < maxSeq;
  }
};

/// One block per token: its key row (the KV heads' keys, then the shared
/// slice) and value row into the cache; a token outside the cache writes
/// nothing.
__global__ void writeCacheKernel(const float *key, const float *keyShared, const float *value,
                                 const int64_t *positions, const int64_t *sequences, int64_t n,
                                 AttentionGeometry g, float *keys, float *values) {
  device::awaitPrerequisites();
  const int64_t keyWidth = g.kvHeads * g.keyDim, keyColumns = g.keyColumns(),
                valueColumns = g.valueColumns();
  for (int64_t t = blockIdx.x; t < n; t += gridDim.x) {
    int64_t sequence = sequences[t], position = positions[t];
    if (!g.inCache(sequence, position))
      continue;
    int64_t row = sequence * g.maxSeq + position;
    float *k = keys + row * keyColumns;
    for (int64_t j = threadIdx.x; j < keyWidth; j += blockDim.x)
      k[j] = key[t * keyWidth + j];
    for (int64_t j = threadIdx.x; j < g.sharedDim; j += blockDim.x)
      k[keyWidth + j] = keyShared[t * g.sharedDim + j];
    for (int64_t j = threadIdx.x; j < valueColumns; j += blockDim.x)
      values[row * valueColumns + j] = value[t * valueColumns + j];
  }
}

/// Block (head h, token t): warp w takes positions first + w, first + w +
/// kWarps, ...; each lane a strided part of the dot product (reduced over the
/// warp) and of the value columns. Each warp keeps its own running maximum,
/// denominator and weighted sum (the sink, if any, starts warp 0's), merged
/// at the end. Shared memory: the query [queryDim], then the warps' sums
/// [kWarps][valueDim].
__global__ void attendKernel(const float *query, const float *keys, const float *values,
                             const float *sinks, const int64_t *positions, const int64_t *sequences,
                             int64_t n, AttentionGeometry g, float *out) {
  device::awaitPrerequisites();
  extern __shared__ float scratch[];
  __shared__ float warpMax[kWarps], warpDenominator[kWarps];
  const int64_t queryDim = g.queryDim(), keyColumns = g.keyColumns(),
                valueColumns = g.valueColumns();
  float *q = scratch, *sums = scratch + queryDim;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t h = blockIdx.x, kv = h / (g.heads / g.kvHeads);
  float *mySum = sums + warp * g.valueDim;
  for (int64_t t = blockIdx.y; t < n; t += gridDim.y) {
    int64_t sequence = sequences[t], position = positions[t];
    float *o = out + (t * g.heads + h) * g.valueDim;
    if (!g.inCache(sequence, position)) { // the whole block: no barrier skipped by some
      for (int64_t j = threadIdx.x; j < g.valueDim; j += blockDim.x)
        o[j] = 0.0f;
      continue;
    }
    for (int64_t d = threadIdx.x; d < queryDim; d += blockDim.x)
      q[d] = query[(t * g.heads + h) * queryDim + d];
    for (int64_t j = lane; j < g.valueDim; j += 32)
      mySum[j] = 0.0f;
    __syncthreads();

    const float *keyRows = keys + sequence * g.maxSeq * keyColumns;
    const float *valueRows = values + sequence * g.maxSeq * valueColumns + kv * g.valueDim;
    int64_t first = g.window > 0 && position - g.window + 1 > 0 ? position - g.window + 1 : 0;
    // The sink takes its share of the denominator and adds no value.
    float best = -INFINITY, denominator = 0.0f;
    if (sinks && warp == 0) {
      best = sinks[h];
      denominator = 1.0f;
    }
    for (int64_t p = first + warp; p <= position; p += kWarps) {
      const float *k = keyRows + p * keyColumns;
      float dot = 0.0f;
      for (int64_t d = lane; d < g.keyDim; d += 32)
        dot += q[d] * k[kv * g.keyDim + d];
      for (int64_t d = lane; d < g.sharedDim; d += 32)
        dot += q[g.keyDim + d] * k[g.kvHeads * g.keyDim + d];
      float score = warpSum(dot) * g.scale;
      float top = fmaxf(best, score);
      float rescale = expf(best - top), weight = expf(score - top);
      denominator = denominator * rescale + weight;
      const float *v = valueRows + p * valueColumns;
      for (int64_t j = lane; j < g.valueDim; j += 32)
        mySum[j] = mySum[j] * rescale + weight * v[j];
      best = top;
    }
    if (lane == 0) {
      warpMax[warp] = best;
      warpDenominator[warp] = denominator;
    }
    __syncthreads();
    float top = warpMax[0];
    for (int w = 1; w < kWarps; ++w)
      top = fmaxf(top, warpMax[w]);
    float factor[kWarps], total = 0.0f;
    for (int w = 0; w < kWarps; ++w) {
      // A warp that saw no position (and no sink) counts for nothing.
      factor[w] = warpMax[w] == -INFINITY ? 0.0f : expf(warpMax[w] - top);
      total += warpDenominator[w] * factor[w];
    }
    for (int64_t j = threadIdx.x; j < g.valueDim; j += blockDim.x) {
      float sum = 0.0f;
      for (int w = 0; w < kWarps; ++w)
        sum += sums[w * g.valueDim + j] * factor[w];
      o[j] = sum / total;
    }
    __syncthreads(); // the next token rewrites q, the sums and the warps' maxima
  }
}

/// a·b, or -1 where it overflows (or either is negative).
int64_t checkedProduct(int64_t a, int64_t b) {
  int64_t product = 0;
  if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &product))
    return -1;
  return product;
}

} // namespace

//===----------------------------------------------------------------------===//
// DeviceKVCache
//===----------------------------------------------------------------------===//

Status DeviceKVCache::create(int64_t maxBatch, int64_t maxSeq, std::vector<Slot> slots,
                             KVCacheType type) {
  if (type != KVCacheType::F32)
    return Status::error("the KV cache: bf16 storage is not implemented yet");
  type_ = type;
  if (maxBatch < 0 || maxSeq < 0)
    return Status::error("the KV cache: negative batch or sequence size");
  int64_t rows = checkedProduct(maxBatch, maxSeq);
  // Each slot's keys and values start at a multiple of 64 floats (256 bytes).
  auto aligned = [](int64_t floats) { return floats < 0 ? -1 : (floats + 63) / 64 * 64; };
  int64_t total = 0;
  slots_.clear();
  for (const Slot &shape : slots) {
    int64_t keyFloats = aligned(checkedProduct(rows, shape.keyColumns));
    int64_t valueFloats = aligned(checkedProduct(rows, shape.valueColumns));
    if (rows < 0 || keyFloats < 0 || valueFloats < 0 ||
        total > std::numeric_limits<int64_t>::max() / 8 - keyFloats - valueFloats)
      return Status::error("the KV cache of " + std::to_string(maxBatch) + " sequences of " +
                           std::to_string(maxSeq) + " positions overflows (or a slot's width " +
                           "is negative)");
    Storage storage;
    storage.shape = shape;
    storage.keyOffset = static_cast<size_t>(total);
    storage.valueOffset = static_cast<size_t>(total + keyFloats);
    storage.lengths.assign(static_cast<size_t>(maxBatch), 0);
    total += keyFloats + valueFloats;
    slots_.push_back(std::move(storage));
  }
  maxBatch_ = maxBatch;
  maxSeq_ = maxSeq;
  storage_ = DeviceBuffer();
  if (total == 0)
    return Status::ok();
  size_t bytes = static_cast<size_t>(total) * sizeof(float);
  Status status = DeviceBuffer::allocate(bytes, storage_);
  if (!status) {
    cudaGetLastError(); // an allocation's failure is not the next call's
    return status.withContext("allocating the KV cache (" + std::to_string(bytes) + " bytes)");
  }
  // Zeros: a row that no step wrote (a gap no host check saw) reads as zeros,
  // never as memory nothing initialised.
  MOEC_CUDA_TRY(cudaMemset(storage_.data(), 0, bytes));
  MOEC_CUDA_TRY(cudaDeviceSynchronize());
  return Status::ok();
}

float *DeviceKVCache::keys(size_t slot) const {
  return storage_.dataAs<float>() + slots_[slot].keyOffset;
}

float *DeviceKVCache::values(size_t slot) const {
  return storage_.dataAs<float>() + slots_[slot].valueOffset;
}

void DeviceKVCache::reset(int64_t sequence) {
  if (sequence >= maxBatch_)
    return;
  for (Storage &storage : slots_) {
    if (sequence < 0)
      std::fill(storage.lengths.begin(), storage.lengths.end(), 0);
    else
      storage.lengths[static_cast<size_t>(sequence)] = 0;
  }
}

int64_t DeviceKVCache::length(size_t slot, int64_t sequence) const {
  if (slot >= slots_.size() || sequence < 0 || sequence >= maxBatch_)
    return 0;
  return slots_[slot].lengths[static_cast<size_t>(sequence)];
}

bool isHostMemory(const void *data) {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, data) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return attributes.type == cudaMemoryTypeUnregistered || attributes.type == cudaMemoryTypeHost;
}

Status DeviceKVCache::checkStep(bool readable, int64_t tokens, const IdsCheck *ids, size_t numIds,
                                const TokensCheck *checks, size_t numChecks) {
  if (tokens <= 0)
    return Status::ok();
  for (size_t c = 0; c < numChecks; ++c)
    if (checks[c].slot < 0 || static_cast<size_t>(checks[c].slot) >= slots_.size())
      return Status::error("moe.attention: layer " + std::to_string(checks[c].slot) +
                           " has no slot in the KV cache (" + std::to_string(slots_.size()) +
                           " slots)");
  for (size_t i = 0; i < numIds && readable; ++i)
    readable = !ids[i].ids || isHostMemory(ids[i].ids);
  for (size_t c = 0; c < numChecks && readable; ++c)
    readable = isHostMemory(checks[c].positions) && isHostMemory(checks[c].sequences);
  if (!readable) {
    // The positions stay on the device: from here on these lengths are unknown.
    for (size_t c = 0; c < numChecks; ++c) {
      std::vector<int64_t> &lengths = slots_[static_cast<size_t>(checks[c].slot)].lengths;
      std::fill(lengths.begin(), lengths.end(), -1);
    }
    return Status::ok();
  }
  std::string error;
  for (size_t i = 0; i < numIds; ++i)
    if (ids[i].ids && !cpu::checkIds(static_cast<const int64_t *>(ids[i].ids), tokens, ids[i].vocab, error))
      return Status::error(error);
  // Every attention op of a step reads the same positions and sequences, and
  // their slots hold the same lengths: checked once, counted for each.
  std::vector<std::vector<int64_t>> after(numChecks);
  for (size_t c = 0; c < numChecks; ++c) {
    const std::vector<int64_t> &before = slots_[static_cast<size_t>(checks[c].slot)].lengths;
    auto same = [&](size_t earlier) {
      return checks[earlier].positions == checks[c].positions &&
             checks[earlier].sequences == checks[c].sequences &&
             slots_[static_cast<size_t>(checks[earlier].slot)].lengths == before;
    };
    size_t earlier = 0;
    while (earlier < c && !same(earlier))
      ++earlier;
    if (earlier < c) {
      after[c] = after[earlier];
      continue;
    }
    after[c] = before;
    if (!cpu::checkTokens(static_cast<const int64_t *>(checks[c].positions),
                          static_cast<const int64_t *>(checks[c].sequences), tokens, maxBatch_,
                          maxSeq_, after[c], error))
      return Status::error(error);
  }
  for (size_t c = 0; c < numChecks; ++c)
    slots_[static_cast<size_t>(checks[c].slot)].lengths = std::move(after[c]);
  return Status::ok();
}

//===----------------------------------------------------------------------===//
// Launches
//===----------------------------------------------------------------------===//

Status embedding(const int64_t *ids, int64_t n, const float *table, int64_t vocab, int64_t hidden,
                 float *out, cudaStream_t stream) {
  if (n <= 0 || hidden <= 0)
    return Status::ok();
  return detail::launchDependent(embeddingKernel, dim3(blocksFor(n, 1, kMaxRowBlocks)),
                                 dim3(kThreads), 0, stream, ids, n, table, vocab, hidden, out);
}

Status rmsNorm(const float *x, int64_t m, int64_t k, const float *weight, int64_t group,
               float epsilon, float weightOffset, float *y, cudaStream_t stream) {
  if (group <= 0 || k % group != 0)
    return Status::error("rmsNorm: groups of " + std::to_string(group) + " columns in rows of " +
                         std::to_string(k));
  int64_t groups = m * (k / group);
  if (groups <= 0)
    return Status::ok();
  return detail::launchDependent(rmsNormKernel, dim3(blocksFor(groups, 1, kMaxRowBlocks)),
                                 dim3(kThreads), 0, stream, x, groups, group, weight, epsilon,
                                 weightOffset, y);
}

Status rotary(const float *x, int64_t n, int64_t columns, const int64_t *positions,
              const float *invFreq, int64_t halfRotary, int64_t headDim, int64_t offset,
              bool interleaved, float scale, float *y, cudaStream_t stream) {
  if (headDim <= 0 || columns % headDim != 0 || halfRotary < 0 || offset < 0 ||
      offset + 2 * halfRotary > headDim)
    return Status::error("rotary: a rotated slice of " + std::to_string(2 * halfRotary) +
                         " columns at " + std::to_string(offset) + " does not fit heads of " +
                         std::to_string(headDim) + " in rows of " + std::to_string(columns));
  if (n <= 0 || columns <= 0)
    return Status::ok();
  size_t shared = 2 * static_cast<size_t>(halfRotary) * sizeof(double);
  if (shared > 48 * 1024)
    return Status::error("rotary: " + std::to_string(halfRotary) +
                         " frequencies exceed the kernel's shared memory");
  return detail::launchDependent(rotaryKernel, dim3(blocksFor(n, 1, kMaxRowBlocks)), dim3(kThreads),
                                 shared, stream, x, n, columns, positions, invFreq, halfRotary,
                                 headDim, offset, interleaved, scale, y);
}

Status attention(DeviceKVCache &cache, int64_t slot, const float *query, const float *key,
                 const float *value, const float *keyShared, const float *sinks,
                 const int64_t *positions, const int64_t *sequences, int64_t n, int64_t heads,
                 int64_t kvHeads, int64_t keyDim, int64_t sharedDim, int64_t valueDim, float scale,
                 int64_t window, float *out, cudaStream_t stream) {
  const std::string op = "moe.attention: ";
  if (slot < 0 || static_cast<size_t>(slot) >= cache.slots())
    return Status::error(op + "layer " + std::to_string(slot) + " has no slot in the KV cache (" +
                         std::to_string(cache.slots()) + " slots)");
  if (kvHeads <= 0 || heads <= 0 || heads % kvHeads != 0)
    return Status::error(op + std::to_string(heads) + " query heads are not a multiple of " +
                         std::to_string(kvHeads) + " KV heads");
  const DeviceKVCache::Slot &shape = cache.slot(static_cast<size_t>(slot));
  AttentionGeometry g{};
  g.heads = heads, g.kvHeads = kvHeads, g.keyDim = keyDim, g.sharedDim = sharedDim;
  g.valueDim = valueDim, g.maxBatch = cache.maxBatch(), g.maxSeq = cache.maxSeq();
  g.window = window, g.scale = scale;
  if (shape.keyColumns != g.keyColumns() || shape.valueColumns != g.valueColumns())
    return Status::error(op + "slot " + std::to_string(slot) + " holds key rows of " +
                         std::to_string(shape.keyColumns) + " columns and value rows of " +
                         std::to_string(shape.valueColumns) + ", the op writes " +
                         std::to_string(g.keyColumns()) + " and " +
                         std::to_string(g.valueColumns()));
  if (sharedDim > 0 && !keyShared)
    return Status::error(op + "a shared key slice of " + std::to_string(sharedDim) +
                         " columns without data");
  size_t shared = sizeof(float) * static_cast<size_t>(g.queryDim() + kWarps * valueDim);
  if (shared > 48 * 1024)
    return Status::error(op + "heads of " + std::to_string(g.queryDim()) + " query and " +
                         std::to_string(valueDim) + " value columns exceed the kernel's shared " +
                         "memory");
  if (n <= 0)
    return Status::ok();
  float *keys = cache.keys(static_cast<size_t>(slot));
  float *values = cache.values(static_cast<size_t>(slot));
  // Write, then read: every token of the step sees the others' rows.
  MOEC_RETURN_IF_ERROR(detail::launchDependent(
      writeCacheKernel, dim3(blocksFor(n, 1, kMaxRowBlocks)), dim3(kThreads), 0, stream, key,
      keyShared, value, positions, sequences, n, g, keys, values));
  if (valueDim <= 0)
    return Status::ok();
  dim3 grid(static_cast<unsigned>(heads), static_cast<unsigned>(blocksFor(n, 1, 65535)));
  return detail::launchDependent(
      attendKernel, grid, dim3(kThreads), shared, stream, query, static_cast<const float *>(keys),
      static_cast<const float *>(values), sinks, positions, sequences, n, g, out);
}

Status add(const float *a, const float *b, int64_t count, float *out, cudaStream_t stream) {
  if (count <= 0)
    return Status::ok();
  return detail::launchDependent(addKernel, dim3(blocksFor(count, kThreads, 4 * kMaxRowBlocks)),
                                 dim3(kThreads), 0, stream, a, b, count, out);
}

} // namespace moec::rt::cuda
