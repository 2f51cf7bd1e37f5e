//===- GridSize.h - grid sizes of the grid-stride kernels -------*- C++ -*-===//
//
// Most of the runtime's element-wise and row-wise kernels loop over their work
// with a grid stride, so any grid is correct; these say how many blocks to
// launch so that the loop has enough parallelism without a launch per item.
//
//===----------------------------------------------------------------------===//
#ifndef MOEC_RUNTIME_SRC_CUDA_GRIDSIZE_H
#define MOEC_RUNTIME_SRC_CUDA_GRIDSIZE_H

#include <algorithm>
#include <cstdint>

namespace moec::rt::cuda::detail {

/// Streaming multiprocessors of the H200 (sm_90a), the one target: grids that
/// should fill the device a few times over are sized by it.
inline constexpr int64_t kSMs = 132;

/// Blocks of `threads` threads for `work` items, one item per thread: at least
/// 1, at most `maxBlocks` (the grid-stride loop covers the rest).
inline int blocksFor(int64_t work, int threads, int64_t maxBlocks = 65535) {
  return static_cast<int>(std::clamp<int64_t>((work + threads - 1) / threads, 1, maxBlocks));
}

} // namespace moec::rt::cuda::detail

#endif // MOEC_RUNTIME_SRC_CUDA_GRIDSIZE_H
