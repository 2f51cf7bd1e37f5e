//===- StreamRun.h - moec-run --on-stream: a CUDA caller's side of a run -*- C++ -*-===//
//
// With --on-stream, moec-run calls the model as a CUDA program embedding it
// would: the inputs copied once into device buffers of its own, the outputs
// written to device buffers, each run queued with moec_run_async on a stream
// of its own and waited for on that stream (moec.h). The model then uses the
// buffers in place, and the one wait of a run is the caller's. Built only with
// CUDA (MOEC_RUN_WITH_CUDA); elsewhere bind() says so.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_TOOLS_MOEC_RUN_STREAMRUN_H
#define MOEC_TOOLS_MOEC_RUN_STREAMRUN_H

#include "moec/moec.h"
#include "moec/runtime/Status.h"

#include <cstddef>
#include <vector>

namespace moec::tools {

class StreamRun {
public:
  StreamRun() = default;
  StreamRun(const StreamRun &) = delete;
  StreamRun &operator=(const StreamRun &) = delete;
  ~StreamRun();

  /// Creates the stream and device copies of `inputs` (`inputBytes[i]` bytes
  /// each) and device buffers for `outputs`, and points the tensors' data at
  /// them; the host pointers are kept for fetch().
  rt::Status bind(std::vector<moec_tensor> &inputs, const std::vector<size_t> &inputBytes,
                  std::vector<moec_tensor> &outputs, const std::vector<size_t> &outputBytes);

  /// One moec_run_async on the stream, then the wait for it. With
  /// `checkOrder` the stream first sleeps 5 ms on the host (a host function)
  /// and then fills the outputs with 0xFF bytes (NaN): a model that did not
  /// wait for the caller's queued work would write its outputs before that
  /// poison and leave NaN behind, one that did not hand the stream back after
  /// writing them would leave the wait early; either way the comparison fails.
  rt::Status run(moec_model *model, const std::vector<moec_tensor> &inputs,
                 std::vector<moec_tensor> &outputs, bool checkOrder);

  /// Queues `count` runs back to back and waits once; `*ms` is the time of
  /// all of them (the GPU's throughput, no host round trip between runs).
  rt::Status runQueued(moec_model *model, const std::vector<moec_tensor> &inputs,
                       std::vector<moec_tensor> &outputs, long count, double *ms);

  /// Copies the outputs back to the host buffers bind() was given.
  rt::Status fetch();

private:
  /// moec_run_async on the stream, without waiting.
  rt::Status queue(moec_model *model, const std::vector<moec_tensor> &inputs,
                   std::vector<moec_tensor> &outputs);

  void *stream_ = nullptr;
  std::vector<void *> device_;
  std::vector<void *> hostOutputs_, deviceOutputs_;
  std::vector<size_t> outputBytes_;
};

} // namespace moec::tools

#endif // MOEC_TOOLS_MOEC_RUN_STREAMRUN_H
