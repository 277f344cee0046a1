// End to end: a lab's own PyTorch inference script (lease_infer_script.py,
// the project's Python with PyPI's torch) as a cmd: infer job on the real
// tesserad (HTTPS with its own CA) and three real tessera-agents, its items
// leased through python/tessera_lease.py. Mid-run one rank is killed (kill -9:
// a new attempt), later a whole node (agent and rank). Every output is then
// present exactly once, no temporary file remains, and each is byte-equal to
// the same script run in one process outside Tessera. A second run grows: the
// script starts on the one node a train job leaves free, and takes the other
// two as new ranks of the same attempt when the train job ends.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "tests/integration/harness.h"

namespace tessera::testing {
namespace {
namespace fs = std::filesystem;
using namespace std::chrono_literals;

#ifdef TESSERA_E2E_HAVE_WORKER

constexpr int kImages = 300;

// Checks that the project's Python has torch and PIL, generates `scans` scans
// in `in`, and writes the reference in `ref`: the same script in one process,
// outside Tessera.
void ScansAndReference(Cluster& cluster, int scans, const fs::path& in, const fs::path& ref) {
  ASSERT_EQ(std::system("'" TESSERA_PYTHON "' -c 'import torch, PIL' >/dev/null 2>&1"), 0)
      << TESSERA_PYTHON << " cannot import torch and PIL (run scripts/setup.sh)";
  ASSERT_EQ(GenImages(in, scans, 16, 120s), "");
  ASSERT_EQ(RunTool({TESSERA_PYTHON, TESSERA_LEASE_SCRIPT, "--data", in.string(), "--output",
                     ref.string()},
                    {}, cluster.dir() / "reference.log", 300s),
            "");
  ASSERT_EQ(FilesBelow(ref).size(), static_cast<size_t>(scans));
}

// A controller of `config` and three one-T4 nodes boxa, boxb, boxc; the script
// is allowed as cmd:infer-script.
void StartScriptLab(Cluster& cluster, const std::string& config) {
  cluster.StartController(config);
  const std::string one = InventoryYaml({{1, "T4 (emulated)", "16GiB", 0.6}});
  for (const char* node : {"boxa", "boxb", "boxc"}) cluster.StartAgent(node, one);
  ASSERT_TRUE(cluster.NodesJoin(3, 60s));
  const fs::path launcher =
      ScriptLauncher(cluster.dir() / "infer-script.sh", TESSERA_PYTHON, TESSERA_LEASE_SCRIPT);
  ASSERT_TRUE(cluster.AllowEntrypoint("cmd:infer-script", launcher.string()));
}

// An infer job of the script over `in` into `out`, on up to three ranks that
// take `delay` s a scan. Dataset and output reach the script as
// TESSERA_INFER_DATASET / _OUTPUT.
api::Json ScriptJob(const std::string& name, const fs::path& in, const fs::path& out,
                    const std::string& delay, int min_devices) {
  api::Json spec = InferJobSpec(name, "cmd:infer-script", in, out, {"--delay", delay});
  spec.update(
      {{"global_batch", 3}, {"min_devices", min_devices}, {"max_devices", 3}, {"layout", "data"}});
  return spec;
}

TEST(LeaseScriptE2ETest, PyTorchScriptWritesEveryOutputOnceThroughRankAndNodeKills) {
  Cluster cluster("lease-script");
  const fs::path in = cluster.dir() / "scans", ref = cluster.dir() / "reference",
                 out = cluster.dir() / "outputs";
  // The name a rank's process runs under (the venv's python is a link).
  const std::string python_exe = fs::canonical(TESSERA_PYTHON).filename().string();
  ASSERT_NO_FATAL_FAILURE(ScansAndReference(cluster, kImages, in, ref));

  ASSERT_NO_FATAL_FAILURE(
      StartScriptLab(cluster, "tls: on\ninfer_chunk_images: 10\nlease_ms: 3000\n"));
  ASSERT_TRUE(cluster.tls());

  api::Json spec = ScriptJob("lease-script", in, out, "0.04", /*min_devices=*/2);
  spec["max_attempts"] = 5;
  api::JobId id = 0;
  ASSERT_TRUE(cluster.SubmitJob(spec, &id));
  const std::string target = "/api/v1/jobs/" + std::to_string(id);

  // 1. One rank dies mid-run (kill -9 of the script's process).
  ASSERT_TRUE(cluster.RunningPast(id, 40, 120s));
  const std::string rank_victim = *cluster.PlannedNodes(id).begin();
  ASSERT_GT(KillProcessesUnder(cluster.dir() / ("agent-" + rank_victim), python_exe), 0);
  ASSERT_TRUE(cluster.RecoversAndRuns(id));

  // 2. Later a whole node dies: its agent and its rank.
  ASSERT_TRUE(cluster.RunningPast(id, cluster.ImagesDone(id) + 40, 120s));
  const std::set<std::string> planned = cluster.PlannedNodes(id);
  const std::string victim = planned.contains("boxc") ? "boxc" : *planned.begin();
  cluster.KillNode(victim);
  ASSERT_TRUE(cluster.EndsIn(id, "succeeded", 240s));
  api::Json final_job = cluster.GetJson(target);
  EXPECT_EQ(final_job["inference"]["images_done"], kImages);
  EXPECT_GE(final_job.value("attempt", int64_t{0}), 2) << "the killed rank cost an attempt";

  // Every output exactly once, nothing else (no temporary or partial file),
  // each byte-equal to the single-process run.
  ExpectOutputsExactlyOnce(out, ref);
}

// Inference grows back: a train job holds two of three nodes, so the script
// starts on the third alone; when the train job ends, the running infer job
// takes the devices it leaves as new ranks of the same attempt (while chunks are
// left to lease), and still writes every output exactly once, byte-equal to
// one process. The two devices come free at their agents' next reports, so a
// growth check may find one of them free; the job may finish before the next
// check takes the other: at least one is taken.
TEST(LeaseScriptE2ETest, AnInferJobGrowsOntoTheDevicesATrainJobLeaves) {
  // 0.05 s a scan: alone, the script needs 40 s, well past the train job's end.
  constexpr int kScans = 800;
  Cluster cluster("lease-grow");
  const fs::path in = cluster.dir() / "scans", ref = cluster.dir() / "reference",
                 out = cluster.dir() / "outputs";
  ASSERT_NO_FATAL_FAILURE(ScansAndReference(cluster, kScans, in, ref));
  ASSERT_NO_FATAL_FAILURE(StartScriptLab(cluster, "infer_chunk_images: 10\nlease_ms: 3000\n"));
  ASSERT_TRUE(cluster.AllowEntrypoint("cmd:hold", "/bin/sleep"));

  // Two devices for 20 s.
  api::JobId train_id = 0;
  ASSERT_TRUE(cluster.SubmitJob({{"name", "hold-two"},
                                 {"kind", "train"},
                                 {"entrypoint", "cmd:hold"},
                                 {"args", {"20"}},
                                 {"global_batch", 2},
                                 {"steps", 1},
                                 {"min_devices", 2},
                                 {"max_devices", 2}},
                                &train_id));
  ASSERT_TRUE(WaitFor([&] { return cluster.JobState(train_id) == "running"; }, 120s))
      << cluster.JobState(train_id);

  api::JobId id = 0;
  ASSERT_TRUE(cluster.SubmitJob(ScriptJob("grow-script", in, out, "0.05", /*min_devices=*/1), &id));
  const std::string target = "/api/v1/jobs/" + std::to_string(id);
  ASSERT_TRUE(cluster.RunningPast(id, 10, 120s));
  const std::set<std::string> alone = cluster.PlannedNodes(id);
  ASSERT_EQ(alone.size(), 1u) << "the train job holds the other two";

  ASSERT_TRUE(cluster.EndsIn(train_id, "succeeded", 120s)) << cluster.JobState(train_id);
  ASSERT_TRUE(cluster.EndsIn(id, "succeeded", 240s));
  std::string trail, grew;
  for (const auto& e : cluster.Events(id)) {
    trail += e.from_state + " -> " + e.to_state + " (" + e.reason + ")\n";
    if (e.reason.find("the inference grows") != std::string::npos) grew = e.reason;
  }
  EXPECT_FALSE(grew.empty()) << trail;
  const std::set<std::string> grown = cluster.PlannedNodes(id);
  EXPECT_GE(grown.size(), 2u) << trail;
  EXPECT_TRUE(grown.contains(*alone.begin())) << "the first rank stays: " << trail;
  const api::Json final_job = cluster.GetJson(target);
  EXPECT_EQ(final_job.value("attempt", int64_t{0}), 1) << "no attempt was spent: " << trail;
  EXPECT_EQ(final_job["inference"]["images_done"], kScans);
  ExpectOutputsExactlyOnce(out, ref);
}

#endif  // TESSERA_E2E_HAVE_WORKER

}  // namespace
}  // namespace tessera::testing
