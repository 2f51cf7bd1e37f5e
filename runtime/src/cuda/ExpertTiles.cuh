//===- ExpertTiles.cuh - the tiling of moec's tensor-core grouped matmuls ===//
//
// What the bf16 (GroupedMatmulBF16.cu) and FP8 (GroupedMatmulFP8.cu) grouped
// matmuls share: a block of W warps computes 32·W weight rows (the MMA's M side,
// "swap AB"; W = 4, or 2 for some decode grids) by up to TOK rows of one
// expert (its N side); the grid is sized on the host for the worst case and
// each block ranks the experts' row tiles from the offsets on the device (no
// host synchronisation); gate and up rows are interleaved per warp so that the
// epilogue runs in registers. Also the PTX wrappers both use.
//
//===----------------------------------------------------------------------===//
#ifndef MOEC_RUNTIME_SRC_CUDA_EXPERTTILES_CUH
#define MOEC_RUNTIME_SRC_CUDA_EXPERTTILES_CUH

#include "DependentLaunch.cuh"
#include "Epilogue.cuh"
#include "moec/runtime/Cuda.h"
#include "moec/runtime/Status.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>

namespace moec::rt::cuda::tiles {

using cpu::GateUpLayout;

/// A warp computes 32 weight rows (two m16 tiles); a block, WARPS warps' rows.
constexpr int kRowsPerWarp = 32;
/// The usual block: 4 warps, 128 weight rows. The bf16 8-row tile also comes
/// with 2 warps (64 weight rows), where 4-warp blocks would end on a thin tail
/// wave (1-warp blocks measured slower everywhere).
constexpr int kWarps = 4;
template <int WARPS> constexpr int threadsOf = 32 * WARPS;
template <int WARPS> constexpr int weightRowsOf = kRowsPerWarp *WARPS;
constexpr int kThreads = threadsOf<kWarps>;
constexpr int kWeightRows = weightRowsOf<kWarps>;
/// Row tiles of one group run side by side over the column tiles, so that at
/// prefill the concurrently resident blocks share activation rows and weight
/// tiles in L2 (at decode a group is a handful of experts: no effect).
constexpr int64_t kRowTileGroup = 8;

/// The shape of one grouped matmul, as the tiling sees it.
struct Layout {
  int64_t k, experts, n, width;
  const int32_t *offsets; // null: one expert whose rows are all `rows` (moe.linear)
  int64_t rows;
  const float *bias;
  cpu::Epilogue epilogue;
  int64_t rowTiles, columnTiles; // the grid: rowTiles x columnTiles
  float *out;                    // f32 results, or
  uint16_t *outBF16 = nullptr;   // bf16 results (bits), rounded to nearest even
  /// The offsets were written at least two launches before this one on the
  /// stream, so a dependent launch may read them, and stream the weights they
  /// select, before its predecessor completes (runPipelinePrefetched).
  bool settledOffsets = false;

  __host__ __device__ bool gated() const {
    return epilogue.enabled && epilogue.layout != GateUpLayout::None;
  }
};

//===--- PTX -----------------------------------------------------------===//

/// 16 bytes global -> shared, asynchronously; `bytes` < 16 zero-fills the rest
/// (0: reads nothing). `global` must be 16-byte aligned.
__device__ inline void copyAsync16(void *shared, const void *global, int bytes) {
  unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(shared));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(global),
               "r"(bytes));
}
/// 4 bytes global -> shared (4-byte aligned), zero-filled when !valid.
__device__ inline void copyAsync4(void *shared, const void *global, bool valid) {
  unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(shared));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(global),
               "r"(valid ? 4 : 0));
}
__device__ inline void commitGroup() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ inline void waitGroup() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}
__device__ inline void loadMatrixX4(unsigned (&r)[4], const void *shared) {
  unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(shared));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

/// The bf16 MMA: c += a (16x16, row) · b (16x8, column), f32 accumulators.
__device__ inline void mma16816(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
               "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/// Two f32 as a bf16x2 (nearest even), `lo` in the low half.
__device__ inline unsigned packBF16(float lo, float hi) {
  __nv_bfloat162 pair = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<unsigned *>(&pair);
}

/// Byte offset of 16-byte chunk `chunk` of row `row` of a 128-byte-row weight
/// tile, XOR-swizzled by row so that ldmatrix reads are conflict-free.
__device__ inline int swizzled(int row, int chunk) { return row * 128 + ((chunk ^ (row & 7)) << 4); }

//===--- tiles ---------------------------------------------------------===//

/// This block's (row tile, column tile): groups of kRowTileGroup row tiles.
__device__ inline void blockTiles(const Layout &p, int64_t &rowTile, int64_t &columnTile) {
  int64_t linear = blockIdx.x;
  int64_t perGroup = kRowTileGroup * p.columnTiles;
  int64_t group = linear / perGroup, inGroup = linear % perGroup;
  int64_t groupRows = p.rowTiles - group * kRowTileGroup;
  if (groupRows > kRowTileGroup)
    groupRows = kRowTileGroup;
  rowTile = group * kRowTileGroup + inGroup % groupRows;
  columnTile = inGroup / groupRows;
}

/// The start of a tile kernel: the dependent launch's wait (before the
/// offsets are read, unless they are settled: then the kernel waits in its
/// pipeline), this block's column tile, and its row tile's expert, first row
/// and row count. False: the block has no row tile (the grid is sized for the
/// worst case) and exits.
template <int TOK, int WARPS = kWarps>
__device__ bool startTile(const Layout &p, int64_t &columnTile, int64_t &expert, int64_t &firstRow,
                          int &rows);

/// Ranks the experts' row tiles (ceil(rows / TOK) each) with a block-wide scan
/// and finds `rowTile`: its expert, first row and row count. False past the
/// last tile (the grid is sized for the worst case). Call from every thread.
template <int TOK, int WARPS = kWarps>
__device__ bool findRowTile(const Layout &p, int64_t rowTile, int64_t &expert, int64_t &firstRow,
                            int &rows) {
  constexpr int kBlockThreads = threadsOf<WARPS>;
  __shared__ int64_t found[3]; // expert, first row, row count
  __shared__ int64_t warpTotals[WARPS];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  if (tid == 0)
    found[0] = -1;
  int64_t before = 0;
  for (int64_t chunk = 0; chunk < p.experts; chunk += kBlockThreads) {
    int64_t e = chunk + tid;
    int64_t begin = 0, count = 0;
    if (e < p.experts && p.offsets) {
      begin = e > 0 ? p.offsets[e - 1] : 0;
      count = p.offsets[e] - begin;
    } else if (e == 0) {
      count = p.rows;
    }
    int64_t tiles = (count + TOK - 1) / TOK, inclusive = tiles;
#pragma unroll
    for (int d = 1; d < 32; d *= 2) {
      int64_t other = __shfl_up_sync(0xffffffffu, inclusive, d);
      if (lane >= d)
        inclusive += other;
    }
    if (lane == 31)
      warpTotals[warp] = inclusive;
    __syncthreads();
    int64_t offset = before;
    for (int w = 0; w < warp; ++w)
      offset += warpTotals[w];
    int64_t first = offset + inclusive - tiles;
    if (tiles > 0 && rowTile >= first && rowTile < first + tiles) {
      int64_t local = rowTile - first;
      found[0] = e;
      found[1] = begin + local * TOK;
      found[2] = count - local * TOK < TOK ? count - local * TOK : TOK;
    }
    for (int w = 0; w < WARPS; ++w)
      before += warpTotals[w];
    __syncthreads();
    if (found[0] >= 0 || before > rowTile)
      break;
  }
  expert = found[0];
  firstRow = found[1];
  rows = static_cast<int>(found[2]);
  return expert >= 0;
}

template <int TOK, int WARPS>
__device__ bool startTile(const Layout &p, int64_t &columnTile, int64_t &expert, int64_t &firstRow,
                          int &rows) {
  if (!p.settledOffsets)
    device::awaitPrerequisites();
  int64_t rowTile;
  blockTiles(p, rowTile, columnTile);
  return findRowTile<TOK, WARPS>(p, rowTile, expert, firstRow, rows);
}

/// The weight row that tile row `v` of column tile `columnTile` reads, or -1:
/// rows v of warp w are its 32 output columns, or (gated) 16 columns' gate
/// rows (v % 32 < 16) and the same columns' up rows.
template <int WARPS = kWarps>
__device__ inline int64_t weightRowOf(const Layout &p, int64_t columnTile, int v) {
  constexpr int kBlockRows = weightRowsOf<WARPS>;
  int warp = v / kRowsPerWarp, half = (v / 16) % 2, r = v % 16;
  if (!p.gated()) {
    int64_t j = columnTile * kBlockRows + v;
    return j < p.n ? j : -1;
  }
  int64_t j = columnTile * (kBlockRows / 2) + warp * 16 + r; // the output column
  if (j >= p.width)
    return -1;
  bool interleaved = p.epilogue.layout == GateUpLayout::Interleaved;
  if (half == 0)
    return interleaved ? 2 * j : j;
  return interleaved ? 2 * j + 1 : p.width + j;
}

/// Bias, epilogue and store of the accumulators: acc[half][t][i] is m-tile
/// `half`, token tile t, mma accumulator i (weight row lane/4 + 8·(i >= 2),
/// token 8t + 2·(lane%4) + (i & 1)). `warp`: the warp's place among the
/// block's WARPS row warps (-1: its index in the block).
template <int TOKEN_TILES, int WARPS = kWarps>
__device__ void storeOutputs(const Layout &p, int64_t expert, int64_t columnTile, int64_t firstRow,
                             int rows, const float (&acc)[2][TOKEN_TILES][4], int warp = -1) {
  constexpr int kBlockRows = weightRowsOf<WARPS>;
  const int lane = threadIdx.x % 32;
  if (warp < 0)
    warp = threadIdx.x / 32;
  const float *expertBias = p.bias ? p.bias + expert * p.n : nullptr;
  const bool gated = p.gated();
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    int r = lane / 4 + (i >= 2 ? 8 : 0);
    int v0 = warp * kRowsPerWarp + r, v1 = v0 + 16;
    int64_t row0 = weightRowOf<WARPS>(p, columnTile, v0);
    int64_t row1 = weightRowOf<WARPS>(p, columnTile, v1);
    float bias0 = expertBias && row0 >= 0 ? expertBias[row0] : 0.0f;
    float bias1 = expertBias && row1 >= 0 ? expertBias[row1] : 0.0f;
#pragma unroll
    for (int t = 0; t < TOKEN_TILES; ++t) {
      int token = t * 8 + 2 * (lane % 4) + (i & 1);
      if (token >= rows)
        continue;
      int64_t rowStart = (firstRow + token) * p.width;
      auto store = [&](int64_t column, float value) {
        if (p.outBF16)
          p.outBF16[rowStart + column] = __bfloat16_as_ushort(__float2bfloat16_rn(value));
        else
          p.out[rowStart + column] = value;
      };
      if (gated) {
        if (row0 < 0)
          continue;
        int64_t column = columnTile * (kBlockRows / 2) + warp * 16 + r;
        store(column,
              device::gatedEpilogue(p.epilogue, acc[0][t][i] + bias0, acc[1][t][i] + bias1));
        continue;
      }
      float values[2] = {acc[0][t][i] + bias0, acc[1][t][i] + bias1};
      int64_t rowsOf[2] = {row0, row1};
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        if (rowsOf[h] < 0)
          continue;
        float value = values[h];
        if (p.epilogue.enabled)
          value = device::activate(p.epilogue.kind, p.epilogue.alpha, value);
        store(rowsOf[h], value);
      }
    }
  }
}

/// The tile row of the i-th weight chunk this thread loads each stage (chunk
/// tid % 8 of it): 8 threads cover a row, a block threads / 8 rows at a time,
/// so any block size takes 8 passes over its 32·WARPS rows.
template <int WARPS = kWarps> __device__ inline int weightTileRowOfThread(int i) {
  return threadIdx.x / 8 + threadsOf<WARPS> / 8 * i;
}

/// The weight rows whose 16-byte chunk `tid % 8` this thread loads each stage:
/// tile rows weightTileRowOfThread(i) of the expert's weights (null past N).
template <int WARPS = kWarps, typename T>
__device__ inline void weightRowsOfThread(const Layout &p, int64_t columnTile,
                                          const T *expertWeights, const T *(&rows)[8]) {
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    int64_t row = weightRowOf<WARPS>(p, columnTile, weightTileRowOfThread<WARPS>(i));
    rows[i] = row >= 0 ? expertWeights + row * p.k : nullptr;
  }
}

/// The cp.async pipeline's steady state, once its prologue has committed the
/// first STAGES - 1 stages: each step waits for stage kt, refills the stage
/// consumed the step before, and computes on stage kt.
template <int STAGES, typename Load, typename Compute>
__device__ inline void pipelineSteps(int64_t tiles, Load &&load, Compute &&compute) {
  for (int64_t kt = 0; kt < tiles; ++kt) {
    waitGroup<STAGES - 2>();
    __syncthreads();
    // Refill the stage consumed last iteration before computing on this one.
    int64_t next = kt + STAGES - 1;
    if (next < tiles)
      load(next, static_cast<int>(next % STAGES));
    commitGroup();
    compute(kt, static_cast<int>(kt % STAGES));
  }
  waitGroup<0>();
}

/// The cp.async pipeline over `tiles` K tiles: STAGES - 1 in flight ahead of the
/// one computed. load(kt, stage) issues tile kt's copies into `stage`;
/// compute(kt, stage) consumes it once it has arrived.
template <int STAGES, typename Load, typename Compute>
__device__ inline void runPipeline(int64_t tiles, Load &&load, Compute &&compute) {
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < tiles)
      load(int64_t(s), s);
    commitGroup();
  }
  pipelineSteps<STAGES>(tiles, load, compute);
}

/// runPipeline for a dependent launch whose weights are constants and whose
/// rows its predecessor writes: the first STAGES - 1 stages' weights are
/// requested before ready() (awaitPrerequisites), their rows after it. The
/// prologue's weights are one more commit group (group 0; stage s's rows are
/// group s + 1), so waitGroup<STAGES - 2> at step kt still finds groups 0 to
/// kt + 1, stage kt's weights and rows, complete.
template <int STAGES, typename LoadWeights, typename LoadRows, typename Ready, typename Compute>
__device__ inline void runPipelinePrefetched(int64_t tiles, LoadWeights &&loadWeights,
                                             LoadRows &&loadRows, Ready &&ready,
                                             Compute &&compute) {
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s)
    if (s < tiles)
      loadWeights(int64_t(s), s);
  commitGroup();
  ready();
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < tiles)
      loadRows(int64_t(s), s);
    commitGroup();
  }
  pipelineSteps<STAGES>(
      tiles,
      [&](int64_t kt, int stage) {
        loadWeights(kt, stage);
        loadRows(kt, stage);
      },
      compute);
}

/// The pipeline of a tile kernel launched by launchTiles. With settled offsets
/// the first stages' weights are requested before awaitPrerequisites()
/// (runPipelinePrefetched); otherwise the kernel waited before it read the
/// offsets, and each stage loads its weights and rows together.
template <int STAGES, typename LoadWeights, typename LoadRows, typename Compute>
__device__ inline void runTilePipeline(const Layout &p, int64_t tiles, LoadWeights &&loadWeights,
                                       LoadRows &&loadRows, Compute &&compute) {
  if (p.settledOffsets) {
    runPipelinePrefetched<STAGES>(
        tiles, loadWeights, loadRows, [] { device::awaitPrerequisites(); }, compute);
    return;
  }
  runPipeline<STAGES>(
      tiles,
      [&](int64_t kt, int stage) {
        loadWeights(kt, stage);
        loadRows(kt, stage);
      },
      compute);
}

/// The layout of a grouped matmul of `slots` rows into `out` (f32, or bf16 bits
/// when Out is BF16), after the checks every tile kernel makes (`kernel` names
/// it): a gated N even, offsets unless one expert. `empty`: no rows or no
/// experts, nothing to launch. Without offsets (moe.linear) the weights a
/// block streams depend on nothing a predecessor writes: settled.
template <typename Out>
Status planLayout(const char *kernel, int64_t slots, int64_t k, int64_t experts, int64_t n,
                  const int32_t *offsets, const float *bias, const cpu::Epilogue &epilogue,
                  Out *out, bool settledOffsets, Layout &layout, bool &empty) {
  bool gated = epilogue.enabled && epilogue.layout != GateUpLayout::None;
  if (gated && n % 2 != 0)
    return Status::error(std::string(kernel) + ": gated N = " + std::to_string(n) + " is odd");
  empty = slots <= 0 || experts <= 0;
  if (empty)
    return Status::ok();
  if (!offsets && experts != 1)
    return Status::error(std::string(kernel) + ": no offsets, but " + std::to_string(experts) +
                         " experts");
  float *outF32 = nullptr;
  uint16_t *outBF16 = nullptr;
  if constexpr (std::is_same_v<Out, float>)
    outF32 = out;
  else
    outBF16 = reinterpret_cast<uint16_t *>(out);
  layout = {k, experts, n, gated ? n / 2 : n, offsets, slots, bias, epilogue, 0, 0, outF32, outBF16};
  layout.settledOffsets = settledOffsets || !offsets;
  return Status::ok();
}

/// Sizes the grid for `slots` rows in tiles of `tok`: the column tiles, and the
/// row tiles that sum over experts of ceil(rows_e / tok) can reach, which is at
/// most slots / tok plus one partial tile per expert with rows.
inline Status planGrid(Layout &p, int64_t slots, int tok, int warps, const char *kernel,
                       int64_t &blocks) {
  int64_t weightRows = int64_t(kRowsPerWarp) * warps;
  int64_t columnsPerTile = p.gated() ? weightRows / 2 : weightRows;
  p.columnTiles = (p.width + columnsPerTile - 1) / columnsPerTile;
  p.rowTiles = (slots + tok - 1) / tok + std::min(p.experts, slots);
  blocks = p.rowTiles * p.columnTiles;
  if (blocks > INT32_MAX)
    return Status::error(std::string(kernel) + ": " + std::to_string(blocks) +
                         " blocks exceed the grid's limit");
  return Status::ok();
}

/// Plans the grid of `problem.layout` for blocks of `warps` row warps and
/// tiles of `tok` rows, and launches `kernel` with `shared` bytes of dynamic
/// shared memory and `warps` · `kSplit` warps a block (kSplit > 1: warps that
/// share rows and split K).
template <typename Problem>
Status launchTiles(void (*kernel)(Problem), Problem problem, int64_t slots, int tok, int shared,
                   const char *name, cudaStream_t stream, int warps = kWarps, int kSplit = 1) {
  int64_t blocks = 0;
  MOEC_RETURN_IF_ERROR(planGrid(problem.layout, slots, tok, warps, name, blocks));
  MOEC_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, shared));
  return detail::launchDependent(kernel, dim3(static_cast<unsigned>(blocks)),
                                 dim3(threadsOf<1> * warps * kSplit), shared, stream, problem);
}

} // namespace moec::rt::cuda::tiles

#endif // MOEC_RUNTIME_SRC_CUDA_EXPERTTILES_CUH
