//===- TcpStoreTest.cpp - the store: frames, server and clients ------------===//

#include "DistTestUtil.h"
#include "Socket.h"
#include "StoreFrame.h"

#include <atomic>
#include <cstring>

#include <netinet/in.h>
#include <sys/socket.h>

namespace moec::rt::test {
namespace {

using dist::FrameParse;
using dist::StoreFrame;
using dist::StoreOp;
using dist::TcpStore;

FrameParse parse(const std::string &bytes, StoreFrame &frame, size_t &consumed,
                 std::string &error) {
  return dist::parseStoreFrame(reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size(),
                               frame, consumed, error);
}

TEST(StoreFrame, RoundTripsAndNeedsEveryByte) {
  std::vector<StoreFrame> frames = {
      {StoreOp::Set, 0, 0, {"key", std::string("v\0alue", 6)}},
      {StoreOp::Get, 1500, 0, {"a", "b", "moec/abort"}},
      {StoreOp::Add, 0, -7, {"counter"}},
      {StoreOp::Ok, 0, 2, {std::string(1000, 'x')}},
      {StoreOp::Ok, 0, 0, {}},
      {StoreOp::Timeout, 0, 0, {}},
      {StoreOp::Error, 0, 0, {"why"}}};
  for (const StoreFrame &frame : frames) {
    std::string bytes = dist::encodeStoreFrame(frame);
    // Two frames back to back: the first is read alone.
    std::string twice = bytes + bytes;
    StoreFrame parsed;
    size_t consumed = 0;
    std::string error;
    ASSERT_EQ(parse(twice, parsed, consumed, error), FrameParse::Complete) << error;
    EXPECT_EQ(consumed, bytes.size());
    EXPECT_EQ(parsed.op, frame.op);
    EXPECT_EQ(parsed.timeoutMs, frame.timeoutMs);
    EXPECT_EQ(parsed.number, frame.number);
    EXPECT_EQ(parsed.strings, frame.strings);
    for (size_t cut = 0; cut < bytes.size(); ++cut)
      ASSERT_EQ(parse(bytes.substr(0, cut), parsed, consumed, error), FrameParse::Incomplete)
          << cut;
  }
}

TEST(StoreFrame, RefusesWhatIsNotAFrame) {
  std::string good = dist::encodeStoreFrame({StoreOp::Set, 0, 0, {"k", "v"}});
  struct Case {
    std::string bytes;
    const char *error;
  };
  auto patched = [&](size_t at, std::string with) {
    std::string b = good;
    b.replace(at, with.size(), with);
    return b;
  };
  std::vector<Case> cases = {
      {"GET / HTTP/1.1\r\n\r\n", "bad magic"},
      {"Mo", ""}, // a prefix of the magic is still Incomplete (checked below)
      {patched(4, "\x63"), "unknown store op 99"},
      {patched(5, "\x02"), "version 2"},
      {patched(8, std::string("\xff\xff\xff\x7f", 4)), "at most"},
      {patched(6, std::string("\x09\x00", 2)), "9 strings"},
      {patched(24, std::string("\xff\x00\x00\x00", 4)), "overruns the body"},
      {patched(8, std::string("\x0b\x00\x00\x00", 4)) + "x", "bytes after its strings"},
      {dist::encodeStoreFrame({StoreOp::Set, 0, 0, {"k"}}), "a key and a value"},
      {dist::encodeStoreFrame({StoreOp::Get, 0, 0, {""}}), "empty key"},
      {dist::encodeStoreFrame({StoreOp::Add, 0, 0, {std::string(2000, 'k')}}), "2000 bytes"},
  };
  for (const Case &c : cases) {
    StoreFrame frame;
    size_t consumed = 0;
    std::string error;
    FrameParse result = parse(c.bytes, frame, consumed, error);
    if (!*c.error) {
      EXPECT_EQ(result, FrameParse::Incomplete);
      continue;
    }
    ASSERT_EQ(result, FrameParse::Malformed) << c.error;
    EXPECT_NE(error.find(c.error), std::string::npos) << error;
    EXPECT_EQ(consumed, 0u);
  }
  // A bad header is refused from its first bytes, without waiting for a body.
  StoreFrame frame;
  size_t consumed = 0;
  std::string error;
  EXPECT_EQ(parse("XY", frame, consumed, error), FrameParse::Malformed);
}

/// Every rank publishes a value, meets the others at a barrier, reads theirs
/// and counts itself in.
Status exchangeValues(TcpStore &store) {
  std::string me = std::to_string(store.rank());
  MOEC_RETURN_IF_ERROR(store.set("value/" + me, "from rank " + me));
  MOEC_RETURN_IF_ERROR(store.barrier());
  for (int r = 0; r < store.worldSize(); ++r) {
    std::string value;
    MOEC_RETURN_IF_ERROR(store.get("value/" + std::to_string(r), value));
    if (value != "from rank " + std::to_string(r))
      return Status::error("rank " + me + " read '" + value + "'");
  }
  int64_t count = 0;
  MOEC_RETURN_IF_ERROR(store.add("count", 1, count));
  MOEC_RETURN_IF_ERROR(store.barrier());
  std::string total;
  MOEC_RETURN_IF_ERROR(store.get("count", total));
  if (total != std::to_string(store.worldSize()))
    return Status::error("count " + total + " after the barrier");
  // A second round of barriers with values set between them.
  for (int round = 0; round < 3; ++round) {
    MOEC_RETURN_IF_ERROR(store.set("round/" + std::to_string(round) + "/" + me, "x"));
    MOEC_RETURN_IF_ERROR(store.barrier());
    for (int r = 0; r < store.worldSize(); ++r) {
      std::string value;
      bool found = false;
      MOEC_RETURN_IF_ERROR(
          store.tryGet("round/" + std::to_string(round) + "/" + std::to_string(r), value, found));
      if (!found)
        return Status::error("round " + std::to_string(round) + ": rank " + std::to_string(r) +
                             " passed the barrier before setting its value");
    }
  }
  return Status::ok();
}

TEST(TcpStore, SetGetBarrierWithThreads) {
  for (int n : {1, 2, 4}) {
    TestServer server;
    for (const Status &s : runThreads(server.port, n, milliseconds(5000), exchangeValues))
      EXPECT_TRUE(s.isOk()) << "world size " << n << ": " << s.message();
  }
}

TEST(TcpStore, SetGetBarrierWithProcesses) {
  TestServer server;
  for (const ProcessResult &r :
       runProcesses(server.port, 3, milliseconds(5000), milliseconds(15000), exchangeValues))
    EXPECT_TRUE(r.exited && r.code == 0) << r.message;
}

TEST(TcpStore, GetWaitsForTheValue) {
  TestServer server;
  auto statuses = runThreads(server.port, 3, milliseconds(5000), [](TcpStore &store) {
    if (store.rank() == 0) {
      std::this_thread::sleep_for(milliseconds(200));
      return store.set("late", "here");
    }
    std::string value;
    auto start = Clock::now();
    MOEC_RETURN_IF_ERROR(store.get("late", value));
    if (value != "here" || elapsedMs(start) < 150)
      return Status::error("got '" + value + "' after " + std::to_string(elapsedMs(start)) +
                           " ms");
    return Status::ok();
  });
  for (const Status &s : statuses)
    EXPECT_TRUE(s.isOk()) << s.message();
}

TEST(TcpStore, GetOfAnAbsentKeyTimesOut) {
  TestServer server;
  std::unique_ptr<TcpStore> store;
  ASSERT_OK(TcpStore::connect(kLoopback, server.port, 0, 1, milliseconds(5000), store));
  std::string value;
  auto start = Clock::now();
  Status status = store->get("never", value, milliseconds(300));
  ASSERT_FALSE(status.isOk());
  EXPECT_NE(status.message().find("'never'"), std::string::npos) << status.message();
  EXPECT_NE(status.message().find("0.3 s"), std::string::npos) << status.message();
  EXPECT_GE(elapsedMs(start), 290);
  EXPECT_LT(elapsedMs(start), 1500);
  // The connection is still usable.
  ASSERT_OK(store->set("never", "now"));
  ASSERT_OK(store->get("never", value, milliseconds(300)));
  EXPECT_EQ(value, "now");
  // Add to a value that is no integer.
  int64_t sum = 0;
  Status add = store->add("never", 1, sum);
  ASSERT_FALSE(add.isOk());
  EXPECT_NE(add.message().find("holds no integer"), std::string::npos) << add.message();
}

TEST(TcpStore, BarrierNamesTheRankThatNeverJoins) {
  TestServer server;
  auto start = Clock::now();
  // World size 4; rank 2 never starts.
  auto statuses = runThreads(server.port, 4, {0, 1, 3}, milliseconds(1000),
                             [](TcpStore &store) { return store.barrier(); });
  EXPECT_LT(elapsedMs(start), 2500);
  for (const Status &s : statuses) {
    ASSERT_FALSE(s.isOk());
    EXPECT_NE(s.message().find("rank(s) 2 did not arrive"), std::string::npos) << s.message();
  }
}

TEST(TcpStore, NoServerIsAnErrorNamingTheAddress) {
  // A port that nothing listens on: bound, then closed.
  uint16_t port = 0;
  {
    TestServer server;
    port = server.port;
  }
  std::unique_ptr<TcpStore> store;
  auto start = Clock::now();
  Status status = TcpStore::connect(kLoopback, port, 1, 2, milliseconds(500), store);
  ASSERT_FALSE(status.isOk());
  EXPECT_NE(status.message().find("127.0.0.1:" + std::to_string(port)), std::string::npos)
      << status.message();
  EXPECT_NE(status.message().find("rank 0"), std::string::npos) << status.message();
  EXPECT_GE(elapsedMs(start), 450);
  EXPECT_LT(elapsedMs(start), 2000);
}

TEST(TcpStore, APortInUseIsAnErrorNamingTheAddress) {
  TestServer first;
  std::unique_ptr<dist::TcpStoreServer> second;
  Status status = dist::TcpStoreServer::start(kLoopback, first.port, milliseconds(1000), second);
  ASSERT_FALSE(status.isOk());
  EXPECT_NE(status.message().find("127.0.0.1:" + std::to_string(first.port)), std::string::npos)
      << status.message();
  EXPECT_NE(status.message().find("in use"), std::string::npos) << status.message();
  std::unique_ptr<TcpStore> store;
  Status bad = TcpStore::connect(kLoopback, 0, 0, 1, milliseconds(100), store);
  ASSERT_FALSE(bad.isOk());
  EXPECT_NE(bad.message().find("port 0"), std::string::npos) << bad.message();
  // An address of no interface of this host (TEST-NET-1; numeric, no DNS).
  Status foreign = dist::TcpStoreServer::start("192.0.2.1", 0, milliseconds(100), second);
  ASSERT_FALSE(foreign.isOk());
  EXPECT_NE(foreign.message().find("cannot listen on 192.0.2.1:0"), std::string::npos)
      << foreign.message();
}

/// A raw connection to the store's port.
int rawConnect(uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr *>(&address), sizeof(address)), 0);
  timeval limit{3, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
  return fd;
}

/// Reads until the server closes (or 3 s pass); the bytes read.
std::string readUntilClosed(int fd) {
  std::string got;
  char buffer[4096];
  ssize_t n;
  while ((n = recv(fd, buffer, sizeof(buffer), 0)) > 0)
    got.append(buffer, static_cast<size_t>(n));
  close(fd);
  return got;
}

TEST(TcpStore, MalformedBytesCloseThatConnectionOnly) {
  TestServer server(milliseconds(300));
  std::unique_ptr<TcpStore> store;
  ASSERT_OK(TcpStore::connect(kLoopback, server.port, 0, 1, milliseconds(5000), store));
  ASSERT_OK(store->set("before", "1"));

  // Not a frame: an Error reply naming the reason, then the close.
  int fd = rawConnect(server.port);
  std::string garbage = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_EQ(send(fd, garbage.data(), garbage.size(), 0), static_cast<ssize_t>(garbage.size()));
  std::string reply = readUntilClosed(fd);
  EXPECT_NE(reply.find("bad magic"), std::string::npos) << reply;

  // A header that claims 4 GiB.
  fd = rawConnect(server.port);
  std::string huge = dist::encodeStoreFrame({StoreOp::Set, 0, 0, {"k", "v"}});
  huge.replace(8, 4, std::string("\xff\xff\xff\xff", 4));
  ASSERT_EQ(send(fd, huge.data(), huge.size(), 0), static_cast<ssize_t>(huge.size()));
  reply = readUntilClosed(fd);
  EXPECT_NE(reply.find("at most"), std::string::npos) << reply;

  // Half a frame, then silence: closed after the frame timeout.
  fd = rawConnect(server.port);
  std::string half = dist::encodeStoreFrame({StoreOp::Set, 0, 0, {"k", "value"}}).substr(0, 20);
  ASSERT_EQ(send(fd, half.data(), half.size(), 0), static_cast<ssize_t>(half.size()));
  auto start = Clock::now();
  reply = readUntilClosed(fd);
  EXPECT_NE(reply.find("not finished"), std::string::npos) << reply;
  EXPECT_LT(elapsedMs(start), 2000);

  // A reply op sent as a request.
  fd = rawConnect(server.port);
  std::string ok = dist::encodeStoreFrame({StoreOp::Ok, 0, 0, {}});
  ASSERT_EQ(send(fd, ok.data(), ok.size(), 0), static_cast<ssize_t>(ok.size()));
  reply = readUntilClosed(fd);
  EXPECT_NE(reply.find("where a request belongs"), std::string::npos) << reply;

  // Random bytes.
  std::mt19937 rng(5);
  for (int i = 0; i < 20; ++i) {
    fd = rawConnect(server.port);
    std::string bytes(1 + rng() % 200, '\0');
    for (char &c : bytes)
      c = static_cast<char>(rng());
    if (i % 2)
      bytes.replace(0, 4, "MoSt"); // past the magic check
    (void)send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    readUntilClosed(fd);
  }

  EXPECT_GE(server.server->rejectedConnections(), 4u);
  // The well-behaved client was not disturbed.
  std::string value;
  ASSERT_OK(store->get("before", value));
  ASSERT_OK(store->set("after", "2"));
  ASSERT_OK(store->get("after", value));
  EXPECT_EQ(value, "2");
}

TEST(TcpStore, AbortEndsEveryWaitAtOnce) {
  TestServer server;
  auto start = Clock::now();
  auto statuses = runThreads(server.port, 3, milliseconds(5000), [](TcpStore &store) {
    if (store.rank() == 1) {
      std::this_thread::sleep_for(milliseconds(100));
      store.abort("the weights did not load");
      return Status::error("aborted itself");
    }
    std::string value;
    return store.get("never-set", value);
  });
  EXPECT_LT(elapsedMs(start), 2000);
  for (int r : {0, 2}) {
    ASSERT_FALSE(statuses[r].isOk());
    EXPECT_NE(statuses[r].message().find("aborted: rank 1: the weights did not load"),
              std::string::npos)
        << statuses[r].message();
  }
}

TEST(TcpStore, AServerThatGoesAwayIsAnError) {
  auto server = std::make_unique<TestServer>();
  std::unique_ptr<TcpStore> store;
  ASSERT_OK(TcpStore::connect(kLoopback, server->port, 0, 1, milliseconds(5000), store));
  std::thread stopper([&] {
    std::this_thread::sleep_for(milliseconds(100));
    server.reset();
  });
  std::string value;
  auto start = Clock::now();
  Status status = store->get("never", value);
  stopper.join();
  ASSERT_FALSE(status.isOk());
  EXPECT_NE(status.message().find("closed the connection"), std::string::npos)
      << status.message();
  EXPECT_LT(elapsedMs(start), 2000);
  Status again = store->set("x", "y");
  ASSERT_FALSE(again.isOk());
  EXPECT_NE(again.message().find("earlier error"), std::string::npos) << again.message();
}

/// A fake server on a free port: accepts one connection, reads the request
/// and answers `reply` (nothing if empty), then holds the connection open.
struct FakeServer {
  dist::Socket listener;
  uint16_t port = 0;
  std::thread thread;
  explicit FakeServer(std::string reply) {
    EXPECT_TRUE(dist::listenTcp(kLoopback, 0, listener, port).isOk());
    thread = std::thread([this, reply] {
      dist::Socket peer;
      bool timedOut = false;
      if (!dist::acceptTcp(listener, dist::Deadline(milliseconds(3000)), peer, timedOut).isOk() ||
          timedOut)
        return;
      uint8_t request[256];
      dist::Deadline deadline(milliseconds(3000));
      if (!dist::receiveAll(peer, request, dist::kStoreHeaderBytes, deadline, "client").isOk() ||
          request[8] > 200)
        return;
      (void)dist::receiveAll(peer, request, request[8], deadline, "client");
      if (!reply.empty())
        (void)dist::sendAll(peer, reply.data(), reply.size(), dist::Deadline(milliseconds(3000)),
                            "client");
      // Held open until the client, having failed, closes it.
      char byte;
      (void)dist::receiveAll(peer, &byte, 1, dist::Deadline(milliseconds(3000)), "client");
    });
  }
  ~FakeServer() { thread.join(); }
};

TEST(TcpStore, AMalformedOrMissingReplyIsAnError) {
  {
    FakeServer fake("HTTP/1.1 400 Bad Request\r\n\r\n");
    std::unique_ptr<TcpStore> store;
    ASSERT_OK(TcpStore::connect(kLoopback, fake.port, 0, 1, milliseconds(1000), store));
    Status status = store->set("k", "v");
    ASSERT_FALSE(status.isOk());
    EXPECT_NE(status.message().find("malformed reply from the store at 127.0.0.1:" +
                                    std::to_string(fake.port) + ": not a store frame"),
              std::string::npos)
        << status.message();
  }
  {
    // A reply that claims more than a frame may hold.
    std::string huge = dist::encodeStoreFrame({StoreOp::Ok, 0, 0, {}});
    huge.replace(8, 4, std::string("\xff\xff\xff\x7f", 4));
    FakeServer fake(huge);
    std::unique_ptr<TcpStore> store;
    ASSERT_OK(TcpStore::connect(kLoopback, fake.port, 0, 1, milliseconds(1000), store));
    std::string value;
    Status status = store->get("k", value, milliseconds(100));
    ASSERT_FALSE(status.isOk());
    EXPECT_NE(status.message().find("at most"), std::string::npos) << status.message();
  }
  {
    // A server that takes the request and never answers.
    FakeServer fake("");
    std::unique_ptr<TcpStore> store;
    ASSERT_OK(TcpStore::connect(kLoopback, fake.port, 0, 1, milliseconds(500), store));
    auto start = Clock::now();
    Status status = store->set("k", "v");
    ASSERT_FALSE(status.isOk());
    EXPECT_NE(status.message().find("timed out"), std::string::npos) << status.message();
    EXPECT_LT(elapsedMs(start), 1500);
  }
}

} // namespace
} // namespace moec::rt::test
