// HttpAgentTransport against a real HTTP server on a loopback port.
#include "agent/http_transport.h"

#include <gtest/gtest.h>

#include <mutex>

#include "agent/agent.h"
#include "api/http_server.h"
#include "tests/agent/test_util.h"

namespace tessera::agent {
namespace {

using namespace std::chrono_literals;

TEST(ControllerUrl, Table) {
  struct Row {
    const char* url;
    bool ok;
    const char* host;
    uint16_t port;
  };
  const Row rows[] = {{"http://127.0.0.1:8080", true, "127.0.0.1", 8080},
                      {"http://ctl/", true, "ctl", 80},
                      {"https://ctl:443", false, "", 0},
                      {"http://ctl:0", false, "", 0},
                      {"http://ctl:99999", false, "", 0},
                      {"http://ctl:80/api", false, "", 0},
                      {"127.0.0.1:8080", false, "", 0},
                      {"http://:80", false, "", 0}};
  for (const auto& row : rows) {
    auto parsed = ParseControllerUrl(row.url);
    ASSERT_EQ(parsed.ok(), row.ok) << row.url;
    if (!row.ok) {
      EXPECT_EQ(parsed.status().field(), "controller");
      continue;
    }
    EXPECT_EQ(parsed->host, row.host);
    EXPECT_EQ(parsed->port, row.port);
  }
}

// A tiny controller: checks the path and the bearer token, answers with a
// fixed desired set.
class FakeController {
 public:
  FakeController()
      : server_(api::HttpServerOptions{}, [this](const api::Request& r) { return Handle(r); }) {
    EXPECT_TRUE(server_.Start().ok());
  }
  std::string url() { return "http://127.0.0.1:" + std::to_string(server_.port()); }
  void Want(api::HeartbeatResponse response) {
    std::lock_guard<std::mutex> lock(mu_);
    response_ = std::move(response);
  }
  std::vector<api::HeartbeatRequest> received() {
    std::lock_guard<std::mutex> lock(mu_);
    return received_;
  }

 private:
  api::Response Handle(const api::Request& r) {
    if (r.method != "POST" || r.target != "/api/v1/agent/heartbeat") {
      return api::ErrorResponse(NotFound("no route"));
    }
    if (r.Header("authorization") != "Bearer join-secret") {
      return api::ErrorResponse(Unauthenticated("bad join token"));
    }
    auto parsed = api::HeartbeatRequestFromJson(api::Json::parse(r.body, nullptr, false));
    if (!parsed.ok()) return api::ErrorResponse(parsed.status());
    std::lock_guard<std::mutex> lock(mu_);
    received_.push_back(*parsed);
    api::Response out;
    out.body = api::ToJson(response_).dump();
    return out;
  }

  std::mutex mu_;
  api::HeartbeatResponse response_;
  std::vector<api::HeartbeatRequest> received_;
  api::HttpServer server_;  // last: stops before the members it uses go
};

api::Json Heartbeat() {
  api::HeartbeatRequest r;
  r.node = "node-a";
  return api::ToJson(r);
}

TEST(HttpTransport, PostsWithBearerTokenAndReturnsTheAnswer) {
  FakeController controller;
  api::HeartbeatResponse want;
  want.heartbeat_interval_ms = 321;
  controller.Want(want);
  auto transport = HttpAgentTransport::Create(controller.url(), "join-secret");
  ASSERT_TRUE(transport.ok());
  auto answer = (*transport)->Heartbeat(Heartbeat());
  ASSERT_TRUE(answer.ok()) << answer.status().ToString();
  EXPECT_EQ((*answer)["heartbeat_interval_ms"], 321);
  ASSERT_EQ(controller.received().size(), 1u);
  EXPECT_EQ(controller.received()[0].node, "node-a");
}

TEST(HttpTransport, WrongTokenIsUnauthenticated) {
  FakeController controller;
  auto transport = HttpAgentTransport::Create(controller.url(), "wrong");
  ASSERT_TRUE(transport.ok());
  auto answer = (*transport)->Heartbeat(Heartbeat());
  EXPECT_EQ(answer.status().code(), StatusCode::kUnauthenticated);
  EXPECT_NE(answer.status().message().find("bad join token"), std::string::npos);
}

TEST(HttpTransport, RejectedHeartbeatNamesTheField) {
  FakeController controller;
  auto transport = HttpAgentTransport::Create(controller.url(), "join-secret");
  ASSERT_TRUE(transport.ok());
  auto answer = (*transport)->Heartbeat(api::Json{{"node", 5}});
  EXPECT_EQ(answer.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(answer.status().field(), "node");
}

TEST(HttpTransport, NoControllerIsUnavailable) {
  uint16_t port = 0;
  {
    FakeController gone;  // learn a free port, then close it
    port = static_cast<uint16_t>(std::stoi(gone.url().substr(gone.url().rfind(':') + 1)));
  }
  auto transport =
      HttpAgentTransport::Create("http://127.0.0.1:" + std::to_string(port), "join-secret", 2s);
  ASSERT_TRUE(transport.ok());
  auto answer = (*transport)->Heartbeat(Heartbeat());
  ASSERT_FALSE(answer.ok());
  EXPECT_TRUE(answer.status().code() == StatusCode::kUnavailable ||
              answer.status().code() == StatusCode::kDeadlineExceeded)
      << answer.status().ToString();
}

class NoInventory final : public InventoryProvider {
 public:
  Result<NodeInventory> Load() override {
    NodeInventory inv;
    inv.devices.resize(1);
    inv.devices[0].type = "cpu";
    inv.devices[0].name = "cpu";
    return inv;
  }
  void Refresh(NodeInventory*) override {}
};

TEST(HttpTransport, AgentRunsAWorkerTheControllerWantsOverHttp) {
  testing::TempDir state;
  FakeController controller;
  api::WorkerKey key{9, 1, 0};
  api::HeartbeatResponse want;
  want.desired = {testing::ShellLaunch(key, "echo hello-over-http; exec sleep 30")};
  controller.Want(want);
  auto transport = HttpAgentTransport::Create(controller.url(), "join-secret");
  ASSERT_TRUE(transport.ok());
  NoInventory inventory;
  SupervisorOptions so;
  so.state_dir = state.path();
  so.stop_grace = 500ms;
  ProcessSupervisor supervisor(so);
  Agent agent(AgentOptions{"node-http"}, transport->get(), &inventory, &supervisor);
  ASSERT_TRUE(agent.Init().ok());
  ASSERT_TRUE(agent.Beat().ok());
  EXPECT_TRUE(testing::Eventually([&] {
    agent.Beat().IgnoreError();
    auto r = controller.received();
    return !r.empty() && r.back().workers.size() == 1 &&
           r.back().workers[0].state == api::WorkerState::kRunning &&
           !r.back().workers[0].log_tail.empty() &&
           r.back().workers[0].log_tail[0] == "hello-over-http";
  }));
  EXPECT_EQ(controller.received().back().node, "node-http");
  EXPECT_TRUE(supervisor.StopAllAndWait());
}

}  // namespace
}  // namespace tessera::agent
