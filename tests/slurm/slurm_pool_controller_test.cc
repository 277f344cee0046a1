// The Slurm pool with tesserad's real controller and service (MemoryStore,
// FakeClock) against the fake Slurm: the whole backend without root. A mixed
// job becomes a two-component Slurm job; Slurm marks a node down and the job
// is re-planned on the survivor as a job of its own, then succeeds.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "common/fake_clock.h"
#include "daemon/control_plane_service.h"
#include "daemon/controller/job_controller.h"
#include "daemon/store/memory_store.h"
#include "launch/rank_files.h"
#include "slurm/fake_slurm_client.h"
#include "slurm/slurm_pool.h"
#include "tests/common/temp_dir.h"

namespace tessera::slurm {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using ::tessera::testing::TempDir;

SlurmNode Node(const std::string& name, const std::string& gres) {
  SlurmNode n;
  n.name = name;
  n.address = "127.0.0.1";
  n.state = "idle";
  n.partitions = {"gpu"};
  n.gres = gres;
  n.cpus = 4;
  return n;
}

// A training job of cmd:train (12 samples a step, 10 steps) on
// min_devices..max_devices devices.
api::JobSpec TrainSpec(const std::string& name, int64_t min_devices, int64_t max_devices) {
  api::JobSpec spec;
  spec.name = name;
  spec.entrypoint = "cmd:train";
  spec.global_batch = 12;
  spec.steps = 10;
  spec.min_devices = min_devices;
  spec.max_devices = max_devices;
  return spec;
}

class SlurmPoolControllerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    slurm_.SetNodes({Node("fa", "gpu:a100:2"), Node("fb", "gpu:t4:1")});
    ASSERT_TRUE(store_.PutEntrypoint({"cmd:train", "/bin/true", "test"}).ok());

    daemon::JobControllerOptions jc;
    jc.launch.worker_binary = "/usr/bin/tessera-worker";
    jc.launch.checkpoint_root = (root_ / "ckpt").string();
    jc.retry_backoff_ms = 0;
    jc.node_up = [this](const std::string& node) { return pool_->NodeUp(node); };
    controller_ = std::make_unique<daemon::JobController>(&store_, &clock_, jc);
    ASSERT_TRUE(controller_->Recover().ok());
    daemon::ControlPlaneOptions cp;
    cp.desired_workers =
        [this](const api::HeartbeatRequest& hb) -> Result<std::vector<api::WorkerLaunch>> {
      return controller_->OnHeartbeat(hb).desired;
    };
    service_ = std::make_unique<daemon::ControlPlaneService>(&store_, &clock_, cp);

    SlurmPoolOptions o;
    o.partition = "gpu";
    o.gpu_types = {{"a100", {2.0, 0.5, int64_t{16} << 30, true}},
                   {"t4", {1.0, 0.25, int64_t{16} << 30, true}}};
    o.launcher = "/usr/bin/tessera-slurm-launch";
    o.rank_root = (root_ / "ranks").string();
    pool_ = std::make_unique<SlurmPool>(
        &slurm_, [this](const api::Json& hb) { return service_->Heartbeat(hb); }, &clock_, o);
  }
  void TearDown() override {
    pool_.reset();
    service_.reset();
    controller_.reset();
  }

  // Polls and ticks (the daemon's two loops) until `done` or a generous deadline.
  bool RunUntil(const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (std::chrono::steady_clock::now() < deadline) {
      pool_->PollOnce().IgnoreError();
      controller_->Tick().IgnoreError();
      if (done()) return true;
      std::this_thread::sleep_for(5ms);
    }
    return false;
  }
  api::Job Job(api::JobId id) { return *store_.GetJob(id); }

  // What tessera-slurm-launch leaves: worker.pid when a rank starts,
  // exit.json when it ends.
  void Started(api::JobId job, int64_t attempt, int64_t ranks) {
    for (int64_t r = 0; r < ranks; ++r) {
      auto p = launch::RankPathsFor(root_ / "ranks", {job, attempt, r});
      fs::create_directories(p.dir);
      std::ofstream(p.pid) << "{}";
    }
  }
  void Exited(api::JobId job, int64_t attempt, int64_t ranks, int code) {
    for (int64_t r = 0; r < ranks; ++r) {
      auto p = launch::RankPathsFor(root_ / "ranks", {job, attempt, r});
      std::ofstream(p.exit) << "{\"exit_code\": " << code << "}";
    }
  }

  TempDir dir_;
  const fs::path root_ = dir_.path();
  FakeClock clock_;
  daemon::MemoryStore store_;
  FakeSlurmClient slurm_;
  std::unique_ptr<daemon::JobController> controller_;
  std::unique_ptr<daemon::ControlPlaneService> service_;
  std::unique_ptr<SlurmPool> pool_;
};

TEST_F(SlurmPoolControllerTest, MixedJobIsOneHetjobAndIsReplannedWhenSlurmLosesANode) {
  ASSERT_TRUE(RunUntil([&] {
    auto nodes = store_.ListNodes();
    return nodes.ok() && nodes->size() == 2;
  }));
  api::JobSpec spec = TrainSpec("mixed", 2, 3);
  spec.max_attempts = 3;
  auto job = store_.InsertJob({"alice", spec, clock_.NowUnixMillis()});
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  const api::JobId id = job->id;

  // Planned over both nodes; one Slurm job, one component per kind of node.
  ASSERT_TRUE(RunUntil([&] { return slurm_.submitted().size() == 1; }))
      << Job(id).reason << " / " << controller_->WaitingReason(id);
  const HetJobRequest first = slurm_.submitted()[0];
  ASSERT_EQ(first.components.size(), 2u);
  EXPECT_EQ(first.components[0].gres, "gpu:a100:2");
  EXPECT_EQ(first.components[1].gres, "gpu:t4:1");
  EXPECT_EQ(Job(id).state, api::JobState::kStarting);  // pending in Slurm

  slurm_.SetState(100, "RUNNING");
  Started(id, 1, 3);
  ASSERT_TRUE(RunUntil([&] { return Job(id).state == api::JobState::kRunning; })) << Job(id).reason;

  // Slurm marks fb down; its job ends NODE_FAIL (fa's ranks were killed).
  slurm_.SetNodeState("fb", "down");
  slurm_.SetState(100, "NODE_FAIL", 1);
  ASSERT_TRUE(RunUntil([&] { return slurm_.submitted().size() == 2; })) << Job(id).reason;
  EXPECT_EQ(Job(id).attempt, 2);
  auto events = store_.ListEvents(id, 0, 100);
  ASSERT_TRUE(events.ok());
  bool lost = false;
  for (const api::Event& e : *events) {
    lost =
        lost || (e.to_state == "recovering" && e.reason.find("node fb lost") != std::string::npos);
  }
  EXPECT_TRUE(lost);
  const HetJobRequest second = slurm_.submitted()[1];
  EXPECT_EQ(second.name, "tessera-" + std::to_string(id) + "-2");
  ASSERT_EQ(second.components.size(), 1u);
  EXPECT_EQ(second.components[0].nodelist, std::vector<std::string>{"fa"});
  EXPECT_EQ(second.components[0].gres, "gpu:a100:2");
  auto nodes = store_.ListNodes();
  ASSERT_TRUE(nodes.ok());
  for (const api::Node& n : *nodes) EXPECT_EQ(n.health, n.name == "fb" ? "dead" : "healthy");

  slurm_.SetState(102, "RUNNING");
  Started(id, 2, 2);
  ASSERT_TRUE(RunUntil([&] { return Job(id).state == api::JobState::kRunning; }));
  Exited(id, 2, 2, 0);
  slurm_.SetState(102, "COMPLETED");
  ASSERT_TRUE(RunUntil([&] { return Job(id).state == api::JobState::kSucceeded; }))
      << Job(id).reason;
  EXPECT_TRUE(slurm_.cancelled().empty());  // Slurm had ended both itself
}

TEST_F(SlurmPoolControllerTest, CancellingTheJobCancelsItsSlurmJob) {
  ASSERT_TRUE(RunUntil([&] { return store_.ListNodes()->size() == 2; }));
  const api::JobId id =
      store_.InsertJob({"alice", TrainSpec("to-cancel", 3, 3), clock_.NowUnixMillis()})->id;
  ASSERT_TRUE(RunUntil([&] { return slurm_.submitted().size() == 1; }));
  slurm_.SetState(100, "RUNNING");
  Started(id, 1, 3);
  ASSERT_TRUE(RunUntil([&] { return Job(id).state == api::JobState::kRunning; }));
  api::Principal alice{"alice", api::Role::kUser};
  ASSERT_TRUE(service_->CancelJob(alice, id).ok());
  ASSERT_TRUE(RunUntil([&] { return !slurm_.cancelled().empty(); }));
  EXPECT_EQ(slurm_.cancelled(), std::vector<int64_t>{100});
  EXPECT_EQ(Job(id).state, api::JobState::kCancelled);
}

}  // namespace
}  // namespace tessera::slurm
