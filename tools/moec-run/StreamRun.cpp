//===- StreamRun.cpp - moec-run --on-stream ------------------------------===//

#include "StreamRun.h"

#include <chrono>
#include <string>

#include <unistd.h>

#ifdef MOEC_RUN_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace moec::tools {

using rt::Status;

#ifdef MOEC_RUN_WITH_CUDA

namespace {

Status check(cudaError_t error, const char *what) {
  if (error == cudaSuccess)
    return Status::ok();
  cudaGetLastError();
  return Status::error(std::string("--on-stream: ") + what + ": " + cudaGetErrorName(error) +
                       " (" + cudaGetErrorString(error) + ")");
}

} // namespace

StreamRun::~StreamRun() {
  if (stream_) {
    cudaStreamSynchronize(static_cast<cudaStream_t>(stream_));
    cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
  }
  for (void *buffer : device_)
    cudaFree(buffer);
}

Status StreamRun::bind(std::vector<moec_tensor> &inputs, const std::vector<size_t> &inputBytes,
                       std::vector<moec_tensor> &outputs, const std::vector<size_t> &outputBytes) {
  cudaStream_t stream = nullptr;
  MOEC_RETURN_IF_ERROR(check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
                             "creating a stream"));
  stream_ = stream;
  // cudaMalloc's buffers are 256-byte aligned: the model uses them in place.
  auto allocate = [&](size_t bytes, void *&out) {
    out = nullptr;
    if (bytes == 0)
      return Status::ok();
    MOEC_RETURN_IF_ERROR(check(cudaMalloc(&out, bytes),
                               ("allocating " + std::to_string(bytes) + " bytes").c_str()));
    device_.push_back(out);
    return Status::ok();
  };
  for (size_t i = 0; i < inputs.size(); ++i) {
    void *device = nullptr;
    MOEC_RETURN_IF_ERROR(allocate(inputBytes[i], device));
    if (device)
      MOEC_RETURN_IF_ERROR(check(cudaMemcpy(device, inputs[i].data, inputBytes[i],
                                            cudaMemcpyHostToDevice),
                                 (std::string("copying input '") + inputs[i].name + "'").c_str()));
    inputs[i].data = device;
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    void *device = nullptr;
    MOEC_RETURN_IF_ERROR(allocate(outputBytes[i], device));
    hostOutputs_.push_back(outputs[i].data);
    deviceOutputs_.push_back(device);
    outputBytes_.push_back(outputBytes[i]);
    outputs[i].data = device;
  }
  return Status::ok();
}

Status StreamRun::run(moec_model *model, const std::vector<moec_tensor> &inputs,
                      std::vector<moec_tensor> &outputs, bool checkOrder) {
  auto stream = static_cast<cudaStream_t>(stream_);
  if (checkOrder) {
    MOEC_RETURN_IF_ERROR(check(
        cudaLaunchHostFunc(stream, [](void *) { usleep(5000); }, nullptr), "queueing a delay"));
    for (size_t i = 0; i < deviceOutputs_.size(); ++i)
      if (deviceOutputs_[i])
        MOEC_RETURN_IF_ERROR(check(cudaMemsetAsync(deviceOutputs_[i], 0xFF, outputBytes_[i], stream),
                                   "poisoning an output"));
  }
  MOEC_RETURN_IF_ERROR(queue(model, inputs, outputs));
  return check(cudaStreamSynchronize(stream), "waiting for the run on the stream");
}

Status StreamRun::queue(moec_model *model, const std::vector<moec_tensor> &inputs,
                        std::vector<moec_tensor> &outputs) {
  if (moec_run_async(model, inputs.data(), inputs.size(), outputs.data(), outputs.size(),
                     stream_))
    return Status::error(moec_last_error());
  return Status::ok();
}

Status StreamRun::runQueued(moec_model *model, const std::vector<moec_tensor> &inputs,
                            std::vector<moec_tensor> &outputs, long count, double *ms) {
  auto start = std::chrono::steady_clock::now();
  for (long i = 0; i < count; ++i)
    MOEC_RETURN_IF_ERROR(queue(model, inputs, outputs));
  MOEC_RETURN_IF_ERROR(check(cudaStreamSynchronize(static_cast<cudaStream_t>(stream_)),
                             "waiting for the queued runs"));
  *ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return Status::ok();
}

Status StreamRun::fetch() {
  for (size_t i = 0; i < deviceOutputs_.size(); ++i)
    if (deviceOutputs_[i])
      MOEC_RETURN_IF_ERROR(check(cudaMemcpy(hostOutputs_[i], deviceOutputs_[i], outputBytes_[i],
                                            cudaMemcpyDeviceToHost),
                                 "copying an output back"));
  return Status::ok();
}

#else // !MOEC_RUN_WITH_CUDA

// Without CUDA nothing can be queued: bind refuses (moec-run stops there).
const char *const kWithoutCuda = "--on-stream: this moec-run was built without CUDA";
StreamRun::~StreamRun() = default;
Status StreamRun::bind(std::vector<moec_tensor> &, const std::vector<size_t> &,
                       std::vector<moec_tensor> &, const std::vector<size_t> &) {
  return Status::error(kWithoutCuda);
}
Status StreamRun::run(moec_model *, const std::vector<moec_tensor> &, std::vector<moec_tensor> &,
                      bool) {
  return Status::error(kWithoutCuda);
}
Status StreamRun::runQueued(moec_model *, const std::vector<moec_tensor> &,
                            std::vector<moec_tensor> &, long, double *) {
  return Status::error(kWithoutCuda);
}
Status StreamRun::fetch() { return Status::ok(); }

#endif

} // namespace moec::tools
