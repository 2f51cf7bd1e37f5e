//===- TcpStoreServer.cpp - the store's server: one poll loop --------------===//
//
// One thread owns every connection and the map of values. Each connection has
// an input buffer (bounded: at most one frame and a read's worth more), an
// output buffer, and at most one waiting Get, served when a Set or Add gives
// one of its keys a value or answered Timeout at its deadline. A connection
// that sends bytes that are not a frame, or starts a frame and stalls, is
// answered with an Error (best effort) and closed; the others go on.
//
//===----------------------------------------------------------------------===//

#include "moec/runtime/dist/TcpStore.h"

#include "Socket.h"
#include "StoreFrame.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <list>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace moec::rt::dist {
namespace {

constexpr size_t kMaxConnections = 1024;
constexpr size_t kMaxStoredBytes = 256u << 20;
constexpr size_t kReadChunk = 64u << 10;
constexpr size_t kMaxInput = kStoreHeaderBytes + kStoreMaxBodyBytes + kReadChunk;
constexpr size_t kMaxOutput = 2 * (kStoreHeaderBytes + kStoreMaxBodyBytes);

struct Connection {
  Socket socket;
  std::string in, out;
  bool dead = false;
  /// A frame's first bytes arrived at `frameStart` and its last not yet.
  bool frameStarted = false;
  Clock::time_point frameStart;
  /// A Get waiting for one of `keys` until `waitEnd`.
  bool waiting = false;
  std::vector<std::string> keys;
  Clock::time_point waitEnd;
};

} // namespace

struct TcpStoreServer::State {
  Socket listener, wakeRead, wakeWrite;
  uint16_t port = 0;
  std::chrono::milliseconds frameTimeout{0};
  std::thread thread;
  std::atomic<uint64_t> rejected{0};
  mutable std::mutex rejectionMutex;
  std::string lastRejection;

  // Owned by the loop's thread.
  std::list<Connection> connections;
  std::map<std::string, std::string> values;
  size_t storedBytes = 0;

  void run();
  void acceptAll();
  void readFrom(Connection &c);
  void writeTo(Connection &c);
  bool pump(Connection &c);
  void handle(Connection &c, StoreFrame &frame);
  bool serveWaiter(Connection &c);
  void reply(Connection &c, const StoreFrame &frame);
  void reject(Connection &c, const std::string &why);
  void store(Connection &c, const std::string &key, std::string value);
};

void TcpStoreServer::State::reject(Connection &c, const std::string &why) {
  rejected.fetch_add(1);
  {
    std::lock_guard<std::mutex> lock(rejectionMutex);
    lastRejection = why;
  }
  // One attempt to tell the peer, then close: a misbehaving peer is not waited for.
  StoreFrame error{StoreOp::Error, 0, 0, {"store server: " + why}};
  std::string bytes = encodeStoreFrame(error);
  (void)::send(c.socket.fd(), bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  c.dead = true;
}

void TcpStoreServer::State::reply(Connection &c, const StoreFrame &frame) {
  c.out += encodeStoreFrame(frame);
  if (c.out.size() > kMaxOutput)
    return reject(c, "a connection that does not read its replies");
  writeTo(c);
}

void TcpStoreServer::State::writeTo(Connection &c) {
  while (!c.dead && !c.out.empty()) {
    ssize_t sent = ::send(c.socket.fd(), c.out.data(), c.out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent > 0) {
      c.out.erase(0, static_cast<size_t>(sent));
      continue;
    }
    if (sent < 0 && errno == EINTR)
      continue;
    if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      return;
    c.dead = true;
  }
}

void TcpStoreServer::State::readFrom(Connection &c) {
  char buffer[kReadChunk];
  while (!c.dead) {
    ssize_t got = ::recv(c.socket.fd(), buffer, sizeof(buffer), MSG_DONTWAIT);
    if (got > 0) {
      c.in.append(buffer, static_cast<size_t>(got));
      if (c.in.size() > kMaxInput)
        return reject(c, "more than one frame sent without waiting for the reply");
      continue;
    }
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      return;
    c.dead = true; // closed or failed: its waiting Get goes with it
  }
}

void TcpStoreServer::State::store(Connection &c, const std::string &key, std::string value) {
  auto it = values.find(key);
  size_t old = it == values.end() ? 0 : key.size() + it->second.size();
  if (storedBytes - old + key.size() + value.size() > kMaxStoredBytes) {
    reply(c, StoreFrame{StoreOp::Error, 0, 0, {"the store is full (256 MiB)"}});
    return;
  }
  storedBytes = storedBytes - old + key.size() + value.size();
  values[key] = std::move(value);
}

/// Answers a waiting Get if one of its keys has a value now.
bool TcpStoreServer::State::serveWaiter(Connection &c) {
  for (size_t i = 0; i < c.keys.size(); ++i) {
    auto it = values.find(c.keys[i]);
    if (it == values.end())
      continue;
    c.waiting = false;
    reply(c, StoreFrame{StoreOp::Ok, 0, static_cast<int64_t>(i), {it->second}});
    return true;
  }
  return false;
}

void TcpStoreServer::State::handle(Connection &c, StoreFrame &frame) {
  switch (frame.op) {
  case StoreOp::Set: {
    store(c, frame.strings[0], std::move(frame.strings[1]));
    if (!c.dead)
      reply(c, StoreFrame{StoreOp::Ok, 0, 0, {}});
    break;
  }
  case StoreOp::Add: {
    const std::string &key = frame.strings[0];
    int64_t current = 0;
    auto it = values.find(key);
    if (it != values.end()) {
      const std::string &text = it->second;
      auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), current);
      if (ec != std::errc() || end != text.data() + text.size()) {
        reply(c, StoreFrame{StoreOp::Error, 0, 0, {"Add: key '" + key + "' holds no integer"}});
        return;
      }
    }
    int64_t sum = 0;
    if (__builtin_add_overflow(current, frame.number, &sum)) {
      reply(c, StoreFrame{StoreOp::Error, 0, 0, {"Add: key '" + key + "' overflows"}});
      return;
    }
    store(c, key, std::to_string(sum));
    if (!c.dead)
      reply(c, StoreFrame{StoreOp::Ok, 0, sum, {}});
    break;
  }
  case StoreOp::Get:
    c.keys = std::move(frame.strings);
    c.waiting = true;
    c.waitEnd = Clock::now() + std::chrono::milliseconds(frame.timeoutMs);
    if (!serveWaiter(c) && frame.timeoutMs == 0) {
      c.waiting = false;
      reply(c, StoreFrame{StoreOp::Timeout, 0, 0, {}});
    }
    return; // a Get changes no value
  default:
    return reject(c, "a " + storeOpName(frame.op) + " frame where a request belongs");
  }
  // A value changed: the Gets waiting for it are served (their connections'
  // further frames, if any, wait for the loop's next pass).
  for (Connection &other : connections)
    if (other.waiting && !other.dead)
      serveWaiter(other);
}

/// Handles the complete frames buffered, up to a Get that must wait; true if
/// it handled any.
bool TcpStoreServer::State::pump(Connection &c) {
  bool handled = false;
  while (!c.dead && !c.waiting) {
    StoreFrame frame;
    size_t consumed = 0;
    std::string error;
    if (c.in.empty()) {
      c.frameStarted = false;
      break;
    }
    FrameParse result = parseStoreFrame(reinterpret_cast<const uint8_t *>(c.in.data()),
                                        c.in.size(), frame, consumed, error);
    if (result == FrameParse::Malformed) {
      reject(c, error);
      break;
    }
    if (result == FrameParse::Incomplete) {
      if (!c.frameStarted) {
        c.frameStarted = true;
        c.frameStart = Clock::now();
      }
      break;
    }
    c.in.erase(0, consumed);
    c.frameStarted = false;
    handle(c, frame);
    handled = true;
  }
  return handled;
}

void TcpStoreServer::State::acceptAll() {
  for (;;) {
    int fd = ::accept4(listener.fd(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0)
      return; // EAGAIN, or a connection that went away: nothing to do
    Socket socket(fd);
    if (connections.size() >= kMaxConnections)
      continue; // closed at once
    setNoDelay(socket);
    connections.emplace_back();
    connections.back().socket = std::move(socket);
  }
}

void TcpStoreServer::State::run() {
  std::vector<pollfd> fds;
  std::vector<Connection *> polled;
  for (;;) {
    fds.clear();
    polled.clear();
    fds.push_back({wakeRead.fd(), POLLIN, 0});
    fds.push_back({listener.fd(), POLLIN, 0});
    auto now = Clock::now();
    auto next = now + std::chrono::hours(1);
    for (Connection &c : connections) {
      short events = POLLIN;
      if (!c.out.empty())
        events |= POLLOUT;
      fds.push_back({c.socket.fd(), events, 0});
      polled.push_back(&c);
      if (c.waiting)
        next = std::min(next, c.waitEnd);
      if (c.frameStarted)
        next = std::min(next, c.frameStart + frameTimeout);
    }
    int timeout = Deadline::at(next).remainingMs();
    int rc = ::poll(fds.data(), fds.size(), timeout);
    if (rc < 0 && errno != EINTR)
      return; // cannot happen with valid descriptors; the clients then time out
    if (rc > 0 && fds[0].revents)
      return; // the destructor's wake-up
    for (size_t i = 0; rc > 0 && i < polled.size(); ++i) {
      Connection &c = *polled[i];
      short revents = fds[i + 2].revents;
      if (revents & (POLLIN | POLLHUP | POLLERR))
        readFrom(c);
      if (revents & POLLOUT)
        writeTo(c);
    }
    if (rc > 0 && fds[1].revents)
      acceptAll();
    now = Clock::now();
    for (Connection &c : connections) {
      if (c.dead)
        continue;
      if (c.waiting && now >= c.waitEnd) {
        c.waiting = false;
        reply(c, StoreFrame{StoreOp::Timeout, 0, 0, {}});
      }
      if (c.frameStarted && now >= c.frameStart + frameTimeout)
        reject(c, "a frame started and not finished within " + formatSeconds(frameTimeout));
    }
    // The buffered frames of every connection not waiting, until none is left
    // (a Set may serve a Get whose connection has more frames buffered).
    for (bool progress = true; progress;) {
      progress = false;
      for (Connection &c : connections)
        progress |= pump(c);
    }
    connections.remove_if([](const Connection &c) { return c.dead; });
  }
}

Status TcpStoreServer::start(const std::string &host, uint16_t port,
                             std::chrono::milliseconds frameTimeout,
                             std::unique_ptr<TcpStoreServer> &out) {
  auto state = std::make_unique<State>();
  MOEC_RETURN_IF_ERROR(listenTcp(host, port, state->listener, state->port)
                           .withContext("starting the store server"));
  MOEC_RETURN_IF_ERROR(setNonBlocking(state->listener));
  int pipeFds[2];
  if (pipe2(pipeFds, O_CLOEXEC | O_NONBLOCK) != 0)
    return Status::error("starting the store server: pipe2: " + errnoText(errno));
  state->wakeRead = Socket(pipeFds[0]);
  state->wakeWrite = Socket(pipeFds[1]);
  state->frameTimeout = frameTimeout;
  State *raw = state.get();
  state->thread = std::thread([raw] { raw->run(); });
  out.reset(new TcpStoreServer());
  out->state_ = std::move(state);
  return Status::ok();
}

TcpStoreServer::~TcpStoreServer() {
  if (!state_)
    return;
  char byte = 1;
  (void)::write(state_->wakeWrite.fd(), &byte, 1);
  if (state_->thread.joinable())
    state_->thread.join();
}

uint16_t TcpStoreServer::port() const { return state_->port; }

uint64_t TcpStoreServer::rejectedConnections() const { return state_->rejected.load(); }

std::string TcpStoreServer::lastRejection() const {
  std::lock_guard<std::mutex> lock(state_->rejectionMutex);
  return state_->lastRejection;
}

} // namespace moec::rt::dist
