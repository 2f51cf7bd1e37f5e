//===- Cuda.h - checked CUDA calls and owned device memory -----*- C++ -*-===//
//
// Every CUDA call in the runtime goes through MOEC_CUDA_TRY, which turns a
// failure into a Status naming the call, the source line and CUDA's reason.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_CUDA_H
#define MOEC_RUNTIME_CUDA_H

#include "moec/runtime/Status.h"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <utility>

namespace moec::rt {

/// OK, or an error "EXPR failed at FILE:LINE: cudaErrorName: description".
Status cudaStatus(cudaError_t error, const char *expr, const char *file, int line);

#define MOEC_CUDA_TRY(expr)                                                        \
  MOEC_RETURN_IF_ERROR(::moec::rt::cudaStatus((expr), #expr, __FILE__, __LINE__))

/// Number of usable CUDA devices; 0 (not an error) where there is no driver.
int cudaDeviceCountOrZero();

/// Where a CudaBuffer lives: device memory, or page-locked host memory (for
/// uploads and downloads at full bus speed).
enum class MemoryKind { Device, Pinned };

/// CUDA memory of one kind, freed on destruction.
template <MemoryKind Kind> class CudaBuffer {
public:
  CudaBuffer() = default;
  CudaBuffer(CudaBuffer &&other) noexcept { *this = std::move(other); }
  CudaBuffer &operator=(CudaBuffer &&other) noexcept;
  ~CudaBuffer() { release(); }

  static Status allocate(size_t bytes, CudaBuffer &out);
  void *data() const { return data_; }
  size_t size() const { return size_; }
  template <typename T> T *dataAs() const { return static_cast<T *>(data_); }

private:
  void release();

  void *data_ = nullptr;
  size_t size_ = 0;
};

using DeviceBuffer = CudaBuffer<MemoryKind::Device>;
using PinnedBuffer = CudaBuffer<MemoryKind::Pinned>;

/// Fills `bytes` bytes of device memory with 0xFF: NaN in every float format,
/// so that a kernel that skips a row it should write is caught by its test.
Status poisonDeviceMemory(void *data, size_t bytes, cudaStream_t stream);

} // namespace moec::rt

#endif // MOEC_RUNTIME_CUDA_H
