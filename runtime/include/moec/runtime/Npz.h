//===- Npz.h - numpy .npy and .npz files ------------------------*- C++ -*-===//
//
// moec-run's inputs and outputs are numpy .npz archives keyed by the graph's
// input and output names. The reader accepts what numpy.savez and
// numpy.savez_compressed write (stored or deflated members, zip64 records) and
// rejects anything malformed with an error naming the file, the member and the
// reason. The writer never leaves a half-written file: it writes a temporary
// file beside the target and renames it into place.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_NPZ_H
#define MOEC_RUNTIME_NPZ_H

#include "moec/runtime/Status.h"
#include "moec/runtime/Tensor.h"

#include <map>
#include <span>
#include <string>

namespace moec::rt {

using TensorMap = std::map<std::string, HostTensor>;

/// Parses one .npy image.
Status parseNpy(std::span<const std::byte> bytes, HostTensor &out);
/// Serialises `tensor` as a version 1.0 .npy image.
std::string serializeNpy(const HostTensor &tensor);

/// Parses an .npz image; member "x.npy" becomes key "x".
Status parseNpz(std::span<const std::byte> bytes, TensorMap &out);
/// Reads an .npz file; errors are prefixed with the path.
Status readNpz(const std::string &path, TensorMap &out);
/// Writes an .npz file (stored members) atomically.
Status writeNpz(const std::string &path, const TensorMap &tensors);

} // namespace moec::rt

#endif // MOEC_RUNTIME_NPZ_H
