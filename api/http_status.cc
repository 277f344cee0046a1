#include "api/http_status.h"

#include <array>

namespace tessera::api {
namespace {

constexpr std::array<StatusCode, 13> kAllCodes = {
    StatusCode::kOk,
    StatusCode::kInvalidArgument,
    StatusCode::kUnauthenticated,
    StatusCode::kPermissionDenied,
    StatusCode::kNotFound,
    StatusCode::kAlreadyExists,
    StatusCode::kFailedPrecondition,
    StatusCode::kPayloadTooLarge,
    StatusCode::kResourceExhausted,
    StatusCode::kUnimplemented,
    StatusCode::kUnavailable,
    StatusCode::kDeadlineExceeded,
    StatusCode::kInternal,
};

// The one StatusCode <-> HTTP status map, a row per code in the enum's
// order. `read_back`: an error answer with this HTTP status and no code name
// of ours means this code (409 reads back as kFailedPrecondition; 200 is no
// error).
struct HttpStatusRow {
  StatusCode code;
  int http;
  bool read_back;
};
constexpr HttpStatusRow kHttpStatuses[] = {
    {StatusCode::kOk, 200, false},
    {StatusCode::kInvalidArgument, 400, true},
    {StatusCode::kUnauthenticated, 401, true},
    {StatusCode::kPermissionDenied, 403, true},
    {StatusCode::kNotFound, 404, true},
    {StatusCode::kAlreadyExists, 409, false},
    {StatusCode::kFailedPrecondition, 409, true},
    {StatusCode::kPayloadTooLarge, 413, true},
    {StatusCode::kResourceExhausted, 429, true},
    {StatusCode::kUnimplemented, 501, true},
    {StatusCode::kUnavailable, 503, true},
    {StatusCode::kDeadlineExceeded, 504, true},
    {StatusCode::kInternal, 500, true},
};

// Every code has its row (kInternal is the last code), in order.
constexpr bool EveryCodeInOrder() {
  if (std::size(kHttpStatuses) != static_cast<size_t>(StatusCode::kInternal) + 1) return false;
  for (size_t i = 0; i < std::size(kHttpStatuses); ++i) {
    if (kHttpStatuses[i].code != static_cast<StatusCode>(i)) return false;
  }
  return true;
}
static_assert(EveryCodeInOrder(), "kHttpStatuses needs a row for every StatusCode");

StatusCode CodeForHttpStatus(int http_status) {
  for (const HttpStatusRow& row : kHttpStatuses) {
    if (row.read_back && row.http == http_status) return row.code;
  }
  if (http_status >= 400 && http_status < 500) return StatusCode::kInvalidArgument;
  return StatusCode::kInternal;
}

}  // namespace

int HttpStatusFor(StatusCode code) {
  for (const HttpStatusRow& row : kHttpStatuses) {
    if (row.code == code) return row.http;
  }
  return 500;
}

std::optional<StatusCode> StatusCodeFromName(std::string_view name) {
  for (StatusCode code : kAllCodes) {
    if (StatusCodeName(code) == name) return code;
  }
  return std::nullopt;
}

nlohmann::json ErrorJson(const Status& status) {
  nlohmann::json error = {{"code", std::string(StatusCodeName(status.code()))},
                          {"message", status.message()}};
  if (!status.field().empty()) error["field"] = status.field();
  return nlohmann::json{{"error", std::move(error)}};
}

std::string ErrorBody(const Status& status) { return DumpJson(ErrorJson(status)); }

std::string DumpJson(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Status StatusFromErrorBody(int http_status, std::string_view body) {
  nlohmann::json j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_object()) {
    auto it = j.find("error");
    if (it != j.end() && it->is_object()) {
      const nlohmann::json& e = *it;
      StatusCode code = CodeForHttpStatus(http_status);
      if (auto c = e.find("code"); c != e.end() && c->is_string()) {
        if (auto parsed = StatusCodeFromName(c->get<std::string>());
            parsed && *parsed != StatusCode::kOk) {
          code = *parsed;
        }
      }
      std::string message;
      if (auto m = e.find("message"); m != e.end() && m->is_string())
        message = m->get<std::string>();
      std::string field;
      if (auto f = e.find("field"); f != e.end() && f->is_string()) field = f->get<std::string>();
      return Status(code, std::move(message), std::move(field));
    }
  }
  constexpr size_t kMaxMessage = 200;
  std::string message(body.substr(0, kMaxMessage));
  if (message.empty()) message = "HTTP " + std::to_string(http_status);
  return Status(CodeForHttpStatus(http_status), std::move(message));
}

}  // namespace tessera::api
