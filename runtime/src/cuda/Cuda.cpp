//===- Cuda.cu - checked CUDA calls and owned device memory ------------------===//

#include "moec/runtime/Cuda.h"

#include <string>
#include <utility>

namespace moec::rt {

Status cudaStatus(cudaError_t error, const char *expr, const char *file, int line) {
  if (error == cudaSuccess)
    return Status::ok();
  return Status::error(std::string(expr) + " failed at " + file + ":" + std::to_string(line) +
                       ": " + cudaGetErrorName(error) + ": " + cudaGetErrorString(error));
}

int cudaDeviceCountOrZero() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError(); // clear the sticky "no driver" error
    return 0;
  }
  return count;
}

DeviceBuffer &DeviceBuffer::operator=(DeviceBuffer &&other) noexcept {
  if (this != &other) {
    if (data_)
      cudaFree(data_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (data_)
    cudaFree(data_);
}

Status DeviceBuffer::allocate(size_t bytes, DeviceBuffer &out) {
  DeviceBuffer buffer;
  MOEC_CUDA_TRY(cudaMalloc(&buffer.data_, bytes == 0 ? 1 : bytes));
  buffer.size_ = bytes;
  out = std::move(buffer);
  return Status::ok();
}

PinnedBuffer &PinnedBuffer::operator=(PinnedBuffer &&other) noexcept {
  if (this != &other) {
    if (data_)
      cudaFreeHost(data_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

PinnedBuffer::~PinnedBuffer() {
  if (data_)
    cudaFreeHost(data_);
}

Status PinnedBuffer::allocate(size_t bytes, PinnedBuffer &out) {
  PinnedBuffer buffer;
  MOEC_CUDA_TRY(cudaMallocHost(&buffer.data_, bytes == 0 ? 1 : bytes));
  buffer.size_ = bytes;
  out = std::move(buffer);
  return Status::ok();
}

Status poisonDeviceMemory(void *data, size_t bytes, cudaStream_t stream) {
  MOEC_CUDA_TRY(cudaMemsetAsync(data, 0xFF, bytes, stream));
  return Status::ok();
}

} // namespace moec::rt
