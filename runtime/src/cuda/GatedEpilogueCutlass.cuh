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
// Operator style, like CUTLASS's DefaultEpilogueArray, wrapped for the
// warp-specialized ptr-array kernels by Sm90TmaWarpSpecializedAdapter; D's
// per-expert pointers are the expert's first output row. Each warp holds 16
// rows of the tile: it stages its outputs in its own slice of shared memory and
// writes them back as whole 16-byte chunks of rows (a first version stored each
// bf16 from its register, 8-byte pieces of 8 rows per instruction, and was no
// faster than the f32 product and the pass: 3 % slower to 10 % faster).
//
//===----------------------------------------------------------------------===//
#ifndef MOEC_RUNTIME_SRC_CUDA_GATEDEPILOGUECUTLASS_CUH
#define MOEC_RUNTIME_SRC_CUDA_GATEDEPILOGUECUTLASS_CUH

#include "Epilogue.cuh"

#include "cute/arch/mma_sm90.hpp"
#include "cute/atom/mma_traits_sm90_gmma.hpp"
#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/detail.hpp"
#include "cutlass/epilogue/dispatch_policy.hpp"
#include "cutlass/epilogue/thread/linear_combination.h"

#include <cuda_bf16.h>

#include <cstdint>

namespace moec::rt::cuda::detail::grouped {

/// The tiled MMA whose accumulator layout GatedEpilogueArray writes out: bf16
/// m64n256k16 wgmma, K-major operands, two warp groups along M (the 128x256
/// cooperative tile). GroupedMatmulCutlass.cu asserts that its gated kernels
/// get exactly this one from CUTLASS's builder; GatedEpilogueLayoutTest checks
/// its layout against the epilogue's, on the host.
using GatedTiledMma = decltype(cute::make_tiled_mma(
    cute::SM90_64x256x16_F32BF16BF16_SS<cute::GMMA::Major::K, cute::GMMA::Major::K>{},
    cute::Layout<cute::Shape<cute::_2, cute::_1, cute::_1>>{}));

/// The collective epilogue itself (see above); CUTLASS's kernels take it as
/// GatedEpilogue below.
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

  static constexpr int kWarps = 8;        // two consumer warp groups
  static constexpr int kWarpRows = 16;    // wgmma: 16 rows of the tile per warp
  static constexpr int kTileOutputs = 128; // 256 accumulator columns, in pairs
  /// Staged per pass: half the tile's outputs. 16 KB in all, which the kernel
  /// holds twice (the adapter's TensorMapStorage is this type too): the whole
  /// tile's 32 KB, held twice, would not fit beside 4 mainloop stages.
  static constexpr int kPassOutputs = kTileOutputs / 2;
  static constexpr int kChunks = kPassOutputs / 8; // 16-byte chunks per staged row
  struct SharedStorage {
    alignas(16) __nv_bfloat16 staged[kWarps][kWarpRows][kPassOutputs];
  };
  /// A staged row's chunk c sits at c ^ (row % 8): the 8 rows a warp's 2-byte
  /// stores touch at once fall in 8 different bank groups, and the 8 chunks of
  /// a row that a quarter warp loads at once too.
  CUTLASS_DEVICE static int swizzled(int row, int column) {
    return ((column / 8) ^ (row % 8)) * 8 + column % 8;
  }
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
                                 TiledMma tiledMma, ResidueMNK, int threadIdx, char *smem) {
    // SiLU only (the caller checks; the four models measured all use it): with
    // the kind a run-time switch inside the unrolled loop, each of its 128
    // elements carried all four activations (GELU's erff included), and
    // instruction cache misses made the GEMM 2x slower (ncu: 52 % of stalls).
    store(problemShape, blockShape, blockCoord, accumulators, tiledMma, threadIdx, smem);
  }

private:
  /// device::gatedEpilogue of SiLU (the same operations, so the same bits).
  CUTLASS_DEVICE float gated(float gate, float up, bool clamp) const {
    const cpu::Epilogue &e = params_.epilogue;
    if (clamp) {
      gate = fminf(gate, e.limit);
      up = fminf(fmaxf(up, -e.limit), e.limit);
    }
    return device::activate(cpu::ActivationKind::SiLU, e.alpha, gate) * (up + e.beta);
  }

  template <class ProblemShapeMNKL, class BlockShapeMNK,
            class BlockCoordMNKL, class FrgEngine, class FrgLayout, class TiledMma>
  CUTLASS_DEVICE void store(ProblemShapeMNKL problemShape, BlockShapeMNK blockShape,
                            BlockCoordMNKL blockCoord,
                            cute::Tensor<FrgEngine, FrgLayout> const &accumulators,
                            TiledMma tiledMma, int threadIdx, char *smem) {
    using namespace cute;
    static_assert(is_static<FrgLayout>::value, "the accumulator layout must be static");
    constexpr int kElements = decltype(size(accumulators))::value;
    static_assert(decltype(size<1>(blockShape))::value == 2 * kTileOutputs);
    const int m = get<0>(problemShape), n = get<1>(problemShape);
    auto [mCoord, nCoord, kCoord, group] = blockCoord;
    // Each accumulator's (row, column) in the expert's [M, N] product (only the
    // warp's first row is taken from it; see the fragment layout below).
    Tensor tile = local_tile(make_identity_tensor(make_shape(m, n)), take<0, 2>(blockShape),
                             make_coord(mCoord, nCoord));
    Tensor coords = tiledMma.get_thread_slice(threadIdx).partition_C(tile);
    __nv_bfloat16 *rows = params_.rows[group];
    const float *bias = params_.bias ? params_.bias[group] : nullptr;
    const int lane = threadIdx % 32, warp = threadIdx / 32;
    auto &staged = reinterpret_cast<SharedStorage *>(smem)->staged[warp];
    // The warp's first row (lane 0 holds it) and the tile's first column.
    const int firstRow = __shfl_sync(0xffffffffu, int(get<0>(coords(0))), 0);
    const int firstColumn = nCoord * 2 * kTileOutputs;
    const int64_t outFirst = firstColumn / 2;
    const bool clamp = isfinite(params_.epilogue.limit);
    // wgmma's C fragment (PTX ISA, m64nNk16): lane l of a warp holds rows l/4 and
    // l/4 + 8 of the warp's 16, and in each 8-column group j the columns
    // 2 (l % 4) and 2 (l % 4) + 1: a gate and its up. Element 4j + 2h + v is
    // column group j, row half h, gate (v = 0) or up (v = 1). Written out
    // rather than taken from `coords` per element (v11: ~40 instructions of
    // index arithmetic, range checks and loads per output); the GPU tests
    // compare every output with the epilogue pass bit for bit.
    static_assert(kElements == 4 * (2 * kTileOutputs / 8), "one (2, 2, N/8) fragment per thread");
    const int quadRow = lane / 4, quadColumn = lane % 4;
    const int columnsLeft = n - firstColumn; // of this tile, inside N
    // The tile's 256 bias values (1 KB, 8 lines) into L1 first: pass 0 loads
    // its pairs one ahead of their use (the accumulators hold the registers),
    // so each would otherwise wait out an L2 latency of its own.
    if (bias && lane < 8 && lane * 32 < columnsLeft)
      asm volatile("prefetch.global.L1 [%0];" ::"l"(bias + firstColumn + lane * 32) : "memory");
    CUTLASS_PRAGMA_UNROLL
    for (int pass = 0; pass < 2; ++pass) {
      // Column groups run outermost, so each pass is half of them: 64 outputs.
      // The pass's bias pairs are loaded first, all together (clamped into the
      // row, so unconditionally): loaded one at a time behind the range check,
      // each waited out its own L2 latency, 17 % of the gpt-oss gate/up
      // kernel's stall samples in v12's ncu profile.
      float2 biasPairs[kElements / 8];
      CUTLASS_PRAGMA_UNROLL
      for (int g = 0; g < kElements / 8; ++g) {
        const int column = 2 * quadColumn + 8 * (pass * (kElements / 8) + g);
        biasPairs[g] = bias ? __ldg(reinterpret_cast<const float2 *>(bias + firstColumn +
                                                                     min(column, columnsLeft - 2)))
                            : make_float2(0.0f, 0.0f);
      }
      CUTLASS_PRAGMA_UNROLL
      for (int g = 0; g < kElements / 8; ++g) {
        const int columnGroup = pass * (kElements / 8) + g;
        const int column = 2 * quadColumn + 8 * columnGroup; // the gate's, in the tile
        if (column < columnsLeft) {
          const float2 b = biasPairs[g]; // one pair for both rows
          // Output quadColumn + 4g of the pass: chunk g / 2, element
          // quadColumn + 4 (g % 2); the staged row's chunk is swizzled by
          // row % 8, which is quadRow for both row halves.
          const int slot = ((g / 2) ^ quadRow) * 8 + quadColumn + 4 * (g % 2);
          CUTLASS_PRAGMA_UNROLL
          for (int half = 0; half < 2; ++half) {
            const int i = 4 * columnGroup + 2 * half;
            float gate = accumulators(i), up = accumulators(i + 1);
            if (bias) {
              gate += b.x;
              up += b.y;
            }
            staged[quadRow + 8 * half][slot] = __float2bfloat16_rn(gated(gate, up, clamp));
          }
        }
      }
      __syncwarp();
      // 16 rows x 8 chunks of 8 outputs; outColumns % 8 == 0 (the caller
      // checks), so a chunk is all inside the row or all past it.
      CUTLASS_PRAGMA_UNROLL
      for (int i = lane; i < kWarpRows * kChunks; i += 32) {
        int row = i / kChunks, chunk = i % kChunks;
        int64_t column = outFirst + pass * kPassOutputs + chunk * 8;
        if (firstRow + row < m && column < params_.outColumns)
          *reinterpret_cast<uint4 *>(rows + int64_t(firstRow + row) * params_.outColumns +
                                     column) =
              *reinterpret_cast<const uint4 *>(&staged[row][swizzled(row, chunk * 8)]);
      }
      __syncwarp(); // the next pass (or tile) overwrites the slice
    }
  }

  Params params_;
};

/// The form the sm90 warp-specialized kernels take.
using GatedEpilogue = cutlass::epilogue::collective::detail::Sm90TmaWarpSpecializedAdapter<
    GatedEpilogueArray>;

} // namespace moec::rt::cuda::detail::grouped

#endif // MOEC_RUNTIME_SRC_CUDA_GATEDEPILOGUECUTLASS_CUH
