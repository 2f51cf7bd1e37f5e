//===- GatedEpilogueCutlass.cuh - gate/up activation in CUTLASS's epilogue -===//
//
// A CUTLASS collective epilogue for gate/up projections whose weight rows are
// interleaved (row 2j gate j, row 2j+1 up j: GateUpLayout::Interleaved). In
// wgmma's accumulator layout each thread holds its columns in adjacent pairs
// (2c, 2c+1), that is one output's gate and up, so it writes
// out[r, c] = gatedEpilogue(gate + bias, up + bias) in bf16 straight from the
// registers: no f32 product of 2N columns and no second pass over it (a
// separate epilogue pass took 7-8 % of the prefill call at T = 8192).
//
// A collective of its own for the warp-specialized ptr-array kernels (the
// interface of CUTLASS's Sm90TmaWarpSpecializedAdapter, plus a load): D's
// per-expert pointers are the expert's first output row. One template for
// the tiles of both element types, by the tile's weight rows: the bf16
// kernels' 256 (m64n256k16) and the FP8 kernels' 128 (m64n128k32 e4m3, whose
// block scales CUTLASS's blockwise mainloop has already applied to the
// accumulators it hands over); the fragment's pattern is the same. With a
// bias, the kernel's epilogue-load warp stages each tile's bias values in shared
// memory while the tile's mainloop runs (a 2-stage pipeline, as CUTLASS loads
// C): loaded by the consumers after the mainloop, they waited out an L2
// latency per tile, 17 % of the gpt-oss gate/up kernel's stall samples in
// ncu, and still 8 % after batching them. Each warp holds 16
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
#include "cutlass/epilogue/dispatch_policy.hpp"
#include "cutlass/epilogue/thread/linear_combination.h"
#include "cutlass/pipeline/sm90_pipeline.hpp"

#include <cuda_bf16.h>

#include <cstdint>

namespace moec::rt::cuda::detail::grouped {

/// The tiled MMAs whose accumulator layout GatedEpilogueArrayOf writes out:
/// bf16 m64n256k16 wgmma, K-major operands, `WarpGroups` warp groups along M:
/// two on one 128x256 tile (cooperative), or one on its own 64x256 tile
/// (pingpong). Each thread holds the same 128-element fragment in both.
/// GroupedMatmulCutlass.cu asserts that its gated kernels get exactly these
/// from CUTLASS's builder; GatedEpilogueLayoutTest checks their layout against
/// the epilogue's, on the host.
template <int WarpGroups>
using GatedTiledMmaOf = decltype(cute::make_tiled_mma(
    cute::SM90_64x256x16_F32BF16BF16_SS<cute::GMMA::Major::K, cute::GMMA::Major::K>{},
    cute::Layout<cute::Shape<cute::Int<WarpGroups>, cute::_1, cute::_1>>{}));
using GatedTiledMma = GatedTiledMmaOf<2>;
using GatedTiledMmaPingpong = GatedTiledMmaOf<1>;

/// The FP8 kernels' (GroupedMatmulFP8Cutlass.cu): e4m3 m64n128k32 wgmma on
/// 128x128 cooperative or 64x128 pingpong tiles, 64 elements per thread.
template <int WarpGroups>
using GatedTiledMmaFP8Of = decltype(cute::make_tiled_mma(
    cute::SM90::GMMA::MMA_64x128x32_F32E4M3E4M3_SS_TN<>{},
    cute::Layout<cute::Shape<cute::Int<WarpGroups>, cute::_1, cute::_1>>{}));
using GatedTiledMmaFP8 = GatedTiledMmaFP8Of<2>;
using GatedTiledMmaFP8Pingpong = GatedTiledMmaFP8Of<1>;

/// The collective epilogue itself (see above) for tiles of `TileColumns`
/// weight rows (256 or 128); CUTLASS's kernels take it as GatedEpilogue or
/// GatedEpilogueFP8 below.
template <int TileColumns> class GatedEpilogueArrayOf {
  static_assert(TileColumns % 128 == 0, "whole passes of 64 outputs");

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

  // Two consumer warp groups; with pingpong tiles each group's 4 warps use
  // slices 0-3 in turn, which is safe because the kernel's order barrier runs
  // the two groups' epilogues one after the other.
  static constexpr int kWarps = 8;
  static constexpr int kWarpRows = 16; // wgmma: 16 rows of the tile per warp
  static constexpr int kTileOutputs = TileColumns / 2; // accumulator columns, in pairs
  /// Staged per pass: 64 outputs of the warp's 16 rows, 16 KB for 8 warps
  /// (two passes on 256-column tiles: an earlier adapter also held this
  /// storage as its TensorMapStorage, and the whole tile's 32 KB, held twice,
  /// would not fit beside 4 mainloop stages).
  static constexpr int kPassOutputs = 64;
  static constexpr int kPasses = kTileOutputs / kPassOutputs;
  static constexpr int kPassGroups = 2 * kPassOutputs / 8; // 8-column groups per pass
  static constexpr int kChunks = kPassOutputs / 8; // 16-byte chunks per staged row
  /// Tiles whose bias is staged ahead of their epilogue.
  static constexpr int kBiasStages = 2;
  struct SharedStorage {
    alignas(16) __nv_bfloat16 staged[kWarps][kWarpRows][kPassOutputs];
    alignas(16) float bias[kBiasStages][2 * kTileOutputs]; // zero past N
  };
  /// A staged row's chunk c sits at c ^ (row % 8): the 8 rows a warp's 2-byte
  /// stores touch at once fall in 8 different bank groups, and the 8 chunks of
  /// a row that a quarter warp loads at once too.
  CUTLASS_DEVICE static int swizzled(int row, int column) {
    return ((column / 8) ^ (row % 8)) * 8 + column % 8;
  }
  using TensorStorage = SharedStorage;
  struct TensorMapStorage {}; // no TMA descriptors to update per expert

  // The bias pipeline: the epilogue-load warp produces (32 arrivals, no TMA
  // transaction bytes), the tile's consumer threads release each stage (256
  // cooperative, 128 pingpong: the kernel sets the count, and a pingpong warp
  // group skips the other's stages).
  using LoadPipeline = cutlass::PipelineTransactionAsync<kBiasStages>;
  using LoadPipelineState = cutlass::PipelineState<kBiasStages>;
  using PipelineStorage = typename LoadPipeline::SharedStorage;
  static constexpr bool RequiresTransactionBytes = false;
  using StorePipeline = cutlass::PipelineTmaStore<0>; // stores are plain: none
  using StorePipelineState = cutlass::PipelineState<0>;

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

  template <class TileShape>
  CUTLASS_HOST_DEVICE static constexpr int get_load_pipe_increment(TileShape) {
    return 1;
  }
  template <class TileShape>
  CUTLASS_HOST_DEVICE static constexpr int get_store_pipe_increment(TileShape) {
    return 1;
  }
  CUTLASS_DEVICE static void prefetch_tma_descriptors(Params const &) {}

  CUTLASS_HOST_DEVICE GatedEpilogueArrayOf(Params const &params, TensorStorage &)
      : params_(params) {}

  /// The kernel runs the epilogue-load warp only when this holds (the same on
  /// every thread: the consumers wait for the bias exactly then).
  CUTLASS_DEVICE bool is_producer_load_needed() const { return params_.bias != nullptr; }

  CUTLASS_DEVICE auto load_init(Params const &, TensorMapStorage &, int32_t, int32_t) {
    return cute::make_tuple(nullptr);
  }

  /// The epilogue-load warp (32 lanes): the tile's TileColumns bias values,
  /// or zero past N, into the next stage, a float4 per lane and 128 columns.
  template <class ProblemShapeMNKL, class TileShapeMNK, class TileCoordMNKL, class TiledMma,
            class TensorMapC>
  CUTLASS_DEVICE LoadPipelineState load(LoadPipeline pipeline, LoadPipelineState state,
                                        ProblemShapeMNKL problemShape, TileShapeMNK,
                                        TileCoordMNKL tileCoord, TiledMma, int lane,
                                        TensorStorage &storage, TensorMapC const &, int = -1,
                                        bool = false) {
    using namespace cute;
    auto [mCoord, nCoord, kCoord, group] = tileCoord;
    const int firstColumn = nCoord * 2 * kTileOutputs;
    const int columnsLeft = int(get<1>(problemShape)) - firstColumn; // a multiple of 8
    const float *bias = params_.bias[group] + firstColumn;
    pipeline.producer_acquire(state);
    float *stage = storage.bias[state.index()];
    CUTLASS_PRAGMA_UNROLL
    for (int part = 0; part < TileColumns / 128; ++part) {
      const int column = 4 * lane + 128 * part;
      *reinterpret_cast<float4 *>(stage + column) =
          column < columnsLeft ? __ldg(reinterpret_cast<const float4 *>(bias + column))
                               : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
    pipeline.producer_commit(state); // mbarrier.arrive releases the stores above
    ++state;
    return state;
  }

  CUTLASS_DEVICE LoadPipelineState load_tail(LoadPipeline pipeline, LoadPipelineState state) {
    if (is_producer_load_needed())
      pipeline.producer_tail(state); // every stage released before the warp exits
    return state;
  }

  CUTLASS_DEVICE auto store_init(Params const &, TensorMapStorage &, int32_t, int32_t, int32_t) {
    return cute::make_tuple(nullptr);
  }

  /// The consumers (the tile's 256 threads, or 128 with pingpong): the tile's
  /// outputs, with the staged bias.
  template <class ProblemShapeMNKL, class TileShapeMNK, class TileCoordMNKL, class AccEngine,
            class AccLayout, class TiledMma, class TensorMapD>
  CUTLASS_DEVICE auto store(LoadPipeline loadPipeline, LoadPipelineState loadState, StorePipeline,
                            StorePipelineState storeState, ProblemShapeMNKL problemShape,
                            TileShapeMNK tileShape, TileCoordMNKL tileCoord,
                            cute::Tensor<AccEngine, AccLayout> accumulators, TiledMma tiledMma,
                            int threadIdx, TensorStorage &storage, TensorMapD const &, int = -1) {
    const float *tileBias = nullptr;
    if (is_producer_load_needed()) {
      loadPipeline.consumer_wait(loadState);
      tileBias = storage.bias[loadState.index()];
    }
    // SiLU only (the caller checks; the four models measured all use it): with
    // the kind a run-time switch inside the unrolled loop, each of its 128
    // elements carried all four activations (GELU's erff included), and
    // instruction cache misses made the GEMM 2x slower (ncu: 52 % of stalls).
    // Bias and clamp as template arguments: tested per output they cost a
    // predicate, a select and a reloaded constant each (SASS: ~34
    // instructions per output). Only one of the four runs in a launch.
    const bool clamp = isfinite(params_.epilogue.limit);
    if (tileBias && clamp)
      write<true, true>(problemShape, tileShape, tileCoord, accumulators, tiledMma, threadIdx,
                        tileBias, storage);
    else if (tileBias)
      write<true, false>(problemShape, tileShape, tileCoord, accumulators, tiledMma, threadIdx,
                         tileBias, storage);
    else if (clamp)
      write<false, true>(problemShape, tileShape, tileCoord, accumulators, tiledMma, threadIdx,
                         tileBias, storage);
    else
      write<false, false>(problemShape, tileShape, tileCoord, accumulators, tiledMma, threadIdx,
                          tileBias, storage);
    if (tileBias) {
      loadPipeline.consumer_release(loadState); // arrive releases the reads above
      ++loadState;
    }
    return cute::make_tuple(loadState, storeState);
  }

  CUTLASS_DEVICE auto store_tail(LoadPipeline, LoadPipelineState loadState, StorePipeline,
                                 StorePipelineState storeState) {
    return cute::make_tuple(loadState, storeState);
  }

  template <bool IsLoad, class ProblemShapeMNKL>
  CUTLASS_DEVICE void tensormaps_perform_update(TensorMapStorage &, Params const &,
                                                cute::TmaDescriptor const *, ProblemShapeMNKL,
                                                int32_t, int32_t) {}
  template <bool IsLoad>
  CUTLASS_DEVICE void tensormaps_cp_fence_release(TensorMapStorage &, cute::TmaDescriptor const *,
                                                  int32_t) {}
  template <bool IsLoad>
  CUTLASS_DEVICE void tensormaps_fence_acquire(cute::TmaDescriptor const *) {}

private:
  /// device::gatedEpilogue of SiLU (the same operations, so the same bits).
  template <bool kClamp> CUTLASS_DEVICE float gated(float gate, float up) const {
    const cpu::Epilogue &e = params_.epilogue;
    if constexpr (kClamp) {
      gate = fminf(gate, e.limit);
      up = fminf(fmaxf(up, -e.limit), e.limit);
    }
    return device::activate(cpu::ActivationKind::SiLU, e.alpha, gate) * (up + e.beta);
  }

  /// `tileBias`: the tile's TileColumns bias values in shared memory (kBias),
  /// or null.
  template <bool kBias, bool kClamp, class ProblemShapeMNKL, class BlockShapeMNK,
            class BlockCoordMNKL, class FrgEngine, class FrgLayout, class TiledMma>
  CUTLASS_DEVICE void
  write(ProblemShapeMNKL problemShape, BlockShapeMNK blockShape, BlockCoordMNKL blockCoord,
        cute::Tensor<FrgEngine, FrgLayout> const &accumulators, TiledMma tiledMma, int threadIdx,
        const float *tileBias, SharedStorage &storage) {
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
    const int lane = threadIdx % 32, warp = threadIdx / 32;
    auto &staged = storage.staged[warp];
    // The warp's first row (lane 0 holds it) and the tile's first column.
    const int firstRow = __shfl_sync(0xffffffffu, int(get<0>(coords(0))), 0);
    const int firstColumn = nCoord * 2 * kTileOutputs;
    const int64_t outFirst = firstColumn / 2;
    // wgmma's C fragment (PTX ISA, m64nNk16): lane l of a warp holds rows l/4 and
    // l/4 + 8 of the warp's 16, and in each 8-column group j the columns
    // 2 (l % 4) and 2 (l % 4) + 1: a gate and its up. Element 4j + 2h + v is
    // column group j, row half h, gate (v = 0) or up (v = 1). Written out
    // rather than taken from `coords` per element (that cost ~40 instructions of
    // index arithmetic, range checks and loads per output); the GPU tests
    // compare every output with the epilogue pass bit for bit.
    static_assert(kElements == 4 * (TileColumns / 8), "one (2, 2, N/8) fragment per thread");
    const int quadRow = lane / 4, quadColumn = lane % 4;
    const int columnsLeft = n - firstColumn; // of this tile, inside N
    CUTLASS_PRAGMA_UNROLL
    for (int pass = 0; pass < kPasses; ++pass) {
      // Column groups run outermost, so each pass is kPassGroups of them: 64
      // outputs.
      CUTLASS_PRAGMA_UNROLL
      for (int g = 0; g < kPassGroups; ++g) {
        const int columnGroup = pass * kPassGroups + g;
        const int column = 2 * quadColumn + 8 * columnGroup; // the gate's, in the tile
        if (column < columnsLeft) {
          // One bias pair for both rows; a quad's 4 pairs are 32 consecutive
          // bytes, the same for all 8 quads (a broadcast).
          float2 b;
          if constexpr (kBias)
            b = *reinterpret_cast<const float2 *>(tileBias + column);
          // Output quadColumn + 4g of the pass: chunk g / 2, element
          // quadColumn + 4 (g % 2); the staged row's chunk is swizzled by
          // row % 8, which is quadRow for both row halves.
          const int slot = ((g / 2) ^ quadRow) * 8 + quadColumn + 4 * (g % 2);
          CUTLASS_PRAGMA_UNROLL
          for (int half = 0; half < 2; ++half) {
            const int i = 4 * columnGroup + 2 * half;
            float gate = accumulators(i), up = accumulators(i + 1);
            if constexpr (kBias) {
              gate += b.x;
              up += b.y;
            }
            staged[quadRow + 8 * half][slot] = __float2bfloat16_rn(gated<kClamp>(gate, up));
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

/// The names the kernels' configurations use: the bf16 tiles' 256 weight
/// rows, the FP8 tiles' 128.
using GatedEpilogueArray = GatedEpilogueArrayOf<256>;
using GatedEpilogue = GatedEpilogueArray;
using GatedEpilogueFP8 = GatedEpilogueArrayOf<128>;

} // namespace moec::rt::cuda::detail::grouped

#endif // MOEC_RUNTIME_SRC_CUDA_GATEDEPILOGUECUTLASS_CUH
