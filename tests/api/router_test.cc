#include "api/router.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "api/http_status.h"
#include "tests/api/fake_control_plane.h"
#include "tests/common/temp_dir.h"

namespace tessera::api {
namespace {

using testing::FakeControlPlane;

constexpr const char* kSpec =
    R"({"name":"colorize","entrypoint":"builtin:colorize-unet","dataset":"/srv/scans",)"
    R"("global_batch":256,"steps":100})";

Request MakeRequest(std::string method, std::string target, std::string token = "user-token",
                    std::string body = "") {
  Request r;
  r.method = std::move(method);
  r.target = std::move(target);
  if (!token.empty()) r.headers["authorization"] = "Bearer " + token;
  r.body = std::move(body);
  return r;
}

Json BodyJson(const Response& r) { return Json::parse(r.body, nullptr, false); }

std::string ErrorField(const Response& r) {
  Json j = BodyJson(r);
  if (!j.is_object() || !j.contains("error")) return "<no error body>";
  return j["error"].value("field", "");
}

class RouterTest : public ::testing::Test {
 protected:
  Response Call(const Request& r) { return router_.Handle(r); }

  FakeControlPlane cp_;
  Router router_{cp_, RouterOptions{}};
};

// ---- table: status and named field for bad or unauthorized input ----

struct ErrorRow {
  const char* name;
  const char* method;
  const char* target;
  const char* token;  // "" for no Authorization header
  const char* body;
  int status;
  const char* field;  // expected error.field ("" when none)
};

class RouterErrorTest : public RouterTest, public ::testing::WithParamInterface<ErrorRow> {};

TEST_P(RouterErrorTest, AnswersWithStatusAndField) {
  const ErrorRow& row = GetParam();
  cp_.AddJob("alice");                        // job 1
  cp_.AddJob("bob");                          // job 2
  cp_.AddJob("alice", JobState::kSucceeded);  // job 3
  Response r = Call(MakeRequest(row.method, row.target, row.token, row.body));
  EXPECT_EQ(r.status, row.status) << r.body;
  EXPECT_EQ(r.content_type, "application/json");
  Json j = BodyJson(r);
  ASSERT_TRUE(j.is_object()) << r.body;
  ASSERT_TRUE(j.contains("error")) << r.body;
  EXPECT_FALSE(j["error"]["message"].get<std::string>().empty());
  EXPECT_EQ(ErrorField(r), row.field) << r.body;
}

const ErrorRow kErrorRows[] = {
    {"no_token", "GET", "/api/v1/jobs", "", "", 401, ""},
    {"bad_token", "GET", "/api/v1/jobs", "nope", "", 401, ""},
    {"no_token_submit", "POST", "/api/v1/jobs", "", kSpec, 401, ""},
    {"user_token_for_agent", "POST", "/api/v1/agent/heartbeat", "user-token", "{}", 401, ""},
    {"other_users_job", "GET", "/api/v1/jobs/2", "user-token", "", 403, ""},
    {"missing_job", "GET", "/api/v1/jobs/99", "user-token", "", 404, ""},
    {"cancel_finished", "POST", "/api/v1/jobs/3/cancel", "user-token", "", 409, ""},
    {"id_not_numeric", "GET", "/api/v1/jobs/abc", "user-token", "", 400, "id"},
    {"id_zero", "GET", "/api/v1/jobs/0", "user-token", "", 400, "id"},
    {"id_negative", "GET", "/api/v1/jobs/-1", "user-token", "", 400, "id"},
    {"id_overflow", "GET", "/api/v1/jobs/99999999999999999999", "user-token", "", 400, "id"},
    {"cancel_id_bad", "POST", "/api/v1/jobs/x/cancel", "user-token", "", 400, "id"},
    {"invalid_json", "POST", "/api/v1/jobs", "user-token", "{not json", 400, "body"},
    {"empty_body", "POST", "/api/v1/jobs", "user-token", "", 400, "body"},
    {"body_not_object", "POST", "/api/v1/jobs", "user-token", "[1,2]", 400, "body"},
    {"spec_wrong_type", "POST", "/api/v1/jobs", "user-token",
     R"({"name":"a","global_batch":"big"})", 400, "global_batch"},
    {"spec_unknown_field", "POST", "/api/v1/jobs", "user-token", R"({"name":"a","gpus":3})", 400,
     "gpus"},
    {"spec_out_of_range", "POST", "/api/v1/jobs", "user-token",
     R"({"name":"a","entrypoint":"builtin:x","global_batch":0,"steps":1})", 400, "global_batch"},
    {"plan_invalid_spec", "POST", "/api/v1/plans", "user-token", R"({"name":""})", 400, "name"},
    {"state_unknown", "GET", "/api/v1/jobs?state=sleeping", "user-token", "", 400, "state"},
    {"limit_zero", "GET", "/api/v1/jobs?limit=0", "user-token", "", 400, "limit"},
    {"limit_too_big", "GET", "/api/v1/jobs?limit=501", "user-token", "", 400, "limit"},
    {"limit_text", "GET", "/api/v1/jobs?limit=ten", "user-token", "", 400, "limit"},
    {"after_negative", "GET", "/api/v1/jobs?after=-5", "user-token", "", 400, "after"},
    {"unknown_param", "GET", "/api/v1/jobs?colour=red", "user-token", "", 400, "colour"},
    {"repeated_param", "GET", "/api/v1/jobs?limit=1&limit=2", "user-token", "", 400, "limit"},
    {"bad_escape", "GET", "/api/v1/jobs?owner=%zz", "user-token", "", 400, "owner"},
    {"events_limit", "GET", "/api/v1/jobs/1/events?limit=100000", "user-token", "", 400, "limit"},
    {"logs_rank", "GET", "/api/v1/jobs/1/logs?rank=-1", "user-token", "", 400, "rank"},
    {"logs_tail", "GET", "/api/v1/jobs/1/logs?tail=101", "user-token", "", 400, "tail"},
    {"logs_unimplemented", "GET", "/api/v1/jobs/1/logs", "user-token", "", 501, ""},
    {"metrics_rank_negative", "GET", "/api/v1/jobs/1/metrics?rank=-1", "user-token", "", 400,
     "rank"},
    {"metrics_rank_text", "GET", "/api/v1/jobs/1/metrics?rank=zero", "user-token", "", 400, "rank"},
    {"metrics_since_negative", "GET", "/api/v1/jobs/1/metrics?since=-1", "user-token", "", 400,
     "since"},
    {"metrics_since_text", "GET", "/api/v1/jobs/1/metrics?since=1.5", "user-token", "", 400,
     "since"},
    {"metrics_limit_zero", "GET", "/api/v1/jobs/1/metrics?limit=0", "user-token", "", 400, "limit"},
    {"metrics_limit_too_big", "GET", "/api/v1/jobs/1/metrics?limit=5001", "user-token", "", 400,
     "limit"},
    {"metrics_attempt_negative", "GET", "/api/v1/jobs/1/metrics?attempt=-1", "user-token", "", 400,
     "attempt"},
    {"metrics_unknown_param", "GET", "/api/v1/jobs/1/metrics?after=3", "user-token", "", 400,
     "after"},
    {"metrics_id_bad", "GET", "/api/v1/jobs/x/metrics", "user-token", "", 400, "id"},
    {"metrics_other_users_job", "GET", "/api/v1/jobs/2/metrics", "user-token", "", 403, ""},
    {"metrics_missing_job", "GET", "/api/v1/jobs/99/metrics", "user-token", "", 404, ""},
    {"metrics_no_token", "GET", "/api/v1/jobs/1/metrics", "", "", 401, ""},
    {"lease_no_token", "POST", "/api/v1/jobs/1/leases", "", R"({"attempt":1,"rank":0})", 401, ""},
    {"lease_user_token", "POST", "/api/v1/jobs/1/leases", "user-token", R"({"attempt":1,"rank":0})",
     401, ""},
    {"lease_bad_json", "POST", "/api/v1/jobs/1/leases", "lease-token", "{", 400, "body"},
    {"lease_no_attempt", "POST", "/api/v1/jobs/1/leases", "lease-token", R"({"rank":0})", 400,
     "attempt"},
    {"lease_max_chunks", "POST", "/api/v1/jobs/1/leases", "lease-token",
     R"({"attempt":1,"rank":0,"max_chunks":65})", 400, "max_chunks"},
    {"lease_completed_type", "POST", "/api/v1/jobs/1/leases", "lease-token",
     R"({"attempt":1,"rank":0,"completed":[{"chunk":"x"}]})", 400, "completed[0].chunk"},
    {"lease_seconds_negative", "POST", "/api/v1/jobs/1/leases", "lease-token",
     R"({"attempt":1,"rank":0,"completed":[{"chunk":1,"seconds":-1}]})", 400,
     "completed[0].seconds"},
    {"lease_id_bad", "POST", "/api/v1/jobs/x/leases", "lease-token", R"({"attempt":1,"rank":0})",
     400, "id"},
    {"plan_unimplemented", "POST", "/api/v1/plans", "user-token", kSpec, 501, ""},
    {"unknown_route", "GET", "/api/v1/nothing", "user-token", "", 404, ""},
    {"unknown_root_no_static", "GET", "/index.html", "", "", 404, ""},
    {"trailing_slash", "GET", "/api/v1/jobs/", "user-token", "", 404, ""},
    {"wrong_method", "DELETE", "/api/v1/jobs", "user-token", "", 405, ""},
    {"wrong_method_healthz", "POST", "/healthz", "", "", 405, ""},
    {"entrypoint_user_denied", "POST", "/api/v1/entrypoints", "user-token",
     R"({"name":"builtin:denoise"})", 403, ""},
    {"entrypoint_bad_name", "POST", "/api/v1/entrypoints", "admin-token", R"({"name":"denoise"})",
     400, "name"},
    {"entrypoint_cmd_relative", "POST", "/api/v1/entrypoints", "admin-token",
     R"({"name":"cmd:train","command":"train.sh"})", 400, "command"},
    {"entrypoint_cmd_no_command", "POST", "/api/v1/entrypoints", "admin-token",
     R"({"name":"cmd:train"})", 400, "command"},
    {"entrypoint_model_relative", "POST", "/api/v1/entrypoints", "admin-token",
     R"({"name":"model:unet","command":"models/unet.pt"})", 400, "command"},
    {"entrypoint_model_no_command", "POST", "/api/v1/entrypoints", "admin-token",
     R"({"name":"model:unet"})", 400, "command"},
    {"entrypoint_model_empty_id", "POST", "/api/v1/entrypoints", "admin-token",
     R"({"name":"model:","command":"/srv/unet.pt"})", 400, "name"},
    {"entrypoint_builtin_with_command", "POST", "/api/v1/entrypoints", "admin-token",
     R"({"name":"builtin:unet","command":"/srv/unet.pt"})", 400, "command"},
    {"model_spec_trains_without_steps", "POST", "/api/v1/jobs", "user-token",
     R"({"name":"a","entrypoint":"model:unet","global_batch":8,"dataset":"/d","output":"/o"})", 400,
     "steps"},
    {"model_spec_checkpoint", "POST", "/api/v1/jobs", "user-token",
     R"({"name":"a","kind":"infer","entrypoint":"model:unet","global_batch":8,"dataset":"/d",)"
     R"("output":"/o","checkpoint":"/c"})",
     400, "checkpoint"},
    {"model_spec_image_member", "POST", "/api/v1/jobs", "user-token",
     R"({"name":"a","kind":"infer","entrypoint":"model:unet","global_batch":8,"dataset":"/d",)"
     R"("output":"/o","image":{"output":"lab"}})",
     400, "image.output"},
    {"image_for_builtin_spec", "POST", "/api/v1/jobs", "user-token",
     R"({"name":"a","kind":"infer","entrypoint":"builtin:x","global_batch":8,"dataset":"/d",)"
     R"("output":"/o","checkpoint":"/c","image":{"input":"rgb"}})",
     400, "image"},
    {"entrypoint_unknown_field", "POST", "/api/v1/entrypoints", "admin-token",
     R"({"name":"cmd:train","cmd":"/x"})", 400, "cmd"},
    {"entrypoint_delete_bad", "DELETE", "/api/v1/entrypoints/nope", "admin-token", "", 400, "name"},
    {"heartbeat_bad_json", "POST", "/api/v1/agent/heartbeat", "node-token-boxA", "{", 400, "body"},
    {"heartbeat_no_node", "POST", "/api/v1/agent/heartbeat", "node-token-boxA", "{}", 400, "node"},
    // Node identity: the join token only enrols; a credential speaks for its node alone.
    {"heartbeat_with_join_token", "POST", "/api/v1/agent/heartbeat", "join-token",
     R"({"node":"boxA"})", 401, ""},
    {"heartbeat_for_another_node", "POST", "/api/v1/agent/heartbeat", "node-token-evil",
     R"({"node":"boxA"})", 403, "node"},
    {"enrol_with_user_token", "POST", "/api/v1/agent/enroll", "user-token", R"({"node":"x"})", 401,
     ""},
    {"enrol_with_credential", "POST", "/api/v1/agent/enroll", "node-token-boxA", R"({"node":"x"})",
     401, ""},
    {"enrol_no_node", "POST", "/api/v1/agent/enroll", "join-token", "{}", 400, "node"},
    {"enrol_bad_node", "POST", "/api/v1/agent/enroll", "join-token", R"({"node":"a b"})", 400,
     "node"},
    {"enrol_node_not_string", "POST", "/api/v1/agent/enroll", "join-token", R"({"node":5})", 400,
     "node"},
    {"enrol_unknown_field", "POST", "/api/v1/agent/enroll", "join-token",
     R"({"node":"x","role":"admin"})", 400, "role"},
    {"enrol_not_object", "POST", "/api/v1/agent/enroll", "join-token", "[]", 400, "body"},
    {"enrolments_user_denied", "GET", "/api/v1/nodes/enrolments", "user-token", "", 403, ""},
    {"revoke_user_denied", "DELETE", "/api/v1/nodes/boxA", "user-token", "", 403, ""},
    {"revoke_unknown", "DELETE", "/api/v1/nodes/boxZ", "admin-token", "", 404, ""},
    {"revoke_bad_name", "DELETE", "/api/v1/nodes/a%20b", "admin-token", "", 400, "name"},
    {"join_bundle_user_denied", "GET", "/api/v1/agent/join-bundle", "user-token", "", 403, ""},
    {"target_not_path", "GET", "http://x/api/v1/jobs", "user-token", "", 400, "path"},
};

INSTANTIATE_TEST_SUITE_P(Table, RouterErrorTest, ::testing::ValuesIn(kErrorRows),
                         [](const ::testing::TestParamInfo<ErrorRow>& info) {
                           return std::string(info.param.name);
                         });

// ---- happy paths ----

TEST_F(RouterTest, SubmitReturns201WithJobAndLocation) {
  Response r = Call(MakeRequest("POST", "/api/v1/jobs", "user-token", kSpec));
  ASSERT_EQ(r.status, 201) << r.body;
  Json j = BodyJson(r);
  EXPECT_EQ(j["id"], 1);
  EXPECT_EQ(j["owner"], "alice");
  EXPECT_EQ(j["state"], "pending");
  EXPECT_EQ(j["spec"]["global_batch"], 256);
  EXPECT_EQ(r.Header("Location"), "/api/v1/jobs/1");
  ASSERT_TRUE(cp_.last_spec.has_value());
  EXPECT_EQ(cp_.last_spec->name, "colorize");
}

TEST_F(RouterTest, ControlPlaneErrorKeepsItsField) {
  cp_.next_error = InvalidArgument("is not on the allow-list", "entrypoint");
  Response r = Call(MakeRequest("POST", "/api/v1/jobs", "user-token", kSpec));
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(ErrorField(r), "entrypoint");
}

TEST_F(RouterTest, GetAndCancelOwnJob) {
  JobId id = cp_.AddJob("alice");
  Response got = Call(MakeRequest("GET", "/api/v1/jobs/" + std::to_string(id)));
  ASSERT_EQ(got.status, 200) << got.body;
  EXPECT_EQ(BodyJson(got)["id"], id);
  Response cancelled = Call(MakeRequest("POST", "/api/v1/jobs/" + std::to_string(id) + "/cancel"));
  ASSERT_EQ(cancelled.status, 200) << cancelled.body;
  EXPECT_EQ(BodyJson(cancelled)["state"], "cancelled");
}

TEST_F(RouterTest, ListJobsPassesQueryAndPaginates) {
  for (int i = 0; i < 5; ++i) cp_.AddJob("alice");
  Response first = Call(MakeRequest("GET", "/api/v1/jobs?limit=2&owner=alice&state=pending"));
  ASSERT_EQ(first.status, 200) << first.body;
  ASSERT_TRUE(cp_.last_query.has_value());
  EXPECT_EQ(cp_.last_query->limit, 2);
  EXPECT_EQ(cp_.last_query->owner, "alice");
  EXPECT_EQ(cp_.last_query->state, JobState::kPending);
  Json j = BodyJson(first);
  ASSERT_EQ(j["jobs"].size(), 2u);
  EXPECT_EQ(j["jobs"][0]["id"], 1);
  ASSERT_EQ(j["next_after"], 2);

  Response second = Call(MakeRequest("GET", "/api/v1/jobs?limit=2&after=2"));
  Json k = BodyJson(second);
  EXPECT_EQ(k["jobs"][0]["id"], 3);
  Response last = Call(MakeRequest("GET", "/api/v1/jobs?limit=2&after=4"));
  Json l = BodyJson(last);
  ASSERT_EQ(l["jobs"].size(), 1u);
  EXPECT_TRUE(l["next_after"].is_null());
}

TEST_F(RouterTest, ListJobsDefaults) {
  Response r = Call(MakeRequest("GET", "/api/v1/jobs"));
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(cp_.last_query->limit, 50);
  EXPECT_EQ(cp_.last_query->after, 0);
  EXPECT_FALSE(cp_.last_query->state.has_value());
}

TEST_F(RouterTest, EventsWithCursor) {
  ASSERT_EQ(Call(MakeRequest("POST", "/api/v1/jobs", "user-token", kSpec)).status, 201);
  Response r = Call(MakeRequest("GET", "/api/v1/jobs/1/events?limit=1"));
  ASSERT_EQ(r.status, 200) << r.body;
  Json j = BodyJson(r);
  ASSERT_EQ(j["events"].size(), 1u);
  EXPECT_EQ(j["events"][0]["to"], "pending");
  EXPECT_EQ(j["next_after"], j["events"][0]["id"]);
}

TEST_F(RouterTest, LogsPassRankAndTail) {
  cp_.logs = std::vector<std::string>{"step 1 loss 0.9", "step 2 loss 0.8"};
  Response r = Call(MakeRequest("GET", "/api/v1/jobs/4/logs?rank=3&tail=2"));
  ASSERT_EQ(r.status, 200) << r.body;
  Json j = BodyJson(r);
  EXPECT_EQ(j["job_id"], 4);
  EXPECT_EQ(j["rank"], 3);
  EXPECT_EQ(j["lines"][1], "step 2 loss 0.8");
  EXPECT_EQ(cp_.last_logs_rank_tail, (std::pair<int64_t, int64_t>{3, 2}));
}

TEST_F(RouterTest, MetricsPassTheQueryAndAnswerThePage) {
  const JobId id = cp_.AddJob("alice");
  MetricPoint a;
  a.step = 4;
  a.attempt = 2;
  a.rank = 1;
  a.ts_ms = 99;
  a.loss = 0.5;
  a.peak_memory_bytes = 1024;
  MetricPoint b = a;
  b.step = 5;
  b.loss.reset();
  cp_.metrics[id] = {b, a};
  Response r = Call(MakeRequest("GET", "/api/v1/jobs/1/metrics?rank=1&attempt=2&since=3&limit=1"));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(BodyJson(r), Json::parse(R"({"job_id": 1, "next_since": 4, "points": [
      {"step": 4, "attempt": 2, "rank": 1, "ts_ms": 99, "loss": 0.5,
       "peak_memory_bytes": 1024}]})"));
  ASSERT_EQ(cp_.metrics_queries.size(), 1u);
  EXPECT_EQ(cp_.metrics_queries[0].rank, 1);
  EXPECT_EQ(cp_.metrics_queries[0].attempt, 2);
  EXPECT_EQ(cp_.metrics_queries[0].since, 3);
  EXPECT_EQ(cp_.metrics_queries[0].limit, 1);

  Response all = Call(MakeRequest("GET", "/api/v1/jobs/1/metrics", "admin-token"));
  ASSERT_EQ(all.status, 200) << all.body;
  EXPECT_EQ(BodyJson(all)["points"].size(), 2u);
  EXPECT_TRUE(BodyJson(all)["next_since"].is_null());
  EXPECT_FALSE(cp_.metrics_queries[1].rank.has_value()) << "every rank by default";
  EXPECT_FALSE(cp_.metrics_queries[1].attempt.has_value()) << "every attempt by default";
  EXPECT_FALSE(cp_.metrics_queries[1].since.has_value()) << "from the first step";
  EXPECT_EQ(cp_.metrics_queries[1].limit, 1000);
  auto parsed = MetricsPageFromJson(BodyJson(all));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->points[0], a) << "the JSON reads back as it was";
  EXPECT_EQ(parsed->points[1], b);
}

TEST_F(RouterTest, DryRunWhileTheProfileIsMeasuredIsAStateNotAnError) {
  cp_.preview_first = {Json{{"state", "measuring_profile"},
                            {"message", "measuring the model profile (about 12 s)"},
                            {"retry_after_s", 2}}};
  cp_.preview = Json{{"plans", Json::array()}, {"rejected", Json::array()}};
  Response measuring = Call(MakeRequest("POST", "/api/v1/plans", "user-token", kSpec));
  EXPECT_EQ(measuring.status, 202) << measuring.body;
  EXPECT_EQ(measuring.Header("Retry-After"), "2");
  EXPECT_EQ(BodyJson(measuring)["message"], "measuring the model profile (about 12 s)");
  Response ready = Call(MakeRequest("POST", "/api/v1/plans", "user-token", kSpec));
  EXPECT_EQ(ready.status, 200) << ready.body;
  EXPECT_EQ(ready.Header("Retry-After"), "");
}

TEST_F(RouterTest, QueueListsRowsForAnyUserAndNeedsAToken) {
  cp_.queue = {{1, 3, "alice", 2, 0.5, "no free device"}};
  Response r = Call(MakeRequest("GET", "/api/v1/queue"));
  ASSERT_EQ(r.status, 200) << r.body;
  const Json row = BodyJson(r)["queue"][0];
  EXPECT_EQ(row["position"], 1);
  EXPECT_EQ(row["id"], 3);
  EXPECT_EQ(row["user"], "alice");
  EXPECT_EQ(row["priority"], 2);
  EXPECT_DOUBLE_EQ(row["user_share"].get<double>(), 0.5);
  EXPECT_EQ(row["reason"], "no free device");
  EXPECT_EQ(Call(MakeRequest("GET", "/api/v1/queue", "")).status, 401);
}

TEST_F(RouterTest, NodesAndEntrypoints) {
  Node n;
  n.name = "boxA";
  n.devices.push_back(Device{.node = "boxA", .name = "cpu", .type = "cpu"});
  Device gpu{.node = "boxA", .index = 1, .name = "H100", .type = "cuda"};
  gpu.profiles["colorize-unet"] = Json{{"device", "cuda:1"}, {"layers", Json::array()}};
  n.devices.push_back(gpu);
  cp_.nodes.push_back(n);
  Response nodes = Call(MakeRequest("GET", "/api/v1/nodes"));
  ASSERT_EQ(nodes.status, 200);
  EXPECT_EQ(BodyJson(nodes)["nodes"][0]["devices"][0]["type"], "cpu");
  // The planner's profiles are listed by model name, not sent whole.
  const Json listed_gpu = BodyJson(nodes)["nodes"][0]["devices"][1];
  EXPECT_FALSE(listed_gpu.contains("profiles")) << listed_gpu.dump();
  EXPECT_EQ(listed_gpu["profiled_models"], Json::array({"colorize-unet"}));

  Response added = Call(MakeRequest("POST", "/api/v1/entrypoints", "admin-token",
                                    R"({"name":"cmd:train","command":"/opt/train"})"));
  ASSERT_EQ(added.status, 201) << added.body;
  EXPECT_EQ(added.Header("Location"), "/api/v1/entrypoints/cmd%3Atrain");
  Response listed = Call(MakeRequest("GET", "/api/v1/entrypoints"));
  EXPECT_EQ(BodyJson(listed)["entrypoints"][0]["command"], "/opt/train");
  Response removed = Call(MakeRequest("DELETE", "/api/v1/entrypoints/cmd%3Atrain", "admin-token"));
  EXPECT_EQ(removed.status, 204) << removed.body;
  EXPECT_TRUE(cp_.entrypoints.empty());
}

// A registered command and an exported model file are allowed alike: the
// absolute path of their file, kept as given.
TEST_F(RouterTest, CommandAndModelEntrypointsAreAllowedWithTheirPath) {
  struct Row {
    const char* body;
    const char* location;
  } rows[] = {
      {R"({"name":"cmd:train","command":"/opt/train","description":""})",
       "/api/v1/entrypoints/cmd%3Atrain"},
      {R"({"name":"model:lab-unet","command":"/srv/models/unet.pt2","description":"U-Net"})",
       "/api/v1/entrypoints/model%3Alab-unet"},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.body);
    Response added = Call(MakeRequest("POST", "/api/v1/entrypoints", "admin-token", row.body));
    ASSERT_EQ(added.status, 201) << added.body;
    EXPECT_EQ(added.Header("Location"), row.location);
    EXPECT_EQ(BodyJson(added), nlohmann::json::parse(row.body));
  }
  ASSERT_EQ(cp_.entrypoints.size(), 2u);
  EXPECT_EQ(cp_.entrypoints[1].name, "model:lab-unet");
  EXPECT_EQ(cp_.entrypoints[1].command, "/srv/models/unet.pt2");
}

TEST_F(RouterTest, AgentHeartbeatWithItsNodeCredential) {
  Response r = Call(MakeRequest("POST", "/api/v1/agent/heartbeat", "node-token-boxA",
                                R"({"node":"boxA","address":"10.0.0.2"})"));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(BodyJson(r)["heartbeat_interval_ms"], 1000);
  ASSERT_TRUE(cp_.last_heartbeat.has_value());
  EXPECT_EQ((*cp_.last_heartbeat)["node"], "boxA");
}

TEST_F(RouterTest, EnrolListRevokeAndJoinBundle) {
  Response enrolled =
      Call(MakeRequest("POST", "/api/v1/agent/enroll", "join-token", R"({"node":"boxA"})"));
  ASSERT_EQ(enrolled.status, 201) << enrolled.body;
  EXPECT_EQ(BodyJson(enrolled)["credential"], "node-token-boxA");
  EXPECT_EQ(enrolled.Header("Cache-Control"), "no-store");
  cp_.in_use.insert("boxA");
  Response again =
      Call(MakeRequest("POST", "/api/v1/agent/enroll", "join-token", R"({"node":"boxA"})"));
  EXPECT_EQ(again.status, 409) << again.body;
  Response listed = Call(MakeRequest("GET", "/api/v1/nodes/enrolments", "admin-token"));
  ASSERT_EQ(listed.status, 200) << listed.body;
  EXPECT_EQ(BodyJson(listed)["enrolments"][0]["node"], "boxA");
  Response revoked = Call(MakeRequest("DELETE", "/api/v1/nodes/boxA", "admin-token"));
  EXPECT_EQ(revoked.status, 204) << revoked.body;
  Response beat =
      Call(MakeRequest("POST", "/api/v1/agent/heartbeat", "node-token-boxA", R"({"node":"boxA"})"));
  EXPECT_EQ(beat.status, 401) << "a revoked credential is refused at once";
  Response refused =
      Call(MakeRequest("POST", "/api/v1/agent/enroll", "join-token", R"({"node":"boxA"})"));
  EXPECT_EQ(refused.status, 403) << refused.body;
  Response bundle = Call(MakeRequest("GET", "/api/v1/agent/join-bundle", "admin-token"));
  ASSERT_EQ(bundle.status, 200) << bundle.body;
  EXPECT_EQ(BodyJson(bundle)["join_token"], "join-token");
}

TEST_F(RouterTest, WrongMethodListsAllowed) {
  Response r = Call(MakeRequest("PUT", "/api/v1/jobs"));
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.Header("Allow"), "POST, GET");
}

TEST_F(RouterTest, UnauthorizedCarriesChallenge) {
  Response r = Call(MakeRequest("GET", "/api/v1/nodes", ""));
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(r.Header("WWW-Authenticate"), "Bearer realm=\"tessera\"");
}

TEST_F(RouterTest, HealthAndReadiness) {
  Response h = Call(MakeRequest("GET", "/healthz", ""));
  EXPECT_EQ(h.status, 200);
  EXPECT_EQ(h.body, "ok\n");
  EXPECT_EQ(Call(MakeRequest("GET", "/readyz", "")).status, 200);
  cp_.ready = Unavailable("store closed");
  Response r = Call(MakeRequest("GET", "/readyz", ""));
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(BodyJson(r)["error"]["code"], "unavailable");
}

TEST_F(RouterTest, MetricsCountRequestsAndIncludeControlPlane) {
  (void)Call(MakeRequest("GET", "/api/v1/jobs/42"));
  (void)Call(MakeRequest("GET", "/api/v1/jobs/43"));
  (void)Call(MakeRequest("GET", "/api/v1/nowhere"));
  Response m = Call(MakeRequest("GET", "/metrics", ""));
  ASSERT_EQ(m.status, 200);
  EXPECT_NE(m.content_type.find("text/plain"), std::string::npos);
  EXPECT_NE(
      m.body.find(
          R"(tessera_http_requests_total{route="/api/v1/jobs/{id}",method="GET",code="404"} 2)"),
      std::string::npos)
      << m.body;
  EXPECT_NE(m.body.find(R"(route="unmatched",method="GET",code="404"} 1)"), std::string::npos);
  EXPECT_NE(
      m.body.find(R"(tessera_http_request_duration_seconds_count{route="/api/v1/jobs/{id}"} 2)"),
      std::string::npos);
  EXPECT_NE(m.body.find(R"(le="+Inf")"), std::string::npos);
  EXPECT_NE(m.body.find("tessera_jobs{state=\"pending\"} 0"), std::string::npos);
}

TEST_F(RouterTest, ControlPlaneExceptionBecomes500NotCrash) {
  struct Throwing : FakeControlPlane {
    Result<std::vector<Node>> ListNodes(const Principal&) override {
      throw std::runtime_error("boom");
    }
  } throwing;
  Response r = Handle(MakeRequest("GET", "/api/v1/nodes"), throwing, RouterOptions{}, nullptr);
  EXPECT_EQ(r.status, 500);
  EXPECT_EQ(BodyJson(r)["error"]["code"], "internal");
}

TEST(RouteTableTest, EveryApiRouteNeedsAuth) {
  for (const RouteInfo& r : RouteTable()) {
    if (r.pattern == "/api/v1/agent/enroll") {
      EXPECT_EQ(r.auth, RouteAuth::kJoin) << "the join token only enrols";
    } else if (r.pattern == "/api/v1/agent/join-bundle") {
      EXPECT_EQ(r.auth, RouteAuth::kUser) << "admins fetch the bundle";
    } else if (r.pattern.starts_with("/api/v1/agent/")) {
      EXPECT_EQ(r.auth, RouteAuth::kAgent) << r.pattern;
    } else if (r.pattern.ends_with("/leases")) {
      EXPECT_EQ(r.auth, RouteAuth::kLease) << r.pattern;
    } else if (r.pattern.starts_with("/api/")) {
      EXPECT_EQ(r.auth, RouteAuth::kUser) << r.pattern;
    } else {
      EXPECT_EQ(r.auth, RouteAuth::kNone) << r.pattern;
    }
  }
}

TEST_F(RouterTest, LeaseRouteHandsTheTokenAndRequestToTheControlPlane) {
  Response r = Call(MakeRequest("POST", "/api/v1/jobs/4/leases", "lease-token",
                                R"({"attempt":2,"rank":1,"max_chunks":3,)"
                                R"("completed":[{"chunk":5,"images":32,"seconds":1.5}]})"));
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_TRUE(cp_.last_lease.has_value());
  EXPECT_EQ(cp_.last_lease->first, 4);
  const LeaseRequest& req = cp_.last_lease->second;
  EXPECT_EQ(req.attempt, 2);
  EXPECT_EQ(req.rank, 1);
  EXPECT_EQ(req.max_chunks, 3);
  ASSERT_EQ(req.completed.size(), 1u);
  EXPECT_EQ(req.completed[0].images, 32);
  EXPECT_DOUBLE_EQ(req.completed[0].seconds, 1.5);
  auto answer = LeaseResponseFromJson(BodyJson(r));
  ASSERT_TRUE(answer.ok()) << r.body;
  ASSERT_EQ(answer->chunks.size(), 1u);
  EXPECT_EQ(answer->chunks[0].items, (std::vector<std::string>{"scan-0001.png"}));
  EXPECT_EQ(answer->lease_ms, 30000);
}

// ---- static files ----

class StaticRouterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(root_ / "web" / "js");
    Write(root_ / "web" / "index.html", "<h1>Tessera</h1>");
    Write(root_ / "web" / "js" / "app.js", "console.log(1)");
    Write(root_ / "secret.txt", "top secret");
    std::filesystem::create_symlink(root_ / "secret.txt", root_ / "web" / "link.txt");
    RouterOptions options;
    options.static_dir = (root_ / "web").string();
    router_.emplace(cp_, options);
  }
  static void Write(const std::filesystem::path& p, const std::string& text) {
    std::ofstream(p) << text;
  }
  Response Get(const std::string& target, const std::string& method = "GET") {
    return router_->Handle(MakeRequest(method, target, ""));
  }

  ::tessera::testing::TempDir temp_;
  const std::filesystem::path root_ = temp_.path();
  FakeControlPlane cp_;
  std::optional<Router> router_;
};

TEST_F(StaticRouterTest, ServesIndexAndTypes) {
  Response index = Get("/");
  ASSERT_EQ(index.status, 200);
  EXPECT_EQ(index.body, "<h1>Tessera</h1>");
  EXPECT_EQ(index.content_type, "text/html; charset=utf-8");
  Response js = Get("/js/app.js?v=3");
  ASSERT_EQ(js.status, 200);
  EXPECT_EQ(js.content_type, "text/javascript; charset=utf-8");
}

TEST_F(StaticRouterTest, RefusesTraversal) {
  for (const char* target : {"/../secret.txt", "/js/../../secret.txt", "/%2e%2e/secret.txt",
                             "/js%2f..%2f..%2fsecret.txt", "/link.txt", "/..%5csecret.txt"}) {
    Response r = Get(target);
    EXPECT_TRUE(r.status == 400 || r.status == 404) << target << " -> " << r.status;
    EXPECT_EQ(r.body.find("top secret"), std::string::npos) << target;
  }
}

TEST_F(StaticRouterTest, MissingFileAndWrongMethod) {
  EXPECT_EQ(Get("/nope.css").status, 404);
  Response post = Get("/index.html", "POST");
  EXPECT_EQ(post.status, 405);
  EXPECT_EQ(post.Header("Allow"), "GET");
  // The API namespace never falls through to static files.
  EXPECT_EQ(Get("/api/v2/x").status, 404);
}

}  // namespace
}  // namespace tessera::api
