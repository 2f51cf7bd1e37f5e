//===- Tensor.h - host tensors: dtype, shape, bytes -------------*- C++ -*-===//

#ifndef MOEC_RUNTIME_TENSOR_H
#define MOEC_RUNTIME_TENSOR_H

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace moec::rt {

enum class DType : uint8_t { F16, BF16, F32, F64, F8E4M3FN, I8, I32, I64, U8, Bool };

/// Bytes per element.
size_t dtypeSize(DType dtype);
/// Human-readable name: "f32", "bf16", ...
std::string_view dtypeName(DType dtype);

/// A dense, row-major tensor in host memory. The storage is 64-byte aligned so
/// that vector loads and GPU staging copies need no fix-up. Move-only: copies
/// of weights and activations are explicit (clone()).
class HostTensor {
public:
  HostTensor() = default;
  /// Allocates uninitialised storage; the caller has checked that the shape's
  /// size is sane (checkedNumElements).
  HostTensor(DType dtype, std::vector<int64_t> shape);
  HostTensor(HostTensor &&) noexcept = default;
  HostTensor &operator=(HostTensor &&) noexcept = default;

  HostTensor clone() const;

  DType dtype() const { return dtype_; }
  const std::vector<int64_t> &shape() const { return shape_; }
  int64_t numElements() const;
  size_t sizeInBytes() const { return static_cast<size_t>(numElements()) * dtypeSize(dtype_); }
  std::byte *data() { return storage_.get(); }
  const std::byte *data() const { return storage_.get(); }
  template <typename T> T *dataAs() { return reinterpret_cast<T *>(data()); }
  template <typename T> const T *dataAs() const { return reinterpret_cast<const T *>(data()); }
  /// "f32[4, 8]".
  std::string describe() const;

private:
  static constexpr std::align_val_t kAlignment{64};
  struct AlignedDelete {
    void operator()(std::byte *p) const { ::operator delete[](p, kAlignment); }
  };

  DType dtype_ = DType::F32;
  std::vector<int64_t> shape_;
  std::unique_ptr<std::byte[], AlignedDelete> storage_;
};

/// Number of elements of `shape`, or nullopt when a dimension is negative or
/// the product (or its size in bytes for `elementSize`) overflows.
std::optional<int64_t> checkedNumElements(const std::vector<int64_t> &shape,
                                          size_t elementSize);

} // namespace moec::rt

#endif // MOEC_RUNTIME_TENSOR_H
