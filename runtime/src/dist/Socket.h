//===- Socket.h - TCP sockets whose every operation has a deadline -*- C++ -*-===//
//
// The distributed layer's only contact with the network (internal to
// runtime/src/dist). Every blocking step (connect, accept, send, receive)
// polls against a Deadline, so a peer that never comes or dies ends the wait
// with an error naming the peer and the time waited, never a hang. Sends use
// MSG_NOSIGNAL: a closed peer is an error, not SIGPIPE.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_SRC_DIST_SOCKET_H
#define MOEC_RUNTIME_SRC_DIST_SOCKET_H

#include "moec/runtime/Status.h"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace moec::rt::dist {

using Clock = std::chrono::steady_clock;

/// A point in time that blocking steps must not pass.
class Deadline {
public:
  explicit Deadline(std::chrono::milliseconds timeout) : end_(Clock::now() + timeout) {}
  static Deadline at(Clock::time_point end) { return Deadline(end); }
  bool expired() const { return Clock::now() >= end_; }
  /// Milliseconds left, rounded up, clamped to [0, INT32_MAX] (poll's range).
  int remainingMs() const;
  Clock::time_point end() const { return end_; }

private:
  explicit Deadline(Clock::time_point end) : end_(end) {}
  Clock::time_point end_;
};

/// "1.5 s": a duration for messages.
std::string formatSeconds(std::chrono::milliseconds duration);

/// An owned file descriptor (closed on destruction).
class Socket {
public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  Socket(Socket &&other) noexcept : fd_(other.release()) {}
  Socket &operator=(Socket &&other) noexcept;
  Socket(const Socket &) = delete;
  Socket &operator=(const Socket &) = delete;
  ~Socket() { close(); }

  int fd() const { return fd_; }
  bool isOpen() const { return fd_ >= 0; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void close();

private:
  int fd_ = -1;
};

/// "host:port", with brackets around an IPv6 host.
std::string formatAddress(const std::string &host, uint16_t port);

/// Listens on host:port (port 0: a free port, returned in `boundPort`), with
/// SO_REUSEADDR so that a restarted job finds its port past TIME_WAIT. An
/// unresolvable host or a port in use is an error naming the address.
Status listenTcp(const std::string &host, uint16_t port, Socket &out, uint16_t &boundPort);

/// Connects to host:port, retrying while nothing listens there yet (the
/// listener may start later) until the deadline. `what` names the peer in
/// errors ("the store of rank 0").
Status connectTcp(const std::string &host, uint16_t port, const Deadline &deadline,
                  const std::string &what, Socket &out);

/// Accepts one connection on a listening socket before the deadline; `timedOut`
/// tells a deadline from a failure.
Status acceptTcp(const Socket &listener, const Deadline &deadline, Socket &out, bool &timedOut);

/// Sends or receives exactly `bytes` bytes before the deadline. `peer` names
/// the other side in errors. A receive that meets the end of the stream is an
/// error saying that the peer closed the connection.
Status sendAll(const Socket &socket, const void *data, size_t bytes, const Deadline &deadline,
               const std::string &peer);
Status receiveAll(const Socket &socket, void *data, size_t bytes, const Deadline &deadline,
                  const std::string &peer);

/// Makes the socket non-blocking (for poll loops) and, for TCP, turns Nagle off.
Status setNonBlocking(const Socket &socket);
void setNoDelay(const Socket &socket);

/// The local address (numeric host) of a connected or bound socket: the
/// interface through which this host reaches the peer.
Status localHost(const Socket &socket, std::string &host);

/// errno as "Connection refused".
std::string errnoText(int error);

} // namespace moec::rt::dist

#endif // MOEC_RUNTIME_SRC_DIST_SOCKET_H
