//===- StoreFrame.cpp - the TCP store's length-prefixed frames -------------===//

#include "StoreFrame.h"

#include <cstring>

namespace moec::rt::dist {
namespace {

constexpr char kMagic[4] = {'M', 'o', 'S', 't'};

void putU16(std::string &out, uint16_t value) {
  out.push_back(static_cast<char>(value & 0xff));
  out.push_back(static_cast<char>(value >> 8));
}
void putU32(std::string &out, uint32_t value) {
  for (int i = 0; i < 4; ++i)
    out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}
void putU64(std::string &out, uint64_t value) {
  for (int i = 0; i < 8; ++i)
    out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}
uint64_t getLE(const uint8_t *data, int bytes) {
  uint64_t value = 0;
  for (int i = bytes - 1; i >= 0; --i)
    value = (value << 8) | data[i];
  return value;
}

bool knownOp(uint8_t op) {
  switch (static_cast<StoreOp>(op)) {
  case StoreOp::Set:
  case StoreOp::Get:
  case StoreOp::Add:
  case StoreOp::Ok:
  case StoreOp::Timeout:
  case StoreOp::Error:
    return true;
  }
  return false;
}

} // namespace

std::string storeOpName(StoreOp op) {
  switch (op) {
  case StoreOp::Set:
    return "Set";
  case StoreOp::Get:
    return "Get";
  case StoreOp::Add:
    return "Add";
  case StoreOp::Ok:
    return "Ok";
  case StoreOp::Timeout:
    return "Timeout";
  case StoreOp::Error:
    return "Error";
  }
  return "op " + std::to_string(static_cast<int>(op));
}

std::string encodeStoreFrame(const StoreFrame &frame) {
  size_t body = 0;
  for (const std::string &s : frame.strings)
    body += 4 + s.size();
  std::string out;
  out.reserve(kStoreHeaderBytes + body);
  out.append(kMagic, sizeof(kMagic));
  out.push_back(static_cast<char>(frame.op));
  out.push_back(static_cast<char>(kStoreVersion));
  putU16(out, static_cast<uint16_t>(frame.strings.size()));
  putU32(out, static_cast<uint32_t>(body));
  putU32(out, frame.timeoutMs);
  putU64(out, static_cast<uint64_t>(frame.number));
  for (const std::string &s : frame.strings) {
    putU32(out, static_cast<uint32_t>(s.size()));
    out += s;
  }
  return out;
}

Status checkStoreFrame(const StoreFrame &frame) {
  size_t count = frame.strings.size();
  auto keysOk = [&](size_t keys) -> Status {
    for (size_t i = 0; i < keys; ++i) {
      if (frame.strings[i].empty())
        return Status::error(storeOpName(frame.op) + " with an empty key");
      if (frame.strings[i].size() > kStoreMaxKeyBytes)
        return Status::error(storeOpName(frame.op) + " with a key of " +
                             std::to_string(frame.strings[i].size()) + " bytes (at most " +
                             std::to_string(kStoreMaxKeyBytes) + ")");
    }
    return Status::ok();
  };
  auto expect = [&](bool ok, const char *shape) -> Status {
    if (ok)
      return Status::ok();
    return Status::error(storeOpName(frame.op) + " must carry " + shape + ", not " +
                         std::to_string(count) + " strings");
  };
  switch (frame.op) {
  case StoreOp::Set:
    MOEC_RETURN_IF_ERROR(expect(count == 2, "a key and a value"));
    return keysOk(1);
  case StoreOp::Get:
    MOEC_RETURN_IF_ERROR(expect(count >= 1 && count <= kStoreMaxGetKeys, "1 to 64 keys"));
    return keysOk(count);
  case StoreOp::Add:
    MOEC_RETURN_IF_ERROR(expect(count == 1, "one key"));
    return keysOk(1);
  case StoreOp::Ok:
    return expect(count <= 1, "at most one value");
  case StoreOp::Timeout:
    return expect(count == 0, "no strings");
  case StoreOp::Error:
    return expect(count == 1, "one message");
  }
  return Status::error("unknown " + storeOpName(frame.op));
}

FrameParse parseStoreFrame(const uint8_t *data, size_t size, StoreFrame &frame, size_t &consumed,
                           std::string &error) {
  consumed = 0;
  // Each field is checked as soon as its bytes are present.
  size_t magicBytes = size < sizeof(kMagic) ? size : sizeof(kMagic);
  if (std::memcmp(data, kMagic, magicBytes) != 0) {
    error = "not a store frame (bad magic bytes)";
    return FrameParse::Malformed;
  }
  if (size > 4 && !knownOp(data[4])) {
    error = "unknown store op " + std::to_string(data[4]);
    return FrameParse::Malformed;
  }
  if (size > 5 && data[5] != kStoreVersion) {
    error = "store frame version " + std::to_string(data[5]) + " (this runtime speaks " +
            std::to_string(kStoreVersion) + ")";
    return FrameParse::Malformed;
  }
  if (size < kStoreHeaderBytes)
    return FrameParse::Incomplete;
  uint64_t count = getLE(data + 6, 2);
  uint64_t body = getLE(data + 8, 4);
  if (body > kStoreMaxBodyBytes) {
    error = "a store frame of " + std::to_string(body) + " bytes (at most " +
            std::to_string(kStoreMaxBodyBytes) + ")";
    return FrameParse::Malformed;
  }
  if (count > kStoreMaxGetKeys || count * 4 > body) {
    error = "a store frame of " + std::to_string(count) + " strings in " + std::to_string(body) +
            " bytes";
    return FrameParse::Malformed;
  }
  if (size - kStoreHeaderBytes < body)
    return FrameParse::Incomplete;
  StoreFrame parsed;
  parsed.op = static_cast<StoreOp>(data[4]);
  parsed.timeoutMs = static_cast<uint32_t>(getLE(data + 12, 4));
  parsed.number = static_cast<int64_t>(getLE(data + 16, 8));
  const uint8_t *next = data + kStoreHeaderBytes;
  uint64_t left = body;
  for (uint64_t i = 0; i < count; ++i) {
    if (left < 4) {
      error = "store frame string " + std::to_string(i) + " has no length";
      return FrameParse::Malformed;
    }
    uint64_t length = getLE(next, 4);
    next += 4;
    left -= 4;
    if (length > left) {
      error = "store frame string " + std::to_string(i) + " of " + std::to_string(length) +
              " bytes overruns the body (" + std::to_string(left) + " bytes left)";
      return FrameParse::Malformed;
    }
    parsed.strings.emplace_back(reinterpret_cast<const char *>(next), length);
    next += length;
    left -= length;
  }
  if (left != 0) {
    error = "store frame has " + std::to_string(left) + " bytes after its strings";
    return FrameParse::Malformed;
  }
  Status shape = checkStoreFrame(parsed);
  if (!shape.isOk()) {
    error = shape.message();
    return FrameParse::Malformed;
  }
  frame = std::move(parsed);
  consumed = kStoreHeaderBytes + body;
  return FrameParse::Complete;
}

} // namespace moec::rt::dist
