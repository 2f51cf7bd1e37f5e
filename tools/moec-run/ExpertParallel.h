//===- ExpertParallel.h - moec-run as one of N expert-parallel ranks -*- C++ -*-===//
//
// An artifact of `moec compile --ep-size=N` runs as N processes, one per rank,
// which load the same artifact and meet through a TCP store:
//
// - `moec-run ART --ep N ...` supervises: it serves the store on the loopback
//   (a free port), starts N copies of itself as ranks 0..N-1 (RANK,
//   WORLD_SIZE, MASTER_ADDR, MASTER_PORT set; the rest of the command line
//   unchanged) and waits for them. The first rank that fails ends the others;
//   the exit status is the failing rank's, or rank 0's.
// - Under a launcher (torchrun, mpirun, or the supervisor above: WORLD_SIZE
//   set) this process is one rank: it joins the store, checks with the other
//   ranks that they load the same artifact for the same group (a mismatch
//   ends every rank with an error naming it), and loads the artifact into the
//   group (moec_load_expert_parallel). Rank 0 writes and compares the
//   outputs; every rank computes them.
//
// A CPU artifact all-reduces host memory (HostCommunicator); CUDA artifacts do
// not print expert-parallel programs yet. MOEC_DIST_TIMEOUT (seconds) bounds
// every wait: a rank that dies or never joins ends the others with an error.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_TOOLS_MOEC_RUN_EXPERTPARALLEL_H
#define MOEC_TOOLS_MOEC_RUN_EXPERTPARALLEL_H

#include "moec/moec.h"
#include "moec/runtime/Status.h"

#include <memory>
#include <string>

namespace moec::tools {

/// This process's place in an expert-parallel group, held while the model runs.
class RankGroup {
public:
  RankGroup();
  ~RankGroup();
  /// Whether the environment makes this process a rank (WORLD_SIZE > 1).
  bool active() const;
  int rank() const;
  /// Joins the group of the environment for `artifact` (a directory): the
  /// store, the handshake, the communicator.
  rt::Status join(const std::string &artifact);
  /// Loads `artifact` as this rank; null with moec_last_error() on failure.
  moec_model *load(const std::string &artifact);
  /// Tells the other ranks that this one failed (they stop waiting for it).
  void abort(const std::string &why);

private:
  struct State;
  std::unique_ptr<State> state;
};

/// `moec-run --ep N`: starts N ranks of this program with `argv` (the --ep
/// flag removed) and returns the exit status to end with.
int superviseRanks(int ranks, int argc, char **argv, const std::string &programName);

} // namespace moec::tools

#endif // MOEC_TOOLS_MOEC_RUN_EXPERTPARALLEL_H
