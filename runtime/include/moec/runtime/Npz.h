//===- Npz.h - numpy .npy and .npz files ------------------------*- C++ -*-===//
//
// moec-run's inputs and outputs are numpy .npz archives keyed by the graph's
// input and output names. The reader accepts what numpy.savez and
// numpy.savez_compressed write (stored or deflated members, zip64 records) and
// rejects anything malformed with an error naming the file, the member and the
// reason. Each member's .npy header is read (inflated) first and the size it
// declares checked against the member's recorded size and the caller's limits
// (NpzLimits) before the data is allocated or inflated: a small archive that
// claims, or inflates to, gigabytes is refused without allocating them. The
// writer never leaves a half-written file: it writes a temporary file beside
// the target and renames it into place.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_NPZ_H
#define MOEC_RUNTIME_NPZ_H

#include "moec/runtime/Status.h"
#include "moec/runtime/Tensor.h"

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace moec::rt {

using TensorMap = std::map<std::string, HostTensor>;

/// Parses one .npy image.
Status parseNpy(std::span<const std::byte> bytes, HostTensor &out);
/// Serialises `tensor` as a version 1.0 .npy image.
std::string serializeNpy(const HostTensor &tensor);

/// The most data bytes (shape x dtype) one .npz member may hold by default.
inline constexpr uint64_t kDefaultMaxNpzMemberBytes = uint64_t(1) << 32;

/// What a reader of an .npz accepts, checked against each member's .npy header
/// before its data is allocated or inflated.
struct NpzLimits {
  /// The most data bytes of a member whose key is not in `maxBytesByKey`.
  uint64_t maxMemberBytes = kDefaultMaxNpzMemberBytes;
  /// The most data bytes of the member of each key, e.g. a model input's size
  /// at its largest token count (npzBytesLimit).
  std::map<std::string, uint64_t> maxBytesByKey;
};

/// The most data bytes an array of `shape` can hold where each -1 dimension
/// is at most `maxDynamic` long, in any dtype .npy holds (8 bytes an element at
/// most); saturates at UINT64_MAX. For NpzLimits::maxBytesByKey.
uint64_t npzBytesLimit(std::span<const int64_t> shape, int64_t maxDynamic);

/// Parses an .npz image; member "x.npy" becomes key "x".
Status parseNpz(std::span<const std::byte> bytes, TensorMap &out,
                const NpzLimits &limits = {});
/// Reads an .npz file; errors are prefixed with the path.
Status readNpz(const std::string &path, TensorMap &out, const NpzLimits &limits = {});
/// Writes an .npz file (stored members) atomically.
Status writeNpz(const std::string &path, const TensorMap &tensors);

} // namespace moec::rt

#endif // MOEC_RUNTIME_NPZ_H
