// AgentTransport: how a heartbeat reaches the controller.
//
// The agent hands over the heartbeat as JSON (api::ToJson(HeartbeatRequest))
// and gets the controller's answer as JSON. Implementations:
//   - HttpAgentTransport (agent/http_transport.h): POST /api/v1/agent/heartbeat
//     with "Authorization: Bearer <join token>".
//   - FakeAgentTransport (agent/fake_transport.h): an in-process controller
//     for tests, able to drop requests or answers.
// Thread safety: called from the agent loop thread only.
#ifndef TESSERA_AGENT_TRANSPORT_H_
#define TESSERA_AGENT_TRANSPORT_H_

#include "api/types.h"
#include "common/status.h"

namespace tessera::agent {

class AgentTransport {
 public:
  virtual ~AgentTransport() = default;
  // Sends one heartbeat and returns the answer. A lost message is an error
  // (kUnavailable, kDeadlineExceeded); so is a rejection by the controller
  // (kUnauthenticated for a bad join token, kInvalidArgument, ...).
  virtual Result<api::Json> Heartbeat(const api::Json& request) = 0;
};

}  // namespace tessera::agent

#endif  // TESSERA_AGENT_TRANSPORT_H_
