//===- WeightFill.cpp - the weight image built on the host ----------------===//
//
// The CPU half of moec/runtime/WeightFill.h (the CUDA half is
// cuda/WeightFill.cu). Compiled with -ffp-contract=off, as the generator's
// bits must be the GPU's.
//
//===----------------------------------------------------------------------===//

#include "moec/runtime/WeightFill.h"
#include "moec/runtime/ArtifactFormat.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

namespace moec::rt {

uint64_t weightStream(const char *name, size_t length) {
  return artifact::contentHash(name, length);
}

void fillWeightRange(const moec_weight_fill &fill, uint64_t seed, unsigned char *image,
                     uint64_t begin, uint64_t end) {
  unsigned char *out = image + fill.offset;
  if (fill.kind == MOEC_FILL_CONSTANT) {
    for (uint64_t i = begin; i < end; ++i)
      fill::store(fill.dtype, fill.value, out, i);
    return;
  }
  // Four normals per Philox call.
  float z[4];
  uint64_t group = ~uint64_t{0};
  for (uint64_t i = begin; i < end; ++i) {
    if ((i >> 2) != group) {
      group = i >> 2;
      fill::normals(seed, fill.stream, (fill.first >> 2) + group, z);
    }
    fill::store(fill.dtype, fill::mul(fill.value, z[i & 3]), out, i);
  }
}

void fillWeightImage(const moec_weight_plan &plan, const unsigned char *stored,
                     uint64_t storedBytes, unsigned char *image, unsigned threads) {
  (void)storedBytes; // the plan is checked against it (parseManifest)
  std::memset(image, 0, plan.image_bytes);
  // Work in chunks of 1 Mi elements (a multiple of 4: whole Philox groups),
  // taken by the threads in turn.
  constexpr uint64_t kChunk = uint64_t{1} << 20;
  struct Piece {
    size_t fill;
    uint64_t begin, end;
  };
  std::vector<Piece> pieces;
  for (size_t f = 0; f < plan.num_fills; ++f) {
    const moec_weight_fill &fill = plan.fills[f];
    if (fill.kind == MOEC_FILL_STORED) {
      std::memcpy(image + fill.offset, stored + fill.source, fill.count);
      continue;
    }
    for (uint64_t at = 0; at < fill.count; at += kChunk)
      pieces.push_back({f, at, std::min(fill.count, at + kChunk)});
  }
  unsigned workers = threads ? threads : std::max(1u, std::thread::hardware_concurrency());
  workers = static_cast<unsigned>(std::min<size_t>(workers, pieces.size()));
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < pieces.size(); i = next++)
      fillWeightRange(plan.fills[pieces[i].fill], plan.seed, image, pieces[i].begin,
                      pieces[i].end);
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < workers; ++t)
    pool.emplace_back(work);
  work();
  for (std::thread &thread : pool)
    thread.join();
}

} // namespace moec::rt
