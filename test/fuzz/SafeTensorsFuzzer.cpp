//===- SafeTensorsFuzzer.cpp - libFuzzer target for safetensors files -----===//
//
// Built with -DMOEC_BUILD_FUZZERS=ON (clang-22, ASan + UBSan; docs/fuzzing.md).
// The input is one single-file checkpoint in memory (Checkpoint::fromBuffer).
// The reader must report an error or give tensors whose bytes lie inside the
// input, hold exactly numel · dtype size bytes, share no byte with another
// tensor and add up to totalBytes().
//
//===----------------------------------------------------------------------===//

#include "moec/Frontends/Checkpoint/SafeTensors.h"

#include <algorithm>
#include <cstdlib>
#include <utility>
#include <vector>

using namespace moec::checkpoint;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *begin = reinterpret_cast<const char *>(data);
  auto buffer = llvm::MemoryBuffer::getMemBuffer(llvm::StringRef(begin, size), "fuzz.safetensors",
                                                 /*RequiresNullTerminator=*/false);
  auto checkpoint = Checkpoint::fromBuffer(std::move(buffer));
  if (!checkpoint) {
    llvm::consumeError(checkpoint.takeError());
    return 0;
  }
  uint64_t total = 0;
  std::vector<std::pair<const char *, size_t>> ranges;
  for (const std::string &name : (*checkpoint)->names()) {
    auto view = (*checkpoint)->tensor(name);
    if (!view)
      std::abort(); // every listed tensor must be readable
    size_t bytes = view->bytes.size();
    if (uint64_t(bytes) != uint64_t(view->numElements()) * uint64_t(dtypeSize(view->dtype)))
      std::abort();
    if (bytes && (view->bytes.data() < begin || view->bytes.data() + bytes > begin + size))
      std::abort();
    if (bytes)
      ranges.emplace_back(view->bytes.data(), bytes);
    total += bytes;
  }
  if (total != (*checkpoint)->totalBytes())
    std::abort();
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first < ranges[i - 1].first + ranges[i - 1].second)
      std::abort();
  return 0;
}
