//===- EpiloguePass.cuh - the grouped matmul's epilogue as a second pass --===//
//
// When a grouped matmul's products cannot take the epilogue in registers --
// CUTLASS's GEMMs (bf16 and FP8) write an f32 product -- this kernel finishes
// them: the expert's bias, the activation (gated or not), f32 or bf16 out. Only
// the valid rows (below the last expert's end) are read or written: the
// sentinel tail stays untouched. The pass that quantises its outputs
// (epiloguePassE4M3) also reads bf16 products: the FP8 GEMM's product rounded
// to bf16 in CUTLASS's epilogue, or its gated result h (GatedEpilogueFP8)
// with nothing left to apply but the quantisation.
//
// It is a pure stream (read the product once, write the result once), so it is
// written for bandwidth: four output columns per thread with 16-byte loads
// wherever the row width allows (ncu: a one-column version ran at 32-57 %
// of copy, instruction-bound at 62-68 % SM, 0.18-0.78 ms at T = 8192).
//
//===----------------------------------------------------------------------===//
#ifndef MOEC_RUNTIME_SRC_CUDA_EPILOGUEPASS_CUH
#define MOEC_RUNTIME_SRC_CUDA_EPILOGUEPASS_CUH

#include "E4M3.cuh"
#include "Epilogue.cuh"
#include "GridSize.h"

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>

namespace moec::rt::cuda::device {

/// x[0..N) = p[0..N), with 16-byte loads when N is a multiple of 4 (p aligned).
template <int N> __device__ inline void loadFloats(const float *p, float (&x)[N]) {
  if constexpr (N % 4 == 0) {
#pragma unroll
    for (int i = 0; i < N; i += 4) {
      float4 v = *reinterpret_cast<const float4 *>(p + i);
      x[i] = v.x, x[i + 1] = v.y, x[i + 2] = v.z, x[i + 3] = v.w;
    }
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i)
      x[i] = p[i];
  }
}

/// x[0..N) = p[0..N) from bf16, with 8-byte loads when N is a multiple of 4
/// (p 8-byte aligned).
template <int N> __device__ inline void loadFloats(const __nv_bfloat16 *p, float (&x)[N]) {
  if constexpr (N % 4 == 0) {
#pragma unroll
    for (int i = 0; i < N; i += 4) {
      uint2 bits = *reinterpret_cast<const uint2 *>(p + i);
      float2 lo = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(&bits.x));
      float2 hi = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(&bits.y));
      x[i] = lo.x, x[i + 1] = lo.y, x[i + 2] = hi.x, x[i + 3] = hi.y;
    }
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i)
      x[i] = __bfloat162float(p[i]);
  }
}

/// x[0..N) += p[0..N) when p is not null.
template <int N> __device__ inline void addFloats(const float *p, float (&x)[N]) {
  if (!p)
    return;
  float b[N];
  loadFloats(p, b);
#pragma unroll
  for (int i = 0; i < N; ++i)
    x[i] += b[i];
}

template <int N> __device__ inline void storeValues(float *out, const float (&v)[N]) {
  if constexpr (N == 4)
    *reinterpret_cast<float4 *>(out) = make_float4(v[0], v[1], v[2], v[3]);
  else
#pragma unroll
    for (int i = 0; i < N; ++i)
      out[i] = v[i];
}

template <int N> __device__ inline void storeValues(__nv_bfloat16 *out, const float (&v)[N]) {
  if constexpr (N == 4) {
    __nv_bfloat162 lo = __floats2bfloat162_rn(v[0], v[1]), hi = __floats2bfloat162_rn(v[2], v[3]);
    uint2 bits;
    bits.x = *reinterpret_cast<unsigned *>(&lo);
    bits.y = *reinterpret_cast<unsigned *>(&hi);
    *reinterpret_cast<uint2 *>(out) = bits;
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i)
      out[i] = __float2bfloat16_rn(v[i]);
  }
}

/// The bias row of row r's expert (the first whose end is past r), or null.
__device__ inline const float *biasRowOf(const float *bias, const int32_t *offsets, int experts,
                                         int n, int64_t r) {
  if (!bias)
    return nullptr;
  int lo = 0, hi = experts - 1;
  while (offsets && lo < hi) {
    int mid = (lo + hi) / 2;
    if (offsets[mid] > r)
      hi = mid;
    else
      lo = mid + 1;
  }
  return bias + static_cast<int64_t>(lo) * n;
}

/// value[0..VEC) = the epilogue of output columns j..j+VEC of one product row
/// (f32 or bf16; and its expert's f32 bias row, or null).
template <int VEC, typename In>
__device__ inline void epilogueValues(const In *row, const float *biasRow, int j, int outColumns,
                                      const cpu::Epilogue &epilogue, float (&value)[VEC]) {
  bool gated = epilogue.enabled && epilogue.layout != cpu::GateUpLayout::None;
  if (gated && epilogue.layout == cpu::GateUpLayout::Interleaved) { // gate, up, gate, up, ...
    float pairs[2 * VEC];
    loadFloats(row + 2 * j, pairs);
    addFloats(biasRow ? biasRow + 2 * j : nullptr, pairs);
#pragma unroll
    for (int i = 0; i < VEC; ++i)
      value[i] = gatedEpilogue(epilogue, pairs[2 * i], pairs[2 * i + 1]);
  } else if (gated) { // all gates, then all ups
    float gate[VEC], up[VEC];
    loadFloats(row + j, gate);
    loadFloats(row + outColumns + j, up);
    addFloats(biasRow ? biasRow + j : nullptr, gate);
    addFloats(biasRow ? biasRow + outColumns + j : nullptr, up);
#pragma unroll
    for (int i = 0; i < VEC; ++i)
      value[i] = gatedEpilogue(epilogue, gate[i], up[i]);
  } else {
    loadFloats(row + j, value);
    addFloats(biasRow ? biasRow + j : nullptr, value);
    if (epilogue.enabled)
#pragma unroll
      for (int i = 0; i < VEC; ++i)
        value[i] = activate(epilogue.kind, epilogue.alpha, value[i]);
  }
}

/// out[r, j] = epilogue(product[r, :] + bias[expert of r, :]) for the valid rows r.
/// A block per row (grid-stride), each thread VEC adjacent output columns; VEC 4
/// needs n % 8 == 0 (16-byte aligned rows, gate and up halves included).
template <int VEC, typename Out>
__global__ void epiloguePass(const float *product, const int32_t *offsets, int experts,
                             int64_t rows, int n, int outColumns, const float *bias,
                             cpu::Epilogue epilogue, Out *out) {
  int64_t valid = offsets ? offsets[experts - 1] : rows;
  for (int64_t r = blockIdx.x; r < valid; r += gridDim.x) {
    const float *biasRow = biasRowOf(bias, offsets, experts, n, r);
    const float *row = product + r * n;
    for (int j = threadIdx.x * VEC; j < outColumns; j += blockDim.x * VEC) {
      float value[VEC];
      epilogueValues(row, biasRow, j, outColumns, epilogue, value);
      storeValues(out + r * outColumns + j, value);
    }
  }
}

/// The pass that quantises its own outputs: moe.quantize of the pass's result,
/// bit for bit (the same values, then E4M3.cuh's scale and codes), with no f32
/// result written. The product `In` is f32, or bf16 (read as the f32 values
/// it holds). A block per valid row (grid-stride), its warps on the row's
/// 128-column output groups, lane l on a group's columns 4l..4l+3; q [rows,
/// outColumns] e4m3 codes, scales [rows, ceil(outColumns / 128)]. VEC 4:
/// 16-byte loads and 4-byte code stores (n % 8 == 0, aligned buffers), else
/// column by column.
///
/// It is issue-bound, not memory-bound (ncu: 74 % SM busy at 52 % of
/// DRAM bandwidth for Mixtral's FP8 gate/up at T = 8192): so the row and group
/// come from the loops, not from a 64-bit division of a flat item index, and
/// the bias row is found once per row. (Two groups per warp step were tried
/// for more bytes in flight, with the loads before and after the first group's
/// arithmetic: no faster either time.)
template <int VEC, typename In>
__global__ void epiloguePassE4M3(const In *product, const int32_t *offsets, int experts,
                                 int64_t rows, int n, int outColumns, const float *bias,
                                 cpu::Epilogue epilogue, uint8_t *q, float *scales) {
  const int64_t valid = offsets ? offsets[experts - 1] : rows;
  const int groups = (outColumns + 127) / 128, lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32, warps = blockDim.x / 32;
  for (int64_t r = blockIdx.x; r < valid; r += gridDim.x) {
    const float *biasRow = biasRowOf(bias, offsets, experts, n, r);
    const In *row = product + r * n;
    for (int g = warp; g < groups; g += warps) {
      const int j = g * 128 + 4 * lane;
      float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      if constexpr (VEC == 4) {
        if (j < outColumns) // outColumns % 4 == 0: all four columns or none
          epilogueValues(row, biasRow, j, outColumns, epilogue, v);
      } else {
#pragma unroll
        for (int t = 0; t < 4; ++t)
          if (j + t < outColumns) {
            float one[1];
            epilogueValues(row, biasRow, j + t, outColumns, epilogue, one);
            v[t] = one[0];
          }
      }
      float amax = 0.0f;
      bool nan = false;
#pragma unroll
      for (int t = 0; t < 4; ++t)
        if (j + t < outColumns) {
          nan |= isnan(v[t]);
          amax = fmaxf(amax, fabsf(v[t]));
        }
      const E4M3Encoder encode(warpE4M3Scale(amax, nan));
      if (lane == 0)
        scales[r * groups + g] = encode.scale();
      uint8_t *codes = q + r * outColumns + j;
      if (VEC == 4 && j < outColumns) {
        *reinterpret_cast<uint32_t *>(codes) = encode.encode4(v[0], v[1], v[2], v[3]);
      } else if (VEC != 4) {
#pragma unroll
        for (int t = 0; t < 4; ++t)
          if (j + t < outColumns)
            codes[t] = encode(v[t]);
      }
    }
  }
}

/// Launches epiloguePassE4M3 on `stream` (VEC 4 where n % 8 == 0 and the
/// buffers are aligned): a warp per output group up to 8 per block, and
/// blocks enough for 16 waves of 256 threads, as a warp per item had.
template <typename In>
cudaError_t launchEpiloguePassE4M3(const In *product, const int32_t *offsets, int experts,
                                   int64_t rows, int n, int outColumns, const float *bias,
                                   cpu::Epilogue epilogue, uint8_t *q, float *scales,
                                   cudaStream_t stream) {
  const int warps = std::clamp((outColumns + 127) / 128, 1, 8);
  const unsigned blocks = detail::blocksFor(rows, 1, 16 * detail::kSMs * 8 / warps);
  auto aligned = [](const void *p, int bytes) {
    return reinterpret_cast<uintptr_t>(p) % bytes == 0;
  };
  if (n % 8 == 0 && aligned(product, 16) && aligned(bias, 16) && aligned(q, 4))
    epiloguePassE4M3<4, In><<<blocks, 32 * warps, 0, stream>>>(
        product, offsets, experts, rows, n, outColumns, bias, epilogue, q, scales);
  else
    epiloguePassE4M3<1, In><<<blocks, 32 * warps, 0, stream>>>(
        product, offsets, experts, rows, n, outColumns, bias, epilogue, q, scales);
  return cudaGetLastError();
}

/// Launches epiloguePass on `stream`: four columns per thread where n % 8 == 0
/// and the buffers are 16-byte aligned (codegen's are 64), one otherwise.
template <typename Out>
cudaError_t launchEpiloguePass(const float *product, const int32_t *offsets, int experts,
                               int64_t rows, int n, int outColumns, const float *bias,
                               cpu::Epilogue epilogue, Out *out, cudaStream_t stream) {
  unsigned blocks = detail::blocksFor(rows, 1, 8 * detail::kSMs);
  auto aligned = [](const void *p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  if (n % 8 == 0 && aligned(product) && aligned(bias) && aligned(out))
    epiloguePass<4><<<blocks, 256, 0, stream>>>(product, offsets, experts, rows, n, outColumns,
                                                bias, epilogue, out);
  else
    epiloguePass<1><<<blocks, 256, 0, stream>>>(product, offsets, experts, rows, n, outColumns,
                                                bias, epilogue, out);
  return cudaGetLastError();
}

} // namespace moec::rt::cuda::device

#endif // MOEC_RUNTIME_SRC_CUDA_EPILOGUEPASS_CUH
