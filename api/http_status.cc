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

StatusCode CodeForHttpStatus(int http_status) {
  switch (http_status) {
    case 400:
      return StatusCode::kInvalidArgument;
    case 401:
      return StatusCode::kUnauthenticated;
    case 403:
      return StatusCode::kPermissionDenied;
    case 404:
      return StatusCode::kNotFound;
    case 409:
      return StatusCode::kFailedPrecondition;
    case 413:
      return StatusCode::kPayloadTooLarge;
    case 429:
      return StatusCode::kResourceExhausted;
    case 501:
      return StatusCode::kUnimplemented;
    case 503:
      return StatusCode::kUnavailable;
    case 504:
      return StatusCode::kDeadlineExceeded;
    default:
      break;
  }
  if (http_status >= 400 && http_status < 500) return StatusCode::kInvalidArgument;
  return StatusCode::kInternal;
}

}  // namespace

int HttpStatusFor(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return 200;
    case StatusCode::kInvalidArgument:
      return 400;
    case StatusCode::kUnauthenticated:
      return 401;
    case StatusCode::kPermissionDenied:
      return 403;
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kAlreadyExists:
      return 409;
    case StatusCode::kFailedPrecondition:
      return 409;
    case StatusCode::kPayloadTooLarge:
      return 413;
    case StatusCode::kResourceExhausted:
      return 429;
    case StatusCode::kUnimplemented:
      return 501;
    case StatusCode::kUnavailable:
      return 503;
    case StatusCode::kDeadlineExceeded:
      return 504;
    case StatusCode::kInternal:
      return 500;
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
