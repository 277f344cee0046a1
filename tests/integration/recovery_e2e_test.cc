// Recovery under the real worker, end to end: tesserad plans builtin
// colorize-unet data parallel over three tessera-agents (one emulated device
// each); the ranks train over Gloo and checkpoint; the node holding rank 0 is
// killed with its workers. The survivors' collectives fail, they exit with
// kPeerLostExitCode, the controller checks the silent node at once, and the
// next attempt resumes from the checkpoint on the two nodes left and makes
// progress. The second test has the demo lab's shape (rank 0's node survives)
// under load: attempt 2 must run. (The control-plane recovery test with the
// fast script worker is in cluster_e2e_test.cc.)
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <cstdlib>
#include <optional>
#include <thread>

#include "tests/integration/harness.h"

namespace tessera::testing {
namespace {
namespace fs = std::filesystem;
using namespace std::chrono_literals;

#ifdef TESSERA_E2E_HAVE_WORKER
bool HasCheckpoint(const fs::path& dir) {
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    if (fs::exists(it->path() / "manifest.json")) return true;
  }
  return false;
}

std::string NodeOf(const api::Json& device) {
  std::string d = device.get<std::string>();
  return d.substr(0, d.find(':'));
}

// Starts tesserad and one agent per (node, inventory), submits builtin
// colorize-unet data parallel over min..max devices on generated 32 px
// images, and waits until it runs on `nodes_used` nodes and wrote a
// checkpoint. Returns the job id (0 after a failed assertion).
api::JobId TrainUntilCheckpoint(Cluster& cluster,
                                const std::vector<std::pair<std::string, std::string>>& agents,
                                int global_batch, int min_devices, int max_devices,
                                size_t nodes_used) {
  const std::string worker = BinaryPath("tessera-worker");
  const fs::path images = cluster.dir() / "images";
  EXPECT_EQ(GenImages(images, 32, 32), "");
  cluster.StartController("worker_binary: " + worker + "\n");
  for (const auto& [node, inventory] : agents) cluster.StartAgent(node, inventory);
  EXPECT_TRUE(
      WaitFor([&] { return cluster.HealthyNodes() == static_cast<int>(agents.size()); }, 30s))
      << cluster.controller()->Log();

  int status = 0;
  api::Json job = cluster.PostJson("/api/v1/jobs",
                                   {{"name", "colorize"},
                                    {"entrypoint", "builtin:colorize-unet"},
                                    {"dataset", images.string()},
                                    {"global_batch", global_batch},
                                    {"steps", 100000},
                                    {"checkpoint_every_s", 1},
                                    {"min_devices", min_devices},
                                    {"max_devices", max_devices},
                                    {"layout", "data"},
                                    {"max_attempts", 3},
                                    {"args", {"--image-size", "32", "--width", "8"}}},
                                   &status);
  EXPECT_EQ(status, 201) << job.dump();
  const api::JobId id = job.value("id", api::JobId{0});
  const std::string path = "/api/v1/jobs/" + std::to_string(id);
  // Pending while tesserad profiles the builtin models, then running.
  EXPECT_TRUE(WaitFor([&] { return cluster.JobState(id) == "running"; }, 300s))
      << cluster.GetJson(path).dump() << "\n"
      << cluster.controller()->Log();
  EXPECT_EQ(cluster.PlannedNodes(id).size(), nodes_used) << cluster.GetJson(path).dump();
  const fs::path checkpoints =
      cluster.dir() / "controller" / "checkpoints" / ("job-" + std::to_string(id));
  EXPECT_TRUE(WaitFor([&] { return HasCheckpoint(checkpoints); }, 120s))
      << cluster.GetJson(path).dump();
  return ::testing::Test::HasFailure() ? 0 : id;
}

// Kills `victim`'s agent and workers, waits until attempt 2 reports steps and
// returns them; *trail gets the job's events.
api::Json KillAndAwaitAttemptTwo(Cluster& cluster, api::JobId id, const std::string& victim,
                                 std::string* trail) {
  const std::string path = "/api/v1/jobs/" + std::to_string(id);
  cluster.StopAgent(victim, SIGKILL);
  EXPECT_GT(KillProcessesUnder(cluster.dir() / ("agent-" + victim)), 0);
  api::Json points;
  EXPECT_TRUE(WaitFor(
      [&] {
        points = cluster.GetJson(path + "/metrics?attempt=2&limit=100")["points"];
        return points.is_array() && !points.empty();
      },
      90s))
      << cluster.GetJson(path).dump() << "\n"
      << cluster.controller()->Log();
  for (const auto& e : cluster.Events(id)) trail->append(e.to_state + " (" + e.reason + ")\n");
  return points;
}

void Cancel(Cluster& cluster, api::JobId id) {
  int status = 0;
  cluster.PostJson("/api/v1/jobs/" + std::to_string(id) + "/cancel", api::Json::object(), &status);
  EXPECT_TRUE(WaitFor([&] { return cluster.JobState(id) == "cancelled"; }, 30s))
      << cluster.JobState(id);
}

TEST(RecoveryE2ETest, NodeKilledUnderTheRealWorkerAndTheNextAttemptProgresses) {
  Cluster cluster("real-recovery");
  const char* kOneDevice =
      "devices:\n  - {name: \"A (emulated)\", memory: 8GiB, relative_speed: 0.5}\n";
  const api::JobId id = TrainUntilCheckpoint(
      cluster, {{"nodea", kOneDevice}, {"nodeb", kOneDevice}, {"nodec", kOneDevice}},
      /*global_batch=*/6, /*min_devices=*/2, /*max_devices=*/3, /*nodes_used=*/3);
  ASSERT_NE(id, 0);
  const std::string path = "/api/v1/jobs/" + std::to_string(id);
  const std::string victim =
      NodeOf(cluster.GetJson(path)["plan"]["replicas"][0]["stages"][0]["devices"][0]);

  std::string trail;
  const api::Json points = KillAndAwaitAttemptTwo(cluster, id, victim, &trail);
  ASSERT_FALSE(points.empty());
  std::string recovery;
  for (const auto& e : cluster.Events(id)) {
    if (e.to_state == "recovering" && recovery.empty()) recovery = e.reason;
  }
  // The attempt ended because a survivor saw its peer vanish (or, on a
  // loaded machine, because the node's heartbeats stopped first).
  EXPECT_TRUE(recovery.find("exited with code 75") != std::string::npos ||
              recovery.find("lost") != std::string::npos)
      << trail;
  const std::set<std::string> now = cluster.PlannedNodes(id);
  EXPECT_EQ(now.size(), 2u) << trail;
  EXPECT_FALSE(now.contains(victim)) << trail;
  // Resumed from the checkpoint, not from step 0.
  int64_t first_step = INT64_MAX;
  for (const auto& p : points) first_step = std::min<int64_t>(first_step, p.value("step", 0));
  EXPECT_GT(first_step, 1) << points.dump();
  Cancel(cluster, id);
}

// The demo lab's shape, on loopback: four ranks over three nodes, rank 0's node (two
// devices) survives the loss of a node that holds one rank, so the next
// attempt's rendezvous is on the same node as the last one's. One thread of
// this process is kept busy throughout (a lab box that also serves files).
// Attempt 2 must run and progress: no attempt may fail at launch.
TEST(RecoveryE2ETest, RankZerosNodeSurvivesAndAttemptTwoRunsUnderLoad) {
  std::atomic<bool> stop{false};
  std::thread busy([&] {
    volatile uint64_t x = 0;
    while (!stop.load(std::memory_order_relaxed)) x = x + 1;
  });
  struct Join {
    std::atomic<bool>& stop;
    std::thread& t;
    ~Join() {
      stop = true;
      t.join();
    }
  } join{stop, busy};

  // The demo lab runs its nodes on one host, on loopback: every rank shares
  // one port space, as there.
  struct Loopback {
    std::optional<std::string> before;
    Loopback() {
      if (const char* v = std::getenv("TESSERA_TEST_NO_NETNS")) before = v;
      ::setenv("TESSERA_TEST_NO_NETNS", "1", 1);
    }
    ~Loopback() {
      if (before) {
        ::setenv("TESSERA_TEST_NO_NETNS", before->c_str(), 1);
      } else {
        ::unsetenv("TESSERA_TEST_NO_NETNS");
      }
    }
  } loopback;
  Cluster cluster("real-recovery-rank0-survives");
  const char* kTwo =
      "devices:\n  - {name: \"A (emulated)\", memory: 8GiB, relative_speed: 0.3}\n"
      "  - {name: \"A (emulated)\", memory: 8GiB, relative_speed: 0.3}\n";
  const char* kOne = "devices:\n  - {name: \"A (emulated)\", memory: 8GiB, relative_speed: 0.3}\n";
  const api::JobId id =
      TrainUntilCheckpoint(cluster, {{"boxa", kTwo}, {"boxb", kOne}, {"boxc", kOne}},
                           /*global_batch=*/8, /*min_devices=*/2, /*max_devices=*/4,
                           /*nodes_used=*/3);
  ASSERT_NE(id, 0);
  const std::string path = "/api/v1/jobs/" + std::to_string(id);
  const api::Json plan = cluster.GetJson(path)["plan"];
  const std::string rank0 = NodeOf(plan["replicas"][0]["stages"][0]["devices"][0]);
  std::string victim;  // the first node in rank order other than rank 0's
  for (const auto& replica : plan["replicas"]) {
    for (const auto& stage : replica["stages"]) {
      std::string node = NodeOf(stage["devices"][0]);
      if (victim.empty() && node != rank0) victim = node;
    }
  }
  ASSERT_FALSE(victim.empty()) << plan.dump();

  std::string trail;
  ASSERT_FALSE(KillAndAwaitAttemptTwo(cluster, id, victim, &trail).empty());
  int recovering = 0;
  for (const auto& e : cluster.Events(id)) recovering += e.to_state == "recovering" ? 1 : 0;
  EXPECT_EQ(recovering, 1) << "attempt 2 failed:\n" << trail;
  EXPECT_EQ(cluster.GetJson(path).value("attempt", 0), 2) << trail;
  const std::set<std::string> now = cluster.PlannedNodes(id);
  EXPECT_FALSE(now.contains(victim)) << trail;
  EXPECT_TRUE(now.contains(rank0)) << trail;
  Cancel(cluster, id);
}
#endif  // TESSERA_E2E_HAVE_WORKER

}  // namespace
}  // namespace tessera::testing
