//===- DeviceKVCache.cpp - the KV cache of a CUDA whole model ----------------===//
//
// The storage of DeviceKVCache (cuda/ModelKernels.h) and its host checks of a
// step: the attention kernels that write and read it are Attention.cu.
//
//===----------------------------------------------------------------------===//

#include "moec/runtime/cpu/ModelKernels.h"
#include "moec/runtime/cuda/ModelKernels.h"

#include <algorithm>
#include <limits>
#include <string>

namespace moec::rt::cuda {
namespace {

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
  if (type != KVCacheType::F32 && type != KVCacheType::BF16)
    return Status::error("the KV cache: an unknown storage type");
  type_ = type;
  if (maxBatch < 0 || maxSeq < 0)
    return Status::error("the KV cache: negative batch or sequence size");
  int64_t rows = checkedProduct(maxBatch, maxSeq);
  const auto element = static_cast<int64_t>(elementBytes());
  // Each slot's keys and values start at a multiple of 256 bytes.
  auto aligned = [element](int64_t elements) {
    return elements < 0 || elements > std::numeric_limits<int64_t>::max() / 8
               ? -1
               : (elements * element + 255) / 256 * 256;
  };
  int64_t total = 0;
  slots_.clear();
  for (const Slot &shape : slots) {
    int64_t keyBytes = aligned(checkedProduct(rows, shape.keyColumns));
    int64_t valueBytes = aligned(checkedProduct(rows, shape.valueColumns));
    if (rows < 0 || keyBytes < 0 || valueBytes < 0 ||
        total > std::numeric_limits<int64_t>::max() / 2 - keyBytes - valueBytes)
      return Status::error("the KV cache of " + std::to_string(maxBatch) + " sequences of " +
                           std::to_string(maxSeq) + " positions overflows (or a slot's width " +
                           "is negative)");
    Storage storage;
    storage.shape = shape;
    storage.keyOffset = static_cast<size_t>(total);
    storage.valueOffset = static_cast<size_t>(total + keyBytes);
    storage.lengths.assign(static_cast<size_t>(maxBatch), 0);
    total += keyBytes + valueBytes;
    slots_.push_back(std::move(storage));
  }
  maxBatch_ = maxBatch;
  maxSeq_ = maxSeq;
  storage_ = DeviceBuffer();
  if (total == 0)
    return Status::ok();
  auto bytes = static_cast<size_t>(total);
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

void *DeviceKVCache::keys(size_t slot) const {
  return storage_.dataAs<char>() + slots_[slot].keyOffset;
}

void *DeviceKVCache::values(size_t slot) const {
  return storage_.dataAs<char>() + slots_[slot].valueOffset;
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
    if (ids[i].ids &&
        !cpu::checkIds(static_cast<const int64_t *>(ids[i].ids), tokens, ids[i].vocab, error))
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

} // namespace moec::rt::cuda
