//===- cutlass_configs.cu - CUTLASS's grouped GEMM outside the runtime ----===//
//
// moec-bench-cutlass-configs: CUTLASS's sm90 bf16 ptr-array grouped GEMM
// (128x256x64 cooperative tiles, the configuration of moec's prefill and of
// torch._grouped_mm) built here on its own, with no moec epilogue, at the
// T = 8192 shapes of gpt-oss-120b and Mixtral, in six variants:
//   - weights K-major ([E, N, K]: moec) or N-major ([E, K, N]: transformers'
//     parameters as torch._grouped_mm reads them);
//   - bf16 results (torch) or f32 (moec's down projection);
//   - no clusters (moec) or 2x1 (torch).
// The question it answered: at T = 8192 torch's two GEMMs took 3.29 ms per call
// for gpt-oss against moec's 3.93 ms (then on 2x1 clusters), with the same
// tile. Random top-k routing as in moec-bench-grouped-matmul, random operands,
// the L2 flushed before each timed call, problem shapes on the device only.
//
//   moec-bench-cutlass-configs            (run on the GPU machine)
//
//===----------------------------------------------------------------------===//

#include "CudaCheck.h"
#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/group_array_problem_shape.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/util/packed_stride.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <set>
#include <vector>

// A named namespace: nvcc's host stubs cannot name kernels in an anonymous one
// that also pulls in cute's names.
namespace moec::bench {

using namespace cute;

constexpr double kBF16Ceiling = 685e12; // FLOP/s, measured on the H200

using ProblemShape = cutlass::gemm::GroupProblemShape<Shape<int, int, int>>;
using Element = cutlass::bfloat16_t;

/// One variant: B's layout (ColumnMajor = K-major), D's type, the cluster.
template <typename LayoutB, typename ElementD, typename ClusterShape> struct Variant {
  using TileShape = Shape<_128, _256, _64>;
  using LayoutA = cutlass::layout::RowMajor;
  using LayoutD = cutlass::layout::RowMajor;
  static constexpr int kAlignmentD = 16 / sizeof(ElementD);
  using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, ElementD, LayoutD *,
      kAlignmentD, ElementD, LayoutD *, kAlignmentD,
      cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative,
      cutlass::epilogue::fusion::LinearCombination<ElementD, float>>::CollectiveOp;
  using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Element, LayoutA *, 8, Element,
      LayoutB *, 8, float, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename CollectiveEpilogue::SharedStorage))>,
      cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative>::CollectiveOp;
  using GemmKernel =
      cutlass::gemm::kernel::GemmUniversal<ProblemShape, CollectiveMainloop, CollectiveEpilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;
  static constexpr int kStages = CollectiveMainloop::DispatchPolicy::Stages;
};

__global__ void fillRandom(uint16_t *data, size_t count, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count;
       i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed;
    h ^= h >> 15, h *= 2246822519u, h ^= h >> 13;
    // bf16 of magnitude 2^-7 .. 2, either sign: moec-bench-grouped-matmul's high
    // byte (sign | 0x3C | 2 random bits) over a random low byte.
    data[i] = uint16_t((h & 0x8000u) | ((0x3Cu | (h >> 20 & 3u)) << 8) | (h >> 4 & 0xFFu));
  }
}

struct Shape4 {
  const char *name;
  int experts, topK, n, k;
};

/// Per-expert row counts for `tokens` tokens, each picking topK distinct experts.
std::vector<int> route(const Shape4 &s, int tokens, std::mt19937 &rng) {
  std::vector<int> rows(s.experts, 0);
  std::uniform_int_distribution<int> pick(0, s.experts - 1);
  for (int t = 0; t < tokens; ++t) {
    std::set<int> chosen;
    while (int(chosen.size()) < s.topK)
      chosen.insert(pick(rng));
    for (int e : chosen)
      ++rows[e];
  }
  return rows;
}

template <typename V>
void run(const char *label, const Shape4 &s, const std::vector<int> &rows, const Element *a,
         const Element *b, void *d, void *flush, size_t flushBytes) {
  using Gemm = typename V::Gemm;
  using Kernel = typename V::GemmKernel;
  using Shape3 = typename ProblemShape::UnderlyingProblemShape;
  using ElementD = typename Kernel::CollectiveEpilogue::ElementD;
  const int groups = s.experts;
  std::vector<Shape3> shapes(groups);
  std::vector<const Element *> as(groups), bs(groups);
  std::vector<ElementD *> ds(groups);
  std::vector<typename Kernel::InternalStrideA> sa(groups);
  std::vector<typename Kernel::InternalStrideB> sb(groups);
  std::vector<typename Kernel::InternalStrideD> sd(groups);
  int64_t begin = 0;
  double flops = 0;
  for (int e = 0; e < groups; ++e) {
    shapes[e] = Shape3(rows[e], s.n, s.k);
    as[e] = a + begin * s.k;
    bs[e] = b + int64_t(e) * s.n * s.k;
    ds[e] = static_cast<ElementD *>(d) + begin * s.n;
    sa[e] = cutlass::make_cute_packed_stride(typename Kernel::InternalStrideA{}, {rows[e], s.k, 1});
    sb[e] = cutlass::make_cute_packed_stride(typename Kernel::InternalStrideB{}, {s.n, s.k, 1});
    sd[e] = cutlass::make_cute_packed_stride(typename Kernel::InternalStrideD{}, {rows[e], s.n, 1});
    begin += rows[e];
    flops += 2.0 * rows[e] * s.n * s.k;
  }
  auto upload = [](const auto &v) {
    using T = typename std::decay_t<decltype(v)>::value_type;
    T *p = nullptr;
    CHECK_CUDA(cudaMalloc(&p, v.size() * sizeof(T)));
    CHECK_CUDA(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
    return p;
  };
  Shape3 *dShapes = upload(shapes);
  const Element **dA = upload(as), **dB = upload(bs);
  ElementD **dD = upload(ds);
  auto *dSa = upload(sa);
  auto *dSb = upload(sb);
  auto *dSd = upload(sd);

  cutlass::KernelHardwareInfo hw = cutlass::KernelHardwareInfo::make_kernel_hardware_info<Kernel>(0);
  typename Gemm::Arguments args{cutlass::gemm::GemmUniversalMode::kGrouped,
                                {groups, dShapes, nullptr},
                                {dA, dSa, dB, dSb},
                                {{}, const_cast<const ElementD **>(dD), dSd, dD, dSd},
                                hw};
  args.epilogue.thread.alpha = 1.0f;
  args.epilogue.thread.beta = 0.0f;
  Gemm gemm;
  if (gemm.can_implement(args) != cutlass::Status::kSuccess) {
    std::printf("%-22s %-22s cannot implement\n", s.name, label);
    return;
  }
  void *workspace = nullptr;
  CHECK_CUDA(cudaMalloc(&workspace, std::max<size_t>(1, Gemm::get_workspace_size(args))));
  if (gemm.initialize(args, workspace) != cutlass::Status::kSuccess) {
    std::printf("%-22s %-22s cannot initialize\n", s.name, label);
    return;
  }
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  std::vector<float> samples;
  for (int i = 0; i < 12; ++i) {
    CHECK_CUDA(cudaMemsetAsync(flush, i, flushBytes));
    CHECK_CUDA(cudaEventRecord(start));
    if (gemm.run() != cutlass::Status::kSuccess) {
      std::printf("%-22s %-22s run failed\n", s.name, label);
      return;
    }
    CHECK_CUDA(cudaEventRecord(stop));
    CHECK_CUDA(cudaEventSynchronize(stop));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
    if (i > 0) // the first run warms up
      samples.push_back(ms);
  }
  std::sort(samples.begin(), samples.end());
  float ms = samples[samples.size() / 2];
  std::printf("%-22s %-22s stages %d  %9.1f us  %5.1f %% bf16\n", s.name, label, V::kStages,
              ms * 1e3, 100.0 * flops / (ms * 1e-3) / kBF16Ceiling);
  std::fflush(stdout);
  for (void *p : {(void *)dShapes, (void *)dA, (void *)dB, (void *)dD, (void *)dSa, (void *)dSb,
                  (void *)dSd, workspace})
    CHECK_CUDA(cudaFree(p));
  CHECK_CUDA(cudaEventDestroy(start));
  CHECK_CUDA(cudaEventDestroy(stop));
}

using KMajor = cutlass::layout::ColumnMajor; // B [N, K]: weights as moec stores them
using NMajor = cutlass::layout::RowMajor;    // B [K, N]: transformers' [E, K, N] parameters
using NoCluster = Shape<_1, _1, _1>;
using Cluster21 = Shape<_2, _1, _1>;

} // namespace moec::bench

int main() {
  using namespace moec::bench;
  const Shape4 shapes[] = {
      {"gpt-oss-120b gate_up", 128, 4, 5760, 2880},
      {"gpt-oss-120b down", 128, 4, 2880, 2880},
      {"Mixtral-8x7B gate_up", 8, 2, 28672, 4096},
      {"Mixtral-8x7B down", 8, 2, 4096, 14336},
  };
  const int tokens = 8192;
  std::mt19937 rng(0);
  size_t flushBytes = 256u << 20;
  void *flush = nullptr;
  CHECK_CUDA(cudaMalloc(&flush, flushBytes));
  std::printf("CUTLASS 128x256x64 cooperative grouped GEMM, T = %d, random top-k routing; "
              "%% bf16: useful FLOPs / time / 685 TFLOP/s\n", tokens);
  for (const Shape4 &s : shapes) {
    std::vector<int> rows = route(s, tokens, rng);
    int64_t slots = int64_t(tokens) * s.topK;
    Element *a = nullptr, *b = nullptr;
    void *d = nullptr;
    CHECK_CUDA(cudaMalloc(&a, slots * s.k * sizeof(Element)));
    CHECK_CUDA(cudaMalloc(&b, int64_t(s.experts) * s.n * s.k * sizeof(Element)));
    CHECK_CUDA(cudaMalloc(&d, slots * s.n * sizeof(float)));
    fillRandom<<<1024, 256>>>(reinterpret_cast<uint16_t *>(a), slots * s.k, 1);
    fillRandom<<<1024, 256>>>(reinterpret_cast<uint16_t *>(b), int64_t(s.experts) * s.n * s.k, 2);
    CHECK_CUDA(cudaDeviceSynchronize());
    run<Variant<KMajor, Element, NoCluster>>("K-major bf16 1x1", s, rows, a, b, d, flush,
                                             flushBytes);
    run<Variant<KMajor, Element, Cluster21>>("K-major bf16 2x1", s, rows, a, b, d, flush,
                                             flushBytes);
    run<Variant<NMajor, Element, NoCluster>>("N-major bf16 1x1", s, rows, a, b, d, flush,
                                             flushBytes);
    run<Variant<NMajor, Element, Cluster21>>("N-major bf16 2x1 (torch)", s, rows, a, b, d,
                                             flush, flushBytes);
    run<Variant<KMajor, float, NoCluster>>("K-major f32 1x1 (moec)", s, rows, a, b, d, flush,
                                           flushBytes);
    run<Variant<NMajor, float, NoCluster>>("N-major f32 1x1", s, rows, a, b, d, flush,
                                           flushBytes);
    for (void *p : {(void *)a, (void *)b, d})
      CHECK_CUDA(cudaFree(p));
  }
  return 0;
}
