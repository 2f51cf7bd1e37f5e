//===- FuzzNpz.cpp - libFuzzer target for the .npz reader -------------------===//
//
// Built with -DMOEC_BUILD_FUZZERS=ON (clang-22, ASan + UBSan; docs/fuzzing.md).
// The reader must return an error or a tensor map for any input; every tensor
// it returns must hold exactly the bytes its dtype and shape say.
//
//===----------------------------------------------------------------------===//

#include "moec/runtime/Npz.h"

#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  moec::rt::TensorMap tensors;
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte *>(data), size);
  if (!moec::rt::parseNpz(bytes, tensors).isOk())
    return 0;
  for (const auto &[name, tensor] : tensors) {
    auto count = moec::rt::checkedNumElements(tensor.shape(), moec::rt::dtypeSize(tensor.dtype()));
    if (!count || static_cast<size_t>(*count) * moec::rt::dtypeSize(tensor.dtype()) !=
                      tensor.sizeInBytes())
      std::abort();
    // Touch every byte so that ASan sees any short allocation.
    volatile unsigned char sink = 0;
    for (size_t i = 0; i < tensor.sizeInBytes(); ++i)
      sink ^= static_cast<unsigned char>(tensor.data()[i]);
  }
  return 0;
}
