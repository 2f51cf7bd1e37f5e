//===- norm_rotary_bench.cu - rmsNorm and rotary at decode and prefill ----===//
//
// Times cuda::rmsNorm and cuda::rotary at Qwen3-30B-A3B's shapes (the hidden
// norm over 2048 columns, the per-head q and k norms of 32 and 4 groups of
// 128, the rotary of q's 32 and k's 4 heads of 128) for T = 1, 16, 64 and
// 4096 tokens, as a model step runs them: 100 launches captured into one
// CUDA graph (programmatic dependent launches back to back), the graph
// replayed; the figure is the replay's time per launch, gaps included, so
// that at T = 1 it is the kernel's latency in a chain. Inputs are random;
// each launch writes its own output (no launch depends on another's data).
//
//   moec-bench-norm-rotary [RESULTS.tsv]     (run on the GPU machine)
//
//===----------------------------------------------------------------------===//

#include "CudaCheck.h"
#include "GraphReplay.h"
#include "moec/runtime/Cuda.h"
#include "moec/runtime/cuda/ModelKernels.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <vector>

using namespace moec::rt;

namespace {

__global__ void fillKernel(float *data, size_t count, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count;
       i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 15, h *= 2246822519u, h ^= h >> 13;
    data[i] = static_cast<float>(h & 0xFFFF) / 32768.0f - 1.0f;
  }
}

float *deviceRandom(size_t count, uint32_t seed) {
  float *device = nullptr;
  CHECK_CUDA(cudaMalloc(&device, count * sizeof(float)));
  fillKernel<<<1024, 256>>>(device, count, seed);
  CHECK_CUDA(cudaGetLastError());
  return device;
}

/// Microseconds per launch of `launch` (100 in a graph, the graph replayed).
double timeLaunches(cudaStream_t stream, const std::function<void(cudaStream_t)> &launch) {
  constexpr int kLaunches = 100, kRepeats = 20;
  double ms = msPerGraphReplay(
      stream,
      [&](cudaStream_t s) {
        for (int i = 0; i < kLaunches; ++i)
          launch(s);
      },
      kRepeats);
  return 1e3 * ms / kLaunches;
}

} // namespace

int main(int argc, char **argv) {
  FILE *results = argc > 1 ? std::fopen(argv[1], "w") : nullptr;
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  constexpr int64_t kMaxTokens = 4096, kColumns = 32 * 128;
  float *x = deviceRandom(kMaxTokens * kColumns, 1), *y = deviceRandom(kMaxTokens * kColumns, 2);
  float *weight = deviceRandom(kColumns, 3);
  std::vector<float> invFreq(64);
  for (int i = 0; i < 64; ++i)
    invFreq[i] = static_cast<float>(std::pow(1e6, -i / 64.0));
  float *dFreq = nullptr;
  int64_t *positions = nullptr;
  CHECK_CUDA(cudaMalloc(&dFreq, 64 * sizeof(float)));
  CHECK_CUDA(cudaMemcpy(dFreq, invFreq.data(), 64 * sizeof(float), cudaMemcpyHostToDevice));
  std::vector<int64_t> hostPositions(kMaxTokens);
  for (int64_t t = 0; t < kMaxTokens; ++t)
    hostPositions[t] = 1000 + t;
  CHECK_CUDA(cudaMalloc(&positions, kMaxTokens * sizeof(int64_t)));
  CHECK_CUDA(cudaMemcpy(positions, hostPositions.data(), kMaxTokens * sizeof(int64_t),
                        cudaMemcpyHostToDevice));
  auto emit = [&](const char *what, int64_t tokens, double us) {
    std::printf("%-28s T %5ld: %8.2f us a launch\n", what, long(tokens), us);
    std::fflush(stdout);
    if (results)
      std::fprintf(results, "%s\t%ld\t%.3f\n", what, long(tokens), us);
  };
  for (int64_t tokens : {1, 16, 64, 4096}) {
    auto norm = [&](const char *what, int64_t k, int64_t group) {
      emit(what, tokens, timeLaunches(stream, [&](cudaStream_t s) {
             require(cuda::rmsNorm(x, tokens, k, weight, group, 1e-6f, 0.0f, y, s), what);
           }));
    };
    norm("rms_norm hidden 2048", 2048, 2048);
    norm("rms_norm q 32 x 128", 32 * 128, 128);
    norm("rms_norm k 4 x 128", 4 * 128, 128);
    auto rope = [&](const char *what, int64_t heads) {
      emit(what, tokens, timeLaunches(stream, [&](cudaStream_t s) {
             require(cuda::rotary(x, tokens, heads * 128, positions, dFreq, 64, 128, 0, false,
                                  1.0f, y, s),
                     what);
           }));
    };
    rope("rotary q 32 x 128", 32);
    rope("rotary k 4 x 128", 4);
  }
  if (results)
    std::fclose(results);
  return 0;
}
