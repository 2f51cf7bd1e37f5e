//===- DependentLaunch.cuh - programmatic dependent launch ------*- C++ -*-===//
//
// A decode step is a chain of short kernels (router, route, sort, permute, two
// grouped matmuls, combine), each reading what the one before wrote. Launched
// plainly, each waits for its predecessor to finish before the GPU even starts
// launching it: a few µs per link at T = 1.
// Launched with programmatic stream serialisation (Hopper's programmatic
// dependent launch, kept as programmatic edges in a captured CUDA graph), a
// kernel's blocks are launched while its predecessor still runs and park at
// awaitPrerequisites() until the predecessor has completed and its writes are
// visible.
//
// The rule, for every kernel launched by launchDependent: call
// awaitPrerequisites() before reading anything an earlier kernel wrote and
// before writing anything. Any kernel may follow or precede one launched so: a
// predecessor that never signals (CUB's, CUTLASS's, a plain launch) releases
// the wait when it completes, and a plainly launched successor waits for the
// whole of its predecessor as always.
//
//===----------------------------------------------------------------------===//
#ifndef MOEC_RUNTIME_SRC_CUDA_DEPENDENTLAUNCH_CUH
#define MOEC_RUNTIME_SRC_CUDA_DEPENDENTLAUNCH_CUH

#include "moec/runtime/Cuda.h"
#include "moec/runtime/Status.h"

#include <cuda_runtime.h>

#include <mutex>
#include <unordered_map>
#include <utility>

namespace moec::rt::cuda {
#ifdef __CUDACC__
namespace device {

/// Waits for the grids this one depends on (complete, writes visible), then
/// lets the next kernel in the stream launch. Signalling right after the wait,
/// not at the end, is safe: the successor's own wait still holds it until this
/// grid completes; the early signal only lets its blocks be launched (and park)
/// while this grid's last blocks run. A no-op in a plain launch.
__device__ __forceinline__ void awaitPrerequisites() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

} // namespace device
#endif

namespace detail {

/// Whether a launch on `stream` may be programmatic. Not while a blocking
/// stream (one that synchronises with the legacy default stream) is being
/// captured: the capture refuses such a launch as an implicit dependency on
/// the legacy stream. Asking a capturing stream for its flags
/// would itself invalidate the capture, so the flags are asked while
/// the stream is not capturing (noteStream, and every launch outside a
/// capture) and remembered; a captured stream not seen before launches
/// plainly. A handle reused by a new stream is looked up again at its first
/// launch outside a capture.
inline bool programmaticLaunchAllowed(cudaStream_t stream) {
  static std::mutex mutex;
  static std::unordered_map<cudaStream_t, bool> nonBlocking;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &capture) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  std::lock_guard<std::mutex> lock(mutex);
  if (capture == cudaStreamCaptureStatusNone) {
    unsigned flags = 0;
    if (stream && cudaStreamGetFlags(stream, &flags) == cudaSuccess)
      nonBlocking[stream] = (flags & cudaStreamNonBlocking) != 0;
    return true;
  }
  auto it = nonBlocking.find(stream);
  return it != nonBlocking.end() && it->second;
}

/// Remembers `stream`'s flags before it is captured (DeviceModel::create).
inline void noteStream(cudaStream_t stream) { programmaticLaunchAllowed(stream); }

/// `kernel<<<grid, block, shared, stream>>>(args...)` in clusters of `cluster`
/// blocks (none: `cluster` null) with programmatic stream serialisation where
/// allowed: the one launch behind the two below.
template <typename... Params, typename... Args>
Status launchProgrammatic(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared,
                          cudaStream_t stream, const dim3 *cluster, Args &&...args) {
  cudaLaunchAttribute attributes[2] = {};
  unsigned count = 0;
  if (cluster) {
    attributes[count].id = cudaLaunchAttributeClusterDimension;
    attributes[count].val.clusterDim.x = cluster->x;
    attributes[count].val.clusterDim.y = cluster->y;
    attributes[count].val.clusterDim.z = cluster->z;
    ++count;
  }
  if (programmaticLaunchAllowed(stream)) {
    attributes[count].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attributes[count].val.programmaticStreamSerializationAllowed = 1;
    ++count;
  }
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared;
  config.stream = stream;
  config.attrs = attributes;
  config.numAttrs = count;
  MOEC_CUDA_TRY(cudaLaunchKernelEx(&config, kernel, static_cast<Params>(args)...));
  return Status::ok();
}

/// `kernel<<<grid, block, shared, stream>>>(args...)` with programmatic
/// stream serialisation where allowed; `kernel` must start with
/// awaitPrerequisites().
template <typename... Params, typename... Args>
Status launchDependent(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared,
                       cudaStream_t stream, Args &&...args) {
  return launchProgrammatic(kernel, grid, block, shared, stream, nullptr,
                            std::forward<Args>(args)...);
}

/// launchDependent in thread-block clusters of `cluster` blocks (the grid a
/// multiple of it; the kernel may use cooperative_groups::this_cluster()); a
/// kernel must allow a non-portable size (past 8 blocks) before its launch.
template <typename... Params, typename... Args>
Status launchDependentClusters(void (*kernel)(Params...), dim3 grid, dim3 block,
                               size_t shared, cudaStream_t stream, dim3 cluster,
                               Args &&...args) {
  return launchProgrammatic(kernel, grid, block, shared, stream, &cluster,
                            std::forward<Args>(args)...);
}

} // namespace detail
} // namespace moec::rt::cuda

#endif // MOEC_RUNTIME_SRC_CUDA_DEPENDENTLAUNCH_CUH
