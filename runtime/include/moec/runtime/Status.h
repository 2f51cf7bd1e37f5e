//===- Status.h - errors with context, without exceptions ------*- C++ -*-===//
//
// The runtime reports every failure as a Status carrying a message that names
// the place (file, tensor, CUDA call) and the reason. No exceptions, so the
// runtime links into exception-free hosts and behind a C API.
//
//===----------------------------------------------------------------------===//

#ifndef MOEC_RUNTIME_STATUS_H
#define MOEC_RUNTIME_STATUS_H

#include <optional>
#include <string>
#include <utility>

namespace moec::rt {

class [[nodiscard]] Status {
public:
  static Status ok() { return Status(); }
  static Status error(std::string message) { return Status(std::move(message)); }

  bool isOk() const { return !message_.has_value(); }
  explicit operator bool() const { return isOk(); }
  const std::string &message() const {
    static const std::string empty;
    return message_ ? *message_ : empty;
  }
  /// Prefixes the message with where it happened: "reading x.npz: ...".
  Status withContext(const std::string &context) const {
    return isOk() ? *this : error(context + ": " + *message_);
  }

private:
  Status() = default;
  explicit Status(std::string message) : message_(std::move(message)) {}
  std::optional<std::string> message_;
};

/// Returns the status from the enclosing function if it is an error.
#define MOEC_RETURN_IF_ERROR(expr)                                                 \
  do {                                                                             \
    ::moec::rt::Status moecStatus_ = (expr);                                       \
    if (!moecStatus_.isOk())                                                       \
      return moecStatus_;                                                          \
  } while (0)

} // namespace moec::rt

#endif // MOEC_RUNTIME_STATUS_H
