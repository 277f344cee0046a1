// ControlPlaneService against a real SqliteStore on a temporary file.
#include "daemon/control_plane_service.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <utility>

#include "common/fake_clock.h"
#include "daemon/controller/job_admission.h"
#include "daemon/store/faulty_store.h"
#include "daemon/store/sqlite_store.h"
#include "tests/daemon/control_plane_service_fixture.h"
#include "tests/daemon/temp_dir.h"

namespace tessera::daemon {
namespace {

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

// The submission asks the store whose job a checkpoint folder belongs to:
// alice runs an infer job from her train job's checkpoints; bob may not.
TEST_F(ControlPlaneServiceTest, AnInferJobMayReadItsOwnersTrainJobsCheckpoints) {
  std::filesystem::create_directories(dir_.File("data/alice/out"));
  std::filesystem::create_directories(dir_.File("data/bob/out"));
  std::filesystem::create_directories(dir_.File("data/scans"));
  const JobAdmission admission(
      DataRoots({{dir_.File("data/scans"), false}, {dir_.File("data/{user}"), true}}), {},
      dir_.File("ckpt"));
  ControlPlaneOptions options;
  options.admission = &admission;
  Open(std::move(options));
  api::JobSpec train = Spec();
  train.dataset = dir_.File("data/scans");
  auto trained = service_->SubmitJob(kAlice, train);
  ASSERT_TRUE(trained.ok()) << trained.status().ToString();
  const std::string folder = dir_.File("ckpt/job-" + std::to_string(trained->id));
  std::filesystem::create_directories(folder + "/step-100");

  for (const auto& [who, admitted] : {std::pair{kAlice, true}, std::pair{kBob, false}}) {
    SCOPED_TRACE(who.user);
    api::JobSpec infer = Spec();
    infer.kind = api::JobKind::kInfer;
    infer.steps = 0;
    infer.dataset = dir_.File("data/scans");
    infer.output = dir_.File("data/" + who.user + "/out");
    infer.checkpoint = folder;
    auto job = service_->SubmitJob(who, infer);
    if (admitted) {
      EXPECT_TRUE(job.ok()) << job.status().ToString();
    } else {
      EXPECT_EQ(job.status().field(), "checkpoint") << job.status().ToString();
    }
  }
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
