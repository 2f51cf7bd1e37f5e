//===- CutlassGroupedRun.cuh - running a CUTLASS sm90 grouped GEMM --------===//
//
// What the bf16 (GroupedMatmulCutlass.cu) and FP8 (GroupedMatmulFP8Cutlass.cu)
// prefill GEMMs share: the operand layouts, the f32 epilogue (D = 1 *
// accumulator, C never read), how a configuration becomes a kernel
// (GroupedConfig) and the strides every expert uses; then, once the
// per-expert arguments sit on the device, the hardware info the persistent
// scheduler sizes its grid by, and can_implement / initialize / run with the
// workspace from stream-ordered scratch.
//
//===----------------------------------------------------------------------===//
#ifndef MOEC_RUNTIME_SRC_CUDA_CUTLASSGROUPEDRUN_CUH
#define MOEC_RUNTIME_SRC_CUDA_CUTLASSGROUPEDRUN_CUH

#include "StreamScratch.h"
#include "moec/runtime/Cuda.h"
#include "moec/runtime/Status.h"

#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/group_array_problem_shape.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/kernel_hardware_info.h"
#include "cutlass/util/packed_stride.hpp"

#include <cuda_bf16.h>

#include <cstdint>
#include <string>
#include <type_traits>

namespace moec::rt::cuda::detail {

/// The operands both grouped GEMMs share: per expert M rows, N weight rows, K
/// deep; rows [M, K] row-major, weights [N, K] K-major, f32 results [M, N]
/// row-major.
namespace grouped {
using ProblemShape = cutlass::gemm::GroupProblemShape<cute::Shape<int, int, int>>;
using LayoutA = cutlass::layout::RowMajor;
using LayoutB = cutlass::layout::ColumnMajor;
using LayoutD = cutlass::layout::RowMajor;
using ElementD = float;
/// Elements per 16 bytes: what the epilogue's stores take at a time.
template <typename Out> constexpr int kAlignmentOf = 16 / int(sizeof(Out));
constexpr int kAlignmentD = kAlignmentOf<ElementD>;

/// D = accumulator: no source C (void), so none of its shared memory either.
using NoSource = cutlass::epilogue::fusion::LinearCombination<ElementD, float, void>;

/// Results of `Out` per expert (16-byte aligned rows), D = accumulator unless
/// another fusion is given. C is void: with an f32 C the epilogue's staging
/// took 66 KB of shared memory and left the 128x256x64 mainloop 3 stages;
/// without it 34 KB, and 4 stages (down projections at T = 8192: gpt-oss
/// 7.6 %, Qwen3 4 % and DeepSeek-V3 3 % faster, Mixtral level).
template <typename Out, typename TileShape, typename ClusterShape, typename EpilogueSchedule,
          typename Fusion>
using EpilogueOf = typename cutlass::epilogue::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
    cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, LayoutD *,
    kAlignmentOf<Out>, Out, LayoutD *, kAlignmentOf<Out>, EpilogueSchedule, Fusion>::CollectiveOp;

/// The epilogue of both: f32 results.
template <typename TileShape, typename ClusterShape, typename EpilogueSchedule,
          typename Fusion = NoSource>
using Epilogue = EpilogueOf<ElementD, TileShape, ClusterShape, EpilogueSchedule, Fusion>;

/// Results rounded to bf16 in the epilogue (--expert-outputs=bf16: the down
/// projection's rows, which only the combine reads): half the bytes written.
using ElementDBF16 = cutlass::bfloat16_t;
constexpr int kAlignmentDBF16 = kAlignmentOf<ElementDBF16>;
using NoSourceBF16 = cutlass::epilogue::fusion::LinearCombination<ElementDBF16, float, void>;
template <typename TileShape, typename ClusterShape, typename EpilogueSchedule,
          typename Fusion = NoSourceBF16>
using EpilogueBF16 = EpilogueOf<ElementDBF16, TileShape, ClusterShape, EpilogueSchedule, Fusion>;

/// D = accumulator + the expert's bias row: CUTLASS's row broadcast, one bias
/// pointer per group (expert), so a biased projection without an activation
/// (gpt-oss's down) needs no f32 product and no second pass. Results of `Out`
/// (f32, or bf16 rounded to nearest even after the sum).
template <typename TileShape, typename Out = ElementD>
using BiasFusion = cutlass::epilogue::fusion::Sm90EVT<
    cutlass::epilogue::fusion::Sm90Compute<cutlass::plus, Out, float,
                                           cutlass::FloatRoundStyle::round_to_nearest>,
    cutlass::epilogue::fusion::Sm90AccFetch,
    cutlass::epilogue::fusion::Sm90RowBroadcast<0, TileShape, float *, float,
                                                cute::Stride<cute::_0, cute::_1, int64_t>>>;

/// BiasFusion's arguments, children first: the accumulator, the bias rows
/// (`bias`: one pointer per expert, column stride 1), then the sum.
template <typename Gemm>
typename Gemm::GemmKernel::CollectiveEpilogue::FusionCallbacks::Arguments
biasArguments(const float **bias) {
  return {{}, {bias, 0.0f, {cute::_0{}, cute::_1{}, 0}}, {}};
}

/// One configuration of either grouped GEMM: CUTLASS's sm90 mainloop for A and
/// B (element; layout, with FP8 the scale layout beside it; alignment), tile,
/// cluster and kernel schedule, given the stages that `CollectiveEpilogue_`'s
/// shared storage leaves, and the kernel and device adapter around both.
template <typename ElementA, typename LayoutArgA, typename ElementB, typename LayoutArgB,
          int kAlignment, typename TileShape, typename ClusterShape, typename KernelSchedule,
          typename CollectiveEpilogue_>
struct GroupedConfig {
  using CollectiveEpilogue = CollectiveEpilogue_;
  using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, ElementA, LayoutArgA, kAlignment,
      ElementB, LayoutArgB, kAlignment, float, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename CollectiveEpilogue::SharedStorage))>,
      KernelSchedule>::CollectiveOp;
  using GemmKernel =
      cutlass::gemm::kernel::GemmUniversal<ProblemShape, CollectiveMainloop, CollectiveEpilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;
};

/// The row-major A, C, D and K-major B strides of `GemmKernel` for N and K
/// (they do not depend on M, so every expert shares them).
template <typename GemmKernel> struct Strides {
  typename GemmKernel::InternalStrideA a;
  typename GemmKernel::InternalStrideB b;
  typename GemmKernel::InternalStrideD d;

  Strides(int64_t n, int64_t k) {
    int ni = static_cast<int>(n), ki = static_cast<int>(k);
    a = cutlass::make_cute_packed_stride(decltype(a){}, {1, ki, 1});
    b = cutlass::make_cute_packed_stride(decltype(b){}, {ni, ki, 1});
    d = cutlass::make_cute_packed_stride(decltype(d){}, {1, ni, 1});
  }
};
} // namespace grouped

/// Expert e's per-expert epilogue pointers in `g` (GroupArrays of either GEMM,
/// each array null where the configuration has none): its bias row (n
/// columns), its first row of gated bf16 h (n / 2 columns), of bf16 results
/// (n columns); `begin` its first row.
template <typename Groups>
__device__ inline void fillEpiloguePointers(const Groups &g, int e, int64_t begin, int n,
                                            const float *bias, __nv_bfloat16 *outBF16) {
  if (g.bias)
    g.bias[e] = bias + static_cast<int64_t>(e) * n;
  if (g.rowsBF16)
    g.rowsBF16[e] = outBF16 + begin * (n / 2);
  if (g.dBF16)
    g.dBF16[e] = reinterpret_cast<grouped::ElementDBF16 *>(outBF16) + begin * n;
}

/// Whether two configurations' kernels take the same A, B and D strides: the
/// per-expert stride arrays are filled once, for whichever of them runs.
template <typename KernelA, typename KernelB>
constexpr bool kSameStrides =
    std::is_same_v<typename KernelA::InternalStrideA, typename KernelB::InternalStrideA> &&
    std::is_same_v<typename KernelA::InternalStrideB, typename KernelB::InternalStrideB> &&
    std::is_same_v<typename KernelA::InternalStrideD, typename KernelB::InternalStrideD>;

/// The SM count and occupancy CUTLASS's persistent scheduler sizes its grid by
/// (asked once per device and kernel).
template <typename GemmKernel> cutlass::KernelHardwareInfo hardwareInfo() {
  static thread_local int device = -1;
  static thread_local cutlass::KernelHardwareInfo info;
  int current = 0;
  cudaGetDevice(&current);
  if (current != device) {
    info = cutlass::KernelHardwareInfo::make_kernel_hardware_info<GemmKernel>(current);
    device = current;
  }
  return info;
}

/// Arguments of kGrouped mode with the epilogue's fusion arguments `thread`;
/// `mainloop` and `d` with its strides are per expert (no source C).
template <typename Gemm, typename Mainloop, typename Thread, typename D, typename SD>
typename Gemm::Arguments
groupedArgumentsWith(int groups,
                     typename Gemm::GemmKernel::ProblemShape::UnderlyingProblemShape *shapes,
                     const Mainloop &mainloop, const Thread &thread, D d, SD strideD) {
  return typename Gemm::Arguments{cutlass::gemm::GemmUniversalMode::kGrouped,
                                  {groups, shapes, nullptr},
                                  mainloop,
                                  {thread, nullptr, nullptr, d, strideD},
                                  hardwareInfo<typename Gemm::GemmKernel>()};
}

/// Arguments of kGrouped mode with D = accumulator (alpha 1, beta 0, no C);
/// `mainloop` and `d` with its strides are per expert.
template <typename Gemm, typename Mainloop, typename D, typename SD>
typename Gemm::Arguments
groupedArguments(int groups,
                 typename Gemm::GemmKernel::ProblemShape::UnderlyingProblemShape *shapes,
                 const Mainloop &mainloop, D d, SD strideD) {
  typename Gemm::Arguments args;
  decltype(args.epilogue.thread) fusion;
  fusion.alpha = 1.0f;
  fusion.beta = 0.0f;
  fusion.alpha_ptr = nullptr;
  fusion.beta_ptr = nullptr;
  fusion.alpha_ptr_array = nullptr;
  fusion.beta_ptr_array = nullptr;
  fusion.dAlpha = {cute::_0{}, cute::_0{}, 0};
  fusion.dBeta = {cute::_0{}, cute::_0{}, 0};
  return groupedArgumentsWith<Gemm>(groups, shapes, mainloop, fusion, d, strideD);
}

/// can_implement, workspace (stream-ordered scratch), initialize, run on `stream`;
/// errors name `what` and the shape.
template <typename Gemm>
Status runGrouped(const typename Gemm::Arguments &args, StreamScratch &scratch,
                  cudaStream_t stream, const char *what, int64_t k, int64_t n) {
  Gemm gemm;
  if (gemm.can_implement(args) != cutlass::Status::kSuccess)
    return Status::error(std::string(what) + ": CUTLASS cannot implement K = " +
                         std::to_string(k) + ", N = " + std::to_string(n));
  unsigned char *workspace = nullptr;
  MOEC_RETURN_IF_ERROR(scratch.allocate(Gemm::get_workspace_size(args), workspace));
  cutlass::Status status = gemm.initialize(args, workspace, stream);
  if (status == cutlass::Status::kSuccess)
    status = gemm.run(stream);
  if (status != cutlass::Status::kSuccess)
    return Status::error(std::string(what) + ": " + cutlass::cutlassGetStatusString(status));
  MOEC_CUDA_TRY(cudaGetLastError());
  return Status::ok();
}

} // namespace moec::rt::cuda::detail

#endif // MOEC_RUNTIME_SRC_CUDA_CUTLASSGROUPEDRUN_CUH
