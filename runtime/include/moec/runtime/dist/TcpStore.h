//===- TcpStore.h - a key/value store over TCP for rendezvous ---*- C++ -*-===//
//
// Rank 0 serves the store (TcpStoreServer) on MASTER_ADDR:MASTER_PORT; every
// rank, rank 0 included, connects to it (TcpStore) to publish and read what
// the ranks must agree on before they talk directly: listening addresses,
// NCCL's unique id, handshake records. Values are bytes, at most a few MiB.
//
// Nothing waits forever. Every socket step has a deadline; a get that finds
// no value within the timeout, a barrier that misses a rank, a server that
// never listens or dies, each ends with an error naming the key or the
// missing rank(s) and the time waited. A rank that fails can abort() the
// store: every get of every rank then fails with its message, at once.
//
// The server keeps serving until destroyed: rank 0 destroys it last (after a
// final barrier) so that no rank loses the store in mid-use.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_DIST_TCPSTORE_H
#define MOEC_RUNTIME_DIST_TCPSTORE_H

#include "moec/runtime/Status.h"

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace moec::rt::dist {

/// The store's server: one thread with a poll loop over all connections.
/// Malformed frames close the connection that sent them (after an error
/// reply) and are counted; the server keeps serving the others.
class TcpStoreServer {
public:
  /// Listens on host:port (port 0: a free one, see port()). A port in use or
  /// an address not of this host is an error naming the address. `frameTimeout`
  /// bounds how long a connection may take to send one started frame.
  static Status start(const std::string &host, uint16_t port, std::chrono::milliseconds frameTimeout,
                      std::unique_ptr<TcpStoreServer> &out);
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer &) = delete;
  TcpStoreServer &operator=(const TcpStoreServer &) = delete;

  uint16_t port() const;
  /// Connections closed for a malformed frame or a frame sent too slowly.
  uint64_t rejectedConnections() const;
  /// The last rejection's reason ("" if none).
  std::string lastRejection() const;

  struct State;

private:
  TcpStoreServer() = default;
  std::unique_ptr<State> state_;
};

/// One rank's connection to the store. Safe to call from several threads
/// (one request at a time).
class TcpStore {
public:
  /// Connects to the server at host:port, retrying until `timeout` while it
  /// is not yet listening. `timeout` is also every later operation's.
  static Status connect(const std::string &host, uint16_t port, int rank, int worldSize,
                        std::chrono::milliseconds timeout, std::unique_ptr<TcpStore> &out);
  ~TcpStore();
  TcpStore(const TcpStore &) = delete;
  TcpStore &operator=(const TcpStore &) = delete;

  int rank() const { return rank_; }
  int worldSize() const { return worldSize_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  /// "host:port" of the server.
  const std::string &address() const { return address_; }
  /// The numeric address of this end of the connection: the interface by
  /// which this host reaches rank 0, which other ranks can then reach too.
  const std::string &localHost() const { return localHost_; }

  Status set(const std::string &key, const std::string &value);
  /// Waits until the key has a value (up to the store's timeout, or
  /// `timeout`) or the store is aborted; an error names the key and the wait.
  Status get(const std::string &key, std::string &value);
  Status get(const std::string &key, std::string &value, std::chrono::milliseconds timeout);
  /// The value if present now; no waiting.
  Status tryGet(const std::string &key, std::string &value, bool &found);
  /// Adds `delta` to the key's integer value (absent: 0) and returns the sum.
  Status add(const std::string &key, int64_t delta, int64_t &result);
  /// Returns once every rank 0..worldSize-1 has entered the same barrier (the
  /// n-th call of each rank meets the n-th of the others), or fails naming
  /// the ranks that did not arrive within the timeout.
  Status barrier();
  /// Marks the store failed with `message`: every rank's waiting and later
  /// gets fail with it. Best effort (the store may be gone).
  void abort(const std::string &message);

  /// A key prefix that is the same on every rank for the n-th call with the
  /// same `what` ("moec/what/n/"), so that objects built in the same order on
  /// every rank (communicators, barriers) find each other's keys.
  std::string nextPrefix(const std::string &what);

  struct Connection;

private:
  TcpStore() = default;
  /// Get of several keys: the index of the first one present.
  Status getAny(const std::string *keys, size_t count, std::chrono::milliseconds timeout,
                std::string &value, int &index, bool &timedOut);

  std::unique_ptr<Connection> connection_;
  std::mutex mutex_;
  std::map<std::string, uint64_t> prefixCounts_;
  std::string address_, localHost_;
  int rank_ = 0, worldSize_ = 1;
  std::chrono::milliseconds timeout_{0};
};

/// The key that TcpStore::abort sets and every get watches.
inline constexpr const char *kStoreAbortKey = "moec/abort";

} // namespace moec::rt::dist

#endif // MOEC_RUNTIME_DIST_TCPSTORE_H
