//===- Handshake.cpp - the ranks' agreement before they compute ------------===//
//
// Records are joined in arrival order (an Add on the store numbers them), not
// by claimed rank, so that two processes claiming one rank both appear and
// the duplicate is named instead of one record overwriting the other.
//
//===----------------------------------------------------------------------===//

#include "moec/runtime/dist/Handshake.h"

#include "Socket.h"

#include <charconv>
#include <chrono>
#include <vector>

#include <unistd.h>

namespace moec::rt::dist {
namespace {

struct Record {
  std::string artifact, host;
  int64_t epSize = 0, rank = 0, worldSize = 0, pid = 0;
};

std::string hostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0)
    return "?";
  return name;
}

std::string printRecord(const Record &r) {
  return "artifact=" + r.artifact + "\nep_size=" + std::to_string(r.epSize) +
         "\nrank=" + std::to_string(r.rank) + "\nworld_size=" + std::to_string(r.worldSize) +
         "\nhost=" + r.host + "\npid=" + std::to_string(r.pid) + "\n";
}

Status parseRecord(const std::string &text, Record &out) {
  const char *names[] = {"artifact", "ep_size", "rank", "world_size", "host", "pid"};
  size_t at = 0;
  for (const char *name : names) {
    std::string prefix = std::string(name) + "=";
    size_t end = text.find('\n', at);
    if (end == std::string::npos || text.compare(at, prefix.size(), prefix) != 0)
      return Status::error("a malformed handshake record (no '" + prefix + "' line)");
    std::string value = text.substr(at + prefix.size(), end - at - prefix.size());
    at = end + 1;
    if (prefix == "artifact=" || prefix == "host=") {
      (prefix == "artifact=" ? out.artifact : out.host) = value;
      continue;
    }
    int64_t number = 0;
    auto [last, ec] = std::from_chars(value.data(), value.data() + value.size(), number);
    if (ec != std::errc() || last != value.data() + value.size())
      return Status::error("a malformed handshake record ('" + prefix + value + "')");
    int64_t *field = prefix == "ep_size=" ? &out.epSize
                     : prefix == "rank="  ? &out.rank
                     : prefix == "world_size=" ? &out.worldSize
                                              : &out.pid;
    *field = number;
  }
  if (at != text.size())
    return Status::error("a malformed handshake record (trailing bytes)");
  return Status::ok();
}

std::string who(const Record &r) {
  return "rank " + std::to_string(r.rank) + " (" + r.host + ", pid " + std::to_string(r.pid) + ")";
}

/// The first difference between this rank's record and the others, or "".
std::string compare(const Record &self, const std::vector<Record> &records) {
  for (const Record &r : records) {
    if (r.artifact != self.artifact)
      return who(r) + " runs artifact '" + r.artifact + "', " + who(self) + " runs '" +
             self.artifact + "'";
    if (r.worldSize != self.worldSize)
      return who(r) + " has world size " + std::to_string(r.worldSize) + ", " + who(self) +
             " has " + std::to_string(self.worldSize);
    if (r.epSize != self.epSize)
      return who(r) + " has EP size " + std::to_string(r.epSize) + ", " + who(self) + " has " +
             std::to_string(self.epSize);
  }
  std::vector<const Record *> byRank(self.worldSize, nullptr);
  for (const Record &r : records) {
    if (r.rank < 0 || r.rank >= self.worldSize)
      return who(r) + " is out of range for world size " + std::to_string(self.worldSize);
    if (byRank[r.rank])
      return "rank " + std::to_string(r.rank) + " is claimed twice: by " + who(*byRank[r.rank]) +
             " and " + who(r) + " (two processes with one RANK?)";
    byRank[r.rank] = &r;
  }
  return "";
}

} // namespace

Status handshake(TcpStore &store, const HandshakeInfo &info) {
  std::string where = "handshake of rank " + std::to_string(store.rank()) + " of " +
                      std::to_string(store.worldSize());
  if (info.artifact.empty() || info.artifact.size() > 512 ||
      info.artifact.find('\n') != std::string::npos)
    return Status::error(where + ": the artifact identity must be one line of 1 to 512 bytes");
  if (info.epSize < 1)
    return Status::error(where + ": EP size " + std::to_string(info.epSize) + " is not positive");
  Record self{info.artifact, hostName(), info.epSize, store.rank(), store.worldSize(),
              static_cast<int64_t>(getpid())};
  std::string prefix = store.nextPrefix("handshake");
  auto start = std::chrono::steady_clock::now();

  auto run = [&]() -> Status {
    int64_t joined = 0;
    MOEC_RETURN_IF_ERROR(store.add(prefix + "joined", 1, joined));
    int64_t index = joined - 1;
    MOEC_RETURN_IF_ERROR(store.set(prefix + "record/" + std::to_string(index), printRecord(self)));
    if (index >= self.worldSize)
      return Status::error("this process joined as number " + std::to_string(index + 1) +
                           ", but the world size is " + std::to_string(self.worldSize) +
                           ": more processes than WORLD_SIZE (or a wrong WORLD_SIZE)");
    std::vector<Record> records;
    for (int64_t i = 0; i < self.worldSize; ++i) {
      std::string text;
      auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(
          std::chrono::steady_clock::now() - start);
      auto left = std::max(store.timeout() - waited, std::chrono::milliseconds(0));
      Status got = store.get(prefix + "record/" + std::to_string(i), text, left);
      if (!got.isOk()) {
        // Say what the records present show: a mismatch, or who is missing.
        std::string mismatch = compare(self, records);
        if (!mismatch.empty())
          return Status::error(mismatch);
        std::vector<bool> present(self.worldSize, false);
        for (const Record &r : records)
          present[r.rank] = true;
        std::string missing;
        for (int r = 0; r < self.worldSize; ++r)
          if (!present[r])
            missing += (missing.empty() ? "" : ", ") + std::to_string(r);
        if (got.message().rfind("the job was aborted", 0) == 0)
          return got;
        return Status::error(std::to_string(records.size()) + " of " +
                             std::to_string(self.worldSize) + " processes joined within " +
                             formatSeconds(store.timeout()) + "; rank(s) " + missing +
                             " missing (not started, or failed)");
      }
      Record record;
      MOEC_RETURN_IF_ERROR(parseRecord(text, record)
                               .withContext("join #" + std::to_string(i) + " of the store"));
      records.push_back(record);
      // A difference is reported as soon as it is seen.
      std::string mismatch = compare(self, records);
      if (!mismatch.empty())
        return Status::error(mismatch);
    }
    std::string extra;
    bool found = false;
    MOEC_RETURN_IF_ERROR(store.tryGet(prefix + "record/" + std::to_string(self.worldSize), extra,
                                      found));
    if (found)
      return Status::error("more than " + std::to_string(self.worldSize) +
                           " processes joined: more processes than WORLD_SIZE");
    return Status::ok();
  };
  Status status = run();
  if (!status.isOk()) {
    status = status.withContext(where);
    store.abort(status.message());
  }
  return status;
}

} // namespace moec::rt::dist
