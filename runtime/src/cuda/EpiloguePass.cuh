//===- EpiloguePass.cuh - the grouped matmul's epilogue as a second pass --===//
//
// When a grouped matmul's products cannot take the epilogue in registers --
// CUTLASS's GEMMs (bf16 and FP8) write an f32 product -- this kernel finishes
// them: the expert's bias, the activation (gated or not), f32 or bf16 out. Only the valid rows
// (below the last expert's end) are read or written: the sentinel tail stays untouched.
//
//===----------------------------------------------------------------------===//
#ifndef MOEC_RUNTIME_SRC_CUDA_EPILOGUEPASS_CUH
#define MOEC_RUNTIME_SRC_CUDA_EPILOGUEPASS_CUH

#include "Epilogue.cuh"

#include <cuda_bf16.h>

#include <cstdint>

namespace moec::rt::cuda::device {

__device__ inline void storeValue(float *out, float value) { *out = value; }
__device__ inline void storeValue(__nv_bfloat16 *out, float value) {
  *out = __float2bfloat16_rn(value);
}

/// out[r, j] = epilogue(product[r, :] + bias[expert of r, :]) for the valid rows r.
/// A block per row (grid-stride), threads over the output columns.
template <typename Out>
__global__ void epiloguePass(const float *product, const int32_t *offsets, int experts,
                             int64_t rows, int n, int outColumns, const float *bias,
                             cpu::Epilogue epilogue, Out *out) {
  int64_t valid = offsets ? offsets[experts - 1] : rows;
  bool gated = epilogue.enabled && epilogue.layout != cpu::GateUpLayout::None;
  bool interleaved = epilogue.layout == cpu::GateUpLayout::Interleaved;
  for (int64_t r = blockIdx.x; r < valid; r += gridDim.x) {
    const float *biasRow = nullptr;
    if (bias) {
      int lo = 0, hi = experts - 1; // the first expert whose end is past r
      while (offsets && lo < hi) {
        int mid = (lo + hi) / 2;
        if (offsets[mid] > r)
          hi = mid;
        else
          lo = mid + 1;
      }
      biasRow = bias + static_cast<int64_t>(lo) * n;
    }
    auto column = [&](int64_t c) { return product[r * n + c] + (biasRow ? biasRow[c] : 0.0f); };
    for (int j = threadIdx.x; j < outColumns; j += blockDim.x) {
      float value;
      if (gated) {
        int64_t g = interleaved ? 2 * j : j, u = interleaved ? 2 * j + 1 : j + outColumns;
        value = gatedEpilogue(epilogue, column(g), column(u));
      } else {
        value = column(j);
        if (epilogue.enabled)
          value = activate(epilogue.kind, epilogue.alpha, value);
      }
      storeValue(out + r * outColumns + j, value);
    }
  }
}

} // namespace moec::rt::cuda::device

#endif // MOEC_RUNTIME_SRC_CUDA_EPILOGUEPASS_CUH
