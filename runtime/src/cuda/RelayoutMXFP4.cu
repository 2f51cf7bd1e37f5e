//===- RelayoutMXFP4.cu - MXFP4 codes from the stored to the GPU layout ----===//
//
// The GPU's MXFP4 kernels read the codes in the layout MXFP4Layout.cuh
// defines; weights.bin and the checkpoints hold gpt-oss's nibble order. Each
// 32-bit word is re-laid out in place, once, when a model is created.
//
//===----------------------------------------------------------------------===//

#include "GridSize.h"
#include "MXFP4Layout.cuh"
#include "moec/runtime/Cuda.h"
#include "moec/runtime/cuda/MoEKernels.h"

#include <string>

namespace moec::rt::cuda {
namespace {

__global__ void relayoutMXFP4Kernel(uint32_t *words, int64_t count, MXFP4Encoder encode) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x)
    words[i] = encode(words[i]);
}

} // namespace

Status relayoutMXFP4(uint8_t *codes, int64_t bytes, cudaStream_t stream) {
  if (bytes < 0 || bytes % 4 != 0 || reinterpret_cast<uintptr_t>(codes) % 4 != 0)
    return Status::error("relayoutMXFP4: " + std::to_string(bytes) +
                         " bytes are not whole 4-byte-aligned words");
  int64_t words = bytes / 4;
  if (words == 0)
    return Status::ok();
  relayoutMXFP4Kernel<<<detail::blocksFor(words, 256, 16 * detail::kSMs), 256, 0, stream>>>(
      reinterpret_cast<uint32_t *>(codes), words, kMXFP4Encoder);
  MOEC_CUDA_TRY(cudaGetLastError());
  return Status::ok();
}

} // namespace moec::rt::cuda
