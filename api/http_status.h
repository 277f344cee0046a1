// HTTP status codes and JSON error bodies for Status values.
//
// HttpStatusFor is the ONE place that maps a StatusCode to an HTTP status;
// every HTTP edge of Tessera (routes, server-level errors, CLI messages)
// goes through it. ErrorJson / ErrorBody build the body every 4xx/5xx
// answer carries:
//   {"error":{"code":"invalid_argument","message":"...","field":"global_batch"}}
// ("field" is omitted when the Status names no field).
//
// Thread safety: pure functions.
#ifndef TESSERA_API_HTTP_STATUS_H_
#define TESSERA_API_HTTP_STATUS_H_

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace tessera::api {

// kOk -> 200, kInvalidArgument -> 400, kUnauthenticated -> 401,
// kPermissionDenied -> 403, kNotFound -> 404, kAlreadyExists and
// kFailedPrecondition -> 409, kPayloadTooLarge -> 413,
// kResourceExhausted -> 429, kUnimplemented -> 501, kUnavailable -> 503,
// kDeadlineExceeded -> 504, kInternal (and anything unknown) -> 500.
int HttpStatusFor(StatusCode code);

// The reverse direction, used by clients that turn an HTTP answer back into
// a Status: the StatusCode named by an error body's "code", if known.
std::optional<StatusCode> StatusCodeFromName(std::string_view name);

// {"error":{"code":..., "message":..., "field":...}}; "field" only when set.
// REQUIRES: !status.ok().
nlohmann::json ErrorJson(const Status& status);
// ErrorJson serialized; invalid UTF-8 in messages is replaced, never thrown.
std::string ErrorBody(const Status& status);

// Parses an error body produced by ErrorBody back into a Status. When the
// body is not such a document, returns a Status built from the HTTP status
// alone (the body, truncated, becomes the message).
Status StatusFromErrorBody(int http_status, std::string_view body);

// Serializes JSON for the wire: compact, invalid UTF-8 replaced (never throws).
std::string DumpJson(const nlohmann::json& j);

}  // namespace tessera::api

#endif  // TESSERA_API_HTTP_STATUS_H_
