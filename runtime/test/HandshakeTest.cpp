//===- HandshakeTest.cpp - ranks agree on the artifact and the job ---------===//

#include "DistTestUtil.h"
#include "moec/runtime/dist/Handshake.h"

namespace moec::rt::test {
namespace {

using dist::HandshakeInfo;
using dist::TcpStore;

/// Rank r of sizes[r] with infos[r], as threads: their statuses, and the
/// longest any took.
struct Outcome {
  std::vector<Status> statuses;
  int64_t ms = 0;
};
Outcome handshakes(const std::vector<int> &ranks, const std::vector<int> &sizes,
                   const std::vector<HandshakeInfo> &infos, milliseconds timeout) {
  TestServer server;
  Outcome outcome;
  outcome.statuses.assign(ranks.size(), Status::ok());
  auto start = Clock::now();
  std::vector<std::thread> threads;
  for (size_t i = 0; i < ranks.size(); ++i)
    threads.emplace_back([&, i] {
      outcome.statuses[i] = runRank(server.port, ranks[i], sizes[i], timeout,
                                    [&](TcpStore &store) {
                                      return dist::handshake(store, infos[i]);
                                    });
    });
  for (std::thread &t : threads)
    t.join();
  outcome.ms = elapsedMs(start);
  return outcome;
}

const HandshakeInfo kInfo{"manifest-sha256:0123abcd", 4};

/// Every status fails and at least one says `what`.
void expectAllFail(const Outcome &outcome, const std::string &what) {
  bool said = false;
  for (const Status &s : outcome.statuses) {
    ASSERT_FALSE(s.isOk());
    said |= s.message().find(what) != std::string::npos;
  }
  EXPECT_TRUE(said) << "none says '" << what << "': " << outcome.statuses[0].message();
}

TEST(Handshake, AgreeingRanksPass) {
  Outcome outcome = handshakes({0, 1, 2, 3}, {4, 4, 4, 4}, {kInfo, kInfo, kInfo, kInfo},
                               milliseconds(5000));
  for (const Status &s : outcome.statuses)
    EXPECT_TRUE(s.isOk()) << s.message();
  Outcome alone = handshakes({0}, {1}, {kInfo}, milliseconds(5000));
  EXPECT_TRUE(alone.statuses[0].isOk()) << alone.statuses[0].message();
}

TEST(Handshake, ADifferentArtifactIsRefusedByEveryRank) {
  HandshakeInfo other = kInfo;
  other.artifact = "manifest-sha256:ffff";
  Outcome outcome = handshakes({0, 1, 2}, {3, 3, 3}, {kInfo, other, kInfo}, milliseconds(5000));
  expectAllFail(outcome, "runs artifact 'manifest-sha256:ffff'");
  EXPECT_LT(outcome.ms, 3000);
}

TEST(Handshake, ADifferentEPSizeIsRefused) {
  HandshakeInfo other = kInfo;
  other.epSize = 2;
  Outcome outcome = handshakes({0, 1}, {2, 2}, {kInfo, other}, milliseconds(5000));
  expectAllFail(outcome, "EP size");
}

TEST(Handshake, ADuplicateRankIsRefused) {
  Outcome outcome = handshakes({0, 1, 1}, {3, 3, 3}, {kInfo, kInfo, kInfo}, milliseconds(5000));
  expectAllFail(outcome, "rank 1 is claimed twice");
  EXPECT_LT(outcome.ms, 3000);
}

TEST(Handshake, AWorldSizeMismatchIsRefusedWithoutWaiting) {
  // Rank 1 thinks the world has 3 ranks and waits for a third record; rank 0
  // sees the mismatch and aborts the store, which ends rank 1's wait.
  Outcome outcome = handshakes({0, 1}, {2, 3}, {kInfo, kInfo}, milliseconds(5000));
  expectAllFail(outcome, "world size");
  EXPECT_LT(outcome.ms, 3000);
}

TEST(Handshake, AMissingRankIsNamed) {
  Outcome outcome = handshakes({0, 2}, {3, 3}, {kInfo, kInfo}, milliseconds(1000));
  for (const Status &s : outcome.statuses) {
    ASSERT_FALSE(s.isOk());
    EXPECT_NE(s.message().find("2 of 3 processes joined"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("rank(s) 1 missing"), std::string::npos) << s.message();
  }
  EXPECT_LT(outcome.ms, 2500);
}

TEST(Handshake, MoreProcessesThanTheWorldSizeAreRefused) {
  // The process that joins third always fails (and aborts the store); the
  // first two fail too if it joined before they finished, else at their next
  // wait on the store.
  Outcome outcome = handshakes({0, 1, 1}, {2, 2, 2}, {kInfo, kInfo, kInfo}, milliseconds(5000));
  int failed = 0;
  bool said = false;
  for (const Status &s : outcome.statuses) {
    failed += !s.isOk();
    said |= s.message().find("more processes than WORLD_SIZE") != std::string::npos;
  }
  EXPECT_GE(failed, 1);
  EXPECT_TRUE(said) << outcome.statuses[2].message();
}

TEST(Handshake, ABadIdentityIsRefusedBeforeJoining) {
  HandshakeInfo bad = kInfo;
  bad.artifact = "two\nlines";
  Outcome outcome = handshakes({0}, {1}, {bad}, milliseconds(1000));
  ASSERT_FALSE(outcome.statuses[0].isOk());
  EXPECT_NE(outcome.statuses[0].message().find("one line"), std::string::npos);
}

} // namespace
} // namespace moec::rt::test
