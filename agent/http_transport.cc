#include "agent/http_transport.h"

#include <charconv>

#include "api/http_client.h"

namespace tessera::agent {

Result<ControllerUrl> ParseControllerUrl(const std::string& url) {
  const std::string scheme = "http://";
  if (url.rfind(scheme, 0) != 0) {
    return InvalidArgument("must start with http:// (got '" + url + "')", "controller");
  }
  std::string rest = url.substr(scheme.size());
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  if (rest.find('/') != std::string::npos) {
    return InvalidArgument("must be http://host[:port] without a path", "controller");
  }
  ControllerUrl out;
  auto colon = rest.rfind(':');
  if (colon == std::string::npos) {
    out.host = rest;
  } else {
    out.host = rest.substr(0, colon);
    const std::string port = rest.substr(colon + 1);
    unsigned value = 0;
    auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (ec != std::errc() || ptr != port.data() + port.size() || value == 0 || value > 65535) {
      return InvalidArgument("bad port '" + port + "'", "controller");
    }
    out.port = static_cast<uint16_t>(value);
  }
  if (out.host.empty()) return InvalidArgument("names no host", "controller");
  return out;
}

HttpAgentTransport::HttpAgentTransport(std::unique_ptr<api::HttpClient> client)
    : client_(std::move(client)) {}

HttpAgentTransport::~HttpAgentTransport() = default;

Result<std::unique_ptr<HttpAgentTransport>> HttpAgentTransport::Create(
    const std::string& controller_url, std::string join_token, std::chrono::milliseconds timeout) {
  TESSERA_ASSIGN_OR_RETURN(ControllerUrl url, ParseControllerUrl(controller_url));
  auto client = std::make_unique<api::HttpClient>(url.host, url.port, timeout);
  client->SetBearerToken(std::move(join_token));
  return std::unique_ptr<HttpAgentTransport>(new HttpAgentTransport(std::move(client)));
}

Result<api::Json> HttpAgentTransport::Heartbeat(const api::Json& request) {
  TESSERA_ASSIGN_OR_RETURN(api::HttpResponse response,
                           client_->Request("POST", "/api/v1/agent/heartbeat", request.dump()));
  api::Json body = api::Json::parse(response.body, nullptr, /*allow_exceptions=*/false);
  if (response.status == 200) {
    if (body.is_discarded()) return Internal("controller answered with invalid JSON");
    return body;
  }
  std::string message = "controller answered HTTP " + std::to_string(response.status);
  std::string field;
  if (body.is_object() && body.contains("error") && body["error"].is_object()) {
    const api::Json& error = body["error"];
    if (error.contains("message") && error["message"].is_string()) {
      message += ": " + error["message"].get<std::string>();
    }
    if (error.contains("field") && error["field"].is_string()) {
      field = error["field"].get<std::string>();
    }
  }
  switch (response.status) {
    case 401:
      return Unauthenticated(message + " (check the join token)");
    case 403:
      return PermissionDenied(message);
    case 400:
    case 422:
      return InvalidArgument(message, field);
    case 504:
      return DeadlineExceeded(message);
    default:
      if (response.status >= 500) return Unavailable(message);
      return FailedPrecondition(message);
  }
}

}  // namespace tessera::agent
