//===- GroupedMatmulCutlass.cu - prefill grouped matmul on wgmma (CUTLASS) -===//
//
// moe.grouped_matmul with bf16 expert weights when the experts have many rows
// each (prefill): CUTLASS's sm90 ptr-array grouped GEMM, TMA loads and wgmma
// in a warp-specialized persistent kernel: 128x256x64 cooperative tiles without
// clusters (what Auto takes; with 2x1 or 1x2 clusters for the bench and tests)
// or 128x128x64 pingpong ones (one warp group's epilogue overlaps the other's
// mainloop). The mma.sync kernel of GroupedMatmulBF16.cu stays for decode,
// where 128-row tiles would mostly pad.
//
// Still without a host synchronisation: the group sizes live on the device
// (the sort's offsets), so a small kernel writes each expert's problem shape
// and pointers there, and CUTLASS reads them there (no host problem shapes).
// Around the GEMM, on the same stream: f32 rows are rounded to bf16 (TMA needs
// the operand as it is multiplied; bf16 rows from permute are taken as they
// are). The cooperative tiles write `out` themselves when there is nothing to
// apply, only a bias (CUTLASS's row broadcast), or an interleaved SiLU gate/up
// with bf16 results (GatedEpilogueCutlass.cuh); otherwise the f32 product goes
// through a scratch buffer and a second kernel applies bias and activation
// (EpiloguePass.cuh) into `out`.
// Scratch comes from the stream-ordered allocator, so a CUDA graph capture
// records it as graph memory. Weights stored in another format (MXFP4) are
// made into bf16 a chunk of experts at a time (ChunkedWeights), each chunk's
// GEMM a launch on all the experts' arguments with the others given no rows.
//
//===----------------------------------------------------------------------===//

#include "EpiloguePass.cuh"
#include "GatedEpilogueCutlass.cuh"
#include "GridSize.h"
#include "CutlassGroupedRun.cuh"
#include "GroupedMatmulCutlass.h"
#include "StreamScratch.h"
#include "moec/runtime/Cuda.h"

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/group_array_problem_shape.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/util/packed_stride.hpp"

#include <cuda_bf16.h>

#include <algorithm>
#include <string>
#include <type_traits>

namespace moec::rt::cuda::detail {
namespace {

using namespace cute;

using namespace grouped;
using ElementA = cutlass::bfloat16_t;
using ElementB = cutlass::bfloat16_t;
constexpr int kAlignmentAB = 8; // 16 bytes of bf16

/// One bf16 configuration: tile, cluster, mainloop schedule and collective
/// epilogue.
template <typename TileShape, typename ClusterShape, typename KernelSchedule,
          typename CollectiveEpilogue>
using ConfigWith = GroupedConfig<ElementA, LayoutA *, ElementB, LayoutB *, kAlignmentAB, TileShape,
                                 ClusterShape, KernelSchedule, CollectiveEpilogue>;

/// The f32 epilogue of `Epilogue` with its fusion (D = accumulator unless given).
template <typename TileShape, typename ClusterShape, typename KernelSchedule,
          typename EpilogueSchedule,
          typename Fusion = cutlass::epilogue::fusion::LinearCombination<ElementD, float>>
using Config = ConfigWith<TileShape, ClusterShape, KernelSchedule,
                          Epilogue<TileShape, ClusterShape, EpilogueSchedule, Fusion>>;

/// 128x128x64 pingpong, 2x1 clusters: one warp group's epilogue overlaps the
/// other's mainloop (the first CUTLASS configuration).
using Pingpong = Config<Shape<_128, _128, _64>, Shape<_2, _1, _1>,
                        cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpong,
                        cutlass::epilogue::PtrArrayTmaWarpSpecializedPingpong>;
/// 128x256x64 cooperative tiles: both warp groups on one 128-row tile against
/// 256 weight rows, half the row reads per weight row of Pingpong. They beat
/// 256x128 cooperative tiles at every prefill shape of the kernel bench
/// (3-12 %; a 256-row tile pads ragged experts of a few hundred rows up to half
/// of a second tile). Three cluster shapes:
/// - 1x1 (ClusterNone, the default): no sharing, no rounding.
/// - 2x1 (ClusterRows): two row tiles share each weight tile (multicast), as
///   torch's _grouped_mm does. CUTLASS's grouped scheduler rounds every
///   expert's row tiles up to the cluster, so an expert of 257-384 rows
///   computes 512, and one of 1-128 rows computes 256: 1x1 measured 8-13 %
///   faster at T = 8192 for the models of 128 and 256 experts, 30-40 % at
///   T = 1024, and level for Mixtral (8 experts of ~2000 rows).
/// - 1x2 (ClusterWeights): two weight tiles share each row tile; the rounding
///   falls on the weight tiles, which every expert has the same number of.
///   Within a few % of 1x1 either way.
template <typename ClusterShape,
          typename Fusion = cutlass::epilogue::fusion::LinearCombination<ElementD, float>>
using CooperativeWideOn = Config<Shape<_128, _256, _64>, ClusterShape,
                                 cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative,
                                 cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative, Fusion>;
/// CooperativeWideOn with the bias added in CUTLASS's epilogue (BiasFusion).
template <typename ClusterShape>
using CooperativeWideBiasOn = CooperativeWideOn<ClusterShape, BiasFusion<Shape<_128, _256, _64>>>;
/// CooperativeWideOn with the gate/up activation in its epilogue (interleaved
/// gate/up rows, bf16 results: GatedEpilogue).
template <typename ClusterShape>
using CooperativeWideGatedOn =
    ConfigWith<Shape<_128, _256, _64>, ClusterShape,
               cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative, GatedEpilogue>;

/// 64x256x64 pingpong tiles without clusters: each consumer warp group takes a
/// tile of its own, so one group's epilogue (the gate/up activation above all,
/// which the cooperative tile's two groups both wait out) runs while the other
/// group's mainloop keeps the tensor cores busy. Twice the row reads per weight
/// row of the 128x256 tile. Measured, the overlap did not pay where the
/// cooperative tile pads little (Mixtral at T = 8192: gate/up 2 % slower, one
/// 64-row warp group's mainloop being slower); the 64-row tiles' smaller
/// padding of each expert's last row tile did (chooseBF16Tile).
template <typename Fusion = cutlass::epilogue::fusion::LinearCombination<ElementD, float>>
using PingpongWideWith = Config<Shape<_64, _256, _64>, Shape<_1, _1, _1>,
                                cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpong,
                                cutlass::epilogue::PtrArrayTmaWarpSpecializedPingpong, Fusion>;
using PingpongWide = PingpongWideWith<>;
using PingpongWideBias = PingpongWideWith<BiasFusion<Shape<_64, _256, _64>>>;
using PingpongWideGated =
    ConfigWith<Shape<_64, _256, _64>, Shape<_1, _1, _1>,
               cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpong, GatedEpilogue>;

/// bf16 results (--expert-outputs=bf16) on the two tiles Auto takes, plain or
/// with the bias in the epilogue: the f32 accumulator, plus the bias, rounded
/// to nearest even.
using CooperativeWideShape = Shape<_128, _256, _64>;
using PingpongWideShape = Shape<_64, _256, _64>;
template <typename Fusion>
using CooperativeWideBF16With = ConfigWith<
    CooperativeWideShape, Shape<_1, _1, _1>,
    cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative,
    EpilogueBF16<CooperativeWideShape, Shape<_1, _1, _1>,
                 cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative, Fusion>>;
template <typename Fusion>
using PingpongWideBF16With =
    ConfigWith<PingpongWideShape, Shape<_1, _1, _1>,
               cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpong,
               EpilogueBF16<PingpongWideShape, Shape<_1, _1, _1>,
                            cutlass::epilogue::PtrArrayTmaWarpSpecializedPingpong, Fusion>>;
using CooperativeWideBF16 = CooperativeWideBF16With<NoSourceBF16>;
using CooperativeWideBiasBF16 =
    CooperativeWideBF16With<BiasFusion<CooperativeWideShape, ElementDBF16>>;
using PingpongWideBF16 = PingpongWideBF16With<NoSourceBF16>;
using PingpongWideBiasBF16 = PingpongWideBF16With<BiasFusion<PingpongWideShape, ElementDBF16>>;

using ClusterRows = Shape<_2, _1, _1>;
using ClusterWeights = Shape<_1, _2, _1>;
using ClusterNone = Shape<_1, _1, _1>;
using CooperativeWide = CooperativeWideOn<ClusterNone>;
using CooperativeWideBias = CooperativeWideBiasOn<ClusterNone>;
using CooperativeWideGated = CooperativeWideGatedOn<ClusterNone>;

// GatedEpilogue writes out the accumulator layout of GatedTiledMma.
static_assert(
    std::is_same_v<CooperativeWideGatedOn<ClusterNone>::CollectiveMainloop::TiledMma,
                   GatedTiledMma> &&
    std::is_same_v<CooperativeWideGatedOn<ClusterRows>::CollectiveMainloop::TiledMma,
                   GatedTiledMma> &&
    std::is_same_v<CooperativeWideGatedOn<ClusterWeights>::CollectiveMainloop::TiledMma,
                   GatedTiledMma> &&
    std::is_same_v<PingpongWideGated::CollectiveMainloop::TiledMma, GatedTiledMmaPingpong>);

// Both epilogues leave the 128x256x64 mainloop 4 stages (3 cost the f32 results
// of an f32-C epilogue 7-22 % against bf16 ones in the probe), and everything
// must fit.
static_assert(CooperativeWide::CollectiveMainloop::DispatchPolicy::Stages == 4 &&
              CooperativeWideBias::CollectiveMainloop::DispatchPolicy::Stages == 4 &&
              CooperativeWideGated::CollectiveMainloop::DispatchPolicy::Stages == 4 &&
              CooperativeWideGated::GemmKernel::SharedStorageSize <= 227 * 1024);

using GemmKernel = Pingpong::GemmKernel; // the strides below are the same for all
static_assert(kSameStrides<GemmKernel, CooperativeWide::GemmKernel> &&
              kSameStrides<GemmKernel, CooperativeWideBias::GemmKernel> &&
              kSameStrides<GemmKernel, CooperativeWideOn<ClusterRows>::GemmKernel> &&
              kSameStrides<GemmKernel, CooperativeWideOn<ClusterWeights>::GemmKernel> &&
              kSameStrides<GemmKernel, PingpongWide::GemmKernel> &&
              kSameStrides<GemmKernel, PingpongWideBias::GemmKernel> &&
              kSameStrides<GemmKernel, CooperativeWideBF16::GemmKernel> &&
              kSameStrides<GemmKernel, CooperativeWideBiasBF16::GemmKernel> &&
              kSameStrides<GemmKernel, PingpongWideBF16::GemmKernel> &&
              kSameStrides<GemmKernel, PingpongWideBiasBF16::GemmKernel>);

using StrideA = typename GemmKernel::InternalStrideA;
using StrideB = typename GemmKernel::InternalStrideB;
using StrideD = typename GemmKernel::InternalStrideD;
using Shape3 = typename ProblemShape::UnderlyingProblemShape;

/// The per-expert arguments CUTLASS reads on the device.
struct GroupArrays {
  Shape3 *shapes;
  const ElementA **a;
  const ElementB **b;
  ElementD **d;
  StrideA *strideA;
  StrideB *strideB;
  StrideD *strideD;
  const float **bias; // each expert's bias row (BiasFusion, GatedEpilogue), or null
  __nv_bfloat16 **rowsBF16; // each expert's first bf16 output row (GatedEpilogue), or null
  ElementDBF16 **dBF16;     // each expert's first bf16 result row (bf16 results), or null
};

/// Rows of expert e: [begin, end) from the inclusive ends; one expert of all
/// `rows` when there are no offsets (moe.linear).
__device__ inline void expertRows(const int32_t *offsets, int64_t rows, int e, int64_t &begin,
                                  int64_t &end) {
  if (!offsets) {
    begin = 0, end = rows;
    return;
  }
  begin = e > 0 ? offsets[e - 1] : 0;
  end = offsets[e];
}

/// The experts' arguments, those of experts [first, last) with their rows and
/// weights from `weights` (expert `first` first), the others with no rows.
__global__ void fillGroups(GroupArrays g, const ElementA *a, const ElementB *weights, ElementD *d,
                           __nv_bfloat16 *outBF16, const float *bias, const int32_t *offsets,
                           int64_t rows, int experts, int first, int last, int n, int k,
                           StrideA sa, StrideB sb, StrideD sd) {
  int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= experts)
    return;
  int64_t begin, end;
  expertRows(offsets, rows, e, begin, end);
  bool inChunk = e >= first && e < last;
  g.shapes[e] = Shape3(inChunk ? static_cast<int>(end - begin) : 0, n, k);
  g.a[e] = a + begin * k;
  g.b[e] = weights + static_cast<int64_t>(inChunk ? e - first : 0) * n * k;
  g.d[e] = d + begin * n;
  g.strideA[e] = sa;
  g.strideB[e] = sb;
  g.strideD[e] = sd;
  fillEpiloguePointers(g, e, begin, n, bias, outBF16);
}

/// The valid rows (below the last expert's end) rounded to bf16, 4 at a time.
__global__ void roundRowsBF16(const float *lhs, const int32_t *offsets, int experts, int64_t rows,
                              int64_t k, __nv_bfloat16 *out) {
  int64_t valid = offsets ? offsets[experts - 1] : rows;
  int64_t quads = valid * k / 4;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < quads;
       i += int64_t(gridDim.x) * blockDim.x) {
    float4 v = reinterpret_cast<const float4 *>(lhs)[i];
    __nv_bfloat162 lo = __floats2bfloat162_rn(v.x, v.y), hi = __floats2bfloat162_rn(v.z, v.w);
    reinterpret_cast<__nv_bfloat162 *>(out)[2 * i] = lo;
    reinterpret_cast<__nv_bfloat162 *>(out)[2 * i + 1] = hi;
  }
}

} // namespace

bool groupedMatmulCutlassSupports(int64_t k, int64_t n) {
  return k % kAlignmentAB == 0 && n % kAlignmentD == 0 && k < (1 << 30) && n < (1 << 30);
}

Status groupedMatmulCutlass(const float *lhs, const uint16_t *lhsBF16, int64_t rows, int64_t k,
                            const uint16_t *weights, int64_t experts, int64_t n,
                            const int32_t *offsets, const float *bias,
                            const cpu::Epilogue &epilogue, float *out, uint16_t *outBF16,
                            CutlassTile tile, cudaStream_t stream,
                            const ChunkedWeights *chunked) {
  if (!groupedMatmulCutlassSupports(k, n))
    return Status::error("groupedMatmulCutlass: K = " + std::to_string(k) +
                         ", N = " + std::to_string(n) + " are not multiples of 8 and 4");
  bool gated = epilogue.enabled && epilogue.layout != cpu::GateUpLayout::None;
  // CUTLASS writes an f32 `out` itself when there is nothing to apply, or only
  // a bias (the cooperative tiles add it in their epilogue: BiasFusion).
  bool fusedBias = tile != CutlassTile::Pingpong128x128 && out && bias && !epilogue.enabled;
  // The cooperative tiles apply a gate/up activation themselves when the
  // halves are interleaved, the activation is SiLU and the result is bf16 rows
  // of whole 16-byte chunks (GatedEpilogue).
  bool fusedGate = tile != CutlassTile::Pingpong128x128 && gated && outBF16 &&
                   epilogue.layout == cpu::GateUpLayout::Interleaved &&
                   epilogue.kind == cpu::ActivationKind::SiLU && (n / 2) % 8 == 0 &&
                   reinterpret_cast<uintptr_t>(outBF16) % 16 == 0;
  // Cooperative 128x256 and pingpong 64x256 tiles (what Auto takes) round
  // their results to bf16 themselves when there is nothing to apply but a
  // bias, in rows of whole 16-byte chunks (--expert-outputs=bf16's down
  // projection); other tiles go through the f32 product and the pass.
  bool directBF16 = (tile == CutlassTile::Cooperative128x256 ||
                     tile == CutlassTile::Pingpong64x256) &&
                    outBF16 && !epilogue.enabled && n % kAlignmentDBF16 == 0 &&
                    reinterpret_cast<uintptr_t>(outBF16) % 16 == 0;
  bool direct = (out && !epilogue.enabled && (!bias || fusedBias)) || fusedGate || directBF16;
  int outColumns = static_cast<int>(gated ? n / 2 : n);
  int groups = static_cast<int>(experts);

  StreamScratch scratch(stream);
  // bf16 rows are TMA's operand as they are; f32 rows are rounded first.
  auto *a = reinterpret_cast<__nv_bfloat16 *>(const_cast<uint16_t *>(lhsBF16));
  float *product = out;
  GroupArrays g{};
  if (!lhsBF16)
    MOEC_RETURN_IF_ERROR(scratch.allocate(static_cast<size_t>(rows * k), a));
  if (!direct)
    MOEC_RETURN_IF_ERROR(scratch.allocate(static_cast<size_t>(rows * n), product));
  MOEC_RETURN_IF_ERROR(scratch.allocate(groups, g.shapes));
  MOEC_RETURN_IF_ERROR(scratch.allocate(groups, g.a));
  MOEC_RETURN_IF_ERROR(scratch.allocate(groups, g.b));
  MOEC_RETURN_IF_ERROR(scratch.allocate(groups, g.d));
  MOEC_RETURN_IF_ERROR(scratch.allocate(groups, g.strideA));
  MOEC_RETURN_IF_ERROR(scratch.allocate(groups, g.strideB));
  MOEC_RETURN_IF_ERROR(scratch.allocate(groups, g.strideD));
  if ((fusedBias || fusedGate || directBF16) && bias)
    MOEC_RETURN_IF_ERROR(scratch.allocate(groups, g.bias));
  if (directBF16)
    MOEC_RETURN_IF_ERROR(scratch.allocate(groups, g.dBF16));
  if (fusedGate)
    MOEC_RETURN_IF_ERROR(scratch.allocate(groups, g.rowsBF16));

  if (!lhsBF16) {
    roundRowsBF16<<<blocksFor(rows * k / 4, 256, 16 * kSMs), 256, 0, stream>>>(lhs, offsets, groups,
                                                                               rows, k, a);
    MOEC_CUDA_TRY(cudaGetLastError());
  }
  Strides<GemmKernel> st(n, k);

  // `d`: the per-expert result rows, f32 (g.d) or bf16 (g.dBF16) as the
  // configuration's epilogue writes them.
  auto runTo = [&](auto config, auto d) {
    using Chosen = decltype(config);
    auto args = groupedArguments<typename Chosen::Gemm>(
        groups, g.shapes,
        typename Chosen::GemmKernel::MainloopArguments{g.a, g.strideA, g.b, g.strideB}, d,
        g.strideD);
    return runGrouped<typename Chosen::Gemm>(args, scratch, stream, "groupedMatmulCutlass", k, n);
  };
  auto run = [&](auto config) { return runTo(config, g.d); };
  auto runBiasTo = [&](auto config, auto d) {
    using Chosen = decltype(config);
    auto args = groupedArgumentsWith<typename Chosen::Gemm>(
        groups, g.shapes,
        typename Chosen::GemmKernel::MainloopArguments{g.a, g.strideA, g.b, g.strideB},
        biasArguments<typename Chosen::Gemm>(g.bias), d, g.strideD);
    return runGrouped<typename Chosen::Gemm>(args, scratch, stream, "groupedMatmulCutlass", k, n);
  };
  auto runBias = [&](auto config) { return runBiasTo(config, g.d); };
  auto runGated = [&](auto config) {
    using Gemm = typename decltype(config)::Gemm;
    typename Gemm::Arguments args{
        cutlass::gemm::GemmUniversalMode::kGrouped,
        {groups, g.shapes, nullptr},
        {g.a, g.strideA, g.b, g.strideB},
        {g.rowsBF16, g.bias, outColumns, epilogue},
        hardwareInfo<typename Gemm::GemmKernel>()};
    return runGrouped<Gemm>(args, scratch, stream, "groupedMatmulCutlass", k, n);
  };
  auto runWide = [&](auto cluster) {
    using Cluster = decltype(cluster);
    return fusedGate   ? runGated(CooperativeWideGatedOn<Cluster>{})
           : fusedBias ? runBias(CooperativeWideBiasOn<Cluster>{})
                       : run(CooperativeWideOn<Cluster>{});
  };
  // The GEMM on experts [first, last), whose weights start at `expertWeights`.
  auto gemm = [&](int first, int last, const uint16_t *expertWeights) -> Status {
    fillGroups<<<(groups + 127) / 128, 128, 0, stream>>>(
        g, reinterpret_cast<const ElementA *>(a),
        reinterpret_cast<const ElementB *>(expertWeights), product,
        reinterpret_cast<__nv_bfloat16 *>(outBF16), bias, offsets, rows, groups, first, last,
        static_cast<int>(n), static_cast<int>(k), st.a, st.b, st.d);
    MOEC_CUDA_TRY(cudaGetLastError());
    switch (tile) {
    case CutlassTile::Pingpong128x128: return run(Pingpong{});
    case CutlassTile::Cooperative128x256:
      return directBF16 ? (bias ? runBiasTo(CooperativeWideBiasBF16{}, g.dBF16)
                                : runTo(CooperativeWideBF16{}, g.dBF16))
                        : runWide(ClusterNone{});
    case CutlassTile::Cooperative128x256Cluster21: return runWide(ClusterRows{});
    case CutlassTile::Cooperative128x256Cluster12: return runWide(ClusterWeights{});
    case CutlassTile::Pingpong64x256:
      return directBF16  ? (bias ? runBiasTo(PingpongWideBiasBF16{}, g.dBF16)
                                 : runTo(PingpongWideBF16{}, g.dBF16))
             : fusedGate ? runGated(PingpongWideGated{})
             : fusedBias ? runBias(PingpongWideBias{})
                         : run(PingpongWide{});
    }
    return Status::ok();
  };
  if (!chunked) {
    MOEC_RETURN_IF_ERROR(gemm(0, groups, weights));
  } else {
    // One chunk of experts after the other through the same scratch, in
    // stream order: made, then multiplied.
    int chunk = static_cast<int>(std::clamp<int64_t>(chunked->chunkExperts, 1, groups));
    uint16_t *made = nullptr;
    MOEC_RETURN_IF_ERROR(scratch.allocate(static_cast<size_t>(chunk * n * k), made));
    for (int first = 0; first < groups; first += chunk) {
      int last = std::min(groups, first + chunk);
      MOEC_RETURN_IF_ERROR(chunked->make(first, last, made));
      MOEC_RETURN_IF_ERROR(gemm(first, last, made));
    }
  }

  if (!direct) {
    if (outBF16)
      MOEC_CUDA_TRY(device::launchEpiloguePass(product, offsets, groups, rows, static_cast<int>(n),
                                               outColumns, bias, epilogue,
                                               reinterpret_cast<__nv_bfloat16 *>(outBF16), stream));
    else
      MOEC_CUDA_TRY(device::launchEpiloguePass(product, offsets, groups, rows, static_cast<int>(n),
                                               outColumns, bias, epilogue, out, stream));
  }
  return Status::ok();
}

} // namespace moec::rt::cuda::detail
