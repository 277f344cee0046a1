// The fixture of the JobController tests (tests/daemon/controller/job_controller_*test.cc):
// a JobController against a real SQLite store on a temp file, a FakeClock and
// heartbeats built by the test (the agents' side of the protocol). The tests
// are split by concept: placement and heartbeats, recovery, infer jobs.
#ifndef TESSERA_TESTS_DAEMON_CONTROLLER_JOB_CONTROLLER_TEST_FIXTURE_H_
#define TESSERA_TESTS_DAEMON_CONTROLLER_JOB_CONTROLLER_TEST_FIXTURE_H_

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/fake_clock.h"
#include "daemon/controller/job_controller.h"
#include "daemon/store/sqlite_store.h"
#include "tests/common/temp_dir.h"

namespace tessera::daemon::job_controller_test {

// Every JobController test file speaks of these.
using api::JobState;
using std::chrono::milliseconds;

// Builds a node with `count` emulated devices of one kind.
inline api::Node MakeNode(const std::string& name, int count, double tflops,
                          int64_t memory_gb = 16) {
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

// A model profile of four small layers, for builtin jobs in these tests.
inline scheduler::ModelProfile SmallProfile(const std::string& model) {
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

inline api::JobSpec CmdSpec(int devices, int64_t max_attempts = 3, int64_t priority = 0) {
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
    temp_.emplace();  // a fresh folder, also when a test runs SetUp again
    dir_ = temp_->path();
    auto store = SqliteStore::Open((dir_ / "t.db").string());
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = *std::move(store);
    ASSERT_TRUE(store_->PutEntrypoint({"cmd:sleeper", "/bin/sleep", "test"}).ok());
    options_.launch.worker_binary = "/usr/bin/tessera-worker";
    options_.launch.checkpoint_root = "/ckpt";
    Configure();
    controller_ = std::make_unique<JobController>(store_.get(), &clock_, options_);
    ASSERT_TRUE(controller_->Recover().ok());
  }
  void TearDown() override {
    controller_.reset();
    store_.reset();
    temp_.reset();
  }

  // A derived fixture's changes to options_ before its first controller starts.
  virtual void Configure() {}

  api::JobId Submit(const api::JobSpec& spec, const std::string& user = "alice") {
    NewJob j{user, spec, clock_.NowUnixMillis()};
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

  // A node (MakeNode's) that has joined: its first heartbeat is in.
  api::Node Joined(const std::string& name, int count, double tflops, int64_t memory_gb = 16) {
    api::Node node = MakeNode(name, count, tflops, memory_gb);
    Beat(node);
    return node;
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

  // Submits `spec`, places it, and has every node report its ranks running;
  // *desired gets each node's desired set. EXPECTs the job running.
  api::JobId SubmitRunning(const api::JobSpec& spec, const std::vector<api::Node*>& nodes,
                           std::map<std::string, api::HeartbeatResponse>* desired) {
    const api::JobId id = Submit(spec);
    EXPECT_TRUE(controller_->Tick().ok());
    for (api::Node* n : nodes) (*desired)[n->name] = Beat(*n);
    for (api::Node* n : nodes) Beat(*n, Running((*desired)[n->name]));
    EXPECT_TRUE(controller_->Tick().ok());
    EXPECT_EQ(StateOf(id), api::JobState::kRunning);
    return id;
  }

  api::JobState StateOf(api::JobId id) { return store_->GetJob(id)->state; }

  // Every event of the job, one "state: reason" line each.
  std::string Reasons(api::JobId id) {
    std::string out;
    auto events = store_->ListEvents(id, 0, 1000);
    if (events.ok()) {
      for (const auto& e : *events) out += e.to_state + ": " + e.reason + "\n";
    }
    return out;
  }
  // How many of the job's events say `part`.
  int EventsSaying(api::JobId id, const std::string& part) {
    const std::string reasons = Reasons(id);
    int n = 0;
    for (size_t at = reasons.find(part); at != std::string::npos; at = reasons.find(part, at + 1)) {
      ++n;
    }
    return n;
  }

  // Builtin models get SmallProfile (set before RestartController).
  void UseSmallProfiles() {
    options_.profiles = [](const ProfileTarget& target) -> Result<scheduler::ModelProfile> {
      return SmallProfile(target.model);
    };
  }

  // A new controller on the same store and clock with options_ as they are now.
  void RestartController() {
    controller_ = std::make_unique<JobController>(store_.get(), &clock_, options_);
    ASSERT_TRUE(controller_->Recover().ok());
  }

  std::vector<std::string> EventTrail(api::JobId id) {
    std::vector<std::string> out;
    auto events = store_->ListEvents(id, 0, 1000);
    EXPECT_TRUE(events.ok());
    if (!events.ok()) return out;
    for (const auto& e : events.value()) out.push_back(e.to_state);
    return out;
  }

  std::optional<::tessera::testing::TempDir> temp_;
  std::filesystem::path dir_;  // temp_'s
  FakeClock clock_;
  JobControllerOptions options_;
  std::unique_ptr<SqliteStore> store_;
  std::unique_ptr<JobController> controller_;
};

}  // namespace tessera::daemon::job_controller_test

#endif  // TESSERA_TESTS_DAEMON_CONTROLLER_JOB_CONTROLLER_TEST_FIXTURE_H_
