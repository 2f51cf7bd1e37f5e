//===- Socket.cpp - TCP sockets whose every operation has a deadline -------===//

#include "Socket.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <thread>

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace moec::rt::dist {

int Deadline::remainingMs() const {
  auto left = std::chrono::ceil<std::chrono::milliseconds>(end_ - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(left, 0, INT32_MAX));
}

std::string formatSeconds(std::chrono::milliseconds duration) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.3g s", duration.count() / 1000.0);
  return text;
}

Socket &Socket::operator=(Socket &&other) noexcept {
  if (this != &other) {
    close();
    fd_ = other.release();
  }
  return *this;
}

void Socket::close() {
  if (fd_ >= 0)
    ::close(fd_);
  fd_ = -1;
}

std::string errnoText(int error) { return std::strerror(error); }

std::string formatAddress(const std::string &host, uint16_t port) {
  bool ipv6 = host.find(':') != std::string::npos;
  return (ipv6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

namespace {

/// getaddrinfo's answers for host:port (numeric port), freed on destruction.
struct AddressList {
  addrinfo *head = nullptr;
  ~AddressList() {
    if (head)
      freeaddrinfo(head);
  }
};

Status resolve(const std::string &host, uint16_t port, bool passive, AddressList &out) {
  if (host.empty())
    return Status::error("an empty host name (port " + std::to_string(port) + ")");
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  std::string service = std::to_string(port);
  int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &out.head);
  if (rc != 0)
    return Status::error("cannot resolve " + formatAddress(host, port) + ": " + gai_strerror(rc));
  return Status::ok();
}

uint16_t portOf(const sockaddr_storage &address) {
  if (address.ss_family == AF_INET)
    return ntohs(reinterpret_cast<const sockaddr_in &>(address).sin_port);
  if (address.ss_family == AF_INET6)
    return ntohs(reinterpret_cast<const sockaddr_in6 &>(address).sin6_port);
  return 0;
}

/// Waits for `events` on one socket; false on a deadline.
Status pollOne(const Socket &socket, short events, const Deadline &deadline, bool &ready) {
  for (;;) {
    pollfd entry{socket.fd(), events, 0};
    int rc = ::poll(&entry, 1, deadline.remainingMs());
    if (rc < 0 && errno == EINTR)
      continue;
    if (rc < 0)
      return Status::error("poll failed: " + errnoText(errno));
    ready = rc > 0;
    return Status::ok();
  }
}

} // namespace

Status listenTcp(const std::string &host, uint16_t port, Socket &out, uint16_t &boundPort) {
  AddressList list;
  MOEC_RETURN_IF_ERROR(resolve(host, port, /*passive=*/true, list));
  std::string address = formatAddress(host, port);
  std::string failure = "no address to listen on";
  for (addrinfo *entry = list.head; entry; entry = entry->ai_next) {
    Socket socket(::socket(entry->ai_family, entry->ai_socktype | SOCK_CLOEXEC, entry->ai_protocol));
    if (!socket.isOpen()) {
      failure = errnoText(errno);
      continue;
    }
    int one = 1;
    setsockopt(socket.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(socket.fd(), entry->ai_addr, entry->ai_addrlen) != 0) {
      int error = errno;
      failure = errnoText(error);
      if (error == EADDRINUSE)
        failure += " (another process listens there: choose another port)";
      continue;
    }
    if (::listen(socket.fd(), 256) != 0) {
      failure = errnoText(errno);
      continue;
    }
    sockaddr_storage bound{};
    socklen_t length = sizeof(bound);
    if (getsockname(socket.fd(), reinterpret_cast<sockaddr *>(&bound), &length) != 0)
      return Status::error("cannot listen on " + address + ": getsockname: " + errnoText(errno));
    boundPort = portOf(bound);
    out = std::move(socket);
    return Status::ok();
  }
  return Status::error("cannot listen on " + address + ": " + failure);
}

Status connectTcp(const std::string &host, uint16_t port, const Deadline &deadline,
                  const std::string &what, Socket &out) {
  std::string address = formatAddress(host, port);
  if (port == 0)
    return Status::error("cannot connect to " + what + " at " + address + ": port 0");
  AddressList list;
  MOEC_RETURN_IF_ERROR(resolve(host, port, /*passive=*/false, list)
                           .withContext("cannot connect to " + what));
  std::string failure = "no address";
  auto started = Clock::now();
  // Nothing may listen there yet: retry (refused, unreachable) until the deadline.
  do {
    for (addrinfo *entry = list.head; entry; entry = entry->ai_next) {
      Socket socket(::socket(entry->ai_family, entry->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                             entry->ai_protocol));
      if (!socket.isOpen()) {
        failure = errnoText(errno);
        continue;
      }
      int rc = ::connect(socket.fd(), entry->ai_addr, entry->ai_addrlen);
      if (rc != 0 && errno != EINPROGRESS) {
        failure = errnoText(errno);
        continue;
      }
      if (rc != 0) {
        bool ready = false;
        MOEC_RETURN_IF_ERROR(pollOne(socket, POLLOUT, deadline, ready));
        if (!ready) {
          failure = "no answer";
          continue;
        }
        int error = 0;
        socklen_t length = sizeof(error);
        getsockopt(socket.fd(), SOL_SOCKET, SO_ERROR, &error, &length);
        if (error != 0) {
          failure = errnoText(error);
          continue;
        }
      }
      setNoDelay(socket);
      out = std::move(socket);
      return Status::ok();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(
        std::min(20, deadline.remainingMs())));
  } while (!deadline.expired());
  auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started);
  return Status::error("cannot connect to " + what + " at " + address + " within " +
                       formatSeconds(waited) + ": " + failure);
}

Status acceptTcp(const Socket &listener, const Deadline &deadline, Socket &out, bool &timedOut) {
  timedOut = false;
  for (;;) {
    bool ready = false;
    MOEC_RETURN_IF_ERROR(pollOne(listener, POLLIN, deadline, ready));
    if (!ready) {
      timedOut = true;
      return Status::ok();
    }
    int fd = ::accept4(listener.fd(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0) {
      out = Socket(fd);
      setNoDelay(out);
      return Status::ok();
    }
    // The connection went away between poll and accept: wait for the next.
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ECONNABORTED || errno == EINTR ||
        errno == EPROTO)
      continue;
    return Status::error("accept failed: " + errnoText(errno));
  }
}

Status sendAll(const Socket &socket, const void *data, size_t bytes, const Deadline &deadline,
               const std::string &peer) {
  const char *next = static_cast<const char *>(data);
  while (bytes > 0) {
    ssize_t sent = ::send(socket.fd(), next, bytes, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent > 0) {
      next += sent;
      bytes -= static_cast<size_t>(sent);
      continue;
    }
    if (sent < 0 && errno == EINTR)
      continue;
    if (sent < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
      return Status::error("sending to " + peer + " failed: " + errnoText(errno) +
                           " (the peer closed the connection or died)");
    bool ready = false;
    MOEC_RETURN_IF_ERROR(pollOne(socket, POLLOUT, deadline, ready));
    if (!ready)
      return Status::error("sending to " + peer + " timed out (" + std::to_string(bytes) +
                           " bytes left; the peer does not read)");
  }
  return Status::ok();
}

Status receiveAll(const Socket &socket, void *data, size_t bytes, const Deadline &deadline,
                  const std::string &peer) {
  char *next = static_cast<char *>(data);
  while (bytes > 0) {
    ssize_t got = ::recv(socket.fd(), next, bytes, MSG_DONTWAIT);
    if (got > 0) {
      next += got;
      bytes -= static_cast<size_t>(got);
      continue;
    }
    if (got == 0)
      return Status::error(peer + " closed the connection (exited or failed)");
    if (errno == EINTR)
      continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK)
      return Status::error("receiving from " + peer + " failed: " + errnoText(errno) +
                           " (the peer closed the connection or died)");
    bool ready = false;
    MOEC_RETURN_IF_ERROR(pollOne(socket, POLLIN, deadline, ready));
    if (!ready)
      return Status::error("receiving from " + peer + " timed out (" + std::to_string(bytes) +
                           " bytes missing)");
  }
  return Status::ok();
}

Status setNonBlocking(const Socket &socket) {
  int flags = fcntl(socket.fd(), F_GETFL, 0);
  if (flags < 0 || fcntl(socket.fd(), F_SETFL, flags | O_NONBLOCK) != 0)
    return Status::error("cannot make a socket non-blocking: " + errnoText(errno));
  return Status::ok();
}

void setNoDelay(const Socket &socket) {
  int one = 1;
  // Fails harmlessly on non-TCP sockets.
  setsockopt(socket.fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

Status localHost(const Socket &socket, std::string &host) {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  if (getsockname(socket.fd(), reinterpret_cast<sockaddr *>(&address), &length) != 0)
    return Status::error("getsockname failed: " + errnoText(errno));
  char text[NI_MAXHOST];
  int rc = getnameinfo(reinterpret_cast<sockaddr *>(&address), length, text, sizeof(text),
                       nullptr, 0, NI_NUMERICHOST);
  if (rc != 0)
    return Status::error(std::string("getnameinfo failed: ") + gai_strerror(rc));
  host = text;
  return Status::ok();
}

} // namespace moec::rt::dist
