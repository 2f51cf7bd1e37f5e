//===- GroupedMatmulCutlass.h - prefill grouped matmul on wgmma -*- C++ -*-===//
//
// Internal to the CUDA runtime: groupedMatmulBF16 and groupedMatmulFP8
// (MoEKernels.h) hand their prefill shapes here when the runtime was built with
// CUTLASS (MOEC_HAVE_CUTLASS). Same contracts as those.
//
//===----------------------------------------------------------------------===//
#ifndef MOEC_RUNTIME_SRC_CUDA_GROUPEDMATMULCUTLASS_H
#define MOEC_RUNTIME_SRC_CUDA_GROUPEDMATMULCUTLASS_H

#include "moec/runtime/KernelParams.h"
#include "moec/runtime/Status.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>

namespace moec::rt::cuda {
enum class BF16Tile; // Tuning.h
struct BF16;         // moec/runtime/cuda/MoEKernels.h
} // namespace moec::rt::cuda

namespace moec::rt::cuda::detail {

/// Whether the kernel takes K and N (16-byte rows of bf16 operands and f32 output).
bool groupedMatmulCutlassSupports(int64_t k, int64_t n);

/// The bf16 CUTLASS configurations (tile rows x weight rows, schedule, and for
/// the cooperative tiles the cluster: none by default, 2x1 with two row tiles
/// sharing a weight tile, 1x2 with two weight tiles sharing a row tile; 64x256
/// pingpong tiles, one per warp group, no clusters).
enum class CutlassTile {
  Pingpong128x128,
  Cooperative128x256,
  Cooperative128x256Cluster21,
  Cooperative128x256Cluster12,
  Pingpong64x256
};

/// The configuration that runs `tile`, one of the wgmma tiles of
/// groupedMatmulBF16 (Tuning.h); Cooperative128x256 for any other.
CutlassTile cutlassTileOf(BF16Tile tile);

/// bf16 weights that another format's experts are made into on the stream, a
/// chunk of experts at a time, instead of read from `weights` (the MXFP4
/// experts: GroupedMatmulMXFP4Wide.cu): `make(first, last, to)` writes the
/// weights [last - first, N, K] of experts [first, last) to `to` on the
/// stream; the GEMM then runs on those experts' rows (the others take none)
/// before the next chunk overwrites them. Scratch holds `chunkExperts`
/// experts' weights.
struct ChunkedWeights {
  int64_t chunkExperts;
  std::function<Status(int64_t first, int64_t last, uint16_t *to)> make;
};

/// f32 or bf16 rows as groupedMatmulCutlass's pair of pointers, one of them null.
struct CutlassRows {
  const float *f32 = nullptr;
  const uint16_t *bf16 = nullptr;
  explicit CutlassRows(const float *rows) : f32(rows) {}
  explicit CutlassRows(const BF16 *rows) : bf16(reinterpret_cast<const uint16_t *>(rows)) {}
};

/// Rows in f32 (`lhs`, rounded here) or bf16 (`lhsBF16`), results out in f32
/// (`out`) or bf16 (`outBF16`): one of each pair is null. With `chunked`,
/// `weights` is unused.
Status groupedMatmulCutlass(const float *lhs, const uint16_t *lhsBF16, int64_t rows, int64_t k,
                            const uint16_t *weights, int64_t experts, int64_t n,
                            const int32_t *offsets, const float *bias,
                            const cpu::Epilogue &epilogue, float *out, uint16_t *outBF16,
                            CutlassTile tile, cudaStream_t stream,
                            const ChunkedWeights *chunked = nullptr);

/// Whether the FP8 kernel takes K and N (16-byte rows of e4m3 operands, f32 output).
bool groupedMatmulFP8CutlassSupports(int64_t k, int64_t n);

/// The FP8 CUTLASS configurations (GroupedMatmulFP8Cutlass.cu).
enum class FP8CutlassTile { Cooperative128x128, Pingpong64x128 };

/// groupedMatmulFP8 (MoEKernels.h) on wgmma: e4m3 rows with their row scales,
/// e4m3 weights with their 128x128 block scales, per-expert offsets required.
/// Results in f32 (`out`) or bf16 (`outBF16`), or with `outCodes` (and
/// `outScales`) quantised instead (groupedMatmulFP8Quantized): one of the
/// three is given. `fused`: CUTLASS's epilogue writes what it can itself
/// (FP8Epilogue::Fused, Tuning.h); else an f32 product and the epilogue pass
/// unless there is nothing to apply.
Status groupedMatmulFP8Cutlass(const uint8_t *lhs, const float *lhsScales, int64_t rows, int64_t k,
                               const uint8_t *weights, const float *weightScales, int64_t experts,
                               int64_t n, const int32_t *offsets, const float *bias,
                               const cpu::Epilogue &epilogue, float *out, uint16_t *outBF16,
                               uint8_t *outCodes, float *outScales, FP8CutlassTile tile,
                               bool fused, cudaStream_t stream);

} // namespace moec::rt::cuda::detail

#endif // MOEC_RUNTIME_SRC_CUDA_GROUPEDMATMULCUTLASS_H
