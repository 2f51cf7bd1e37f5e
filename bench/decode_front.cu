//===- decode_front.cu - the kernels before and after the experts' GEMMs ---===//
//
// Times decode's fixed kernels at the four benchmark models' shapes: the
// router (moe.linear), route, sort, permute (to bf16) and combine, each on its
// own and the front four as the chain the artifact runs, T = 1 and 16. Each is
// captured 20 times in a row into one CUDA graph (the launches hang off each
// other as in the artifact: programmatic dependent launch where the kernel
// uses it) and the graph replayed; the figure is the replay's time over 20.
// An empty kernel chained the same way gives the floor a node costs. Inputs
// are random (x ~ N(0, 1), router ~ N(0, 0.02)), so the routing is a real
// one; the L2 is not flushed (the router's weights, 1-7 MB, stay in it, as
// they do not between the artifact's calls -- this times the kernels'
// latency, not their bytes).
//
//   moec-bench-decode-front [T,T,...]     (run on the GPU machine)
//
//===----------------------------------------------------------------------===//

#include "CudaCheck.h"
#include "moec/runtime/Cuda.h"
#include "moec/runtime/cuda/MoEKernels.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

using namespace moec::rt;
using namespace moec::rt::cuda;
using moec::rt::cpu::RoutingKind;

namespace {

struct Shape {
  const char *name;
  int64_t hidden, experts, topK;
  Routing routing;
  bool routerBias, correctionBias;
};

__global__ void emptyKernel() {}

template <typename T> T *deviceRandom(size_t count, float scale, std::mt19937 &rng) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<T> host(count);
  for (auto &v : host)
    v = static_cast<T>(normal(rng));
  T *device = nullptr;
  CHECK_CUDA(cudaMalloc(&device, count * sizeof(T)));
  CHECK_CUDA(cudaMemcpy(device, host.data(), count * sizeof(T), cudaMemcpyHostToDevice));
  return device;
}

/// µs per repetition of `enqueue`, captured `kRepeats` times in one graph.
double timeCaptured(cudaStream_t stream, const std::function<void()> &enqueue) {
  constexpr int kRepeats = 20, kReplays = 50;
  CHECK_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed));
  for (int i = 0; i < kRepeats; ++i)
    enqueue();
  cudaGraph_t graph = nullptr;
  CHECK_CUDA(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec = nullptr;
  CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  CHECK_CUDA(cudaGraphLaunch(exec, stream)); // warm
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  std::vector<float> times;
  for (int i = 0; i < kReplays; ++i) {
    CHECK_CUDA(cudaEventRecord(start, stream));
    CHECK_CUDA(cudaGraphLaunch(exec, stream));
    CHECK_CUDA(cudaEventRecord(stop, stream));
    CHECK_CUDA(cudaEventSynchronize(stop));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
    times.push_back(ms);
  }
  std::sort(times.begin(), times.end());
  CHECK_CUDA(cudaEventDestroy(start));
  CHECK_CUDA(cudaEventDestroy(stop));
  CHECK_CUDA(cudaGraphExecDestroy(exec));
  CHECK_CUDA(cudaGraphDestroy(graph));
  return times[times.size() / 2] * 1e3 / kRepeats;
}

} // namespace

int main(int argc, char **argv) {
  std::vector<int64_t> tokenCounts = {1, 16};
  if (argc > 1) {
    tokenCounts.clear();
    for (char *s = argv[1]; *s;) {
      tokenCounts.push_back(std::strtoll(s, &s, 10));
      if (*s == ',')
        ++s;
    }
  }
  const Shape shapes[] = {
      {"qwen3moe-30b-a3b",
       2048,
       128,
       8,
       {RoutingKind::SoftmaxTopK, 8, true, 1, 1, 1.0f},
       false,
       false},
      {"mixtral-8x7b", 4096, 8, 2, {RoutingKind::SoftmaxTopK, 2, true, 1, 1, 1.0f}, false, false},
      {"gpt-oss-120b", 2880, 128, 4, {RoutingKind::TopKSoftmax, 4, false, 1, 1, 1.0f}, true, false},
      {"deepseek-v3",
       7168,
       256,
       8,
       {RoutingKind::SigmoidGroupTopK, 8, true, 8, 4, 2.5f},
       false,
       true},
  };
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::mt19937 rng(7);
  double floor = timeCaptured(stream, [&] { emptyKernel<<<1, 32, 0, stream>>>(); });
  std::printf("empty kernel, chained: %.2f us a node\n", floor);
  std::printf("%-18s %5s %8s %8s %8s %8s %8s %8s  (us a call, graph of 20)\n", "model", "T",
              "router", "route", "sort", "permute", "combine", "front4");
  for (const Shape &shape : shapes) {
    for (int64_t T : tokenCounts) {
      int64_t H = shape.hidden, E = shape.experts, k = shape.topK, slots = T * k;
      float *x = deviceRandom<float>(T * H, 1.0f, rng);
      float *router = deviceRandom<float>(E * H, 0.02f, rng);
      float *routerBias = shape.routerBias ? deviceRandom<float>(E, 0.02f, rng) : nullptr;
      float *correction = shape.correctionBias ? deviceRandom<float>(E, 0.02f, rng) : nullptr;
      float *logits, *weights, *rows;
      int32_t *ids, *permutation, *offsets, *numValid, *rowOfSlot;
      BF16 *permuted;
      float *out;
      CHECK_CUDA(cudaMalloc(&logits, T * E * sizeof(float)));
      CHECK_CUDA(cudaMalloc(&weights, slots * sizeof(float)));
      CHECK_CUDA(cudaMalloc(&ids, slots * sizeof(int32_t)));
      CHECK_CUDA(cudaMalloc(&permutation, slots * sizeof(int32_t)));
      CHECK_CUDA(cudaMalloc(&offsets, E * sizeof(int32_t)));
      CHECK_CUDA(cudaMalloc(&numValid, sizeof(int32_t)));
      CHECK_CUDA(cudaMalloc(&rowOfSlot, slots * sizeof(int32_t)));
      CHECK_CUDA(cudaMalloc(&permuted, slots * H * sizeof(BF16)));
      CHECK_CUDA(cudaMalloc(&out, T * H * sizeof(float)));
      rows = deviceRandom<float>(slots * H, 1.0f, rng);
      size_t sortBytes = 0;
      require(sortWorkspaceBytes(slots, sortBytes), "sortWorkspaceBytes");
      void *sortWorkspace = nullptr;
      CHECK_CUDA(cudaMalloc(&sortWorkspace, sortBytes + 256));
      auto runRouter = [&] {
        require(linear(x, T, H, router, E, routerBias, Epilogue{}, logits, stream), "linear");
      };
      auto runRoute = [&] {
        require(route(logits, T, E, correction, shape.routing, ids, weights, stream), "route");
      };
      auto runSort = [&] {
        require(sortByExpert(ids, slots, E, 0, permutation, offsets, numValid, rowOfSlot,
                             sortWorkspace, sortBytes, stream),
                "sortByExpert");
      };
      auto runPermute = [&] {
        require(permute(x, H, permutation, numValid, rowOfSlot, slots, k, permuted, stream),
                "permute");
      };
      auto runCombine = [&] {
        require(combineRows(rows, rowOfSlot, H, weights, T, k, nullptr, nullptr, out, stream),
                "combineRows");
      };
      // One eager pass so that every later kernel reads real ids and offsets.
      runRouter();
      runRoute();
      runSort();
      runPermute();
      runCombine();
      CHECK_CUDA(cudaStreamSynchronize(stream));
      double tRouter = timeCaptured(stream, runRouter), tRoute = timeCaptured(stream, runRoute),
             tSort = timeCaptured(stream, runSort), tPermute = timeCaptured(stream, runPermute),
             tCombine = timeCaptured(stream, runCombine);
      double tFront = timeCaptured(stream, [&] {
        runRouter();
        runRoute();
        runSort();
        runPermute();
      });
      std::printf("%-18s %5lld %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f\n", shape.name,
                  static_cast<long long>(T), tRouter, tRoute, tSort, tPermute, tCombine, tFront);
      for (void *p :
           {(void *)x, (void *)router, (void *)routerBias, (void *)correction, (void *)logits,
            (void *)weights, (void *)rows, (void *)ids, (void *)permutation, (void *)offsets,
            (void *)numValid, (void *)rowOfSlot, (void *)permuted, (void *)out, sortWorkspace})
        CHECK_CUDA(cudaFree(p));
    }
  }
  CHECK_CUDA(cudaStreamDestroy(stream));
  return 0;
}
