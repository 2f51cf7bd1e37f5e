//===- LinearCutlass.cu - the f32 router on CUTLASS's 3xTF32 GEMM ---------===//
//
// CUTLASS 2.x's sm80 tensor-op GEMM with OpMultiplyAddFastF32 (runs on sm_90):
// each f32 operand splits into big = tf32(v) and small = tf32(v - big), and
// a·b is summed as small·big + big·small + big·big, as linearTiledKernel does.
// What differs is the accumulation: CUTLASS sums each K stage's products into
// a fresh accumulator and adds that to the running one with f32 adds ("staged
// accumulation"), where adding every mma's products straight into the running
// sum loses about an ulp of it per mma (the tensor cores' adds truncate):
// linearTiledKernel's logits were off by 2.7e-5 of the largest one for
// DeepSeek-V3's router at T = 8192 (3584-deep K splits), CUTLASS's by 8.7e-7
// over all 7168 (bench/router_probe.cu against float64). It is also 27-35 %
// faster from 1024 rows (Qwen3 at T = 1024 20.0 µs against 29.3, DeepSeek-V3 at
// T = 8192 430 against 624).
//
// K splits over blocks serially (CUTLASS's SplitKSerial: each partition adds
// into the output after the one before it, in order, behind a semaphore), so
// logits do not depend on timing; the bias enters as the epilogue's source
// matrix with a row stride of 0 (one row for every output row).
//
//===----------------------------------------------------------------------===//

#include "LinearCutlass.h"

#include "GridSize.h"
#include "StreamScratch.h"

#include "moec/runtime/Cuda.h"

#include "cutlass/cutlass.h"
#include "cutlass/gemm/device/gemm.h"

#include <algorithm>
#include <string>

namespace moec::rt::cuda::detail {
namespace {

template <int TileN, int WarpN, int Stages>
using Gemm3xTF32 = cutlass::gemm::device::Gemm<
    float, cutlass::layout::RowMajor, float, cutlass::layout::ColumnMajor, float,
    cutlass::layout::RowMajor, float, cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80,
    cutlass::gemm::GemmShape<64, TileN, 32>, cutlass::gemm::GemmShape<32, WarpN, 32>,
    cutlass::gemm::GemmShape<16, 8, 8>,
    cutlass::epilogue::thread::LinearCombination<float, 4, float, float>,
    cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<>, Stages, 4, 4,
    /*SplitKSerial=*/true, cutlass::arch::OpMultiplyAddFastF32>;

/// The two tiles the probe picked (bench/router_probe.cu, T = 128-8192 at
/// the routers of Qwen3, gpt-oss and DeepSeek-V3): 64 x 64 (4 warps of 32 x 32,
/// four 32-deep stages) for 128-expert routers to 2048 rows, 64 x 128 (4 warps
/// of 32 x 64, three stages) for 256 experts and for 4096 rows on.
using NarrowTile = Gemm3xTF32<64, 32, 4>;
using WideTile = Gemm3xTF32<128, 64, 3>;

template <typename Gemm>
Status run(const float *x, int64_t m, int64_t k, const float *w, int64_t n, const float *bias,
           float *y, cudaStream_t stream) {
  // About one block per SM: the probe's fastest split count at every shape
  // within 7 % (more splits wait on each other's semaphores), each partition
  // at least 512 deep.
  constexpr int64_t kTileRows = Gemm::ThreadblockShape::kM,
                    kTileColumns = Gemm::ThreadblockShape::kN;
  int64_t tiles = ((m + kTileRows - 1) / kTileRows) * ((n + kTileColumns - 1) / kTileColumns);
  int splits = static_cast<int>(
      std::clamp<int64_t>(kSMs / std::max<int64_t>(tiles, 1), 1, std::max<int64_t>(1, k / 512)));
  typename Gemm::Arguments args({static_cast<int>(m), static_cast<int>(n), static_cast<int>(k)},
                                {x, k}, {w, k}, {bias ? bias : y, bias ? 0 : n}, {y, n},
                                {1.0f, bias ? 1.0f : 0.0f}, splits);
  if (Gemm::can_implement(args) != cutlass::Status::kSuccess)
    return Status::error("linear: CUTLASS's 3xTF32 GEMM cannot take M = " + std::to_string(m) +
                         ", K = " + std::to_string(k) + ", N = " + std::to_string(n));
  StreamScratch scratch(stream);
  unsigned char *workspace = nullptr;
  if (size_t bytes = Gemm::get_workspace_size(args))
    MOEC_RETURN_IF_ERROR(scratch.allocate(bytes, workspace));
  Gemm gemm;
  // initialize() zeroes the split-K semaphores on `stream`; each run leaves them zero.
  if (gemm.initialize(args, workspace, stream) != cutlass::Status::kSuccess)
    return Status::error("linear: initialising CUTLASS's 3xTF32 GEMM failed");
  cutlass::Status status = gemm.run(stream);
  MOEC_CUDA_TRY(cudaGetLastError());
  if (status != cutlass::Status::kSuccess)
    return Status::error(std::string("linear: CUTLASS's 3xTF32 GEMM: ") +
                         cutlassGetStatusString(status));
  return Status::ok();
}

} // namespace

bool linearCutlassSupports(const float *x, int64_t k, const float *w, int64_t n, const float *bias,
                           const float *y) {
  auto aligned = [](const void *p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  return k % 4 == 0 && n % 4 == 0 && k <= INT32_MAX && n <= INT32_MAX && aligned(x) && aligned(w) &&
         aligned(y) && (!bias || aligned(bias));
}

Status linearCutlass(const float *x, int64_t m, int64_t k, const float *w, int64_t n,
                     const float *bias, float *y, cudaStream_t stream) {
  if (m > INT32_MAX)
    return Status::error("linear: " + std::to_string(m) + " rows exceed CUTLASS's 32-bit extents");
  if (n >= 256 || m >= 4096)
    return run<WideTile>(x, m, k, w, n, bias, y, stream);
  return run<NarrowTile>(x, m, k, w, n, bias, y, stream);
}

} // namespace moec::rt::cuda::detail
