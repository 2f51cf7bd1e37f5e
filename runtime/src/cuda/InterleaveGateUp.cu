//===- InterleaveGateUp.cu - gate/up rows from concatenated to interleaved -===//
//
// The prefill GEMM applies a gate/up projection's activation in its own
// epilogue (GatedEpilogueCutlass.cuh), where each thread holds accumulator
// columns in adjacent pairs: the gate and up rows of one output must be
// adjacent weight rows. Models that concatenate the halves (Mixtral, Qwen3,
// DeepSeek-V3: rows [0, I) gate, [I, 2I) up) are reordered once, on the device,
// when the model is created; weights.bin keeps moe's layout.
//
//===----------------------------------------------------------------------===//

#include "GridSize.h"
#include "StreamScratch.h"
#include "moec/runtime/Cuda.h"
#include "moec/runtime/cuda/MoEKernels.h"

#include <algorithm>
#include <string>

namespace moec::rt::cuda {
namespace {

/// out row (e, 2j + h) = in row (e, h·half + j), in `Unit`s of `units` per row.
template <typename Unit>
__global__ void interleaveRowsKernel(const Unit *in, Unit *out, int64_t experts, int64_t half,
                                     int64_t units) {
  int64_t total = experts * 2 * half * units;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t u = i % units, row = i / units;
    int64_t e = row / (2 * half), r = row % (2 * half);
    int64_t j = r / 2, h = r % 2;
    out[i] = in[(e * 2 * half + h * half + j) * units + u];
  }
}

template <typename Unit>
void launchInterleave(const void *in, void *out, int64_t experts, int64_t half, int64_t rowBytes,
                      cudaStream_t stream) {
  int64_t units = rowBytes / static_cast<int64_t>(sizeof(Unit));
  interleaveRowsKernel<<<detail::blocksFor(experts * 2 * half * units, 256, 16 * detail::kSMs),
                         256, 0, stream>>>(static_cast<const Unit *>(in),
                                           static_cast<Unit *>(out), experts, half, units);
}

} // namespace

Status interleaveGateUp(void *rows, int64_t experts, int64_t n, int64_t rowBytes,
                        cudaStream_t stream) {
  if (n % 2 != 0 || rowBytes <= 0 || experts < 0)
    return Status::error("interleaveGateUp: N = " + std::to_string(n) +
                         " is odd or the row is empty");
  // A copy of a few experts at a time (at most ~256 MB), gathered back in place.
  int64_t expertBytes = n * rowBytes;
  int64_t chunk = std::max<int64_t>(1, (int64_t(256) << 20) / std::max<int64_t>(expertBytes, 1));
  detail::StreamScratch scratch(stream);
  unsigned char *copy = nullptr;
  MOEC_RETURN_IF_ERROR(
      scratch.allocate(static_cast<size_t>(std::min(chunk, experts) * expertBytes), copy));
  auto *base = static_cast<unsigned char *>(rows);
  for (int64_t first = 0; first < experts; first += chunk) {
    int64_t count = std::min(chunk, experts - first);
    unsigned char *block = base + first * expertBytes;
    MOEC_CUDA_TRY(cudaMemcpyAsync(copy, block, static_cast<size_t>(count * expertBytes),
                                  cudaMemcpyDeviceToDevice, stream));
    bool wide = rowBytes % 16 == 0 && reinterpret_cast<uintptr_t>(block) % 16 == 0;
    if (wide)
      launchInterleave<uint4>(copy, block, count, n / 2, rowBytes, stream);
    else if (rowBytes % 4 == 0 && reinterpret_cast<uintptr_t>(block) % 4 == 0)
      launchInterleave<uint32_t>(copy, block, count, n / 2, rowBytes, stream);
    else
      launchInterleave<unsigned char>(copy, block, count, n / 2, rowBytes, stream);
    MOEC_CUDA_TRY(cudaGetLastError());
  }
  return Status::ok();
}

} // namespace moec::rt::cuda
