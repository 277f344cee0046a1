// Status and Result<T>: the one error currency of Tessera.
//
// A Status is either OK or carries a code, a human message and, for
// validation errors, the name of the offending field (a JSON path such as
// "global_batch" or "replicas[1].batch"). Result<T> holds either a T or a
// non-OK Status. Both are [[nodiscard]]: ignoring an error is a compile error
// under -Werror.
//
// Exceptions from third-party libraries (LibTorch, Boost, SQLite wrappers,
// nlohmann_json) are caught at the edge that calls them and turned into a
// Status; they never cross a module boundary.
//
// Thread safety: values; copying and reading are safe from any thread.
// The mapping from StatusCode to an HTTP status lives in one function,
// api::HttpStatusFor (api/http_status.h).
#ifndef TESSERA_COMMON_STATUS_H_
#define TESSERA_COMMON_STATUS_H_

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace tessera {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     // malformed or out-of-range input (HTTP 400)
  kUnauthenticated,     // missing or unknown credentials (401)
  kPermissionDenied,    // authenticated but not allowed (403)
  kNotFound,            // (404)
  kAlreadyExists,       // (409)
  kFailedPrecondition,  // valid request, wrong state, e.g. cancel a finished job (409)
  kPayloadTooLarge,     // request body over the limit (413)
  kResourceExhausted,   // queue full, too many requests (429)
  kUnimplemented,       // (501)
  kUnavailable,         // transient: store closed, shutting down (503)
  kDeadlineExceeded,    // (504)
  kInternal,            // a bug or an unexpected outside failure (500)
};

// Stable lower-case name, e.g. "invalid_argument"; used in JSON error bodies.
std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message, std::string field = {})
      : code_(code), message_(std::move(message)), field_(std::move(field)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // Name of the offending input field, or empty.
  const std::string& field() const { return field_; }

  // Returns a copy whose message is "<prefix>: <message>".
  Status WithPrefix(std::string_view prefix) const;
  // "invalid_argument: global_batch: must be positive" style text for logs.
  std::string ToString() const;

  // Explicitly discards a status the caller has decided not to act on.
  void IgnoreError() const {}

  friend bool operator==(const Status& a, const Status& b) {
    return a.code_ == b.code_ && a.message_ == b.message_ && a.field_ == b.field_;
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
  std::string field_;
};

inline Status InvalidArgument(std::string msg, std::string field = {}) {
  return Status(StatusCode::kInvalidArgument, std::move(msg), std::move(field));
}
inline Status Unauthenticated(std::string msg) {
  return Status(StatusCode::kUnauthenticated, std::move(msg));
}
inline Status PermissionDenied(std::string msg) {
  return Status(StatusCode::kPermissionDenied, std::move(msg));
}
inline Status NotFound(std::string msg) { return Status(StatusCode::kNotFound, std::move(msg)); }
inline Status AlreadyExists(std::string msg, std::string field = {}) {
  return Status(StatusCode::kAlreadyExists, std::move(msg), std::move(field));
}
inline Status FailedPrecondition(std::string msg) {
  return Status(StatusCode::kFailedPrecondition, std::move(msg));
}
inline Status PayloadTooLarge(std::string msg) {
  return Status(StatusCode::kPayloadTooLarge, std::move(msg));
}
inline Status ResourceExhausted(std::string msg) {
  return Status(StatusCode::kResourceExhausted, std::move(msg));
}
inline Status Unimplemented(std::string msg) {
  return Status(StatusCode::kUnimplemented, std::move(msg));
}
inline Status Unavailable(std::string msg) {
  return Status(StatusCode::kUnavailable, std::move(msg));
}
inline Status DeadlineExceeded(std::string msg) {
  return Status(StatusCode::kDeadlineExceeded, std::move(msg));
}
inline Status Internal(std::string msg) { return Status(StatusCode::kInternal, std::move(msg)); }

// Result<T>: a T or a non-OK Status.
// REQUIRES: a Result is never constructed from an OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}        // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {  // NOLINT: implicit by design
    assert(!std::get<Status>(v_).ok() && "Result built from an OK Status");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  // OK when a value is held.
  Status status() const { return ok() ? Status::Ok() : std::get<Status>(v_); }

  // REQUIRES: ok().
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  T value_or(T fallback) const& { return ok() ? value() : std::move(fallback); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace tessera

#define TESSERA_CONCAT_INNER_(a, b) a##b
#define TESSERA_CONCAT_(a, b) TESSERA_CONCAT_INNER_(a, b)

// Returns from the enclosing function if `expr` (a Status) is not OK.
#define TESSERA_RETURN_IF_ERROR(expr)                  \
  do {                                                 \
    ::tessera::Status tessera_status_ = (expr);        \
    if (!tessera_status_.ok()) return tessera_status_; \
  } while (0)

// TESSERA_ASSIGN_OR_RETURN(auto x, MakeX()); returns the error if not OK.
#define TESSERA_ASSIGN_OR_RETURN(lhs, expr) \
  TESSERA_ASSIGN_OR_RETURN_IMPL_(TESSERA_CONCAT_(tessera_result_, __LINE__), lhs, expr)
#define TESSERA_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                   \
  if (!tmp.ok()) return tmp.status();                  \
  lhs = std::move(tmp).value()

#endif  // TESSERA_COMMON_STATUS_H_
