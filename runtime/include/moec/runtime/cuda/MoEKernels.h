//===- MoEKernels.h - CUDA kernels for the lowered moe ops -----*- C++ -*-===//
//
// The device twins of cpu/MoEKernels.h, with the same semantics
// (docs/dialect.md): f32 storage and accumulation, row-major tensors (and, as a
// storage choice that changes no result, bf16 rows between the bf16-weight
// kernels: BF16 below). Every
// size that depends on the routing (the valid row count, the offsets) stays in
// device memory and is read by the kernels themselves, so the whole chain from
// route to combine runs without a host synchronisation and can be captured in a
// CUDA graph. f32 expert weights take a simple f32 grouped matmul (one thread
// per output); bf16 expert weights (--expert-weights=bf16) take the tensor-core
// kernel (GroupedMatmulBF16.cu), the fast path at every token count; MXFP4
// expert weights (--expert-weights=mxfp4, gpt-oss's checkpoints) the W4A16
// kernel (GroupedMatmulMXFP4.cu) on the same tiles.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_CUDA_MOEKERNELS_H
#define MOEC_RUNTIME_CUDA_MOEKERNELS_H

#include "moec/runtime/Status.h"
#include "moec/runtime/KernelParams.h"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace moec::rt::cuda {

/// One bf16 activation (its bits): rows between the bf16-weight kernels. Every
/// such kernel rounds its f32 rows to bf16 (nearest even) before multiplying,
/// so a producer that writes them rounded already (permute, the gate/up
/// epilogue) gives bit for bit the same result with half the bytes
/// (docs/design.md, "bf16 activations").
struct alignas(2) BF16 {
  uint16_t bits;
};

/// Reorders the gate/up rows of `experts` matrices of N rows of `rowBytes`
/// bytes, in place on `stream`, from concatenated (rows [0, N/2) gate, [N/2, N)
/// up) to interleaved (row 2j gate j, row 2j+1 up j): GateUpLayout::Interleaved,
/// whose pairs the prefill GEMM's fused activation reads. For weights (K bf16
/// per row) and their biases (one f32 per row) alike; run once, when a model is
/// created (the generated create() does, for bf16 expert weights).
Status interleaveGateUp(void *rows, int64_t experts, int64_t n, int64_t rowBytes,
                        cudaStream_t stream);

/// Device workspace moe.sort needs for `slots` slots (CUB's radix sort).
Status sortWorkspaceBytes(int64_t slots, size_t &bytes);

/// moe.linear: y[M, N'] = epilogue(x[M, K] · w[N, K]ᵀ + bias[N]) in f32 (the
/// router: its logits decide the routing, so they are not rounded); M is known
/// on the host (the token count), so no offsets are read.
Status linear(const float *x, int64_t m, int64_t k, const float *w, int64_t n, const float *bias,
              const Epilogue &epilogue, float *y, cudaStream_t stream);

/// i64 expert ids as i32 for sortByExpert; ids outside i32's range become -1
/// (a sentinel), as on the CPU.
Status narrowIds(const int64_t *ids, int64_t count, int32_t *out, cudaStream_t stream);

Status route(const float *logits, int64_t tokens, int64_t experts, const float *correctionBias,
             const Routing &routing, int32_t *ids, float *weights, cudaStream_t stream);

/// Stable: equal ids keep ascending slot order; invalid and non-local ids sort
/// last as the sentinel (docs/design.md). `workspace` holds
/// sortWorkspaceBytes(slots) bytes. `rowOfSlot` (nullable) receives the
/// inverse permutation, rowOfSlot[s] = the row of slot s or -1 for a sentinel,
/// which permute and combineRows take instead of inverting it again.
Status sortByExpert(const int32_t *ids, int64_t slots, int64_t numExperts, int64_t firstExpert,
                    int32_t *permutation, int32_t *offsets, int32_t *numValid, int32_t *rowOfSlot,
                    void *workspace, size_t workspaceBytes, cudaStream_t stream);

/// Row r of `rows` = hidden row permutation[r] / topK, for r < *numValid (read
/// on the device). `rowOfSlot`: sortByExpert's inverse, or null (then, where a
/// token-major pass pays, permute inverts the permutation itself).
Status permute(const float *hidden, int64_t hiddenSize, const int32_t *permutation,
               const int32_t *numValid, const int32_t *rowOfSlot, int64_t slots, int64_t topK,
               float *rows, cudaStream_t stream);
/// The same rows rounded to bf16, for a bf16-weight grouped matmul.
Status permute(const float *hidden, int64_t hiddenSize, const int32_t *permutation,
               const int32_t *numValid, const int32_t *rowOfSlot, int64_t slots, int64_t topK,
               BF16 *rows, cudaStream_t stream);

/// Rows at or past offsets[E-1] (read on the device) are not touched.
Status groupedMatmul(const float *lhs, int64_t slots, int64_t k, const float *weights,
                     int64_t experts, int64_t n, const int32_t *offsets, const float *bias,
                     const Epilogue &epilogue, float *out, cudaStream_t stream);

/// moe.grouped_matmul with bf16 weights [E, N, K] on the tensor cores (bf16
/// products, f32 accumulation; the f32 rows are rounded to bf16 as they are
/// multiplied), any number of rows per expert. Each block streams one 128-row
/// slice of one expert's weights for up to TOK of its rows; blocks of experts
/// with no rows exit before reading their weights. Rows at or past offsets[E-1]
/// are not touched. K must be a multiple of 8; weights and rows 16-byte aligned.
///
/// Rows (Lhs) and results (Out) are f32 (`float`) or bf16 (BF16): bf16 rows are
/// what f32 rows would be rounded to, bf16 results are rounded to nearest even
/// after bias and epilogue.
template <typename Lhs, typename Out>
Status groupedMatmulBF16(const Lhs *lhs, int64_t slots, int64_t k, const uint16_t *weightsBF16,
                         int64_t experts, int64_t n, const int32_t *offsets, const float *bias,
                         const Epilogue &epilogue, Out *out, cudaStream_t stream);
/// groupedMatmulBF16 whose offsets were written at least two launches before it
/// on `stream` (by the sort, with a permute or a grouped matmul between): its
/// mma.sync tiles request their first stages' weights while the launch before
/// still runs (a programmatic dependent launch, DependentLaunch.cuh), and wait
/// only before reading rows. The codegen calls it for a projection whose rows
/// come from the permute of the same sort, or from a grouped matmul on the same
/// offsets.
template <typename Lhs, typename Out>
Status groupedMatmulBF16SettledOffsets(const Lhs *lhs, int64_t slots, int64_t k,
                                       const uint16_t *weightsBF16, int64_t experts, int64_t n,
                                       const int32_t *offsets, const float *bias,
                                       const Epilogue &epilogue, Out *out, cudaStream_t stream);

/// Re-lays out `bytes` bytes of packed MXFP4 codes (moec/runtime/MXFP4.h's
/// order; whole 4-byte-aligned words) in place on `stream` into the order the
/// GPU's MXFP4 kernels read (runtime/src/cuda/MXFP4Layout.cuh: each 32-bit
/// word of 8 codes permuted and XORed within itself, zero words staying zero).
/// Run once per weight, when a model is created (the generated create() does);
/// the CPU runtime and weights.bin keep the stored order.
Status relayoutMXFP4(uint8_t *codes, int64_t bytes, cudaStream_t stream);

/// moe.grouped_matmul with MXFP4 weights (moec/runtime/MXFP4.h): packed e2m1
/// codes [E, N] rows of ceil(K/32) blocks of 16 bytes, in the GPU's order
/// (relayoutMXFP4), and e8m0 scale bytes [E, N, ceil(K/32)], dequantised in
/// registers to bf16 (exactly) and multiplied on the bf16 tensor cores with
/// f32 accumulation (at many rows per expert: dequantised into bf16 scratch a
/// chunk of experts at a time and multiplied by the bf16 kernel's CUTLASS
/// GEMM); otherwise the contract of groupedMatmulBF16 (rows f32 or bf16,
/// rounded to bf16 as they are multiplied; results f32 or bf16; gated
/// epilogues in either layout; rows at or past offsets[E-1] not touched). K a
/// multiple of 8; weights and rows 16-byte aligned, scales 4-byte aligned.
template <typename Lhs, typename Out>
Status groupedMatmulMXFP4(const Lhs *lhs, int64_t slots, int64_t k, const uint8_t *weights,
                          const uint8_t *scales, int64_t experts, int64_t n,
                          const int32_t *offsets, const float *bias, const Epilogue &epilogue,
                          Out *out, cudaStream_t stream);
/// groupedMatmulMXFP4 with settled offsets (groupedMatmulBF16SettledOffsets):
/// its tiles request their first stages' weights and scales before the wait.
template <typename Lhs, typename Out>
Status groupedMatmulMXFP4SettledOffsets(const Lhs *lhs, int64_t slots, int64_t k,
                                        const uint8_t *weights, const uint8_t *scales,
                                        int64_t experts, int64_t n, const int32_t *offsets,
                                        const float *bias, const Epilogue &epilogue, Out *out,
                                        cudaStream_t stream);

/// moe.linear with a bf16 weight [N, K] (dense projections of bf16 models,
/// shared experts): up to 64 rows a decode kernel that splits K over blocks
/// (a row's result has the same bits for any row count up to 64), above the
/// tensor-core kernel above with one expert and all m rows. K a multiple of 8.
template <typename Lhs, typename Out>
Status linearBF16(const Lhs *x, int64_t m, int64_t k, const uint16_t *weightBF16, int64_t n,
                  const float *bias, const Epilogue &epilogue, Out *y, cudaStream_t stream);

/// moe.multi_linear with bf16 weights: `count` (1-4) projections of the same
/// rows, ys[s][M, n[s]] = x · weightsBF16[s]ᵀ + biases[s] (biases null: none),
/// up to 64 rows in one launch (K split by the siblings' plan; a row's bits
/// do not depend on the row count).
template <typename Lhs, typename Out>
Status linearBF16Siblings(const Lhs *x, int64_t m, int64_t k, int count,
                          const uint16_t *const *weightsBF16, const int64_t *n,
                          const float *const *biases, Out *const *ys, cudaStream_t stream);

/// moe.quantize on the device: per row and 128-column group, scale =
/// f32(max(amax / 448, 1e-12)) and q = e4m3(x / scale) (nearest even,
/// saturating), as cpu::quantizeE4M3. Rows at or past *validRows (read on the
/// device; null: all `slots`) are not read.
Status quantizeE4M3(const float *x, int64_t slots, int64_t k, const int32_t *validRows,
                    uint8_t *q, float *scales, cudaStream_t stream);

/// moe.permute and moe.quantize in one pass (the f32 permuted rows are never
/// written): row r of the result quantises hidden row permutation[r] / topK,
/// for r < *numValid (read on the device).
/// `rowOfSlot` as for permute.
Status permuteQuantizeE4M3(const float *hidden, int64_t hiddenSize, const int32_t *permutation,
                           const int32_t *numValid, const int32_t *rowOfSlot, int64_t slots,
                           int64_t topK, uint8_t *q, float *scales, cudaStream_t stream);

/// moe.grouped_matmul with FP8 operands on the tensor cores (mma e4m3, f32
/// accumulation): rows e4m3 [S, K] with scales [S, ceil(K/128)], weights e4m3
/// [E, N, K] with 128x128 block scales [E, ceil(N/128), ceil(K/128)], each K
/// block's partial sums promoted with both scales. K a multiple of 4 (16 is
/// faster); rows at or past offsets[E-1] are not touched. Results (Out) f32
/// (`float`) or bf16 (BF16, --expert-outputs=bf16: the f32 results rounded to
/// nearest even by the tiles' own stores, CUTLASS's epilogue on QGMMA).
template <typename Out>
Status groupedMatmulFP8(const uint8_t *lhs, int64_t slots, const float *lhsScales, int64_t k,
                        const uint8_t *weights, const float *weightScales, int64_t experts,
                        int64_t n, const int32_t *offsets, const float *bias,
                        const Epilogue &epilogue, Out *out, cudaStream_t stream);

/// groupedMatmulFP8 with settled offsets, as groupedMatmulBF16SettledOffsets:
/// its mma.sync tiles request their first stages' weights before the wait.
template <typename Out>
Status groupedMatmulFP8SettledOffsets(const uint8_t *lhs, int64_t slots, const float *lhsScales,
                                      int64_t k, const uint8_t *weights, const float *weightScales,
                                      int64_t experts, int64_t n, const int32_t *offsets,
                                      const float *bias, const Epilogue &epilogue, Out *out,
                                      cudaStream_t stream);

/// groupedMatmulFP8 followed by quantizeE4M3 of its result: q [slots, N'] e4m3
/// codes, scales [slots, ceil(N'/128)], rows at or past offsets[E-1]
/// untouched. The codes and scales are those of the f32 result, bit for bit
/// (on the CUTLASS tiles an f32 product that a pass finishes and quantises: a
/// bf16 product, half the bytes, would flip a few per cent of the codes and
/// take a block past issue 34's bound against the emulated recipe). The
/// mma.sync tiles' f32 result goes to `scratch` when it holds slots·N' floats (`scratchFloats`;
/// the generated code plans decode's in its workspace), else to stream-ordered
/// scratch, whose allocation and free in a captured graph keep the kernels on
/// either side from launching under their predecessors (as in-graph kernel
/// timelines show), which planned scratch avoids.
Status groupedMatmulFP8Quantized(const uint8_t *lhs, int64_t slots, const float *lhsScales,
                                 int64_t k, const uint8_t *weights, const float *weightScales,
                                 int64_t experts, int64_t n, const int32_t *offsets,
                                 const float *bias, const Epilogue &epilogue, uint8_t *q,
                                 float *scales, float *scratch, int64_t scratchFloats,
                                 cudaStream_t stream);
/// groupedMatmulFP8Quantized with settled offsets (groupedMatmulFP8SettledOffsets).
Status groupedMatmulFP8QuantizedSettledOffsets(const uint8_t *lhs, int64_t slots,
                                               const float *lhsScales, int64_t k,
                                               const uint8_t *weights, const float *weightScales,
                                               int64_t experts, int64_t n, const int32_t *offsets,
                                               const float *bias, const Epilogue &epilogue,
                                               uint8_t *q, float *scales, float *scratch,
                                               int64_t scratchFloats, cudaStream_t stream);

/// `rowOfSlot` is a workspace of `slots` int32 (the inverse permutation).
/// The expert rows (Row) are f32 (`float`), or bf16 (BF16; --expert-outputs=bf16:
/// the down projection's results rounded to bf16, half the bytes to read); the
/// weighted sum is f32 either way.
template <typename Row>
Status combine(const Row *rows, const int32_t *permutation, int64_t slots, int64_t hiddenSize,
               const float *weights, int64_t tokens, int64_t topK, const int32_t *numValid,
               const float *addend, const float *addendGate, int32_t *rowOfSlot, float *out,
               cudaStream_t stream);
/// combine given sortByExpert's inverse permutation (tokens * topK entries).
template <typename Row>
Status combineRows(const Row *rows, const int32_t *rowOfSlot, int64_t hiddenSize,
                   const float *weights, int64_t tokens, int64_t topK, const float *addend,
                   const float *addendGate, float *out, cudaStream_t stream);

} // namespace moec::rt::cuda

#endif // MOEC_RUNTIME_CUDA_MOEKERNELS_H
