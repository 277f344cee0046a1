// Recovery under the real worker, end to end: tesserad plans builtin
// colorize-unet data parallel over three tessera-agents (one emulated device
// each); the ranks train over Gloo and checkpoint; the node holding rank 0 is
// killed with its workers. The survivors' collectives fail, they exit with
// kPeerLostExitCode, the controller checks the silent node at once, and the
// next attempt resumes from the checkpoint on the two nodes left and makes
// progress. (The control-plane recovery test with the fast script worker is
// in cluster_e2e_test.cc.)
#include <gtest/gtest.h>
#include <signal.h>

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

TEST(RecoveryE2ETest, NodeKilledUnderTheRealWorkerAndTheNextAttemptProgresses) {
  Cluster cluster("real-recovery");
  const std::string worker = BinaryPath("tessera-worker");
  const fs::path images = cluster.dir() / "images";
  Process gen({worker, "gen-images", "--out", images.string(), "--count", "24", "--size", "32"}, {},
              cluster.dir() / "gen-images.log");
  ASSERT_EQ(gen.Wait(60s), 0) << gen.Log();
  cluster.StartController("worker_binary: " + worker + "\n");
  const char* kOneDevice =
      "devices:\n  - {name: \"A (emulated)\", memory: 8GiB, relative_speed: 0.5}\n";
  for (const char* n : {"nodea", "nodeb", "nodec"}) cluster.StartAgent(n, kOneDevice);
  ASSERT_TRUE(WaitFor([&] { return cluster.HealthyNodes() == 3; }, 30s))
      << cluster.controller()->Log();

  int status = 0;
  api::Json job = cluster.PostJson("/api/v1/jobs",
                                   {{"name", "colorize"},
                                    {"entrypoint", "builtin:colorize-unet"},
                                    {"dataset", images.string()},
                                    {"global_batch", 6},
                                    {"steps", 100000},
                                    {"checkpoint_every_s", 1},
                                    {"min_devices", 2},
                                    {"max_devices", 3},
                                    {"layout", "data"},
                                    {"max_attempts", 3},
                                    {"args", {"--image-size", "32", "--width", "8"}}},
                                   &status);
  ASSERT_EQ(status, 201) << job.dump();
  const api::JobId id = job.value("id", api::JobId{0});
  const std::string path = "/api/v1/jobs/" + std::to_string(id);
  // Pending while tesserad profiles the builtin models, then three ranks.
  ASSERT_TRUE(WaitFor([&] { return cluster.JobState(id) == "running"; }, 300s))
      << cluster.GetJson(path).dump() << "\n"
      << cluster.controller()->Log();
  ASSERT_EQ(cluster.PlannedNodes(id).size(), 3u) << cluster.GetJson(path).dump();
  const fs::path checkpoints =
      cluster.dir() / "controller" / "checkpoints" / ("job-" + std::to_string(id));
  ASSERT_TRUE(WaitFor([&] { return HasCheckpoint(checkpoints); }, 120s))
      << cluster.GetJson(path).dump();

  api::Json plan = cluster.GetJson(path)["plan"];
  std::string victim = plan["replicas"][0]["stages"][0]["devices"][0].get<std::string>();
  victim = victim.substr(0, victim.find(':'));
  cluster.StopAgent(victim, SIGKILL);
  EXPECT_GT(KillProcessesUnder(cluster.dir() / ("agent-" + victim)), 0);

  // The next attempt writes progress steps.
  api::Json points;
  ASSERT_TRUE(WaitFor(
      [&] {
        points = cluster.GetJson(path + "/metrics?attempt=2&limit=100")["points"];
        return points.is_array() && !points.empty();
      },
      90s))
      << cluster.GetJson(path).dump() << "\n"
      << cluster.controller()->Log();
  std::string trail;
  std::string recovery;
  for (const auto& e : cluster.Events(id)) {
    trail += e.to_state + " (" + e.reason + ")\n";
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

  cluster.PostJson(path + "/cancel", api::Json::object(), &status);
  EXPECT_TRUE(WaitFor([&] { return cluster.JobState(id) == "cancelled"; }, 30s))
      << cluster.JobState(id);
}
#endif  // TESSERA_E2E_HAVE_WORKER

}  // namespace
}  // namespace tessera::testing
