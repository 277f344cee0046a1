// slurmrestd v0.0.38: the JSON shapes, and the client against a real HTTP
// server on loopback answering as slurmrestd does.
#include "slurm/slurm_rest_client.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <mutex>

#include "api/http_server.h"
#include "tests/common/temp_dir.h"

namespace tessera::slurm {
namespace {

namespace fs = std::filesystem;
using ::tessera::testing::TempDir;

// Trimmed from what slurmrestd 22.05.8 answered on the test cluster.
constexpr char kNodes[] = R"json({
  "meta": {"plugin": {"type": "openapi/v0.0.38"}},
  "errors": [],
  "nodes": [
    {"name": "fa", "state": "idle", "state_flags": [], "gres": "gpu:a100:2",
     "gres_used": "gpu:a100:0(IDX:N/A)", "address": "127.0.0.1", "hostname": "localhost",
     "partitions": ["gpu"], "cpus": 2, "reason": ""},
    {"name": "fb", "state": "down", "state_flags": ["drain"], "gres": "gpu:t4:1(S:0)",
     "address": "", "hostname": "nodeb", "partitions": ["gpu"], "cpus": 4,
     "reason": "test"}]})json";

constexpr char kJobs[] = R"json({"errors": [], "jobs": [
  {"job_id": 3, "name": "tessera-1-2", "job_state": "RUNNING", "het_job_id": 3,
   "het_job_offset": 0, "exit_code": 0, "nodes": "fa", "state_reason": "None"},
  {"job_id": 4, "name": "tessera-1-2", "job_state": "NODE_FAIL", "het_job_id": 3,
   "het_job_offset": 1, "exit_code": 1, "nodes": "fb", "state_reason": "NodeDown"}]})json";

TEST(SlurmRestClientTest, ParsesNodesAndJobs) {
  auto nodes = NodesFromJson(api::Json::parse(kNodes));
  ASSERT_TRUE(nodes.ok()) << nodes.status().ToString();
  ASSERT_EQ(nodes->size(), 2u);
  EXPECT_EQ((*nodes)[0].name, "fa");
  EXPECT_EQ((*nodes)[0].state, "idle");
  EXPECT_EQ((*nodes)[0].gres, "gpu:a100:2");
  EXPECT_EQ((*nodes)[0].address, "127.0.0.1");
  EXPECT_EQ((*nodes)[0].cpus, 2);
  EXPECT_EQ((*nodes)[1].state, "down");
  EXPECT_EQ((*nodes)[1].state_flags, std::vector<std::string>{"DRAIN"});
  EXPECT_EQ((*nodes)[1].address, "nodeb");  // no NodeAddr: the hostname
  EXPECT_EQ((*nodes)[1].reason, "test");

  auto jobs = JobsFromJson(api::Json::parse(kJobs));
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  ASSERT_EQ(jobs->size(), 2u);
  EXPECT_EQ((*jobs)[1].job_id, 4);
  EXPECT_EQ((*jobs)[1].het_job_id, 3);
  EXPECT_EQ((*jobs)[1].het_job_offset, 1);
  EXPECT_EQ((*jobs)[1].state, "NODE_FAIL");
  EXPECT_EQ((*jobs)[1].name, "tessera-1-2");

  for (const char* bad : {"[]", "{}", R"({"nodes": 3})", R"({"nodes": [{"state": "idle"}]})"}) {
    EXPECT_FALSE(NodesFromJson(api::Json::parse(bad)).ok()) << bad;
  }
  EXPECT_FALSE(JobsFromJson(api::Json::parse(R"({"jobs": [1]})")).ok());
}

TEST(SlurmRestClientTest, TerminalStates) {
  for (const char* s : {"COMPLETED", "FAILED", "CANCELLED", "NODE_FAIL", "TIMEOUT", "OUT_OF_MEMORY",
                        "PREEMPTED", "BOOT_FAIL", "DEADLINE"}) {
    EXPECT_TRUE(IsTerminalJobState(s)) << s;
  }
  for (const char* s : {"PENDING", "RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED"}) {
    EXPECT_FALSE(IsTerminalJobState(s)) << s;
  }
}

TEST(SlurmRestClientTest, SubmitBodyHasOneEntryPerComponent) {
  HetJobRequest r;
  r.name = "tessera-7-2";
  r.script = "#!/bin/sh\nexec srun ...\n";
  r.working_dir = "/shared/jobs/7/2";
  r.standard_output = "/shared/jobs/7/2/slurm-%j.out";
  r.components = {{"gpu", {"fa", "fc"}, 2, "gpu:a100:2", {{"PATH", "/usr/bin:/bin"}}},
                  {"gpu", {"fb"}, 1, "gpu:t4:1", {}}};
  api::Json body = SubmitBody(r);
  EXPECT_EQ(body["script"], r.script);
  ASSERT_EQ(body["jobs"].size(), 2u);
  const api::Json& a = body["jobs"][0];
  EXPECT_EQ(a["name"], "tessera-7-2");
  EXPECT_EQ(a["partition"], "gpu");
  EXPECT_EQ(a["nodelist"], "fa,fc");
  EXPECT_EQ(a["nodes"], "2");
  EXPECT_EQ(a["tasks"], 4);
  EXPECT_EQ(a["tasks_per_node"], 2);
  EXPECT_EQ(a["gres"], "gpu:a100:2");
  EXPECT_EQ(a["requeue"], false);  // Tessera re-plans; Slurm must not requeue
  EXPECT_EQ(a["current_working_directory"], "/shared/jobs/7/2");
  EXPECT_EQ(a["standard_output"], "/shared/jobs/7/2/slurm-%j.out");
  EXPECT_EQ(a["environment"]["PATH"], "/usr/bin:/bin");
  const api::Json& b = body["jobs"][1];
  EXPECT_EQ(b["nodelist"], "fb");
  EXPECT_EQ(b["tasks"], 1);
  EXPECT_FALSE(b.contains("standard_output"));
  EXPECT_FALSE(b["environment"].empty());  // slurmrestd refuses a component without one

  // One component: an ordinary job ("jobs" would make it heterogeneous).
  r.components.resize(1);
  body = SubmitBody(r);
  EXPECT_FALSE(body.contains("jobs"));
  EXPECT_EQ(body["job"]["nodelist"], "fa,fc");
}

TEST(SlurmRestClientTest, ParsesUrl) {
  auto e = ParseRestUrl("http://10.1.2.3:6820/");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->host, "10.1.2.3");
  EXPECT_EQ(e->port, 6820);
  for (const char* bad : {"10.1.2.3:6820", "https://h:1", "http://h", "http://h:0",
                          "http://h:99999", "http://h:1/slurm", "http://:1"}) {
    EXPECT_FALSE(ParseRestUrl(bad).ok()) << bad;
  }
}

// A loopback server answering as slurmrestd, recording what it was asked.
class FakeRestd {
 public:
  FakeRestd() {
    server_ = std::make_unique<api::HttpServer>(
        api::HttpServerOptions{}, [this](const api::Request& r) { return Handle(r); });
    EXPECT_TRUE(server_->Start().ok());
  }
  uint16_t port() const { return server_->port(); }
  std::vector<api::Request> requests() {
    std::lock_guard lock(mu_);
    return requests_;
  }

 private:
  api::Response Handle(const api::Request& r) {
    {
      std::lock_guard lock(mu_);
      requests_.push_back(r);
    }
    api::Response resp;
    if (r.Header("x-slurm-user-token") != "tok-1") {
      resp.status = 401;
      resp.body = "Authentication failure";
      return resp;
    }
    if (r.method == "GET" && r.target == "/slurm/v0.0.38/nodes") {
      resp.body = kNodes;
    } else if (r.method == "GET" && r.target == "/slurm/v0.0.38/jobs") {
      resp.body = kJobs;
    } else if (r.method == "POST" && r.target == "/slurm/v0.0.38/job/submit") {
      api::Json body = api::Json::parse(r.body, nullptr, false);
      if (body.is_discarded() || !(body.contains("jobs") || body.contains("job"))) {
        resp.status = 500;
        resp.body = R"({"errors": [{"error": "Invalid job description", "error_number": 9001}]})";
      } else {
        resp.body = R"({"errors": [], "job_id": 42, "step_id": "BATCH"})";
      }
    } else if (r.method == "DELETE" && r.target == "/slurm/v0.0.38/job/42") {
      resp.body = R"({"errors": []})";
    } else if (r.method == "DELETE") {
      resp.status = 500;
      resp.body =
          R"({"errors": [{"description": "unable to kill JobId=9 with signal 9: Invalid job id specified", "error_number": 2017}]})";
    } else {
      resp.status = 404;
      resp.body = R"({"errors": [{"error": "Unable find requested URL"}]})";
    }
    return resp;
  }

  std::mutex mu_;
  std::vector<api::Request> requests_;
  std::unique_ptr<api::HttpServer> server_;
};

class SlurmRestClientHttpTest : public ::testing::Test {
 protected:
  void SetUp() override { WriteToken("SLURM_JWT=tok-1\n"); }
  void WriteToken(const std::string& text) { std::ofstream(dir_.File("token")) << text; }

  TempDir dir_;
  FakeRestd restd_;
};

TEST_F(SlurmRestClientHttpTest, TalksToSlurmrestdWithTheToken) {
  SlurmRestClient client({"127.0.0.1", restd_.port()}, "tessera", dir_.File("token"));
  auto nodes = client.ListNodes();
  ASSERT_TRUE(nodes.ok()) << nodes.status().ToString();
  EXPECT_EQ(nodes->size(), 2u);
  auto jobs = client.ListJobs();
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  EXPECT_EQ(jobs->size(), 2u);
  HetJobRequest r;
  r.name = "tessera-1-1";
  r.script = "#!/bin/sh\ntrue\n";
  r.components = {{"gpu", {"fa"}, 1, "gpu:a100:1", {}}};
  auto id = client.SubmitHetJob(r);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  EXPECT_EQ(*id, 42);
  EXPECT_TRUE(client.CancelJob(42).ok());
  // Slurm's own error comes back, an unknown job as kNotFound.
  Status missing = client.CancelJob(9);
  EXPECT_EQ(missing.code(), StatusCode::kNotFound) << missing.ToString();
  EXPECT_NE(missing.message().find("Invalid job id"), std::string::npos);

  std::vector<api::Request> seen = restd_.requests();
  ASSERT_EQ(seen.size(), 5u);
  for (const api::Request& r : seen) {
    EXPECT_EQ(r.Header("x-slurm-user-name"), "tessera");
    EXPECT_EQ(r.Header("x-slurm-user-token"), "tok-1");
  }
  api::Json submitted = api::Json::parse(seen[2].body);
  EXPECT_EQ(submitted["job"]["nodelist"], "fa");
}

TEST_F(SlurmRestClientHttpTest, TokenFileIsReadOnEveryCall) {
  SlurmRestClient client({"127.0.0.1", restd_.port()}, "tessera", dir_.File("token"));
  WriteToken("expired");
  Status refused = client.ListNodes().status();
  EXPECT_EQ(refused.code(), StatusCode::kUnavailable) << refused.ToString();
  WriteToken("tok-1");  // renewed in place
  EXPECT_TRUE(client.ListNodes().ok());
  fs::remove(dir_.File("token"));
  EXPECT_EQ(client.ListNodes().status().code(), StatusCode::kUnavailable);
}

TEST(SlurmRestClientNoServerTest, UnreachableIsUnavailable) {
  TempDir dir;
  std::ofstream(dir.File("token")) << "t";
  // A port nothing listens on: bind one, remember it, close it.
  uint16_t port = 0;
  {
    api::HttpServer s(api::HttpServerOptions{},
                      [](const api::Request&) { return api::Response{}; });
    ASSERT_TRUE(s.Start().ok());
    port = s.port();
  }
  SlurmRestClient client({"127.0.0.1", port}, "tessera", dir.File("token"));
  EXPECT_EQ(client.ListNodes().status().code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace tessera::slurm
