//===- Bundle.cpp - reading the trailer of a moec executable --------------===//

#include "moec/runtime/Bundle.h"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace moec::rt {

Status readBundleTrailer(const std::string &path, BundleTrailer &trailer, bool &present) {
  present = false;
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return Status::error(path + ": cannot open (" + std::strerror(errno) + ")");
  struct stat info;
  if (fstat(fd, &info) != 0) {
    int saved = errno;
    close(fd);
    return Status::error(path + ": cannot stat (" + std::strerror(saved) + ")");
  }
  uint64_t size = static_cast<uint64_t>(info.st_size);
  if (!S_ISREG(info.st_mode) || size < sizeof(BundleTrailer)) {
    close(fd);
    return Status::ok();
  }
  ssize_t got = pread(fd, &trailer, sizeof(trailer), static_cast<off_t>(size - sizeof(trailer)));
  close(fd);
  if (got != static_cast<ssize_t>(sizeof(trailer)))
    return Status::error(path + ": cannot read its last " + std::to_string(sizeof(trailer)) +
                         " bytes");
  if (std::memcmp(trailer.magic, kBundleMagic, sizeof(kBundleMagic)) != 0)
    return Status::ok();
  present = true;
  if (trailer.version != kBundleVersion)
    return Status::error(path + ": bundle format version " + std::to_string(trailer.version) +
                         " is not supported (this runtime reads version 1)");
  // Each part lies inside the file, before the trailer, and the parts do not
  // wrap around: a truncated or edited executable is refused here.
  uint64_t end = size - sizeof(trailer);
  struct Part {
    const char *name;
    uint64_t offset, bytes;
  } parts[] = {{"manifest", trailer.manifestOffset, trailer.manifestBytes},
               {"model library", trailer.libraryOffset, trailer.libraryBytes},
               {"weights", trailer.weightsOffset, trailer.weightsBytes}};
  for (const Part &part : parts)
    if (part.bytes == 0 || part.offset > end || part.bytes > end - part.offset)
      return Status::error(path + ": the bundled " + part.name + " (" +
                           std::to_string(part.bytes) + " bytes at " +
                           std::to_string(part.offset) + ") lies outside the file's " +
                           std::to_string(end) + " bytes (truncated?)");
  if (trailer.weightsOffset % kBundleAlignment != 0)
    return Status::error(path + ": the bundled weights start at " +
                         std::to_string(trailer.weightsOffset) + ", not a multiple of " +
                         std::to_string(kBundleAlignment));
  return Status::ok();
}

} // namespace moec::rt
