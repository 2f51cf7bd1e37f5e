//===- Bundle.h - an artifact carried inside an executable -----*- C++ -*-===//
//
// `moec compile --emit=exe` writes moec-run followed by the artifact's three
// files and this trailer as the file's last 64 bytes (docs/artifact.md):
//
//   [moec-run] [zeros to a 4096-byte boundary] [weights.bin] [manifest.txt]
//   [model.so] [BundleTrailer]
//
// The ELF loader ignores what follows the program; the runtime maps weights.bin
// straight from the executable (its offset is page-aligned) and loads model.so
// from an in-memory file. moec_load() accepts such an executable wherever it
// accepts an artifact directory.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_BUNDLE_H
#define MOEC_RUNTIME_BUNDLE_H

#include "moec/runtime/Status.h"

#include <cstdint>
#include <string>

namespace moec::rt {

inline constexpr char kBundleMagic[8] = {'M', 'O', 'E', 'C', 'B', 'N', 'D', 'L'};
inline constexpr uint32_t kBundleVersion = 1;
/// weights.bin starts at a multiple of this, so that it can be mapped in place.
inline constexpr uint64_t kBundleAlignment = 4096;

struct BundleTrailer {
  char magic[8];
  uint32_t version;
  uint32_t reserved;
  uint64_t manifestOffset, manifestBytes;
  uint64_t libraryOffset, libraryBytes;
  uint64_t weightsOffset, weightsBytes;
};
static_assert(sizeof(BundleTrailer) == 64, "the trailer is 64 bytes on disk");

/// Reads and checks the trailer of `path`. `present` is false (and the status
/// ok) when the file is readable but carries no bundle; a trailer that is
/// present but inconsistent with the file (truncated, bad offsets, another
/// version) is an error naming the file.
Status readBundleTrailer(const std::string &path, BundleTrailer &trailer, bool &present);

} // namespace moec::rt

#endif // MOEC_RUNTIME_BUNDLE_H
