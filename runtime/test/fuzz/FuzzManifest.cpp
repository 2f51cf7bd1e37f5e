//===- FuzzManifest.cpp - libFuzzer target for manifest.txt's parser -------===//
//
// Built with -DMOEC_BUILD_FUZZERS=ON (clang-22, ASan + UBSan; docs/fuzzing.md).
// parseManifest must return an error or a manifest for any text; a manifest it
// accepts must print to text that parses again to the same manifest (so
// nothing it accepted was half-read), and its numbers must be in range.
//
//===----------------------------------------------------------------------===//

#include "moec/runtime/ArtifactFormat.h"

#include <cstdlib>
#include <string_view>

using namespace moec::rt::artifact;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view text(reinterpret_cast<const char *>(data), size);
  Manifest manifest;
  if (!parseManifest(text, "fuzz/manifest.txt", manifest).isOk())
    return 0;
  if (manifest.maxTokens < 0)
    std::abort();
  std::string printed = printManifest(manifest);
  Manifest again;
  if (!parseManifest(printed, "fuzz/printed-manifest.txt", again).isOk() ||
      printManifest(again) != printed)
    std::abort();
  return 0;
}
