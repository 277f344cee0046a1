// HttpAgentTransport against a real HTTP server on a loopback port.
#include "agent/http_transport.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <map>
#include <mutex>

#include "agent/agent.h"
#include "api/http_server.h"
#include "api/node_identity.h"
#include "common/faulty_file_system.h"
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
    bool tls;
  };
  const Row rows[] = {{"http://127.0.0.1:8080", true, "127.0.0.1", 8080, false},
                      {"http://ctl/", true, "ctl", 80, false},
                      {"https://ctl:8443", true, "ctl", 8443, true},
                      {"https://ctl", true, "ctl", 443, true},
                      {"https://[::1]:8443", true, "::1", 8443, true},
                      {"http://ctl:0", false, "", 0, false},
                      {"http://ctl:99999", false, "", 0, false},
                      {"http://ctl:80/api", false, "", 0, false},
                      {"ftp://ctl:80", false, "", 0, false},
                      {"127.0.0.1:8080", true, "127.0.0.1", 8080, false},
                      {"ctl", true, "ctl", 8080, false},
                      {"https://us@ctl", false, "", 0, false},
                      {"http://:80", false, "", 0, false}};
  for (const auto& row : rows) {
    auto parsed = ParseControllerUrl(row.url);
    ASSERT_EQ(parsed.ok(), row.ok) << row.url;
    if (!row.ok) {
      EXPECT_EQ(parsed.status().field(), "controller");
      continue;
    }
    EXPECT_EQ(parsed->host, row.host);
    EXPECT_EQ(parsed->port, row.port);
    EXPECT_EQ(parsed->tls, row.tls) << row.url;
  }
}

// A tiny controller: enrols nodes with the join token (each enrolment gets
// a fresh credential), checks heartbeats' credentials, answers with a fixed
// desired set.
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
  int enrolments() {
    std::lock_guard<std::mutex> lock(mu_);
    return enrolments_;
  }
  // Forgets every credential (as a controller whose store was replaced).
  void ForgetCredentials() {
    std::lock_guard<std::mutex> lock(mu_);
    credentials_.clear();
  }

 private:
  api::Response Handle(const api::Request& r) {
    std::lock_guard<std::mutex> lock(mu_);
    if (r.method == "POST" && r.target == "/api/v1/agent/enroll") {
      if (r.Header("authorization") != "Bearer join-secret") {
        return api::ErrorResponse(Unauthenticated("bad join token"));
      }
      auto node = api::EnrolRequestNodeFromJson(api::Json::parse(r.body, nullptr, false));
      if (!node.ok()) return api::ErrorResponse(node.status());
      ++enrolments_;
      char secret[65];
      std::snprintf(secret, sizeof(secret), "%064d", enrolments_);
      std::string credential =
          "tsn_000000000000000" + std::to_string(enrolments_ % 10) + "_" + secret;
      credentials_[credential] = *node;
      api::Response out;
      out.status = 201;
      out.body =
          api::ToJson(api::IssuedNodeCredential{{*node, "id", 1, {}, {}}, credential}).dump();
      return out;
    }
    if (r.method != "POST" || r.target != "/api/v1/agent/heartbeat") {
      return api::ErrorResponse(NotFound("no route"));
    }
    std::string_view auth = r.Header("authorization");
    auto it = credentials_.find(std::string(auth.substr(std::min<size_t>(7, auth.size()))));
    if (!auth.starts_with("Bearer ") || it == credentials_.end()) {
      return api::ErrorResponse(Unauthenticated("unknown node credential"));
    }
    auto parsed = api::HeartbeatRequestFromJson(api::Json::parse(r.body, nullptr, false));
    if (!parsed.ok()) return api::ErrorResponse(parsed.status());
    if (parsed->node != it->second) return api::ErrorResponse(PermissionDenied("not yours"));
    received_.push_back(*parsed);
    api::Response out;
    out.body = api::ToJson(response_).dump();
    return out;
  }

  std::mutex mu_;
  api::HeartbeatResponse response_;
  std::vector<api::HeartbeatRequest> received_;
  std::map<std::string, std::string> credentials_;  // credential -> node
  int enrolments_ = 0;
  api::HttpServer server_;  // last: stops before the members it uses go
};

api::Json Heartbeat(const std::string& node = "node-a") {
  api::HeartbeatRequest r;
  r.node = node;
  return api::ToJson(r);
}

HttpAgentTransportOptions Options(const std::string& url, const std::string& join_token,
                                  const std::string& credential_file = "",
                                  const std::string& node = "node-a") {
  HttpAgentTransportOptions o;
  o.controller_url = url;
  o.join_token = join_token;
  o.node = node;
  o.credential_file = credential_file;
  return o;
}

TEST(HttpTransport, EnrolsOnceThenHeartbeatsWithItsCredential) {
  testing::TempDir state;
  const std::string file = (state.path() / "node-credential").string();
  FakeController controller;
  api::HeartbeatResponse want;
  want.heartbeat_interval_ms = 321;
  controller.Want(want);
  auto transport = HttpAgentTransport::Create(Options(controller.url(), "join-secret", file));
  ASSERT_TRUE(transport.ok()) << transport.status().ToString();
  EXPECT_FALSE((*transport)->enrolled());
  auto answer = (*transport)->Heartbeat(Heartbeat());
  ASSERT_TRUE(answer.ok()) << answer.status().ToString();
  EXPECT_EQ((*answer)["heartbeat_interval_ms"], 321);
  ASSERT_TRUE((*transport)->Heartbeat(Heartbeat()).ok());
  EXPECT_EQ(controller.enrolments(), 1);
  ASSERT_EQ(controller.received().size(), 2u);
  EXPECT_EQ(controller.received()[0].node, "node-a");

  // Kept private, and used by the next agent (a restart) without enrolling.
  struct stat st {};
  ASSERT_EQ(::stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto restarted = HttpAgentTransport::Create(Options(controller.url(), "", file));
  ASSERT_TRUE(restarted.ok()) << restarted.status().ToString();
  EXPECT_TRUE((*restarted)->enrolled());
  ASSERT_TRUE((*restarted)->Heartbeat(Heartbeat()).ok());
  EXPECT_EQ(controller.enrolments(), 1);

  // A credential kept for another name is not used: the agent enrols anew.
  auto renamed = HttpAgentTransport::Create(Options(controller.url(), "join-secret", file, "b"));
  ASSERT_TRUE(renamed.ok());
  EXPECT_FALSE((*renamed)->enrolled());
  ASSERT_TRUE((*renamed)->Heartbeat(Heartbeat("b")).ok());
  EXPECT_EQ(controller.enrolments(), 2);
}

// A credential that cannot be kept (its file's fsync fails) is not used: the
// beat fails with the error and the next one enrols again.
TEST(HttpTransport, CredentialThatCannotBeKeptFailsTheBeat) {
  testing::TempDir state;
  const std::string file = (state.path() / "node-credential").string();
  FakeController controller;
  FaultyFileSystem faulty;
  faulty.FailNext(FileOp::kSync, "node-credential", EIO);
  HttpAgentTransportOptions o = Options(controller.url(), "join-secret", file);
  o.fs = &faulty;
  auto transport = HttpAgentTransport::Create(o);
  ASSERT_TRUE(transport.ok()) << transport.status().ToString();
  auto lost = (*transport)->Heartbeat(Heartbeat());
  ASSERT_FALSE(lost.ok());
  EXPECT_EQ(lost.status().field(), "credential_file");
  EXPECT_NE(lost.status().message().find("cannot write " + file), std::string::npos)
      << lost.status().message();
  EXPECT_FALSE((*transport)->enrolled());
  EXPECT_TRUE(controller.received().empty());
  EXPECT_FALSE(std::filesystem::exists(file));
  ASSERT_TRUE((*transport)->Heartbeat(Heartbeat()).ok());
  EXPECT_EQ(controller.enrolments(), 2);
  EXPECT_TRUE(std::filesystem::exists(file));
}

TEST(HttpTransport, RefusedCredentialMakesTheNextBeatEnrolAgain) {
  FakeController controller;
  auto transport = HttpAgentTransport::Create(Options(controller.url(), "join-secret"));
  ASSERT_TRUE(transport.ok());
  ASSERT_TRUE((*transport)->Heartbeat(Heartbeat()).ok());
  controller.ForgetCredentials();
  auto lost = (*transport)->Heartbeat(Heartbeat());
  EXPECT_EQ(lost.status().code(), StatusCode::kUnauthenticated);
  EXPECT_FALSE((*transport)->enrolled());
  ASSERT_TRUE((*transport)->Heartbeat(Heartbeat()).ok());
  EXPECT_EQ(controller.enrolments(), 2);
}

TEST(HttpTransport, WrongJoinTokenIsUnauthenticated) {
  FakeController controller;
  auto transport = HttpAgentTransport::Create(Options(controller.url(), "wrong"));
  ASSERT_TRUE(transport.ok());
  auto answer = (*transport)->Heartbeat(Heartbeat());
  EXPECT_EQ(answer.status().code(), StatusCode::kUnauthenticated);
  EXPECT_NE(answer.status().message().find("bad join token"), std::string::npos);
  EXPECT_TRUE(controller.received().empty());
}

TEST(HttpTransport, BadSettingsNameTheirField) {
  testing::TempDir state;
  const std::string bad_file = (state.path() / "junk").string();
  {
    std::FILE* f = std::fopen(bad_file.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("not a credential\n", f);
    std::fclose(f);
  }
  struct Row {
    HttpAgentTransportOptions options;
    std::string field;
  };
  const Row rows[] = {
      {Options("ftp://x", "j"), "controller"},
      {Options("http://127.0.0.1:1", "j", "", ""), "node"},
      {Options("http://127.0.0.1:1", "j", "", "a b"), "node"},
      {Options("http://127.0.0.1:1", "j", bad_file), "credential_file"},
  };
  for (const Row& row : rows) {
    auto t = HttpAgentTransport::Create(row.options);
    ASSERT_FALSE(t.ok()) << row.field;
    EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(t.status().field(), row.field) << t.status().ToString();
  }
}

TEST(HttpTransport, RejectedHeartbeatNamesTheField) {
  FakeController controller;
  auto transport = HttpAgentTransport::Create(Options(controller.url(), "join-secret"));
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
  auto options = Options("http://127.0.0.1:" + std::to_string(port), "join-secret");
  options.timeout = 2s;
  auto transport = HttpAgentTransport::Create(options);
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
  auto transport =
      HttpAgentTransport::Create(Options(controller.url(), "join-secret", "", "node-http"));
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
