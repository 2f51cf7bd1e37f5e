//===- Environment.cpp - a rank's place in the job, from the environment ---===//

#include "moec/runtime/dist/Environment.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <vector>

namespace moec::rt::dist {
namespace {

/// A decimal integer in [low, high], digits only.
Status parseInteger(const char *name, const char *text, int64_t low, int64_t high,
                    int64_t &value) {
  std::string s = text;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (s.empty() || s[0] == '-' || s[0] == '+' || ec != std::errc() ||
      end != s.data() + s.size())
    return Status::error(std::string(name) + "='" + s + "' is not a non-negative integer");
  if (value < low || value > high)
    return Status::error(std::string(name) + "=" + s + " is outside " + std::to_string(low) +
                         ".." + std::to_string(high));
  return Status::ok();
}

/// One value named by two variables (torchrun's, Open MPI's): either, or
/// both when they agree. `set` says whether any was given.
Status readEither(const std::function<const char *(const char *)> &lookup, const char *first,
                  const char *second, int64_t low, int64_t high, int64_t &value, bool &set) {
  const char *a = lookup(first), *b = lookup(second);
  set = a || b;
  int64_t va = 0, vb = 0;
  if (a)
    MOEC_RETURN_IF_ERROR(parseInteger(first, a, low, high, va));
  if (b)
    MOEC_RETURN_IF_ERROR(parseInteger(second, b, low, high, vb));
  if (a && b && va != vb)
    return Status::error(std::string(first) + "=" + a + " and " + second + "=" + b +
                         " disagree");
  if (set)
    value = a ? va : vb;
  return Status::ok();
}

} // namespace

Status parseDistEnvironment(const std::function<const char *(const char *)> &lookup,
                            DistEnvironment &out) {
  constexpr int64_t kMaxRanks = 1 << 16;
  DistEnvironment env;
  int64_t rank = 0, size = 1, local = 0;
  bool hasRank = false, hasSize = false, hasLocal = false;
  MOEC_RETURN_IF_ERROR(
      readEither(lookup, "RANK", "OMPI_COMM_WORLD_RANK", 0, kMaxRanks - 1, rank, hasRank));
  MOEC_RETURN_IF_ERROR(
      readEither(lookup, "WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", 1, kMaxRanks, size, hasSize));
  MOEC_RETURN_IF_ERROR(readEither(lookup, "LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", 0,
                                  kMaxRanks - 1, local, hasLocal));
  if (hasRank && !hasSize)
    return Status::error("RANK is set but WORLD_SIZE is not");
  if (hasSize && size > 1 && !hasRank)
    return Status::error("WORLD_SIZE=" + std::to_string(size) + " is set but RANK is not");
  if (rank >= size)
    return Status::error("RANK=" + std::to_string(rank) + " is not below WORLD_SIZE=" +
                         std::to_string(size));
  if (!hasLocal)
    local = rank;
  if (local >= size)
    return Status::error("LOCAL_RANK=" + std::to_string(local) + " is not below WORLD_SIZE=" +
                         std::to_string(size));
  env.rank = static_cast<int>(rank);
  env.worldSize = static_cast<int>(size);
  env.localRank = static_cast<int>(local);
  if (const char *address = lookup("MASTER_ADDR")) {
    env.masterAddress = address;
    if (env.masterAddress.empty())
      return Status::error("MASTER_ADDR is empty");
  }
  if (const char *port = lookup("MASTER_PORT")) {
    int64_t value = 0;
    MOEC_RETURN_IF_ERROR(parseInteger("MASTER_PORT", port, 1, 65535, value));
    env.masterPort = static_cast<uint16_t>(value);
  }
  if (const char *timeout = lookup("MOEC_DIST_TIMEOUT")) {
    char *end = nullptr;
    double seconds = std::strtod(timeout, &end);
    if (!*timeout || *end || !std::isfinite(seconds) || seconds <= 0 || seconds > 86400)
      return Status::error(std::string("MOEC_DIST_TIMEOUT='") + timeout +
                           "' is not a number of seconds in (0, 86400]");
    env.timeout = std::chrono::milliseconds(static_cast<int64_t>(std::ceil(seconds * 1000)));
  }
  out = env;
  return Status::ok();
}

Status readDistEnvironment(DistEnvironment &out) {
  return parseDistEnvironment([](const char *name) { return std::getenv(name); }, out);
}

Status visibleDevicesForRank(const char *visible, int localRank, std::string &out) {
  if (!visible) {
    out = std::to_string(localRank);
    return Status::ok();
  }
  std::vector<std::string> entries;
  std::string all = visible;
  for (size_t at = 0; at < all.size();) {
    size_t end = std::min(all.find(',', at), all.size());
    std::string entry = all.substr(at, end - at);
    entry.erase(0, entry.find_first_not_of(" \t"));
    entry.erase(entry.find_last_not_of(" \t") + 1);
    if (!entry.empty())
      entries.push_back(entry);
    at = end + 1;
  }
  if (entries.size() <= 1) {
    out = all;
    return Status::ok();
  }
  if (static_cast<size_t>(localRank) >= entries.size())
    return Status::error("CUDA_VISIBLE_DEVICES='" + all + "' names " +
                         std::to_string(entries.size()) + " devices, none for local rank " +
                         std::to_string(localRank));
  out = entries[static_cast<size_t>(localRank)];
  return Status::ok();
}

Status selectRankDevice(int localRank) {
  std::string visible;
  MOEC_RETURN_IF_ERROR(
      visibleDevicesForRank(std::getenv("CUDA_VISIBLE_DEVICES"), localRank, visible));
  if (setenv("CUDA_VISIBLE_DEVICES", visible.c_str(), 1) != 0)
    return Status::error("cannot set CUDA_VISIBLE_DEVICES");
  return Status::ok();
}

} // namespace moec::rt::dist
