// HttpAgentTransport: heartbeats over HTTP to tesserad.
//
// POST <controller>/api/v1/agent/heartbeat, JSON body, with
// "Authorization: Bearer <join token>", through api::HttpClient (one
// keep-alive connection, reconnecting). 200 -> the answer; 401/403 ->
// kUnauthenticated/kPermissionDenied; other statuses -> an error carrying the
// controller's {"error":{...}} message; network failures -> kUnavailable /
// kDeadlineExceeded.
// Thread safety: not thread-safe (one agent loop).
#ifndef TESSERA_AGENT_HTTP_TRANSPORT_H_
#define TESSERA_AGENT_HTTP_TRANSPORT_H_

#include <chrono>
#include <memory>
#include <string>

#include "agent/transport.h"
#include "common/status.h"

namespace tessera::api {
class HttpClient;
}

namespace tessera::agent {

struct ControllerUrl {
  std::string host;
  uint16_t port = 80;
};
// "http://host:port" (trailing "/" allowed); https is not supported.
Result<ControllerUrl> ParseControllerUrl(const std::string& url);

class HttpAgentTransport final : public AgentTransport {
 public:
  static Result<std::unique_ptr<HttpAgentTransport>> Create(
      const std::string& controller_url, std::string join_token,
      std::chrono::milliseconds timeout = std::chrono::seconds(5));
  ~HttpAgentTransport() override;

  Result<api::Json> Heartbeat(const api::Json& request) override;

 private:
  explicit HttpAgentTransport(std::unique_ptr<api::HttpClient> client);
  std::unique_ptr<api::HttpClient> client_;
};

}  // namespace tessera::agent

#endif  // TESSERA_AGENT_HTTP_TRANSPORT_H_
