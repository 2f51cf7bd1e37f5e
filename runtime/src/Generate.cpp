//===- Generate.cpp - forward and generation over a whole model's steps ---===//
//
// moec_forward and moec_generate (moec.h), built on the C API alone: a step
// is one moec_run of packed tokens (input_ids, positions, sequences), and the
// KV cache between steps is the artifact's. Nothing here knows the model.
//
//===----------------------------------------------------------------------===//

#include "moec/moec.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <new>
#include <numeric>
#include <random>
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

/// The token after `logits` (V of them).
int64_t pick(const float *logits, int64_t vocab, const moec_sampling *sampling,
             std::mt19937_64 &random, std::vector<std::pair<float, int64_t>> &scratch) {
  if (!sampling || sampling->temperature <= 0.0f)
    return std::max_element(logits, logits + vocab) - logits; // the first of ties
  scratch.clear();
  for (int64_t v = 0; v < vocab; ++v)
    scratch.push_back({logits[v] / sampling->temperature, v});
  // Largest first; ties by id, so the order does not depend on the sort.
  auto larger = [](const auto &a, const auto &b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  size_t keep = sampling->top_k > 0 ? std::min<size_t>(sampling->top_k, scratch.size())
                                    : scratch.size();
  std::partial_sort(scratch.begin(), scratch.begin() + static_cast<std::ptrdiff_t>(keep),
                    scratch.end(), larger);
  scratch.resize(keep);
  double top = scratch.front().first, total = 0.0;
  std::vector<double> weights;
  for (const auto &entry : scratch)
    total += weights.emplace_back(std::exp(static_cast<double>(entry.first) - top));
  if (sampling->top_p < 1.0f) {
    double mass = 0.0;
    size_t n = 0;
    while (n < weights.size() && (n == 0 || mass < sampling->top_p * total))
      mass += weights[n++];
    weights.resize(n);
    total = mass;
  }
  double draw = std::uniform_real_distribution<double>(0.0, total)(random);
  for (size_t i = 0; i < weights.size(); ++i) {
    if (draw < weights[i])
      return scratch[i].second;
    draw -= weights[i];
  }
  return scratch[weights.size() - 1].second;
}

double seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

} // namespace

// moec_last_error's thread-local message lives in Model.cpp; this sets it
// (internal to the runtime library, not part of moec.h).
extern "C" __attribute__((visibility("hidden"))) void
moec_set_last_error_internal(const char *message);

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
  if (moec_reset(model, -1) != 0)
    return -1;
  for (int64_t b = 0; b < batch; ++b)
    std::memcpy(sequences + b * width, input_ids + b * length, sizeof(int64_t) * length);

  std::mt19937_64 random(sampling ? sampling->seed : 0);
  std::vector<std::pair<float, int64_t>> scratch;
  std::vector<int64_t> next(batch);
  Step step;
  moec_generate_stats measured{};

  // Prefill: every prompt token, packed, in steps of at most max tokens; the
  // logits of each prompt's last token pick its first new token.
  auto start = std::chrono::steady_clock::now();
  std::vector<std::pair<int64_t, int64_t>> tokens; // (sequence, position)
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t p = 0; p < lengths[b]; ++p)
      tokens.push_back({b, p});
  for (size_t begin = 0; begin < tokens.size() && max_new_tokens > 0;) {
    size_t end = std::min(tokens.size(), begin + static_cast<size_t>(maxTokens));
    step.clear();
    for (size_t i = begin; i < end; ++i) {
      auto [b, p] = tokens[i];
      step.ids.push_back(input_ids[b * length + first[b] + p]);
      step.positions.push_back(p);
      step.sequences.push_back(b);
    }
    if (step.run(model, vocab) != 0)
      return -1;
    for (size_t i = begin; i < end; ++i) {
      auto [b, p] = tokens[i];
      if (p == lengths[b] - 1)
        next[b] = pick(step.logits.data() + (i - begin) * vocab, vocab, sampling, random, scratch);
    }
    begin = end;
  }
  measured.prefill_tokens = static_cast<int64_t>(tokens.size());
  measured.prefill_seconds = seconds(start);

  // Decode: one token per sequence and step.
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
      next[b] = pick(step.logits.data() + b * vocab, vocab, sampling, random, scratch);
    measured.decode_tokens += batch;
  }
  measured.decode_seconds = seconds(start);
  if (stats)
    *stats = measured;
  return 0;
}

} // extern "C"
