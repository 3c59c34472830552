// Errors as values. Every fallible call across a module boundary returns a
// Status or a Result<T>; exceptions from third-party libraries stop at the
// wrapper that calls them.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "common/check.h"

namespace shoal {

enum class ErrorCode {
  kOk = 0,
  kInvalidArgument,  // bad input from a user: config, manifest, token (exit code 2)
  kNotFound,
  kAlreadyExists,
  kPermissionDenied,
  kUnavailable,  // a peer or the agent cannot be reached right now
  kCorrupt,      // bad bytes from the wire or the disk
  kStorage,      // the state database cannot be written now: disk full, read-only, I/O error
  kInternal,
};

const char* error_code_name(ErrorCode code);
// The code error_code_name gives `name`; kInternal for a name it never gives.
ErrorCode error_code_from_name(std::string_view name);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return {}; }

  bool is_ok() const { return code_ == ErrorCode::kOk; }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // A copy whose message is "<context>: <message>", for adding where an
  // error happened without losing what it was.
  Status with_context(const std::string& context) const {
    return Status(code_, context + ": " + message_);
  }

 private:
  ErrorCode code_ = ErrorCode::kOk;
  std::string message_;
};

inline Status invalid_argument(std::string message) {
  return {ErrorCode::kInvalidArgument, std::move(message)};
}
inline Status corrupt(std::string message) { return {ErrorCode::kCorrupt, std::move(message)}; }
inline Status not_found(std::string message) { return {ErrorCode::kNotFound, std::move(message)}; }
inline Status internal_error(std::string message) {
  return {ErrorCode::kInternal, std::move(message)};
}

// A value or the Status that explains why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {  // NOLINT: implicit by design
    SHOAL_CHECK(!status_.is_ok(), "a Result made from an ok Status would hold neither value nor error");
  }

  bool is_ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }

  T& value() & {
    SHOAL_CHECK(is_ok(), "the value of a failed Result was read");
    return *value_;
  }
  const T& value() const& {
    SHOAL_CHECK(is_ok(), "the value of a failed Result was read");
    return *value_;
  }
  T&& value() && {
    SHOAL_CHECK(is_ok(), "the value of a failed Result was read");
    return std::move(*value_);
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace shoal

// Returns early from the enclosing function when `expr` (a Status) failed.
#define SHOAL_RETURN_IF_ERROR(expr)            \
  do {                                         \
    ::shoal::Status shoal_status_ = (expr);    \
    if (!shoal_status_.is_ok()) return shoal_status_; \
  } while (0)

#define SHOAL_CONCAT_INNER(a, b) a##b
#define SHOAL_CONCAT(a, b) SHOAL_CONCAT_INNER(a, b)
// Declares `lhs` from a Result, or returns its Status from the enclosing function.
#define SHOAL_ASSIGN_OR_RETURN(lhs, expr) \
  SHOAL_ASSIGN_OR_RETURN_IMPL(SHOAL_CONCAT(shoal_result_, __LINE__), lhs, expr)
#define SHOAL_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.is_ok()) return tmp.status();            \
  lhs = std::move(tmp).value()
