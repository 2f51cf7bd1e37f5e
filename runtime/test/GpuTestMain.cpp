//===- GpuTestMain.cpp - GoogleTest main for GPU tests ----------------------===//
//
// Exits with 77, which ctest reports as "skipped", where no CUDA device
// answers; a machine without a GPU still runs every other test.
//
//===----------------------------------------------------------------------===//

#include "moec/runtime/Cuda.h"

#include <gtest/gtest.h>

#include <cstdio>

int main(int argc, char **argv) {
  if (moec::rt::cudaDeviceCountOrZero() == 0) {
    std::printf("no CUDA device: skipping GPU tests\n");
    return 77;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
