//===- attention_bench.cu - moe.attention's kernels at the models' shapes ---===//
//
// Times cuda::attention (the cache's write, then the attention) as a whole
// model runs it: a bf16 DeviceKVCache with one slot per layer, each call
// captured into one CUDA graph, one call per slot, and the graph replayed;
// the figure is the replay's time over the calls. Enough slots (layers) that
// their KV rows exceed the L2 several times (at least 256 MB, at most 32
// slots), so the decode reads them from HBM as a model's layers do. The
// cache holds random bf16 rows; decode tokens sit at the last position of
// their sequence (every cached position attended), prefill prompts start at
// position 0 (causal).
//
// Decode reports the KV bytes read (every attended position's key and value
// rows, a shared key slice once) per second; prefill, the attention's
// multiply-adds (causal: T·(T+1)/2 query-key pairs, each Dq + Dv of them, 2
// FLOP each) per second. bench/attention_torch.py times torch's
// scaled_dot_product_attention on the same shapes and prints both.
//
//   moec-bench-attention [RESULTS.tsv]     (run on the GPU machine)
//
//===----------------------------------------------------------------------===//

#include "CudaCheck.h"
#include "GraphReplay.h"
#include "moec/runtime/Cuda.h"
#include "moec/runtime/cuda/ModelKernels.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using namespace moec::rt;
using namespace moec::rt::cuda;

namespace {

struct Shape {
  const char *name;
  int64_t heads, kvHeads, keyDim, sharedDim, valueDim, window;
  bool sinks;
};

const Shape kQwen3{"qwen3", 32, 4, 128, 0, 128, 0, false};
const Shape kMixtral{"mixtral", 32, 8, 128, 0, 128, 0, false};
const Shape kGptOss{"gpt-oss", 64, 8, 64, 0, 64, 0, true};
const Shape kGptOssWindow{"gpt-oss-w128", 64, 8, 64, 0, 64, 128, true};
const Shape kDeepSeek{"deepseek-v3", 128, 128, 128, 64, 128, 0, false};

/// A uniform value in [-scale, scale) from a hash of the index.
__device__ float hashed(size_t i, uint32_t seed, float scale) {
  uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
  h ^= h >> 15, h *= 2246822519u, h ^= h >> 13;
  return scale * (static_cast<float>(h & 0xFFFF) / 32768.0f - 1.0f);
}

template <typename T>
__global__ void fillKernel(T *data, size_t count, uint32_t seed, float scale) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count;
       i += size_t(gridDim.x) * blockDim.x)
    data[i] = static_cast<T>(hashed(i, seed, scale));
}

float *deviceRandom(size_t count, float scale, uint32_t seed) {
  float *device = nullptr;
  CHECK_CUDA(cudaMalloc(&device, count * sizeof(float)));
  fillKernel<<<1024, 256>>>(device, count, seed, scale);
  CHECK_CUDA(cudaGetLastError());
  return device;
}

/// Layers for a case whose slot holds `slotBytes`: at least 256 MB, at most 32.
int64_t layersFor(double slotBytes) {
  return std::clamp<int64_t>(static_cast<int64_t>(256e6 / slotBytes) + 1, 1, 32);
}

/// Microseconds per call of `batch` sequences, `tokens` tokens each at
/// positions length - tokens .. length - 1.
double timeCase(const Shape &s, KVCacheType type, int64_t batch, int64_t tokens, int64_t length,
                int64_t &layers) {
  const int64_t keyColumns = s.kvHeads * s.keyDim + s.sharedDim,
                valueColumns = s.kvHeads * s.valueDim, queryDim = s.keyDim + s.sharedDim;
  const size_t element = type == KVCacheType::BF16 ? 2 : 4;
  double slotBytes = double(batch) * length * (keyColumns + valueColumns) * element;
  layers = layersFor(slotBytes);
  DeviceKVCache cache;
  std::vector<DeviceKVCache::Slot> slots(layers, DeviceKVCache::Slot{keyColumns, valueColumns});
  require(cache.create(batch, length, slots, type), "cache");
  for (int64_t l = 0; l < layers; ++l)
    for (void *p : {cache.keys(l), cache.values(l)}) {
      size_t count = size_t(batch) * length * (p == cache.keys(l) ? keyColumns : valueColumns);
      if (type == KVCacheType::BF16)
        fillKernel<<<1024, 256>>>(static_cast<__nv_bfloat16 *>(p), count, uint32_t(l * 7 + 1),
                                  1.0f);
      else
        fillKernel<<<1024, 256>>>(static_cast<float *>(p), count, uint32_t(l * 7 + 1), 1.0f);
    }
  CHECK_CUDA(cudaGetLastError());
  const int64_t n = batch * tokens;
  float *query = deviceRandom(n * s.heads * queryDim, 0.5f, 11);
  float *key = deviceRandom(n * s.kvHeads * s.keyDim, 1.0f, 12);
  float *keyShared = deviceRandom(std::max<int64_t>(1, n * s.sharedDim), 1.0f, 13);
  float *value = deviceRandom(n * valueColumns, 1.0f, 14);
  float *sinks = deviceRandom(s.heads, 1.0f, 15);
  std::vector<int64_t> hostPositions, hostSequences;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < tokens; ++t) {
      hostPositions.push_back(length - tokens + t);
      hostSequences.push_back(b);
    }
  int64_t *positions = nullptr, *sequences = nullptr;
  CHECK_CUDA(cudaMalloc(&positions, n * 8));
  CHECK_CUDA(cudaMalloc(&sequences, n * 8));
  CHECK_CUDA(cudaMemcpy(positions, hostPositions.data(), n * 8, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(sequences, hostSequences.data(), n * 8, cudaMemcpyHostToDevice));
  float *out = nullptr;
  CHECK_CUDA(cudaMalloc(&out, n * s.heads * s.valueDim * 4));
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  auto call = [&](int64_t layer) {
    require(attention(cache, layer, query, key, value, s.sharedDim ? keyShared : nullptr,
                      s.sinks ? sinks : nullptr, positions, sequences, n, s.heads, s.kvHeads,
                      s.keyDim, s.sharedDim, s.valueDim, 1.0f / std::sqrt(float(queryDim)),
                      s.window, out, stream),
            "attention");
  };
  const int repeats = tokens > 1 ? 5 : 20;
  double ms = msPerGraphReplay(
      stream,
      [&](cudaStream_t) {
        for (int64_t l = 0; l < layers; ++l)
          call(l);
      },
      repeats);
  CHECK_CUDA(cudaStreamDestroy(stream));
  for (void *p : std::initializer_list<void *>{query, key, keyShared, value, sinks, positions,
                                               sequences, out})
    CHECK_CUDA(cudaFree(p));
  return 1e3 * ms / layers;
}

} // namespace

int main(int argc, char **argv) {
  FILE *results = argc > 1 ? std::fopen(argv[1], "w") : nullptr;
  auto emit = [&](const char *kind, const Shape &s, const char *type, int64_t batch, int64_t tokens,
                  int64_t length, int64_t layers, double us, double metric, const char *unit) {
    std::printf("%-7s %-13s %-4s batch %2ld tokens %5ld length %5ld (%2ld layers): %9.2f us  "
                "%7.2f %s\n",
                kind, s.name, type, long(batch), long(tokens), long(length), long(layers), us,
                metric, unit);
    std::fflush(stdout);
    if (results)
      std::fprintf(results, "%s\t%s\t%s\t%ld\t%ld\t%ld\t%.3f\t%.3f\n", kind, s.name, type,
                   long(batch), long(tokens), long(length), us, metric);
  };
  auto decode = [&](const Shape &s, KVCacheType type, int64_t batch, int64_t length) {
    int64_t layers = 0;
    double us = timeCase(s, type, batch, 1, length, layers);
    int64_t attended = s.window > 0 ? std::min(s.window, length) : length;
    size_t element = type == KVCacheType::BF16 ? 2 : 4;
    double bytes =
        double(batch) * attended * (s.kvHeads * (s.keyDim + s.valueDim) + s.sharedDim) * element;
    emit("decode", s, type == KVCacheType::BF16 ? "bf16" : "f32", batch, 1, length, layers, us,
         bytes / us * 1e-6, "TB/s");
  };
  auto prefill = [&](const Shape &s, int64_t batch, int64_t tokens) {
    int64_t layers = 0;
    double us = timeCase(s, KVCacheType::BF16, batch, tokens, tokens, layers);
    double pairs = 0;
    for (int64_t t = 0; t < tokens; ++t)
      pairs += s.window > 0 ? std::min(s.window, t + 1) : t + 1;
    double flops = 2.0 * batch * pairs * s.heads * (s.keyDim + s.sharedDim + s.valueDim);
    emit("prefill", s, "bf16", batch, tokens, tokens, layers, us, flops / us * 1e-6, "TFLOP/s");
  };
  for (const Shape &s : {kQwen3, kGptOss, kMixtral})
    for (int64_t batch : {1, 16, 64})
      for (int64_t length : {512, 4096})
        decode(s, KVCacheType::BF16, batch, length);
  for (int64_t batch : {1, 16, 64})
    decode(kGptOssWindow, KVCacheType::BF16, batch, 4096);
  for (int64_t batch : {1, 16})
    decode(kDeepSeek, KVCacheType::BF16, batch, 4096);
  // The exact f32 path (one block per token and head) for scale.
  for (int64_t batch : {1, 16})
    decode(kQwen3, KVCacheType::F32, batch, 4096);
  for (const Shape &s : {kQwen3, kGptOss, kGptOssWindow, kDeepSeek})
    for (int64_t tokens : {512, 4096})
      prefill(s, 1, tokens);
  prefill(kQwen3, 8, 512);
  if (results)
    std::fclose(results);
  return 0;
}
