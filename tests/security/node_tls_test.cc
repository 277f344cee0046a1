// Red team, node identity and TLS: a real tesserad serving HTTPS with its own
// CA and a real tessera-agent that enrolled with the join token, attacked by
// a holder of the join token (any node, any stray copy of the agents'
// config), by a revoked node, by a plain-HTTP peer and by a client pinned to
// the wrong certificate. Every attack is one row; each must be refused and
// leave no trace (the real node stays healthy, no job appears).
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "api/http_client.h"
#include "api/node_identity.h"
#include "api/tls_context.h"
#include "tests/integration/harness.h"

namespace tessera::testing {
namespace {

using namespace std::chrono_literals;
using api::Json;

const char* kOneDevice = R"yaml(devices:
  - {name: "A100 (emulated)", memory: 80GiB, relative_speed: 0.5}
)yaml";

std::string FirstLine(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

class NodeTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ = std::make_unique<Cluster>("node-tls");
    cluster_->StartController("tls: on\n");
    ASSERT_TRUE(cluster_->tls());
    cluster_->StartAgent("boxa", kOneDevice);
    ASSERT_TRUE(WaitFor([&] { return cluster_->HealthyNodes() == 1; }, 30s))
        << cluster_->agent("boxa")->Log();
    join_token_ = FirstLine(cluster_->dir() / "controller" / "join-token");
    boxa_credential_ = FirstLine(cluster_->dir() / "agent-boxa" / "node-credential");
    ASSERT_TRUE(api::LooksLikeNodeCredential(boxa_credential_)) << boxa_credential_;
  }

  // A client that verifies tesserad with its CA, carrying `bearer`.
  std::unique_ptr<api::HttpClient> Client(const std::string& bearer) {
    auto c = cluster_->Client();
    c->SetBearerToken(bearer);
    return c;
  }

  static Json Beat(const std::string& node) {
    return Json{{"node", node}, {"address", "127.0.0.1"}, {"agent_started_ms", 1}};
  }

  std::unique_ptr<Cluster> cluster_;
  std::string join_token_;
  std::string boxa_credential_;
};

TEST_F(NodeTlsTest, TheAgentEnrolledAndKeepsItsCredentialPrivate) {
  struct stat st {};
  ASSERT_EQ(::stat((cluster_->dir() / "agent-boxa" / "node-credential").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  Json list = cluster_->GetJson("/api/v1/nodes/enrolments");
  ASSERT_TRUE(list.is_object()) << list;
  ASSERT_EQ(list["enrolments"].size(), 1u) << list;
  EXPECT_EQ(list["enrolments"][0]["node"], "boxa");
  EXPECT_EQ(list["enrolments"][0]["state"], "active");
  EXPECT_EQ(list.dump().find(boxa_credential_.substr(21)), std::string::npos)
      << "no secret is listed";
}

// A join-token holder tries to pose as boxa (to receive its launches, with
// users' env and lease tokens, or to report its ranks gone).
TEST_F(NodeTlsTest, JoinTokenCannotImpersonateAnEnrolledNode) {
  // Enrols a node of its own first (allowed: that is what the token is for).
  auto join = Client(join_token_);
  auto evil = join->Request("POST", "/api/v1/agent/enroll", Json{{"node", "evil"}}.dump());
  ASSERT_TRUE(evil.ok()) << evil.status().ToString();
  ASSERT_EQ(evil->status, 201) << evil->body;
  const std::string evil_credential = Json::parse(evil->body)["credential"];

  struct Row {
    const char* name;
    std::string bearer;
    std::string target;
    Json body;
    int status;
    const char* field;
  };
  const Row rows[] = {
      {"heartbeat naming boxa with the join token", join_token_, "/api/v1/agent/heartbeat",
       Beat("boxa"), 401, ""},
      {"enrolling as boxa again with the join token", join_token_, "/api/v1/agent/enroll",
       Json{{"node", "boxa"}}, 409, "node"},
      {"heartbeat naming boxa with evil's credential", evil_credential, "/api/v1/agent/heartbeat",
       Beat("boxa"), 403, "node"},
      {"heartbeat with boxa's credential id and evil's secret",
       boxa_credential_.substr(0, 21) + evil_credential.substr(21), "/api/v1/agent/heartbeat",
       Beat("boxa"), 401, ""},
      {"heartbeat with a user's API token", cluster_->admin_token(), "/api/v1/agent/heartbeat",
       Beat("boxa"), 401, ""},
  };
  for (const Row& row : rows) {
    auto r = Client(row.bearer)->Request("POST", row.target, row.body.dump());
    ASSERT_TRUE(r.ok()) << row.name << ": " << r.status().ToString();
    EXPECT_EQ(r->status, row.status) << row.name << ": " << r->body;
    Json error = Json::parse(r->body, nullptr, false);
    ASSERT_TRUE(error.is_object() && error.contains("error")) << row.name << ": " << r->body;
    EXPECT_EQ(error["error"].value("field", ""), row.field) << row.name;
    EXPECT_EQ(r->body.find("desired"), std::string::npos) << row.name << ": no launches";
  }
  // No effect: the real boxa still heartbeats with its own credential.
  EXPECT_TRUE(WaitFor(
      [&] {
        Json nodes = cluster_->GetJson("/api/v1/nodes");
        for (const Json& n : nodes.value("nodes", Json::array())) {
          if (n["name"] == "boxa") return n["health"] == "healthy";
        }
        return false;
      },
      10s));
}

TEST_F(NodeTlsTest, RevokedCredentialIsRefusedAndTheNameStaysOut) {
  auto admin = cluster_->Client();
  auto revoked = admin->Request("DELETE", "/api/v1/nodes/boxa");
  ASSERT_TRUE(revoked.ok());
  ASSERT_EQ(revoked->status, 204) << revoked->body;

  auto beat =
      Client(boxa_credential_)->Request("POST", "/api/v1/agent/heartbeat", Beat("boxa").dump());
  ASSERT_TRUE(beat.ok());
  EXPECT_EQ(beat->status, 401) << beat->body;
  auto again =
      Client(join_token_)->Request("POST", "/api/v1/agent/enroll", Json{{"node", "boxa"}}.dump());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->status, 403) << "a revoked node cannot buy a new credential: " << again->body;
  // The running agent is shut out too: boxa stops being healthy.
  EXPECT_TRUE(WaitFor([&] { return cluster_->HealthyNodes() == 0; }, 20s));

  // An admin readmits it; the agent enrols again on its own next beat.
  auto readmitted = admin->Request("POST", "/api/v1/nodes/boxa/readmit");
  ASSERT_TRUE(readmitted.ok());
  ASSERT_EQ(readmitted->status, 204) << readmitted->body;
  EXPECT_TRUE(WaitFor([&] { return cluster_->HealthyNodes() == 1; }, 20s))
      << cluster_->agent("boxa")->Log();
  EXPECT_NE(FirstLine(cluster_->dir() / "agent-boxa" / "node-credential"), boxa_credential_);
}

TEST_F(NodeTlsTest, PlainHttpToTheTlsServerGetsNoAnswer) {
  api::HttpClient plain(cluster_->controller_host(), cluster_->port(), 5s);
  plain.SetBearerToken(cluster_->admin_token());
  const Json spec = {{"name", "plain"},
                     {"entrypoint", "builtin:colorize-unet"},
                     {"global_batch", 8},
                     {"steps", 1}};
  struct Row {
    const char* method;
    const char* target;
    std::string body;
  };
  const Row rows[] = {{"GET", "/api/v1/jobs", ""},
                      {"POST", "/api/v1/jobs", spec.dump()},
                      {"POST", "/api/v1/agent/heartbeat", Beat("boxa").dump()},
                      {"GET", "/healthz", ""}};
  for (const Row& row : rows) {
    auto r = plain.Request(row.method, row.target, row.body);
    EXPECT_FALSE(r.ok()) << row.method << " " << row.target
                         << " was answered over plain HTTP: " << (r.ok() ? r->body : "");
  }
  Json jobs = cluster_->GetJson("/api/v1/jobs");
  ASSERT_TRUE(jobs.is_object());
  EXPECT_TRUE(jobs["jobs"].empty()) << "nothing sent in clear was acted on";
}

TEST_F(NodeTlsTest, ClientPinnedToAnotherCertificateRefusesTheServer) {
  auto right = api::CertificateFileSha256(cluster_->ca_file().string());
  ASSERT_TRUE(right.ok()) << right.status().ToString();
  std::string wrong = *right;
  wrong[0] = wrong[0] == '0' ? '1' : '0';
  struct Row {
    const char* name;
    api::TlsClientOptions tls;
    bool accepted;
  };
  const Row rows[] = {
      {"the CA's fingerprint", {"", *right}, true},
      {"the CA file", {cluster_->ca_file().string(), ""}, true},
      {"a fingerprint one digit off", {"", wrong}, false},
      {"the system trust store (not tesserad's CA)", {"", ""}, false},
  };
  for (const Row& row : rows) {
    api::HttpClient client(api::ServerUrl{true, cluster_->controller_host(), cluster_->port(), ""},
                           5s, row.tls);
    client.SetBearerToken(cluster_->admin_token());
    auto r = client.Request("POST", "/api/v1/entrypoints",
                            Json{{"name", std::string("cmd:pinned-") + (row.accepted ? "y" : "n")},
                                 {"command", "/bin/true"}}
                                .dump());
    if (row.accepted) {
      ASSERT_TRUE(r.ok()) << row.name << ": " << r.status().ToString();
      EXPECT_EQ(r->status, 201) << row.name << ": " << r->body;
    } else {
      ASSERT_FALSE(r.ok()) << row.name << ": the client talked to a server it cannot verify";
      EXPECT_NE(r.status().message().find("certificate"), std::string::npos)
          << row.name << ": " << r.status().ToString();
    }
  }
  // The refusing clients sent nothing: their entrypoint was never added.
  Json eps = cluster_->GetJson("/api/v1/entrypoints");
  EXPECT_EQ(eps.dump().find("cmd:pinned-n"), std::string::npos) << eps;
  EXPECT_NE(eps.dump().find("cmd:pinned-y"), std::string::npos) << eps;
}

}  // namespace
}  // namespace tessera::testing
