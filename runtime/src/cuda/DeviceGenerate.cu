//===- DeviceGenerate.cu - moec_generate's loop on the GPU -----------------===//

#include "moec/runtime/cuda/DeviceGenerate.h"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <string>
#include <vector>

namespace moec::rt::cuda {
namespace {

/// The next decode step's inputs: each sequence's last new token, at the
/// position after it (the prompt's length plus the tokens before it).
__global__ void nextStepKernel(const int64_t *tokens, const int64_t *lengths, int64_t step,
                               int64_t batch, int64_t *ids, int64_t *positions) {
  int64_t b = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (b >= batch)
    return;
  ids[b] = tokens[b];
  positions[b] = lengths[b] + step;
}

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// `buffer` holds at least `bytes`, reallocated (contents lost) when smaller.
Status ensure(DeviceBuffer &buffer, size_t bytes) {
  if (buffer.size() >= bytes && buffer.data())
    return Status::ok();
  buffer = DeviceBuffer();
  return DeviceBuffer::allocate(bytes, buffer);
}

} // namespace

DeviceGenerator::~DeviceGenerator() {
  if (stream_) {
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
  }
}

Status DeviceGenerator::reserve(int64_t batch, int64_t maxTokens, int64_t newTokens,
                                int64_t vocab, bool sampled) {
  if (!stream_)
    MOEC_CUDA_TRY(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  // Separate allocations: each input 256-byte aligned and apart from the
  // logits, so that the decode step runs on them in place.
  int64_t rows = std::max(batch, maxTokens);
  if (batch > batch_) {
    for (DeviceBuffer *buffer : {&ids_, &positions_, &sequences_, &lengths_})
      MOEC_RETURN_IF_ERROR(ensure(*buffer, sizeof(int64_t) * static_cast<size_t>(batch)));
    batch_ = batch;
  }
  if (rows > logitRows_ || vocab != vocab_) {
    MOEC_RETURN_IF_ERROR(
        ensure(logits_, sizeof(float) * static_cast<size_t>(rows) * static_cast<size_t>(vocab)));
    logitRows_ = rows;
    vocab_ = vocab;
  }
  if (batch * newTokens > newTokens_) {
    MOEC_RETURN_IF_ERROR(
        ensure(tokens_, sizeof(int64_t) * static_cast<size_t>(batch * newTokens)));
    newTokens_ = batch * newTokens;
  }
  if (sampled && (sampler_.maxRows() < batch || sampler_.vocab() != vocab))
    MOEC_RETURN_IF_ERROR(sampler_.create(batch, vocab));
  return Status::ok();
}

Status DeviceGenerator::generate(moec_artifact_generate_args &args, const StepFn &step) {
  const int64_t batch = args.batch, vocab = args.vocab, newTokens = args.max_new_tokens;
  if (batch < 1 || vocab < 1 || newTokens < 1 || args.max_tokens < 1 ||
      (newTokens > 1 && args.max_tokens < batch))
    return Status::error("device generation: " + std::to_string(batch) + " sequences, " +
                         std::to_string(newTokens) + " new tokens, " + std::to_string(vocab) +
                         " logits, steps of " + std::to_string(args.max_tokens) + " tokens");
  Sampling sampling{args.temperature, args.top_k, args.top_p, args.seed};
  MOEC_RETURN_IF_ERROR(reserve(batch, args.max_tokens, newTokens, vocab, !sampling.greedy()));
  auto *ids = ids_.dataAs<int64_t>(), *positions = positions_.dataAs<int64_t>();
  auto *sequences = sequences_.dataAs<int64_t>(), *lengths = lengths_.dataAs<int64_t>();
  auto *tokens = tokens_.dataAs<int64_t>();
  float *logits = logits_.dataAs<float>();
  std::vector<int64_t> hostSequences(static_cast<size_t>(batch)), hostPositions(hostSequences);
  std::iota(hostSequences.begin(), hostSequences.end(), int64_t(0));
  // What stays fixed through the decode steps; the host copies are read
  // before the prefill's synchronisation below.
  MOEC_CUDA_TRY(cudaMemcpyAsync(sequences, hostSequences.data(), sizeof(int64_t) * batch,
                                cudaMemcpyHostToDevice, stream_));
  MOEC_CUDA_TRY(cudaMemcpyAsync(lengths, args.lengths, sizeof(int64_t) * batch,
                                cudaMemcpyHostToDevice, stream_));

  // Rows of `logits` to tokens: greedy needs no buffers of the sampler's.
  auto pick = [&](const float *rows, int64_t count, int64_t firstSequence, int64_t newToken,
                  int64_t *out) {
    return sampling.greedy()
               ? greedyTokens(rows, count, vocab, out, stream_)
               : sampler_.sample(rows, count, firstSequence, newToken, sampling, out, stream_);
  };
  // Whatever fails, nothing queued is left running on the buffers.
  auto failed = [&](Status status) {
    cudaStreamSynchronize(stream_);
    return status;
  };
  auto start = std::chrono::steady_clock::now();
  // The prefill: host-fed steps; each prompt's last logits sampled on the
  // device into its first new token.
  for (int64_t begin = 0; begin < args.prefill_tokens; begin += args.max_tokens) {
    int64_t count = std::min(args.max_tokens, args.prefill_tokens - begin);
    const void *inputs[3] = {args.prefill_ids + begin, args.prefill_positions + begin,
                             args.prefill_sequences + begin};
    void *outputs[1] = {logits};
    if (Status status = step(inputs, inputs, outputs, count, stream_); !status)
      return failed(status);
    for (int64_t t = begin; t < begin + count; ++t) {
      int64_t s = args.prefill_sequences[t];
      if (args.prefill_positions[t] != args.lengths[s] - 1)
        continue;
      if (Status status = pick(logits + (t - begin) * vocab, 1, s, 0, tokens + s); !status)
        return failed(status);
    }
  }
  MOEC_CUDA_TRY(cudaStreamSynchronize(stream_));
  args.prefill_seconds = secondsSince(start);

  // The decode steps: nothing here waits for the GPU.
  start = std::chrono::steady_clock::now();
  for (int64_t n = 0; n + 1 < newTokens; ++n) {
    nextStepKernel<<<static_cast<unsigned>((batch + 127) / 128), 128, 0, stream_>>>(
        tokens + n * batch, lengths, n, batch, ids, positions);
    if (Status status = cudaStatus(cudaGetLastError(), "nextStepKernel", __FILE__, __LINE__);
        !status)
      return failed(status);
    for (int64_t b = 0; b < batch; ++b)
      hostPositions[b] = args.lengths[b] + n;
    const void *inputs[3] = {ids, positions, sequences};
    const void *checked[3] = {nullptr, hostPositions.data(), hostSequences.data()};
    void *outputs[1] = {logits};
    if (Status status = step(inputs, checked, outputs, batch, stream_); !status)
      return failed(status);
    if (Status status = pick(logits, batch, 0, n + 1, tokens + (n + 1) * batch); !status)
      return failed(status);
  }
  MOEC_CUDA_TRY(cudaStreamSynchronize(stream_));
  args.decode_seconds = secondsSince(start);
  MOEC_CUDA_TRY(cudaMemcpy(args.tokens, tokens, sizeof(int64_t) * batch * newTokens,
                           cudaMemcpyDeviceToHost));
  return Status::ok();
}

} // namespace moec::rt::cuda
