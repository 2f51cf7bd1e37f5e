//===- ExpertParallel.cpp - moec-run as one of N expert-parallel ranks ----===//

#include "ExpertParallel.h"

#include "moec/runtime/dist/Environment.h"
#include "moec/runtime/dist/RankGroup.h"
#include "moec/runtime/dist/TcpStore.h"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

using moec::rt::Status;
namespace dist = moec::rt::dist;

namespace moec::tools {

bool launchedAsRank() {
  const char *world = std::getenv("WORLD_SIZE");
  const char *ompi = std::getenv("OMPI_COMM_WORLD_SIZE");
  return (world && std::strcmp(world, "1") != 0) || (ompi && std::strcmp(ompi, "1") != 0) ||
         (world && std::getenv(dist::kStoreServedVariable));
}

int superviseRanks(int ranks, int argc, char **argv, const std::string &programName) {
  auto fail = [&](const std::string &message) {
    std::fprintf(stderr, "%s: error: %s\n", programName.c_str(), message.c_str());
    return 2;
  };
  dist::DistEnvironment env;
  if (Status status = dist::readDistEnvironment(env); !status)
    return fail(status.message());
  std::unique_ptr<dist::TcpStoreServer> server;
  if (Status status = dist::TcpStoreServer::start("127.0.0.1", 0, env.timeout, server); !status)
    return fail(status.message());
  char self[4096];
  ssize_t length = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (length <= 0)
    return fail("cannot find this program's path to start its ranks");
  self[length] = '\0';

  std::vector<pid_t> children;
  for (int rank = 0; rank < ranks; ++rank) {
    pid_t pid = fork();
    if (pid < 0) {
      for (pid_t child : children)
        kill(child, SIGKILL);
      return fail(std::string("cannot start rank ") + std::to_string(rank) + ": " +
                  std::strerror(errno));
    }
    if (pid == 0) {
      setenv("RANK", std::to_string(rank).c_str(), 1);
      setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
      setenv("WORLD_SIZE", std::to_string(ranks).c_str(), 1);
      setenv("MASTER_ADDR", "127.0.0.1", 1);
      setenv("MASTER_PORT", std::to_string(server->port()).c_str(), 1);
      setenv(dist::kStoreServedVariable, "1", 1);
      unsetenv("OMPI_COMM_WORLD_RANK");
      unsetenv("OMPI_COMM_WORLD_SIZE");
      unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");
      execv(self, argv);
      std::fprintf(stderr, "%s: error: rank %d: cannot start %s: %s\n", programName.c_str(), rank,
                   self, std::strerror(errno));
      _exit(2);
    }
    children.push_back(pid);
  }
  // The first rank to fail decides the status; the others are ended then
  // (they would fail on their own within the timeout).
  int status = 0, remaining = ranks;
  bool failed = false;
  std::vector<bool> ended(ranks, false);
  while (remaining > 0) {
    int raw = 0;
    pid_t pid = waitpid(-1, &raw, 0);
    if (pid < 0) {
      if (errno == EINTR)
        continue;
      break;
    }
    --remaining;
    int rank = 0;
    while (rank < ranks && children[rank] != pid)
      ++rank;
    if (rank == ranks)
      continue;
    ended[rank] = true;
    int code = WIFEXITED(raw) ? WEXITSTATUS(raw) : 2;
    if (!WIFEXITED(raw))
      std::fprintf(stderr, "%s: error: rank %d ended by signal %d\n", programName.c_str(), rank,
                   WTERMSIG(raw));
    if (code != 0 && !failed) {
      failed = true;
      status = code;
      std::this_thread::sleep_for(std::chrono::milliseconds(500)); // their own errors first
      for (int other = 0; other < ranks; ++other)
        if (!ended[other])
          kill(children[other], SIGTERM);
    } else if (rank == 0 && !failed) {
      status = code;
    }
  }
  return status;
}

} // namespace moec::tools
