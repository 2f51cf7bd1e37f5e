//===- FuzzBundle.cpp - libFuzzer target for the bundle reader -------------===//
//
// Built with -DMOEC_BUILD_FUZZERS=ON (clang-22, ASan + UBSan; docs/fuzzing.md).
// The input is the tail of an executable written by `moec compile --emit=exe`
// (Bundle.h). readBundleTrailer reads files only, so the input goes to a memory
// file. The target then does what moec_load does with a bundle short of
// mapping and dlopening it: parse the bundled manifest and check the weights'
// header. A trailer that is accepted must describe parts inside the file.
//
//===----------------------------------------------------------------------===//

#include "moec/runtime/ArtifactFormat.h"
#include "moec/runtime/Bundle.h"

#include <cstdlib>
#include <cstring>
#include <string>

#include <sys/mman.h>
#include <unistd.h>

using namespace moec::rt;

namespace {

/// One memory file for the whole run, rewritten for each input.
int memoryFile() {
  static int fd = memfd_create("moec-fuzz-bundle", MFD_CLOEXEC);
  if (fd < 0)
    std::abort();
  return fd;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  int fd = memoryFile();
  if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != static_cast<ssize_t>(size))
    std::abort();
  std::string path = "/proc/self/fd/" + std::to_string(fd);
  BundleTrailer trailer;
  bool present = false;
  if (!readBundleTrailer(path, trailer, present).isOk() || !present)
    return 0;
  uint64_t end = size - sizeof(BundleTrailer);
  for (auto [offset, bytes] : {std::pair{trailer.manifestOffset, trailer.manifestBytes},
                               {trailer.libraryOffset, trailer.libraryBytes},
                               {trailer.weightsOffset, trailer.weightsBytes}})
    if (offset > end || bytes > end - offset)
      std::abort();
  std::string_view text(reinterpret_cast<const char *>(data) + trailer.manifestOffset,
                        trailer.manifestBytes);
  artifact::Manifest manifest;
  if (!artifact::parseManifest(text, path + " (bundled manifest)", manifest).isOk())
    return 0;
  if (trailer.weightsBytes >= artifact::kWeightsHeaderBytes)
    (void)artifact::checkWeightsHeader(data + trailer.weightsOffset, trailer.weightsBytes,
                                       path + " (bundled weights)");
  return 0;
}
