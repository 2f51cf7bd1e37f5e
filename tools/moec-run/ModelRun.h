//===- ModelRun.h - moec-run on a whole model ------------------*- C++ -*-===//
//
// An artifact with a KV cache (moec_max_batch > 0) takes `input_ids` [B, T]
// (and for --generate an optional `attention_mask`) from --inputs, not the
// packed step tensors: without --generate it writes the exported graph's
// `logits` [B, T, V] (moec_forward), with --generate N the `sequences`
// [B, T + N] of moec_generate, and prints the prefill's and decode's tokens/s.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_TOOLS_MOEC_RUN_MODELRUN_H
#define MOEC_TOOLS_MOEC_RUN_MODELRUN_H

#include "moec/moec.h"
#include "moec/runtime/Status.h"
#include "moec/runtime/Npz.h"
#include "moec/runtime/Tensor.h"

#include <string>

namespace moec::tools {

struct ModelRunOptions {
  std::string inputs;
  /// --generate N: new tokens per sequence; -1 runs the forward.
  long generate = -1;
  moec_sampling sampling{0.0f, 0, 1.0f, 0};
};

/// Runs the whole model `model` as `options` say; fills `outputs` (logits or
/// sequences) for the caller to write and compare.
rt::Status runWholeModel(moec_model *model, const ModelRunOptions &options,
                         rt::TensorMap &outputs);

} // namespace moec::tools

#endif // MOEC_TOOLS_MOEC_RUN_MODELRUN_H
