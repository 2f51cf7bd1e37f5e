//===- JsonUtil.h - untrusted JSON: checks and helpers --------*- C++ -*-===//
//
// llvm::json::parse recurses once per nesting level, so a header of a
// hundred MiB of '[' would exhaust the stack, and it keeps one of two equal
// keys silently. Every JSON text the reader is given (safetensors headers,
// config.json, the index) is scanned for both. Also the two helpers both
// readers use in their messages.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_FRONTENDS_CHECKPOINT_JSONUTIL_H
#define MOEC_FRONTENDS_CHECKPOINT_JSONUTIL_H

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/JSON.h"

#include <optional>
#include <string>
#include <vector>

namespace moec::checkpoint::detail {

/// The deepest nesting of arrays and objects accepted in any JSON file.
constexpr unsigned kMaxJsonDepth = 64;

/// Whether `text` nests arrays and objects at most `kMaxJsonDepth` deep
/// (brackets inside strings do not count; the text need not be valid JSON).
inline bool jsonDepthWithinLimit(llvm::StringRef text) {
  unsigned depth = 0;
  bool inString = false, escaped = false;
  for (char c : text) {
    if (inString) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        inString = false;
      continue;
    }
    if (c == '"') {
      inString = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth)
        return false;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return true;
}

/// The first key that an object of `text` (valid JSON) holds twice, if any.
/// llvm::json::parse keeps one of the two silently; a safetensors header
/// naming a tensor twice, or an index mapping it twice, must be an error.
inline std::optional<std::string> findDuplicateKey(llvm::StringRef text) {
  struct Frame {
    bool isObject;
    bool expectKey;
    llvm::StringSet<> keys;
  };
  std::vector<Frame> stack;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '"') {
      size_t start = i;
      for (++i; i < text.size() && text[i] != '"'; ++i)
        if (text[i] == '\\')
          ++i;
      if (stack.empty() || !stack.back().isObject || !stack.back().expectKey)
        continue;
      stack.back().expectKey = false;
      // The token with its quotes is a JSON string: parse it to unescape.
      llvm::Expected<llvm::json::Value> key = llvm::json::parse(text.slice(start, i + 1));
      if (!key) {
        llvm::consumeError(key.takeError());
        continue;
      }
      if (std::optional<llvm::StringRef> name = key->getAsString())
        if (!stack.back().keys.insert(*name).second)
          return name->str();
    } else if (c == '{' || c == '[') {
      stack.push_back({c == '{', c == '{', {}});
    } else if ((c == '}' || c == ']') && !stack.empty()) {
      stack.pop_back();
    } else if (c == ',' && !stack.empty() && stack.back().isObject) {
      stack.back().expectKey = true;
    }
  }
  return std::nullopt;
}

/// "a string", "an array", ...: what a value is, for messages.
inline llvm::StringRef kindName(const llvm::json::Value &value) {
  switch (value.kind()) {
  case llvm::json::Value::Null:
    return "null";
  case llvm::json::Value::Boolean:
    return "a boolean";
  case llvm::json::Value::Number:
    return "a number";
  case llvm::json::Value::String:
    return "a string";
  case llvm::json::Value::Array:
    return "an array";
  case llvm::json::Value::Object:
    return "an object";
  }
  return "a value";
}

/// The object's keys, sorted, so the first error reported does not depend on
/// hash order.
inline std::vector<llvm::StringRef> sortedKeys(const llvm::json::Object &object) {
  std::vector<llvm::StringRef> keys;
  keys.reserve(object.size());
  for (const auto &entry : object)
    keys.push_back(entry.first);
  llvm::sort(keys);
  return keys;
}

} // namespace moec::checkpoint::detail

#endif // MOEC_FRONTENDS_CHECKPOINT_JSONUTIL_H
