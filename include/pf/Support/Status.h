//===- Status.h - Error values for the LLVM-free libraries ------*- C++ -*-===//
//
// The libraries that link no LLVM (the schedule library, the training loop,
// the trainer, and PFSupport/PFNpz themselves) are built without exceptions
// (LLVM flags) and are called from tools and MLIR passes that turn failures
// into diagnostics, so every fallible function returns a Status or an
// Expected<T> carrying a message. formatText builds those messages.
//
//===----------------------------------------------------------------------===//

#ifndef PF_SUPPORT_STATUS_H
#define PF_SUPPORT_STATUS_H

#include <optional>
#include <string>
#include <utility>

namespace pf {

/// printf into a std::string (vsnprintf), for error messages.
std::string formatText(const char *format, ...) __attribute__((format(printf, 1, 2)));

/// Success, or a failure with a human-readable message.
class Status {
public:
  static Status success() { return Status(); }
  static Status error(std::string message) {
    Status s;
    s.failed_ = true;
    s.message_ = std::move(message);
    return s;
  }

  bool ok() const { return !failed_; }
  const std::string &message() const { return message_; }

private:
  bool failed_ = false;
  std::string message_;
};

/// A value of type T, or the message of the failure that prevented it.
template <typename T> class Expected {
public:
  Expected(T value) : value_(std::move(value)) {}
  /// Construct from a failed Status. A successful Status carries no value, so
  /// it is recorded as an internal error rather than silently accepted.
  Expected(const Status &status)
      : error_(status.ok() ? "internal error: success without a value"
                           : status.message()) {}

  bool ok() const { return value_.has_value(); }
  explicit operator bool() const { return ok(); }
  const std::string &error() const { return error_; }
  Status status() const { return ok() ? Status::success() : Status::error(error_); }

  T &operator*() { return *value_; }
  const T &operator*() const { return *value_; }
  T *operator->() { return &*value_; }
  const T *operator->() const { return &*value_; }
  T take() { return std::move(*value_); }

private:
  std::optional<T> value_;
  std::string error_;
};

} // namespace pf

#endif // PF_SUPPORT_STATUS_H
