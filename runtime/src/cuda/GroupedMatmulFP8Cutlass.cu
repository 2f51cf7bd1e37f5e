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
// the sort's offsets), CUTLASS writes the f32 product to stream-ordered scratch
// and EpiloguePass.cuh applies bias and activation into `out`, or CUTLASS
// writes `out` itself when there is nothing to apply. Both scale arrays are
// K-major (the layouts moe.quantize and the FP8 cast write: docs/dialect.md).
//
//===----------------------------------------------------------------------===//

#include "EpiloguePass.cuh"
#include "GridSize.h"
#include "CutlassGroupedRun.cuh"
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
/// schedules; each operand's scale layout beside its own; the f32 epilogue of
/// CutlassGroupedRun.cuh.
template <typename TileShape, typename ClusterShape, typename KernelSchedule,
          typename EpilogueSchedule>
using Config = GroupedConfig<ElementA, cute::tuple<LayoutA *, LayoutSFA *>, ElementB,
                             cute::tuple<LayoutB *, LayoutSFB *>, kAlignmentAB, TileShape,
                             ClusterShape, KernelSchedule,
                             Epilogue<TileShape, ClusterShape, EpilogueSchedule>>;

using Cooperative = cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperativeFP8Blockwise;
using CooperativeEpilogue = cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative;
/// Example 68's configuration: 128x128x128 cooperative tiles, 1x2 clusters.
using Cooperative128x128 =
    Config<Shape<_128, _128, _128>, Shape<_1, _2, _1>, Cooperative, CooperativeEpilogue>;
/// 64x128x128 pingpong tiles, 1x2 clusters: one warp group's epilogue overlaps
/// the other's mainloop; 64-row tiles pad experts of a few dozen rows less.
/// (128x128 without clusters measured no faster anywhere. 128x256
/// tiles do not compile: CUTLASS 4.2's blockwise mainloop wants one weight
/// scale block per tile column.)
using Pingpong64x128 = Config<Shape<_64, _128, _128>, Shape<_1, _2, _1>,
                              cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpongFP8Blockwise,
                              cutlass::epilogue::PtrArrayTmaWarpSpecializedPingpong>;

using GemmKernel = Cooperative128x128::GemmKernel; // the strides below are the same for all
static_assert(kSameStrides<GemmKernel, Pingpong64x128::GemmKernel>);

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
};

__global__ void fillGroups(GroupArrays g, const ElementA *a, const float *rowScales,
                           const ElementB *weights, const float *weightScales, ElementD *d,
                           const int32_t *offsets, int experts, int n, int k, StrideA sa,
                           StrideB sb, StrideD sd) {
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
  g.d[e] = d + begin * n;
  g.strideA[e] = sa;
  g.strideB[e] = sb;
  g.strideD[e] = sd;
}

} // namespace

bool groupedMatmulFP8CutlassSupports(int64_t k, int64_t n) {
  return k % kAlignmentAB == 0 && n % kAlignmentD == 0 && k < (1 << 30) && n < (1 << 30);
}

Status groupedMatmulFP8Cutlass(const uint8_t *lhs, const float *lhsScales, int64_t rows, int64_t k,
                               const uint8_t *weights, const float *weightScales, int64_t experts,
                               int64_t n, const int32_t *offsets, const float *bias,
                               const cpu::Epilogue &epilogue, float *out, uint8_t *outCodes,
                               float *outScales, FP8CutlassTile tile, cudaStream_t stream) {
  if (!groupedMatmulFP8CutlassSupports(k, n))
    return Status::error("groupedMatmulFP8Cutlass: K = " + std::to_string(k) + ", N = " +
                         std::to_string(n) + " are not multiples of 16 and 4");
  if (!offsets)
    return Status::error("groupedMatmulFP8Cutlass: needs the experts' offsets");
  bool gated = epilogue.enabled && epilogue.layout != cpu::GateUpLayout::None;
  // CUTLASS writes `out` itself when there is nothing to apply and no codes
  // are asked for (outCodes: the pass quantises its outputs; out is unused).
  bool direct = !bias && !epilogue.enabled && !outCodes;
  int outColumns = static_cast<int>(gated ? n / 2 : n);
  int groups = static_cast<int>(experts);

  StreamScratch scratch(stream);
  float *product = out;
  GroupArrays g{};
  if (!direct)
    MOEC_RETURN_IF_ERROR(scratch.allocate(static_cast<size_t>(rows * n), product));
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

  Strides<GemmKernel> st(n, k);
  fillGroups<<<(groups + 127) / 128, 128, 0, stream>>>(
      g, reinterpret_cast<const ElementA *>(lhs), lhsScales,
      reinterpret_cast<const ElementB *>(weights), weightScales, product, offsets, groups,
      static_cast<int>(n), static_cast<int>(k), st.a, st.b, st.d);
  MOEC_CUDA_TRY(cudaGetLastError());

  auto run = [&](auto config) {
    using Chosen = decltype(config);
    auto args = groupedArguments<typename Chosen::Gemm>(
        groups, g.shapes,
        typename Chosen::GemmKernel::MainloopArguments{g.a, g.strideA, g.b, g.strideB, g.scaleA,
                                                       g.layoutA, g.scaleB, g.layoutB},
        g.d, g.strideD);
    return runGrouped<typename Chosen::Gemm>(args, scratch, stream, "groupedMatmulFP8Cutlass", k,
                                             n);
  };
  switch (tile) {
  case FP8CutlassTile::Cooperative128x128:
    MOEC_RETURN_IF_ERROR(run(Cooperative128x128{}));
    break;
  case FP8CutlassTile::Pingpong64x128:
    MOEC_RETURN_IF_ERROR(run(Pingpong64x128{}));
    break;
  }

  if (outCodes)
    MOEC_CUDA_TRY(device::launchEpiloguePassE4M3(product, offsets, groups, rows,
                                                 static_cast<int>(n), outColumns, bias, epilogue,
                                                 outCodes, outScales, stream));
  else if (!direct)
    MOEC_CUDA_TRY(device::launchEpiloguePass(product, offsets, groups, rows, static_cast<int>(n),
                                             outColumns, bias, epilogue, out, stream));
  return Status::ok();
}

} // namespace moec::rt::cuda::detail
