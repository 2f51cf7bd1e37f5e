//===- HostCommunicator.cpp - all-reduce of host memory over TCP -----------===//

#include "moec/runtime/dist/HostCommunicator.h"

#include "Socket.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include <poll.h>
#include <sys/socket.h>

namespace moec::rt::dist {
namespace {

constexpr uint32_t kHelloMagic = 0x63486f4d; // "MoHc"
constexpr uint32_t kDataMagic = 0x52416f4d;  // "MoAR"

/// What a rank sends first on a connection it opened (host byte order: the
/// ranks of one job run one architecture).
struct Hello {
  uint32_t magic;
  uint32_t size;
  uint64_t nonce;
  uint32_t rank;
  uint32_t reserved;
};

/// What precedes each chunk: which call, phase and tensor it belongs to, so
/// ranks that disagree (a different count, a skipped call) fail with an error
/// saying so instead of summing unrelated bytes.
struct ChunkHeader {
  uint32_t magic;
  uint32_t dtype; // 0 f32, 1 bf16
  uint64_t call;
  uint64_t count;
  uint32_t phase; // 1 reduce-scatter, 2 all-gather
  uint32_t rank;  // the sender
};

std::string ranksText(const std::vector<int> &ranks) {
  std::string text;
  for (size_t i = 0; i < ranks.size(); ++i)
    text += (i ? ", " : "") + std::to_string(ranks[i]);
  return text;
}

std::string describe(const ChunkHeader &h) {
  return "all-reduce #" + std::to_string(h.call) + " (phase " + std::to_string(h.phase) +
         ") of " + std::to_string(h.count) + (h.dtype == 0 ? " f32" : " bf16") + " values";
}

float toFloat(float x) { return x; }
float toFloat(uint16_t bf16) {
  uint32_t bits = uint32_t(bf16) << 16;
  float x;
  std::memcpy(&x, &bits, sizeof(x));
  return x;
}
void fromFloat(float x, float &out) { out = x; }
void fromFloat(float x, uint16_t &out) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  if ((bits & 0x7fffffffu) > 0x7f800000u) { // NaN: keep it a (quiet) NaN
    out = static_cast<uint16_t>((bits >> 16) | 0x40);
    return;
  }
  bits += 0x7fffu + ((bits >> 16) & 1u); // round to nearest, ties to even
  out = static_cast<uint16_t>(bits >> 16);
}

} // namespace

/// The connections to the other ranks (peer r at index r; this rank's empty).
struct HostCommunicator::Peers {
  std::vector<Socket> sockets;
  std::vector<uint8_t> scratch;
  std::vector<float> sum;
};

namespace {

/// One direction pair with one peer in one phase: a header and a payload out,
/// a header (checked before the payload is read) and a payload in.
struct Transfer {
  int peer = 0;
  ChunkHeader outHeader{};
  const uint8_t *outPayload = nullptr;
  size_t outBytes = 0, sent = 0; // over header + payload
  ChunkHeader expected{}, inHeader{};
  uint8_t *inPayload = nullptr;
  size_t inBytes = 0, got = 0; // over header + payload

  size_t sendTotal() const { return sizeof(ChunkHeader) + outBytes; }
  size_t receiveTotal() const { return sizeof(ChunkHeader) + inBytes; }
  bool sending() const { return sent < sendTotal(); }
  bool receiving() const { return got < receiveTotal(); }
  /// Where the next bytes to send come from, and how many are left there.
  std::pair<const uint8_t *, size_t> nextOut() const {
    if (sent < sizeof(ChunkHeader))
      return {reinterpret_cast<const uint8_t *>(&outHeader) + sent, sizeof(ChunkHeader) - sent};
    return {outPayload + (sent - sizeof(ChunkHeader)), sendTotal() - sent};
  }
  /// Where the next bytes received go.
  std::pair<uint8_t *, size_t> nextIn() {
    if (got < sizeof(ChunkHeader))
      return {reinterpret_cast<uint8_t *>(&inHeader) + got, sizeof(ChunkHeader) - got};
    return {inPayload + (got - sizeof(ChunkHeader)), receiveTotal() - got};
  }
};

Status peerLost(int peer, int error) {
  std::string rank = "rank " + std::to_string(peer);
  if (error == 0)
    return Status::error(rank + " closed the connection (exited or failed)");
  return Status::error("the connection to " + rank + " broke: " + errnoText(error) +
                       " (exited or failed)");
}

/// What one send or recv returned: the bytes moved, or 0 where the socket
/// has no room or data now (or a signal came: the poll loop retries); an
/// error where the peer is gone.
Status moved(ssize_t n, int peer, size_t &bytes) {
  bytes = n > 0 ? static_cast<size_t>(n) : 0;
  if (n > 0 || (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)))
    return Status::ok();
  return peerLost(peer, n < 0 ? errno : 0);
}

Status sendSome(const Socket &socket, Transfer &t) {
  while (t.sending()) {
    auto [from, left] = t.nextOut();
    size_t n = 0;
    MOEC_RETURN_IF_ERROR(
        moved(::send(socket.fd(), from, left, MSG_NOSIGNAL | MSG_DONTWAIT), t.peer, n));
    if (n == 0)
      return Status::ok();
    t.sent += n;
  }
  return Status::ok();
}

Status receiveSome(const Socket &socket, Transfer &t) {
  while (t.receiving()) {
    auto [into, left] = t.nextIn();
    size_t n = 0;
    MOEC_RETURN_IF_ERROR(moved(::recv(socket.fd(), into, left, MSG_DONTWAIT), t.peer, n));
    if (n == 0)
      return Status::ok();
    bool headerBefore = t.got < sizeof(ChunkHeader);
    t.got += n;
    // The header is checked before any of the payload is read.
    if (headerBefore && t.got >= sizeof(ChunkHeader) &&
        std::memcmp(&t.inHeader, &t.expected, sizeof(ChunkHeader)) != 0) {
      if (t.inHeader.magic != kDataMagic)
        return Status::error("rank " + std::to_string(t.peer) +
                             " sent bytes that are not an all-reduce chunk");
      return Status::error("rank " + std::to_string(t.peer) + " is in " + describe(t.inHeader) +
                           ", this rank in " + describe(t.expected) +
                           ": the ranks disagree on the call");
    }
  }
  return Status::ok();
}

/// Runs all transfers of one phase at once (no pair of ranks can block each
/// other) until done or the deadline.
Status exchange(std::vector<Socket> &sockets, std::vector<Transfer> &transfers,
                const Deadline &deadline, std::chrono::milliseconds timeout) {
  std::vector<pollfd> fds;
  std::vector<Transfer *> polled;
  for (;;) {
    fds.clear();
    polled.clear();
    for (Transfer &t : transfers) {
      short events = (t.sending() ? POLLOUT : 0) | (t.receiving() ? POLLIN : 0);
      if (events) {
        fds.push_back({sockets[t.peer].fd(), events, 0});
        polled.push_back(&t);
      }
    }
    if (fds.empty())
      return Status::ok();
    int rc = ::poll(fds.data(), fds.size(), deadline.remainingMs());
    if (rc < 0 && errno == EINTR)
      continue;
    if (rc < 0)
      return Status::error("poll failed: " + errnoText(errno));
    if (rc == 0) {
      std::vector<int> from, to;
      for (Transfer *t : polled) {
        if (t->receiving())
          from.push_back(t->peer);
        if (t->sending())
          to.push_back(t->peer);
      }
      std::string what = from.empty() ? "" : "waiting for data from rank(s) " + ranksText(from);
      if (!to.empty())
        what += std::string(what.empty() ? "" : "; ") + "rank(s) " + ranksText(to) +
                " not reading what this rank sends";
      return Status::error("timed out after " + formatSeconds(timeout) + ": " + what +
                           " (stalled or failed)");
    }
    for (size_t i = 0; i < fds.size(); ++i) {
      if (!fds[i].revents)
        continue;
      Transfer &t = *polled[i];
      if (t.receiving())
        MOEC_RETURN_IF_ERROR(receiveSome(sockets[t.peer], t));
      if (t.sending())
        MOEC_RETURN_IF_ERROR(sendSome(sockets[t.peer], t));
    }
  }
}

Status parseAddress(const std::string &value, std::string &host, uint16_t &port) {
  size_t space = value.rfind(' ');
  if (space == std::string::npos || space == 0)
    return Status::error("a malformed address '" + value + "'");
  host = value.substr(0, space);
  std::string digits = value.substr(space + 1);
  if (digits.empty() || digits.size() > 5 ||
      digits.find_first_not_of("0123456789") != std::string::npos || std::stoi(digits) > 65535)
    return Status::error("a malformed address '" + value + "'");
  port = static_cast<uint16_t>(std::stoi(digits));
  return Status::ok();
}

} // namespace

HostCommunicator::~HostCommunicator() = default;

Status HostCommunicator::create(TcpStore &store, std::chrono::milliseconds timeout,
                                std::unique_ptr<HostCommunicator> &out) {
  const int rank = store.rank(), size = store.worldSize();
  std::string where = "host communicator setup (rank " + std::to_string(rank) + " of " +
                      std::to_string(size) + ")";
  std::unique_ptr<HostCommunicator> comm(new HostCommunicator());
  comm->rank_ = rank;
  comm->size_ = size;
  comm->timeout_ = timeout;
  comm->peers_ = std::make_unique<Peers>();
  std::vector<Socket> &sockets = comm->peers_->sockets;
  sockets.resize(size);
  std::string prefix = store.nextPrefix("host-communicator");

  auto setUp = [&]() -> Status {
    Deadline deadline(timeout);
    auto left = [&] { return std::chrono::milliseconds(deadline.remainingMs()); };
    // This rank's listener, on the interface by which it reaches the store.
    Socket listener;
    uint16_t port = 0;
    MOEC_RETURN_IF_ERROR(listenTcp(store.localHost(), 0, listener, port));
    MOEC_RETURN_IF_ERROR(
        store.set(prefix + "address/" + std::to_string(rank), store.localHost() + " " +
                                                                   std::to_string(port)));
    // A nonce of rank 0's tells this job's connections from strays.
    uint64_t nonce = 0;
    std::string nonceText;
    if (rank == 0) {
      std::random_device device;
      nonce = (uint64_t(device()) << 32) ^ device();
      MOEC_RETURN_IF_ERROR(store.set(prefix + "nonce", std::to_string(nonce)));
    } else {
      MOEC_RETURN_IF_ERROR(store.get(prefix + "nonce", nonceText, left()));
      auto [end, ec] = std::from_chars(nonceText.data(), nonceText.data() + nonceText.size(), nonce);
      if (ec != std::errc() || end != nonceText.data() + nonceText.size())
        return Status::error("a malformed nonce '" + nonceText + "' in the store");
    }
    // Connect to the ranks below (their listeners' backlogs take the
    // connections before they accept), then accept the ranks above.
    for (int peer = 0; peer < rank; ++peer) {
      std::string value, host;
      uint16_t peerPort = 0;
      Status got = store.get(prefix + "address/" + std::to_string(peer), value, left());
      if (!got.isOk())
        return Status::error("rank " + std::to_string(peer) +
                             " did not publish its address: " + got.message());
      MOEC_RETURN_IF_ERROR(parseAddress(value, host, peerPort)
                               .withContext("rank " + std::to_string(peer) + "'s address"));
      MOEC_RETURN_IF_ERROR(connectTcp(host, peerPort, deadline, "rank " + std::to_string(peer),
                                      sockets[peer]));
      Hello hello{kHelloMagic, static_cast<uint32_t>(size), nonce, static_cast<uint32_t>(rank), 0};
      MOEC_RETURN_IF_ERROR(sendAll(sockets[peer], &hello, sizeof(hello), deadline,
                                   "rank " + std::to_string(peer)));
    }
    for (int waiting = size - 1 - rank; waiting > 0;) {
      Socket socket;
      bool timedOut = false;
      MOEC_RETURN_IF_ERROR(acceptTcp(listener, deadline, socket, timedOut));
      if (timedOut) {
        std::vector<int> missing;
        for (int peer = rank + 1; peer < size; ++peer)
          if (!sockets[peer].isOpen())
            missing.push_back(peer);
        return Status::error("rank(s) " + ranksText(missing) + " did not connect within " +
                             formatSeconds(timeout) + " (not started, or failed)");
      }
      // A rank sends its hello at once; a stray connection gets 2 s at most.
      Hello hello{};
      Deadline helloDeadline(std::min(left(), std::chrono::milliseconds(2000)));
      Status read = receiveAll(socket, &hello, sizeof(hello), helloDeadline, "a connecting rank");
      if (!read.isOk() || hello.magic != kHelloMagic || hello.nonce != nonce)
        continue; // not of this job: dropped
      if (hello.size != static_cast<uint32_t>(size))
        return Status::error("a rank connected with world size " + std::to_string(hello.size) +
                             ", this rank's is " + std::to_string(size));
      if (hello.rank <= static_cast<uint32_t>(rank) || hello.rank >= static_cast<uint32_t>(size))
        return Status::error("a connection claims rank " + std::to_string(hello.rank) +
                             ", which should not connect to rank " + std::to_string(rank));
      if (sockets[hello.rank].isOpen())
        return Status::error("two connections claim rank " + std::to_string(hello.rank) +
                             " (two processes with one RANK?)");
      sockets[hello.rank] = std::move(socket);
      --waiting;
    }
    for (int peer = 0; peer < size; ++peer)
      if (peer != rank) {
        MOEC_RETURN_IF_ERROR(setNonBlocking(sockets[peer]));
        setNoDelay(sockets[peer]);
      }
    return Status::ok();
  };
  Status status = setUp();
  if (!status.isOk()) {
    status = status.withContext(where);
    store.abort(status.message()); // the other ranks fail now, not at their timeout
    return status;
  }
  out = std::move(comm);
  return Status::ok();
}

template <typename T> Status HostCommunicator::allReduce(T *data, size_t count, void *stream) {
  constexpr uint32_t dtype = sizeof(T) == 4 ? 0 : 1;
  uint64_t call = calls_; // counted once the ranks exchange, below
  std::string where = "host all-reduce #" + std::to_string(call) + " of " +
                      std::to_string(count) + (dtype == 0 ? " f32" : " bf16") + " values (rank " +
                      std::to_string(rank_) + " of " + std::to_string(size_) + ")";
  if (!broken_.empty())
    return Status::error(where + ": the communicator failed earlier: " + broken_);
  if (stream)
    return Status::error(where + ": the host communicator takes host memory and no stream");
  if (count > (SIZE_MAX / 4) / sizeof(T))
    return Status::error(where + ": too many values");
  ++calls_;
  if (size_ == 1)
    return Status::ok();
  const size_t n = static_cast<size_t>(size_);
  auto begin = [&](size_t chunk) { return count / n * chunk + std::min(chunk, count % n); };
  const size_t mine = begin(rank_), mineLength = begin(rank_ + 1) - mine;
  Peers &peers = *peers_;
  Deadline deadline(timeout_);

  auto header = [&](uint32_t phase, int sender) {
    return ChunkHeader{kDataMagic, dtype, call, count, phase, static_cast<uint32_t>(sender)};
  };
  auto run = [&]() -> Status {
    // Phase 1: chunk p of this rank's data to rank p; chunk `rank` of every
    // rank's data into scratch (rank r's at r).
    peers.scratch.resize(n * mineLength * sizeof(T));
    T *scratch = reinterpret_cast<T *>(peers.scratch.data());
    std::vector<Transfer> transfers;
    for (int p = 0; p < size_; ++p) {
      if (p == rank_)
        continue;
      Transfer t;
      t.peer = p;
      t.outHeader = header(1, rank_);
      t.outPayload = reinterpret_cast<const uint8_t *>(data + begin(p));
      t.outBytes = (begin(p + 1) - begin(p)) * sizeof(T);
      t.expected = header(1, p);
      t.inPayload = reinterpret_cast<uint8_t *>(scratch + p * mineLength);
      t.inBytes = mineLength * sizeof(T);
      transfers.push_back(t);
    }
    MOEC_RETURN_IF_ERROR(exchange(peers.sockets, transfers, deadline, timeout_));
    // The sum in rank order, in float.
    peers.sum.resize(mineLength);
    float *sum = peers.sum.data();
    for (int r = 0; r < size_; ++r) {
      const T *from = r == rank_ ? data + mine : scratch + r * mineLength;
      if (r == 0)
        for (size_t k = 0; k < mineLength; ++k)
          sum[k] = toFloat(from[k]);
      else
        for (size_t k = 0; k < mineLength; ++k)
          sum[k] += toFloat(from[k]);
    }
    for (size_t k = 0; k < mineLength; ++k)
      fromFloat(sum[k], data[mine + k]);
    // Phase 2: this rank's summed chunk to all; theirs into place.
    for (Transfer &t : transfers) {
      int p = t.peer;
      t = Transfer();
      t.peer = p;
      t.outHeader = header(2, rank_);
      t.outPayload = reinterpret_cast<const uint8_t *>(data + mine);
      t.outBytes = mineLength * sizeof(T);
      t.expected = header(2, p);
      t.inPayload = reinterpret_cast<uint8_t *>(data + begin(p));
      t.inBytes = (begin(p + 1) - begin(p)) * sizeof(T);
    }
    return exchange(peers.sockets, transfers, deadline, timeout_);
  };
  Status status = run();
  if (!status.isOk()) {
    // Out of step with its peers for good: close every connection, so that
    // the peers fail now instead of at their deadline.
    broken_ = status.message();
    for (Socket &socket : peers.sockets)
      socket.close();
    return status.withContext(where);
  }
  return Status::ok();
}

Status HostCommunicator::allReduceSum(float *data, size_t count, void *stream) {
  return allReduce(data, count, stream);
}

Status HostCommunicator::allReduceSumBF16(uint16_t *data, size_t count, void *stream) {
  return allReduce(data, count, stream);
}

} // namespace moec::rt::dist
