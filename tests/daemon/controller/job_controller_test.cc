// JobController against a real SQLite store on a temp file, a FakeClock and
// heartbeats built by the test (the agents' side of the protocol).
#include "daemon/controller/job_controller.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <set>
#include <thread>

#include "common/fake_clock.h"
#include "daemon/controller/profile_cache.h"
#include "daemon/store/sqlite_store.h"
#include "scheduler/model_profile.h"

namespace tessera::daemon {
namespace {

using api::JobState;
using std::chrono::milliseconds;

// Builds a node with `count` emulated devices of one kind.
api::Node MakeNode(const std::string& name, int count, double tflops, int64_t memory_gb = 16) {
  api::Node n;
  n.name = name;
  n.address = "127.0.0.1";
  for (int i = 0; i < count; ++i) {
    api::Device d;
    d.node = name;
    d.index = i;
    d.name = "emulated-" + std::to_string(static_cast<int>(tflops)) + "tf";
    d.type = "cuda";
    d.memory_bytes = memory_gb << 30;
    d.measured_tflops = tflops;
    d.mem_bandwidth_gbps = 500;
    d.emulated = true;
    n.devices.push_back(d);
  }
  return n;
}

api::JobSpec CmdSpec(int devices, int64_t max_attempts = 3, int64_t priority = 0) {
  api::JobSpec s;
  s.name = "test-job";
  s.entrypoint = "cmd:sleeper";
  s.global_batch = 12;
  s.steps = 10;
  s.min_devices = devices;
  s.max_devices = devices;
  s.max_attempts = max_attempts;
  s.priority = priority;
  return s;
}

class JobControllerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("tessera-jc-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    auto store = SqliteStore::Open((dir_ / "t.db").string());
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = *std::move(store);
    ASSERT_TRUE(store_->PutEntrypoint({"cmd:sleeper", "/bin/sleep", "test"}).ok());
    options_.launch.worker_binary = "/usr/bin/tessera-worker";
    options_.launch.checkpoint_root = "/ckpt";
    controller_ = std::make_unique<JobController>(store_.get(), &clock_, options_);
    ASSERT_TRUE(controller_->Recover().ok());
  }
  void TearDown() override {
    controller_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  api::JobId Submit(const api::JobSpec& spec) {
    NewJob j{"alice", spec, clock_.NowUnixMillis()};
    auto job = store_->InsertJob(j);
    EXPECT_TRUE(job.ok()) << job.status().ToString();
    return job->id;
  }

  // One heartbeat from `node`, reporting `workers`; returns the desired set.
  api::HeartbeatResponse Beat(const api::Node& node, std::vector<api::WorkerStatus> workers = {}) {
    EXPECT_TRUE(store_->UpsertNode(node).ok());
    api::HeartbeatRequest r;
    r.node = node.name;
    r.address = node.address;
    r.devices = node.devices;
    r.workers = std::move(workers);
    return controller_->OnHeartbeat(r);
  }

  // The agent's side: report every desired worker as running (or exited).
  std::vector<api::WorkerStatus> Running(const api::HeartbeatResponse& desired) {
    std::vector<api::WorkerStatus> out;
    for (const auto& l : desired.desired) {
      out.push_back({l.key, 1000 + l.key.rank, api::WorkerState::kRunning, 0, nullptr, {}});
    }
    return out;
  }
  std::vector<api::WorkerStatus> Exited(const api::HeartbeatResponse& desired, int code) {
    auto out = Running(desired);
    for (auto& w : out) {
      w.state = api::WorkerState::kExited;
      w.exit_code = code;
    }
    return out;
  }

  JobState StateOf(api::JobId id) { return store_->GetJob(id)->state; }

  std::vector<std::string> EventTrail(api::JobId id) {
    std::vector<std::string> out;
    auto events = store_->ListEvents(id, 0, 1000);
    EXPECT_TRUE(events.ok());
    if (!events.ok()) return out;
    for (const auto& e : events.value()) out.push_back(e.to_state);
    return out;
  }

  std::filesystem::path dir_;
  FakeClock clock_;
  JobControllerOptions options_;
  std::unique_ptr<SqliteStore> store_;
  std::unique_ptr<JobController> controller_;
};

TEST_F(JobControllerTest, PlacesGangAndHandsEachNodeItsRanks) {
  api::Node a = MakeNode("a", 2, 20), b = MakeNode("b", 1, 20);
  Beat(a);
  Beat(b);
  api::JobId id = Submit(CmdSpec(3));
  ASSERT_TRUE(controller_->Tick().ok());
  EXPECT_EQ(StateOf(id), JobState::kStarting);

  auto da = Beat(a), db = Beat(b);
  ASSERT_EQ(da.desired.size() + db.desired.size(), 3u);
  // The torchrun contract, consistent across ranks.
  std::set<std::string> ranks;
  for (const auto* d : {&da, &db}) {
    for (const auto& l : d->desired) {
      ranks.insert(l.env.at("RANK"));
      EXPECT_EQ(l.env.at("WORLD_SIZE"), "3");
      EXPECT_EQ(l.env.at("MASTER_ADDR"), "127.0.0.1");
      EXPECT_EQ(l.env.at("TESSERA_JOB_ID"), std::to_string(id));
      EXPECT_EQ(l.env.at("TESSERA_ATTEMPT"), "1");
      EXPECT_EQ(l.env.at("TESSERA_CHECKPOINT_DIR"), "/ckpt/job-" + std::to_string(id));
      EXPECT_EQ(l.argv.front(), "/bin/sleep");
      EXPECT_EQ(l.plan["layout"], "data");
    }
  }
  EXPECT_EQ(ranks, (std::set<std::string>{"0", "1", "2"}));

  Beat(a, Running(da));
  Beat(b, Running(db));
  ASSERT_TRUE(controller_->Tick().ok());
  EXPECT_EQ(StateOf(id), JobState::kRunning);

  Beat(a, Exited(da, 0));
  Beat(b, Exited(db, 0));
  ASSERT_TRUE(controller_->Tick().ok());
  EXPECT_EQ(StateOf(id), JobState::kSucceeded);
  EXPECT_EQ(EventTrail(id),
            (std::vector<std::string>{"pending", "planned", "starting", "running", "succeeded"}));
  // A finished job is no longer desired anywhere.
  EXPECT_TRUE(Beat(a).desired.empty());
}

TEST_F(JobControllerTest, DeadNodeTriggersReplanOnSurvivors) {
  api::Node a = MakeNode("a", 1, 20), b = MakeNode("b", 1, 20), c = MakeNode("c", 1, 20);
  for (auto* n : {&a, &b, &c}) Beat(*n);
  api::JobSpec spec = CmdSpec(2);
  spec.min_devices = 2;
  spec.max_devices = 2;
  api::JobId id = Submit(spec);
  ASSERT_TRUE(controller_->Tick().ok());
  std::map<std::string, api::HeartbeatResponse> desired;
  for (auto* n : {&a, &b, &c}) desired[n->name] = Beat(*n);
  for (auto* n : {&a, &b, &c}) Beat(*n, Running(desired[n->name]));
  ASSERT_TRUE(controller_->Tick().ok());
  ASSERT_EQ(StateOf(id), JobState::kRunning);

  // Find a node holding a rank and let it fall silent; the others keep beating.
  std::string victim;
  for (auto& [name, d] : desired) {
    if (!d.desired.empty()) victim = name;
  }
  ASSERT_FALSE(victim.empty());
  // Survivors act as agents do: they run what they were last told to run.
  std::map<std::string, std::vector<api::WorkerStatus>> runs;
  for (auto* n : {&a, &b, &c}) runs[n->name] = Running(desired[n->name]);
  for (int i = 0; i < 40 && store_->GetJob(id)->attempt < 2; ++i) {
    clock_.Advance(milliseconds(250));
    for (auto* n : {&a, &b, &c}) {
      if (n->name != victim) runs[n->name] = Running(Beat(*n, runs[n->name]));
    }
    ASSERT_TRUE(controller_->Tick().ok());
  }
  EXPECT_EQ(store_->GetNode(victim)->health, "dead");
  // Survivors were told to stop the old attempt, the job was re-planned on
  // the two live nodes as attempt 2.
  api::Job job = *store_->GetJob(id);
  EXPECT_EQ(job.attempt, 2);
  EXPECT_EQ(job.state, JobState::kStarting);
  for (auto* n : {&a, &b, &c}) {
    if (n->name == victim) continue;
    auto d = Beat(*n);
    ASSERT_EQ(d.desired.size(), 1u) << n->name;
    EXPECT_EQ(d.desired[0].key.attempt, 2);
  }
  auto events = store_->ListEvents(id, 0, 100);
  ASSERT_TRUE(events.ok());
  bool saw_lost = false;
  for (const auto& e : events.value()) {
    if (e.to_state == "recovering") {
      saw_lost = e.reason.find("node " + victim + " lost") != std::string::npos;
    }
  }
  EXPECT_TRUE(saw_lost);
}

// A beat that changes nothing durable writes no node row (the service),
// so a node that comes back gets "healthy" in the store from the
// controller, which records every health change it sees.
TEST_F(JobControllerTest, ANodeThatBeatsAgainIsRecordedHealthyWithoutARowWrite) {
  const api::Node n = MakeNode("back", 1, 10);
  Beat(n);
  ASSERT_TRUE(controller_->Tick().ok());
  ASSERT_EQ(store_->GetNode("back")->health, "healthy");
  const std::vector<std::pair<milliseconds, std::string>> silence = {
      {milliseconds(2500), "suspect"}, {milliseconds(4000), "dead"}};
  for (const auto& [quiet, health] : silence) {
    clock_.Advance(quiet);
    ASSERT_TRUE(controller_->Tick().ok());
    EXPECT_EQ(store_->GetNode("back")->health, health) << quiet.count();
    // The node beats again; only the controller hears it (no row write).
    api::HeartbeatRequest r;
    r.node = n.name;
    r.address = n.address;
    r.inventory_unchanged = true;
    controller_->OnHeartbeat(r);
    ASSERT_TRUE(controller_->Tick().ok());
    EXPECT_EQ(store_->GetNode("back")->health, "healthy") << quiet.count();
  }
}

TEST_F(JobControllerTest, FailedRankRetriesThenGivesUpAfterMaxAttempts) {
  api::Node a = MakeNode("a", 1, 20);
  Beat(a);
  api::JobId id = Submit(CmdSpec(1, /*max_attempts=*/2));
  for (int attempt = 1; attempt <= 2; ++attempt) {
    ASSERT_TRUE(controller_->Tick().ok());
    auto d = Beat(a);
    ASSERT_EQ(d.desired.size(), 1u) << "attempt " << attempt;
    EXPECT_EQ(d.desired[0].key.attempt, attempt);
    Beat(a, Exited(d, 3));
    ASSERT_TRUE(controller_->Tick().ok());
    // Recovering (the first retry goes at once, within the same tick).
    const auto trail = EventTrail(id);
    EXPECT_EQ(std::count(trail.begin(), trail.end(), "recovering"), attempt);
    clock_.Advance(milliseconds(options_.max_retry_backoff_ms + 1));
    Beat(a);
  }
  ASSERT_TRUE(controller_->Tick().ok());
  api::Job job = *store_->GetJob(id);
  EXPECT_EQ(job.state, JobState::kFailed);
  EXPECT_NE(job.reason.find("gave up after 2 attempts"), std::string::npos) << job.reason;
  EXPECT_NE(job.reason.find("exited with code 3"), std::string::npos) << job.reason;
}

TEST_F(JobControllerTest, AFailedRanksReasonNamesTheErrorOfItsLastLogLines) {
  api::Node a = MakeNode("a", 2, 20);
  Beat(a);
  api::JobId id = Submit(CmdSpec(2, /*max_attempts=*/3));
  ASSERT_TRUE(controller_->Tick().ok());
  auto d = Beat(a);
  ASSERT_EQ(d.desired.size(), 2u);
  // Rank 1 crashed with a traceback; rank 0 then lost its peer (exit 75).
  auto workers = Exited(d, 1);
  for (auto& w : workers) {
    if (w.key.rank == 0) {
      w.exit_code = api::kPeerLostExitCode;
      w.log_tail = {"RuntimeError: Connection closed by peer"};
    } else {
      w.log_tail = {
          "Traceback (most recent call last):", "  File \"/lab/train.py\", line 9, in main",
          "    state = torch.load(\"snapshot.pt\")", "EOFError: Ran out of input"};
    }
  }
  Beat(a, workers);
  ASSERT_TRUE(controller_->Tick().ok());
  std::string recovery;  // (the first retry follows within the same tick)
  auto events = store_->ListEvents(id, 0, 100);
  ASSERT_TRUE(events.ok());
  for (const api::Event& e : *events) {
    if (e.to_state == "recovering") recovery = e.reason;
  }
  EXPECT_EQ(recovery,
            "rank 1 on a exited with code 1: EOFError: Ran out of input, at train.py:9 in main: "
            "state = torch.load(\"snapshot.pt\")");
}

// Attempts 1 and 2 fail as the case says; the job either stops after attempt 2
// as a crash loop or launches attempt 3.
TEST_F(JobControllerTest, CrashLoopsStopTheJobWithTheError) {
  struct AttemptEnd {
    std::vector<std::string> log_tail;
    bool progress = false;
    int64_t ran_ms = 100;
  };
  struct Case {
    const char* name;
    AttemptEnd first, second;
    bool stops;
  };
  const std::vector<std::string> eof = {
      "Traceback (most recent call last):", "  File \"/lab/train.py\", line 9, in main",
      "    torch.load(p)", "EOFError: Ran out of input"};
  const std::vector<std::string> key = {
      "Traceback (most recent call last):", "  File \"/lab/train.py\", line 12, in main",
      "    cfg[k]", "KeyError: 'lr'"};
  const int64_t window = options_.crash_loop_window_ms;
  const std::vector<Case> cases = {
      {"same error twice before any progress", {eof}, {eof}, true},
      {"different errors", {key}, {eof}, false},
      {"no error named (exit code only)", {{"bye"}}, {{"bye"}}, false},
      {"the second attempt trained first", {eof}, {eof, /*progress=*/true}, false},
      {"the first attempt trained first", {eof, /*progress=*/true}, {eof}, false},
      {"the second attempt ran longer than the window", {eof}, {eof, false, window + 1000}, false},
  };
  for (const Case& c : cases) {
    TearDown();  // a fresh store and controller for each case
    SetUp();
    api::Node a = MakeNode("a", 1, 20);
    Beat(a);
    api::JobId id = Submit(CmdSpec(1, /*max_attempts=*/5));
    int attempt = 0;
    for (const AttemptEnd& end : {c.first, c.second}) {
      ++attempt;
      ASSERT_TRUE(controller_->Tick().ok()) << c.name;
      auto d = Beat(a);
      ASSERT_EQ(d.desired.size(), 1u) << c.name << ", attempt " << attempt;
      ASSERT_EQ(d.desired[0].key.attempt, attempt) << c.name;
      auto running = Running(d);
      if (end.progress) running[0].progress = api::Json{{"step", 3}};
      Beat(a, running);
      ASSERT_TRUE(controller_->Tick().ok()) << c.name;
      clock_.Advance(milliseconds(end.ran_ms));
      auto exited = Exited(d, 1);
      exited[0].progress = running[0].progress;
      exited[0].log_tail = end.log_tail;
      Beat(a, exited);
      ASSERT_TRUE(controller_->Tick().ok()) << c.name;
      clock_.Advance(milliseconds(options_.max_retry_backoff_ms + 1));
      Beat(a);
    }
    ASSERT_TRUE(controller_->Tick().ok()) << c.name;
    api::Job job = *store_->GetJob(id);
    if (c.stops) {
      EXPECT_EQ(job.state, JobState::kFailed) << c.name;
      EXPECT_EQ(job.attempt, 2) << c.name;
      EXPECT_EQ(job.reason,
                "crash loop: attempts 1 and 2 failed the same way before any progress: rank 0 "
                "on a exited with code 1: EOFError: Ran out of input, at train.py:9 in main: "
                "torch.load(p)")
          << c.name;
    } else {
      EXPECT_NE(job.state, JobState::kFailed) << c.name << ": " << job.reason;
      EXPECT_EQ(Beat(a).desired.size(), 1u) << c.name << ": attempt 3 is launched";
      EXPECT_EQ(store_->GetJob(id)->attempt, 3) << c.name;
    }
  }
}

TEST_F(JobControllerTest, PriorityThenFifoAndBackfillNeverDelaysHead) {
  api::Node a = MakeNode("a", 2, 20);
  Beat(a);
  api::JobId running = Submit(CmdSpec(1));
  ASSERT_TRUE(controller_->Tick().ok());
  ASSERT_EQ(StateOf(running), JobState::kStarting);
  // One device free. The head needs two; a one-device job behind it would
  // take the device the head needs when `running` ends, so it must wait.
  api::JobId head = Submit(CmdSpec(2, 3, /*priority=*/5));
  api::JobId small = Submit(CmdSpec(1));
  ASSERT_TRUE(controller_->Tick().ok());
  EXPECT_EQ(StateOf(head), JobState::kPending);
  EXPECT_EQ(StateOf(small), JobState::kPending);
  EXPECT_NE(controller_->WaitingReason(small).find("waiting behind job " + std::to_string(head)),
            std::string::npos)
      << controller_->WaitingReason(small);
}

TEST_F(JobControllerTest, BackfillAllowedWhenHeadStillFits) {
  api::Node a = MakeNode("a", 3, 20);
  Beat(a);
  api::JobId running = Submit(CmdSpec(2));
  ASSERT_TRUE(controller_->Tick().ok());
  ASSERT_EQ(StateOf(running), JobState::kStarting);
  // Head needs 3 devices (only 1 free). A one-device job would hold a
  // device the head needs once `running` ends: refused. Shrink the cluster
  // question: a 4th device on another node makes the backfill harmless.
  api::Node b = MakeNode("b", 1, 20);
  Beat(b);
  api::JobId head = Submit(CmdSpec(3, 3, 5));
  api::JobId small = Submit(CmdSpec(1));
  ASSERT_TRUE(controller_->Tick().ok());
  // Head (3) fits on the 4 devices minus small's 1 once `running` ends.
  EXPECT_EQ(StateOf(small), JobState::kStarting);
  EXPECT_EQ(StateOf(head), JobState::kPending);
}

TEST_F(JobControllerTest, CancelledJobLeavesDesiredSet) {
  api::Node a = MakeNode("a", 1, 20);
  Beat(a);
  api::JobId id = Submit(CmdSpec(1));
  ASSERT_TRUE(controller_->Tick().ok());
  ASSERT_EQ(Beat(a).desired.size(), 1u);
  JobTransition t{id, JobState::kStarting, JobState::kCancelled,  "cancelled by alice",
                  1,  std::nullopt,        clock_.NowUnixMillis()};
  ASSERT_TRUE(store_->TransitionJob(t).ok());
  ASSERT_TRUE(controller_->Tick().ok());
  EXPECT_TRUE(Beat(a).desired.empty());
}

// An ended attempt's rank 0 holds its rendezvous port until it has stopped:
// a new master at the same address gets another port meanwhile, and the
// port is free again once rank 0 is reported exited.
TEST_F(JobControllerTest, APortIsNotGivenAgainWhileTheRankHoldingItStops) {
  options_.launch.master_port_span = 7;  // every job's first attempt prefers one port
  controller_ = std::make_unique<JobController>(store_.get(), &clock_, options_);
  ASSERT_TRUE(controller_->Recover().ok());
  api::Node a = MakeNode("a", 1, 20);
  Beat(a);
  auto port_of = [](const api::HeartbeatResponse& d) {
    return d.desired.at(0).env.at("MASTER_PORT");
  };
  api::JobId first = Submit(CmdSpec(1));
  ASSERT_TRUE(controller_->Tick().ok());
  auto d1 = Beat(a);
  ASSERT_EQ(d1.desired.size(), 1u);
  const std::string held = port_of(d1);
  Beat(a, Running(d1));
  ASSERT_TRUE(controller_->Tick().ok());
  JobTransition cancel{first, JobState::kRunning, JobState::kCancelled,  "cancelled by alice",
                       1,     std::nullopt,       clock_.NowUnixMillis()};
  ASSERT_TRUE(store_->TransitionJob(cancel).ok());
  ASSERT_TRUE(controller_->Tick().ok());

  // The first job's rank 0 is still stopping (reported running) when the
  // second job is placed on the device it frees.
  std::vector<api::WorkerStatus> stopping = Running(d1);
  api::JobId second = Submit(CmdSpec(1));
  auto d2 = Beat(a, stopping);
  ASSERT_TRUE(controller_->Tick().ok());
  d2 = Beat(a, stopping);
  ASSERT_EQ(d2.desired.size(), 1u);
  EXPECT_EQ(d2.desired[0].key.job_id, second);
  EXPECT_NE(port_of(d2), held) << "the stopping rank 0 still listens there";

  // Once it exited, the port is given again.
  Beat(a, Exited(d1, 143));
  JobTransition cancel2{second, JobState::kStarting, JobState::kCancelled,  "cancelled",
                        1,      std::nullopt,        clock_.NowUnixMillis()};
  ASSERT_TRUE(store_->TransitionJob(cancel2).ok());
  ASSERT_TRUE(controller_->Tick().ok());
  Beat(a, {});
  api::JobId third = Submit(CmdSpec(1));
  ASSERT_TRUE(controller_->Tick().ok());
  auto d3 = Beat(a, {});
  ASSERT_EQ(d3.desired.size(), 1u);
  EXPECT_EQ(d3.desired[0].key.job_id, third);
  EXPECT_EQ(port_of(d3), held);
}

TEST_F(JobControllerTest, RestartedControllerKeepsRunningJob) {
  api::Node a = MakeNode("a", 1, 20);
  Beat(a);
  api::JobId id = Submit(CmdSpec(1));
  ASSERT_TRUE(controller_->Tick().ok());
  auto d = Beat(a);
  Beat(a, Running(d));
  ASSERT_TRUE(controller_->Tick().ok());
  ASSERT_EQ(StateOf(id), JobState::kRunning);

  // A new controller on the same store: same desired set, job not restarted.
  controller_ = std::make_unique<JobController>(store_.get(), &clock_, options_);
  ASSERT_TRUE(controller_->Recover().ok());
  clock_.Advance(milliseconds(1500));  // less than the dead timeout
  auto again = Beat(a, Running(d));
  ASSERT_EQ(again.desired.size(), 1u);
  EXPECT_EQ(again.desired[0].key, d.desired[0].key);
  EXPECT_EQ(again.desired[0].env, d.desired[0].env);
  ASSERT_TRUE(controller_->Tick().ok());
  EXPECT_EQ(StateOf(id), JobState::kRunning);
  EXPECT_EQ(store_->GetJob(id)->attempt, 1);
}

TEST_F(JobControllerTest, PreviewShowsPlansWithoutPlacing) {
  api::Node a = MakeNode("a", 2, 20);
  Beat(a);
  auto preview = controller_->Preview(CmdSpec(2));
  ASSERT_TRUE(preview.ok()) << preview.status().ToString();
  ASSERT_FALSE((*preview)["plans"].empty());
  EXPECT_EQ((*preview)["plans"][0]["layout"], "data");
  auto none = controller_->Preview(CmdSpec(5));
  EXPECT_FALSE(none.ok());
}

}  // namespace
}  // namespace tessera::daemon

namespace tessera::daemon {
namespace {

// A model profile of four small layers, for builtin jobs in these tests.
scheduler::ModelProfile SmallProfile(const std::string& model) {
  scheduler::ModelProfile p;
  p.name = model;
  for (const char* n : {"enc0", "down1", "up1", "head"}) {
    scheduler::Layer l;
    l.name = n;
    l.forward_flops = 1e8;
    l.parameter_bytes = 1 << 16;
    l.activation_bytes = 1 << 18;
    l.output_bytes = 1 << 16;
    p.layers.push_back(l);
  }
  p.input_bytes = 64 * 64 * 4;
  p.nominal_image_px = 64;
  return p;
}

TEST_F(JobControllerTest, HeartbeatsAreAnsweredWhileAPlanIsBeingMade) {
  // The profile lookup blocks until released: a plan that takes as long as
  // the test wants.
  std::promise<void> entered, release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<bool> first{true};
  options_.builtin_profiles = [&](const std::string& model) -> Result<scheduler::ModelProfile> {
    if (first.exchange(false)) {
      entered.set_value();
      released.wait();
    }
    return SmallProfile(model);
  };
  controller_ = std::make_unique<JobController>(store_.get(), &clock_, options_);
  api::Node a = MakeNode("a", 2, 20);
  Beat(a);
  api::JobSpec spec = CmdSpec(1);
  spec.entrypoint = "builtin:colorize-unet";
  api::JobId id = Submit(spec);
  auto tick = std::async(std::launch::async, [&] { return controller_->Tick(); });
  entered.get_future().wait();
  // The planner is busy: heartbeats (and a dry run's lock) do not wait for it.
  auto beat = std::async(std::launch::async, [&] { return Beat(a); });
  ASSERT_EQ(beat.wait_for(std::chrono::seconds(20)), std::future_status::ready)
      << "a heartbeat waited for the planner";
  EXPECT_TRUE(beat.get().desired.empty());
  EXPECT_EQ(StateOf(id), JobState::kPending);
  release.set_value();
  ASSERT_TRUE(tick.get().ok());
  EXPECT_EQ(StateOf(id), JobState::kStarting);
}

TEST_F(JobControllerTest, AJobIsPlannedAgainOnlyWhenTheClusterChanged) {
  api::Node a = MakeNode("a", 1, 20);
  Beat(a);
  api::JobId running = Submit(CmdSpec(1));
  ASSERT_TRUE(controller_->Tick().ok());
  ASSERT_EQ(StateOf(running), JobState::kStarting);
  // A two-device job waits; passes over an unchanged cluster reuse its plan.
  api::JobId waiting = Submit(CmdSpec(2));
  ASSERT_TRUE(controller_->Tick().ok());  // nothing free: not planned at all
  Beat(MakeNode("b", 1, 20));
  ASSERT_TRUE(controller_->Tick().ok());
  const uint64_t after_change = controller_->plans_made();
  EXPECT_GT(after_change, 0u);
  for (int i = 0; i < 5; ++i) {
    Beat(a);  // heartbeats alone change nothing the planner sees
    ASSERT_TRUE(controller_->Tick().ok());
  }
  EXPECT_EQ(controller_->plans_made(), after_change);
  EXPECT_EQ(StateOf(waiting), JobState::kPending);
  // A third node joins: the job is planned again, and now fits.
  Beat(MakeNode("c", 1, 20));
  ASSERT_TRUE(controller_->Tick().ok());
  EXPECT_GT(controller_->plans_made(), after_change);
  EXPECT_EQ(StateOf(waiting), JobState::kStarting);
}

TEST_F(JobControllerTest, BuiltinJobWaitsForItsProfileThenFailsIfUnknown) {
  // Profiles measured by the worker arrive late: the job waits, then runs.
  bool ready = false;
  options_.builtin_profiles =
      [&ready](const std::string& model) -> Result<scheduler::ModelProfile> {
    if (model != "colorize-unet") return NotFound("no builtin model \"" + model + "\"");
    if (!ready) return MeasuringProfile(25);
    scheduler::ModelProfile p;
    p.name = model;
    for (const char* n : {"enc0", "down1", "up1", "head"}) {
      scheduler::Layer l;
      l.name = n;
      l.forward_flops = 1e8;
      l.parameter_bytes = 1 << 16;
      l.activation_bytes = 1 << 18;
      l.output_bytes = 1 << 16;
      p.layers.push_back(l);
    }
    p.input_bytes = 64 * 64 * 4;
    p.nominal_image_px = 64;
    return p;
  };
  controller_ = std::make_unique<JobController>(store_.get(), &clock_, options_);
  api::Node a = MakeNode("a", 3, 20);  // one device stays free for the GAN job
  Beat(a);
  api::JobSpec spec = CmdSpec(2);
  spec.entrypoint = "builtin:colorize-unet";
  api::JobId id = Submit(spec);
  ASSERT_TRUE(controller_->Tick().ok());
  EXPECT_EQ(StateOf(id), JobState::kPending);
  EXPECT_EQ(controller_->WaitingReason(id), "measuring the model profile (about 25 s)");
  // A dry run meanwhile answers the state, not an error.
  auto preview = controller_->Preview(spec);
  ASSERT_TRUE(preview.ok()) << preview.status().ToString();
  EXPECT_EQ((*preview)["state"], "measuring_profile");
  EXPECT_EQ((*preview)["message"], "measuring the model profile (about 25 s)");
  EXPECT_GE((*preview)["retry_after_s"].get<int>(), 1);
  ready = true;
  ASSERT_TRUE(controller_->Preview(spec)->contains("plans"));
  ASSERT_TRUE(controller_->Tick().ok());
  EXPECT_EQ(StateOf(id), JobState::kStarting);
  auto d = Beat(a);
  ASSERT_FALSE(d.desired.empty());
  EXPECT_EQ(d.desired[0].argv[0], "/usr/bin/tessera-worker");
  EXPECT_EQ(d.desired[0].argv[1], "train");
  // The rank plan's layer ranges cover exactly the profile's 4 layers.
  const api::Json& replicas = d.desired[0].plan["replicas"];
  int covered = 0;
  for (const auto& r : replicas) {
    int last = 0;
    for (const auto& st : r["stages"]) {
      EXPECT_EQ(st["layers"][0].get<int>(), last);
      last = st["layers"][1].get<int>();
    }
    covered = last;
  }
  EXPECT_EQ(covered, 4);

  api::JobSpec gan = CmdSpec(1);
  gan.entrypoint = "builtin:gan-pix2pix";
  api::JobId gan_id = Submit(gan);
  ASSERT_TRUE(controller_->Tick().ok());
  api::Job failed = *store_->GetJob(gan_id);
  EXPECT_EQ(failed.state, JobState::kFailed);
  EXPECT_NE(failed.reason.find("cannot plan"), std::string::npos) << failed.reason;
}

}  // namespace
}  // namespace tessera::daemon

namespace tessera::daemon {
namespace {

TEST_F(JobControllerTest, HeldHeartbeatAnswersAsSoonAsTheNodeHasWork) {
  api::Node a = MakeNode("a", 1, 20);
  Beat(a);
  api::HeartbeatRequest idle;
  idle.node = "a";
  idle.wait_ms = 100;
  // Nothing to do: the answer is held for wait_ms.
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(controller_->OnHeartbeat(idle).desired.empty());
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(90));

  // A poll held for up to 20 s returns with the launch once the job is placed.
  idle.wait_ms = 20'000;
  api::HeartbeatResponse held;
  std::thread poller([&] { held = controller_->OnHeartbeat(idle); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  api::JobId id = Submit(CmdSpec(1));
  ASSERT_TRUE(controller_->Tick().ok());
  poller.join();
  ASSERT_EQ(held.desired.size(), 1u);
  EXPECT_EQ(held.desired[0].key.job_id, id);

  // A node that reports exactly its desired set is held; one that does not
  // (it has a worker to start) is answered at once.
  api::HeartbeatRequest behind;
  behind.node = "a";
  behind.wait_ms = 20'000;
  EXPECT_EQ(controller_->OnHeartbeat(behind).desired.size(), 1u);
  controller_->Shutdown();
  behind.workers = Running(held);
  EXPECT_EQ(controller_->OnHeartbeat(behind).desired.size(), 1u) << "shutdown releases polls";
}

TEST_F(JobControllerTest, ParkedHeartbeatsHoldNoThreadAndOthersAreAnsweredMeanwhile) {
  // 64 idle nodes park their polls: each call returns at once, unanswered.
  constexpr int kNodes = 64;
  std::vector<std::future<api::HeartbeatResponse>> answers;
  for (int i = 0; i < kNodes; ++i) {
    api::Node n = MakeNode("idle-" + std::to_string(i), 1, 20);
    ASSERT_TRUE(store_->UpsertNode(n).ok());
    api::HeartbeatRequest r;
    r.node = n.name;
    r.wait_ms = 60'000;
    auto answer = std::make_shared<std::promise<api::HeartbeatResponse>>();
    answers.push_back(answer->get_future());
    controller_->OnHeartbeat(r, [answer](api::HeartbeatResponse a) { answer->set_value(a); });
  }
  EXPECT_EQ(controller_->parked_heartbeats(), static_cast<size_t>(kNodes));
  for (auto& a : answers) EXPECT_NE(a.wait_for(milliseconds(0)), std::future_status::ready);

  // A node with something to change is answered inside the call meanwhile.
  api::HeartbeatRequest busy;
  busy.node = "other";
  busy.wait_ms = 60'000;
  busy.workers.push_back({{99, 1, 0}, 5, api::WorkerState::kRunning, 0, nullptr, {}});
  bool answered = false;
  controller_->OnHeartbeat(busy, [&](api::HeartbeatResponse) { answered = true; });
  EXPECT_TRUE(answered) << "a node to be told to stop a worker is not held";

  // A job placed on one node answers that node's poll only.
  api::JobId id = Submit(CmdSpec(1));
  ASSERT_TRUE(controller_->Tick().ok());
  ASSERT_EQ(StateOf(id), JobState::kStarting);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  std::vector<int> ready;
  while (ready.empty() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(5));
    for (int i = 0; i < kNodes; ++i) {
      if (answers[i].wait_for(milliseconds(0)) == std::future_status::ready) ready.push_back(i);
    }
  }
  ASSERT_EQ(ready.size(), 1u);
  api::HeartbeatResponse launch = answers[ready[0]].get();
  ASSERT_EQ(launch.desired.size(), 1u);
  EXPECT_EQ(launch.desired[0].key.job_id, id);
  EXPECT_EQ(controller_->parked_heartbeats(), static_cast<size_t>(kNodes - 1));
  // Shutdown answers the rest.
  controller_->Shutdown();
  for (int i = 0; i < kNodes; ++i) {
    if (i == ready[0]) continue;
    ASSERT_EQ(answers[i].wait_for(std::chrono::seconds(20)), std::future_status::ready);
    EXPECT_TRUE(answers[i].get().desired.empty());
  }
}

}  // namespace
}  // namespace tessera::daemon

namespace tessera::daemon {
namespace {

// Infer jobs: the input becomes chunks, ranks get a lease token, and the job
// succeeds only once every chunk is done.
class InferControllerTest : public JobControllerTest {
 protected:
  void SetUp() override {
    JobControllerTest::SetUp();
    options_.lease_tokens = &tokens_;
    options_.infer_chunk_images = 4;
    controller_ = std::make_unique<JobController>(store_.get(), &clock_, options_);
    ASSERT_TRUE(controller_->Recover().ok());
  }

  api::JobSpec InferSpec(const std::string& dataset) {
    api::JobSpec s = CmdSpec(2);
    s.kind = api::JobKind::kInfer;
    s.steps = 0;
    s.dataset = dataset;
    s.output = (dir_ / "out").string();
    return s;
  }

  std::string InputFolder(int images) {
    auto in = dir_ / "in";
    std::filesystem::create_directories(in);
    for (int i = 0; i < images; ++i) {
      std::ofstream(in / ("scan-" + std::to_string(1000 + i) + ".png")) << "png";
    }
    return in.string();
  }

  // Ticks until the job leaves `pending` (its input is listed in the
  // background), for at most 20 s.
  void TickWhilePending(api::JobId id) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    do {
      ASSERT_TRUE(controller_->Tick().ok());
      if (StateOf(id) != JobState::kPending) return;
      std::this_thread::sleep_for(milliseconds(2));
    } while (std::chrono::steady_clock::now() < deadline);
  }

  // An infer job over `images` images on node_ (2 devices), both ranks
  // reported running; *desired is what the node was asked to run.
  api::JobId StartInferJob(int images, api::HeartbeatResponse* desired) {
    Beat(node_);
    api::JobId id = Submit(InferSpec(InputFolder(images)));
    TickWhilePending(id);
    *desired = Beat(node_);
    Beat(node_, Running(*desired));
    EXPECT_TRUE(controller_->Tick().ok());
    return id;
  }

  const api::Node node_ = MakeNode("a", 2, 20);
  LeaseTokens tokens_{"controller-test-key"};
};

TEST_F(InferControllerTest, InputBecomesChunksAndRanksGetTheirLeaseToken) {
  api::Node a = MakeNode("a", 2, 20);
  Beat(a);
  api::JobId id = Submit(InferSpec(InputFolder(10)));
  // The first pass starts the listing; the job waits for it, then starts.
  ASSERT_TRUE(controller_->Tick().ok());
  TickWhilePending(id);
  EXPECT_EQ(StateOf(id), JobState::kStarting);
  EXPECT_EQ(*store_->CountChunks(id), (ChunkCounts{3, 0, 0, 10, 0}));
  auto chunks = store_->ListChunks(id);
  ASSERT_TRUE(chunks.ok());
  EXPECT_EQ(chunks->at(0).items.front(), "scan-1000.png");
  EXPECT_EQ(chunks->at(2).items, (std::vector<std::string>{"scan-1008.png", "scan-1009.png"}));

  auto desired = Beat(a);
  ASSERT_EQ(desired.desired.size(), 2u);
  std::set<std::string> handed;
  for (const api::WorkerLaunch& l : desired.desired) {
    ASSERT_TRUE(l.env.contains("TESSERA_LEASE_TOKEN"));
    // Each rank's own: valid for its rank, for no other.
    EXPECT_TRUE(tokens_.Check(l.env.at("TESSERA_LEASE_TOKEN"), id, 1, l.key.rank));
    EXPECT_FALSE(tokens_.Check(l.env.at("TESSERA_LEASE_TOKEN"), id, 1, 1 - l.key.rank));
    handed.insert(l.env.at("TESSERA_LEASE_TOKEN"));
  }
  EXPECT_EQ(handed.size(), 2u);
  // The token is handed out, never stored with the attempt.
  auto attempt = store_->GetAttempt(id, 1);
  ASSERT_TRUE(attempt.ok());
  EXPECT_EQ(attempt->plan.dump().find("TESSERA_LEASE_TOKEN"), std::string::npos);
}

TEST_F(InferControllerTest, UnreadableInputFailsTheJobWithTheReason) {
  Beat(MakeNode("a", 2, 20));
  api::JobId id = Submit(InferSpec((dir_ / "no-such-folder").string()));
  TickWhilePending(id);
  EXPECT_EQ(StateOf(id), JobState::kFailed);
  EXPECT_NE(store_->GetJob(id)->reason.find("cannot read the input"), std::string::npos)
      << store_->GetJob(id)->reason;
}

TEST_F(InferControllerTest, RanksThatExitBeforeEveryChunkIsDoneDoNotSucceed) {
  api::HeartbeatResponse desired;
  api::JobId id = StartInferJob(8, &desired);
  ASSERT_EQ(StateOf(id), JobState::kRunning);
  // One chunk done, then every rank exits 0.
  ASSERT_TRUE(store_->LeaseChunks({id, 1, 0, {}, 1, 0, 1000}).ok());
  ASSERT_TRUE(store_->LeaseChunks({id, 1, 0, {0}, 0, 0, 1000}).ok());
  Beat(node_, Exited(desired, 0));
  ASSERT_TRUE(controller_->Tick().ok());
  // Recovering (and retried at once: the first retry does not back off).
  std::string recovery;
  auto events = store_->ListEvents(id, 0, 100);
  ASSERT_TRUE(events.ok());
  for (const api::Event& e : events.value()) {
    if (e.to_state == "recovering") recovery = e.reason;
  }
  EXPECT_NE(recovery.find("before every chunk was done"), std::string::npos) << recovery;
}

TEST_F(InferControllerTest, SucceedsWhenEveryChunkIsDone) {
  api::HeartbeatResponse desired;
  api::JobId id = StartInferJob(4, &desired);
  ASSERT_EQ(StateOf(id), JobState::kRunning);
  ASSERT_TRUE(store_->LeaseChunks({id, 1, 1, {}, 1, 0, 1000}).ok());
  ASSERT_TRUE(store_->LeaseChunks({id, 1, 1, {0}, 0, 0, 1000}).ok());
  Beat(node_, Exited(desired, 0));
  ASSERT_TRUE(controller_->Tick().ok());
  EXPECT_EQ(StateOf(id), JobState::kSucceeded);
}

// An infer attempt whose ranks lease chunks independently loses only a dead
// node's ranks: the attempt goes on (no new attempt), the dead rank's leased
// chunk is leasable at once, and the job succeeds when the survivor is done.
TEST_F(InferControllerTest, ALostNodeCostsOnlyItsChunksAndTheAttemptGoesOn) {
  api::Node a = MakeNode("a", 1, 20), b = MakeNode("b", 1, 20);
  Beat(a);
  Beat(b);
  api::JobId id = Submit(InferSpec(InputFolder(12)));  // 3 chunks of 4
  TickWhilePending(id);
  std::map<std::string, api::HeartbeatResponse> desired = {{"a", Beat(a)}, {"b", Beat(b)}};
  ASSERT_EQ(desired["a"].desired.size(), 1u);
  ASSERT_EQ(desired["b"].desired.size(), 1u);
  Beat(a, Running(desired["a"]));
  Beat(b, Running(desired["b"]));
  ASSERT_TRUE(controller_->Tick().ok());
  ASSERT_EQ(StateOf(id), JobState::kRunning);
  const int64_t rank_a = desired["a"].desired[0].key.rank;
  const int64_t rank_b = desired["b"].desired[0].key.rank;
  const int64_t now = clock_.NowUnixMillis();
  // b's rank holds chunk 0 for 30 s; a's rank finished chunk 1.
  auto held = store_->LeaseChunks({id, 1, rank_b, {}, 1, now, now + 30'000});
  ASSERT_TRUE(held.ok());
  ASSERT_EQ(held->leased.size(), 1u);
  ASSERT_TRUE(store_->LeaseChunks({id, 1, rank_a, {}, 1, now, now + 30'000}).ok());
  ASSERT_TRUE(store_->LeaseChunks({id, 1, rank_a, {1}, 0, now, now + 30'000}).ok());

  // b falls silent until it is dead; a keeps beating with its rank running.
  for (int i = 0; i < 40 && store_->GetNode("b")->health != "dead"; ++i) {
    clock_.Advance(milliseconds(250));
    Beat(a, Running(desired["a"]));
    ASSERT_TRUE(controller_->Tick().ok());
  }
  ASSERT_EQ(store_->GetNode("b")->health, "dead");
  api::Job job = *store_->GetJob(id);
  EXPECT_EQ(job.state, JobState::kRunning);
  EXPECT_EQ(job.attempt, 1) << "no new attempt";
  EXPECT_NE(job.reason.find("node b lost"), std::string::npos) << job.reason;
  EXPECT_NE(job.reason.find("the other 1 rank go on"), std::string::npos) << job.reason;
  EXPECT_EQ(EventTrail(id).back(), "running");
  // a still runs its rank, unchanged.
  auto still = Beat(a, Running(desired["a"]));
  ASSERT_EQ(still.desired.size(), 1u);
  EXPECT_EQ(still.desired[0].key, desired["a"].desired[0].key);
  // The chunk b held is a's to lease now (its lease had 30 s left).
  const int64_t later = clock_.NowUnixMillis();
  auto taken = store_->LeaseChunks({id, 1, rank_a, {}, 2, later, later + 30'000});
  ASSERT_TRUE(taken.ok());
  std::set<int64_t> numbers;
  for (const InferChunk& c : taken->leased) numbers.insert(c.chunk);
  EXPECT_TRUE(numbers.contains(held->leased[0].chunk));
  ASSERT_TRUE(store_->LeaseChunks({id, 1, rank_a, {0, 2}, 0, later, later + 30'000}).ok());
  Beat(a, Exited(desired["a"], 0));
  ASSERT_TRUE(controller_->Tick().ok());
  EXPECT_EQ(StateOf(id), JobState::kSucceeded) << store_->GetJob(id)->reason;
}

// A rank that exits with kPeerLostExitCode (its collective failed as a peer
// vanished) has the attempt's other nodes checked at once: the silent one is
// dead after 1.6 heartbeat intervals instead of dead_after_ms, and the first
// retry does not back off. Any other exit code waits for the timeout.
TEST_F(JobControllerTest, PeerLossExitChecksTheSilentNodeBeforeTheHeartbeatTimeout) {
  struct Row {
    int exit_code;
    bool replanned_early;  // attempt 2 placed before the victim's silence reaches dead_after_ms
  };
  for (const Row& row : {Row{static_cast<int>(api::kPeerLostExitCode), true}, Row{1, false}}) {
    TearDown();
    SetUp();
    api::Node a = MakeNode("a", 1, 20), b = MakeNode("b", 1, 20), c = MakeNode("c", 1, 20);
    for (auto* n : {&a, &b, &c}) Beat(*n);
    api::JobSpec spec = CmdSpec(2);
    api::JobId id = Submit(spec);
    ASSERT_TRUE(controller_->Tick().ok());
    std::map<std::string, api::HeartbeatResponse> desired;
    for (auto* n : {&a, &b, &c}) desired[n->name] = Beat(*n);
    for (auto* n : {&a, &b, &c}) Beat(*n, Running(desired[n->name]));
    ASSERT_TRUE(controller_->Tick().ok());
    ASSERT_EQ(StateOf(id), JobState::kRunning);
    std::string victim, survivor;
    for (auto& [name, d] : desired) {
      if (d.desired.empty()) continue;
      (victim.empty() ? victim : survivor) = name;
    }
    ASSERT_FALSE(survivor.empty());
    // The victim falls silent; 200 ms later the survivor's rank exits.
    int64_t silent_ms = 0;
    std::map<std::string, std::vector<api::WorkerStatus>> runs;
    for (auto* n : {&a, &b, &c}) {
      runs[n->name] =
          n->name == survivor ? Exited(desired[n->name], row.exit_code) : Running(desired[n->name]);
    }
    while (silent_ms < 2900 && store_->GetJob(id)->attempt < 2) {
      clock_.Advance(milliseconds(100));
      silent_ms += 100;
      for (auto* n : {&a, &b, &c}) {
        if (n->name != victim && silent_ms % 500 == 200) Beat(*n, runs[n->name]);
      }
      ASSERT_TRUE(controller_->Tick().ok());
    }
    const api::Job job = *store_->GetJob(id);
    EXPECT_EQ(job.attempt == 2, row.replanned_early) << row.exit_code << " at " << silent_ms;
    if (row.replanned_early) {
      EXPECT_EQ(store_->GetNode(victim)->health, "dead");
      EXPECT_LE(silent_ms, 1800);
      // Both ranks of attempt 2 on the live nodes.
      size_t ranks = 0;
      for (auto* n : {&a, &b, &c}) {
        if (n->name == victim) continue;
        for (const auto& l : Beat(*n, runs[n->name]).desired) ranks += l.key.attempt == 2;
      }
      EXPECT_EQ(ranks, 2u);
    }
  }
}

}  // namespace
}  // namespace tessera::daemon
