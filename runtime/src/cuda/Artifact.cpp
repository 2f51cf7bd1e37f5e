//===- Artifact.cpp - device state of a CUDA artifact's model.so ----------===//

#include "moec/runtime/cuda/Artifact.h"

#include "DependentLaunch.cuh"

#include "moec/runtime/cpu/ThreadPool.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

namespace moec::rt::cuda {

DeviceModel::~DeviceModel() {
  for (cudaStream_t stream : {side_, stream_})
    if (stream) {
      cudaStreamSynchronize(stream);
      cudaStreamDestroy(stream);
    }
  for (cudaEvent_t event : {forked_, joined_, callerQueued_, runQueued_})
    if (event)
      cudaEventDestroy(event);
}

Status DeviceModel::forkSide() {
  MOEC_CUDA_TRY(cudaEventRecord(forked_, stream_));
  MOEC_CUDA_TRY(cudaStreamWaitEvent(side_, forked_, 0));
  return Status::ok();
}

Status DeviceModel::joinSide() {
  MOEC_CUDA_TRY(cudaEventRecord(joined_, side_));
  MOEC_CUDA_TRY(cudaStreamWaitEvent(stream_, joined_, 0));
  return Status::ok();
}

Status DeviceModel::waitForCaller(cudaStream_t caller) {
  MOEC_CUDA_TRY(cudaEventRecord(callerQueued_, caller));
  MOEC_CUDA_TRY(cudaStreamWaitEvent(stream_, callerQueued_, 0));
  return Status::ok();
}

Status DeviceModel::releaseCaller(cudaStream_t caller) {
  MOEC_CUDA_TRY(cudaEventRecord(runQueued_, stream_));
  MOEC_CUDA_TRY(cudaStreamWaitEvent(caller, runQueued_, 0));
  return Status::ok();
}

Status DeviceModel::create(const unsigned char *weights, uint64_t weightsBytes,
                           uint64_t workspaceBytes, const moec_weight_plan *plan) {
  MOEC_CUDA_TRY(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  MOEC_CUDA_TRY(cudaStreamCreateWithFlags(&side_, cudaStreamNonBlocking));
  MOEC_CUDA_TRY(cudaEventCreateWithFlags(&forked_, cudaEventDisableTiming));
  MOEC_CUDA_TRY(cudaEventCreateWithFlags(&joined_, cudaEventDisableTiming));
  MOEC_CUDA_TRY(cudaEventCreateWithFlags(&callerQueued_, cudaEventDisableTiming));
  MOEC_CUDA_TRY(cudaEventCreateWithFlags(&runQueued_, cudaEventDisableTiming));
  // Known non-blocking before their graphs are captured: their launches are
  // programmatic (DependentLaunch.cuh).
  detail::noteStream(stream_);
  detail::noteStream(side_);
  MOEC_RETURN_IF_ERROR(faultPlanFromEnvironment(fault_));
  uint64_t imageBytes = plan ? plan->image_bytes : weightsBytes;
  MOEC_RETURN_IF_ERROR(DeviceBuffer::allocate(imageBytes, weights_).withContext(
      "allocating " + std::to_string(imageBytes) + " bytes of device memory for the weights"));
  if (plan)
    MOEC_RETURN_IF_ERROR(buildWeightImage(*plan, weights, weights_.dataAs<unsigned char>(), stream_)
                             .withContext("filling the weights on the device"));
  else
    MOEC_RETURN_IF_ERROR(uploadThroughPinned(weights, weightsBytes, weights_.data())
                             .withContext("uploading the weights"));
  MOEC_RETURN_IF_ERROR(DeviceBuffer::allocate(workspaceBytes, workspace_).withContext(
      "allocating the device workspace of " + std::to_string(workspaceBytes) + " bytes"));
  // MOEC_POISON_WORKSPACE=1: every workspace byte 0xFF (a NaN in f32 and bf16)
  // before the first run, so that a kernel reading what nothing wrote shows in
  // the outputs (test/Codegen/check-cuda-artifact.sh compares them bitwise).
  if (const char *poison = std::getenv("MOEC_POISON_WORKSPACE");
      poison && std::strcmp(poison, "1") == 0) {
    MOEC_RETURN_IF_ERROR(poisonDeviceMemory(workspace_.data(), workspaceBytes, stream_));
    MOEC_CUDA_TRY(cudaStreamSynchronize(stream_));
  }
  return Status::ok();
}

Status DeviceModel::beginRun() {
  if (!dead_.empty())
    return Status::error(dead_);
  if (++runs_ == fault_.run && fault_.kind != FaultPlan::None)
    return injectFault(fault_, stream_);
  return Status::ok();
}

Status DeviceModel::endRun(Status status) {
  if (status)
    return status;
  // Wait for what was queued; a launch error is cleared by cudaGetLastError,
  // a sticky one is returned by every later call.
  cudaStreamSynchronize(stream_);
  cudaStreamSynchronize(side_);
  cudaGetLastError();
  cudaError_t after = cudaStreamQuery(stream_);
  if (after != cudaSuccess && after != cudaErrorNotReady)
    dead_ = "an earlier run failed and left the CUDA context unusable (" +
            std::string(cudaGetErrorName(after)) + ": " + cudaGetErrorString(after) +
            "); this model cannot run again in this process";
  return status;
}

GraphCache::GraphCache() {
  const char *text = std::getenv("MOEC_CUDA_GRAPHS");
  enabled_ = !(text && std::strcmp(text, "0") == 0);
}

GraphCache::~GraphCache() {
  for (auto &[key, exec] : graphs_)
    cudaGraphExecDestroy(exec);
}

GraphCache::Key GraphCache::keyOf(int64_t tokens, const CallerBuffer *inputs, size_t numInputs,
                                  const CallerBuffer *outputs, size_t numOutputs) {
  Key key{tokens, {}};
  for (size_t i = 0; i < numInputs; ++i)
    key.second.push_back(inputs[i].data);
  for (size_t i = 0; i < numOutputs; ++i)
    key.second.push_back(outputs[i].data);
  return key;
}

bool GraphCache::inPlace(int64_t tokens, const CallerBuffer *inputs, size_t numInputs,
                         const CallerBuffer *outputs, size_t numOutputs) {
  int device = -1;
  if (cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  auto usable = [&](const CallerBuffer &buffer) {
    cudaPointerAttributes attributes{};
    if (cudaPointerGetAttributes(&attributes, buffer.data) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    return attributes.type == cudaMemoryTypeDevice && attributes.device == device &&
           reinterpret_cast<uintptr_t>(buffer.data) % 256 == 0;
  };
  auto overlap = [](const CallerBuffer &a, const CallerBuffer &b) {
    auto *x = static_cast<const unsigned char *>(a.data);
    auto *y = static_cast<const unsigned char *>(b.data);
    return x < y + b.bytes && y < x + a.bytes;
  };
  for (size_t i = 0; i < numInputs; ++i)
    if (!usable(inputs[i]))
      return false;
  for (size_t o = 0; o < numOutputs; ++o) {
    if (!usable(outputs[o]))
      return false;
    for (size_t i = 0; i < numInputs; ++i)
      if (overlap(outputs[o], inputs[i]))
        return false;
    for (size_t other = 0; other < o; ++other)
      if (overlap(outputs[o], outputs[other]))
        return false;
  }
  if (!enabled_)
    return true; // eager runs hold no addresses
  return graphs_.count(keyOf(tokens, inputs, numInputs, outputs, numOutputs)) ||
         (inPlaceGraphs_ < kMaxInPlace && graphs_.size() < kMaxGraphs);
}

Status GraphCache::run(int64_t tokens, cudaStream_t stream, const std::function<Status()> &compute,
                       const CallerBuffer *inputs, size_t numInputs, const CallerBuffer *outputs,
                       size_t numOutputs) {
  Key key = keyOf(tokens, inputs, numInputs, outputs, numOutputs);
  auto it = graphs_.find(key);
  if (it == graphs_.end()) {
    if (!enabled_ || graphs_.size() >= kMaxGraphs)
      return compute();
    // Relaxed: the kernels' wrappers ask CUB and the device for sizes while
    // they enqueue, which the stricter capture modes refuse.
    MOEC_CUDA_TRY(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed));
    Status status = compute();
    cudaGraph_t graph = nullptr;
    cudaError_t ended = cudaStreamEndCapture(stream, &graph);
    cudaGraphExec_t exec = nullptr;
    cudaError_t instantiated = cudaErrorUnknown;
    if (status && ended == cudaSuccess && graph)
      instantiated = cudaGraphInstantiate(&exec, graph, 0);
    if (graph)
      cudaGraphDestroy(graph);
    if (!status || instantiated != cudaSuccess) {
      // Nothing ran: run eagerly from now on (a kernel's own error, say a bad
      // argument, is reported by the eager run). Said once on stderr: every
      // later call pays a launch per kernel, a cliff no result would show
      // (a capture invalidated by a stream query once ran a whole A/B eagerly).
      std::fprintf(stderr,
                   "moec: capturing the CUDA graph for %lld tokens failed (%s); running without "
                   "CUDA graphs from now on\n",
                   static_cast<long long>(tokens),
                   !status                ? status.message().c_str()
                   : ended != cudaSuccess ? cudaGetErrorString(ended)
                                          : cudaGetErrorString(instantiated));
      cudaGetLastError();
      enabled_ = false;
      return compute();
    }
    it = graphs_.emplace(std::move(key), exec).first;
    if (!it->first.second.empty())
      ++inPlaceGraphs_;
  }
  MOEC_CUDA_TRY(cudaGraphLaunch(it->second, stream));
  return Status::ok();
}

Status requireDevice() {
  int count = 0;
  cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess || count == 0) {
    cudaGetLastError();
    return Status::error(std::string("no CUDA device answers (") +
                         (error != cudaSuccess ? cudaGetErrorName(error) : "no devices") + ": " +
                         (error != cudaSuccess ? cudaGetErrorString(error) : "0 devices") + ")");
  }
  return Status::ok();
}

namespace {

/// Pinned staging kept for the process's later uploads: pinning costs about
/// 0.6-1 ms per MiB on the H200's host (bench/upload.cpp), as much as copying
/// a small model, so a second artifact (or a reload) reuses the buffers of the
/// first. An upload running while another holds them pins its own.
class StagingCache {
public:
  /// `count` buffers of `bytes` each: the cached ones when free and big enough.
  Status acquire(size_t bytes, int count, std::vector<PinnedBuffer> &out) {
    size_t cachedBytes = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      out = std::move(buffers_); // too small or too few: freed below
      buffers_.clear();
      cachedBytes = bytes_;
    }
    if (out.size() == static_cast<size_t>(count) && cachedBytes >= bytes)
      return Status::ok();
    out.clear();
    out.resize(count);
    for (PinnedBuffer &buffer : out)
      MOEC_RETURN_IF_ERROR(PinnedBuffer::allocate(bytes, buffer));
    return Status::ok();
  }
  void release(size_t bytes, std::vector<PinnedBuffer> &buffers) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!buffers_.empty() && bytes_ >= bytes)
      return; // as good are cached already: these are freed
    buffers_ = std::move(buffers);
    bytes_ = bytes;
  }

private:
  std::mutex mutex_;
  std::vector<PinnedBuffer> buffers_;
  size_t bytes_ = 0;
};

StagingCache &stagingCache() {
  static StagingCache *cache = new StagingCache; // never destroyed: outlives every upload
  return *cache;
}

} // namespace

Status uploadThroughPinned(const void *host, size_t bytes, void *device, const UploadPlan &plan) {
  if (bytes == 0)
    return Status::ok();
  if (plan.chunkBytes == 0 || plan.buffers < 2)
    return Status::error("uploadThroughPinned: a plan needs chunks and two buffers at least");
  // A ring of pinned staging buffers: while the copy engine moves one to the
  // device, the host fills the next. The filling is spread over the host's
  // cores: one thread copying out of a fresh mapping of weights.bin reached
  // about 5 GB/s, 16 threads 56 GB/s (bench/upload.cpp on the H200 machine).
  constexpr size_t kSlice = size_t(1) << 20;
  size_t chunk = std::min(bytes, plan.chunkBytes);
  std::vector<PinnedBuffer> staging;
  MOEC_RETURN_IF_ERROR(stagingCache().acquire(chunk, plan.buffers, staging));
  unsigned hardware = std::max(1u, std::thread::hardware_concurrency());
  cpu::ThreadPool pool(std::min(hardware, plan.threads));
  cudaStream_t copy = nullptr;
  MOEC_CUDA_TRY(cudaStreamCreateWithFlags(&copy, cudaStreamNonBlocking));
  std::vector<cudaEvent_t> done(plan.buffers, nullptr);
  Status status = [&]() -> Status {
    for (cudaEvent_t &event : done)
      MOEC_CUDA_TRY(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    std::vector<bool> used(plan.buffers, false);
    for (size_t at = 0, i = 0; at < bytes; at += chunk, i = (i + 1) % plan.buffers) {
      size_t n = std::min(chunk, bytes - at);
      if (used[i]) // the copy that last read this staging buffer is done
        MOEC_CUDA_TRY(cudaEventSynchronize(done[i]));
      const unsigned char *from = static_cast<const unsigned char *>(host) + at;
      unsigned char *to = static_cast<unsigned char *>(staging[i].data());
      pool.parallelFor(static_cast<int64_t>((n + kSlice - 1) / kSlice), [&](int64_t b, int64_t e) {
        size_t begin = static_cast<size_t>(b) * kSlice, end = std::min(n, static_cast<size_t>(e) * kSlice);
        std::memcpy(to + begin, from + begin, end - begin);
      });
      MOEC_CUDA_TRY(cudaMemcpyAsync(static_cast<unsigned char *>(device) + at, to, n,
                                    cudaMemcpyHostToDevice, copy));
      MOEC_CUDA_TRY(cudaEventRecord(done[i], copy));
      used[i] = true;
    }
    MOEC_CUDA_TRY(cudaStreamSynchronize(copy));
    return Status::ok();
  }();
  for (cudaEvent_t event : done)
    if (event)
      cudaEventDestroy(event);
  cudaStreamDestroy(copy);
  if (status)
    stagingCache().release(chunk, staging);
  return status;
}

int reportStatus(const Status &status, char *error, size_t errorBytes) {
  if (status)
    return 0;
  if (error && errorBytes) {
    size_t n = std::min(errorBytes - 1, status.message().size());
    std::memcpy(error, status.message().data(), n);
    error[n] = '\0';
  }
  return 1;
}

} // namespace moec::rt::cuda
