//===- StoreFrame.h - the TCP store's length-prefixed frames ----*- C++ -*-===//
//
// One frame is a 24-byte header and a body of length-prefixed strings, all
// integers little-endian:
//
//   magic "MoSt" | op u8 | version u8 | string count u16 | body bytes u32
//   | timeout ms u32 | number i64 | body: (length u32, bytes) per string
//
// Requests: Set [key, value]; Get [key...] (the first present key's index and
// value, waiting up to `timeout ms`); Add [key] (+number, the sum back).
// Replies: Ok (number; [value] of a Get), Timeout, Error [message].
//
// The reader trusts nothing: the magic and version are checked as soon as
// they arrive, sizes against fixed bounds before anything is buffered, the
// strings must fill the body exactly, and each op's shape is checked. Bytes
// that are not a frame are an error naming what is wrong, never a crash or a
// wait for a length the sender made up (fuzzed: runtime/test/fuzz).
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_SRC_DIST_STOREFRAME_H
#define MOEC_RUNTIME_SRC_DIST_STOREFRAME_H

#include "moec/runtime/Status.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace moec::rt::dist {

enum class StoreOp : uint8_t {
  Set = 1,
  Get = 2,
  Add = 3,
  Ok = 16,
  Timeout = 17,
  Error = 18,
};

struct StoreFrame {
  StoreOp op = StoreOp::Ok;
  uint32_t timeoutMs = 0;
  int64_t number = 0;
  std::vector<std::string> strings;
};

inline constexpr size_t kStoreHeaderBytes = 24;
inline constexpr uint8_t kStoreVersion = 1;
/// Bounds of what one frame may carry: the store holds rendezvous data
/// (addresses, NCCL's 128-byte id, handshake records), never tensors.
inline constexpr size_t kStoreMaxBodyBytes = 4u << 20;
inline constexpr size_t kStoreMaxKeyBytes = 1024;
inline constexpr size_t kStoreMaxGetKeys = 64;

/// The frame's bytes. The frame must satisfy checkStoreFrame.
std::string encodeStoreFrame(const StoreFrame &frame);

enum class FrameParse { Incomplete, Complete, Malformed };

/// Reads one frame from the start of `data`. Complete: `frame` holds it and
/// `consumed` its bytes. Incomplete: more bytes are needed (never returned
/// once the bytes present already break a rule). Malformed: `error` says why.
FrameParse parseStoreFrame(const uint8_t *data, size_t size, StoreFrame &frame, size_t &consumed,
                           std::string &error);

/// The op's shape: Set two strings, a non-empty key; Get 1..64 keys; Add one
/// key; Ok at most one string; Timeout none; Error one message.
Status checkStoreFrame(const StoreFrame &frame);

/// "Set", "Get", ... or "op 42".
std::string storeOpName(StoreOp op);

} // namespace moec::rt::dist

#endif // MOEC_RUNTIME_SRC_DIST_STOREFRAME_H
