// JobController: the survivors of a lost node go on in the same attempt
// (daemon/controller/train_reform.h), or, where they cannot, the attempt is
// restarted and the event says why. Fixture in job_controller_test_fixture.h.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <future>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "daemon/controller/job_controller.h"
#include "tests/daemon/controller/job_controller_test_fixture.h"

namespace tessera::daemon::job_controller_test {
namespace {

class JobControllerReformTest : public JobControllerTest {
 protected:
  void Configure() override { UseSmallProfiles(); }

  api::JobSpec Builtin(const std::string& layout, int devices) {
    api::JobSpec spec = CmdSpec(devices);
    spec.entrypoint = "builtin:colorize-unet";
    spec.layout = layout;
    spec.global_batch = 24;
    spec.min_devices = layout == "data" ? 2 : devices;
    return spec;
  }

  // An agent's long poll from `node`, reporting `workers`, held up to a minute.
  static api::HeartbeatRequest Poll(const api::Node& node, std::vector<api::WorkerStatus> workers) {
    api::HeartbeatRequest poll;
    poll.node = node.name;
    poll.devices = node.devices;
    poll.workers = std::move(workers);
    poll.wait_ms = 60'000;
    return poll;
  }

  // The node holding rank `rank` of the job's attempt.
  std::string NodeOfRank(const std::map<std::string, api::HeartbeatResponse>& desired,
                         int64_t rank) {
    for (const auto& [name, d] : desired) {
      for (const auto& l : d.desired) {
        if (l.key.rank == rank) return name;
      }
    }
    return "";
  }

  // Three one-device nodes a, b, c running a job whose rank `lost_rank`'s
  // node, the victim, is to be lost: each node's desired set, and its ranks
  // reported running.
  struct ThreeNodes {
    api::Node a = MakeNode("a", 1, 20), b = MakeNode("b", 1, 20), c = MakeNode("c", 1, 20);
    api::JobId id = 0;
    std::map<std::string, api::HeartbeatResponse> desired;
    std::string victim;
    std::map<std::string, std::vector<api::WorkerStatus>> runs;
    std::vector<api::Node*> nodes() { return {&a, &b, &c}; }
  };
  void StartOnThree(const api::JobSpec& spec, int64_t lost_rank, ThreeNodes* lab) {
    for (auto* n : lab->nodes()) Beat(*n);
    lab->id = SubmitRunning(spec, lab->nodes(), &lab->desired);
    lab->victim = NodeOfRank(lab->desired, lost_rank);
    for (auto* n : lab->nodes()) lab->runs[n->name] = Running(lab->desired[n->name]);
  }

  // Growth: one-device nodes a and b running a data-parallel job that may
  // grow (min 1 device, compute-bound, 100000 steps: a third device pays),
  // its ranks reporting `at_step` (none when 0); c, a third node, is free.
  struct GrowLab {
    api::Node a = MakeNode("a", 1, 20), b = MakeNode("b", 1, 20), c = MakeNode("c", 1, 20);
    api::JobId id = 0;
    std::map<std::string, api::HeartbeatResponse> desired;
    std::map<std::string, std::vector<api::WorkerStatus>> runs;
  };
  void StartGrowLab(GrowLab* lab, int64_t at_step = 0) {
    for (auto* n : {&lab->a, &lab->b}) Beat(*n);
    api::JobSpec spec = Builtin("data", 3);
    spec.min_devices = 1;
    spec.global_batch = 240;
    spec.steps = 100'000;
    lab->id = SubmitRunning(spec, {&lab->a, &lab->b}, &lab->desired);
    for (auto* n : {&lab->a, &lab->b}) {
      lab->runs[n->name] = Running(lab->desired[n->name]);
      if (at_step == 0) continue;
      for (auto& w : lab->runs[n->name]) w.progress = {{"step", at_step}, {"rank", w.key.rank}};
    }
  }
  // Up to 80 ticks, 250 ms apart, every node of the lab beating, until the
  // job's events say it grew (or, with until_grown false, all 80).
  void TickGrowLab(GrowLab& lab, bool until_grown = true) {
    for (int i = 0; i < 80; ++i) {
      if (until_grown && Reasons(lab.id).find("the job grows") != std::string::npos) return;
      clock_.Advance(milliseconds(250));
      for (auto* n : {&lab.a, &lab.b}) Beat(*n, lab.runs[n->name]);
      Beat(lab.c);
      ASSERT_TRUE(controller_->Tick().ok());
    }
  }

  // A data-parallel job of 3 ranks on ThreeNodes losing rank 2's node, and
  // the two survivors, each reporting its rank waiting to re-form (peer_lost).
  struct LostRankTwo : ThreeNodes {
    std::vector<api::Node*> survivors;
  };
  void StartLosingRankTwo(LostRankTwo* lab) {
    StartOnThree(Builtin("data", 3), 2, lab);
    for (auto* n : lab->nodes()) {
      if (n->name == lab->victim) continue;
      lab->survivors.push_back(n);
      for (auto& w : lab->runs[n->name]) {
        w.progress = {{"event", "peer_lost"}, {"held_step", 3}, {"generation", 0}};
      }
    }
  }

  // Whether the job's events say its survivors went on without the lost rank.
  bool Reformed(api::JobId id) {
    return Reasons(id).find("without it and train") != std::string::npos;
  }

  // Up to 40 rounds `step` apart, each the survivors' agents' `beat(round)`
  // then a tick, until the survivors of `lab` re-formed; asserts they did.
  void TickUntilReformed(const LostRankTwo& lab, milliseconds step,
                         const std::function<void(int round)>& beat) {
    for (int i = 0; i < 40 && !Reformed(lab.id); ++i) {
      clock_.Advance(step);
      beat(i);
      ASSERT_TRUE(controller_->Tick().ok());
    }
    ASSERT_TRUE(Reformed(lab.id)) << Reasons(lab.id);
  }

  // Lets `victim` fall silent while the others beat (reporting `runs`, which
  // the caller may edit) until `done` or 40 rounds of 250 ms.
  void SilenceUntil(const std::vector<api::Node*>& nodes, const std::string& victim,
                    std::map<std::string, std::vector<api::WorkerStatus>>* runs,
                    const std::function<bool()>& done) {
    for (int i = 0; i < 40 && !done(); ++i) {
      clock_.Advance(milliseconds(250));
      for (api::Node* n : nodes) {
        if (n->name != victim) Beat(*n, (*runs)[n->name]);
      }
      ASSERT_TRUE(controller_->Tick().ok());
    }
  }
};

// Data parallel over three nodes; rank 0's node dies. A survivor reports it
// waits to re-form, so the silent node is checked at once; the two survivors
// keep their keys (their agents do not restart them) and get their places in
// a world of two, with a new rendezvous port; the job stays in attempt 1.
TEST_F(JobControllerReformTest, ALostNodesSurvivorsReformInTheSameAttempt) {
  ThreeNodes lab;
  StartOnThree(Builtin("data", 3), 0, &lab);
  const api::JobId id = lab.id;
  ASSERT_EQ(StateOf(id), JobState::kRunning);
  ASSERT_FALSE(lab.victim.empty());
  const std::string old_port = lab.desired[lab.victim].desired[0].env.at("MASTER_PORT");

  for (auto* n : lab.nodes()) {
    for (auto& w : lab.runs[n->name]) w.progress = {{"event", "peer_lost"}, {"held_step", 7}};
  }
  const auto killed = clock_.SteadyNow();
  SilenceUntil(lab.nodes(), lab.victim, &lab.runs, [&] {
    return store_->GetJob(id)->plan.dump().find(lab.victim + ":") == std::string::npos;
  });
  // Checked at once: before the 3 s heartbeat timeout.
  EXPECT_LT(clock_.SteadyNow() - killed, milliseconds(2500));
  const api::Job job = *store_->GetJob(id);
  EXPECT_EQ(job.state, JobState::kRunning) << Reasons(id);
  EXPECT_EQ(job.attempt, 1);
  EXPECT_TRUE(Reformed(id)) << Reasons(id);
  EXPECT_EQ(Reasons(id).find("recovering"), std::string::npos) << Reasons(id);

  std::set<std::string> ranks;
  std::set<std::string> ports;
  for (auto* n : lab.nodes()) {
    if (n->name == lab.victim) continue;
    const api::HeartbeatResponse d = Beat(*n, lab.runs[n->name]);
    ASSERT_EQ(d.desired.size(), 1u) << n->name;
    const api::WorkerLaunch& l = d.desired[0];
    EXPECT_EQ(l.key.attempt, 1);
    EXPECT_EQ(l.key, lab.desired[n->name].desired[0].key) << "same process";
    ASSERT_TRUE(l.reform.is_object()) << n->name;
    EXPECT_EQ(l.reform["generation"], 1);
    EXPECT_EQ(l.reform["env"]["WORLD_SIZE"], "2");
    ranks.insert(l.reform["env"]["RANK"].get<std::string>());
    ports.insert(l.reform["env"]["MASTER_PORT"].get<std::string>());
    EXPECT_EQ(l.reform["plan"]["replicas"].size(), 2u);
  }
  EXPECT_EQ(ranks, (std::set<std::string>{"0", "1"}));
  ASSERT_EQ(ports.size(), 1u);
  EXPECT_NE(*ports.begin(), old_port) << "the old master may still hold its port";

  // A restarted controller adopts the attempt as it runs now: the survivors
  // keep their places, and the lost node, back, is handed nothing.
  RestartController();
  for (auto* n : lab.nodes()) {
    const api::HeartbeatResponse d =
        Beat(*n, n->name == lab.victim ? std::vector<api::WorkerStatus>{} : lab.runs[n->name]);
    if (n->name == lab.victim) {
      EXPECT_TRUE(d.desired.empty()) << "the lost rank is handed again";
      continue;
    }
    ASSERT_EQ(d.desired.size(), 1u) << n->name;
    EXPECT_EQ(d.desired[0].key, lab.desired[n->name].desired[0].key);
    ASSERT_TRUE(d.desired[0].reform.is_object()) << n->name;
    EXPECT_EQ(d.desired[0].reform["generation"], 1);
  }
  ASSERT_TRUE(controller_->Tick().ok());
  EXPECT_EQ(StateOf(id), JobState::kRunning) << Reasons(id);
  EXPECT_EQ(store_->GetJob(id)->attempt, 1);
}

// A survivor's agent parked in a long poll gets its new place at once: a
// re-forming changes no worker key, and still answers the poll.
TEST_F(JobControllerReformTest, AParkedPollOfASurvivorIsAnsweredWithItsNewPlace) {
  LostRankTwo lab;
  StartLosingRankTwo(&lab);
  api::Node& parked = *lab.survivors[0];
  api::Node& beating = *lab.survivors[1];
  std::promise<api::HeartbeatResponse> answered;
  std::future<api::HeartbeatResponse> answer = answered.get_future();
  ASSERT_NO_FATAL_FAILURE(TickUntilReformed(lab, milliseconds(250), [&](int round) {
    if (round == 0) {
      // Its agent's beat is held: it runs exactly what it was told to.
      controller_->OnHeartbeat(Poll(parked, lab.runs[parked.name]),
                               [&](api::HeartbeatResponse r) { answered.set_value(r); });
    }
    Beat(beating, lab.runs[beating.name]);
  }));
  ASSERT_EQ(answer.wait_for(std::chrono::seconds(5)), std::future_status::ready)
      << "the poll waited out its hold";
  const api::HeartbeatResponse got = answer.get();
  ASSERT_EQ(got.desired.size(), 1u);
  EXPECT_TRUE(got.desired[0].reform.is_object());
}

// A re-forming made while a survivor's agent was between beats reaches it with
// its next beat at once: the beat is not parked, though the worker keys it
// reports are what it should run, because it was not told its new place yet.
TEST_F(JobControllerReformTest, ABeatAfterTheReformIsAnsweredAtOnceWithItsNewPlace) {
  LostRankTwo lab;
  StartLosingRankTwo(&lab);
  api::Node& quiet = *lab.survivors[0];
  api::Node& beating = *lab.survivors[1];
  // The re-forming happens in a round's tick, after both beats.
  ASSERT_NO_FATAL_FAILURE(TickUntilReformed(lab, milliseconds(100), [&](int) {
    Beat(quiet, lab.runs[quiet.name]);  // answered at once: wait_ms 0
    Beat(beating, lab.runs[beating.name]);
  }));
  const api::HeartbeatRequest poll = Poll(quiet, lab.runs[quiet.name]);
  std::optional<api::HeartbeatResponse> got;
  controller_->OnHeartbeat(poll, [&](api::HeartbeatResponse r) { got = std::move(r); });
  ASSERT_TRUE(got.has_value()) << "the beat was parked with an order its agent never saw";
  ASSERT_EQ(got->desired.size(), 1u);
  EXPECT_TRUE(got->desired[0].reform.is_object());
  // Told now: its next beat waits for news again.
  bool answered = false;
  controller_->OnHeartbeat(poll, [&](api::HeartbeatResponse) { answered = true; });
  EXPECT_FALSE(answered);
}

// A re-formed rank that fails afterwards restarts the job as before, and the
// event says the attempt had re-formed.
TEST_F(JobControllerReformTest, AReformedRankThatFailsRestartsTheJobAndSaysSo) {
  ThreeNodes lab;
  StartOnThree(Builtin("data", 3), 2, &lab);
  const api::JobId id = lab.id;
  SilenceUntil(lab.nodes(), lab.victim, &lab.runs, [&] { return Reformed(id); });
  ASSERT_TRUE(Reformed(id)) << Reasons(id);
  for (auto* n : lab.nodes()) {
    if (n->name == lab.victim) continue;
    lab.runs[n->name] = Exited(lab.desired[n->name], 1);
    break;
  }
  SilenceUntil(lab.nodes(), lab.victim, &lab.runs,
               [&] { return StateOf(id) != JobState::kRunning; });
  EXPECT_NE(Reasons(id).find("recovering: after re-forming (generation 1): rank"),
            std::string::npos)
      << Reasons(id);
}

// A pipeline whose stage was only on the lost node goes on too: the plan on
// the surviving stage's device and a free one has a new rank take the lost
// layers, which it loads from the newest checkpoint; the event says so.
TEST_F(JobControllerReformTest, APipelineStageOnlyOnTheLostNodeComesFromTheCheckpoint) {
  ThreeNodes lab;
  StartOnThree(Builtin("pipeline", 2), 1, &lab);
  const api::JobId id = lab.id;
  const std::string kept = NodeOfRank(lab.desired, 0);
  api::Node* spare = nullptr;
  for (auto* n : lab.nodes()) {
    if (n->name != lab.victim && n->name != kept) spare = n;
  }
  ASSERT_NE(spare, nullptr);
  SilenceUntil(lab.nodes(), lab.victim, &lab.runs, [&] { return Reformed(id); });
  const std::string reasons = Reasons(id);
  EXPECT_NE(reasons.find("were held only by the lost ranks: the ranks that take them load them "
                         "from the newest checkpoint"),
            std::string::npos)
      << reasons;
  EXPECT_NE(reasons.find("joined by 1 new rank"), std::string::npos) << reasons;
  EXPECT_EQ(StateOf(id), JobState::kRunning) << reasons;
  const api::HeartbeatResponse on_spare = Beat(*spare);
  ASSERT_EQ(on_spare.desired.size(), 1u) << reasons;
  EXPECT_EQ(on_spare.desired[0].key.attempt, 1);
  EXPECT_TRUE(on_spare.desired[0].reform.is_object());
}

// A lab's script cannot re-form its process group: restart, and say so.
TEST_F(JobControllerReformTest, AScriptJobIsRestartedAndTheEventSaysWhy) {
  ThreeNodes lab;
  StartOnThree(CmdSpec(2), 1, &lab);
  const api::JobId id = lab.id;
  SilenceUntil(lab.nodes(), lab.victim, &lab.runs,
               [&] { return StateOf(id) != JobState::kRunning; });
  EXPECT_NE(Reasons(id).find("runs its own script, which cannot re-form"), std::string::npos)
      << Reasons(id);
}

// A rank's collective fails though no node is lost (a connection that broke
// under load): it waits to re-form (peer_lost) while every node still beats.
// Once each has beaten since, the ranks re-form in place, in the same attempt,
// on the same devices, instead of the waiting rank giving up after its
// collective timeout and failing the attempt; at most twice an attempt (a
// third wait is left to the rank's timeout, as before).
TEST_F(JobControllerReformTest, ARankThatLostAPeerWhileEveryNodeAnswersRegroupsInPlace) {
  ThreeNodes lab;
  StartOnThree(Builtin("data", 3), 2, &lab);
  const api::JobId id = lab.id;
  const api::Node* waiter = nullptr;
  for (auto* n : lab.nodes()) {
    if (n->name == lab.victim) waiter = n;  // rank 2's node: nothing is lost
  }
  ASSERT_NE(waiter, nullptr);
  auto regroups = [&] { return EventsSaying(id, "lost a peer while every node"); };
  for (int round = 1; round <= 3; ++round) {
    SCOPED_TRACE("wait " + std::to_string(round));
    for (auto& w : lab.runs[waiter->name]) {
      w.progress = {{"event", "peer_lost"}, {"held_step", 3}, {"generation", round - 1}};
    }
    for (int i = 0; i < 12 && regroups() < round; ++i) {
      clock_.Advance(milliseconds(250));
      for (auto* n : lab.nodes()) Beat(*n, lab.runs[n->name]);
      ASSERT_TRUE(controller_->Tick().ok());
    }
    const api::Job job = *store_->GetJob(id);
    EXPECT_EQ(job.state, JobState::kRunning) << Reasons(id);
    EXPECT_EQ(job.attempt, 1);
    EXPECT_EQ(Reasons(id).find("recovering"), std::string::npos) << Reasons(id);
    if (round == 3) {
      EXPECT_EQ(regroups(), 2) << "a third wait is left to the rank's timeout: " << Reasons(id);
      break;
    }
    ASSERT_EQ(regroups(), round) << Reasons(id);
    EXPECT_NE(Reasons(id).find("rank 2 on " + waiter->name + " lost a peer"), std::string::npos)
        << Reasons(id);
    // Every rank keeps its process and device, and gets the new world's place.
    for (auto* n : lab.nodes()) {
      const api::HeartbeatResponse d = Beat(*n, lab.runs[n->name]);
      ASSERT_EQ(d.desired.size(), 1u) << n->name;
      EXPECT_EQ(d.desired[0].key, lab.desired[n->name].desired[0].key) << "same process";
      ASSERT_TRUE(d.desired[0].reform.is_object()) << n->name;
      EXPECT_EQ(d.desired[0].reform["generation"], round);
      EXPECT_EQ(d.desired[0].reform["env"]["WORLD_SIZE"], "3");
    }
    // Its older line, still the newest it reported, is of the world before.
    for (int i = 0; i < 8; ++i) {
      clock_.Advance(milliseconds(250));
      for (auto* n : lab.nodes()) Beat(*n, lab.runs[n->name]);
      ASSERT_TRUE(controller_->Tick().ok());
    }
    EXPECT_EQ(regroups(), round) << Reasons(id);
  }
}

// A node that is lost while a rank waits goes the node-loss way (the
// survivors re-form without it), not a regroup in place; nor do the
// survivors' lines of the world before, still their newest for a while.
TEST_F(JobControllerReformTest, ASilentNodeIsLostNotRegrouped) {
  LostRankTwo lab;
  StartLosingRankTwo(&lab);
  ASSERT_NO_FATAL_FAILURE(TickUntilReformed(lab, milliseconds(250), [&](int) {
    for (auto* n : lab.survivors) Beat(*n, lab.runs[n->name]);
  }));
  for (int i = 0; i < 12; ++i) {
    clock_.Advance(milliseconds(250));
    for (auto* n : lab.survivors) Beat(*n, lab.runs[n->name]);
    ASSERT_TRUE(controller_->Tick().ok());
  }
  EXPECT_EQ(Reasons(lab.id).find("lost peers while every node"), std::string::npos)
      << Reasons(lab.id);
  EXPECT_EQ(Reasons(lab.id).find("lost a peer while every node"), std::string::npos)
      << Reasons(lab.id);
}

// Elastic training: a device that becomes free (a node joins) while no job
// waits is taken by a running train job whose plan with it is faster: the
// running ranks keep their keys and get their places in a world of three, the
// new device gets a new rank of the same attempt that joins with its place.
TEST_F(JobControllerReformTest, ARunningTrainJobGrowsOntoAFreeDeviceWhenNoJobWaits) {
  GrowLab lab;
  StartGrowLab(&lab);
  auto& [a, b, c, id, desired, runs] = lab;
  ASSERT_EQ(store_->GetJob(id)->plan["replicas"].size(), 2u);
  TickGrowLab(lab);
  const std::string reasons = Reasons(id);
  ASSERT_NE(reasons.find("devices c:0 are free: the job grows"), std::string::npos) << reasons;
  EXPECT_NE(reasons.find("joined by 1 new rank (rank 2)"), std::string::npos) << reasons;
  const api::Job job = *store_->GetJob(id);
  EXPECT_EQ(job.state, JobState::kRunning);
  EXPECT_EQ(job.attempt, 1);
  EXPECT_EQ(job.plan["replicas"].size(), 3u);
  // Its agent starts the new rank after its next beat: not yet reported is
  // not gone.
  for (int i = 0; i < 4; ++i) {
    clock_.Advance(milliseconds(250));
    for (auto* n : {&a, &b}) Beat(*n, runs[n->name]);
    Beat(c);
    ASSERT_TRUE(controller_->Tick().ok());
  }
  EXPECT_EQ(StateOf(id), JobState::kRunning) << Reasons(id);
  const api::HeartbeatResponse on_c = Beat(c);
  ASSERT_EQ(on_c.desired.size(), 1u);
  EXPECT_EQ(on_c.desired[0].key.attempt, 1);
  EXPECT_EQ(on_c.desired[0].key.rank, 2);
  ASSERT_TRUE(on_c.desired[0].reform.is_object());
  EXPECT_EQ(on_c.desired[0].reform["env"]["WORLD_SIZE"], "3");
  for (auto* n : {&a, &b}) {
    const api::HeartbeatResponse d = Beat(*n, runs[n->name]);
    ASSERT_EQ(d.desired.size(), 1u);
    EXPECT_EQ(d.desired[0].key, desired[n->name].desired[0].key);
    EXPECT_EQ(d.desired[0].reform["generation"], 1);
  }
}

// Growth keeps to the user's device limit (users: max_devices): a job of a
// user allowed two devices, on two, does not grow onto a free third; allowed
// three, it does. (It grew past the limit before: only the queue and the
// share round read the limits.)
TEST_F(JobControllerReformTest, GrowthKeepsToTheUsersDeviceLimit) {
  for (const int64_t limit : {2, 3}) {
    SCOPED_TRACE("max_devices " + std::to_string(limit));
    TearDown();
    scheduler::UserPolicy alice;
    alice.max_devices = limit;
    options_.users.users = {{"alice", alice}};
    SetUp();
    GrowLab lab;
    StartGrowLab(&lab);
    ASSERT_EQ(store_->GetJob(lab.id)->plan["replicas"].size(), 2u);
    TickGrowLab(lab, /*until_grown=*/limit > 2);
    const size_t replicas = store_->GetJob(lab.id)->plan["replicas"].size();
    EXPECT_EQ(replicas, limit > 2 ? 3u : 2u) << Reasons(lab.id);
    EXPECT_EQ(Reasons(lab.id).find("the job grows") != std::string::npos, limit > 2)
        << Reasons(lab.id);
  }
}

// A job its user's limit holds (bob may hold one device; his job needs two)
// does not wait for free devices, so it does not stop a running job from
// growing onto one (it did: every pending job stopped growth).
TEST_F(JobControllerReformTest, AJobItsUsersLimitHoldsDoesNotStopGrowth) {
  TearDown();
  options_.users.users["bob"].max_devices = 1;
  SetUp();
  GrowLab lab;
  StartGrowLab(&lab);
  const api::JobId bobs = Submit(CmdSpec(2), "bob");
  TickGrowLab(lab);
  EXPECT_NE(Reasons(lab.id).find("devices c:0 are free: the job grows"), std::string::npos)
      << Reasons(lab.id);
  EXPECT_EQ(StateOf(bobs), JobState::kPending) << store_->GetJob(bobs)->reason;
  std::string why;
  for (const api::QueueRow& row : controller_->Queue()) {
    if (row.id == bobs) why = row.reason;
  }
  EXPECT_NE(why.find("limit"), std::string::npos) << "the queue says bob's limit holds it: " << why;
}

// Rank 0 of a re-formed world still hosts the rendezvous store of the world
// it left (abandoned, not destroyed), so that port stays taken for as long as
// its process runs: a job grows onto b (a new port), runs on for minutes while
// another job is placed, and grows onto c; the third world's port is neither
// of the two before. (It was
// given the first world's port once the old master had been remembered for a
// minute, and its rank 0 failed to listen: a failed attempt.)
TEST_F(JobControllerReformTest, AReformNeverReusesAPortTheRunningRankZeroStillHolds) {
  api::Node a = MakeNode("a", 1, 20), b = MakeNode("b", 1, 20), c = MakeNode("c", 1, 20);
  api::JobSpec spec = Builtin("data", 3);
  spec.min_devices = 1;
  spec.global_batch = 240;
  spec.steps = 100'000;
  std::map<std::string, api::HeartbeatResponse> desired;
  Beat(a);
  const api::JobId id = SubmitRunning(spec, {&a}, &desired);
  const std::string first = desired["a"].desired.at(0).env.at("MASTER_PORT");
  std::vector<api::Node*> nodes = {&a};
  // Every node runs what it is asked to, rank 0's place read from a's answer.
  auto tick = [&](milliseconds step) {
    clock_.Advance(step);
    for (api::Node* n : nodes) desired[n->name] = Beat(*n, Running(desired[n->name]));
    ASSERT_TRUE(controller_->Tick().ok());
  };
  auto port_now = [&] {
    const api::WorkerLaunch& rank0 = desired["a"].desired.at(0);
    return rank0.reform.is_object() ? rank0.reform["env"]["MASTER_PORT"].get<std::string>()
                                    : rank0.env.at("MASTER_PORT");
  };
  auto grow_onto = [&](api::Node* n, size_t replicas) {
    nodes.push_back(n);
    for (int i = 0; i < 80 && store_->GetJob(id)->plan["replicas"].size() < replicas; ++i) {
      tick(milliseconds(250));
    }
    ASSERT_EQ(store_->GetJob(id)->plan["replicas"].size(), replicas) << Reasons(id);
    tick(milliseconds(250));  // a's answer with its new place
  };
  grow_onto(&b, 2);
  const std::string second = port_now();
  EXPECT_NE(second, first);
  for (int i = 0; i < 90; ++i) tick(std::chrono::seconds(1));  // minutes of training on two
  // Another job is placed meanwhile (a pass that prunes the ended masters).
  api::Node d = MakeNode("d", 1, 20);
  nodes.push_back(&d);
  tick(milliseconds(250));
  const api::JobId other = Submit(CmdSpec(1), "bob");
  for (int i = 0; i < 8 && StateOf(other) != JobState::kRunning; ++i) tick(milliseconds(250));
  ASSERT_EQ(StateOf(other), JobState::kRunning) << Reasons(other);
  grow_onto(&c, 3);
  const std::string third = port_now();
  EXPECT_NE(third, first) << "the first world's store still listens in rank 0";
  EXPECT_NE(third, second);
  EXPECT_EQ(store_->GetJob(id)->attempt, 1);
}

// One free device, two running jobs that would both grow onto it: one of them
// gets it (once tesserad gave the same device to both in one check, and their
// ranks shared it until one crashed).
TEST_F(JobControllerReformTest, AFreeDeviceGoesToOneGrowingJobOnly) {
  api::Node a = MakeNode("a", 1, 20), b = MakeNode("b", 1, 20), c = MakeNode("c", 1, 20);
  api::JobSpec spec = Builtin("data", 3);
  spec.min_devices = 1;
  spec.global_batch = 240;  // compute-bound: a second device pays for either job
  spec.steps = 100'000;
  std::map<std::string, api::HeartbeatResponse> desired;
  Beat(a);
  const api::JobId first = SubmitRunning(spec, {&a}, &desired);
  Beat(b);
  const api::JobId second = SubmitRunning(spec, {&b}, &desired);
  ASSERT_EQ(store_->GetJob(first)->plan["replicas"].size(), 1u);
  ASSERT_EQ(store_->GetJob(second)->plan["replicas"].size(), 1u);
  std::map<std::string, std::vector<api::WorkerStatus>> runs;
  for (auto* n : {&a, &b}) runs[n->name] = Running(desired[n->name]);
  auto grew = [&](api::JobId id) {
    return Reasons(id).find("devices c:0 are free: the job grows") != std::string::npos;
  };
  for (int i = 0; i < 80 && !grew(first) && !grew(second); ++i) {
    clock_.Advance(milliseconds(250));
    for (auto* n : {&a, &b}) Beat(*n, runs[n->name]);
    Beat(c);
    ASSERT_TRUE(controller_->Tick().ok());
  }
  ASSERT_TRUE(grew(first) || grew(second)) << Reasons(first) << Reasons(second);
  EXPECT_FALSE(grew(first) && grew(second)) << Reasons(first) << Reasons(second);
  const api::HeartbeatResponse on_c = Beat(c);
  ASSERT_EQ(on_c.desired.size(), 1u);
  EXPECT_EQ(on_c.desired[0].key.job_id, grew(first) ? first : second);
}

// The ranks of a job that grew made their last step before the re-form took
// effect (the order came as that step ran) and exited: the job is done, and
// the rank that was to join (it waits for a world that never forms, or has
// given up on it) is stopped, not counted as a failure. A rank that exits
// short of the last step is no such end.
TEST_F(JobControllerReformTest, AJobWhoseRanksFinishBeforeItsGrowthTookEffectSucceeds) {
  struct Row {
    const char* name;
    int64_t last_step;   // of the old world's ranks, which exit 0
    bool joiner_failed;  // the joining rank exited 1 (its rendezvous timed out)
    bool succeeds;
  };
  const Row rows[] = {
      {"finished, joiner still waiting", 100'000, false, true},
      {"finished, joiner gave up", 100'000, true, true},
      {"short of the last step", 99'000, false, false},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    if (&row != rows) {  // a fresh store and controller for each row
      TearDown();
      SetUp();
    }
    GrowLab lab;
    StartGrowLab(&lab);
    auto& [a, b, c, id, desired, runs] = lab;
    TickGrowLab(lab);
    ASSERT_NE(Reasons(id).find("devices c:0 are free: the job grows"), std::string::npos);
    const api::HeartbeatResponse on_c = Beat(c);
    ASSERT_EQ(on_c.desired.size(), 1u);
    std::vector<api::WorkerStatus> joiner = row.joiner_failed ? Exited(on_c, 1) : Running(on_c);
    for (auto* n : {&a, &b}) {
      runs[n->name] = Exited(desired[n->name], 0);
      for (auto& w : runs[n->name]) {
        w.progress = {{"step", row.last_step}, {"generation", 0}, {"rank", w.key.rank}};
      }
    }
    clock_.Advance(milliseconds(250));
    for (auto* n : {&a, &b}) Beat(*n, runs[n->name]);
    Beat(c, joiner);
    ASSERT_TRUE(controller_->Tick().ok());
    const std::string reasons = Reasons(id);
    if (row.succeeds) {
      EXPECT_EQ(StateOf(id), JobState::kSucceeded) << reasons;
      EXPECT_NE(reasons.find("all 100000 steps done in generation 0, before the re-form to "
                             "generation 1 took effect; rank 2 of generation 1 stopped"),
                std::string::npos)
          << reasons;
      EXPECT_EQ(reasons.find("recovering"), std::string::npos) << reasons;
      EXPECT_TRUE(Beat(c, joiner).desired.empty());
    } else {
      EXPECT_EQ(StateOf(id), JobState::kRunning) << reasons;
    }
  }
}

// A job about to end does not grow: the time a third device saves over its
// remaining steps does not pay for the re-form (move_cost_s before any is
// measured); the same job with more steps left grows (the test above).
TEST_F(JobControllerReformTest, AJobAboutToEndDoesNotGrow) {
  GrowLab lab;
  StartGrowLab(&lab, /*at_step=*/99'990);
  TickGrowLab(lab, /*until_grown=*/false);
  const api::JobId id = lab.id;
  EXPECT_EQ(Reasons(id).find("the job grows"), std::string::npos) << Reasons(id);
  EXPECT_EQ(store_->GetJob(id)->plan["replicas"].size(), 2u);
}

// Growth keeps a running rank: a job alone on a slow device, whose best plan
// on its device and a free one ten times faster uses only the fast one, does
// not "grow" onto it (its new rank would read the last checkpoint and redo the
// steps since); the same job on a device worth keeping grows (the tests above).
TEST_F(JobControllerReformTest, GrowthThatKeepsNoRunningRankIsNotMade) {
  api::Node slow = Joined("a", 1, 2), fast = MakeNode("c", 1, 200);
  std::map<std::string, api::HeartbeatResponse> desired;
  api::JobSpec spec = Builtin("data", 2);
  spec.min_devices = 1;
  spec.global_batch = 240;
  spec.steps = 100'000;
  const api::JobId id = SubmitRunning(spec, {&slow}, &desired);
  const std::vector<api::WorkerStatus> runs = Running(desired["a"]);
  for (int i = 0; i < 80; ++i) {
    clock_.Advance(milliseconds(250));
    Beat(slow, runs);
    Beat(fast);
    ASSERT_TRUE(controller_->Tick().ok());
  }
  EXPECT_EQ(Reasons(id).find("the job grows"), std::string::npos) << Reasons(id);
  EXPECT_TRUE(Beat(fast).desired.empty());
}

// Free devices go to waiting jobs first: GrowTraining grows nothing while one
// waits. (The share policy, off here, may grow a running job onto a device the
// waiting job cannot use: JobControllerShareTest.
// ARunningJobGrowsOntoADeviceTheWaitingJobCannotUse.)
TEST_F(JobControllerReformTest, NoGrowthWhileAJobWaits) {
  options_.share_running_jobs = false;
  RestartController();
  GrowLab lab;
  StartGrowLab(&lab);
  const api::JobId id = lab.id;
  const api::JobId waiting = Submit(CmdSpec(4));  // needs more than the cluster has free
  TickGrowLab(lab, /*until_grown=*/false);
  EXPECT_EQ(StateOf(waiting), JobState::kPending);
  EXPECT_EQ(Reasons(id).find("the job grows"), std::string::npos) << Reasons(id);
  EXPECT_EQ(store_->GetJob(id)->plan["replicas"].size(), 2u);
}

}  // namespace
}  // namespace tessera::daemon::job_controller_test
