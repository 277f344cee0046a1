#include "common/status.h"

#include "common/enum_names.h"

namespace tessera {

constexpr EnumName<StatusCode> kStatusCodeNames[] = {
    {StatusCode::kOk, "ok"},
    {StatusCode::kInvalidArgument, "invalid_argument"},
    {StatusCode::kUnauthenticated, "unauthenticated"},
    {StatusCode::kPermissionDenied, "permission_denied"},
    {StatusCode::kNotFound, "not_found"},
    {StatusCode::kAlreadyExists, "already_exists"},
    {StatusCode::kFailedPrecondition, "failed_precondition"},
    {StatusCode::kPayloadTooLarge, "payload_too_large"},
    {StatusCode::kResourceExhausted, "resource_exhausted"},
    {StatusCode::kUnimplemented, "unimplemented"},
    {StatusCode::kUnavailable, "unavailable"},
    {StatusCode::kDeadlineExceeded, "deadline_exceeded"},
    {StatusCode::kInternal, "internal"},
};
static_assert(IsValidNameTable(kStatusCodeNames));

std::string_view StatusCodeName(StatusCode code) { return NameOf(kStatusCodeNames, code); }

Status Status::WithPrefix(std::string_view prefix) const {
  if (ok()) return *this;
  return Status(code_, std::string(prefix) + ": " + message_, field_);
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  std::string out(StatusCodeName(code_));
  out += ": ";
  if (!field_.empty()) {
    out += field_;
    out += ": ";
  }
  out += message_;
  return out;
}

}  // namespace tessera
