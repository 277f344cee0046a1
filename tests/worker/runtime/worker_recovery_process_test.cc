// Integration tests: real tessera-worker training processes that fail and
// recover: kill -9 and a resume from the newest complete checkpoint, the
// survivor of a killed peer, survivors re-formed into a new world, SIGTERM
// saving a checkpoint, and a checkpoint resumed onto another layout; each
// equals an uninterrupted single-process run parameter by parameter.
// (Training runs: worker_train_process_test.cc.)
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/agent_protocol.h"
#include "tests/worker/runtime/worker_process_fixture.h"
#include "worker/runtime/checkpoint.h"

namespace tessera::worker {
namespace {
namespace fs = std::filesystem;
using testing::FreeLoopbackPort;
using testing::TorchrunEnv;
using testing::WorkerProcessTest;

// A data-parallel tiny-skip world of three replicas.
constexpr char kThreeReplicas[] = R"({"layout":"data","global_batch":16,"micro_batches":1,
   "replicas":[{"batch":6,"stages":[{"rank":0,"layers":[0,6]}]},
   {"batch":5,"stages":[{"rank":1,"layers":[0,6]}]},
   {"batch":5,"stages":[{"rank":2,"layers":[0,6]}]}]})";

TEST_F(WorkerProcessTest, KillNineThenResumeEqualsUninterruptedRun) {
  const int kSteps = 40;
  const std::string ref = Reference("tiny-skip", kSteps);
  const std::string ckpt = (dir_ / "ckpt").string();
  Job job;
  job.plan = DataPlan(12, 4, 1);
  job.world = 2;
  job.checkpoint_dir = ckpt;
  job.speed = "0.01";  // emulated slow device: each step takes ~100x its compute
  job.args = TrainArgs("tiny-skip", kSteps, Dump("resumed"));
  job.args.insert(job.args.end(), {"--checkpoint-every-steps", "5"});
  auto pids = Start(job, "first");
  AwaitStep("first", 0, 17);
  for (pid_t p : pids) ::kill(p, SIGKILL);
  for (pid_t p : pids) EXPECT_EQ(WaitExit(p), 128 + SIGKILL);
  const int reached = LastProgressStep(Progress("first", 0));
  ASSERT_GE(reached, 17);
  ASSERT_LT(reached, kSteps) << "the run finished before it was killed";
  EXPECT_FALSE(fs::exists(Dump("resumed")));
  // An unfinished newer write (no manifest, short file) must be ignored.
  fs::create_directories(fs::path(ckpt) / "step-1000");
  std::ofstream(fs::path(ckpt) / "step-1000" / "layers-0-6.bin") << "partial";

  job.speed.clear();
  ExpectAllZero(Run(job, "second"), "second");
  const std::string log = LogText("second", 1);
  EXPECT_NE(log.find("resumed from step-"), std::string::npos) << log;
  EXPECT_EQ(log.find("resumed from step-1000"), std::string::npos) << log;
  EXPECT_LE(MaxDiff(ref, Dump("resumed")), kTolerance);
}

// A rank whose peer vanished (kill -9) exits with kPeerLostExitCode, not the
// generic failure code, so the controller checks the peer's node at once.
TEST_F(WorkerProcessTest, SurvivorOfAKilledPeerExitsWithThePeerLostCode) {
  Job job;
  job.plan = DataPlan(12, 4, 1);
  job.world = 2;
  job.speed = "0.01";
  job.args = TrainArgs("tiny-skip", 100000, Dump("never"));
  auto pids = Start(job, "peer");
  AwaitStep("peer", 0, 2);
  ASSERT_GE(LastProgressStep(Progress("peer", 0)), 2);
  ::kill(pids[0], SIGKILL);
  EXPECT_EQ(WaitExit(pids[0]), 128 + SIGKILL);
  EXPECT_EQ(WaitExit(pids[1]), static_cast<int>(api::kPeerLostExitCode)) << LogText("peer", 1);
}

// Re-forming (worker/runtime/reform.h): one rank is killed mid-run; the
// survivors keep their processes, are handed a new world (new port, new plan)
// through their reform files, agree on the newest completed step, fetch the
// layers their new stage lacks (parameters and momentum) from the survivors
// that hold them, and finish. The result equals an uninterrupted run: no
// completed step was redone or lost, and the state moved exactly.
TEST_F(WorkerProcessTest, SurvivorsOfAKillReformAndEqualAnUninterruptedRun) {
  const int kSteps = 14;
  const std::string ref = Reference("tiny-skip", kSteps);
  struct Case {
    const char* name;
    std::string plan;
    int world;
    int killed;
    std::vector<int> new_ranks;  // by old rank: its rank in the new world, -1: left out
    std::string new_plan;
  };
  const Case cases[] = {
      // Rank 0 (the old rendezvous host) dies; nobody needs a layer.
      {"data3_to_data2", kThreeReplicas, 3, 0, {-1, 0, 1}, DataPlan(10, 6, 1)},
      // Stage 2 of replica B dies; old rank 1 ([2,6]) needs layers 0-1 and old
      // rank 2 ([0,4]) layers 4-5, from the survivors; old rank 0 is left out.
      {"hybrid_to_data2", kHybridPlan, 4, 3, {-1, 0, 1, -1}, DataPlan(9, 7, 2)},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string tag = c.name;
    const std::vector<pid_t> pids = Start(ReformingJob(c.plan, c.world, kSteps, tag), tag);
    const int watch = c.killed == 0 ? 1 : 0;
    AwaitStep(tag, watch, 4);
    ASSERT_GE(LastProgressStep(Progress(tag, watch)), 4);
    ::kill(pids[static_cast<size_t>(c.killed)], SIGKILL);
    EXPECT_EQ(WaitExit(pids[static_cast<size_t>(c.killed)]), 128 + SIGKILL);
    ASSERT_LT(LastProgressStep(Progress(tag, watch)), kSteps) << "finished before the kill";

    const int new_world = static_cast<int>(
        std::count_if(c.new_ranks.begin(), c.new_ranks.end(), [](int r) { return r >= 0; }));
    const int port = FreeLoopbackPort();
    for (int r = 0; r < c.world; ++r) {
      const int nr = c.new_ranks[static_cast<size_t>(r)];
      if (nr < 0) continue;
      WriteReformOrder(tag, r,
                       {{"generation", 1},
                        {"env", TorchrunEnv(nr, new_world, port)},
                        {"plan", nlohmann::json::parse(c.new_plan)}});
    }
    for (int r = 0; r < c.world; ++r) {
      if (r == c.killed) continue;
      const pid_t pid = pids[static_cast<size_t>(r)];
      if (c.new_ranks[static_cast<size_t>(r)] < 0) {
        // Left out: its agent stops it (it may be blocked in a collective
        // with a survivor that left, until the stop grace runs out).
        ::kill(pid, SIGKILL);
        EXPECT_EQ(WaitExit(pid), 128 + SIGKILL);
      } else {
        EXPECT_EQ(WaitExit(pid), 0) << LogText(tag, r);
        EXPECT_NE(LogText(tag, r).find("re-formed world 1"), std::string::npos) << LogText(tag, r);
      }
    }
    EXPECT_LE(MaxDiff(ref, Dump(tag)), kTolerance);
  }
}

// A planned shrink (the share policy gives a device to another job): no rank
// dies; two ranks re-form into a world of two and the third is handed a
// left-out order of the same generation. It leaves at once with exit code 0,
// instead of waiting in a collective of the world the others left until its
// agent's stop runs out of grace (it had to be killed); the kept ranks finish
// equal to an uninterrupted run.
TEST_F(WorkerProcessTest, ARankAPlannedShrinkLeavesOutExitsAtOnceAndTheKeptOnesFinish) {
  const int kSteps = 14;
  const std::string ref = Reference("tiny-skip", kSteps);
  const std::string tag = "shrink";
  const std::vector<pid_t> pids = Start(ReformingJob(kThreeReplicas, 3, kSteps, tag), tag);
  AwaitStep(tag, 0, 4);
  ASSERT_LT(LastProgressStep(Progress(tag, 0)), kSteps) << "finished before the order";

  const int port = FreeLoopbackPort();
  WriteReformOrder(tag, 2, {{"generation", 1}, {"left_out", true}});
  for (int r = 0; r < 2; ++r) {
    WriteReformOrder(tag, r,
                     {{"generation", 1},
                      {"env", TorchrunEnv(r, 2, port)},
                      {"plan", nlohmann::json::parse(DataPlan(9, 7, 1))}});
  }
  EXPECT_EQ(WaitExit(pids[2]), 0) << LogText(tag, 2);
  EXPECT_NE(LogText(tag, 2).find("left out of the re-formed attempt (generation 1)"),
            std::string::npos)
      << LogText(tag, 2);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(WaitExit(pids[static_cast<size_t>(r)]), 0) << LogText(tag, r);
    EXPECT_NE(LogText(tag, r).find("re-formed world 1"), std::string::npos) << LogText(tag, r);
  }
  EXPECT_LE(MaxDiff(ref, Dump(tag)), kTolerance);
}

// Growth from one rank (daemon/controller GrowTraining): a rank launched
// alone, with its plan and reform file as its agent gives them, is told to
// re-form into a world of two; a new rank joins with the order as its start.
// The alone rank leaves its world of one at the step's end, the two agree on
// its step, the joiner takes the parameters and momentum from it, and the
// result equals an uninterrupted run. (A rank alone once ignored the order and
// the joiner timed out waiting for it.)
TEST_F(WorkerProcessTest, ARankAloneGrowsIntoAWorldOfTwoAndEqualsAnUninterruptedRun) {
  const int kSteps = 14;
  const std::string ref = Reference("tiny-skip", kSteps);
  const std::string tag = "alone";
  const Job job = ReformingJob(R"({"layout":"data","global_batch":16,"micro_batches":1,
   "replicas":[{"batch":16,"stages":[{"rank":0,"layers":[0,6]}]}]})",
                               1, kSteps, tag);
  const pid_t alone = Start(job, tag).front();
  AwaitStep(tag, 0, 4);
  ASSERT_LT(LastProgressStep(Progress(tag, 0)), kSteps) << "finished before the order";

  const int port = FreeLoopbackPort();
  const std::string new_plan = DataPlan(9, 7, 1);
  for (int r = 0; r < 2; ++r) {
    WriteReformOrder(tag, r,
                     {{"generation", 1},
                      {"env", TorchrunEnv(r, 2, port)},
                      {"plan", nlohmann::json::parse(new_plan)}});
  }
  const std::string plan_path = (dir_ / (tag + "-plan-2.json")).string();
  std::ofstream(plan_path) << new_plan;
  const pid_t joiner = StartRank(job, tag, 1, plan_path, TorchrunEnv(1, 2, port));
  EXPECT_EQ(WaitExit(alone), 0) << LogText(tag, 0);
  EXPECT_EQ(WaitExit(joiner), 0) << LogText(tag, 1);
  EXPECT_NE(LogText(tag, 0).find("re-formed world 1"), std::string::npos) << LogText(tag, 0);
  EXPECT_NE(LogText(tag, 1).find("joins the running world"), std::string::npos) << LogText(tag, 1);
  EXPECT_LE(MaxDiff(ref, Dump(tag)), kTolerance);
}

TEST_F(WorkerProcessTest, SigtermSavesCheckpointAndExitsZero) {
  const std::string ckpt = (dir_ / "ckpt").string();
  Job job;
  job.plan = PipelinePlan("1f1b");
  job.world = 2;
  job.checkpoint_dir = ckpt;
  job.speed = "0.01";
  job.args = TrainArgs("tiny-skip", 100000, Dump("unused"));
  auto pids = Start(job, "term");
  AwaitStep("term", 1, 4);
  for (pid_t p : pids) ::kill(p, SIGTERM);
  for (size_t r = 0; r < pids.size(); ++r) {
    EXPECT_EQ(WaitExit(pids[r]), 0) << LogText("term", static_cast<int>(r));
  }
  std::vector<std::string> skipped;
  auto m = FindNewestCheckpoint(ckpt, &skipped);
  ASSERT_TRUE(m.has_value());
  const int saved = static_cast<int>(m->step);
  EXPECT_GE(saved, 4);
  EXPECT_EQ(saved, LastProgressStep(Progress("term", 0)));
  // The saved state continues exactly like an uninterrupted run.
  Job resume;
  resume.checkpoint_dir = ckpt;
  resume.args = TrainArgs("tiny-skip", saved + 3, Dump("after-term"));
  ExpectAllZero(Run(resume, "after-term"), "after-term");
  EXPECT_LE(MaxDiff(Reference("tiny-skip", saved + 3), Dump("after-term")), kTolerance);
}

TEST_F(WorkerProcessTest, CheckpointResumesOntoAnotherLayout) {
  const std::string ref = Reference("tiny-skip", 10);
  struct Case {
    const char* name;
    std::string first_plan;
    std::string second_plan;
    int second_world;
  };
  const Case cases[] = {
      {"data_to_pipeline", DataPlan(12, 4, 1), PipelinePlan("gpipe"), 2},
      {"pipeline_to_data", PipelinePlan("1f1b"), DataPlan(8, 8, 2), 2},
      {"pipeline_to_hybrid", PipelinePlan("gpipe"), kHybridPlan, 4},
  };
  for (const Case& c : cases) {
    const std::string ckpt = (dir_ / (std::string(c.name) + "-ckpt")).string();
    Job first;
    first.plan = c.first_plan;
    first.world = 2;
    first.checkpoint_dir = ckpt;
    first.args = TrainArgs("tiny-skip", 5, Dump(std::string(c.name) + "-first"));
    ExpectAllZero(Run(first, std::string(c.name) + "-a"), c.name);
    Job second = first;
    second.plan = c.second_plan;
    second.world = c.second_world;
    second.args = TrainArgs("tiny-skip", 10, Dump(c.name));
    ExpectAllZero(Run(second, std::string(c.name) + "-b"), c.name);
    EXPECT_NE(LogText(std::string(c.name) + "-b", 0).find("resumed from step-5"),
              std::string::npos);
    EXPECT_LE(MaxDiff(ref, Dump(c.name)), kTolerance) << c.name;
  }
}

}  // namespace
}  // namespace tessera::worker
