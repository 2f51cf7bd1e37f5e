//===- RankGroup.cpp - this process as one rank of an expert-parallel job -===//

#include "moec/runtime/dist/RankGroup.h"

#include "moec/runtime/ArtifactFormat.h"
#include "moec/runtime/dist/CommunicatorABI.h"
#include "moec/runtime/dist/Handshake.h"
#include "moec/runtime/dist/HostCommunicator.h"
#include "moec/runtime/dist/NcclCommunicator.h"
#include "moec/runtime/dist/TcpStore.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace moec::rt::dist {

struct RankGroup::State {
  DistEnvironment environment;
  std::unique_ptr<TcpStoreServer> server;
  std::unique_ptr<TcpStore> store;
  /// Made on the first load of an artifact of their target: host memory over
  /// TCP (cpu), device memory through NCCL (cuda).
  std::unique_ptr<HostCommunicator> host;
  std::unique_ptr<NcclCommunicator> nccl;
  moec_communicator hostABI{}, ncclABI{};
};

Status artifactIdentity(const std::string &artifact, std::string &identity, int &epSize,
                        std::string *target) {
  std::ifstream file(artifact + "/" + artifact::kManifestFile, std::ios::binary);
  if (!file)
    return Status::error(artifact + ": no " + artifact::kManifestFile +
                         " (expert-parallel ranks load an artifact directory)");
  std::stringstream text;
  text << file.rdbuf();
  std::string bytes = text.str();
  identity = "manifest " + artifact::hashText(artifact::contentHash(bytes.data(), bytes.size()));
  epSize = 1;
  std::istringstream lines(bytes);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("expert_parallel ", 0) == 0)
      epSize = std::atoi(line.c_str() + 16);
    else if (target && line.rfind("target ", 0) == 0)
      *target = line.substr(7);
  return Status::ok();
}

RankGroup::RankGroup() : state_(std::make_unique<State>()) {}

RankGroup::~RankGroup() {
  // Rank 0 serves the store last: the others may still be reading it.
  if (state_->store && state_->server)
    (void)state_->store->barrier();
}

Status RankGroup::join(const DistEnvironment &environment, std::unique_ptr<RankGroup> &out) {
  std::unique_ptr<RankGroup> group(new RankGroup());
  State &s = *group->state_;
  s.environment = environment;
  const DistEnvironment &env = s.environment;
  std::string where = "rank " + std::to_string(env.rank) + " of " + std::to_string(env.worldSize);
  // The rank's GPU, before anything of CUDA runs in this process.
  if (Status status = selectRankDevice(env.localRank); !status)
    return status.withContext(where);
  if (env.rank == 0 && !std::getenv(kStoreServedVariable))
    MOEC_RETURN_IF_ERROR(
        TcpStoreServer::start(env.masterAddress, env.masterPort, env.timeout, s.server));
  MOEC_RETURN_IF_ERROR(TcpStore::connect(env.masterAddress, env.masterPort, env.rank,
                                         env.worldSize, env.timeout, s.store));
  out = std::move(group);
  return Status::ok();
}

/// The communicator for artifacts of `target`, made on first use (every rank
/// loads the same artifacts in the same order: the handshake said so).
static Status communicatorFor(RankGroup::State &s, const std::string &target,
                              const moec_communicator *&out) {
  const DistEnvironment &env = s.environment;
  if (target == "cuda") {
    if (!s.nccl) {
      NcclOptions options;
      options.device = 0; // the one CUDA_VISIBLE_DEVICES leaves (selectRankDevice)
      options.timeout = env.timeout;
      MOEC_RETURN_IF_ERROR(NcclCommunicator::create(*s.store, options, s.nccl));
      fillCommunicatorABI(*s.nccl, s.ncclABI);
      if (const char *verbose = std::getenv("MOEC_DIST_VERBOSE"); verbose && *verbose == '1')
        std::fprintf(stderr, "moec: rank %d of %d: NCCL from %s, CUDA_VISIBLE_DEVICES=%s\n",
                     env.rank, env.worldSize, s.nccl->library().c_str(),
                     std::getenv("CUDA_VISIBLE_DEVICES") ? std::getenv("CUDA_VISIBLE_DEVICES")
                                                          : "(unset)");
    }
    out = &s.ncclABI;
    return Status::ok();
  }
  if (!s.host) {
    MOEC_RETURN_IF_ERROR(HostCommunicator::create(*s.store, env.timeout, s.host));
    fillCommunicatorABI(*s.host, s.hostABI);
  }
  out = &s.hostABI;
  return Status::ok();
}

int RankGroup::rank() const { return state_->environment.rank; }
int RankGroup::size() const { return state_->environment.worldSize; }

Status RankGroup::load(const std::string &artifact, moec_model *&model) {
  State &s = *state_;
  std::string identity, target;
  int epSize = 1;
  Status status = artifactIdentity(artifact, identity, epSize, &target);
  if (status)
    status = handshake(*s.store, {identity, epSize});
  const moec_communicator *comm = nullptr;
  if (status)
    status = communicatorFor(s, target, comm);
  if (!status) {
    abort(status.message());
    return status.withContext("rank " + std::to_string(rank()) + " of " + std::to_string(size()));
  }
  model = moec_load_expert_parallel(artifact.c_str(), comm);
  if (!model) {
    std::string why = moec_last_error();
    abort(why);
    return Status::error(why);
  }
  return Status::ok();
}

void RankGroup::abort(const std::string &why) {
  if (state_->store)
    state_->store->abort("rank " + std::to_string(rank()) + ": " + why);
}

} // namespace moec::rt::dist
