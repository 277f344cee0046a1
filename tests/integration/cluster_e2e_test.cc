// End to end on one machine: the real tesserad and three real tessera-agent
// processes, each with its own node name, state folder and emulated devices,
// running a small checkpointing worker program (checkpointing_worker.sh);
// and a real tessera-worker training job whose ranks on two nodes all-reduce
// over Gloo. Each node runs in its own network namespace where the test may
// create them, else on loopback (see harness.h); the same tests run in both.
#include <gtest/gtest.h>
#include <signal.h>

#include <cmath>
#include <fstream>

#include "tests/integration/harness.h"

namespace tessera::testing {
namespace {
namespace fs = std::filesystem;
using namespace std::chrono_literals;

const std::string kTwoFast = InventoryYaml({{2, "A100 (emulated)", "80GiB", 0.5}});
const std::string kOneFast = InventoryYaml({{1, "RTX4090 (emulated)", "24GiB", 0.4}});
const std::string kTwoSlow = InventoryYaml({{2, "GTX1080 (emulated)", "8GiB", 0.175}});

class ClusterE2ETest : public ::testing::Test {
 protected:
  // Lines added to the controller's config (see Cluster::StartController).
  virtual std::string ExtraConfig() const { return ""; }

  void SetUp() override {
    cluster_ =
        std::make_unique<Cluster>(::testing::UnitTest::GetInstance()->current_test_info()->name());
    cluster_->StartController(ExtraConfig());
    cluster_->StartAgent("boxa", kTwoFast);
    cluster_->StartAgent("boxb", kOneFast);
    cluster_->StartAgent("boxc", kTwoSlow);
    ASSERT_TRUE(cluster_->NodesJoin(3));
    ASSERT_TRUE(cluster_->AllowEntrypoint("cmd:checkpointing-worker", TESSERA_CHECKPOINTING_WORKER,
                                          "test worker that checkpoints"));
  }

  api::JobId Submit(int min_devices, int max_devices, int steps, double sleep_s) {
    api::JobId id = 0;
    EXPECT_TRUE(cluster_->SubmitJob({{"name", "e2e"},
                                     {"entrypoint", "cmd:checkpointing-worker"},
                                     {"args", {std::to_string(steps), std::to_string(sleep_s)}},
                                     {"global_batch", 12},
                                     {"steps", steps},
                                     {"min_devices", min_devices},
                                     {"max_devices", max_devices},
                                     {"max_attempts", 4}},
                                    &id));
    return id;
  }

  std::set<std::string> PlannedNodes(api::JobId id) { return cluster_->PlannedNodes(id); }

  std::vector<std::string> Trail(api::JobId id) {
    std::vector<std::string> out;
    for (const auto& e : cluster_->Events(id)) out.push_back(e.to_state);
    return out;
  }

  std::string Trace(api::JobId id) {
    std::ifstream in(cluster_->dir() / "controller" / "checkpoints" /
                     ("job-" + std::to_string(id)) / "trace");
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  std::unique_ptr<Cluster> cluster_;
};

TEST_F(ClusterE2ETest, NodeKilledMidRunIsReplannedOnSurvivorsAndResumes) {
  api::JobId id = Submit(2, 3, /*steps=*/60, /*sleep_s=*/0.1);
  ASSERT_TRUE(WaitFor([&] { return cluster_->JobState(id) == "running"; }, 30s))
      << cluster_->JobState(id);
  std::set<std::string> nodes = PlannedNodes(id);
  ASSERT_EQ(nodes.size() >= 1, true);
  // Let it checkpoint a few steps, then kill a node that holds a rank.
  ASSERT_TRUE(WaitFor(
      [&] {
        return fs::exists(cluster_->dir() / "controller" / "checkpoints" /
                          ("job-" + std::to_string(id)) / "step");
      },
      20s));
  std::this_thread::sleep_for(500ms);
  std::string victim = *nodes.begin();
  cluster_->StopAgent(victim, SIGKILL);
  EXPECT_GT(KillProcessesUnder(cluster_->dir() / ("agent-" + victim)), 0);

  ASSERT_TRUE(WaitFor([&] { return cluster_->JobState(id) == "succeeded"; }, 90s))
      << cluster_->JobState(id) << "\n"
      << cluster_->controller()->Log();
  std::vector<std::string> trail = Trail(id);
  auto has = [&](const std::string& s) {
    return std::find(trail.begin(), trail.end(), s) != trail.end();
  };
  EXPECT_TRUE(has("recovering"));
  EXPECT_EQ(trail.back(), "succeeded");
  bool lost_reason = false;
  for (const auto& e : cluster_->Events(id)) {
    lost_reason = lost_reason || (e.to_state == "recovering" &&
                                  e.reason.find("node " + victim + " lost") != std::string::npos);
  }
  EXPECT_TRUE(lost_reason);
  // The second attempt ran on survivors only, and resumed from a checkpoint.
  EXPECT_EQ(PlannedNodes(id).count(victim), 0u);
  std::string trace = Trace(id);
  EXPECT_NE(trace.find("2 0 "), std::string::npos) << trace;
  EXPECT_EQ(trace.find("2 0 2 start 0\n"), std::string::npos) << "attempt 2 started from scratch\n"
                                                              << trace;
  EXPECT_EQ(trace.find("2 0 3 start 0\n"), std::string::npos) << trace;
}

TEST_F(ClusterE2ETest, ControllerKill9AndRestartDoesNotRestartRunningJob) {
  api::JobId id = Submit(3, 3, /*steps=*/30, /*sleep_s=*/0.1);
  ASSERT_TRUE(WaitFor([&] { return cluster_->JobState(id) == "running"; }, 30s));
  cluster_->StopController(SIGKILL);
  std::this_thread::sleep_for(300ms);
  cluster_->StartController();
  ASSERT_TRUE(WaitFor([&] { return cluster_->JobState(id) == "succeeded"; }, 60s))
      << cluster_->JobState(id);
  std::vector<std::string> trail = Trail(id);
  EXPECT_EQ(std::count(trail.begin(), trail.end(), "starting"), 1)
      << ::testing::PrintToString(trail);
  EXPECT_EQ(std::count(trail.begin(), trail.end(), "recovering"), 0);
}

// An agent restart loads LibTorch and reads its inventory before the first
// beat; on a loaded 2-core machine that can outlast the 1.5 s test timeout,
// so this test uses the production dead timeout (3 s) plus margin.
class AgentRestartE2ETest : public ClusterE2ETest {
 protected:
  std::string ExtraConfig() const override { return "dead_after_ms: 6000\n"; }
};

TEST_F(AgentRestartE2ETest, AgentRestartLeavesNoOrphansAndJobStateStaysRight) {
  api::JobId id = Submit(3, 3, /*steps=*/30, /*sleep_s=*/0.1);
  ASSERT_TRUE(WaitFor([&] { return cluster_->JobState(id) == "running"; }, 30s));
  std::string node = *PlannedNodes(id).begin();
  cluster_->StopAgent(node, SIGTERM);
  cluster_->StartAgent(node, node == "boxa" ? kTwoFast : node == "boxb" ? kOneFast : kTwoSlow);
  ASSERT_TRUE(WaitFor([&] { return cluster_->JobState(id) == "succeeded"; }, 60s))
      << cluster_->JobState(id);
  std::vector<std::string> trail = Trail(id);
  EXPECT_EQ(std::count(trail.begin(), trail.end(), "starting"), 1)
      << ::testing::PrintToString(trail);
  // No worker outlives the job.
  EXPECT_TRUE(
      WaitFor([&] { return KillProcessesUnder(cluster_->dir() / ("agent-" + node)) == 0; }, 5s));
}

TEST_F(ClusterE2ETest, CancelStopsEveryRank) {
  api::JobId id = Submit(3, 3, /*steps=*/1000, /*sleep_s=*/0.1);
  ASSERT_TRUE(WaitFor([&] { return cluster_->JobState(id) == "running"; }, 30s));
  int status = 0;
  cluster_->PostJson("/api/v1/jobs/" + std::to_string(id) + "/cancel", api::Json::object(),
                     &status);
  EXPECT_EQ(status, 200);
  // Every rank's process is gone within the grace period plus a few beats.
  EXPECT_TRUE(WaitFor(
      [&] {
        int alive = 0;
        for (const char* n : {"boxa", "boxb", "boxc"}) {
          for (const auto& entry : fs::directory_iterator("/proc")) {
            std::string name = entry.path().filename();
            if (name.find_first_not_of("0123456789") != std::string::npos) continue;
            std::error_code ec;
            fs::path cwd = fs::read_symlink(entry.path() / "cwd", ec);
            if (!ec && cwd.string().rfind((cluster_->dir() / ("agent-" + std::string(n))).string(),
                                          0) == 0) {
              ++alive;
            }
          }
        }
        return alive == 0;
      },
      15s));
  EXPECT_EQ(cluster_->JobState(id), "cancelled");
}

#ifdef TESSERA_E2E_HAVE_WORKER

// The worker.log of every rank `node` ran for job `id`, by rank folder.
std::map<std::string, std::string> RankLogs(Cluster& cluster, const std::string& node,
                                            api::JobId id) {
  std::map<std::string, std::string> logs;
  for (const fs::path& log : RankFiles(cluster, node, id, "worker.log")) {
    logs[log.parent_path().filename().string()] = ReadText(log);
  }
  return logs;
}

std::string NetNamespaceOf(pid_t pid) {
  std::error_code ec;
  return fs::read_symlink("/proc/" + std::to_string(pid) + "/ns/net", ec).string();
}

// The data plane crosses nodes: a real `tessera-worker train` job (builtin
// colorization U-Net, 4 channels wide, 16-pixel crops, a few steps), data
// parallel over two nodes of one emulated device each, so its two ranks run
// on different nodes and all-reduce gradients with real Gloo collectives,
// between two network namespaces where the harness made them.
TEST(DataPlaneE2ETest, TrainingRanksOnTwoNodesAllReduceAcrossTheirNetworks) {
  Cluster cluster("dataplane");
  const fs::path images = cluster.dir() / "images";
  ASSERT_EQ(GenImages(images, 16, 20), "");

  const std::string one = InventoryYaml({{1, "RTX3060 (emulated)", "12GiB", 1.0}});
  ASSERT_TRUE(cluster.StartWorkerLab({{"nodea", one}, {"nodeb", one}}));

  // Every agent is the process the harness started (kill -9 reaches it), and
  // with namespaces each has a network of its own.
  std::set<std::string> networks = {NetNamespaceOf(::getpid())};
  for (const char* node : {"nodea", "nodeb"}) {
    std::error_code ec;
    EXPECT_EQ(fs::read_symlink("/proc/" + std::to_string(cluster.agent(node)->pid()) + "/exe", ec),
              fs::path(BinaryPath("tessera-agent")));
    networks.insert(NetNamespaceOf(cluster.agent(node)->pid()));
  }
  EXPECT_EQ(networks.size(), cluster.namespaces() ? 3u : 1u);
  if (cluster.namespaces()) {
    EXPECT_NE(cluster.node_address("nodea"), cluster.node_address("nodeb"));
  }

  constexpr int kSteps = 6;
  api::JobId id = 0;
  ASSERT_TRUE(cluster.SubmitJob(
      {{"name", "dataplane"},
       {"kind", "train"},
       {"entrypoint", "builtin:colorize-unet"},
       {"dataset", images.string()},
       {"global_batch", 8},
       {"steps", kSteps},
       {"layout", "data"},
       {"min_devices", 2},
       {"max_devices", 2},
       {"max_attempts", 1},
       {"args", {"--image-size", "16", "--width", "4", "--lr", "0.01", "--threads", "1"}}},
      &id));
  // Pending until tesserad has profiled the model (a background warm-up).
  ASSERT_TRUE(WaitFor([&] { return cluster.JobState(id) == "succeeded"; }, 180s))
      << cluster.JobState(id) << "\n"
      << cluster.GetJson("/api/v1/jobs/" + std::to_string(id)).dump() << "\n"
      << ::testing::PrintToString(RankLogs(cluster, "nodea", id)) << "\n"
      << ::testing::PrintToString(RankLogs(cluster, "nodeb", id)) << "\n"
      << cluster.controller()->Log();
  EXPECT_EQ(cluster.PlannedNodes(id), (std::set<std::string>{"nodea", "nodeb"}));

  // One rank per node; each bound Gloo to its own node's address, the one on
  // the route to MASTER_ADDR (loopback: 127.0.0.1), and both met at the
  // master node's address.
  std::set<std::string> master_addrs;
  for (const char* node : {"nodea", "nodeb"}) {
    auto logs = RankLogs(cluster, node, id);
    ASSERT_EQ(logs.size(), 1u) << node;
    const std::string& log = logs.begin()->second;
    EXPECT_NE(log.find(": gloo on " + cluster.node_address(node) + " (MASTER_ADDR "),
              std::string::npos)
        << node << ":\n"
        << log;
    size_t at = log.find("(MASTER_ADDR ");
    if (at != std::string::npos) {
      at += 13;
      master_addrs.insert(log.substr(at, log.find(')', at) - at));
    }
  }
  ASSERT_EQ(master_addrs.size(), 1u);
  const std::string master = *master_addrs.begin();
  EXPECT_TRUE(master == cluster.node_address("nodea") || master == cluster.node_address("nodeb"))
      << master;

  // Every step ran: rank 0's progress reached the last step with a finite loss.
  fs::path progress;
  for (const char* node : {"nodea", "nodeb"}) {
    for (const fs::path& p : RankFiles(cluster, node, id, "progress.jsonl")) {
      if (p.parent_path().filename() == "rank-0") progress = p;
    }
  }
  ASSERT_FALSE(progress.empty());
  std::stringstream lines(ReadText(progress));
  api::Json last;
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty()) last = api::Json::parse(line, nullptr, false);
  }
  ASSERT_TRUE(last.is_object()) << ReadText(progress);
  EXPECT_EQ(last.value("step", -1), kSteps);
  EXPECT_TRUE(std::isfinite(last.value("loss", NAN))) << last.dump();
}
#endif  // TESSERA_E2E_HAVE_WORKER

}  // namespace
}  // namespace tessera::testing
