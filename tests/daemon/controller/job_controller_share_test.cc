// JobController::ShareForWaiting: while a job waits (train, or infer with its
// input listed), the share policy (scheduler/share_policy.h) shrinks running
// train jobs that can re-form and allow it, and the waiting job starts on what
// they gave up. Fixture in
// job_controller_test_fixture.h.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "daemon/controller/job_controller.h"
#include "tests/daemon/controller/job_controller_test_fixture.h"

namespace tessera::daemon::job_controller_test {
namespace {

class JobControllerShareTest : public JobControllerTest {
 protected:
  void Configure() override {
    UseSmallProfiles();
    options_.grow_min_speedup = 0;  // growth would hand the devices back
  }

  // A data-parallel colorize job on up to two devices, compute-bound.
  static api::JobSpec Training() {
    api::JobSpec spec = CmdSpec(1);
    spec.entrypoint = "builtin:colorize-unet";
    spec.layout = "data";
    spec.global_batch = 240;
    spec.steps = 100'000;
    spec.min_devices = 1;
    spec.max_devices = 0;
    return spec;
  }

  // Alice's job runs on a:0 and b:0; bob submits the same job. The agents
  // report what they are told to run (a dropped rank stops at once) for up to
  // 30 s of 250 ms beats, or until bob's job runs.
  struct Lab {
    api::Node a = MakeNode("a", 1, 20), b = MakeNode("b", 1, 20);
    api::JobId alice = 0, bob = 0;
  };
  void ExpectNotShrunk(const Lab& lab) {
    EXPECT_EQ(Reasons(lab.alice).find("shrinks"), std::string::npos) << Reasons(lab.alice);
    EXPECT_EQ(store_->GetJob(lab.alice)->plan["replicas"].size(), 2u);
    EXPECT_EQ(StateOf(lab.bob), JobState::kPending);
  }
  // Builtin models get SmallProfile, the denoiser with layers too large for a
  // 1 GiB device (set before RestartController).
  void UseADenoiserThatFitsOnlyBigDevices() {
    options_.profiles = [](const ProfileTarget& target) -> Result<scheduler::ModelProfile> {
      scheduler::ModelProfile p = SmallProfile(target.model);
      if (target.model == "denoiser-dncnn") {
        for (scheduler::Layer& l : p.layers) l.parameter_bytes = int64_t{1} << 28;
      }
      return p;
    };
  }

  // Alice's job (up to two devices, `max_attempts`) runs on a:0 (fast, 16
  // GiB) alone while c's two devices (slow, 1 GiB) are busy; then they come
  // free and bob submits a denoiser job, whose model fits only a:0.
  struct MoveLab {
    api::Node a = MakeNode("a", 1, 20, 16), c = MakeNode("c", 2, 5, 1);
    std::map<std::string, api::HeartbeatResponse> desired;
    api::JobId alice = 0, bob = 0;
  };
  void StartMoveLab(MoveLab* lab, int64_t max_attempts) {
    for (api::Device& d : lab->c.devices) d.busy = true;
    for (auto* n : {&lab->a, &lab->c}) Beat(*n);
    api::JobSpec alices = Training();
    alices.max_devices = 2;
    alices.max_attempts = max_attempts;
    lab->alice = SubmitRunning(alices, {&lab->a}, &lab->desired);
    ASSERT_NE(store_->GetJob(lab->alice)->plan.dump().find("\"a:0\""), std::string::npos);
    for (api::Device& d : lab->c.devices) d.busy = false;
    api::JobSpec bobs = Training();
    bobs.entrypoint = "builtin:denoiser-dncnn";
    lab->bob = Submit(bobs, "bob");
  }

  // An infer job of the colorize model over a folder of `images` scans,
  // `name` naming its folders.
  api::JobSpec Inference(int images, const std::string& name = "scans") {
    const std::filesystem::path in = dir_ / name;
    std::filesystem::create_directories(in);
    for (int i = 0; i < images; ++i) {
      std::ofstream(in / ("scan-" + std::to_string(1000 + i) + ".png")) << "png";
    }
    api::JobSpec spec = CmdSpec(1);
    spec.kind = api::JobKind::kInfer;
    spec.entrypoint = "builtin:colorize-unet";
    spec.steps = 0;
    spec.max_devices = 0;
    spec.dataset = in.string();
    spec.output = (dir_ / (name + "-out")).string();
    return spec;
  }

  void RunLab(Lab* lab, const api::JobSpec& alices, const api::JobSpec& bobs = Training()) {
    std::map<std::string, api::HeartbeatResponse> desired;
    for (auto* n : {&lab->a, &lab->b}) Beat(*n);
    // Placed once an infer job's input is listed (in the background, in real
    // time), then every rank reported running.
    lab->alice = Submit(alices);
    for (int i = 0; i < 5000 && StateOf(lab->alice) == JobState::kPending; ++i) {
      ASSERT_TRUE(controller_->Tick().ok());
      if (StateOf(lab->alice) == JobState::kPending) std::this_thread::sleep_for(milliseconds(1));
    }
    for (auto* n : {&lab->a, &lab->b}) desired[n->name] = Beat(*n);
    for (auto* n : {&lab->a, &lab->b}) Beat(*n, Running(desired[n->name]));
    ASSERT_TRUE(controller_->Tick().ok());
    ASSERT_EQ(StateOf(lab->alice), JobState::kRunning) << Reasons(lab->alice);
    ASSERT_EQ(store_->GetJob(lab->alice)->plan["replicas"].size(), 2u);
    lab->bob = Submit(bobs, "bob");
    for (int i = 0; i < 120 && StateOf(lab->bob) != JobState::kRunning; ++i) {
      // An infer job's input is listed in the background, in real time.
      if (bobs.kind == api::JobKind::kInfer) std::this_thread::sleep_for(milliseconds(2));
      clock_.Advance(milliseconds(250));
      for (auto* n : {&lab->a, &lab->b}) {
        desired[n->name] = Beat(*n, Running(desired[n->name]));
      }
      ASSERT_TRUE(controller_->Tick().ok());
    }
  }
};

TEST_F(JobControllerShareTest, ARunningJobShrinksForAnotherUsersJobThatWaits) {
  Lab lab;
  RunLab(&lab, Training());
  const std::string reasons = Reasons(lab.alice);
  EXPECT_NE(reasons.find(": job " + std::to_string(lab.bob) + " of bob takes its devices"),
            std::string::npos)
      << reasons;
  EXPECT_NE(reasons.find("the lab's normalized throughput"), std::string::npos) << reasons;
  EXPECT_NE(reasons.find("keeps its state"), std::string::npos) << reasons;
  const api::Job alice = *store_->GetJob(lab.alice);
  EXPECT_EQ(alice.state, JobState::kRunning);
  EXPECT_EQ(alice.attempt, 1);  // re-formed in place, not restarted
  EXPECT_EQ(alice.plan["replicas"].size(), 1u);
  EXPECT_EQ(StateOf(lab.bob), JobState::kRunning) << Reasons(lab.bob);
}

// A node that stops beating is suspect before it is dead: the share round
// leaves a job with a rank there where it is (the failure detector decides
// what becomes of it), and the controller runs on; it once ended tesserad
// (a device the job held was not among the policy's: std::out_of_range).
TEST_F(JobControllerShareTest, AJobWithARankOnASuspectNodeKeepsItsDevices) {
  Lab lab;
  std::map<std::string, api::HeartbeatResponse> desired;
  for (auto* n : {&lab.a, &lab.b}) Beat(*n);
  lab.alice = Submit(Training());
  ASSERT_TRUE(controller_->Tick().ok());
  for (auto* n : {&lab.a, &lab.b}) desired[n->name] = Beat(*n);
  // Running for longer than grow_settle_ms: movable.
  for (int i = 0; i < 48; ++i) {
    clock_.Advance(milliseconds(250));
    for (auto* n : {&lab.a, &lab.b}) desired[n->name] = Beat(*n, Running(desired[n->name]));
    ASSERT_TRUE(controller_->Tick().ok());
  }
  ASSERT_EQ(StateOf(lab.alice), JobState::kRunning) << Reasons(lab.alice);
  ASSERT_EQ(store_->GetJob(lab.alice)->plan["replicas"].size(), 2u);
  // Bob's job waits; b falls silent (suspect after two missed beats, 2 s; dead
  // after 3 s) before the next round.
  lab.bob = Submit(Training(), "bob");
  clock_.Advance(milliseconds(2250));
  desired["a"] = Beat(lab.a, Running(desired["a"]));
  ASSERT_TRUE(controller_->Tick().ok());
  EXPECT_EQ(store_->GetNode("b")->health, "suspect");
  ExpectNotShrunk(lab);
}

// A share round asks each job's throughput on many device sets; on alike nodes
// most are one question (scheduler/node_classes.h): planned once, renamed.
// Alice's job runs on four alike nodes, bob's waits: the round shrinks hers
// with a plan per device count asked about, not one per set.
TEST_F(JobControllerShareTest, AlikeNodesAreOneRateQuestion) {
  std::vector<api::Node> nodes = {MakeNode("a", 1, 20), MakeNode("b", 1, 20), MakeNode("c", 1, 20),
                                  MakeNode("d", 1, 20)};
  std::map<std::string, api::HeartbeatResponse> desired;
  for (const api::Node& n : nodes) Beat(n);
  const api::JobId alice = Submit(Training());
  ASSERT_TRUE(controller_->Tick().ok());
  for (const api::Node& n : nodes) desired[n.name] = Beat(n);
  for (int i = 0; i < 48; ++i) {  // longer than grow_settle_ms
    clock_.Advance(milliseconds(250));
    for (const api::Node& n : nodes) desired[n.name] = Beat(n, Running(desired[n.name]));
    ASSERT_TRUE(controller_->Tick().ok());
  }
  ASSERT_EQ(store_->GetJob(alice)->plan["replicas"].size(), 4u);
  const uint64_t before = controller_->share_plans_made();
  const api::JobId bob = Submit(Training(), "bob");
  for (int i = 0; i < 40 && StateOf(bob) != JobState::kRunning; ++i) {
    clock_.Advance(milliseconds(250));
    for (const api::Node& n : nodes) desired[n.name] = Beat(n, Running(desired[n.name]));
    ASSERT_TRUE(controller_->Tick().ok());
  }
  EXPECT_EQ(StateOf(bob), JobState::kRunning) << Reasons(bob);
  EXPECT_NE(Reasons(alice).find("takes its devices"), std::string::npos) << Reasons(alice);
  // 9 here: per job a plan per device count it is asked about, and the plans
  // of the two decisions on their own devices; 19 with every set planned.
  EXPECT_LE(controller_->share_plans_made() - before, 12u);
}

// Bob's gang job (two devices, a few steps) would wait for alice's long job,
// which holds both and cannot shrink (a minimum of two): hers goes back to
// the queue, her ranks stop with a checkpoint (the attempt ends as a move,
// not counted), and his starts on her devices, reserved for him. With
// restarts off (share_restart_moves) hers runs on and his waits.
TEST_F(JobControllerShareTest, ALongJobGoesBackToTheQueueForAShortGangJob) {
  for (bool restarts : {true, false}) {
    SCOPED_TRACE(restarts ? "restarts allowed" : "restarts off");
    TearDown();
    SetUp();
    options_.share_restart_moves = restarts;
    RestartController();
    Lab lab;
    api::JobSpec alices = Training();
    alices.min_devices = 2;
    api::JobSpec bobs = Training();
    bobs.min_devices = 2;
    bobs.steps = 200;
    RunLab(&lab, alices, bobs);
    const std::string reasons = Reasons(lab.alice);
    const api::Job alice = *store_->GetJob(lab.alice);
    if (!restarts) {
      EXPECT_EQ(reasons.find("back to the queue"), std::string::npos) << reasons;
      EXPECT_EQ(alice.state, JobState::kRunning) << reasons;
      EXPECT_EQ(StateOf(lab.bob), JobState::kPending) << Reasons(lab.bob);
      continue;
    }
    EXPECT_NE(reasons.find("pending: goes back to the queue: job " + std::to_string(lab.bob) +
                           " of bob needs 2 devices"),
              std::string::npos)
        << reasons;
    EXPECT_EQ(alice.state, JobState::kPending) << reasons;
    EXPECT_EQ(alice.attempt, 1);
    EXPECT_TRUE(store_->GetAttempt(lab.alice, 1)->result.starts_with("moved: "))
        << store_->GetAttempt(lab.alice, 1)->result;
    EXPECT_EQ(StateOf(lab.bob), JobState::kRunning) << Reasons(lab.bob);
    EXPECT_EQ(store_->GetJob(lab.bob)->plan["replicas"].size(), 2u);
  }
}

// Another user's infer job gets its share as a train job does: alice's train
// job holds both devices, bob's infer job waits, and her job shrinks to one so
// that his starts on the other (without the round, it would wait for her job
// to end).
TEST_F(JobControllerShareTest, AnotherUsersInferJobTakesItsShareFromARunningTrainJob) {
  Lab lab;
  RunLab(&lab, Training(), Inference(40));
  const std::string reasons = Reasons(lab.alice);
  EXPECT_NE(reasons.find(": job " + std::to_string(lab.bob) + " of bob takes its devices"),
            std::string::npos)
      << reasons;
  const api::Job alice = *store_->GetJob(lab.alice);
  EXPECT_EQ(alice.state, JobState::kRunning);
  EXPECT_EQ(alice.attempt, 1);  // re-formed in place, not restarted
  EXPECT_EQ(alice.plan["replicas"].size(), 1u);
  EXPECT_EQ(StateOf(lab.bob), JobState::kRunning) << Reasons(lab.bob);
  EXPECT_EQ(store_->GetJob(lab.bob)->plan["replicas"].size(), 1u);
}

// A running infer job that fills the lab gives another user's infer job its
// share: alice's inference runs on both devices, bob's waits; hers drops the
// rank on one device (its chunks go back to the queue) and his starts there.
TEST_F(JobControllerShareTest, ARunningInferJobGivesAnotherUsersInferJobItsShare) {
  Lab lab;
  RunLab(&lab, Inference(40, "alices"), Inference(40, "bobs"));
  const std::string reasons = Reasons(lab.alice);
  EXPECT_NE(reasons.find(": job " + std::to_string(lab.bob) + " of bob takes its devices"),
            std::string::npos)
      << reasons;
  EXPECT_NE(reasons.find("held went back to the queue)"), std::string::npos) << reasons;
  const api::Job alice = *store_->GetJob(lab.alice);
  EXPECT_EQ(alice.state, JobState::kRunning);
  EXPECT_EQ(alice.attempt, 1);
  EXPECT_EQ(StateOf(lab.bob), JobState::kRunning) << Reasons(lab.bob);
}

// A device that comes free goes to the user holding fewest: alice's
// inference runs on a:0 and b:0, bob's has just started on c:0, and d:0 joins.
// Alice's job does not take it while bob's settles (grow_settle_ms after its
// launch); then bob's grows onto it. (The share round is off: the placement
// is the queue's.)
TEST_F(JobControllerShareTest, ADeviceThatComesFreeGoesToTheInferJobOfTheUserHoldingFewest) {
  options_.share_running_jobs = false;
  RestartController();
  api::Node a = MakeNode("a", 1, 20), b = MakeNode("b", 1, 20), c = MakeNode("c", 1, 20),
            d = MakeNode("d", 1, 20);
  c.devices[0].busy = true;
  std::map<std::string, api::HeartbeatResponse> desired;
  auto beat_all = [&](const std::vector<api::Node*>& nodes) {
    for (api::Node* n : nodes) desired[n->name] = Beat(*n, Running(desired[n->name]));
  };
  auto tick_until = [&](api::JobId id, JobState state, const std::vector<api::Node*>& nodes) {
    for (int i = 0; i < 5000 && StateOf(id) != state; ++i) {
      ASSERT_TRUE(controller_->Tick().ok());
      beat_all(nodes);
      std::this_thread::sleep_for(milliseconds(1));  // the input is listed in real time
    }
    ASSERT_EQ(StateOf(id), state) << Reasons(id);
  };
  auto run_for = [&](milliseconds span, const std::vector<api::Node*>& nodes) {
    for (milliseconds t{0}; t < span; t += milliseconds(500)) {
      clock_.Advance(milliseconds(500));
      beat_all(nodes);
      ASSERT_TRUE(controller_->Tick().ok());
    }
  };
  beat_all({&a, &b, &c});
  const api::JobId alice = Submit(Inference(40, "alices"), "alice");
  ASSERT_NO_FATAL_FAILURE(tick_until(alice, JobState::kRunning, {&a, &b, &c}));
  ASSERT_EQ(store_->GetJob(alice)->plan["replicas"].size(), 2u);
  // Alice's settles; c:0 stays busy, so she has nothing to grow onto.
  ASSERT_NO_FATAL_FAILURE(run_for(milliseconds(options_.grow_settle_ms), {&a, &b, &c}));
  c.devices[0].busy = false;
  const api::JobId bob = Submit(Inference(40, "bobs"), "bob");
  ASSERT_NO_FATAL_FAILURE(tick_until(bob, JobState::kRunning, {&a, &b, &c}));
  ASSERT_EQ(store_->GetJob(bob)->plan["replicas"].size(), 1u);

  ASSERT_NO_FATAL_FAILURE(run_for(milliseconds(options_.grow_settle_ms / 2), {&a, &b, &c, &d}));
  EXPECT_EQ(store_->GetJob(alice)->plan["replicas"].size(), 2u) << Reasons(alice);
  EXPECT_EQ(store_->GetJob(bob)->plan["replicas"].size(), 1u);
  ASSERT_NO_FATAL_FAILURE(run_for(milliseconds(options_.grow_settle_ms), {&a, &b, &c, &d}));
  EXPECT_EQ(store_->GetJob(alice)->plan["replicas"].size(), 2u) << Reasons(alice);
  EXPECT_EQ(store_->GetJob(bob)->plan["replicas"].size(), 2u) << Reasons(bob);
}

// The rank a shrink leaves out is stopped only a while after the kept rank
// got its order: its stop, which its world agrees on at a step's end, must
// not stop the kept rank with it before that one has left the old world.
TEST_F(JobControllerShareTest, ALeftOutRankIsStoppedOnlyAfterTheKeptRankGotItsOrder) {
  Lab lab;
  std::map<std::string, api::HeartbeatResponse> desired;
  for (auto* n : {&lab.a, &lab.b}) Beat(*n);
  lab.alice = SubmitRunning(Training(), {&lab.a, &lab.b}, &desired);
  lab.bob = Submit(Training(), "bob");
  for (int i = 0; i < 120 && store_->GetJob(lab.alice)->plan["replicas"].size() == 2; ++i) {
    clock_.Advance(milliseconds(250));
    for (auto* n : {&lab.a, &lab.b}) desired[n->name] = Beat(*n, Running(desired[n->name]));
    ASSERT_TRUE(controller_->Tick().ok());
  }
  const api::Json plan = store_->GetJob(lab.alice)->plan;
  ASSERT_EQ(plan["replicas"].size(), 1u) << Reasons(lab.alice);
  api::Node* left = plan.dump().find("\"a:0\"") != std::string::npos ? &lab.b : &lab.a;
  auto alices_ranks = [&](const api::HeartbeatResponse& d) {
    int n = 0;
    for (const auto& l : d.desired) n += l.key.job_id == lab.alice ? 1 : 0;
    return n;
  };
  desired[left->name] = Beat(*left, Running(desired[left->name]));
  EXPECT_EQ(alices_ranks(desired[left->name]), 1) << "still desired right after the shrink";
  clock_.Advance(milliseconds(2500));
  ASSERT_TRUE(controller_->Tick().ok());
  EXPECT_EQ(alices_ranks(Beat(*left, Running(desired[left->name]))), 0) << "stopped since";
}

// The ranks a shrink leaves out are told so (a left-out order of the new
// generation, worker/runtime/reform.h), and until their processes are gone
// the devices they free are the waiting job's, not busy: alice's job runs on
// four devices, bob's waits; one shrink gives bob's job what it needs, and
// while the left-out ranks take their time to leave (still reported running,
// their devices busy), later rounds do not take more of alice's devices for
// the same job. Bob's job starts once they are gone.
TEST_F(JobControllerShareTest, DevicesLeftOutRanksStillHoldAreTheWaitingJobsNotBusy) {
  api::Node a = MakeNode("a", 2, 20), b = MakeNode("b", 2, 20);
  std::map<std::string, api::HeartbeatResponse> desired;
  for (auto* n : {&a, &b}) Beat(*n);
  const api::JobId alice = SubmitRunning(Training(), {&a, &b}, &desired);
  ASSERT_EQ(store_->GetJob(alice)->plan["replicas"].size(), 4u);
  const api::JobId bob = Submit(Training(), "bob");

  // Agents: every desired worker runs; a worker no longer desired lingers
  // while `linger` holds; a device with a running worker is busy (as
  // tessera-agent reports it).
  std::map<std::string, std::map<api::WorkerKey, api::WorkerLaunch>> seen;
  bool linger = true;
  int left_out_orders = 0;
  auto beat = [&](api::Node* n) {
    std::vector<api::WorkerStatus> workers = Running(desired[n->name]);
    for (api::Device& d : n->devices) d.busy = false;
    for (const auto& l : desired[n->name].desired) {
      if (l.reform.is_object() && l.reform.value("left_out", false)) ++left_out_orders;
      seen[n->name][l.key] = l;
      for (int64_t i : l.device_indices) n->devices[static_cast<size_t>(i)].busy = true;
    }
    for (const auto& [key, l] : seen[n->name]) {
      const bool wanted =
          std::any_of(desired[n->name].desired.begin(), desired[n->name].desired.end(),
                      [&](const api::WorkerLaunch& w) { return w.key == key; });
      if (wanted) continue;
      workers.push_back({key,
                         1000 + key.rank,
                         linger ? api::WorkerState::kRunning : api::WorkerState::kExited,
                         0,
                         nullptr,
                         {}});
      if (linger) {
        for (int64_t i : l.device_indices) n->devices[static_cast<size_t>(i)].busy = true;
      }
    }
    desired[n->name] = Beat(*n, std::move(workers));
  };
  auto step = [&] {
    clock_.Advance(milliseconds(250));
    for (auto* n : {&a, &b}) beat(n);
    ASSERT_TRUE(controller_->Tick().ok());
  };
  for (int i = 0; i < 120 && store_->GetJob(alice)->plan["replicas"].size() == 4; ++i) step();
  const size_t kept = store_->GetJob(alice)->plan["replicas"].size();
  ASSERT_LT(kept, 4u) << Reasons(alice);
  for (int i = 0; i < 60; ++i) step();  // 15 s of rounds while the left-out ranks linger
  auto shrinks = [&] { return EventsSaying(alice, "shrinks to"); };
  EXPECT_EQ(shrinks(), 1) << Reasons(alice);
  EXPECT_EQ(store_->GetJob(alice)->plan["replicas"].size(), kept);
  EXPECT_GE(left_out_orders, static_cast<int>(4 - kept)) << "each left-out rank told so";
  EXPECT_EQ(StateOf(bob), JobState::kPending) << "its devices are not free yet";

  linger = false;
  for (int i = 0; i < 40 && StateOf(bob) != JobState::kRunning; ++i) step();
  EXPECT_EQ(StateOf(bob), JobState::kRunning) << Reasons(bob);
  EXPECT_EQ(shrinks(), 1) << Reasons(alice);
}

TEST_F(JobControllerShareTest, AJobThatOptsOutKeepsItsDevices) {
  api::JobSpec spec = Training();
  spec.elastic = false;
  Lab lab;
  RunLab(&lab, spec);
  ExpectNotShrunk(lab);
}

TEST_F(JobControllerShareTest, NothingShrinksWithThePolicySwitchedOff) {
  options_.share_running_jobs = false;
  RestartController();
  Lab lab;
  RunLab(&lab, Training());
  ExpectNotShrunk(lab);
}

TEST_F(JobControllerShareTest, AMoveThatCostsMoreThanItGainsIsNotMade) {
  options_.move_cost_s = 86'400;  // a day of progress per move: never pays
  RestartController();
  Lab lab;
  RunLab(&lab, Training());
  ExpectNotShrunk(lab);
}

// Growth while a job waits: alice's job runs on a:0; b:0 comes free, and
// bob's job, which needs two devices, cannot use it alone. The policy grows
// alice's job onto it (its new rank joins; GrowTraining would not, a job
// waits); bob's job still waits.
TEST_F(JobControllerShareTest, ARunningJobGrowsOntoADeviceTheWaitingJobCannotUse) {
  api::Node a = Joined("a", 1, 20), b = MakeNode("b", 1, 10);
  std::map<std::string, api::HeartbeatResponse> desired;
  const api::JobId alice = SubmitRunning(Training(), {&a}, &desired);
  ASSERT_EQ(store_->GetJob(alice)->plan["replicas"].size(), 1u);
  desired["b"] = Beat(b);
  api::JobSpec pair = Training();
  pair.min_devices = 2;
  const api::JobId bob = Submit(pair, "bob");
  for (int i = 0; i < 120 && store_->GetJob(alice)->plan["replicas"].size() < 2; ++i) {
    clock_.Advance(milliseconds(250));
    for (auto* n : {&a, &b}) desired[n->name] = Beat(*n, Running(desired[n->name]));
    ASSERT_TRUE(controller_->Tick().ok());
  }
  const std::string reasons = Reasons(alice);
  EXPECT_NE(reasons.find("grows onto a:0,b:0"), std::string::npos) << reasons;
  EXPECT_NE(reasons.find("joined by 1 new rank"), std::string::npos) << reasons;
  const api::Job job = *store_->GetJob(alice);
  EXPECT_EQ(job.attempt, 1);
  EXPECT_EQ(job.plan["replicas"].size(), 2u);
  EXPECT_EQ(StateOf(bob), JobState::kPending) << Reasons(bob);
}

// A move around the rank it keeps: alice's job runs on a:0 (fast, 16 GiB) and
// c:0 (slow, 1 GiB); c:1 comes free, and bob's job, whose model fits only
// a:0, waits. The policy moves alice's job to c:0 and c:1: its rank on c:0
// keeps its state, a new one joins on c:1, the one on a:0 stops; bob's job
// then starts on a:0, once that rank has been let go.
TEST_F(JobControllerShareTest, ARunningJobMovesAroundTheRankItKeeps) {
  UseADenoiserThatFitsOnlyBigDevices();
  RestartController();
  api::Node a = MakeNode("a", 1, 20, 16), c = MakeNode("c", 2, 5, 1);
  c.devices[1].busy = true;
  for (auto* n : {&a, &c}) Beat(*n);
  std::map<std::string, api::HeartbeatResponse> desired;
  api::JobSpec alices = Training();
  alices.max_devices = 2;
  const api::JobId alice = SubmitRunning(alices, {&a, &c}, &desired);
  const std::string before = store_->GetJob(alice)->plan.dump();
  ASSERT_NE(before.find("\"a:0\""), std::string::npos) << before;
  ASSERT_NE(before.find("\"c:0\""), std::string::npos) << before;
  c.devices[1].busy = false;
  api::JobSpec bobs = Training();
  bobs.entrypoint = "builtin:denoiser-dncnn";
  const api::JobId bob = Submit(bobs, "bob");
  auto step = [&] {
    clock_.Advance(milliseconds(250));
    for (auto* n : {&a, &c}) desired[n->name] = Beat(*n, Running(desired[n->name]));
    ASSERT_TRUE(controller_->Tick().ok());
  };
  for (int i = 0;
       i < 120 && store_->GetJob(alice)->plan.dump().find("\"a:0\"") != std::string::npos; ++i) {
    step();
  }
  // a:0 stays alice's while her left-out rank stays (its process holds the
  // device): bob's job starts only after it.
  EXPECT_EQ(StateOf(bob), JobState::kPending);
  EXPECT_EQ(Beat(a, Running(desired["a"])).desired.size(), 1u);
  for (int i = 0; i < 120 && StateOf(bob) != JobState::kRunning; ++i) step();
  const std::string reasons = Reasons(alice);
  EXPECT_NE(reasons.find("moves to c:0,c:1: job " + std::to_string(bob) + " of bob"),
            std::string::npos)
      << reasons;
  EXPECT_NE(reasons.find("the running rank keeps its state"), std::string::npos) << reasons;
  EXPECT_NE(reasons.find("joined by 1 new rank"), std::string::npos) << reasons;
  EXPECT_NE(reasons.find("rank 0 is left out of the new plan"), std::string::npos) << reasons;
  const api::Job job = *store_->GetJob(alice);
  EXPECT_EQ(job.state, JobState::kRunning);
  EXPECT_EQ(job.attempt, 1);  // re-formed in place, not restarted
  const std::string after = job.plan.dump();
  EXPECT_EQ(after.find("\"a:0\""), std::string::npos) << after;
  EXPECT_NE(after.find("\"c:1\""), std::string::npos) << after;
  EXPECT_EQ(StateOf(bob), JobState::kRunning) << Reasons(bob);
  EXPECT_NE(store_->GetJob(bob)->plan.dump().find("\"a:0\""), std::string::npos);
}

// A move onto none of a job's devices restarts it from its checkpoint: alice's
// job runs on a:0 (fast, 16 GiB) alone, c:0 and c:1 (slow, 1 GiB) come free,
// and bob's job, whose model fits only a:0, waits. Her ranks are stopped (each
// saves a checkpoint as it stops), c:0 and c:1 are held for her meanwhile,
// and once they stopped her job is pending again ("moved"), then placed on
// c:0 and c:1 as attempt 2, though she allowed one attempt: a moved attempt
// does not count. Bob's job starts on a:0. Without restarts (the policy then
// keeps one of a job's devices in every move), nothing moves.
TEST_F(JobControllerShareTest, AMoveOntoNoneOfAJobsDevicesRestartsItFromItsCheckpoint) {
  for (bool restarts : {true, false}) {
    SCOPED_TRACE(restarts ? "restart moves" : "no restart moves");
    TearDown();
    SetUp();
    UseADenoiserThatFitsOnlyBigDevices();
    options_.share_restart_moves = restarts;
    RestartController();
    MoveLab lab;
    ASSERT_NO_FATAL_FAILURE(StartMoveLab(&lab, /*max_attempts=*/1));
    auto& [a, c, desired, alice, bob] = lab;
    // Her rank on a:0 takes two beats to stop once told (it saves a checkpoint).
    const api::HeartbeatResponse alices_ranks = desired["a"];
    int stopping_beats = 0;
    bool held_for_alice = false;  // bob's job waited while her rank stopped
    for (int i = 0; i < 120 && StateOf(bob) != JobState::kRunning; ++i) {
      clock_.Advance(milliseconds(250));
      desired["c"] = Beat(c, Running(desired["c"]));
      const bool stopping = StateOf(alice) == JobState::kRunning && desired["a"].desired.empty() &&
                            stopping_beats < 2;
      desired["a"] = Beat(a, Running(stopping ? alices_ranks : desired["a"]));
      ASSERT_TRUE(controller_->Tick().ok());
      if (stopping) {
        ++stopping_beats;
        held_for_alice = StateOf(bob) == JobState::kPending && StateOf(alice) == JobState::kRunning;
      }
    }
    const std::string reasons = Reasons(alice);
    const api::Job job = *store_->GetJob(alice);
    if (!restarts) {
      EXPECT_EQ(reasons.find("moves"), std::string::npos) << reasons;
      EXPECT_EQ(job.attempt, 1);
      EXPECT_EQ(StateOf(bob), JobState::kPending);
      continue;
    }
    EXPECT_TRUE(held_for_alice);
    EXPECT_NE(reasons.find("pending: moves to c:0,c:1: job " + std::to_string(bob) + " of bob"),
              std::string::npos)
        << reasons;
    EXPECT_NE(reasons.find("restarts from its checkpoint"), std::string::npos) << reasons;
    EXPECT_EQ(job.state, JobState::kRunning) << reasons;
    EXPECT_EQ(job.attempt, 2);
    const std::string plan = job.plan.dump();
    EXPECT_EQ(plan.find("\"a:0\""), std::string::npos) << plan;
    EXPECT_NE(plan.find("\"c:0\""), std::string::npos) << plan;
    EXPECT_NE(plan.find("\"c:1\""), std::string::npos) << plan;
    EXPECT_TRUE(store_->GetAttempt(alice, 1)->result.starts_with("moved: "))
        << store_->GetAttempt(alice, 1)->result;
    EXPECT_EQ(StateOf(bob), JobState::kRunning) << Reasons(bob);
    EXPECT_NE(store_->GetJob(bob)->plan.dump().find("\"a:0\""), std::string::npos);
  }
}

// Alice's job started on c:0, the slow device, while the others were busy;
// bob's on a:0, the fast one, and carol's on b:0 (the middle one, every
// user's fair share); carol's second job waits. Bob's has done nine tenths of
// its steps, alice's none: where it is hers would finish about 2.5x its time
// alone on her share, and his stays well within 2x on c:0. They swap: both
// stop with a checkpoint and restart on the other's device, which each
// waits for (with the catch-up off, both stay).
TEST_F(JobControllerShareTest, AJobBehindItsFairShareSwapsDevicesWithAJobAheadOfIt) {
  for (bool catch_up : {true, false}) {
    SCOPED_TRACE(catch_up ? "catch-up" : "catch-up off");
    TearDown();
    SetUp();
    options_.share_catch_up_above = catch_up ? 2.0 : 0;
    RestartController();
    api::Node a = MakeNode("a", 1, 20), b = MakeNode("b", 1, 10), c = MakeNode("c", 1, 4);
    std::map<std::string, api::HeartbeatResponse> desired;
    auto beat_all = [&] {
      for (api::Node* n : {&a, &b, &c}) desired[n->name] = Beat(*n, Running(desired[n->name]));
    };
    api::JobSpec spec = Training();
    spec.max_devices = 1;
    // Each starts on the one device left free for it.
    auto start = [&](const std::string& user, const std::string& device) {
      for (api::Node* n : {&a, &b, &c}) n->devices[0].busy = n->name + ":0" != device;
      const api::JobId id = Submit(spec, user);
      for (int i = 0; i < 3; ++i) {
        EXPECT_TRUE(controller_->Tick().ok());
        beat_all();
      }
      EXPECT_TRUE(controller_->Tick().ok());
      EXPECT_EQ(StateOf(id), JobState::kRunning) << Reasons(id);
      EXPECT_NE(store_->GetJob(id)->plan.dump().find("\"" + device + "\""), std::string::npos);
      for (api::Node* n : {&a, &b, &c}) n->devices[0].busy = false;
      return id;
    };
    const api::JobId alice = start("alice", "c:0");
    const api::JobId bob = start("bob", "a:0");
    start("carol", "b:0");
    ASSERT_TRUE(store_->SetJobProgress(bob, {{"step", spec.steps * 9 / 10}}).ok());
    const api::JobId carols_second = Submit(spec, "carol");
    for (int i = 0;
         i < 200 && !(StateOf(alice) == JobState::kRunning && store_->GetJob(alice)->attempt == 2 &&
                      StateOf(bob) == JobState::kRunning && store_->GetJob(bob)->attempt == 2);
         ++i) {
      clock_.Advance(milliseconds(250));
      beat_all();
      ASSERT_TRUE(controller_->Tick().ok());
    }
    EXPECT_EQ(StateOf(carols_second), JobState::kPending);
    const std::string hers = Reasons(alice), his = Reasons(bob);
    if (!catch_up) {
      EXPECT_EQ(hers.find("moves"), std::string::npos) << hers;
      EXPECT_EQ(store_->GetJob(alice)->attempt, 1);
      EXPECT_EQ(store_->GetJob(bob)->attempt, 1);
      continue;
    }
    EXPECT_NE(hers.find("pending: moves to a:0: job " + std::to_string(bob) + " of bob takes"),
              std::string::npos)
        << hers;
    EXPECT_NE(hers.find("where it is it would finish 2."), std::string::npos) << hers;
    EXPECT_NE(his.find("pending: moves to c:0: job " + std::to_string(alice) + " of alice takes"),
              std::string::npos)
        << his;
    ASSERT_EQ(StateOf(alice), JobState::kRunning) << hers;
    ASSERT_EQ(StateOf(bob), JobState::kRunning) << his;
    EXPECT_NE(store_->GetJob(alice)->plan.dump().find("\"a:0\""), std::string::npos);
    EXPECT_NE(store_->GetJob(bob)->plan.dump().find("\"c:0\""), std::string::npos);
  }
}

// A controller restarted while a moved job's ranks stop ends the attempt as
// a move, not as a success: its ranks exit 0 once their checkpoint is saved,
// as finished ones do.
TEST_F(JobControllerShareTest, AMoveStoppingWhenTheControllerRestartsEndsAsAMove) {
  UseADenoiserThatFitsOnlyBigDevices();
  RestartController();
  MoveLab lab;
  ASSERT_NO_FATAL_FAILURE(StartMoveLab(&lab, /*max_attempts=*/3));
  auto& [a, c, desired, alice, bob] = lab;
  const api::HeartbeatResponse alices_ranks = desired["a"];
  for (int i = 0; i < 120 && !desired["a"].desired.empty(); ++i) {
    clock_.Advance(milliseconds(250));
    Beat(c);
    desired["a"] = Beat(a, Running(alices_ranks));
    ASSERT_TRUE(controller_->Tick().ok());
  }
  ASSERT_TRUE(desired["a"].desired.empty()) << Reasons(alice);
  RestartController();
  Beat(a, Exited(alices_ranks, 0));
  ASSERT_TRUE(controller_->Tick().ok());
  const std::string reasons = Reasons(alice);
  EXPECT_NE(StateOf(alice), JobState::kSucceeded) << reasons;
  EXPECT_NE(reasons.find("pending: moves to c:0,c:1"), std::string::npos) << reasons;
}

// A move costs what the job's own last re-form took, not the configured
// guess: with a day configured, a job whose re-form after a lost node was
// measured (its re-formed ranks stepped on 3 s later) shrinks for bob's job;
// one whose re-formed ranks have not stepped yet (nothing measured) keeps
// its devices.
TEST_F(JobControllerShareTest, AMoveCostsWhatTheJobsLastReformTook) {
  for (bool stepped : {true, false}) {
    SCOPED_TRACE(stepped ? "its re-form measured" : "nothing measured");
    TearDown();
    SetUp();
    options_.move_cost_s = 86'400;
    RestartController();
    api::Node a = MakeNode("a", 1, 20), b = MakeNode("b", 1, 20), c = MakeNode("c", 1, 20);
    for (auto* n : {&a, &b, &c}) Beat(*n);
    std::map<std::string, api::HeartbeatResponse> desired;
    const api::JobId alice = SubmitRunning(Training(), {&a, &b, &c}, &desired);
    ASSERT_EQ(store_->GetJob(alice)->plan["replicas"].size(), 3u);
    // c falls silent; a's and b's ranks wait to re-form, held at step 3.
    auto report = [&](api::Node* n, const api::Json& progress) {
      std::vector<api::WorkerStatus> run = Running(desired[n->name]);
      for (auto& w : run) w.progress = progress;
      desired[n->name] = Beat(*n, run);
    };
    for (int i = 0; i < 40 && store_->GetJob(alice)->plan["replicas"].size() != 2; ++i) {
      clock_.Advance(milliseconds(250));
      for (auto* n : {&a, &b}) report(n, {{"event", "peer_lost"}, {"held_step", 3}});
      ASSERT_TRUE(controller_->Tick().ok());
    }
    ASSERT_EQ(store_->GetJob(alice)->plan["replicas"].size(), 2u) << Reasons(alice);
    // The re-formed ranks step on 3 s later, or not yet.
    clock_.Advance(milliseconds(3000));
    const api::Json progress =
        stepped ? api::Json{{"step", 4}, {"generation", 1}} : api::Json::object();
    for (auto* n : {&a, &b}) report(n, progress);
    const api::JobId bob = Submit(Training(), "bob");
    for (int i = 0; i < 120 && StateOf(bob) != JobState::kRunning; ++i) {
      clock_.Advance(milliseconds(250));
      for (auto* n : {&a, &b}) report(n, progress);
      ASSERT_TRUE(controller_->Tick().ok());
    }
    const std::string reasons = Reasons(alice);
    if (stepped) {
      EXPECT_NE(reasons.find("shrinks"), std::string::npos) << reasons;
      EXPECT_NE(reasons.find("(measured at its last re-form)"), std::string::npos) << reasons;
      EXPECT_EQ(reasons.find("86400"), std::string::npos) << reasons;
      EXPECT_EQ(StateOf(bob), JobState::kRunning) << Reasons(bob);
    } else {
      EXPECT_EQ(reasons.find("shrinks"), std::string::npos) << reasons;
      EXPECT_EQ(StateOf(bob), JobState::kPending) << Reasons(bob);
    }
  }
}

}  // namespace
}  // namespace tessera::daemon::job_controller_test
