//===- RankGroup.cpp - this process as one rank of an expert-parallel job -===//

#include "moec/runtime/dist/RankGroup.h"

#include "moec/runtime/ArtifactFormat.h"
#include "moec/runtime/dist/CommunicatorABI.h"
#include "moec/runtime/dist/Handshake.h"
#include "moec/runtime/dist/HostCommunicator.h"
#include "moec/runtime/dist/TcpStore.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace moec::rt::dist {

struct RankGroup::State {
  DistEnvironment environment;
  std::unique_ptr<TcpStoreServer> server;
  std::unique_ptr<TcpStore> store;
  std::unique_ptr<HostCommunicator> communicator;
  moec_communicator abi{};
};

Status artifactIdentity(const std::string &artifact, std::string &identity, int &epSize) {
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
  if (env.rank == 0 && !std::getenv(kStoreServedVariable))
    MOEC_RETURN_IF_ERROR(
        TcpStoreServer::start(env.masterAddress, env.masterPort, env.timeout, s.server));
  MOEC_RETURN_IF_ERROR(TcpStore::connect(env.masterAddress, env.masterPort, env.rank,
                                         env.worldSize, env.timeout, s.store));
  if (Status status = HostCommunicator::create(*s.store, env.timeout, s.communicator); !status) {
    s.store->abort("rank " + std::to_string(env.rank) + ": " + status.message());
    return status.withContext("rank " + std::to_string(env.rank) + " of " +
                              std::to_string(env.worldSize));
  }
  fillCommunicatorABI(*s.communicator, s.abi);
  out = std::move(group);
  return Status::ok();
}

int RankGroup::rank() const { return state_->environment.rank; }
int RankGroup::size() const { return state_->environment.worldSize; }

Status RankGroup::load(const std::string &artifact, moec_model *&model) {
  State &s = *state_;
  std::string identity;
  int epSize = 1;
  Status status = artifactIdentity(artifact, identity, epSize);
  if (status)
    status = handshake(*s.store, {identity, epSize});
  if (!status) {
    abort(status.message());
    return status.withContext("rank " + std::to_string(rank()) + " of " + std::to_string(size()));
  }
  model = moec_load_expert_parallel(artifact.c_str(), &s.abi);
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
