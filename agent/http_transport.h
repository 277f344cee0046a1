// HttpAgentTransport: heartbeats over HTTP(S) to tesserad, with the node's
// own credential.
//
// Each heartbeat is POST <controller>/api/v1/agent/heartbeat, JSON body,
// with "Authorization: Bearer <node credential>", through api::HttpClient
// (one keep-alive connection, reconnecting; https:// verifies tesserad as
// options.tls says, api/tls_context.h).
//
// Enrolment (api/node_identity.h): when the agent has no credential for its
// node name (first start, an agent upgraded from join-token heartbeats, a
// credential file for another name), the next heartbeat first enrols: POST
// /api/v1/agent/enroll with the join token, and keeps the credential in
// options.credential_file (0600) before using it. A heartbeat refused with
// 401 (the controller lost or revoked the credential) makes the next beat
// enrol again, which tesserad refuses for a revoked node.
//
// Answers: 200 -> the answer; 401/403 -> kUnauthenticated/kPermissionDenied;
// other statuses -> an error carrying the controller's {"error":{...}}
// message; network failures (and a certificate that fails verification)
// -> kUnavailable / kDeadlineExceeded.
// Thread safety: not thread-safe (one agent loop).
#ifndef TESSERA_AGENT_HTTP_TRANSPORT_H_
#define TESSERA_AGENT_HTTP_TRANSPORT_H_

#include <chrono>
#include <memory>
#include <string>

#include "agent/transport.h"
#include "api/server_url.h"
#include "api/tls_context.h"
#include "common/file_system.h"
#include "common/status.h"

namespace tessera::api {
class HttpClient;
}

namespace tessera::agent {

// api::ParseServerUrl without a path: "http(s)://host[:port]" or a bare
// "host[:port]" (plain HTTP, port 8080); errors name "controller".
Result<api::ServerUrl> ParseControllerUrl(const std::string& url);

struct HttpAgentTransportOptions {
  std::string controller_url;   // http(s)://host:port
  std::string join_token;       // buys the node's credential once
  std::string node;             // the name it enrols as; REQUIRES: non-empty
  std::string credential_file;  // where the credential is kept; "": memory only
  api::TlsClientOptions tls;    // how an https:// controller is verified
  std::chrono::milliseconds timeout{5000};
  FileSystem* fs = FileSystem::Default();  // reads and writes credential_file; not owned
};

class HttpAgentTransport final : public AgentTransport {
 public:
  // Loads the credential file. kInvalidArgument naming "controller",
  // "node" or "credential_file".
  static Result<std::unique_ptr<HttpAgentTransport>> Create(HttpAgentTransportOptions options);
  ~HttpAgentTransport() override;

  Result<api::Json> Heartbeat(const api::Json& request) override;

  // Whether the agent holds a credential for its node now.
  bool enrolled() const { return !credential_.empty(); }

 private:
  HttpAgentTransport(HttpAgentTransportOptions options, std::unique_ptr<api::HttpClient> client,
                     std::string credential);
  Status Enrol();

  const HttpAgentTransportOptions options_;
  std::unique_ptr<api::HttpClient> client_;
  std::string credential_;
};

}  // namespace tessera::agent

#endif  // TESSERA_AGENT_HTTP_TRANSPORT_H_
