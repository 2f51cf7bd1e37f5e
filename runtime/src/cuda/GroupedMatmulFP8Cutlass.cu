//===- GroupedMatmulFP8Cutlass.cu - FP8 prefill grouped matmul on wgmma ---===//
//
// moe.grouped_matmul with e4m3 weights (128x128 block scales) and e4m3 rows
// (a scale per row and 128 columns) when the experts have many rows each:
// CUTLASS 4.2's sm90 ptr-array grouped GEMM with blockwise scaling (the kernel
// of its example 68: TMA + wgmma e4m3, the 128-deep partial sums promoted with
// the row's and the weight block's scales, as DeepGEMM and the mma.sync kernel
// of GroupedMatmulFP8.cu do): 128x128x128 cooperative tiles with 1x2
// clusters, or 64x128x128 pingpong ones for experts of fewer rows.
//
// As in GroupedMatmulCutlass.cu: the experts' row counts stay on the device
// (a small kernel writes each expert's shape, pointers and scale layouts from
// the sort's offsets). Both scale arrays are K-major (the layouts moe.quantize
// and the FP8 cast write: docs/dialect.md). What CUTLASS's epilogue writes
// (FP8Epilogue::Fused, Tuning.h):
// - `out` itself, f32 or bf16, when there is nothing to apply but a bias
//   (CUTLASS's row broadcast, BiasFusion): gpt-oss's down projection has no
//   bias pass.
// - for the quantised gate/up result (outCodes), whose every value the pass
//   requantises to e4m3 anyway: with interleaved gate/up rows and SiLU, h in
//   bf16 (GatedEpilogueFP8, the activation and bias in registers: N/2 columns
//   of 2 bytes where the f32 product had N of 4), else the product in bf16
//   (half its bytes); then EpiloguePass.cuh's pass reads that and writes the
//   codes and scales. One more bf16 rounding (2^-9 relative, before the
//   e4m3 codes' 2^-4) on each value.
// - otherwise the f32 product to stream-ordered scratch, which the pass
//   finishes into `out`.
// FP8Epilogue::Pass keeps the f32 product and the pass for everything but
// results with nothing to apply; the public quantised entry runs it, since
// the bf16 rounding above moves a block past issue 34's bound against the
// emulated recipe (Tuning.h, FP8Epilogue).
//
//===----------------------------------------------------------------------===//

#include "CutlassGroupedRun.cuh"
#include "EpiloguePass.cuh"
#include "GatedEpilogueCutlass.cuh"
#include "GridSize.h"
#include "GroupedMatmulCutlass.h"
#include "StreamScratch.h"
#include "moec/runtime/Cuda.h"

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/detail/blockwise_scale_layout.hpp"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/group_array_problem_shape.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/util/packed_stride.hpp"

#include <cuda_bf16.h>

#include <string>
#include <type_traits>

namespace moec::rt::cuda::detail {
namespace {

using namespace cute;

using namespace grouped;
using ElementA = cutlass::float_e4m3_t;
using ElementB = cutlass::float_e4m3_t;
using ElementScale = float;
constexpr int kAlignmentAB = 16; // 16 bytes of e4m3
constexpr int kBlock = 128;      // the scales' block: 1 x 128 rows, 128 x 128 weights

// Row scales [M, K/128] and weight scales [N/128, K/128], both K-major.
using ScaleConfig = cutlass::detail::Sm90BlockwiseScaleConfig<1, kBlock, kBlock, cute::GMMA::Major::K,
                                                              cute::GMMA::Major::K>;
using LayoutSFA = decltype(ScaleConfig::deduce_layoutSFA());
using LayoutSFB = decltype(ScaleConfig::deduce_layoutSFB());

/// One configuration of the blockwise-scaled grouped GEMM: tile, cluster,
/// schedule, each operand's scale layout beside its own, and the collective
/// epilogue.
template <typename TileShape, typename ClusterShape, typename KernelSchedule,
          typename CollectiveEpilogue>
using ConfigWith = GroupedConfig<ElementA, cute::tuple<LayoutA *, LayoutSFA *>, ElementB,
                                 cute::tuple<LayoutB *, LayoutSFB *>, kAlignmentAB, TileShape,
                                 ClusterShape, KernelSchedule, CollectiveEpilogue>;

/// Example 68's configuration: 128x128x128 cooperative tiles, 1x2 clusters.
struct Cooperative128x128Tile {
  using Shape = cute::Shape<_128, _128, _128>;
  using Cluster = cute::Shape<_1, _2, _1>;
  using Schedule = cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperativeFP8Blockwise;
  using EpilogueSchedule = cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative;
};
/// 64x128x128 pingpong tiles, 1x2 clusters: one warp group's epilogue overlaps
/// the other's mainloop; 64-row tiles pad experts of a few dozen rows less.
/// (128x128 without clusters measured no faster anywhere. 128x256
/// tiles do not compile: CUTLASS 4.2's blockwise mainloop wants one weight
/// scale block per tile column.)
struct Pingpong64x128Tile {
  using Shape = cute::Shape<_64, _128, _128>;
  using Cluster = cute::Shape<_1, _2, _1>;
  using Schedule = cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpongFP8Blockwise;
  using EpilogueSchedule = cutlass::epilogue::PtrArrayTmaWarpSpecializedPingpong;
};

/// The epilogues of a tile: f32 results (D = accumulator), f32 with the bias,
/// bf16 results, bf16 with the bias, and the gated bf16 h.
template <typename Tile, typename Fusion = NoSource>
using F32Of = ConfigWith<typename Tile::Shape, typename Tile::Cluster, typename Tile::Schedule,
                         Epilogue<typename Tile::Shape, typename Tile::Cluster,
                                  typename Tile::EpilogueSchedule, Fusion>>;
template <typename Tile> using BiasOf = F32Of<Tile, BiasFusion<typename Tile::Shape>>;
template <typename Tile, typename Fusion = NoSourceBF16>
using BF16Of = ConfigWith<typename Tile::Shape, typename Tile::Cluster, typename Tile::Schedule,
                          EpilogueBF16<typename Tile::Shape, typename Tile::Cluster,
                                       typename Tile::EpilogueSchedule, Fusion>>;
template <typename Tile>
using BiasBF16Of = BF16Of<Tile, BiasFusion<typename Tile::Shape, ElementDBF16>>;
template <typename Tile>
using GatedOf = ConfigWith<typename Tile::Shape, typename Tile::Cluster, typename Tile::Schedule,
                           GatedEpilogueFP8>;

using Cooperative128x128 = F32Of<Cooperative128x128Tile>;
using Pingpong64x128 = F32Of<Pingpong64x128Tile>;

// GatedEpilogueFP8 writes out the accumulator layout of GatedTiledMmaFP8.
static_assert(std::is_same_v<GatedOf<Cooperative128x128Tile>::CollectiveMainloop::TiledMma,
                             GatedTiledMmaFP8> &&
              std::is_same_v<GatedOf<Pingpong64x128Tile>::CollectiveMainloop::TiledMma,
                             GatedTiledMmaFP8Pingpong>);

using GemmKernel = Cooperative128x128::GemmKernel; // the strides below are the same for all
/// Every configuration's kernel takes the strides filled once below.
template <typename Tile>
constexpr bool kTileSharesStrides = kSameStrides<GemmKernel, typename F32Of<Tile>::GemmKernel> &&
                                    kSameStrides<GemmKernel, typename BiasOf<Tile>::GemmKernel> &&
                                    kSameStrides<GemmKernel, typename BF16Of<Tile>::GemmKernel> &&
                                    kSameStrides<GemmKernel, typename BiasBF16Of<Tile>::GemmKernel>;
static_assert(kTileSharesStrides<Cooperative128x128Tile> &&
              kTileSharesStrides<Pingpong64x128Tile>);

using StrideA = typename GemmKernel::InternalStrideA;
using StrideB = typename GemmKernel::InternalStrideB;
using StrideD = typename GemmKernel::InternalStrideD;
using Shape3 = typename ProblemShape::UnderlyingProblemShape;

/// The per-expert arguments CUTLASS reads on the device.
struct GroupArrays {
  Shape3 *shapes;
  const ElementA **a;
  const ElementB **b;
  const ElementScale **scaleA;
  const ElementScale **scaleB;
  LayoutSFA *layoutA;
  LayoutSFB *layoutB;
  ElementD **d;
  StrideA *strideA;
  StrideB *strideB;
  StrideD *strideD;
  const float **bias;       // each expert's bias row (BiasFusion, GatedEpilogueFP8), or null
  __nv_bfloat16 **rowsBF16; // each expert's first row of bf16 h (GatedEpilogueFP8), or null
  ElementDBF16 **dBF16;     // each expert's first bf16 result row (bf16 results), or null
};

__global__ void fillGroups(GroupArrays g, const ElementA *a, const float *rowScales,
                           const ElementB *weights, const float *weightScales, ElementD *d,
                           __nv_bfloat16 *outBF16, const float *bias, const int32_t *offsets,
                           int experts, int n, int k, StrideA sa, StrideB sb, StrideD sd) {
  int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= experts)
    return;
  int64_t begin = e > 0 ? offsets[e - 1] : 0, end = offsets[e];
  int m = static_cast<int>(end - begin);
  int64_t kBlocks = (k + kBlock - 1) / kBlock, nBlocks = (n + kBlock - 1) / kBlock;
  g.shapes[e] = Shape3(m, n, k);
  g.a[e] = a + begin * k;
  g.b[e] = weights + static_cast<int64_t>(e) * n * k;
  g.scaleA[e] = rowScales + begin * kBlocks;
  g.scaleB[e] = weightScales + static_cast<int64_t>(e) * nBlocks * kBlocks;
  g.layoutA[e] = ScaleConfig::tile_atom_to_shape_SFA(make_shape(m, n, k, 1));
  g.layoutB[e] = ScaleConfig::tile_atom_to_shape_SFB(make_shape(m, n, k, 1));
  g.d[e] = d ? d + begin * n : nullptr; // null: the results are bf16 (dBF16, rowsBF16)
  g.strideA[e] = sa;
  g.strideB[e] = sb;
  g.strideD[e] = sd;
  fillEpiloguePointers(g, e, begin, n, bias, outBF16);
}

} // namespace

bool groupedMatmulFP8CutlassSupports(int64_t k, int64_t n) {
  return k % kAlignmentAB == 0 && n % kAlignmentD == 0 && k < (1 << 30) && n < (1 << 30);
}

Status groupedMatmulFP8Cutlass(const uint8_t *lhs, const float *lhsScales, int64_t rows, int64_t k,
                               const uint8_t *weights, const float *weightScales, int64_t experts,
                               int64_t n, const int32_t *offsets, const float *bias,
                               const cpu::Epilogue &epilogue, float *out, uint16_t *outBF16,
                               uint8_t *outCodes, float *outScales, FP8CutlassTile tile,
                               bool fused, cudaStream_t stream) {
  if (!groupedMatmulFP8CutlassSupports(k, n))
    return Status::error("groupedMatmulFP8Cutlass: K = " + std::to_string(k) + ", N = " +
                         std::to_string(n) + " are not multiples of 16 and 4");
  if (!offsets)
    return Status::error("groupedMatmulFP8Cutlass: needs the experts' offsets");
  bool gated = epilogue.enabled && epilogue.layout != cpu::GateUpLayout::None;
  auto aligned16 = [](const void *p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  // What CUTLASS's epilogue writes (see the top of the file): at most one of
  // these holds. fusedGate: h in bf16, into `outBF16` or, for outCodes, into
  // scratch the pass quantises (interleaved SiLU gate/up, whole 16-byte
  // chunks of h). bf16Product: the product in bf16, into scratch the pass
  // reads (outCodes). directBF16 / direct: `outBF16` / `out` with at most a
  // bias to add.
  bool fusedGate = fused && gated && (outCodes || outBF16) &&
                   epilogue.layout == cpu::GateUpLayout::Interleaved &&
                   epilogue.kind == cpu::ActivationKind::SiLU && (n / 2) % 8 == 0 &&
                   (!outBF16 || aligned16(outBF16));
  bool bf16Product = fused && outCodes && !fusedGate && n % kAlignmentDBF16 == 0;
  bool directBF16 = outBF16 && !epilogue.enabled && n % kAlignmentDBF16 == 0 &&
                    aligned16(outBF16) && (fused || !bias);
  bool direct = out && !epilogue.enabled && (!bias || fused);
  int outColumns = static_cast<int>(gated ? n / 2 : n);
  int groups = static_cast<int>(experts);

  StreamScratch scratch(stream);
  float *product = out;         // f32 results or product
  __nv_bfloat16 *bf16Rows = reinterpret_cast<__nv_bfloat16 *>(outBF16); // h, product or results
  GroupArrays g{};
  if (!direct && !directBF16 && !bf16Product && !(fusedGate && outBF16))
    MOEC_RETURN_IF_ERROR(scratch.allocate(static_cast<size_t>(rows * n), product));
  if (fusedGate && outCodes)
    MOEC_RETURN_IF_ERROR(scratch.allocate(static_cast<size_t>(rows * (n / 2)), bf16Rows));
  if (bf16Product)
    MOEC_RETURN_IF_ERROR(scratch.allocate(static_cast<size_t>(rows * n), bf16Rows));
  MOEC_RETURN_IF_ERROR(scratch.allocate(groups, g.shapes));
  MOEC_RETURN_IF_ERROR(scratch.allocate(groups, g.a));
  MOEC_RETURN_IF_ERROR(scratch.allocate(groups, g.b));
  MOEC_RETURN_IF_ERROR(scratch.allocate(groups, g.scaleA));
  MOEC_RETURN_IF_ERROR(scratch.allocate(groups, g.scaleB));
  MOEC_RETURN_IF_ERROR(scratch.allocate(groups, g.layoutA));
  MOEC_RETURN_IF_ERROR(scratch.allocate(groups, g.layoutB));
  MOEC_RETURN_IF_ERROR(scratch.allocate(groups, g.d));
  MOEC_RETURN_IF_ERROR(scratch.allocate(groups, g.strideA));
  MOEC_RETURN_IF_ERROR(scratch.allocate(groups, g.strideB));
  MOEC_RETURN_IF_ERROR(scratch.allocate(groups, g.strideD));
  if (bias && (fusedGate || ((direct || directBF16) && !epilogue.enabled)))
    MOEC_RETURN_IF_ERROR(scratch.allocate(groups, g.bias));
  if (fusedGate)
    MOEC_RETURN_IF_ERROR(scratch.allocate(groups, g.rowsBF16));
  if (bf16Product || directBF16)
    MOEC_RETURN_IF_ERROR(scratch.allocate(groups, g.dBF16));

  Strides<GemmKernel> st(n, k);
  fillGroups<<<(groups + 127) / 128, 128, 0, stream>>>(
      g, reinterpret_cast<const ElementA *>(lhs), lhsScales,
      reinterpret_cast<const ElementB *>(weights), weightScales, product, bf16Rows, bias, offsets,
      groups, static_cast<int>(n), static_cast<int>(k), st.a, st.b, st.d);
  MOEC_CUDA_TRY(cudaGetLastError());

  auto mainloop = [&](auto config) {
    using Chosen = decltype(config);
    return typename Chosen::GemmKernel::MainloopArguments{g.a,       g.strideA, g.b,
                                                          g.strideB, g.scaleA,  g.layoutA,
                                                          g.scaleB,  g.layoutB};
  };
  // `d`: the per-expert result rows, f32 (g.d) or bf16 (g.dBF16) as the
  // configuration's epilogue writes them.
  auto runTo = [&](auto config, auto d) {
    using Gemm = typename decltype(config)::Gemm;
    auto args = groupedArguments<Gemm>(groups, g.shapes, mainloop(config), d, g.strideD);
    return runGrouped<Gemm>(args, scratch, stream, "groupedMatmulFP8Cutlass", k, n);
  };
  auto runBiasTo = [&](auto config, auto d) {
    using Gemm = typename decltype(config)::Gemm;
    auto args = groupedArgumentsWith<Gemm>(groups, g.shapes, mainloop(config),
                                           biasArguments<Gemm>(g.bias), d, g.strideD);
    return runGrouped<Gemm>(args, scratch, stream, "groupedMatmulFP8Cutlass", k, n);
  };
  auto runGated = [&](auto config) {
    using Gemm = typename decltype(config)::Gemm;
    typename Gemm::Arguments args{cutlass::gemm::GemmUniversalMode::kGrouped,
                                  {groups, g.shapes, nullptr},
                                  mainloop(config),
                                  {g.rowsBF16, g.bias, outColumns, epilogue},
                                  hardwareInfo<typename Gemm::GemmKernel>()};
    return runGrouped<Gemm>(args, scratch, stream, "groupedMatmulFP8Cutlass", k, n);
  };
  auto runTile = [&](auto tileTag) -> Status {
    using Tile = decltype(tileTag);
    if (fusedGate)
      return runGated(GatedOf<Tile>{});
    if (bf16Product || directBF16)
      return directBF16 && bias ? runBiasTo(BiasBF16Of<Tile>{}, g.dBF16)
                                : runTo(BF16Of<Tile>{}, g.dBF16);
    if (direct && bias)
      return runBiasTo(BiasOf<Tile>{}, g.d);
    return runTo(F32Of<Tile>{}, g.d);
  };
  switch (tile) {
  case FP8CutlassTile::Cooperative128x128:
    MOEC_RETURN_IF_ERROR(runTile(Cooperative128x128Tile{}));
    break;
  case FP8CutlassTile::Pingpong64x128:
    MOEC_RETURN_IF_ERROR(runTile(Pingpong64x128Tile{}));
    break;
  }

  if (outCodes && fusedGate) // h has its epilogue: only the quantisation is left
    MOEC_CUDA_TRY(device::launchEpiloguePassE4M3(bf16Rows, offsets, groups, rows, outColumns,
                                                 outColumns, nullptr, cpu::Epilogue{}, outCodes,
                                                 outScales, stream));
  else if (outCodes && bf16Product)
    MOEC_CUDA_TRY(device::launchEpiloguePassE4M3(bf16Rows, offsets, groups, rows,
                                                 static_cast<int>(n), outColumns, bias, epilogue,
                                                 outCodes, outScales, stream));
  else if (outCodes)
    MOEC_CUDA_TRY(device::launchEpiloguePassE4M3(product, offsets, groups, rows,
                                                 static_cast<int>(n), outColumns, bias, epilogue,
                                                 outCodes, outScales, stream));
  else if (outBF16 && !directBF16 && !fusedGate)
    MOEC_CUDA_TRY(device::launchEpiloguePass(product, offsets, groups, rows, static_cast<int>(n),
                                             outColumns, bias, epilogue, bf16Rows, stream));
  else if (out && !direct)
    MOEC_CUDA_TRY(device::launchEpiloguePass(product, offsets, groups, rows, static_cast<int>(n),
                                             outColumns, bias, epilogue, out, stream));
  return Status::ok();
}

} // namespace moec::rt::cuda::detail
