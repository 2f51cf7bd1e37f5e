//===- Generate.cpp - forward and generation over a whole model's steps ---===//
//
// moec_forward and moec_generate (moec.h), built on the C API: a step is one
// moec_run of packed tokens (input_ids, positions, sequences), and the KV
// cache between steps is the artifact's. Nothing here knows the model. A CUDA
// whole model generates on the device instead (moec_artifact_generate,
// moec/runtime/cuda/DeviceGenerate.h), from the prefill built and checked
// here; tokens are picked by moec/runtime/Sampling.h on either side, so both
// give the same tokens for the same logits and seed.
//
//===----------------------------------------------------------------------===//

#include "moec/moec.h"
#include "moec/runtime/ArtifactABI.h"
#include "moec/runtime/Sampling.h"

#include <algorithm>
#include <cstdlib>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <new>
#include <numeric>
#include <string>
#include <vector>

namespace {

/// moec_last_error's message of a failure here: set through a call that fails
/// with it (the C API owns the thread's message).
int failWith(moec_model *model, const std::string &message);

/// The packed tokens of one step and their logits.
struct Step {
  std::vector<int64_t> ids, positions, sequences;
  std::vector<float> logits;

  void clear() {
    ids.clear();
    positions.clear();
    sequences.clear();
  }

  int run(moec_model *model, int64_t vocab) {
    int64_t n = static_cast<int64_t>(ids.size());
    logits.resize(static_cast<size_t>(n * vocab));
    int64_t tokenShape[1] = {n}, logitShape[2] = {n, vocab};
    moec_tensor inputs[3] = {{"input_ids", MOEC_I64, 1, tokenShape, ids.data()},
                             {"positions", MOEC_I64, 1, tokenShape, positions.data()},
                             {"sequences", MOEC_I64, 1, tokenShape, sequences.data()}};
    moec_tensor outputs[1] = {{"logits", MOEC_F32, 2, logitShape, logits.data()}};
    return moec_run(model, inputs, 3, outputs, 1);
  }
};

int checkModel(moec_model *model, const char *what, int64_t batch, int64_t length) {
  if (!model)
    return failWith(nullptr, std::string(what) + ": model is null");
  int64_t maxBatch = moec_max_batch(model), maxSeq = moec_max_seq(model);
  if (maxBatch == 0)
    return failWith(model, std::string(what) + ": not a whole model (the artifact has no KV "
                                               "cache)");
  if (batch < 1 || batch > maxBatch)
    return failWith(model, std::string(what) + ": a batch of " + std::to_string(batch) +
                               " sequences; the artifact's KV cache holds 1 to " +
                               std::to_string(maxBatch) + " (moec compile --max-batch)");
  if (length < 1 || length > maxSeq)
    return failWith(model, std::string(what) + ": " + std::to_string(length) +
                               " positions per sequence; the artifact's KV cache holds 1 to " +
                               std::to_string(maxSeq) + " (moec compile --max-seq)");
  return 0;
}

double seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

} // namespace

// moec_last_error's thread-local message lives in Model.cpp; this sets it
// (internal to the runtime library, not part of moec.h).
extern "C" __attribute__((visibility("hidden"))) void
moec_set_last_error_internal(const char *message);
// The artifact's generation on the device (Model.cpp): 1 where it has none.
extern "C" __attribute__((visibility("hidden"))) int
moec_generate_on_device_internal(moec_model *model, moec_artifact_generate_args *args);

namespace {
int failWith(moec_model *, const std::string &message) {
  moec_set_last_error_internal(message.c_str());
  return -1;
}
} // namespace

extern "C" {

int moec_forward(moec_model *model, const int64_t *input_ids, int64_t batch, int64_t length,
                 float *logits) {
  if (int rc = checkModel(model, "moec_forward", batch, length))
    return rc;
  if (!input_ids || !logits)
    return failWith(model, "moec_forward: input_ids or logits is null");
  int64_t vocab = moec_vocab_size(model), maxTokens = moec_max_tokens(model);
  if (moec_reset(model, -1) != 0)
    return -1;
  // Whole sequences per step where they fit, else chunks of one sequence: the
  // cache makes a chunk attend to the chunks before it.
  Step step;
  int64_t total = batch * length;
  for (int64_t begin = 0; begin < total;) {
    int64_t end = std::min(total, begin + maxTokens);
    step.clear();
    for (int64_t t = begin; t < end; ++t) {
      step.ids.push_back(input_ids[t]);
      step.positions.push_back(t % length);
      step.sequences.push_back(t / length);
    }
    if (step.run(model, vocab) != 0)
      return -1;
    std::memcpy(logits + begin * vocab, step.logits.data(),
                sizeof(float) * static_cast<size_t>((end - begin) * vocab));
    begin = end;
  }
  return 0;
}

int moec_generate(moec_model *model, const int64_t *input_ids, const int64_t *attention_mask,
                  int64_t batch, int64_t length, int64_t max_new_tokens,
                  const moec_sampling *sampling, int64_t *sequences,
                  moec_generate_stats *stats) {
  if (max_new_tokens < 0)
    return failWith(model, "moec_generate: max_new_tokens is negative");
  if (int rc = checkModel(model, "moec_generate", batch, length))
    return rc;
  if (!input_ids || !sequences)
    return failWith(model, "moec_generate: input_ids or sequences is null");
  if (sampling && (!(sampling->temperature >= 0.0f) || sampling->top_k < 0 ||
                   !(sampling->top_p > 0.0f && sampling->top_p <= 1.0f)))
    return failWith(model, "moec_generate: sampling needs temperature >= 0, top_k >= 0 and "
                           "top_p in (0, 1]");
  int64_t vocab = moec_vocab_size(model), maxTokens = moec_max_tokens(model);
  int64_t maxSeq = moec_max_seq(model), width = length + max_new_tokens;
  // Each prompt: its first token and length (the mask's ones, contiguous).
  std::vector<int64_t> first(batch), lengths(batch);
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t *mask = attention_mask ? attention_mask + b * length : nullptr;
    int64_t begin = 0, end = length;
    if (mask) {
      while (begin < length && mask[begin] == 0)
        ++begin;
      end = begin;
      while (end < length && mask[end] == 1)
        ++end;
      for (int64_t t = 0; t < length; ++t)
        if ((mask[t] != 0 && mask[t] != 1) || (mask[t] == 1 && (t < begin || t >= end)))
          return failWith(model, "moec_generate: attention_mask of sequence " +
                                     std::to_string(b) +
                                     " must be 0/1 with its ones contiguous (left or right "
                                     "padding)");
    }
    if (end == begin)
      return failWith(model, "moec_generate: sequence " + std::to_string(b) +
                                 " has an empty prompt");
    if (end - begin + max_new_tokens > maxSeq)
      return failWith(model, "moec_generate: sequence " + std::to_string(b) + "'s prompt of " +
                                 std::to_string(end - begin) + " tokens and " +
                                 std::to_string(max_new_tokens) +
                                 " new ones exceed the KV cache's " + std::to_string(maxSeq) +
                                 " positions (moec compile --max-seq)");
    first[b] = begin;
    lengths[b] = end - begin;
    for (int64_t t = 0; t < length; ++t) {
      int64_t id = input_ids[b * length + t];
      if (t >= begin && t < end && (id < 0 || id >= vocab))
        return failWith(model, "moec_generate: token " + std::to_string(t) + " of sequence " +
                                   std::to_string(b) + " is " + std::to_string(id) +
                                   ", outside the vocabulary [0, " + std::to_string(vocab) + ")");
    }
  }
  // Decode steps carry one token per sequence: checked before anything runs.
  if (max_new_tokens > 1 && batch > maxTokens)
    return failWith(model, "moec_generate: a batch of " + std::to_string(batch) +
                               " sequences needs decode steps of " + std::to_string(batch) +
                               " tokens; the artifact runs at most " + std::to_string(maxTokens) +
                               " (moec compile --max-tokens)");
  if (moec_reset(model, -1) != 0)
    return -1;
  for (int64_t b = 0; b < batch; ++b)
    std::memcpy(sequences + b * width, input_ids + b * length, sizeof(int64_t) * length);

  moec::rt::Sampling rule;
  if (sampling)
    rule = {sampling->temperature, sampling->top_k, sampling->top_p, sampling->seed};
  moec::rt::SamplingScratch scratch;
  std::vector<int64_t> next(batch);
  Step step;
  moec_generate_stats measured{};

  // The prefill: every prompt token, packed, in steps of at most max tokens;
  // the logits of each prompt's last token pick its first new token.
  Step prefill;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t p = 0; p < lengths[b]; ++p) {
      prefill.ids.push_back(input_ids[b * length + first[b] + p]);
      prefill.positions.push_back(p);
      prefill.sequences.push_back(b);
    }
  const int64_t prefillTokens = static_cast<int64_t>(prefill.ids.size());
  measured.prefill_tokens = prefillTokens;

  // On the device where the artifact can ($MOEC_DEVICE_GENERATE=0: the host
  // loop below, for comparisons).
  const char *onDevice = std::getenv("MOEC_DEVICE_GENERATE");
  if (max_new_tokens > 0 && !(onDevice && std::strcmp(onDevice, "0") == 0)) {
    std::vector<int64_t> tokens(static_cast<size_t>(batch * max_new_tokens));
    moec_artifact_generate_args args{};
    args.batch = batch;
    args.max_new_tokens = max_new_tokens;
    args.max_tokens = maxTokens;
    args.vocab = vocab;
    args.prefill_tokens = prefillTokens;
    args.prefill_ids = prefill.ids.data();
    args.prefill_positions = prefill.positions.data();
    args.prefill_sequences = prefill.sequences.data();
    args.lengths = lengths.data();
    args.temperature = rule.temperature;
    args.top_k = rule.topK;
    args.top_p = rule.topP;
    args.seed = rule.seed;
    args.tokens = tokens.data();
    int rc = moec_generate_on_device_internal(model, &args);
    if (rc < 0)
      return -1;
    if (rc == 0) {
      for (int64_t n = 0; n < max_new_tokens; ++n)
        for (int64_t b = 0; b < batch; ++b)
          sequences[b * width + length + n] = tokens[n * batch + b];
      measured.prefill_seconds = args.prefill_seconds;
      measured.decode_seconds = args.decode_seconds;
      measured.decode_tokens = batch * (max_new_tokens - 1);
      if (stats)
        *stats = measured;
      return 0;
    }
  }

  auto start = std::chrono::steady_clock::now();
  for (int64_t begin = 0; begin < prefillTokens && max_new_tokens > 0;) {
    int64_t end = std::min(prefillTokens, begin + maxTokens);
    step.clear();
    step.ids.assign(prefill.ids.begin() + begin, prefill.ids.begin() + end);
    step.positions.assign(prefill.positions.begin() + begin, prefill.positions.begin() + end);
    step.sequences.assign(prefill.sequences.begin() + begin, prefill.sequences.begin() + end);
    if (step.run(model, vocab) != 0)
      return -1;
    for (int64_t i = begin; i < end; ++i) {
      int64_t b = prefill.sequences[i];
      if (prefill.positions[i] == lengths[b] - 1)
        next[b] = moec::rt::sampleToken(step.logits.data() + (i - begin) * vocab, vocab, rule,
                                        moec::rt::samplingUniform(rule.seed, b, 0), scratch);
    }
    begin = end;
  }
  measured.prefill_seconds = seconds(start);

  // Decode: one token per sequence and step; new token n + 1 of each.
  start = std::chrono::steady_clock::now();
  for (int64_t n = 0; n < max_new_tokens; ++n) {
    for (int64_t b = 0; b < batch; ++b)
      sequences[b * width + length + n] = next[b];
    if (n + 1 == max_new_tokens)
      break;
    step.clear();
    for (int64_t b = 0; b < batch; ++b) {
      step.ids.push_back(next[b]);
      step.positions.push_back(lengths[b] + n);
      step.sequences.push_back(b);
    }
    if (step.run(model, vocab) != 0)
      return -1;
    for (int64_t b = 0; b < batch; ++b)
      next[b] = moec::rt::sampleToken(step.logits.data() + b * vocab, vocab, rule,
                                      moec::rt::samplingUniform(rule.seed, b, n + 1), scratch);
    measured.decode_tokens += batch;
  }
  measured.decode_seconds = seconds(start);
  if (stats)
    *stats = measured;
  return 0;
}

} // extern "C"
