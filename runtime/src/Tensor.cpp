//===- Tensor.cpp - host tensors ---------------------------------------------===//

#include "moec/runtime/Tensor.h"

#include <cstring>
#include <limits>

namespace moec::rt {

size_t dtypeSize(DType dtype) {
  switch (dtype) {
  case DType::F16:
  case DType::BF16:
    return 2;
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::F64:
  case DType::I64:
    return 8;
  case DType::F8E4M3FN:
  case DType::I8:
  case DType::U8:
  case DType::Bool:
    return 1;
  }
  return 0;
}

std::string_view dtypeName(DType dtype) {
  switch (dtype) {
  case DType::F16: return "f16";
  case DType::BF16: return "bf16";
  case DType::F32: return "f32";
  case DType::F64: return "f64";
  case DType::F8E4M3FN: return "f8E4M3FN";
  case DType::I8: return "i8";
  case DType::I32: return "i32";
  case DType::I64: return "i64";
  case DType::U8: return "u8";
  case DType::Bool: return "bool";
  }
  return "?";
}

std::optional<int64_t> checkedNumElements(const std::vector<int64_t> &shape,
                                          size_t elementSize) {
  int64_t count = 1;
  for (int64_t dim : shape) {
    if (dim < 0)
      return std::nullopt;
    if (dim != 0 && count > std::numeric_limits<int64_t>::max() / dim)
      return std::nullopt;
    count *= dim;
  }
  if (elementSize != 0 &&
      count > std::numeric_limits<int64_t>::max() / static_cast<int64_t>(elementSize))
    return std::nullopt;
  return count;
}

HostTensor::HostTensor(DType dtype, std::vector<int64_t> shape)
    : dtype_(dtype), shape_(std::move(shape)) {
  // At least one byte, so that data() of an empty tensor is still a valid pointer.
  size_t bytes = sizeInBytes() == 0 ? 1 : sizeInBytes();
  storage_.reset(static_cast<std::byte *>(::operator new[](bytes, kAlignment)));
}

HostTensor HostTensor::clone() const {
  HostTensor copy(dtype_, shape_);
  if (sizeInBytes() != 0)
    std::memcpy(copy.data(), data(), sizeInBytes());
  return copy;
}

int64_t HostTensor::numElements() const {
  int64_t count = 1;
  for (int64_t dim : shape_)
    count *= dim;
  return count;
}

std::string HostTensor::describe() const {
  std::string text(dtypeName(dtype_));
  text += "[";
  for (size_t i = 0; i < shape_.size(); ++i)
    text += (i ? ", " : "") + std::to_string(shape_[i]);
  return text + "]";
}

} // namespace moec::rt
