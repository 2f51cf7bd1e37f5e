//===- CudaTestUtil.h - device buffers of the runtime's GPU tests -*- C++ -*-===//

#ifndef MOEC_RUNTIME_TEST_CUDATESTUTIL_H
#define MOEC_RUNTIME_TEST_CUDATESTUTIL_H

#include "moec/runtime/Cuda.h"

#include "ModelReference.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <vector>

namespace moec::rt::test {

/// A device copy of a host vector.
template <typename T> DeviceBuffer upload(const std::vector<T> &host) {
  DeviceBuffer buffer;
  Status status = DeviceBuffer::allocate(host.size() * sizeof(T), buffer);
  EXPECT_TRUE(status.isOk()) << status.message();
  status = cudaStatus(
      cudaMemcpy(buffer.data(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
      "upload", __FILE__, __LINE__);
  EXPECT_TRUE(status.isOk()) << status.message();
  return buffer;
}

/// Waits for the device; a failed kernel's error comes back as the status.
inline Status synchronize() {
  return cudaStatus(cudaDeviceSynchronize(), "sync", __FILE__, __LINE__);
}

/// A device buffer of `bytes` bytes filled with 0xFF bytes (NaN, or -1).
inline DeviceBuffer poisoned(size_t bytes) {
  DeviceBuffer buffer;
  EXPECT_TRUE(DeviceBuffer::allocate(bytes, buffer).isOk());
  EXPECT_TRUE(poisonDeviceMemory(buffer.data(), bytes, nullptr).isOk());
  return buffer;
}

/// A host copy of `count` elements of a device buffer.
template <typename T> std::vector<T> download(const DeviceBuffer &buffer, size_t count) {
  std::vector<T> host(count);
  Status status =
      cudaStatus(cudaMemcpy(host.data(), buffer.data(), count * sizeof(T), cudaMemcpyDeviceToHost),
                 "download", __FILE__, __LINE__);
  EXPECT_TRUE(status.isOk()) << status.message();
  return host;
}

/// An attention call's inputs (ModelReference.h) on the device, and its
/// output poisoned.
struct DeviceCall {
  DeviceBuffer query, key, keyShared, value, positions, rows, out;
  int64_t n;

  DeviceCall(const AttentionShape &s, const Call &call)
      : query(upload(call.query)), key(upload(call.key)), value(upload(call.value)),
        positions(upload(call.positions)), rows(upload(call.rows)),
        out(poisoned(sizeof(float) * call.positions.size() * s.heads * s.valueDim)),
        n(static_cast<int64_t>(call.positions.size())) {
    if (s.sharedDim)
      keyShared = upload(call.keyShared);
  }
};

} // namespace moec::rt::test

#endif // MOEC_RUNTIME_TEST_CUDATESTUTIL_H
