//===- GroupedMatmulMXFP4Wide.cu - MXFP4 experts dequantised, then wgmma --===//
//
// groupedMatmulMXFP4 at many rows per expert (prefill, the DequantWgmma tile):
// the mma.sync tiles dequantise every weight again for each tile of rows and
// are bound by instruction issue there (docs/performance.md, "MXFP4 experts"),
// so here the experts' codes and scales are dequantised once into bf16
// weights in stream-ordered scratch (a pass that reads 17/32 of a byte a
// weight and writes 2), and the bf16 kernel's CUTLASS grouped GEMM
// (GroupedMatmulCutlass.cu) multiplies them, with everything it does for bf16
// weights: f32 rows rounded, bias and gate/up activation in its epilogue or a
// pass, bf16 results, rows past the last expert's end untouched.
//
// The offsets stay on the device (no host synchronisation), so the host does
// not know which experts have rows: it takes all of them in chunks of as many
// experts as the scratch holds (1 GiB: four chunks for gpt-oss-120b's
// gate/up), each chunk dequantised and then multiplied, the GEMM giving the
// other experts no rows. The dequantisation reads the offsets and skips the
// experts that have none.
//
// The codes are in the GPU's layout (MXFP4Layout.cuh: relayoutMXFP4 ran when
// the model was created) and decoded as the register tiles decode them. The
// bf16 weights are exact, as the register kernel's: code · 2^(s - 127)
// has at most two significant bits and an exponent in f32's (and so bf16's)
// range, subnormals included (down to 0.5 · 2^-127), except from 2^128 on
// (scale bytes 253 and 254 with the larger codes), which becomes ±inf; the
// scale byte 0xFF is NaN and makes its block NaN, zero codes included.
//
//===----------------------------------------------------------------------===//

#include "GroupedMatmulMXFP4Wide.h"
#include "GroupedMatmulCutlass.h"
#include "MXFP4Layout.cuh"
#include "Tuning.h"
#include "moec/runtime/Cuda.h"
#include "moec/runtime/MXFP4.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <string>

namespace moec::rt::cuda {
namespace {

constexpr int64_t kDefaultScratchBytes = int64_t(1) << 30;
int64_t scratchBytes = kDefaultScratchBytes;

#ifdef MOEC_HAVE_CUTLASS
constexpr int kThreads = 256;
constexpr int kWordsPerThread = 8; // 32-bit words of 8 codes; loads in flight
constexpr int kWordsPerBlock = kThreads * kWordsPerThread;

/// The 8 codes of `word` (a code word in the GPU's layout, MXFP4Layout.cuh) in
/// bf16, in column order, times scale byte `s`, as the register tiles decode
/// them: decodeMXFP4Word gives each pair of columns as code · 2^-126, and one
/// or two bf16x2 multiplies by powers of two scale them, exact up to overflow
/// (±inf from 2^128 on).
__device__ inline uint4 codesBF16(unsigned word, unsigned s) {
  uint32_t pair[4];
  decodeMXFP4Word(word, pair);
  const unsigned first = scaleMultiplier(min(s, 128u));
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    pair[i] = mulBF16x2(pair[i], first);
    if (s > 128u)
      pair[i] = mulBF16x2(pair[i], largeScaleSecond(s));
  }
  return make_uint4(pair[0], pair[1], pair[2], pair[3]);
}

/// Expert `first + blockIdx.y`'s weights [N, K] in bf16 into `out` (its
/// blockIdx.y-th), nothing for an expert without rows. The bf16 weights are
/// 16-byte chunks of 8 codes, one a code word (K is a multiple of 8), in the
/// codes' order: each thread takes kWordsPerThread of them a block's width
/// apart, so that a warp's loads and stores are contiguous. A row's words lie
/// at the start of its packed row, its codes past K zero (ceil(K/32) blocks of
/// 4 words: with K a multiple of 32 the rows are contiguous).
__global__ void __launch_bounds__(kThreads)
    dequantiseExperts(const uint8_t *codes, const uint8_t *scales, const int32_t *offsets,
                      int64_t first, int64_t n, int64_t k, int64_t kBlocks, __nv_bfloat16 *out) {
  const int64_t e = first + blockIdx.y;
  if (offsets && offsets[e] == (e > 0 ? offsets[e - 1] : 0))
    return;
  const unsigned rowWords = static_cast<unsigned>(k / 8), packedRowWords = kBlocks * 4;
  const unsigned words = static_cast<unsigned>(n) * rowWords;
  const auto *expertCodes = reinterpret_cast<const unsigned *>(codes) + e * n * packedRowWords;
  const uint8_t *expertScales = scales + e * n * kBlocks;
  uint4 *expertOut = reinterpret_cast<uint4 *>(out + blockIdx.y * n * k);
  const unsigned firstWord = blockIdx.x * kWordsPerBlock + threadIdx.x;
  unsigned code[kWordsPerThread], scale[kWordsPerThread];
#pragma unroll
  for (int j = 0; j < kWordsPerThread; ++j) {
    unsigned w = firstWord + j * kThreads;
    if (w >= words)
      continue;
    unsigned packed = w, block = w / 4; // contiguous rows
    if (packedRowWords != rowWords) {
      unsigned row = w / rowWords, column = w - row * rowWords;
      packed = row * packedRowWords + column;
      block = row * kBlocks + column / 4;
    }
    code[j] = expertCodes[packed];
    scale[j] = expertScales[block];
  }
#pragma unroll
  for (int j = 0; j < kWordsPerThread; ++j) {
    unsigned w = firstWord + j * kThreads;
    if (w < words)
      expertOut[w] = codesBF16(code[j], scale[j]);
  }
}
#endif

} // namespace

bool mxfp4DequantAvailable(int64_t k, int64_t n) {
#ifdef MOEC_HAVE_CUTLASS
  // An expert's code words are counted in 32 bits (dequantiseExperts).
  return detail::groupedMatmulCutlassSupports(k, n) && n * (k / 8) < (int64_t(1) << 31);
#else
  (void)k, (void)n;
  return false;
#endif
}

void setMXFP4DequantScratchBytes(int64_t bytes) {
  scratchBytes = bytes > 0 ? bytes : kDefaultScratchBytes;
}

int64_t mxfp4DequantChunkExperts(int64_t experts, int64_t n, int64_t k) {
  // At most 65535 (the dequantisation's grid takes an expert a row).
  int64_t expertBytes = std::max<int64_t>(1, n * k * 2);
  return std::clamp<int64_t>(scratchBytes / expertBytes, 1, std::clamp<int64_t>(experts, 1, 65535));
}

namespace detail {

template <typename Lhs>
Status groupedMatmulMXFP4Wide(const Lhs *lhs, int64_t slots, int64_t k, const uint8_t *weights,
                              const uint8_t *scales, int64_t experts, int64_t n,
                              const int32_t *offsets, const float *bias,
                              const cpu::Epilogue &epilogue, float *out, uint16_t *outBF16,
                              cudaStream_t stream) {
#ifdef MOEC_HAVE_CUTLASS
  if (!mxfp4DequantAvailable(k, n))
    return Status::error("groupedMatmulMXFP4: the dequantising tile takes no K = " +
                         std::to_string(k) + ", N = " + std::to_string(n) +
                         " (CUTLASS's bf16 GEMM: multiples of 8 and 4; N·K/8 below 2^31)");
  const int64_t kBlocks = (k + mxfp4::kBlock - 1) / mxfp4::kBlock;
  ChunkedWeights chunked{mxfp4DequantChunkExperts(experts, n, k),
                         [&](int64_t first, int64_t last, uint16_t *to) -> Status {
                           dim3 grid(static_cast<unsigned>((n * (k / 8) + kWordsPerBlock - 1) /
                                                           kWordsPerBlock),
                                     static_cast<unsigned>(last - first));
                           dequantiseExperts<<<grid, kThreads, 0, stream>>>(
                               weights, scales, offsets, first, n, k, kBlocks,
                               reinterpret_cast<__nv_bfloat16 *>(to));
                           MOEC_CUDA_TRY(cudaGetLastError());
                           return Status::ok();
                         }};
  // The CUTLASS configuration the bf16 kernel takes for this shape.
  bool gated = epilogue.enabled && epilogue.layout != cpu::GateUpLayout::None;
  CutlassTile tile = cutlassTileOf(chooseBF16Tile(slots, experts, k, gated, bias != nullptr));
  CutlassRows rows(lhs);
  return groupedMatmulCutlass(rows.f32, rows.bf16, slots, k, nullptr, experts, n, offsets, bias,
                              epilogue, out, outBF16, tile, stream, &chunked);
#else
  (void)lhs, (void)slots, (void)k, (void)weights, (void)scales, (void)experts, (void)n,
      (void)offsets, (void)bias, (void)epilogue, (void)out, (void)outBF16, (void)stream;
  return Status::error("groupedMatmulMXFP4: the dequantising tile needs a runtime built with "
                       "CUTLASS");
#endif
}

template Status groupedMatmulMXFP4Wide(const float *, int64_t, int64_t, const uint8_t *,
                                       const uint8_t *, int64_t, int64_t, const int32_t *,
                                       const float *, const cpu::Epilogue &, float *, uint16_t *,
                                       cudaStream_t);
template Status groupedMatmulMXFP4Wide(const BF16 *, int64_t, int64_t, const uint8_t *,
                                       const uint8_t *, int64_t, int64_t, const int32_t *,
                                       const float *, const cpu::Epilogue &, float *, uint16_t *,
                                       cudaStream_t);

} // namespace detail
} // namespace moec::rt::cuda
