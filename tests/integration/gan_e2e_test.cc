// gan-pix2pix through the controller, end to end: tesserad profiles the GAN with
// the real tessera-worker (whole training steps; data parallel only), plans it
// data parallel over two tessera-agents of one emulated device each, and the
// ranks train it with real Gloo all-reduces between the nodes. A node killed
// mid-run: the job is replanned on the survivor and resumes from its checkpoint.
#include <gtest/gtest.h>
#include <signal.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "tests/integration/harness.h"

namespace tessera::testing {
namespace {
namespace fs = std::filesystem;
using namespace std::chrono_literals;

#ifdef TESSERA_E2E_HAVE_WORKER

std::map<std::string, std::string> RankLogs(Cluster& cluster, const std::string& node,
                                            api::JobId id) {
  std::map<std::string, std::string> logs;
  for (const fs::path& log : RankFiles(cluster, node, id, "worker.log")) {
    logs[log.string()] = ReadText(log);
  }
  return logs;
}

std::string AllRankLogs(Cluster& cluster, api::JobId id) {
  std::string out;
  for (const char* node : {"nodea", "nodeb"}) {
    for (const auto& [path, log] : RankLogs(cluster, node, id)) out += path + ":\n" + log + "\n";
  }
  return out;
}

// The last progress line any rank-0 of the job wrote, on either node.
api::Json LastRankZeroProgress(Cluster& cluster, api::JobId id) {
  api::Json last;
  for (const char* node : {"nodea", "nodeb"}) {
    for (const fs::path& p : RankFiles(cluster, node, id, "progress.jsonl")) {
      if (p.parent_path().filename() != "rank-0") continue;
      std::stringstream lines(ReadText(p));
      for (std::string line; std::getline(lines, line);) {
        api::Json j = api::Json::parse(line, nullptr, false);
        if (j.is_object() && (!last.is_object() || j.value("step", 0) > last.value("step", 0))) {
          last = j;
        }
      }
    }
  }
  return last;
}

bool HasCheckpoint(const fs::path& dir) {
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    if (it->path().filename().string().rfind("step-", 0) == 0 &&
        fs::exists(it->path() / "manifest.json")) {
      return true;
    }
  }
  return false;
}

TEST(GanE2ETest, TrainsDataParallelOnTwoNodesAndResumesOnTheSurvivor) {
  Cluster cluster("gan");
  const fs::path images = cluster.dir() / "images";
  ASSERT_EQ(GenImages(images, 16, 52), "");

  const std::string one = InventoryYaml({{1, "RTX3060 (emulated)", "12GiB", 0.5}});
  ASSERT_TRUE(cluster.StartWorkerLab({{"nodea", one}, {"nodeb", one}}));

  constexpr int kSteps = 200;
  api::JobId id = 0;
  ASSERT_TRUE(cluster.SubmitJob(
      {{"name", "gan"},
       {"kind", "train"},
       {"entrypoint", "builtin:gan-pix2pix"},
       {"dataset", images.string()},
       {"global_batch", 8},
       {"steps", kSteps},
       {"checkpoint_every_s", 1},
       {"min_devices", 1},
       {"max_devices", 2},
       {"max_attempts", 3},
       {"args", {"--image-size", "48", "--width", "4", "--lr", "0.01", "--threads", "1"}}},
      &id));
  const std::string path = "/api/v1/jobs/" + std::to_string(id);

  // Pending while tesserad profiles the builtin models (the GAN last), then planned
  // data parallel over both nodes: every layer of both networks on each device.
  ASSERT_TRUE(WaitFor([&] { return cluster.JobState(id) == "running"; }, 300s))
      << cluster.JobState(id) << "\n"
      << cluster.GetJson(path).dump() << "\n"
      << cluster.controller()->Log();
  api::Json plan = cluster.GetJson(path).value("plan", api::Json());
  ASSERT_TRUE(plan.is_object()) << cluster.GetJson(path).dump();
  EXPECT_EQ(plan.value("layout", ""), "data") << plan.dump();
  EXPECT_EQ(plan.value("micro_batches", 0), 1) << plan.dump();
  ASSERT_EQ(plan["replicas"].size(), 2u) << plan.dump();
  for (const auto& r : plan["replicas"]) {
    ASSERT_EQ(r["stages"].size(), 1u) << plan.dump();
    EXPECT_EQ(r["stages"][0]["layers"], api::Json({0, 13})) << plan.dump();
  }
  const std::set<std::string> first_nodes = cluster.PlannedNodes(id);
  ASSERT_EQ(first_nodes, (std::set<std::string>{"nodea", "nodeb"}));

  // Both ranks train, checkpoint; then one node dies.
  const fs::path checkpoints =
      cluster.dir() / "controller" / "checkpoints" / ("job-" + std::to_string(id));
  ASSERT_TRUE(WaitFor([&] { return HasCheckpoint(checkpoints); }, 120s))
      << cluster.GetJson(path).dump() << "\n"
      << AllRankLogs(cluster, id);
  const api::Json before = LastRankZeroProgress(cluster, id);
  ASSERT_LT(before.value("step", kSteps), kSteps) << "the job finished before the kill";
  const std::string victim = "nodeb";
  cluster.StopAgent(victim, SIGKILL);
  EXPECT_GT(KillProcessesUnder(cluster.dir() / ("agent-" + victim)), 0);

  ASSERT_TRUE(WaitFor([&] { return cluster.JobState(id) == "succeeded"; }, 240s))
      << cluster.JobState(id) << "\n"
      << cluster.GetJson(path).dump() << "\n"
      << AllRankLogs(cluster, id) << "\n"
      << cluster.controller()->Log();
  // The attempt ended (the node lost, or the survivor's rank failing first as its
  // peer vanished) and the job recovered.
  std::string trail;
  bool recovered = false;
  for (const auto& e : cluster.Events(id)) {
    trail += e.to_state + " (" + e.reason + ")\n";
    recovered |= e.to_state == "recovering";
  }
  EXPECT_TRUE(recovered) << trail;
  EXPECT_EQ(cluster.PlannedNodes(id), (std::set<std::string>{"nodea"}));
  // The survivor's new rank resumed from the checkpoint rather than from step 0.
  bool resumed = false;
  for (const auto& [p, log] : RankLogs(cluster, "nodea", id)) {
    resumed |= log.find("resumed from step-") != std::string::npos;
  }
  EXPECT_TRUE(resumed) << AllRankLogs(cluster, id);
  const api::Json last = LastRankZeroProgress(cluster, id);
  EXPECT_EQ(last.value("step", -1), kSteps) << last.dump();
  EXPECT_TRUE(std::isfinite(last.value("loss", NAN))) << last.dump();
  EXPECT_TRUE(std::isfinite(last.value("d_loss", NAN))) << last.dump();
}
#endif  // TESSERA_E2E_HAVE_WORKER

}  // namespace
}  // namespace tessera::testing
