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

template <MemoryKind Kind>
CudaBuffer<Kind> &CudaBuffer<Kind>::operator=(CudaBuffer &&other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

template <MemoryKind Kind> void CudaBuffer<Kind>::release() {
  if (!data_)
    return;
  if constexpr (Kind == MemoryKind::Device)
    cudaFree(data_);
  else
    cudaFreeHost(data_);
  data_ = nullptr;
}

template <MemoryKind Kind> Status CudaBuffer<Kind>::allocate(size_t bytes, CudaBuffer &out) {
  CudaBuffer buffer;
  // A zero-byte request still gets a real allocation, so data() is never null.
  size_t request = bytes == 0 ? 1 : bytes;
  if constexpr (Kind == MemoryKind::Device)
    MOEC_CUDA_TRY(cudaMalloc(&buffer.data_, request));
  else
    MOEC_CUDA_TRY(cudaMallocHost(&buffer.data_, request));
  buffer.size_ = bytes;
  out = std::move(buffer);
  return Status::ok();
}

template class CudaBuffer<MemoryKind::Device>;
template class CudaBuffer<MemoryKind::Pinned>;

Status poisonDeviceMemory(void *data, size_t bytes, cudaStream_t stream) {
  MOEC_CUDA_TRY(cudaMemsetAsync(data, 0xFF, bytes, stream));
  return Status::ok();
}

} // namespace moec::rt
