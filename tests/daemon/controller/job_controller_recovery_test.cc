// JobController: recovery (dead nodes, failed ranks, named errors, crash
// loops, peer loss, a restarted controller). Fixture in
// job_controller_test_fixture.h.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "daemon/controller/job_controller.h"
#include "tests/daemon/controller/job_controller_test_fixture.h"

namespace tessera::daemon::job_controller_test {
namespace {

TEST_F(JobControllerTest, DeadNodeTriggersReplanOnSurvivors) {
  api::Node a = MakeNode("a", 1, 20), b = MakeNode("b", 1, 20), c = MakeNode("c", 1, 20);
  for (auto* n : {&a, &b, &c}) Beat(*n);
  api::JobSpec spec = CmdSpec(2);
  spec.min_devices = 2;
  spec.max_devices = 2;
  std::map<std::string, api::HeartbeatResponse> desired;
  api::JobId id = SubmitRunning(spec, {&a, &b, &c}, &desired);
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
  api::Node a = Joined("a", 1, 20);
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
  api::Node a = Joined("a", 2, 20);
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
    api::Node a = Joined("a", 1, 20);
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

TEST_F(JobControllerTest, RestartedControllerKeepsRunningJob) {
  api::Node a = Joined("a", 1, 20);
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
    std::map<std::string, api::HeartbeatResponse> desired;
    api::JobId id = SubmitRunning(spec, {&a, &b, &c}, &desired);
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
}  // namespace tessera::daemon::job_controller_test
