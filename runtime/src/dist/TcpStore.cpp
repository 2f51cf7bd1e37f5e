//===- TcpStore.cpp - one rank's connection to the store -------------------===//
//
// Requests are synchronous: one frame out, one reply back, each under a
// deadline. A Get's deadline is the server's wait plus a little slack, so a
// server that stops answering is still noticed. Once a request fails on the
// wire (the stream may then be out of step) the connection is marked broken
// and every later request fails with the first error.
//
//===----------------------------------------------------------------------===//

#include "moec/runtime/dist/TcpStore.h"

#include "Socket.h"
#include "StoreFrame.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

namespace moec::rt::dist {

struct TcpStore::Connection {
  Socket socket;
  std::string broken; // the first wire error; "" while healthy
};

namespace {

/// Waits beyond a Get's own timeout before the server counts as unresponsive.
std::chrono::milliseconds replySlack(std::chrono::milliseconds timeout) {
  return std::min(timeout, std::chrono::milliseconds(1000));
}

Status roundTrip(TcpStore::Connection &c, const std::string &address, const StoreFrame &request,
                 const Deadline &deadline, StoreFrame &reply) {
  if (!c.broken.empty())
    return Status::error("the store connection is broken by an earlier error: " + c.broken);
  std::string peer = "the store at " + address;
  std::string bytes = encodeStoreFrame(request);
  Status status = sendAll(c.socket, bytes.data(), bytes.size(), deadline, peer);
  std::vector<uint8_t> in(kStoreHeaderBytes);
  if (status.isOk())
    status = receiveAll(c.socket, in.data(), in.size(), deadline, peer);
  size_t consumed = 0;
  std::string error;
  FrameParse parsed = FrameParse::Malformed;
  if (status.isOk()) {
    parsed = parseStoreFrame(in.data(), in.size(), reply, consumed, error);
    if (parsed == FrameParse::Incomplete) {
      // The header passed its checks: its body length is within bounds.
      size_t body = size_t(in[8]) | size_t(in[9]) << 8 | size_t(in[10]) << 16 |
                    size_t(in[11]) << 24;
      in.resize(kStoreHeaderBytes + body);
      status = receiveAll(c.socket, in.data() + kStoreHeaderBytes, body, deadline, peer);
      if (status.isOk())
        parsed = parseStoreFrame(in.data(), in.size(), reply, consumed, error);
    }
  }
  if (status.isOk() && parsed != FrameParse::Complete)
    status = Status::error("malformed reply from " + peer + ": " +
                           (error.empty() ? "a truncated frame" : error));
  if (status.isOk() && reply.op != StoreOp::Ok && reply.op != StoreOp::Timeout &&
      reply.op != StoreOp::Error)
    status = Status::error("malformed reply from " + peer + ": a " + storeOpName(reply.op) +
                           " frame");
  if (!status.isOk()) {
    c.broken = status.message();
    c.socket.close();
  }
  return status;
}

std::string listRanks(const std::vector<int> &ranks) {
  std::string text;
  for (size_t i = 0; i < ranks.size(); ++i)
    text += (i ? ", " : "") + std::to_string(ranks[i]);
  return text;
}

} // namespace

Status TcpStore::connect(const std::string &host, uint16_t port, int rank, int worldSize,
                         std::chrono::milliseconds timeout, std::unique_ptr<TcpStore> &out) {
  if (worldSize < 1 || rank < 0 || rank >= worldSize)
    return Status::error("store: rank " + std::to_string(rank) + " of world size " +
                         std::to_string(worldSize) + " is out of range");
  if (timeout.count() <= 0)
    return Status::error("store: the timeout must be positive");
  std::unique_ptr<TcpStore> store(new TcpStore());
  store->connection_ = std::make_unique<Connection>();
  store->address_ = formatAddress(host, port);
  store->rank_ = rank;
  store->worldSize_ = worldSize;
  store->timeout_ = timeout;
  MOEC_RETURN_IF_ERROR(connectTcp(host, port, Deadline(timeout),
                                  "the store (served by rank 0)", store->connection_->socket)
                           .withContext("rank " + std::to_string(rank)));
  MOEC_RETURN_IF_ERROR(dist::localHost(store->connection_->socket, store->localHost_));
  out = std::move(store);
  return Status::ok();
}

TcpStore::~TcpStore() = default;

Status TcpStore::set(const std::string &key, const std::string &value) {
  StoreFrame request{StoreOp::Set, 0, 0, {key, value}};
  MOEC_RETURN_IF_ERROR(checkStoreFrame(request).withContext("store set of '" + key + "'"));
  if (value.size() + key.size() + 8 > kStoreMaxBodyBytes)
    return Status::error("store set of '" + key + "': a value of " + std::to_string(value.size()) +
                         " bytes (the store holds at most " +
                         std::to_string(kStoreMaxBodyBytes >> 20) + " MiB a value)");
  StoreFrame reply;
  std::lock_guard<std::mutex> lock(mutex_);
  MOEC_RETURN_IF_ERROR(
      roundTrip(*connection_, address_, request, Deadline(timeout_), reply)
          .withContext("store set of '" + key + "'"));
  if (reply.op != StoreOp::Ok)
    return Status::error("store set of '" + key + "': " +
                         (reply.strings.empty() ? storeOpName(reply.op) : reply.strings[0]));
  return Status::ok();
}

Status TcpStore::getAny(const std::string *keys, size_t count, std::chrono::milliseconds timeout,
                        std::string &value, int &index, bool &timedOut) {
  StoreFrame request{StoreOp::Get, 0, 0, std::vector<std::string>(keys, keys + count)};
  request.timeoutMs = static_cast<uint32_t>(
      std::clamp<int64_t>(timeout.count(), 0, std::numeric_limits<uint32_t>::max()));
  MOEC_RETURN_IF_ERROR(checkStoreFrame(request));
  StoreFrame reply;
  std::lock_guard<std::mutex> lock(mutex_);
  MOEC_RETURN_IF_ERROR(roundTrip(*connection_, address_, request,
                                 Deadline(timeout + replySlack(timeout_)), reply));
  timedOut = reply.op == StoreOp::Timeout;
  if (reply.op == StoreOp::Error)
    return Status::error(reply.strings[0]);
  if (reply.op == StoreOp::Ok) {
    if (reply.strings.size() != 1 || reply.number < 0 ||
        reply.number >= static_cast<int64_t>(count))
      return Status::error("malformed reply from the store at " + address_ +
                           ": a Get answered with index " + std::to_string(reply.number));
    value = std::move(reply.strings[0]);
    index = static_cast<int>(reply.number);
  }
  return Status::ok();
}

Status TcpStore::get(const std::string &key, std::string &value) {
  return get(key, value, timeout_);
}

Status TcpStore::get(const std::string &key, std::string &value,
                     std::chrono::milliseconds timeout) {
  const std::string keys[] = {key, kStoreAbortKey};
  std::string found;
  int index = -1;
  bool timedOut = false;
  MOEC_RETURN_IF_ERROR(getAny(keys, 2, timeout, found, index, timedOut)
                           .withContext("store get of '" + key + "'"));
  if (timedOut)
    return Status::error("store get of '" + key + "' (rank " + std::to_string(rank_) +
                         "): no value within " + formatSeconds(timeout) +
                         " (the rank that sets it did not start, or failed)");
  if (index == 1 && key != kStoreAbortKey)
    return Status::error("the job was aborted: " + found);
  value = std::move(found);
  return Status::ok();
}

Status TcpStore::tryGet(const std::string &key, std::string &value, bool &found) {
  int index = -1;
  bool timedOut = false;
  std::string got;
  MOEC_RETURN_IF_ERROR(getAny(&key, 1, std::chrono::milliseconds(0), got, index, timedOut)
                           .withContext("store get of '" + key + "'"));
  found = !timedOut;
  if (found)
    value = std::move(got);
  return Status::ok();
}

Status TcpStore::add(const std::string &key, int64_t delta, int64_t &result) {
  StoreFrame request{StoreOp::Add, 0, delta, {key}};
  MOEC_RETURN_IF_ERROR(checkStoreFrame(request).withContext("store add to '" + key + "'"));
  StoreFrame reply;
  std::lock_guard<std::mutex> lock(mutex_);
  MOEC_RETURN_IF_ERROR(roundTrip(*connection_, address_, request, Deadline(timeout_), reply)
                           .withContext("store add to '" + key + "'"));
  if (reply.op != StoreOp::Ok)
    return Status::error("store add to '" + key + "': " +
                         (reply.strings.empty() ? storeOpName(reply.op) : reply.strings[0]));
  result = reply.number;
  return Status::ok();
}

std::string TcpStore::nextPrefix(const std::string &what) {
  std::lock_guard<std::mutex> lock(mutex_);
  uint64_t n = prefixCounts_[what]++;
  return "moec/" + what + "/" + std::to_string(n) + "/";
}

Status TcpStore::barrier() {
  std::string prefix = nextPrefix("barrier");
  auto start = Clock::now();
  Deadline deadline(timeout_);
  MOEC_RETURN_IF_ERROR(set(prefix + std::to_string(rank_), "1"));
  for (int r = 0; r < worldSize_; ++r) {
    std::string value;
    auto left = std::chrono::milliseconds(deadline.remainingMs());
    Status status = get(prefix + std::to_string(r), value, left);
    if (status.isOk())
      continue;
    bool aborted = false;
    if (!tryGet(kStoreAbortKey, value, aborted).isOk() || aborted)
      return status;
    // Which ranks are missing: those whose key is absent now.
    std::vector<int> missing;
    for (int m = r; m < worldSize_; ++m) {
      bool found = false;
      if (!tryGet(prefix + std::to_string(m), value, found).isOk())
        return status;
      if (!found)
        missing.push_back(m);
    }
    if (missing.empty())
      return status;
    auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
    return Status::error("store barrier (" + prefix + ", rank " + std::to_string(rank_) +
                         " of " + std::to_string(worldSize_) + "): rank(s) " +
                         listRanks(missing) + " did not arrive within " + formatSeconds(waited) +
                         " (not started, or failed)");
  }
  return Status::ok();
}

void TcpStore::abort(const std::string &message) {
  std::string value;
  bool found = false;
  if (tryGet(kStoreAbortKey, value, found).isOk() && !found)
    (void)set(kStoreAbortKey, "rank " + std::to_string(rank_) + ": " + message);
}

} // namespace moec::rt::dist
