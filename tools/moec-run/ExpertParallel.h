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
// A rank's side is the runtime's dist::RankGroup. A CPU artifact all-reduces
// host memory (HostCommunicator), a CUDA artifact device memory through NCCL
// (NcclCommunicator), each rank on the GPU its LOCAL_RANK picks through
// CUDA_VISIBLE_DEVICES (RankGroup.h). `--ep 1` is a group of one through the
// same path. MOEC_DIST_TIMEOUT (seconds) bounds every wait: a rank that dies
// or never joins ends the others with an error.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_TOOLS_MOEC_RUN_EXPERTPARALLEL_H
#define MOEC_TOOLS_MOEC_RUN_EXPERTPARALLEL_H

#include <string>

namespace moec::tools {

/// Whether the environment makes this process one rank of a job (WORLD_SIZE
/// or OMPI_COMM_WORLD_SIZE above 1, or a rank the supervisor started, one of
/// a group of one too).
bool launchedAsRank();

/// `moec-run --ep N`: starts N ranks of this program with `argv` (the --ep
/// flag removed) and returns the exit status to end with.
int superviseRanks(int ranks, int argc, char **argv, const std::string &programName);

} // namespace moec::tools

#endif // MOEC_TOOLS_MOEC_RUN_EXPERTPARALLEL_H
