// JobController: placement and the queue (gangs, priority, backfill, ports,
// previews, builtin models' profiles, planning off the lock) and heartbeats
// (long polls). Fixture in job_controller_test_fixture.h.
#include "daemon/controller/job_controller.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "daemon/controller/profile_cache.h"
#include "scheduler/model_profile.h"
#include "tests/daemon/controller/job_controller_test_fixture.h"

namespace tessera::daemon::job_controller_test {
namespace {

TEST_F(JobControllerTest, PlacesGangAndHandsEachNodeItsRanks) {
  api::Node a = Joined("a", 2, 20), b = MakeNode("b", 1, 20);
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

TEST_F(JobControllerTest, PriorityThenFifoAndBackfillNeverDelaysHead) {
  api::Node a = Joined("a", 2, 20);
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
  api::Node a = Joined("a", 3, 20);
  api::JobId running = Submit(CmdSpec(2));
  ASSERT_TRUE(controller_->Tick().ok());
  ASSERT_EQ(StateOf(running), JobState::kStarting);
  // Head needs 3 devices (only 1 free). A one-device job would hold a
  // device the head needs once `running` ends: refused. Shrink the cluster
  // question: a 4th device on another node makes the backfill harmless.
  api::Node b = Joined("b", 1, 20);
  api::JobId head = Submit(CmdSpec(3, 3, 5));
  api::JobId small = Submit(CmdSpec(1));
  ASSERT_TRUE(controller_->Tick().ok());
  // Head (3) fits on the 4 devices minus small's 1 once `running` ends.
  EXPECT_EQ(StateOf(small), JobState::kStarting);
  EXPECT_EQ(StateOf(head), JobState::kPending);
}

// Bob's job needs 2 of a's 3 devices: alice's two running train jobs hold a:0
// (10 s left at its observed rate) and a:1 (hours left), a:2 is free. Carol's
// 1-device job behind it takes a:2 only if it ends within those 10 s: else,
// by the time a:0 frees, it would still hold the device bob's job needs (and
// the next small job would do the same, pass after pass).
TEST_F(JobControllerTest, BehindAGangJobOnlyJobsThatEndBeforeItCanStartBackfill) {
  struct Row {
    const char* name;
    int64_t carols_steps;
    JobState carols;
  };
  const Row rows[] = {
      {"carol's job would run past bob's start: it waits", 100000, JobState::kPending},
      {"carol's job ends first: it starts", 1, JobState::kStarting},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    SetUp();
    UseSmallProfiles();
    RestartController();
    api::Node a = Joined("a", 3, 20);
    auto train = [](int devices, int64_t steps) {
      api::JobSpec s = CmdSpec(devices);
      s.entrypoint = "builtin:colorize-unet";
      s.steps = steps;
      return s;
    };
    std::map<std::string, api::HeartbeatResponse> desired;
    const api::JobId ending = SubmitRunning(train(1, 1000), {&a}, &desired);
    const api::JobId long_one = SubmitRunning(train(1, 100000), {&a}, &desired);
    std::vector<api::WorkerStatus> workers = Running(Beat(a));
    for (api::WorkerStatus& w : workers) {
      // 10 steps of 12 samples left at 12 samples/s; hours for the other.
      w.progress = w.key.job_id == ending ? api::Json{{"step", 990}, {"samples_per_s", 12}}
                                          : api::Json{{"step", 1}, {"samples_per_s", 12}};
    }
    Beat(a, workers);
    ASSERT_TRUE(controller_->Tick().ok());
    ASSERT_EQ(StateOf(long_one), JobState::kRunning);
    const api::JobId gang = Submit(train(2, 100), "bob");
    const api::JobId small = Submit(train(1, row.carols_steps), "carol");
    ASSERT_TRUE(controller_->Tick().ok());
    EXPECT_EQ(StateOf(gang), JobState::kPending);
    EXPECT_EQ(StateOf(small), row.carols) << controller_->WaitingReason(small);
    if (row.carols == JobState::kPending) {
      EXPECT_NE(
          controller_->WaitingReason(small).find("waiting behind job " + std::to_string(gang)),
          std::string::npos)
          << controller_->WaitingReason(small);
    }
    TearDown();
  }
}

// Every device busy: a job that arrives now is still given its place's
// reason with its predicted start, and the estimate follows the running job's
// progress (nothing can be placed, but a pass runs once a second; the reason
// once stayed empty, "every device is busy", until a device freed up). The
// running job's devices free up at its predicted end though its agent reports
// them busy (they once stayed busy there, and no start was ever predicted).
TEST_F(JobControllerTest, WhileEveryDeviceIsBusyTheHeadsPredictedStartKeepsUp) {
  UseSmallProfiles();
  RestartController();
  api::Node a = Joined("a", 2, 20);
  api::JobSpec spec = CmdSpec(2);
  spec.entrypoint = "builtin:colorize-unet";
  spec.steps = 1000;
  std::map<std::string, api::HeartbeatResponse> desired;
  const api::JobId running = SubmitRunning(spec, {&a}, &desired);
  for (api::Device& d : a.devices) d.busy = true;  // as its agent says: its ranks run there
  // The job's progress as the control plane records it from the beats: 12
  // samples a step at 12 samples/s, a step a second.
  auto report = [&](int64_t step) {
    ProgressReport progress;
    progress.latest[running] = {{"step", step}, {"samples_per_s", 12}};
    ASSERT_TRUE(store_->RecordProgress(progress).ok());
    Beat(a, Running(desired["a"]));
  };
  report(100);
  const api::JobId waiting = Submit(spec, "bob");
  clock_.Advance(std::chrono::seconds(1));
  ASSERT_TRUE(controller_->Tick().ok());
  ASSERT_EQ(StateOf(running), JobState::kRunning);
  const std::string first = controller_->WaitingReason(waiting);
  EXPECT_NE(first.find("can start in about 15 min"), std::string::npos) << first;
  report(700);  // 300 steps left: 5 min
  clock_.Advance(std::chrono::seconds(1));
  ASSERT_TRUE(controller_->Tick().ok());
  const std::string later = controller_->WaitingReason(waiting);
  EXPECT_NE(later.find("can start in about 5 min"), std::string::npos) << later;
  const std::vector<api::QueueRow> queue = controller_->Queue();
  ASSERT_EQ(queue.size(), 1u);
  EXPECT_EQ(queue[0].reason, later);
}

TEST_F(JobControllerTest, CancelledJobLeavesDesiredSet) {
  api::Node a = Joined("a", 1, 20);
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
  api::Node a = Joined("a", 1, 20);
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

TEST_F(JobControllerTest, PreviewShowsPlansWithoutPlacing) {
  api::Node a = Joined("a", 2, 20);
  auto preview = controller_->Preview(CmdSpec(2));
  ASSERT_TRUE(preview.ok()) << preview.status().ToString();
  ASSERT_FALSE((*preview)["plans"].empty());
  EXPECT_EQ((*preview)["plans"][0]["layout"], "data");
  auto none = controller_->Preview(CmdSpec(5));
  EXPECT_FALSE(none.ok());
}

TEST_F(JobControllerTest, HeartbeatsAreAnsweredWhileAPlanIsBeingMade) {
  // The profile lookup blocks until released: a plan that takes as long as
  // the test wants.
  std::promise<void> entered, release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<bool> first{true};
  options_.profiles = [&](const ProfileTarget& target) -> Result<scheduler::ModelProfile> {
    if (first.exchange(false)) {
      entered.set_value();
      released.wait();
    }
    return SmallProfile(target.model);
  };
  controller_ = std::make_unique<JobController>(store_.get(), &clock_, options_);
  api::Node a = Joined("a", 2, 20);
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
  api::Node a = Joined("a", 1, 20);
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
    // Heartbeats alone change nothing the planner sees, nor do the samples
    // each one carries (a device's utilization and memory in use).
    a.devices[0].utilization = 0.2 * i;
    a.devices[0].memory_used_bytes = (i + 1) << 20;
    Beat(a);
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
  options_.profiles = [&ready](const ProfileTarget& target) -> Result<scheduler::ModelProfile> {
    const std::string& model = target.model;
    if (model != "colorize-unet") return NotFound("no builtin model \"" + model + "\"");
    if (!ready) return MeasuringProfile(25);
    return SmallProfile(model);
  };
  controller_ = std::make_unique<JobController>(store_.get(), &clock_, options_);
  api::Node a = Joined("a", 3, 20);  // one device stays free for the GAN job
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

// A model: entrypoint's train job is planned by the layers of its registered
// file (the profile lookup is asked for that file, with the job's loss), so a
// pipeline is cut at layer boundaries; its infer jobs stay opaque.
TEST_F(JobControllerTest, AModelEntrypointsTrainJobIsPlannedByItsFilesLayers) {
  ASSERT_TRUE(store_->PutEntrypoint({"model:lab-seq", "/srv/models/seq.pt", "test"}).ok());
  std::vector<ProfileTarget> asked;
  options_.profiles = [&asked](const ProfileTarget& target) -> Result<scheduler::ModelProfile> {
    asked.push_back(target);
    return SmallProfile(target.is_file() ? "seq" : target.model);
  };
  controller_ = std::make_unique<JobController>(store_.get(), &clock_, options_);
  api::Node a = Joined("a", 2, 20);
  api::JobSpec spec = CmdSpec(2);
  spec.entrypoint = "model:lab-seq";
  spec.kind = api::JobKind::kTrain;
  spec.dataset = "/data/pairs";
  spec.layout = "pipeline";
  spec.args = {"--loss=l1", "--lr", "0.01"};
  api::JobId id = Submit(spec);
  ASSERT_TRUE(controller_->Tick().ok());
  ASSERT_EQ(StateOf(id), JobState::kStarting) << controller_->WaitingReason(id);
  ASSERT_FALSE(asked.empty());
  EXPECT_EQ(asked.back().model_file, "/srv/models/seq.pt");
  EXPECT_EQ(asked.back().options, (std::vector<std::string>{"--loss", "l1"}));
  auto d = Beat(a);
  ASSERT_EQ(d.desired.size(), 2u);
  EXPECT_EQ(d.desired[0].argv[1], "train");
  EXPECT_EQ(d.desired[0].argv[3], "/srv/models/seq.pt");
  const api::Json& plan = d.desired[0].plan;
  EXPECT_EQ(plan["layout"], "pipeline");
  ASSERT_EQ(plan["replicas"].size(), 1u);
  const api::Json& stages = plan["replicas"][0]["stages"];
  ASSERT_EQ(stages.size(), 2u);
  EXPECT_EQ(stages[0]["layers"][0].get<int>(), 0);
  EXPECT_EQ(stages[0]["layers"][1].get<int>(), stages[1]["layers"][0].get<int>());
  EXPECT_EQ(stages[1]["layers"][1].get<int>(), 4);

  // An infer job of the same entrypoint asks for no profile.
  const size_t before = asked.size();
  api::JobSpec infer = spec;
  infer.kind = api::JobKind::kInfer;
  infer.layout = "auto";
  infer.args.clear();
  infer.output = "/data/out";
  infer.min_devices = infer.max_devices = 1;
  Beat(MakeNode("b", 1, 20));
  auto preview = controller_->Preview(infer);
  ASSERT_TRUE(preview.ok()) << preview.status().ToString();
  EXPECT_EQ(asked.size(), before);
}

// Profiles learn from the steps ranks report: a data-parallel colorize job on
// a (20 TFLOPS) and b (10 TFLOPS), whose profile skews b's type 1.7x slow.
class ObservedComputeTest : public JobControllerTest {
 protected:
  void Configure() override {
    options_.profiles = [this](const ProfileTarget& target) -> Result<scheduler::ModelProfile> {
      scheduler::ModelProfile p = SmallProfile(target.model);
      if (measured_again_) p.name += " (measured again)";
      return p;
    };
  }

  // Starts the job on a and b, then adds another pair c, d of the same types
  // for dry runs of the same spec.
  void Start() {
    controller_ = std::make_unique<JobController>(store_.get(), &clock_, options_);
    Beat(a_);
    Beat(b_);
    spec_ = CmdSpec(2);
    spec_.entrypoint = "builtin:colorize-unet";
    spec_.layout = "data";
    spec_.global_batch = 60;
    const api::JobId id = Submit(spec_);
    ASSERT_TRUE(controller_->Tick().ok());
    ASSERT_EQ(StateOf(id), JobState::kStarting);
    plan_ = store_->GetJob(id)->plan;
    Beat(MakeNode("c", 1, 20));
    Beat(MakeNode("d", 1, 10));
    ASSERT_TRUE(controller_->Tick().ok());
  }

  // Steps first..last of both ranks: a's compute as its stage predicted, b's
  // at 1/1.7 of it.
  void ReportSteps(int64_t first, int64_t last) {
    for (int64_t step = first; step <= last; ++step) {
      for (const api::Node* node : {&a_, &b_}) {
        std::vector<api::WorkerStatus> workers = Running(Beat(*node));
        for (api::WorkerStatus& w : workers) {
          for (const auto& r : plan_["replicas"]) {
            const api::Json& st = r["stages"][0];
            if (!st["devices"][0].get<std::string>().starts_with(node->name + ":")) continue;
            const double truth = node->name == "b" ? b_truth_ : 1.0;
            const double work = st["compute_s"].get<double>() * truth;
            w.progress = {{"step", step}, {"compute_s", work * host_wait_}, {"samples_per_s", 100}};
            if (cpu_per_work_ > 0) w.progress["compute_cpu_s"] = work * cpu_per_work_;
          }
        }
        Beat(*node, workers);
      }
    }
  }

  // A dry run's plan of the spec (on c and d).
  api::Json Previewed() {
    auto p = controller_->Preview(spec_);
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    return p.ok() ? (*p)["plans"][0] : api::Json();
  }

  // The samples of `plan` on devices of nodes starting with `prefix`.
  static int64_t ShareOf(const api::Json& plan, const std::string& prefix) {
    int64_t share = 0;
    for (const auto& r : plan["replicas"]) {
      const std::string device = r["stages"][0]["devices"][0].get<std::string>();
      if (device.starts_with(prefix)) share += r["batch"].get<int64_t>();
    }
    return share;
  }

  // The compute_scale the plan assumed for the replica on `prefix`'s device.
  static double ScaleOf(const api::Json& plan, const std::string& prefix) {
    for (const auto& r : plan["replicas"]) {
      const api::Json& st = r["stages"][0];
      if (st["devices"][0].get<std::string>().starts_with(prefix)) {
        return st["compute_scale"].get<double>();
      }
    }
    return 0;
  }

  api::Node a_ = MakeNode("a", 1, 20), b_ = MakeNode("b", 1, 10);
  double b_truth_ = 1 / 1.7;  // b's compute over its profile's
  double host_wait_ = 1.0;    // each step's compute_s over the rank's own work
  double cpu_per_work_ = 0;   // its compute_cpu_s per second of work (0: not reported)
  api::JobSpec spec_;
  api::Json plan_;
  bool measured_again_ = false;
};

// After a few dozen steps the same job on another pair of the same types is
// planned with a larger share on the corrected type, at the corrected scale.
TEST_F(ObservedComputeTest, ObservedComputeCorrectsTheProfileAndLaterPlans) {
  Start();
  const int64_t before = ShareOf(plan_, "b:");
  ASSERT_GT(before, 0) << plan_.dump();
  EXPECT_EQ(ShareOf(Previewed(), "d:"), before) << "nothing observed yet";
  ReportSteps(1, 30);
  const api::Json after = Previewed();
  EXPECT_GT(ShareOf(after, "d:"), before) << "the corrected type gets more of the 60 samples";
  EXPECT_NEAR(ScaleOf(after, "d:"), 1 / 1.7, 0.02) << after.dump();
  EXPECT_NEAR(ScaleOf(after, "c:"), 1.0, 0.02) << after.dump();
}

// The skew is beyond kContradictedFactor: once a full window of steps says
// so, the profile is measured again (asked once, naming the factor); when the
// new profile is in use its corrections start afresh (scale 1 again, they
// were against the old one), and more contradicting steps ask nothing more.
TEST_F(ObservedComputeTest, AContradictedProfileIsMeasuredAgainOnce) {
  std::vector<std::string> asked;
  options_.remeasure_profile = [&](const ProfileTarget& target, const std::string& why) {
    asked.push_back(target.model + ": " + why);
    return true;
  };
  Start();
  ReportSteps(1, 12);  // fewer than a window: not yet
  ASSERT_TRUE(controller_->Tick().ok());
  EXPECT_TRUE(asked.empty());
  ReportSteps(13, 30);
  ASSERT_TRUE(controller_->Tick().ok());
  ASSERT_EQ(asked.size(), 1u);
  EXPECT_NE(asked[0].find("colorize-unet: "), std::string::npos) << asked[0];
  EXPECT_NE(asked[0].find("at 0.59x its prediction over 24 steps"), std::string::npos) << asked[0];
  EXPECT_NEAR(ScaleOf(Previewed(), "d:"), 1 / 1.7, 0.02) << "the old profile, still corrected";
  measured_again_ = true;
  ASSERT_TRUE(controller_->Tick().ok());
  EXPECT_DOUBLE_EQ(ScaleOf(Previewed(), "d:"), 1.0) << "corrections start afresh";
  ReportSteps(31, 60);
  ASSERT_TRUE(controller_->Tick().ok());
  EXPECT_EQ(asked.size(), 1u) << "asked once per profile";
  EXPECT_NEAR(ScaleOf(Previewed(), "d:"), 1 / 1.7, 0.02) << "learned again";
}

// On emulated devices that hold (speed 0.5), a busy host stretches every
// step 2.5x (the ranks wait for cores) while their own work (CPU seconds over
// the speed) is what the profile says: plans take the slower steps, and the
// profile is not measured again (on that host it would measure the
// contention). Work that does contradict it is measured again.
TEST_F(ObservedComputeTest, StepsSlowedByABusyHostDoNotMeasureTheProfileAgain) {
  std::vector<std::string> asked;
  options_.remeasure_profile = [&](const ProfileTarget& target, const std::string& why) {
    asked.push_back(target.model + ": " + why);
    return true;
  };
  a_.devices[0].relative_speed = 0.5;
  b_.devices[0].relative_speed = 0.5;
  b_truth_ = 1.0;
  host_wait_ = 2.5;
  cpu_per_work_ = 0.5;  // CPU seconds / speed = the work
  Start();
  ReportSteps(1, 40);
  ASSERT_TRUE(controller_->Tick().ok());
  EXPECT_TRUE(asked.empty()) << asked[0];
  EXPECT_NEAR(ScaleOf(Previewed(), "c:"), 2.5, 0.05) << "plans take the steps as they run";
  cpu_per_work_ = 1.0;  // now the work itself takes 2x the profile
  ReportSteps(41, 80);
  ASSERT_TRUE(controller_->Tick().ok());
  ASSERT_EQ(asked.size(), 1u);
  EXPECT_NE(asked[0].find("at 2.00x its prediction over 24 steps"), std::string::npos) << asked[0];
}

TEST_F(JobControllerTest, HeldHeartbeatAnswersAsSoonAsTheNodeHasWork) {
  api::Node a = Joined("a", 1, 20);
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
}  // namespace tessera::daemon::job_controller_test
