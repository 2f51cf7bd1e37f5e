//===- RankGroup.h - this process as one rank of an expert-parallel job -*- C++ -*-===//
//
// What a process of an expert-parallel job holds while its model runs (moec-run
// and the Python package both use it): the job's place from the environment
// (Environment.h: torchrun's and mpirun's variables), the TCP store (rank 0
// serves it, unless a supervisor does: MOEC_EP_STORE_SERVED), the handshake
// that every rank loads the same artifact for the same group, and the
// communicator behind the moec_communicator the loader takes
// (moec_load_expert_parallel), made at the first load of an artifact of its
// target: a CPU artifact all-reduces host memory over TCP (HostCommunicator),
// a CUDA artifact device memory through NCCL (NcclCommunicator).
//
// The GPU of a rank: each model.so carries its own CUDA runtime, which uses
// device 0 of what the process sees, so join() sets CUDA_VISIBLE_DEVICES
// before anything of CUDA runs: unset, to the local rank (LOCAL_RANK, or
// moec-run --ep's rank); a list of several devices, to the local rank's entry;
// one device (the process was given its GPU), kept. A process that used CUDA
// before joining (torch, say) has read the variable already: set it yourself
// then, one device per process.
//
// A rank that fails calls abort(): the others' waits end at once with its
// message; a rank that never joins ends the others within the environment's
// timeout.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_DIST_RANKGROUP_H
#define MOEC_RUNTIME_DIST_RANKGROUP_H

#include "moec/moec.h"
#include "moec/runtime/Status.h"
#include "moec/runtime/dist/Environment.h"

#include <memory>
#include <string>

namespace moec::rt::dist {

/// The variable a supervisor sets for its ranks: it serves the store, so
/// rank 0 must not.
inline constexpr const char *kStoreServedVariable = "MOEC_EP_STORE_SERVED";

/// An artifact directory's identity for the handshake (its manifest's bytes,
/// hashed), the group size its manifest names (1 when it names none) and, if
/// asked, its target (cpu, cuda).
Status artifactIdentity(const std::string &artifact, std::string &identity, int &epSize,
                        std::string *target = nullptr);

class RankGroup {
public:
  /// Joins the job the environment describes: the rank's GPU (above), the store.
  static Status join(const DistEnvironment &environment, std::unique_ptr<RankGroup> &out);
  ~RankGroup();
  RankGroup(const RankGroup &) = delete;
  RankGroup &operator=(const RankGroup &) = delete;

  int rank() const;
  int size() const;
  /// Checks with every rank that they load `artifact` (a directory) for the
  /// same group, then loads it as this rank; an error names the mismatch.
  Status load(const std::string &artifact, moec_model *&model);
  /// Tells the other ranks that this one failed: their waits end with `why`.
  void abort(const std::string &why);

  struct State;

private:
  RankGroup();
  std::unique_ptr<State> state_;
};

} // namespace moec::rt::dist

#endif // MOEC_RUNTIME_DIST_RANKGROUP_H
