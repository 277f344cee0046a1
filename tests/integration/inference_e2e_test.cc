// Archive-scale inference end to end: the real tesserad and three real
// tessera-agents run `tessera-worker infer` of a trained colorization model
// over 10,000 generated images. Mid-run one worker is killed (kill -9: a new
// attempt), later a whole node (agent and workers, kill -9: the other nodes'
// ranks go on in the same attempt). The job recovers on its own and
// every output is present exactly once, no partial file remains, and each is
// byte-equal to a single-process run (`tessera-worker infer --local`).
#include <gtest/gtest.h>
#include <signal.h>

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

constexpr int kImages = 10'000;

// An infer job of the trained colorizer, one intra-op thread per rank (as the
// single-process reference runs), for the tests to complete.
api::Json ColorizeSpec(const std::string& name, const fs::path& in, const fs::path& out,
                       const fs::path& ckpt) {
  api::Json spec = InferJobSpec(name, "builtin:colorize-unet", in, out, {"--threads", "1"});
  spec["checkpoint"] = ckpt.string();
  return spec;
}

TEST(InferenceE2ETest, TenThousandImagesExactlyOnceThroughWorkerAndNodeKills) {
  Cluster cluster("inference");
  const std::string worker = BinaryPath("tessera-worker");
  const fs::path in = cluster.dir() / "scans", ckpt = cluster.dir() / "model",
                 ref = cluster.dir() / "reference", out = cluster.dir() / "colorized";

  // The collection, a trained model, and the single-process reference.
  ASSERT_EQ(GenImages(in, kImages, 16, 300s), "");
  ASSERT_EQ(RunTool({worker, "train", "--model", "colorize-unet", "--data", in.string(), "--steps",
                     "2", "--width", "4", "--image-size", "16", "--batch", "4",
                     "--checkpoint-every-steps", "1"},
                    {{"TESSERA_CHECKPOINT_DIR", ckpt.string()}}, cluster.dir() / "train.log", 300s),
            "");
  ASSERT_EQ(RunTool({worker, "infer", "--local", "--model", "colorize-unet", "--data", in.string(),
                     "--output", ref.string(), "--checkpoint", ckpt.string(), "--threads", "1"},
                    {}, cluster.dir() / "reference.log", 600s),
            "");
  const auto reference = FilesBelow(ref);
  ASSERT_EQ(reference.size(), static_cast<size_t>(kImages));

  const std::string one = InventoryYaml({{1, "T4 (emulated)", "16GiB", 0.6}});
  ASSERT_TRUE(cluster.StartWorkerLab({{"boxa", one}, {"boxb", one}, {"boxc", one}},
                                     "infer_chunk_images: 50\nlease_ms: 3000\n"));

  api::Json spec = ColorizeSpec("colorize-archive", in, out, ckpt);
  spec.update({{"global_batch", 3},
               {"min_devices", 2},
               {"max_devices", 3},
               {"layout", "data"},
               {"max_attempts", 5}});
  api::JobId id = 0;
  ASSERT_TRUE(cluster.SubmitJob(spec, &id));
  const std::string target = "/api/v1/jobs/" + std::to_string(id);

  // 1. One worker dies mid-run.
  ASSERT_TRUE(cluster.RunningPast(id, 1500, 240s));
  ASSERT_GT(KillProcessesUnder(cluster.dir() / "agent-boxb", "tessera-worker"), 0);
  ASSERT_TRUE(cluster.RecoversAndRuns(id));

  // 2. Later a whole node dies: its agent and its workers.
  ASSERT_TRUE(cluster.RunningPast(id, cluster.ImagesDone(id) + 1500, 240s));
  const std::set<std::string> planned = cluster.PlannedNodes(id);
  const std::string victim = planned.contains("boxc") ? "boxc" : *planned.begin();
  const int64_t attempt_before_node_loss = cluster.GetJson(target).value("attempt", int64_t{0});
  cluster.KillNode(victim);
  ASSERT_TRUE(cluster.EndsIn(id, "succeeded", 400s));

  // The killed worker cost a new attempt; the lost node did not: the ranks on
  // the other nodes went on in the same attempt and took over its chunks.
  int recoveries = 0;
  std::string trail, dropped;
  for (const auto& e : cluster.Events(id)) {
    recoveries += e.to_state == "recovering";
    trail += e.from_state + " -> " + e.to_state + " (" + e.reason + ")\n";
    if (e.from_state == "running" && e.to_state == "running") dropped = e.reason;
  }
  EXPECT_EQ(recoveries, 1) << trail;
  EXPECT_NE(dropped.find("node " + victim + " lost"), std::string::npos) << trail;
  EXPECT_NE(dropped.find("go on"), std::string::npos) << trail;
  EXPECT_EQ(cluster.GetJson(target).value("attempt", int64_t{0}), attempt_before_node_loss)
      << trail;
  api::Json final_job = cluster.GetJson(target);
  EXPECT_EQ(final_job["inference"]["images_done"], kImages);
  EXPECT_EQ(final_job["inference"]["images_total"], kImages);

  // Every output exactly once, nothing else (no temporary or partial file),
  // each byte-equal to the single-process run.
  ExpectOutputsExactlyOnce(out, ref);
}

// Scans larger than the model's nominal size with layout "tiled": the
// planner cuts them into overlapping tiles shared by device speed across the
// three nodes; rank 0 gathers and writes. Every output is byte-equal to one
// process tiling the same scan with the same tile size.
TEST(InferenceE2ETest, TiledLayoutSharesEachScanAcrossThreeNodes) {
  Cluster cluster("inference-tiled");
  const std::string worker = BinaryPath("tessera-worker");
  const fs::path in = cluster.dir() / "scans", ckpt = cluster.dir() / "model",
                 out = cluster.dir() / "colorized", ref = cluster.dir() / "reference";
  ASSERT_EQ(GenImages(in, 2, 640, 120s), "");
  ASSERT_EQ(RunTool({worker, "train", "--model", "colorize-unet", "--data", in.string(), "--steps",
                     "1", "--width", "4", "--image-size", "16", "--batch", "2",
                     "--checkpoint-every-steps", "1"},
                    {{"TESSERA_CHECKPOINT_DIR", ckpt.string()}}, cluster.dir() / "train.log", 300s),
            "");

  cluster.StartController("worker_binary: " + worker + "\n");
  // Devices too small to hold a 640 px scan whole (the planner estimates 256 bytes of
  // activations per pixel for this model): it must be tiled.
  const std::string fast = InventoryYaml({{1, "A (emulated)", "28MiB", 0.6}});
  const std::string slow = InventoryYaml({{1, "B (emulated)", "28MiB", 0.3}});
  cluster.StartAgent("boxa", fast);
  cluster.StartAgent("boxb", fast);
  cluster.StartAgent("boxc", slow);
  ASSERT_TRUE(WaitFor([&] { return cluster.HealthyNodes() == 3; }, 60s));

  api::Json spec = ColorizeSpec("tiled-scans", in, out, ckpt);
  spec.update({{"global_batch", 1},
               {"min_devices", 3},
               {"max_devices", 3},
               {"image_width", 640},
               {"image_height", 640},
               {"layout", "tiled"}});
  api::JobId id = 0;
  ASSERT_TRUE(cluster.SubmitJob(spec, &id));
  ASSERT_TRUE(cluster.EndsIn(id, "succeeded", 60s))
      << cluster.PostJson("/api/v1/plans", spec).dump(2);
  api::Json done = cluster.GetJson("/api/v1/jobs/" + std::to_string(id));
  ASSERT_EQ(done["plan"]["layout"], "tiled") << done["plan"].dump(2);
  EXPECT_EQ(cluster.PlannedNodes(id), (std::set<std::string>{"boxa", "boxb", "boxc"}));
  const int tile_px = done["plan"]["tiling"]["tile_px"].get<int>();
  ASSERT_GT(tile_px, 0);
  ASSERT_LT(tile_px, 640) << "the scans must not fit one tile";

  ASSERT_EQ(RunTool({worker, "infer", "--local", "--model", "colorize-unet", "--data", in.string(),
                     "--output", ref.string(), "--checkpoint", ckpt.string(), "--threads", "1",
                     "--max-tile-px", std::to_string(tile_px)},
                    {}, cluster.dir() / "reference.log", 300s),
            "");
  const auto reference = FilesBelow(ref), outputs = FilesBelow(out);
  ASSERT_EQ(reference.size(), 2u);
  ASSERT_EQ(outputs.size(), reference.size());
  for (const auto& [name, path] : reference) {
    ASSERT_TRUE(outputs.contains(name)) << name;
    EXPECT_EQ(ReadText(outputs.at(name)), ReadText(path)) << name;
  }
}

#endif  // TESSERA_E2E_HAVE_WORKER

}  // namespace
}  // namespace tessera::testing
