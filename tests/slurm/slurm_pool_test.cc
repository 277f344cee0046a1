// The Slurm pool against a fault-injecting fake Slurm and a recording
// stand-in for tesserad's heartbeat endpoint.
#include "slurm/slurm_pool.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "common/fake_clock.h"
#include "common/faulty_file_system.h"
#include "launch/rank_files.h"
#include "slurm/fake_slurm_client.h"
#include "tests/common/temp_dir.h"

namespace tessera::slurm {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using ::tessera::testing::TempDir;

SlurmNode Node(const std::string& name, const std::string& gres, const std::string& partition) {
  SlurmNode n;
  n.name = name;
  n.address = "127.0.0.1";
  n.state = "idle";
  n.partitions = {partition};
  n.gres = gres;
  n.cpus = 2;
  return n;
}

api::WorkerLaunch Launch(api::JobId job, int64_t attempt, int64_t rank, int64_t device,
                         int64_t world) {
  api::WorkerLaunch l;
  l.key = {job, attempt, rank};
  l.argv = {"/bin/true"};
  l.device_indices = {device};
  l.env = {{"RANK", std::to_string(rank)}, {"WORLD_SIZE", std::to_string(world)}};
  l.plan = {{"layout", "data_parallel"}};
  return l;
}

class SlurmPoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    slurm_.SetNodes({Node("fa", "gpu:a100:2(S:0)", "gpu"), Node("fb", "gpu:t4:1", "gpu"),
                     Node("fx", "gpu:a100:8", "other")});
    pool_ = MakePool();
  }
  void TearDown() override { pool_.reset(); }

  std::unique_ptr<SlurmPool> MakePool(FileSystem* files = FileSystem::Default()) {
    SlurmPoolOptions o;
    o.fs = files;
    o.partition = "gpu";
    o.gpu_types = {{"a100", {0, 0.5, int64_t{1} << 30, true}},
                   {"t4", {0, 0.25, int64_t{1} << 30, true}}};
    o.launcher = "/opt/tessera/bin/tessera-slurm-launch";
    o.rank_root = root_.string();
    return std::make_unique<SlurmPool>(
        &slurm_,
        [this](const api::Json& j) -> Result<api::Json> {
          auto hb = api::HeartbeatRequestFromJson(j);
          if (!hb.ok()) return hb.status();
          beats_.push_back(*hb);
          api::HeartbeatResponse r;
          r.desired = desired_[hb->node];
          return api::ToJson(r);
        },
        &clock_, o);
  }

  // Job 7 attempt 1: ranks 0, 1 on fa, rank 2 on fb.
  void DesireMixedAttempt(int64_t attempt = 1) {
    desired_["fa"] = {Launch(7, attempt, 0, 0, 3), Launch(7, attempt, 1, 1, 3)};
    desired_["fb"] = {Launch(7, attempt, 2, 0, 3)};
  }

  // The workers the last beat of `node` reported.
  std::vector<api::WorkerStatus> Reported(const std::string& node) {
    for (auto it = beats_.rbegin(); it != beats_.rend(); ++it) {
      if (it->node == node) return it->workers;
    }
    return {};
  }

  launch::RankPaths Paths(int64_t rank, int64_t attempt = 1) {
    return launch::RankPathsFor(root_, {7, attempt, rank});
  }
  static void Write(const fs::path& p, const std::string& text) {
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::app) << text;
  }

  TempDir dir_;
  const fs::path root_ = dir_.path();
  FakeClock clock_;
  FakeSlurmClient slurm_;
  std::map<std::string, std::vector<api::WorkerLaunch>> desired_;
  std::vector<api::HeartbeatRequest> beats_;
  std::unique_ptr<SlurmPool> pool_;
};

TEST_F(SlurmPoolTest, PartitionNodesHeartbeatWithTheirGpus) {
  ASSERT_TRUE(pool_->PollOnce().ok());
  ASSERT_EQ(beats_.size(), 2u);  // fx is in another partition
  EXPECT_EQ(beats_[0].node, "fa");
  EXPECT_EQ(beats_[0].devices.size(), 2u);
  EXPECT_EQ(beats_[0].devices[0].name, "a100");
  EXPECT_EQ(beats_[1].node, "fb");
  EXPECT_EQ(beats_[1].devices.size(), 1u);
  EXPECT_TRUE(pool_->Owns("fa"));
  EXPECT_FALSE(pool_->Owns("fx"));
  EXPECT_EQ(pool_->NodeUp("fa"), true);
  EXPECT_EQ(pool_->NodeUp("fx"), std::nullopt);

  slurm_.SetNodeState("fb", "down");
  ASSERT_TRUE(pool_->PollOnce().ok());
  EXPECT_EQ(pool_->NodeUp("fb"), false);
  EXPECT_EQ(beats_.size(), 3u);  // a down node gets no heartbeat
  // Slurm silent for long: tesserad judges by the heartbeats again.
  clock_.Advance(11s);
  EXPECT_EQ(pool_->NodeUp("fa"), std::nullopt);
}

// An attempt file whose fsync or rename fails is the poll's error and the
// attempt is not submitted (nothing would remember it); the next poll is.
TEST_F(SlurmPoolTest, AttemptFileThatCannotBeWrittenIsNotSubmitted) {
  struct Case {
    FileOp op;
    int err;
  };
  int64_t attempt = 0;
  for (const Case& c : {Case{FileOp::kSync, EIO}, Case{FileOp::kRename, ENOSPC}}) {
    ++attempt;
    FaultyFileSystem faulty;
    faulty.FailNext(c.op, "attempt.json", c.err);
    pool_ = MakePool(&faulty);
    const size_t submitted = slurm_.submitted().size();
    desired_.clear();
    DesireMixedAttempt(attempt);
    Status polled = pool_->PollOnce();
    const std::string file = (root_ / "jobs/7" / std::to_string(attempt) / "attempt.json").string();
    ASSERT_FALSE(polled.ok());
    EXPECT_EQ(polled.message().rfind("cannot write " + file + ": ", 0), 0u) << polled.message();
    EXPECT_NE(polled.message().find(std::strerror(c.err)), std::string::npos);
    EXPECT_EQ(slurm_.submitted().size(), submitted);
    EXPECT_FALSE(fs::exists(file));
    ASSERT_TRUE(pool_->PollOnce().ok());
    EXPECT_EQ(slurm_.submitted().size(), submitted + 1);
    EXPECT_TRUE(fs::exists(file));
  }
}

TEST_F(SlurmPoolTest, AnAttemptBecomesOneHetjobSubmittedOnce) {
  DesireMixedAttempt();
  ASSERT_TRUE(pool_->PollOnce().ok());
  ASSERT_TRUE(pool_->PollOnce().ok());
  std::vector<HetJobRequest> sent = slurm_.submitted();
  ASSERT_EQ(sent.size(), 1u);
  const HetJobRequest& r = sent[0];
  EXPECT_EQ(r.name, "tessera-7-1");
  ASSERT_EQ(r.components.size(), 2u);
  EXPECT_EQ(r.components[0].nodelist, std::vector<std::string>{"fa"});
  EXPECT_EQ(r.components[0].tasks_per_node, 2);
  EXPECT_EQ(r.components[0].gres, "gpu:a100:2");
  EXPECT_EQ(r.components[0].partition, "gpu");
  EXPECT_EQ(r.components[1].nodelist, std::vector<std::string>{"fb"});
  EXPECT_EQ(r.components[1].gres, "gpu:t4:1");
  const std::string file = (root_ / "jobs/7/1/attempt.json").string();
  EXPECT_NE(r.script.find("--het-group=0 -n 2 --ntasks-per-node=2"), std::string::npos) << r.script;
  EXPECT_NE(r.script.find(" : --het-group=1 -n 1"), std::string::npos) << r.script;
  EXPECT_NE(r.script.find("'/opt/tessera/bin/tessera-slurm-launch' '" + file + "'"),
            std::string::npos)
      << r.script;
  std::ifstream in(file);
  auto attempt = SlurmAttemptFromJson(api::Json::parse(in));
  ASSERT_TRUE(attempt.ok()) << attempt.status().ToString();
  EXPECT_EQ(attempt->launches.size(), 3u);
  EXPECT_EQ(attempt->nodes.at("fb").devices[0].name, "t4");

  // A restarted pool finds the attempt file and does not submit again.
  pool_ = MakePool();
  ASSERT_TRUE(pool_->PollOnce().ok());
  EXPECT_EQ(slurm_.submitted().size(), 1u);
}

TEST_F(SlurmPoolTest, WaitsWhileARankIsOnANodeThatIsNotUp) {
  slurm_.SetNodeState("fb", "down");
  DesireMixedAttempt();
  ASSERT_TRUE(pool_->PollOnce().ok());
  EXPECT_TRUE(slurm_.submitted().empty());
}

TEST_F(SlurmPoolTest, RanksAreReportedFromTheirFilesAndSlurmsState) {
  DesireMixedAttempt();
  ASSERT_TRUE(pool_->PollOnce().ok());
  ASSERT_EQ(slurm_.submitted().size(), 1u);
  ASSERT_TRUE(pool_->PollOnce().ok());
  EXPECT_TRUE(Reported("fa").empty());  // pending in Slurm: nothing runs yet

  slurm_.SetState(100, "RUNNING");
  Write(Paths(0).pid, "{}");
  Write(Paths(1).pid, "{}");
  Write(Paths(0).progress, "{\"step\": 1, \"loss\": 2.0}\n{\"step\": 2, \"loss\": 1.5}\n");
  Write(Paths(0).log, "hello from rank 0\n");
  ASSERT_TRUE(pool_->PollOnce().ok());
  std::vector<api::WorkerStatus> fa = Reported("fa");
  ASSERT_EQ(fa.size(), 2u);
  EXPECT_EQ(fa[0].state, api::WorkerState::kRunning);
  EXPECT_EQ(fa[0].progress_lines.size(), 2u);
  EXPECT_EQ(fa[0].progress["step"], 2);
  EXPECT_EQ(fa[0].log_tail, std::vector<std::string>{"hello from rank 0"});
  EXPECT_TRUE(Reported("fb").empty());  // its launcher has not started it yet

  // Lines already delivered are not sent again; new ones are.
  Write(Paths(0).progress, "{\"step\": 3, \"loss\": 1.0}\n");
  Write(Paths(0).exit, "{\"exit_code\": 0}\n");
  ASSERT_TRUE(pool_->PollOnce().ok());
  fa = Reported("fa");
  ASSERT_EQ(fa.size(), 2u);
  ASSERT_EQ(fa[0].progress_lines.size(), 1u);
  EXPECT_EQ(fa[0].progress_lines[0]["step"], 3);
  EXPECT_EQ(fa[0].state, api::WorkerState::kExited);
  EXPECT_EQ(fa[0].exit_code, 0);

  // The node fails: a started rank without exit file was killed, one never
  // started did not run.
  slurm_.SetState(100, "NODE_FAIL");
  ASSERT_TRUE(pool_->PollOnce().ok());
  fa = Reported("fa");
  ASSERT_EQ(fa.size(), 2u);
  EXPECT_EQ(fa[1].state, api::WorkerState::kExited);
  EXPECT_EQ(fa[1].exit_code, 137);
  std::vector<api::WorkerStatus> fb = Reported("fb");
  ASSERT_EQ(fb.size(), 1u);
  EXPECT_EQ(fb[0].exit_code, 1);
}

TEST_F(SlurmPoolTest, AnAttemptNoLongerDesiredIsCancelledInSlurm) {
  DesireMixedAttempt();
  ASSERT_TRUE(pool_->PollOnce().ok());
  slurm_.SetState(100, "RUNNING");
  Write(Paths(0).pid, "{}");
  desired_.clear();  // tesserad stopped the attempt (node lost, cancel, ...)
  ASSERT_TRUE(pool_->PollOnce().ok());
  EXPECT_EQ(slurm_.cancelled(), std::vector<int64_t>{100});
  // Until Slurm has ended it, its ranks are still reported (tesserad waits for them).
  slurm_.SetState(100, "RUNNING");
  ASSERT_TRUE(pool_->PollOnce().ok());
  EXPECT_EQ(Reported("fa").size(), 1u);
  EXPECT_EQ(slurm_.cancelled().size(), 1u);  // asked once
  slurm_.SetState(100, "CANCELLED");
  ASSERT_TRUE(pool_->PollOnce().ok());  // reported exited one last time, then forgotten
  ASSERT_TRUE(pool_->PollOnce().ok());
  EXPECT_TRUE(Reported("fa").empty());

  // The next attempt, on fa alone, is a job of its own.
  desired_["fa"] = {Launch(7, 2, 0, 0, 2), Launch(7, 2, 1, 1, 2)};
  ASSERT_TRUE(pool_->PollOnce().ok());
  ASSERT_EQ(slurm_.submitted().size(), 2u);
  EXPECT_EQ(slurm_.submitted()[1].name, "tessera-7-2");
  EXPECT_EQ(slurm_.submitted()[1].components.size(), 1u);
  // An ordinary job: srun refuses --het-group there.
  EXPECT_EQ(slurm_.submitted()[1].script.find("--het-group"), std::string::npos)
      << slurm_.submitted()[1].script;
  EXPECT_NE(slurm_.submitted()[1].script.find("-n 2 --ntasks-per-node=2"), std::string::npos);
}

TEST_F(SlurmPoolTest, SlurmFaultsAreReportedAndRetried) {
  DesireMixedAttempt();
  slurm_.FailNext(FakeSlurmClient::Op::kListNodes, Unavailable("slurmrestd: connection refused"));
  Status st = pool_->PollOnce();
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_TRUE(beats_.empty());

  slurm_.FailNext(FakeSlurmClient::Op::kListJobs, Unavailable("slurmrestd: timeout"));
  EXPECT_FALSE(pool_->PollOnce().ok());
  EXPECT_TRUE(beats_.empty());

  slurm_.FailNext(FakeSlurmClient::Op::kSubmit, FailedPrecondition("Invalid partition name"));
  st = pool_->PollOnce();
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(slurm_.submitted().empty());
  EXPECT_FALSE(fs::exists(root_ / "jobs/7/1/attempt.json"));  // so it is tried again
  ASSERT_TRUE(pool_->PollOnce().ok());
  EXPECT_EQ(slurm_.submitted().size(), 1u);

  slurm_.SetState(100, "RUNNING");
  desired_.clear();
  slurm_.FailNext(FakeSlurmClient::Op::kCancel, Unavailable("slurmrestd: timeout"));
  EXPECT_FALSE(pool_->PollOnce().ok());
  ASSERT_TRUE(pool_->PollOnce().ok());  // cancelled on the next pass
  EXPECT_EQ(slurm_.cancelled(), std::vector<int64_t>{100});
}

TEST_F(SlurmPoolTest, HeartbeatErrorsDoNotStopThePass) {
  auto pool = std::make_unique<SlurmPool>(
      &slurm_,
      [](const api::Json&) -> Result<api::Json> { return Unavailable("tesserad is starting"); },
      &clock_, SlurmPoolOptions{"gpu", {{"a100", {1, 1, 1, false}}}, "/l", root_.string()});
  EXPECT_EQ(pool->PollOnce().code(), StatusCode::kUnavailable);
  EXPECT_EQ(pool->NodeUp("fa"), true);  // Slurm's view is still known
}

}  // namespace
}  // namespace tessera::slurm
