//===- WeightFill.cu - the weight image built on the device ---------------===//
//
// The CUDA half of moec/runtime/WeightFill.h: a CUDA artifact whose manifest
// fills its weights at load (moec compile --random-weights) gets its image
// here, in device memory: zeros, the few stored weights copied from the
// mapped weights.bin, every other weight written by a kernel, never through
// the host. Each thread computes one Philox group (four elements) and writes
// it with one vector store (the fills start at 256-byte offsets, checked by
// parseManifest); the bits are the CPU loader's (WeightFillTest).
//
//===----------------------------------------------------------------------===//

#include "GridSize.h"
#include "moec/runtime/Cuda.h"
#include "moec/runtime/WeightFill.h"
#include "moec/runtime/cuda/Artifact.h"

#include <string>

namespace moec::rt::cuda {
namespace {

template <int DType> struct Vector;
template <> struct Vector<MOEC_FILL_F32> {
  using Type = float4;
  static __device__ Type make(const float v[4]) { return {v[0], v[1], v[2], v[3]}; }
};
template <> struct Vector<MOEC_FILL_BF16> {
  using Type = uint2;
  static __device__ Type make(const float v[4]) {
    return {fill::toBF16(v[0]) | (uint32_t(fill::toBF16(v[1])) << 16),
            fill::toBF16(v[2]) | (uint32_t(fill::toBF16(v[3])) << 16)};
  }
};
template <> struct Vector<MOEC_FILL_E4M3> {
  using Type = uint32_t;
  static __device__ Type make(const float v[4]) {
    return fill::toE4M3(v[0]) | (uint32_t(fill::toE4M3(v[1])) << 8) |
           (uint32_t(fill::toE4M3(v[2])) << 16) | (uint32_t(fill::toE4M3(v[3])) << 24);
  }
};

/// Four e2m1 codes, two bytes (element 4g + 2j in byte 2g + j's low nibble).
template <> struct Vector<MOEC_FILL_E2M1> {
  using Type = uint16_t;
  static __device__ Type make(const float v[4]) {
    return static_cast<uint16_t>(fill::toE2M1(v[0]) | (fill::toE2M1(v[1]) << 4) |
                                 (fill::toE2M1(v[2]) << 8) | (fill::toE2M1(v[3]) << 12));
  }
};
template <> struct Vector<MOEC_FILL_E8M0> {
  using Type = uint32_t;
  static __device__ Type make(const float v[4]) {
    return fill::toE8M0(v[0]) | (uint32_t(fill::toE8M0(v[1])) << 8) |
           (uint32_t(fill::toE8M0(v[2])) << 16) | (uint32_t(fill::toE8M0(v[3])) << 24);
  }
};

/// Groups of four elements: a constant, or `value` times the generator's
/// normals; the last group may be partial.
template <int DType, bool Normal>
__global__ void fillKernel(unsigned char *out, uint64_t count, uint64_t seed, uint64_t stream,
                           uint64_t firstGroup, float value) {
  uint64_t groups = (count + 3) / 4;
  for (uint64_t g = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; g < groups;
       g += uint64_t(gridDim.x) * blockDim.x) {
    float v[4];
    if (Normal) {
      fill::normals(seed, stream, firstGroup + g, v);
      for (int i = 0; i < 4; ++i)
        v[i] = fill::mul(value, v[i]);
    } else {
      v[0] = v[1] = v[2] = v[3] = value;
    }
    if (4 * g + 4 <= count) {
      reinterpret_cast<typename Vector<DType>::Type *>(out)[g] = Vector<DType>::make(v);
    } else {
      for (uint64_t i = 4 * g; i < count; ++i)
        fill::store(DType, v[i & 3], out, i);
    }
  }
}

template <int DType>
void launch(const moec_weight_fill &fill, uint64_t seed, unsigned char *image,
            cudaStream_t stream) {
  int blocks = detail::blocksFor(static_cast<int64_t>((fill.count + 3) / 4), 256,
                                 64 * detail::kSMs);
  if (fill.kind == MOEC_FILL_NORMAL)
    fillKernel<DType, true><<<blocks, 256, 0, stream>>>(image + fill.offset, fill.count, seed,
                                                         fill.stream, fill.first >> 2, fill.value);
  else
    fillKernel<DType, false><<<blocks, 256, 0, stream>>>(image + fill.offset, fill.count, seed,
                                                          fill.stream, 0, fill.value);
}

} // namespace

Status fillWeightsOnDevice(const moec_weight_plan &plan, unsigned char *image,
                           cudaStream_t stream) {
  for (size_t f = 0; f < plan.num_fills; ++f) {
    const moec_weight_fill &fill = plan.fills[f];
    if (fill.kind == MOEC_FILL_STORED || fill.count == 0)
      continue;
    switch (fill.dtype) {
    case MOEC_FILL_F32:
      launch<MOEC_FILL_F32>(fill, plan.seed, image, stream);
      break;
    case MOEC_FILL_BF16:
      launch<MOEC_FILL_BF16>(fill, plan.seed, image, stream);
      break;
    case MOEC_FILL_E4M3:
      launch<MOEC_FILL_E4M3>(fill, plan.seed, image, stream);
      break;
    case MOEC_FILL_E2M1:
      launch<MOEC_FILL_E2M1>(fill, plan.seed, image, stream);
      break;
    case MOEC_FILL_E8M0:
      launch<MOEC_FILL_E8M0>(fill, plan.seed, image, stream);
      break;
    default:
      return Status::error("fillWeightsOnDevice: fill " + std::to_string(f) + " has dtype " +
                           std::to_string(fill.dtype));
    }
    MOEC_CUDA_TRY(cudaGetLastError());
  }
  return Status::ok();
}

Status buildWeightImage(const moec_weight_plan &plan, const unsigned char *stored,
                        unsigned char *image, cudaStream_t stream) {
  MOEC_CUDA_TRY(cudaMemsetAsync(image, 0, plan.image_bytes, stream));
  for (size_t f = 0; f < plan.num_fills; ++f) {
    const moec_weight_fill &fill = plan.fills[f];
    if (fill.kind != MOEC_FILL_STORED)
      continue;
    // Stored weights of a filled image are the computed ones (rotary
    // frequencies): small, copied from the mapping as they are.
    MOEC_CUDA_TRY(cudaMemcpyAsync(image + fill.offset, stored + fill.source, fill.count,
                                  cudaMemcpyHostToDevice, stream));
  }
  MOEC_RETURN_IF_ERROR(fillWeightsOnDevice(plan, image, stream));
  MOEC_CUDA_TRY(cudaStreamSynchronize(stream));
  return Status::ok();
}

} // namespace moec::rt::cuda
