//===- MoEKernels.h - the CUDA kernels with their tile choices --*- C++ -*-===//
//
// Transitional, never installed: the include folder of the `moec_runtime_cuda`
// target (runtime/CMakeLists.txt), for code that picked tiles through the public
// header before the tile choices became internal (bench/grouped_matmul.cpp).
// New code includes the public header and, to pick tiles, src/cuda/Tuning.h.
//
//===----------------------------------------------------------------------===//

#pragma once

#include "../../../../../include/moec/runtime/cuda/MoEKernels.h"
#include "../../../../cuda/Tuning.h"
