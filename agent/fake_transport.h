// FakeAgentTransport: an in-process stand-in for the controller, with fault
// injection, for tests of the agent loop.
//
// A handler plays the controller: it receives every heartbeat that "arrives"
// and returns the answer. DropRequests(n) loses the next n heartbeats before
// they arrive (the handler is not called); DropResponses(n) lets the next n
// arrive but loses their answers. Both return kUnavailable to the agent.
// Thread safety: all methods are safe to call concurrently.
#ifndef TESSERA_AGENT_FAKE_TRANSPORT_H_
#define TESSERA_AGENT_FAKE_TRANSPORT_H_

#include <functional>
#include <mutex>
#include <utility>
#include <vector>

#include "agent/transport.h"
#include "api/agent_protocol.h"

namespace tessera::agent {

class FakeAgentTransport final : public AgentTransport {
 public:
  using Handler = std::function<api::Json(const api::HeartbeatRequest&)>;

  // The default controller wants nothing.
  FakeAgentTransport()
      : handler_(
            [](const api::HeartbeatRequest&) { return api::ToJson(api::HeartbeatResponse{}); }) {}

  void SetHandler(Handler handler) {
    std::lock_guard<std::mutex> lock(mu_);
    handler_ = std::move(handler);
  }
  void DropRequests(int n) {
    std::lock_guard<std::mutex> lock(mu_);
    drop_requests_ += n;
  }
  void DropResponses(int n) {
    std::lock_guard<std::mutex> lock(mu_);
    drop_responses_ += n;
  }

  // Heartbeats that arrived (parsed), in order.
  std::vector<api::HeartbeatRequest> received() const {
    std::lock_guard<std::mutex> lock(mu_);
    return received_;
  }
  // Every Heartbeat() call, arrived or dropped.
  int attempts() const {
    std::lock_guard<std::mutex> lock(mu_);
    return attempts_;
  }

  Result<api::Json> Heartbeat(const api::Json& request) override {
    std::unique_lock<std::mutex> lock(mu_);
    ++attempts_;
    if (drop_requests_ > 0) {
      --drop_requests_;
      return Unavailable("fake transport: request dropped");
    }
    auto parsed = api::HeartbeatRequestFromJson(request);
    if (!parsed.ok()) return parsed.status();
    received_.push_back(*parsed);
    Handler handler = handler_;
    lock.unlock();
    api::Json answer = handler(*parsed);
    lock.lock();
    if (drop_responses_ > 0) {
      --drop_responses_;
      return Unavailable("fake transport: response dropped");
    }
    return answer;
  }

 private:
  mutable std::mutex mu_;
  Handler handler_;
  int drop_requests_ = 0;
  int drop_responses_ = 0;
  int attempts_ = 0;
  std::vector<api::HeartbeatRequest> received_;
};

}  // namespace tessera::agent

#endif  // TESSERA_AGENT_FAKE_TRANSPORT_H_
