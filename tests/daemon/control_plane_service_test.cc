// ControlPlaneService against a real SqliteStore on a temporary file.
#include "daemon/control_plane_service.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <utility>

#include "common/fake_clock.h"
#include "daemon/store/faulty_store.h"
#include "daemon/store/sqlite_store.h"
#include "tests/daemon/temp_dir.h"

namespace tessera::daemon {
namespace {

using api::JobState;
using api::Principal;
using api::Role;

const Principal kAlice{"alice", Role::kUser};
const Principal kBob{"bob", Role::kUser};
const Principal kRoot{"root", Role::kAdmin};

api::JobSpec Spec(std::string entrypoint = "builtin:colorize-unet", int64_t max_attempts = 2) {
  api::JobSpec s;
  s.name = "colorize";
  s.entrypoint = std::move(entrypoint);
  s.dataset = "/srv/scans";
  s.global_batch = 32;
  s.steps = 100;
  s.max_attempts = max_attempts;
  return s;
}

class ControlPlaneServiceTest : public ::testing::Test {
 protected:
  void SetUp() override { Open(); }

  void Open(ControlPlaneOptions options = {}) {
    service_.reset();
    store_.reset();
    auto s = SqliteStore::Open(dir_.File("tessera.db"));
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(s).value();
    options.heartbeat_interval = std::chrono::milliseconds(1000);
    service_ = std::make_unique<ControlPlaneService>(store_.get(), &clock_, std::move(options));
  }

  api::Job Submit(const Principal& who) {
    auto job = service_->SubmitJob(who, Spec());
    EXPECT_TRUE(job.ok()) << job.status().ToString();
    return job.ok() ? *job : api::Job{};
  }

  api::Json HeartbeatJson(const std::string& node, std::vector<api::WorkerStatus> workers = {}) {
    api::HeartbeatRequest r;
    r.node = node;
    r.address = "10.0.0.7";
    r.agent_started_ms = 1;
    api::Device d;
    d.node = node;
    d.index = 0;
    d.name = "emulated-rtx";
    d.uuid = "GPU-1";
    d.type = "cuda";
    d.memory_bytes = 16'000'000'000;
    d.relative_speed = 0.25;
    d.emulated = true;
    r.devices = {d};
    r.workers = std::move(workers);
    return api::ToJson(r);
  }

  static api::WorkerStatus Worker(api::JobId job, int64_t rank, api::Json progress) {
    api::WorkerStatus w;
    w.key = {job, 1, rank};
    w.pid = 100 + rank;
    w.progress = std::move(progress);
    return w;
  }

  testing::TempDir dir_;
  FakeClock clock_;
  std::unique_ptr<SqliteStore> store_;
  std::unique_ptr<ControlPlaneService> service_;
};

TEST_F(ControlPlaneServiceTest, AuthenticateMapsTokensToPrincipals) {
  auto admin = store_->CreateToken("root", Role::kAdmin, 1);
  auto user = store_->CreateToken("alice", Role::kUser, 1);
  ASSERT_TRUE(admin.ok() && user.ok());
  auto p = service_->Authenticate(admin->plaintext);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->user, "root");
  EXPECT_TRUE(p->is_admin());
  EXPECT_FALSE(service_->Authenticate(user->plaintext)->is_admin());
  EXPECT_EQ(service_->Authenticate("nonsense").status().code(), StatusCode::kUnauthenticated);
  ASSERT_TRUE(store_->RevokeToken(user->info.id, 2).ok());
  EXPECT_EQ(service_->Authenticate(user->plaintext).status().code(), StatusCode::kUnauthenticated);
}

TEST_F(ControlPlaneServiceTest, AuthenticateAgentChecksJoinToken) {
  EXPECT_EQ(service_->AuthenticateAgent("j").code(), StatusCode::kUnauthenticated);
  ASSERT_TRUE(store_->SetAgentJoinToken("j").ok());
  EXPECT_TRUE(service_->AuthenticateAgent("j").ok());
  EXPECT_EQ(service_->AuthenticateAgent("k").code(), StatusCode::kUnauthenticated);
}

TEST_F(ControlPlaneServiceTest, NodeIdentityAdminsOnlyAndTheJoinTokenIsNoCredential) {
  ASSERT_TRUE(store_->SetAgentJoinToken("tsj_join").ok());
  const Principal admin{"root", Role::kAdmin}, user{"alice", Role::kUser};
  auto issued = service_->EnrolNode("boxa");
  ASSERT_TRUE(issued.ok()) << issued.status().ToString();
  EXPECT_EQ(*service_->AuthenticateNode(issued->credential), "boxa");
  EXPECT_EQ(service_->AuthenticateNode("tsj_join").status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(service_->EnrolNode("boxa").status().code(), StatusCode::kAlreadyExists);

  struct Row {
    const char* call;
    Principal who;
    StatusCode want;
  };
  const Row rows[] = {{"list", user, StatusCode::kPermissionDenied},
                      {"revoke", user, StatusCode::kPermissionDenied},
                      {"bundle", user, StatusCode::kPermissionDenied},
                      {"list", admin, StatusCode::kOk},
                      {"bundle", admin, StatusCode::kUnimplemented},  // no bundle hook
                      {"readmit", admin, StatusCode::kFailedPrecondition},
                      {"revoke", admin, StatusCode::kOk},
                      {"readmit", user, StatusCode::kPermissionDenied},
                      {"readmit", admin, StatusCode::kOk}};
  for (const Row& row : rows) {
    const std::string call = row.call;
    Status st = call == "list"     ? service_->ListNodeEnrolments(row.who).status()
                : call == "revoke" ? service_->RevokeNode(row.who, "boxa")
                : call == "bundle" ? service_->JoinBundle(row.who).status()
                                   : service_->ReadmitNode(row.who, "boxa");
    EXPECT_EQ(st.code(), row.want) << row.call << " by " << row.who.user << ": " << st.ToString();
  }
  EXPECT_EQ(service_->AuthenticateNode(issued->credential).status().code(),
            StatusCode::kUnauthenticated)
      << "revoked, then readmitted: the old credential stays dead";
  EXPECT_TRUE(service_->EnrolNode("boxa").ok()) << "readmitted: it may enrol again";
}

// Every call on a job owned by alice, by alice, bob and an admin.
TEST_F(ControlPlaneServiceTest, AuthorizationTable) {
  enum class Op { kGet, kEvents, kCancel };
  struct Case {
    const char* name;
    Principal who;
    Op op;
    StatusCode want;
  };
  const Case cases[] = {
      {"owner gets", kAlice, Op::kGet, StatusCode::kOk},
      {"other user gets", kBob, Op::kGet, StatusCode::kPermissionDenied},
      {"admin gets", kRoot, Op::kGet, StatusCode::kOk},
      {"owner lists events", kAlice, Op::kEvents, StatusCode::kOk},
      {"other user lists events", kBob, Op::kEvents, StatusCode::kPermissionDenied},
      {"admin lists events", kRoot, Op::kEvents, StatusCode::kOk},
      {"owner cancels", kAlice, Op::kCancel, StatusCode::kOk},
      {"other user cancels", kBob, Op::kCancel, StatusCode::kPermissionDenied},
      {"admin cancels", kRoot, Op::kCancel, StatusCode::kOk},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const api::Job job = Submit(kAlice);
    Status got;
    switch (c.op) {
      case Op::kGet:
        got = service_->GetJob(c.who, job.id).status();
        break;
      case Op::kEvents:
        got = service_->ListEvents(c.who, job.id, 0, 100).status();
        break;
      case Op::kCancel:
        got = service_->CancelJob(c.who, job.id).status();
        break;
    }
    EXPECT_EQ(got.code(), c.want) << got.ToString();
    const JobState state = store_->GetJob(job.id)->state;
    const bool cancelled = c.op == Op::kCancel && c.want == StatusCode::kOk;
    EXPECT_EQ(state, cancelled ? JobState::kCancelled : JobState::kPending);
  }
  EXPECT_EQ(service_->GetJob(kRoot, 9999).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(service_->GetJob(kAlice, 9999).status().code(), StatusCode::kNotFound);
}

TEST_F(ControlPlaneServiceTest, ListJobsScopesUsersToThemselves) {
  Submit(kAlice);
  Submit(kAlice);
  Submit(kBob);
  struct Case {
    const char* name;
    Principal who;
    std::optional<std::string> owner;
    StatusCode want;
    size_t jobs;
  };
  const Case cases[] = {
      {"user lists own", kAlice, std::nullopt, StatusCode::kOk, 2},
      {"user names self", kAlice, "alice", StatusCode::kOk, 2},
      {"user names other", kBob, "alice", StatusCode::kPermissionDenied, 0},
      {"admin lists all", kRoot, std::nullopt, StatusCode::kOk, 3},
      {"admin names other", kRoot, "bob", StatusCode::kOk, 1},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    api::JobQuery q;
    q.owner = c.owner;
    auto page = service_->ListJobs(c.who, q);
    EXPECT_EQ(page.status().code(), c.want);
    if (page.ok()) {
      EXPECT_EQ(page->jobs.size(), c.jobs);
      for (const api::Job& j : page->jobs) {
        if (!c.who.is_admin()) {
          EXPECT_EQ(j.owner, c.who.user);
        }
      }
    }
  }
  api::JobQuery bad;
  bad.limit = 0;
  auto refused = service_->ListJobs(kAlice, bad);
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.status().field(), "limit");
}

TEST_F(ControlPlaneServiceTest, SubmitIsDurableWithSubmittedEvent) {
  clock_.Advance(std::chrono::milliseconds(5));
  const api::Job job = Submit(kAlice);
  EXPECT_EQ(job.state, JobState::kPending);
  EXPECT_EQ(job.owner, "alice");
  EXPECT_EQ(job.created_ms, clock_.NowUnixMillis());
  Open();  // a fresh store on the same file
  auto again = service_->GetJob(kAlice, job.id);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->spec, Spec());
  auto events = service_->ListEvents(kAlice, job.id, 0, 10);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 1u);
  EXPECT_EQ((*events)[0].to_state, "pending");
  EXPECT_EQ((*events)[0].reason, "submitted");
}

TEST_F(ControlPlaneServiceTest, SubmitBeyondAUsersPendingLimitIsRefusedUntilOneStarts) {
  ControlPlaneOptions options;
  options.max_pending_jobs = [](const std::string& user) { return user == "alice" ? 3 : 0; };
  Open(std::move(options));
  std::vector<api::Job> jobs;
  for (int i = 0; i < 3; ++i) jobs.push_back(Submit(kAlice));
  auto refused = service_->SubmitJob(kAlice, Spec());
  ASSERT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("alice has 3 pending jobs"), std::string::npos)
      << refused.status().ToString();
  EXPECT_TRUE(service_->SubmitJob(kBob, Spec()).ok()) << "bob has no limit";
  // One of alice's jobs leaves the queue: she may submit again.
  ASSERT_TRUE(service_->CancelJob(kAlice, jobs[0].id).ok());
  EXPECT_TRUE(service_->SubmitJob(kAlice, Spec()).ok());
}

TEST_F(ControlPlaneServiceTest, TheQueueHidesOtherUsersJobsFromNonAdmins) {
  EXPECT_EQ(service_->Queue(kAlice).status().code(), StatusCode::kUnimplemented);
  ControlPlaneOptions options;
  options.queue = [] {
    return std::vector<api::QueueRow>{{1, 4, "bob", 0, 0, "no free device"},
                                      {2, 5, "alice", 0, 1, "waiting behind job 4"}};
  };
  Open(std::move(options));
  auto mine = service_->Queue(kAlice);
  ASSERT_TRUE(mine.ok()) << mine.status().ToString();
  ASSERT_EQ(mine->size(), 2u);
  EXPECT_EQ((*mine)[0], (api::QueueRow{1, 0, "bob", 0, 0, ""})) << "bob's job is hidden";
  EXPECT_EQ((*mine)[1].id, 5);
  EXPECT_EQ((*mine)[1].reason, "waiting behind job 4");
  auto all = service_->Queue(kRoot);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ((*all)[0].id, 4) << "an admin sees every job";
  EXPECT_EQ((*all)[0].reason, "no free device");
}

TEST_F(ControlPlaneServiceTest, SubmitRefusesEntrypointsOffTheAllowList) {
  auto job = service_->SubmitJob(kAlice, Spec("cmd:rm-rf"));
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(job.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(job.status().field(), "entrypoint");
  EXPECT_NE(job.status().message().find("cmd:rm-rf"), std::string::npos);
  EXPECT_TRUE(service_->ListJobs(kRoot, {})->jobs.empty());
}

TEST_F(ControlPlaneServiceTest, CancelTwiceIsAFailedPrecondition) {
  const api::Job job = Submit(kAlice);
  auto first = service_->CancelJob(kAlice, job.id);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->state, JobState::kCancelled);
  EXPECT_EQ(first->reason, "cancelled by alice");
  auto second = service_->CancelJob(kAlice, job.id);
  EXPECT_EQ(second.status().code(), StatusCode::kFailedPrecondition);
  auto events = service_->ListEvents(kAlice, job.id, 0, 10);
  ASSERT_EQ(events->size(), 2u);
  EXPECT_EQ(events->back().from_state, "pending");
  EXPECT_EQ(events->back().to_state, "cancelled");
  EXPECT_EQ(events->back().reason, "cancelled by alice");
}

TEST_F(ControlPlaneServiceTest, EntrypointChangesNeedAdmin) {
  const api::Entrypoint e{"cmd:lab-train", "/opt/lab/train", "lab"};
  EXPECT_EQ(service_->AllowEntrypoint(kAlice, e).code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(service_->DisallowEntrypoint(kAlice, "builtin:gan-pix2pix").code(),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(service_->ListEntrypoints(kAlice)->size(), 4u);
  ASSERT_TRUE(service_->AllowEntrypoint(kRoot, e).ok());
  EXPECT_TRUE(service_->SubmitJob(kAlice, Spec("cmd:lab-train")).ok());
  ASSERT_TRUE(service_->DisallowEntrypoint(kRoot, "cmd:lab-train").ok());
  EXPECT_EQ(service_->SubmitJob(kAlice, Spec("cmd:lab-train")).status().field(), "entrypoint");
}

// An exported model file runs only once an admin registered it, like a
// command; the job's image convention is kept with its spec.
TEST_F(ControlPlaneServiceTest, ModelEntrypointsRunOnceAnAdminRegistersTheirFile) {
  api::JobSpec spec = Spec("model:lab-unet");
  spec.kind = api::JobKind::kInfer;
  spec.steps = 0;
  spec.output = "/srv/colorized";
  spec.image.input = "l";
  spec.image.output = "ab";
  spec.image.range = std::make_pair(-1.0, 1.0);
  spec.image.halo_px = 0;
  EXPECT_EQ(service_->SubmitJob(kAlice, spec).status().field(), "entrypoint");

  const api::Entrypoint e{"model:lab-unet", "/srv/models/unet.pt2", "exported U-Net"};
  EXPECT_EQ(service_->AllowEntrypoint(kAlice, e).code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(service_->AllowEntrypoint(kRoot, {"model:lab-unet", "unet.pt2", ""}).field(),
            "command");
  ASSERT_TRUE(service_->AllowEntrypoint(kRoot, e).ok());
  auto job = service_->SubmitJob(kAlice, spec);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  auto stored = service_->GetJob(kAlice, job->id);
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  EXPECT_EQ(stored->spec.image, spec.image) << "kept through the store";
  EXPECT_EQ(stored->spec, spec);
}

TEST_F(ControlPlaneServiceTest, HeartbeatRegistersNodeDevicesAndProgress) {
  const api::Job job = Submit(kAlice);
  std::vector<api::WorkerStatus> workers = {
      Worker(job.id, 1, {{"step", 5}, {"rank", 1}}), Worker(job.id, 0, {{"step", 6}, {"rank", 0}}),
      Worker(4242, 0, {{"step", 1}}),  // a job the controller does not know
  };
  auto answer = service_->Heartbeat(HeartbeatJson("boxC", workers));
  ASSERT_TRUE(answer.ok()) << answer.status().ToString();
  auto resp = api::HeartbeatResponseFromJson(*answer);
  ASSERT_TRUE(resp.ok()) << resp.status().ToString();
  EXPECT_TRUE(resp->desired.empty());
  EXPECT_EQ(resp->heartbeat_interval_ms, 1000);

  auto nodes = service_->ListNodes(kAlice);
  ASSERT_TRUE(nodes.ok());
  ASSERT_EQ(nodes->size(), 1u);
  const api::Node& n = (*nodes)[0];
  EXPECT_EQ(n.name, "boxC");
  EXPECT_EQ(n.address, "10.0.0.7");
  EXPECT_EQ(n.health, "healthy");
  EXPECT_EQ(n.last_heartbeat_ms, clock_.NowUnixMillis());
  ASSERT_EQ(n.devices.size(), 1u);
  EXPECT_TRUE(n.devices[0].emulated);
  EXPECT_EQ(n.devices[0].uuid, "GPU-1");
  EXPECT_DOUBLE_EQ(n.devices[0].relative_speed, 0.25);
  EXPECT_EQ(service_->GetJob(kAlice, job.id)->progress, (api::Json{{"step", 6}, {"rank", 0}}))
      << "rank 0's progress is the job's";
}

TEST_F(ControlPlaneServiceTest, HeartbeatsBuildEachJobsMetricsHistoryAcrossAttempts) {
  const api::Job job = Submit(kAlice);
  const int64_t received = clock_.NowUnixMillis();
  // Rank 0 writes every figure with its own time; rank 1 a bare line.
  api::Json full = {{"step", 3},
                    {"loss", 0.75},
                    {"samples_per_s", 96.0},
                    {"compute_s", 0.2},
                    {"comm_s", 0.05},
                    {"bubble_s", 0.01},
                    {"peak_memory_bytes", 1 << 20},
                    {"predicted_peak_memory_bytes", 2 << 20},
                    {"ts_ms", 1234},
                    {"rank", 0},
                    {"d_loss", 0.1}};
  ASSERT_TRUE(service_
                  ->Heartbeat(HeartbeatJson(
                      "boxH", {Worker(job.id, 0, full), Worker(job.id, 1, {{"step", 3}}),
                               Worker(job.id, 2, {{"note", "no step"}})}))
                  .ok());
  // The next beat repeats rank 0's line (it did not move on) and a new
  // attempt's rank 1 starts over at step 2.
  clock_.Advance(std::chrono::milliseconds(1000));
  api::WorkerStatus resumed = Worker(job.id, 1, {{"step", 2}, {"loss", 0.9}});
  resumed.key.attempt = 2;
  ASSERT_TRUE(service_->Heartbeat(HeartbeatJson("boxH", {Worker(job.id, 0, full), resumed})).ok());

  api::MetricsQuery q;
  q.job_id = job.id;
  auto page = service_->JobMetrics(kAlice, q);
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  ASSERT_EQ(page->points.size(), 3u);
  const api::MetricPoint& r1a2 = page->points[0];
  EXPECT_EQ((std::tuple{r1a2.step, r1a2.attempt, r1a2.rank}), (std::tuple{2, 2, 1}));
  EXPECT_EQ(r1a2.ts_ms, received + 1000) << "no ts_ms: when tesserad received it";
  const api::MetricPoint& r0 = page->points[1];
  EXPECT_EQ((std::tuple{r0.step, r0.attempt, r0.rank}), (std::tuple{3, 1, 0}));
  EXPECT_EQ(r0.ts_ms, 1234);
  EXPECT_EQ(r0.loss, 0.75);
  EXPECT_EQ(r0.comm_s, 0.05);
  EXPECT_EQ(r0.peak_memory_bytes, 1 << 20);
  EXPECT_EQ(r0.predicted_peak_memory_bytes, 2 << 20);
  EXPECT_EQ(page->points[2].rank, 1);
  EXPECT_FALSE(page->points[2].loss.has_value());
  EXPECT_EQ(service_->GetJob(kAlice, job.id)->progress, full) << "the lowest rank's line";
}

TEST_F(ControlPlaneServiceTest, EveryProgressLineABeatBringsIsAPoint) {
  const api::Job job = Submit(kAlice);
  api::WorkerStatus w = Worker(job.id, 0, {{"step", 4}, {"loss", 0.4}});
  w.progress_lines = {{{"step", 2}, {"loss", 0.6}},
                      {{"step", 3}, {"loss", 0.5}},
                      {{"step", 4}, {"loss", 0.4}},
                      {{"note", "no step"}}};
  ASSERT_TRUE(service_->Heartbeat(HeartbeatJson("boxP", {w})).ok());
  api::MetricsQuery q;
  q.job_id = job.id;
  auto page = service_->JobMetrics(kAlice, q);
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  std::vector<std::pair<int64_t, double>> got;
  for (const api::MetricPoint& p : page->points) got.emplace_back(p.step, *p.loss);
  EXPECT_EQ(got, (std::vector<std::pair<int64_t, double>>{{2, 0.6}, {3, 0.5}, {4, 0.4}}));
}

TEST_F(ControlPlaneServiceTest, JobMetricsFollowJobVisibilityAndNameBadFields) {
  const api::Job job = Submit(kAlice);
  api::MetricsQuery q;
  q.job_id = job.id;
  EXPECT_TRUE(service_->JobMetrics(kAlice, q).ok());
  EXPECT_TRUE(service_->JobMetrics(kRoot, q).ok());
  EXPECT_EQ(service_->JobMetrics(kBob, q).status().code(), StatusCode::kPermissionDenied);
  api::MetricsQuery missing = q;
  missing.job_id = 999;
  EXPECT_EQ(service_->JobMetrics(kAlice, missing).status().code(), StatusCode::kNotFound);
  struct Case {
    std::function<void(api::MetricsQuery&)> change;
    const char* field;
  } cases[] = {
      {[](api::MetricsQuery& m) { m.limit = 0; }, "limit"},
      {[](api::MetricsQuery& m) { m.limit = api::kMaxMetricsPageSize + 1; }, "limit"},
      {[](api::MetricsQuery& m) { m.since = -1; }, "since"},
      {[](api::MetricsQuery& m) { m.rank = -2; }, "rank"},
      {[](api::MetricsQuery& m) { m.attempt = -1; }, "attempt"},
  };
  for (const Case& c : cases) {
    api::MetricsQuery bad = q;
    c.change(bad);
    Status st = service_->JobMetrics(kAlice, bad).status();
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << c.field;
    EXPECT_EQ(st.field(), c.field);
  }
}

TEST_F(ControlPlaneServiceTest, HeartbeatKeepsTheNodesDeclaredNetworkLink) {
  api::Json beat = HeartbeatJson("boxN");
  beat["network_bandwidth_bytes_per_s"] = 2.5e6;
  beat["network_latency_s"] = 0.005;
  ASSERT_TRUE(service_->Heartbeat(beat).ok());
  auto nodes = service_->ListNodes(kAlice);
  ASSERT_TRUE(nodes.ok());
  ASSERT_EQ(nodes->size(), 1u);
  EXPECT_DOUBLE_EQ((*nodes)[0].network_bandwidth_bytes_per_s, 2.5e6);
  EXPECT_DOUBLE_EQ((*nodes)[0].network_latency_s, 0.005);
  // A beat without it (an agent restarted without `network:`) forgets it.
  ASSERT_TRUE(service_->Heartbeat(HeartbeatJson("boxN")).ok());
  EXPECT_EQ(service_->ListNodes(kAlice)->at(0).network_bandwidth_bytes_per_s, 0);
}

TEST_F(ControlPlaneServiceTest, JobLogsServeTheNewestAttemptsReportedTail) {
  const api::Job job = Submit(kAlice);
  api::WorkerStatus old = Worker(job.id, 0, nullptr);
  old.log_tail = {"old attempt"};
  api::WorkerStatus w = Worker(job.id, 0, nullptr);
  w.key.attempt = 2;
  w.log_tail = {"line 1", "line 2", "line 3"};
  ASSERT_TRUE(service_->Heartbeat(HeartbeatJson("boxL", {w})).ok());
  ASSERT_TRUE(service_->Heartbeat(HeartbeatJson("boxM", {old})).ok());  // stale report

  auto logs = service_->JobLogs(kAlice, job.id, 0, 2);
  ASSERT_TRUE(logs.ok()) << logs.status().ToString();
  EXPECT_EQ(*logs, (std::vector<std::string>{"line 2", "line 3"}));
  EXPECT_EQ(service_->JobLogs(kBob, job.id, 0, 2).status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(service_->JobLogs(kAlice, job.id, 1, 2).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(service_->JobLogs(kAlice, job.id, 0, 0).status().field(), "tail");
  EXPECT_EQ(service_->JobLogs(kAlice, job.id, -1, 5).status().field(), "rank");
}

TEST_F(ControlPlaneServiceTest, JobLogsAreBoundedPerRankAndKeptForAWhileAfterTheJobEnds) {
  const api::Job job = Submit(kAlice);
  api::WorkerStatus w = Worker(job.id, 0, nullptr);
  for (int i = 0; i < 300; ++i) w.log_tail.push_back("line " + std::to_string(i));
  w.log_tail.back() = std::string(100'000, 'x');
  ASSERT_TRUE(service_->Heartbeat(HeartbeatJson("boxL", {w})).ok());
  auto logs = service_->JobLogs(kAlice, job.id, 0, 100);
  ASSERT_TRUE(logs.ok()) << logs.status().ToString();
  ASSERT_EQ(logs->size(), 100u);
  EXPECT_EQ(logs->front(), "line 200");
  EXPECT_EQ(logs->back().size(), 4096u) << "a huge line is cut";

  // The job ends: its page still shows the logs for a while (a sweep sees it
  // ended), and a sweep after the retention drops them.
  ASSERT_TRUE(service_->CancelJob(kAlice, job.id).ok());
  clock_.Advance(std::chrono::seconds(10));
  ASSERT_TRUE(service_->Heartbeat(HeartbeatJson("boxL")).ok());
  EXPECT_TRUE(service_->JobLogs(kAlice, job.id, 0, 5).ok());
  clock_.Advance(std::chrono::minutes(14));
  ASSERT_TRUE(service_->Heartbeat(HeartbeatJson("boxL")).ok());
  EXPECT_TRUE(service_->JobLogs(kAlice, job.id, 0, 5).ok()) << "ended 14 min ago: kept";
  clock_.Advance(std::chrono::minutes(2));
  ASSERT_TRUE(service_->Heartbeat(HeartbeatJson("boxL")).ok());
  EXPECT_EQ(service_->JobLogs(kAlice, job.id, 0, 5).status().code(), StatusCode::kNotFound);
}

TEST_F(ControlPlaneServiceTest, OnlyTheLatestEndedJobsKeepTheirLogs) {
  constexpr int kJobs = 40;  // more than the service keeps
  std::vector<api::JobId> ids;
  for (int i = 0; i < kJobs; ++i) {
    const api::Job job = Submit(kAlice);
    api::WorkerStatus w = Worker(job.id, 0, nullptr);
    w.log_tail = {"job " + std::to_string(i)};
    ASSERT_TRUE(service_->Heartbeat(HeartbeatJson("boxL", {w})).ok());
    ASSERT_TRUE(service_->CancelJob(kAlice, job.id).ok());
    clock_.Advance(std::chrono::seconds(6));  // one sweep per job: each ends at its own time
    ASSERT_TRUE(service_->Heartbeat(HeartbeatJson("boxL")).ok());
    ids.push_back(job.id);
  }
  constexpr int kKept = 32;  // the service's bound on ended jobs with logs
  for (int i = 0; i < kJobs; ++i) {
    EXPECT_EQ(service_->JobLogs(kAlice, ids[i], 0, 5).ok(), i >= kJobs - kKept)
        << "job " << i << " of " << kJobs << " (the latest " << kKept << " keep theirs)";
  }
}

TEST_F(ControlPlaneServiceTest, ABeatWithAnUnchangedInventoryKeepsTheStoredDevices) {
  api::Json full = HeartbeatJson("boxU");
  ASSERT_FALSE(full["devices"].empty());
  auto first = service_->Heartbeat(full);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ((*first)["accepts_unchanged_inventory"], true);
  api::Json light = full;
  light["devices"] = api::Json::array();
  light["links"] = api::Json::array();
  light["inventory_unchanged"] = true;
  auto second = service_->Heartbeat(light);
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE(second->contains("send_inventory"));
  EXPECT_EQ(service_->ListNodes(kAlice)->at(0).devices.size(), full["devices"].size());
  // A node the controller does not know is asked for its inventory.
  light["node"] = "boxNew";
  auto unknown = service_->Heartbeat(light);
  ASSERT_TRUE(unknown.ok());
  EXPECT_EQ((*unknown)["send_inventory"], true);
}

// A beat writes the node's row only when it changes something durable;
// between writes the node's newest beat time lives in memory (ListNodes).
TEST_F(ControlPlaneServiceTest, AHeartbeatThatChangesNothingWritesNothing) {
  using std::chrono::milliseconds;
  struct Case {
    std::string name;
    std::function<void(api::Json*)> change;  // the second beat, from the first
    milliseconds later;                      // between the beats
    bool writes;
  };
  const std::vector<Case> cases = {
      {"the same beat", [](api::Json*) {}, milliseconds(1000), false},
      {"inventory_unchanged",
       [](api::Json* b) {
         (*b)["devices"] = api::Json::array();
         (*b)["inventory_unchanged"] = true;
       },
       milliseconds(1000), false},
      {"workers without progress",
       [](api::Json* b) {
         (*b)["workers"] = api::Json::array({api::ToJson(Worker(7, 0, nullptr))});
       },
       milliseconds(1000), false},
      {"a new address", [](api::Json* b) { (*b)["address"] = "10.0.0.8"; }, milliseconds(1000),
       true},
      {"a device changed", [](api::Json* b) { (*b)["devices"][0]["memory_bytes"] = 8'000'000'000; },
       milliseconds(1000), true},
      {"a network link declared", [](api::Json* b) { (*b)["network_bandwidth_bytes_per_s"] = 1e9; },
       milliseconds(1000), true},
      {"the stored time too old", [](api::Json*) {}, milliseconds(30'000), true},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    FaultyStore counting(store_.get());  // counts the writes
    ControlPlaneService service(&counting, &clock_);
    const std::string node = "box" + std::to_string(i);
    const api::Json first = HeartbeatJson(node);
    ASSERT_TRUE(service.Heartbeat(first).ok()) << c.name;
    const int64_t first_ms = clock_.NowUnixMillis();
    const int64_t writes = counting.writes_seen();
    clock_.Advance(c.later);
    api::Json second = first;
    c.change(&second);
    auto answer = service.Heartbeat(second);
    ASSERT_TRUE(answer.ok()) << c.name << ": " << answer.status().ToString();
    EXPECT_EQ(counting.writes_seen() - writes, c.writes ? 1 : 0) << c.name;
    auto stored = store_->GetNode(node);
    ASSERT_TRUE(stored.ok()) << c.name;
    EXPECT_EQ(stored->last_heartbeat_ms, c.writes ? clock_.NowUnixMillis() : first_ms) << c.name;
    EXPECT_EQ(stored->devices.size(), 1u) << c.name;
    // Whether written or not, the node shows the newest beat's time.
    auto listed = service.ListNodes(kRoot);
    ASSERT_TRUE(listed.ok()) << c.name;
    auto it = std::find_if(listed->begin(), listed->end(),
                           [&](const api::Node& n) { return n.name == node; });
    ASSERT_NE(it, listed->end()) << c.name;
    EXPECT_EQ(it->last_heartbeat_ms, clock_.NowUnixMillis()) << c.name;
  }
}

TEST_F(ControlPlaneServiceTest, NodeRowsAreWrittenAgainAfterARestartOrAFailedWrite) {
  FaultyStore counting(store_.get());
  api::Json full = HeartbeatJson("boxR");
  api::Json light = full;
  light["devices"] = api::Json::array();
  light["inventory_unchanged"] = true;
  {
    ControlPlaneService service(&counting, &clock_);
    ASSERT_TRUE(service.Heartbeat(full).ok());
  }
  // A restarted service has no memory of the row: the node's first beat
  // rewrites it (its time), with the stored inventory.
  clock_.Advance(std::chrono::seconds(5));
  ControlPlaneService restarted(&counting, &clock_);
  int64_t writes = counting.writes_seen();
  ASSERT_TRUE(restarted.Heartbeat(light).ok());
  EXPECT_EQ(counting.writes_seen() - writes, 1);
  EXPECT_EQ(store_->GetNode("boxR")->last_heartbeat_ms, clock_.NowUnixMillis());
  EXPECT_EQ(store_->GetNode("boxR")->devices.size(), 1u);
  writes = counting.writes_seen();
  ASSERT_TRUE(restarted.Heartbeat(light).ok());
  EXPECT_EQ(counting.writes_seen() - writes, 0);

  // A failed write is not taken as written: the next beat writes again.
  counting.ArmWriteFault(1, Unavailable("disk busy"));
  ASSERT_EQ(restarted.Heartbeat(HeartbeatJson("boxR")).ok(), true) << "nothing to write yet";
  full["address"] = "10.0.0.9";
  EXPECT_EQ(restarted.Heartbeat(full).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(store_->GetNode("boxR")->address, "10.0.0.7");
  writes = counting.writes_seen();
  ASSERT_TRUE(restarted.Heartbeat(full).ok());
  EXPECT_EQ(counting.writes_seen() - writes, 1);
  EXPECT_EQ(store_->GetNode("boxR")->address, "10.0.0.9");
}

TEST_F(ControlPlaneServiceTest, HeartbeatRefusesMalformedInput) {
  EXPECT_EQ(service_->Heartbeat(api::Json{{"node", 5}}).status().code(),
            StatusCode::kInvalidArgument);
  auto unnamed = service_->Heartbeat(api::Json::object());
  EXPECT_EQ(unnamed.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(service_->ListNodes(kRoot)->empty());
}

TEST_F(ControlPlaneServiceTest, DesiredWorkersHookFillsTheAnswer) {
  ControlPlaneOptions options;
  std::string asked_for;
  options.desired_workers = [&](const api::HeartbeatRequest& hb) {
    asked_for = hb.node;
    api::WorkerLaunch launch;
    launch.key = {7, 1, 0};
    launch.argv = {"/usr/bin/tessera-worker"};
    return Result<std::vector<api::WorkerLaunch>>(std::vector<api::WorkerLaunch>{launch});
  };
  Open(std::move(options));
  auto answer = service_->Heartbeat(HeartbeatJson("boxD"));
  ASSERT_TRUE(answer.ok());
  auto resp = api::HeartbeatResponseFromJson(*answer);
  ASSERT_TRUE(resp.ok());
  ASSERT_EQ(resp->desired.size(), 1u);
  EXPECT_EQ(resp->desired[0].key.job_id, 7);
  EXPECT_EQ(asked_for, "boxD");
}

TEST_F(ControlPlaneServiceTest, PreviewPlanUsesThePlannerHookWhenSet) {
  auto none = service_->PreviewPlan(kAlice, Spec());
  EXPECT_EQ(none.status().code(), StatusCode::kUnimplemented);
  EXPECT_EQ(none.status().message(), "planner not wired yet");

  ControlPlaneOptions options;
  options.planner = [](const api::JobSpec& spec, const std::vector<api::Node>& nodes) {
    return Result<api::Json>(api::Json{{"nodes", nodes.size()}, {"batch", spec.global_batch}});
  };
  Open(std::move(options));
  ASSERT_TRUE(service_->Heartbeat(HeartbeatJson("boxE")).ok());
  auto plan = service_->PreviewPlan(kAlice, Spec());
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(*plan, (api::Json{{"nodes", 1}, {"batch", 32}}));
}

TEST_F(ControlPlaneServiceTest, MetricsListJobsByStateAndCommitHistogram) {
  Submit(kAlice);
  const api::Job cancelled = Submit(kBob);
  ASSERT_TRUE(service_->CancelJob(kBob, cancelled.id).ok());
  std::string text;
  service_->AppendMetrics(&text);
  EXPECT_NE(text.find("# TYPE tessera_jobs gauge\n"), std::string::npos) << text;
  EXPECT_NE(text.find("tessera_jobs{state=\"pending\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("tessera_jobs{state=\"cancelled\"} 1\n"), std::string::npos);
  for (api::JobState s : kAllJobStates) {
    EXPECT_NE(text.find("tessera_jobs{state=\"" + std::string(api::JobStateName(s)) + "\"}"),
              std::string::npos);
  }
  EXPECT_NE(text.find("# HELP tessera_store_commit_seconds "), std::string::npos);
  EXPECT_NE(text.find("# TYPE tessera_store_commit_seconds histogram\n"), std::string::npos);
  EXPECT_NE(text.find("tessera_store_commit_seconds_bucket{le=\"0.001\"} "), std::string::npos);
  const uint64_t commits = store_->Stats().commits;
  EXPECT_GE(commits, 3u);
  EXPECT_NE(text.find("tessera_store_commit_seconds_bucket{le=\"+Inf\"} " +
                      std::to_string(commits) + "\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("tessera_store_commit_seconds_count " + std::to_string(commits) + "\n"),
            std::string::npos);
  EXPECT_NE(text.find("tessera_store_commit_seconds_sum "), std::string::npos);
}

TEST_F(ControlPlaneServiceTest, ApplyJobEventWalksTheLifeCycleAndCountsAttempts) {
  const api::Job job = Submit(kAlice);  // max_attempts 2
  const api::Json plan = {{"layout", "data"}};
  ASSERT_TRUE(service_->ApplyJobEvent(job.id, JobEvent::kPlan, "", plan).ok());
  auto started = service_->ApplyJobEvent(job.id, JobEvent::kLaunch, "");
  ASSERT_TRUE(started.ok());
  EXPECT_EQ(started->attempt, 1);
  EXPECT_EQ(store_->GetAttempt(job.id, 1)->plan, plan);
  ASSERT_TRUE(service_->ApplyJobEvent(job.id, JobEvent::kAllRunning, "").ok());
  ASSERT_TRUE(service_->ApplyJobEvent(job.id, JobEvent::kNodeLost, "boxA died").ok());
  ASSERT_TRUE(service_->ApplyJobEvent(job.id, JobEvent::kRetry, "").ok());
  ASSERT_TRUE(service_->ApplyJobEvent(job.id, JobEvent::kPlan, "", plan).ok());
  ASSERT_TRUE(service_->ApplyJobEvent(job.id, JobEvent::kLaunch, "").ok());
  ASSERT_TRUE(service_->ApplyJobEvent(job.id, JobEvent::kRankFailed, "rank 1 exited 1").ok());
  auto failed = service_->ApplyJobEvent(job.id, JobEvent::kRetry, "rank 1 exited 1");
  ASSERT_TRUE(failed.ok());
  EXPECT_EQ(failed->state, JobState::kFailed);
  EXPECT_NE(failed->reason.find("attempts exhausted"), std::string::npos) << failed->reason;
  EXPECT_EQ(service_->ApplyJobEvent(job.id, JobEvent::kCancel, "").status().code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(store_->ListAttempts(job.id)->size(), 2u);
  EXPECT_EQ(service_->ListEvents(kAlice, job.id, 0, 100)->size(), 10u);
}

TEST_F(ControlPlaneServiceTest, ReadyFollowsStoreAndStopping) {
  EXPECT_TRUE(service_->Ready().ok());
  service_->SetStopping();
  EXPECT_EQ(service_->Ready().code(), StatusCode::kUnavailable);
  Open();
  store_->Close();
  EXPECT_EQ(service_->Ready().code(), StatusCode::kUnavailable);
}

TEST_F(ControlPlaneServiceTest, StoreWriteFailuresSurfaceAsTheirStatus) {
  FaultyStore faulty(store_.get());
  ControlPlaneService service(&faulty, &clock_);
  faulty.ArmWriteFault(1, Unavailable("disk busy"));
  auto job = service.SubmitJob(kAlice, Spec());
  EXPECT_EQ(job.status().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(service.ListJobs(kRoot, {})->jobs.empty());

  auto ok = service.SubmitJob(kAlice, Spec());
  ASSERT_TRUE(ok.ok());
  faulty.ArmWriteFault(1, Internal("io error"));
  EXPECT_EQ(service.CancelJob(kAlice, ok->id).status().code(), StatusCode::kInternal);
  EXPECT_EQ(store_->GetJob(ok->id)->state, JobState::kPending);
  faulty.ArmReadFault(1, Unavailable("reader lost"));
  EXPECT_EQ(service.GetJob(kAlice, ok->id).status().code(), StatusCode::kUnavailable);
  faulty.ArmWriteFault(1, Unavailable("disk busy"));
  EXPECT_EQ(service.Heartbeat(HeartbeatJson("boxF")).status().code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace tessera::daemon

namespace tessera::daemon {
namespace {

TEST(ControlPlaneWaitingTest, PendingJobsSayWhyTheyWait) {
  testing::TempDir dir;
  auto store = SqliteStore::Open(dir.File("tessera.db"));
  ASSERT_TRUE(store.ok());
  FakeClock clock;
  ControlPlaneOptions options;
  options.waiting_reason = [](api::JobId id) {
    return id == 1 ? std::string("no feasible plan on 3 free devices") : std::string();
  };
  ControlPlaneService service(store->get(), &clock, options);
  auto waiting = service.SubmitJob(kAlice, Spec());
  auto other = service.SubmitJob(kAlice, Spec());
  ASSERT_TRUE(waiting.ok() && other.ok());
  EXPECT_EQ(service.GetJob(kAlice, waiting->id)->reason,
            "waiting: no feasible plan on 3 free devices");
  EXPECT_EQ(service.GetJob(kAlice, other->id)->reason, "submitted") << "no reason known";
  auto page = service.ListJobs(kAlice, api::JobQuery{});
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->jobs[0].reason, "waiting: no feasible plan on 3 free devices");
  // Once it left pending, its own event's reason is shown again.
  ASSERT_TRUE(service.ApplyJobEvent(waiting->id, JobEvent::kCancel, "cancelled by alice").ok());
  EXPECT_EQ(service.GetJob(kAlice, waiting->id)->reason, "cancelled by alice");
}

}  // namespace
}  // namespace tessera::daemon
