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
// The bf16 weights are exact, as the register kernel's: code · 2^(s - 127)
// has at most two significant bits and an exponent in f32's (and so bf16's)
// range, subnormals included (down to 0.5 · 2^-127), except from 2^128 on
// (scale bytes 253 and 254 with the larger codes), which becomes ±inf; the
// scale byte 0xFF is NaN and makes its block NaN, zero codes included.
//
//===----------------------------------------------------------------------===//

#include "GroupedMatmulMXFP4Wide.h"
#include "GroupedMatmulCutlass.h"
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

/// The e2m1 code in the low nibble of `code` as an f32 (its bits made
/// directly: magnitudes 2-7 are 2^(m/2 - 1) · (1 + (m & 1)/2), 1 is 0.5).
__device__ inline float e2m1(unsigned code) {
  unsigned m = code & 7u;
  unsigned bits = m >= 2u ? ((126u + (m >> 1)) << 23) | ((m & 1u) << 22) : m ? 0x3F000000u : 0u;
  return __uint_as_float(bits | ((code & 8u) << 28));
}

/// The e8m0 scale byte `s` as an f32: 2^(s - 127) (s = 0: the subnormal
/// 2^-127), NaN for 0xFF.
__device__ inline float e8m0(unsigned s) {
  return __uint_as_float(s == mxfp4::kScaleNaN ? 0x7FC00000u : s ? s << 23 : 0x00400000u);
}

/// Codes 0-7 of `word` (code i in nibble i) times `scale`, as 4 bf16x2.
__device__ inline uint4 dequantise(unsigned word, float scale) {
  unsigned pair[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    __nv_bfloat162 v = __floats2bfloat162_rn(__fmul_rn(e2m1(word >> (8 * i)), scale),
                                             __fmul_rn(e2m1(word >> (8 * i + 4)), scale));
    pair[i] = *reinterpret_cast<unsigned *>(&v);
  }
  return make_uint4(pair[0], pair[1], pair[2], pair[3]);
}

/// Expert `first + blockIdx.y`'s weights [N, K] in bf16 into `out` (its
/// blockIdx.y-th), nothing for an expert without rows. A thread per 32-code
/// block of a row: its 16 code bytes, its scale byte, and up to 64 bytes out
/// (K is a multiple of 8, so the codes past K are whole 16-byte chunks).
__global__ void __launch_bounds__(kThreads)
    dequantiseExperts(const uint8_t *codes, const uint8_t *scales, const int32_t *offsets,
                      int64_t first, int64_t n, int64_t k, int64_t kBlocks, __nv_bfloat16 *out) {
  const int64_t e = first + blockIdx.y;
  if (offsets && offsets[e] == (e > 0 ? offsets[e - 1] : 0))
    return;
  const int64_t blocks = n * kBlocks;
  const int64_t i = blockIdx.x * int64_t(kThreads) + threadIdx.x;
  if (i >= blocks)
    return;
  const int64_t block = e * blocks + i; // among all experts' blocks
  const uint4 w = reinterpret_cast<const uint4 *>(codes)[block];
  const float scale = e8m0(scales[block]);
  const int64_t row = i / kBlocks, b = i % kBlocks;
  uint4 *to = reinterpret_cast<uint4 *>(out + (blockIdx.y * n + row) * k + b * mxfp4::kBlock);
  const int64_t chunks = std::min<int64_t>(4, (k - b * mxfp4::kBlock) / 8);
  const unsigned words[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
  for (int c = 0; c < 4; ++c)
    if (c < chunks)
      to[c] = dequantise(words[c], scale);
}
#endif

} // namespace

bool mxfp4DequantAvailable(int64_t k, int64_t n) {
#ifdef MOEC_HAVE_CUTLASS
  return detail::groupedMatmulCutlassSupports(k, n);
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
  if (!groupedMatmulCutlassSupports(k, n))
    return Status::error("groupedMatmulMXFP4: the dequantising tile takes no K = " +
                         std::to_string(k) + ", N = " + std::to_string(n) +
                         " (CUTLASS's bf16 GEMM: multiples of 8 and 4)");
  const int64_t kBlocks = (k + mxfp4::kBlock - 1) / mxfp4::kBlock;
  ChunkedWeights chunked{mxfp4DequantChunkExperts(experts, n, k),
                         [&](int64_t first, int64_t last, uint16_t *to) -> Status {
                           dim3 grid(static_cast<unsigned>((n * kBlocks + kThreads - 1) / kThreads),
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
