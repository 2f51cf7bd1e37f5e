//===- DeviceGenerate.h - moec_generate's loop on the GPU ------*- C++ -*-===//
//
// A CUDA whole model's generation (moec_generate, moec.h) with the tokens on
// the device: the prefill is host-fed steps (the prompts, in steps of at most
// max tokens) whose prompts' last logits are sampled on the device; then each
// decode step is the model's run on device buffers (its CUDA graph, in place)
// followed by the sampling kernels and a small kernel that writes the next
// step's ids and positions, all queued on one stream: the host waits once
// after the prefill and once after the last decode step (the stats' two
// boundaries), and copies the new tokens back once.
//
// The KV cache's host-side checks (DeviceKVCache::checkStep) are made on the
// host's copy of what each step holds: the positions and sequences the loop
// writes, known on the host, so the cache's lengths stay counted; the sampled
// ids are not (drawn on the device, within the vocabulary by construction).
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_CUDA_DEVICEGENERATE_H
#define MOEC_RUNTIME_CUDA_DEVICEGENERATE_H

#include "moec/runtime/ArtifactABI.h"
#include "moec/runtime/Cuda.h"
#include "moec/runtime/Status.h"
#include "moec/runtime/cuda/Sampling.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>

namespace moec::rt::cuda {

/// One step of the model queued on `stream` (the generated run() through
/// moec_artifact_run's path for a caller's stream): `inputs` input_ids,
/// positions, sequences [tokens] (host or device memory), `outputs` logits
/// [tokens, V]; `checked` the same three as host memory for the host checks,
/// an entry null where the host does not know it.
using StepFn = std::function<Status(const void *const *inputs, const void *const *checked,
                                    void *const *outputs, int64_t tokens, cudaStream_t stream)>;

/// The device buffers of a model's generations, kept between them (so that a
/// decode step's graph, which holds their addresses, is replayed by the next
/// generation too) and grown when a generation needs more.
class DeviceGenerator {
public:
  DeviceGenerator() = default;
  DeviceGenerator(const DeviceGenerator &) = delete;
  DeviceGenerator &operator=(const DeviceGenerator &) = delete;
  ~DeviceGenerator();

  /// Runs `args` (checked by the caller: batch within the cache, each prompt
  /// and its new tokens within max seq, prompt ids within the vocabulary),
  /// each step through `step`; fills args.tokens and the seconds.
  Status generate(moec_artifact_generate_args &args, const StepFn &step);

private:
  Status reserve(int64_t batch, int64_t maxTokens, int64_t newTokens, int64_t vocab,
                 bool sampled);

  cudaStream_t stream_ = nullptr;
  int64_t batch_ = 0, logitRows_ = 0, newTokens_ = 0, vocab_ = 0;
  DeviceBuffer ids_, positions_, sequences_, lengths_, logits_, tokens_;
  DeviceSampler sampler_;
};

} // namespace moec::rt::cuda

#endif // MOEC_RUNTIME_CUDA_DEVICEGENERATE_H
