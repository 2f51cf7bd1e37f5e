//===- grouped_matmul_decode.cpp - decode grouped-matmul bandwidth ----------===//
//
// Times moec's CUDA grouped matmuls at decode shapes and reports the bytes of
// the touched experts' weights per second against the H200's measured copy
// bandwidth (4.25 TB/s). A kernel microbenchmark, not the model benchmark:
// bench/ will hold the side-by-side comparison with transformers (issue 5).
//
//   bench/grouped_matmul_decode     (run on the GPU machine)
//
//===----------------------------------------------------------------------===//

#include "moec/runtime/Cuda.h"
#include "moec/runtime/cuda/MoEKernels.h"

#include <algorithm>
#include <cstdio>
#include <random>
#include <set>
#include <vector>

using namespace moec::rt;

namespace {

constexpr double kCopyBandwidth = 4.25e12; // bytes/s, measured on the H200

#define CHECK(expr)                                                                \
  do {                                                                             \
    Status s_ = (expr);                                                            \
    if (!s_.isOk()) {                                                              \
      std::fprintf(stderr, "%s\n", s_.message().c_str());                          \
      std::exit(1);                                                                \
    }                                                                              \
  } while (0)

struct Shape {
  const char *model;
  const char *projection;
  int64_t experts, n, k, topK;
  bool gated;
};

void run(const Shape &shape, int64_t tokens, std::mt19937 &rng) {
  // Routing: each token picks topK distinct experts; offsets count rows per expert.
  std::vector<int> rowsPerExpert(shape.experts, 0);
  std::set<int> touched;
  std::uniform_int_distribution<int> pick(0, static_cast<int>(shape.experts) - 1);
  for (int64_t t = 0; t < tokens; ++t) {
    std::set<int> chosen;
    while (static_cast<int64_t>(chosen.size()) < shape.topK)
      chosen.insert(pick(rng));
    for (int e : chosen) {
      ++rowsPerExpert[e];
      touched.insert(e);
    }
  }
  std::vector<int32_t> offsets(shape.experts);
  int32_t running = 0;
  for (int64_t e = 0; e < shape.experts; ++e)
    offsets[e] = running += rowsPerExpert[e];
  int64_t slots = tokens * shape.topK;

  DeviceBuffer lhs, weights, dOffsets, out;
  CHECK(DeviceBuffer::allocate(slots * shape.k * 4, lhs));
  CHECK(DeviceBuffer::allocate(shape.experts * shape.n * shape.k * 2, weights));
  CHECK(DeviceBuffer::allocate(shape.experts * 4, dOffsets));
  CHECK(DeviceBuffer::allocate(slots * shape.n * 4, out));
  CHECK(cudaStatus(cudaMemset(lhs.data(), 0x3C, lhs.size()), "memset", __FILE__, __LINE__));
  CHECK(cudaStatus(cudaMemset(weights.data(), 0x3C, weights.size()), "memset", __FILE__, __LINE__));
  CHECK(cudaStatus(cudaMemcpy(dOffsets.data(), offsets.data(), shape.experts * 4,
                              cudaMemcpyHostToDevice),
                   "offsets", __FILE__, __LINE__));
  cpu::Epilogue epilogue;
  if (shape.gated)
    epilogue = {true, cpu::ActivationKind::SiLU, cpu::GateUpLayout::Concatenated};

  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  auto time = [&](auto launch) {
    for (int i = 0; i < 5; ++i)
      launch();
    std::vector<float> samples;
    for (int i = 0; i < 50; ++i) {
      cudaEventRecord(start);
      launch();
      cudaEventRecord(stop);
      cudaEventSynchronize(stop);
      float ms = 0;
      cudaEventElapsedTime(&ms, start, stop);
      samples.push_back(ms);
    }
    std::sort(samples.begin(), samples.end());
    return samples[samples.size() / 2];
  };
  float decodeMs = time([&] {
    CHECK(cuda::groupedMatmulDecodeBF16(lhs.dataAs<float>(), slots, shape.k, weights.dataAs<uint16_t>(),
                                        shape.experts, shape.n, dOffsets.dataAs<int32_t>(), nullptr,
                                        epilogue, out.dataAs<float>(), nullptr));
  });
  double bytes = double(touched.size()) * shape.n * shape.k * 2;
  double bandwidth = bytes / (decodeMs * 1e-3);
  std::printf("%-14s %-8s T=%-4lld touched %3zu/%-3lld experts  %8.1f us  %6.2f TB/s  %5.1f%% of copy\n",
              shape.model, shape.projection, static_cast<long long>(tokens), touched.size(),
              static_cast<long long>(shape.experts), decodeMs * 1e3, bandwidth / 1e12,
              100.0 * bandwidth / kCopyBandwidth);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
}

} // namespace

int main() {
  if (cudaDeviceCountOrZero() == 0) {
    std::fprintf(stderr, "no CUDA device\n");
    return 1;
  }
  std::mt19937 rng(0);
  const Shape shapes[] = {
      {"Qwen3-30B-A3B", "gate_up", 128, 2 * 768, 2048, 8, true},
      {"Qwen3-30B-A3B", "down", 128, 2048, 768, 8, false},
      {"Mixtral-8x7B", "gate_up", 8, 2 * 14336, 4096, 2, true},
      {"Mixtral-8x7B", "down", 8, 4096, 14336, 2, false},
  };
  for (const Shape &shape : shapes)
    for (int64_t tokens : {1, 4, 16})
      run(shape, tokens, rng);
  return 0;
}
