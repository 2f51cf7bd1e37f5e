//===- GatedEpilogueCutlass.cuh - gate/up activation in CUTLASS's epilogue -===//
//
// A CUTLASS collective epilogue for gate/up projections whose weight rows are
// interleaved (row 2j gate j, row 2j+1 up j: GateUpLayout::Interleaved). In
// wgmma's accumulator layout each thread holds its columns in adjacent pairs
// (2c, 2c+1), that is one output's gate and up, so it writes
// out[r, c] = gatedEpilogue(gate + bias, up + bias) in bf16 straight from the
// registers: no f32 product of 2N columns and no second pass over it (v10's
// epilogue pass took 7-8 % of the prefill call at T = 8192).
//
// Operator style, like CUTLASS's DefaultEpilogueArray (no shared memory, no
// TMA store), wrapped for the warp-specialized ptr-array kernels by
// Sm90TmaWarpSpecializedAdapter; D's per-expert pointers are the expert's
// first output row.
//
//===----------------------------------------------------------------------===//
#ifndef MOEC_RUNTIME_SRC_CUDA_GATEDEPILOGUECUTLASS_CUH
#define MOEC_RUNTIME_SRC_CUDA_GATEDEPILOGUECUTLASS_CUH

#include "Epilogue.cuh"

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/detail.hpp"
#include "cutlass/epilogue/dispatch_policy.hpp"
#include "cutlass/epilogue/thread/linear_combination.h"

#include <cuda_bf16.h>

#include <cstdint>

namespace moec::rt::cuda::detail::grouped {

class GatedEpilogueArray {
public:
  using EpilogueSchedule = cutlass::epilogue::PtrArrayNoSmemWarpSpecialized;
  using DispatchPolicy = EpilogueSchedule;
  // Nominal types the kernel and adapter name; D is written as bf16 here.
  using ThreadEpilogueOp = cutlass::epilogue::thread::LinearCombination<float, 1, float, float>;
  using ElementOutput = float;
  using ElementAccumulator = float;
  using ElementCompute = float;
  using ElementScalar = float;
  using ElementC = float;
  using ElementD = float;
  using InternalStrideC = cute::Stride<int64_t, cute::_1, int64_t>;
  using InternalStrideD = InternalStrideC;
  using StrideC = InternalStrideC *;
  using StrideD = InternalStrideD *;
  using GmemTiledCopyC = void;
  using GmemTiledCopyD = void;

  struct SharedStorage {};
  using TensorMapStorage = SharedStorage;

  struct Arguments {
    __nv_bfloat16 **rows = nullptr; // per expert: its first output row
    const float **bias = nullptr;   // per expert: its N-entry bias (interleaved), or null
    int64_t outColumns = 0;         // N / 2, the output's row stride
    cpu::Epilogue epilogue{};
  };
  using Params = Arguments;

  template <class ProblemShape>
  static constexpr Params to_underlying_arguments(ProblemShape const &, Arguments const &args,
                                                  void *) {
    return args;
  }
  template <class ProblemShape>
  static size_t get_workspace_size(ProblemShape const &, Arguments const &, int) {
    return 0;
  }
  template <class ProblemShape>
  static cutlass::Status initialize_workspace(ProblemShape const &, Arguments const &, void *,
                                              cudaStream_t, cutlass::CudaHostAdapter * = nullptr) {
    return cutlass::Status::kSuccess;
  }
  template <class ProblemShape>
  static bool can_implement(ProblemShape const &, Arguments const &args) {
    return args.rows != nullptr && args.outColumns > 0;
  }

  CUTLASS_HOST_DEVICE explicit GatedEpilogueArray(Params const &params) : params_(params) {}

  CUTLASS_DEVICE bool is_source_needed() { return false; }

  template <class ProblemShapeMNKL, class BlockShapeMNK, class BlockCoordMNKL, class FrgEngine,
            class FrgLayout, class TiledMma, class ResidueMNK>
  CUTLASS_DEVICE void operator()(ProblemShapeMNKL problemShape, BlockShapeMNK blockShape,
                                 BlockCoordMNKL blockCoord,
                                 cute::Tensor<FrgEngine, FrgLayout> const &accumulators,
                                 TiledMma tiledMma, ResidueMNK, int threadIdx, char *) {
    using namespace cute;
    static_assert(is_static<FrgLayout>::value, "the accumulator layout must be static");
    const int m = get<0>(problemShape), n = get<1>(problemShape);
    auto [mCoord, nCoord, kCoord, group] = blockCoord;
    // Each accumulator's (row, column) in the expert's [M, N] product.
    Tensor tile = local_tile(make_identity_tensor(make_shape(m, n)), take<0, 2>(blockShape),
                             make_coord(mCoord, nCoord));
    Tensor coords = tiledMma.get_thread_slice(threadIdx).partition_C(tile);
    static_assert(decltype(size(accumulators))::value % 2 == 0);
    __nv_bfloat16 *rows = params_.rows[group];
    const float *bias = params_.bias ? params_.bias[group] : nullptr;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(accumulators); i += 2) {
      // Elements 2p and 2p+1 are columns c (even) and c+1 of one row: a gate
      // and its up (wgmma's C fragment: pairs of adjacent columns innermost).
      int r = get<0>(coords(i)), c = get<1>(coords(i));
      if (r < m && c < n) {
        float gate = accumulators(i), up = accumulators(i + 1);
        if (bias) {
          gate += bias[c];
          up += bias[c + 1];
        }
        rows[int64_t(r) * params_.outColumns + c / 2] =
            __float2bfloat16_rn(device::gatedEpilogue(params_.epilogue, gate, up));
      }
    }
  }

private:
  Params params_;
};

/// The form the sm90 warp-specialized kernels take.
using GatedEpilogue = cutlass::epilogue::collective::detail::Sm90TmaWarpSpecializedAdapter<
    GatedEpilogueArray>;

} // namespace moec::rt::cuda::detail::grouped

#endif // MOEC_RUNTIME_SRC_CUDA_GATEDEPILOGUECUTLASS_CUH
