//===- DistTestUtil.h - ranks as threads or processes for the dist tests -*- C++ -*-===//
//
// A test job: a store server on a free loopback port, and ranks that each
// connect to it and run a body, as threads of this process or as forked
// processes (each reporting its status through a pipe). The parent never
// waits unboundedly: a forked rank that outlives its limit is killed and the
// test fails.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_TEST_DISTTESTUTIL_H
#define MOEC_RUNTIME_TEST_DISTTESTUTIL_H

#include "TestUtil.h"
#include "moec/runtime/dist/TcpStore.h"

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

namespace moec::rt::test {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

inline constexpr const char *kLoopback = "127.0.0.1";

/// The milliseconds since `start`.
inline int64_t elapsedMs(Clock::time_point start) {
  return std::chrono::duration_cast<milliseconds>(Clock::now() - start).count();
}

/// A store server on a free loopback port.
struct TestServer {
  std::unique_ptr<dist::TcpStoreServer> server;
  uint16_t port = 0;
  explicit TestServer(milliseconds frameTimeout = milliseconds(2000)) {
    Status status = dist::TcpStoreServer::start(kLoopback, 0, frameTimeout, server);
    EXPECT_TRUE(status.isOk()) << status.message();
    if (server)
      port = server->port();
  }
};

/// What a rank does once connected, as rank `rank` of `worldSize`.
using RankBody = std::function<Status(dist::TcpStore &store)>;

/// Connects as rank `rank` of `worldSize` and runs the body.
inline Status runRank(uint16_t port, int rank, int worldSize, milliseconds timeout,
                      const RankBody &body) {
  std::unique_ptr<dist::TcpStore> store;
  MOEC_RETURN_IF_ERROR(
      dist::TcpStore::connect(kLoopback, port, rank, worldSize, timeout, store));
  return body(*store);
}

/// Runs ranks `ranks` (of `worldSize`) as threads; one status per rank given.
inline std::vector<Status> runThreads(uint16_t port, int worldSize, const std::vector<int> &ranks,
                                      milliseconds timeout, const RankBody &body) {
  std::vector<Status> statuses(ranks.size(), Status::ok());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < ranks.size(); ++i)
    threads.emplace_back(
        [&, i] { statuses[i] = runRank(port, ranks[i], worldSize, timeout, body); });
  for (std::thread &t : threads)
    t.join();
  return statuses;
}

/// All ranks 0..worldSize-1 as threads.
inline std::vector<Status> runThreads(uint16_t port, int worldSize, milliseconds timeout,
                                      const RankBody &body) {
  std::vector<int> ranks;
  for (int r = 0; r < worldSize; ++r)
    ranks.push_back(r);
  return runThreads(port, worldSize, ranks, timeout, body);
}

/// A forked rank's result: how it ended and its status's message.
struct ProcessResult {
  bool exited = false; // false: killed by a signal (or by the limit)
  int code = 0;
  std::string message; // "" if OK
};

/// Runs ranks 0..worldSize-1 as forked processes (only the forking thread
/// runs in each), killing any that outlives `limit`.
inline std::vector<ProcessResult> runProcesses(uint16_t port, int worldSize,
                                               milliseconds timeout, milliseconds limit,
                                               const RankBody &body) {
  std::vector<pid_t> pids(worldSize, -1);
  std::vector<int> pipes(worldSize, -1);
  for (int r = 0; r < worldSize; ++r) {
    int fds[2];
    if (pipe(fds) != 0)
      return {};
    pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      Status status = runRank(port, r, worldSize, timeout, body);
      const std::string &message = status.message();
      size_t at = 0;
      while (at < message.size()) {
        ssize_t n = write(fds[1], message.data() + at, message.size() - at);
        if (n <= 0)
          break;
        at += static_cast<size_t>(n);
      }
      _exit(status.isOk() ? 0 : 1);
    }
    close(fds[1]);
    pids[r] = pid;
    pipes[r] = fds[0];
  }
  std::vector<ProcessResult> results(worldSize);
  auto start = Clock::now();
  for (int r = 0; r < worldSize; ++r) {
    int wstatus = 0;
    for (;;) {
      pid_t done = waitpid(pids[r], &wstatus, WNOHANG);
      if (done == pids[r])
        break;
      if (elapsedMs(start) > limit.count()) {
        kill(pids[r], SIGKILL);
        waitpid(pids[r], &wstatus, 0);
        results[r].message = "killed: outlived the test's limit (a hang)";
        break;
      }
      std::this_thread::sleep_for(milliseconds(5));
    }
    if (WIFEXITED(wstatus)) {
      results[r].exited = true;
      results[r].code = WEXITSTATUS(wstatus);
    }
    char buffer[4096];
    ssize_t n;
    while ((n = read(pipes[r], buffer, sizeof(buffer))) > 0)
      results[r].message.append(buffer, static_cast<size_t>(n));
    close(pipes[r]);
  }
  return results;
}

} // namespace moec::rt::test

#endif // MOEC_RUNTIME_TEST_DISTTESTUTIL_H
