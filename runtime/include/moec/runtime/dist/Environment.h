//===- Environment.h - a rank's place in the job, from the environment -*- C++ -*-===//
//
// The launchers' variables: torchrun's RANK, WORLD_SIZE, LOCAL_RANK,
// MASTER_ADDR, MASTER_PORT, and Open MPI's OMPI_COMM_WORLD_RANK,
// OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK (where both name a value
// they must agree). MOEC_DIST_TIMEOUT (seconds) bounds every wait. None set:
// one process, rank 0 of 1. Every value is checked: a number that is not
// one, a rank outside the world, a rank without a world size, a port outside
// 1..65535 are errors naming the variable.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_DIST_ENVIRONMENT_H
#define MOEC_RUNTIME_DIST_ENVIRONMENT_H

#include "moec/runtime/Status.h"

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

namespace moec::rt::dist {

struct DistEnvironment {
  int rank = 0;
  int worldSize = 1;
  /// The rank among this host's ranks: the CUDA device to use. Without
  /// LOCAL_RANK, the rank (one host).
  int localRank = 0;
  std::string masterAddress = "127.0.0.1";
  uint16_t masterPort = 29500;
  std::chrono::milliseconds timeout{300000};
};

/// Reads the variables through `lookup` (null: unset).
Status parseDistEnvironment(const std::function<const char *(const char *)> &lookup,
                            DistEnvironment &out);
/// Reads this process's environment.
Status readDistEnvironment(DistEnvironment &out);

/// The CUDA_VISIBLE_DEVICES a rank runs with, from the process's `visible`
/// (null: unset). Each model.so carries its own CUDA runtime on device 0, so
/// a rank's GPU is chosen by what the process sees: unset, the local rank's
/// device; one entry (the launcher or the user gave this process its GPU),
/// kept; several, the local rank's entry among them, an error when there is
/// none; empty (no GPU), kept.
Status visibleDevicesForRank(const char *visible, int localRank, std::string &out);
/// Sets CUDA_VISIBLE_DEVICES so: before the process's first CUDA call, which
/// reads it once.
Status selectRankDevice(int localRank);

} // namespace moec::rt::dist

#endif // MOEC_RUNTIME_DIST_ENVIRONMENT_H
