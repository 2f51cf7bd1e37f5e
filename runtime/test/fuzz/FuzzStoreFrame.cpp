//===- FuzzStoreFrame.cpp - libFuzzer target for the TCP store's frames ----===//
//
// Built with -DMOEC_BUILD_FUZZERS=ON (clang-22, ASan + UBSan; docs/fuzzing.md).
// The input is read as the server reads a connection: frame after frame until
// one is incomplete or malformed. A frame it accepts must encode back to
// exactly the bytes it consumed and satisfy its op's shape; every shorter
// prefix of it must read as incomplete (the reader never refuses bytes that a
// valid frame starts with, and never accepts a frame before its last byte).
//
//===----------------------------------------------------------------------===//

#include "StoreFrame.h"

#include <cstdlib>
#include <cstring>

using namespace moec::rt::dist;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  size_t at = 0;
  while (at < size) {
    StoreFrame frame;
    size_t consumed = 0;
    std::string error;
    FrameParse result = parseStoreFrame(data + at, size - at, frame, consumed, error);
    if (result == FrameParse::Malformed) {
      if (error.empty() || consumed != 0)
        std::abort();
      return 0;
    }
    if (result == FrameParse::Incomplete)
      return 0;
    if (consumed < kStoreHeaderBytes || consumed > size - at ||
        !checkStoreFrame(frame).isOk())
      std::abort();
    std::string again = encodeStoreFrame(frame);
    if (again.size() != consumed || std::memcmp(again.data(), data + at, consumed) != 0)
      std::abort();
    if (consumed <= 512)
      for (size_t cut = 0; cut < consumed; ++cut) {
        StoreFrame prefix;
        size_t used = 0;
        if (parseStoreFrame(data + at, cut, prefix, used, error) != FrameParse::Incomplete)
          std::abort();
      }
    at += consumed;
  }
  return 0;
}
