#include "agent/http_transport.h"

#include <spdlog/spdlog.h>

#include "agent/node_credential_file.h"
#include "api/http_client.h"
#include "api/node_identity.h"

namespace tessera::agent {
namespace {

// The controller's answer as a Status (for anything but 200 / 201).
Status AnswerError(const api::HttpResponse& response, const std::string& what) {
  api::Json body = api::Json::parse(response.body, nullptr, /*allow_exceptions=*/false);
  std::string message = what + ": controller answered HTTP " + std::to_string(response.status);
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
      return Unauthenticated(message);
    case 403:
      return PermissionDenied(message);
    case 409:
      return AlreadyExists(message, field);
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

}  // namespace

Result<api::ServerUrl> ParseControllerUrl(const std::string& url) {
  return api::ParseServerUrl(url, "controller");
}

HttpAgentTransport::HttpAgentTransport(HttpAgentTransportOptions options,
                                       std::unique_ptr<api::HttpClient> client,
                                       std::string credential)
    : options_(std::move(options)),
      client_(std::move(client)),
      credential_(std::move(credential)) {}

HttpAgentTransport::~HttpAgentTransport() = default;

Result<std::unique_ptr<HttpAgentTransport>> HttpAgentTransport::Create(
    HttpAgentTransportOptions options) {
  TESSERA_ASSIGN_OR_RETURN(api::ServerUrl url, ParseControllerUrl(options.controller_url));
  TESSERA_RETURN_IF_ERROR(api::ValidateNodeName(options.node));
  std::string credential;
  if (!options.credential_file.empty()) {
    TESSERA_ASSIGN_OR_RETURN(std::optional<std::string> kept,
                             LoadNodeCredential(options.credential_file, options.node, options.fs));
    if (kept) credential = *std::move(kept);
  }
  auto client = std::make_unique<api::HttpClient>(url, options.timeout, options.tls);
  return std::unique_ptr<HttpAgentTransport>(
      new HttpAgentTransport(std::move(options), std::move(client), std::move(credential)));
}

Status HttpAgentTransport::Enrol() {
  if (options_.join_token.empty()) {
    return Unauthenticated("node " + options_.node +
                           " has no credential and no join token to enrol with");
  }
  client_->SetBearerToken(options_.join_token);
  TESSERA_ASSIGN_OR_RETURN(
      api::HttpResponse response,
      client_->Request("POST", "/api/v1/agent/enroll", api::Json{{"node", options_.node}}.dump()));
  if (response.status != 201 && response.status != 200) {
    return AnswerError(response, "enrolling node " + options_.node);
  }
  api::Json body = api::Json::parse(response.body, nullptr, /*allow_exceptions=*/false);
  TESSERA_ASSIGN_OR_RETURN(api::IssuedNodeCredential issued,
                           api::IssuedNodeCredentialFromJson(body));
  if (!options_.credential_file.empty()) {
    // Kept before it is used: a crash now leaves a credential the next
    // start can use (or replace, while it is still unused).
    TESSERA_RETURN_IF_ERROR(StoreNodeCredential(options_.credential_file, issued.credential,
                                                options_.node, options_.fs));
  }
  credential_ = issued.credential;
  spdlog::info("node {} enrolled with the join token; its credential is in {}", options_.node,
               options_.credential_file.empty() ? "memory" : options_.credential_file);
  return Status::Ok();
}

Result<api::Json> HttpAgentTransport::Heartbeat(const api::Json& request) {
  if (credential_.empty()) TESSERA_RETURN_IF_ERROR(Enrol());
  client_->SetBearerToken(credential_);
  TESSERA_ASSIGN_OR_RETURN(api::HttpResponse response,
                           client_->Request("POST", "/api/v1/agent/heartbeat", request.dump()));
  api::Json body = api::Json::parse(response.body, nullptr, /*allow_exceptions=*/false);
  if (response.status == 200) {
    if (body.is_discarded()) return Internal("controller answered with invalid JSON");
    return body;
  }
  if (response.status == 401) {
    // The controller does not know this credential (any more): the next
    // beat enrols again; tesserad refuses that for a revoked node.
    credential_.clear();
  }
  return AnswerError(response, "heartbeat");
}

}  // namespace tessera::agent
