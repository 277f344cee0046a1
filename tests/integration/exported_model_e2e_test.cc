// A lab's own exported model end to end: examples/own-model/export.py (the
// project's PyTorch) exports a colorizer to TorchScript, an admin allows it
// as entrypoint model:colorizer, and the real tesserad and three real agents
// run it over generated scans. Mid-run one worker is killed (kill -9); the
// job recovers and every output is present exactly once, byte-equal to one
// process (`tessera-worker infer --local --model-file`), which
// tests/python/test_exported_model.py holds to PyTorch's own outputs. A file
// that is not a model fails the job with the reason, not a crash. A lab's
// scripted nn.Sequential trains as a pipeline planned from its layers'
// profile, and recovers onto another layout.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <vector>

#include "tests/integration/harness.h"

namespace tessera::testing {
namespace {
namespace fs = std::filesystem;
using namespace std::chrono_literals;

#ifdef TESSERA_E2E_HAVE_WORKER

constexpr int kImages = 3'000;

api::Json ModelSpec(const std::string& name, const std::string& entrypoint, const fs::path& in,
                    const fs::path& out) {
  api::Json spec = InferJobSpec(name, entrypoint, in, out, {"--threads", "1"});
  spec["global_batch"] = 2;
  return spec;
}

// Exports the lab's models into `models` (examples/own-model/export.py with
// `fit_steps` steps of fitting), generates `scans` scans of `px` px in `in`,
// and writes the reference in `ref`: the exported colorizer in one process.
void ExportAndReference(Cluster& cluster, const std::string& fit_steps, int scans, int px,
                        const fs::path& models, const fs::path& in, const fs::path& ref) {
  ASSERT_EQ(RunTool({TESSERA_PYTHON, TESSERA_OWN_MODEL_EXPORT, "--out", models.string(),
                     "--fit-steps", fit_steps},
                    {}, cluster.dir() / "export.log", 300s),
            "");
  ASSERT_EQ(GenImages(in, scans, px, 300s), "");
  ASSERT_EQ(RunTool({BinaryPath("tessera-worker"), "infer", "--local", "--model-file",
                     (models / "colorizer.pt").string(), "--data", in.string(), "--output",
                     ref.string(), "--threads", "1"},
                    {}, cluster.dir() / "reference.log", 600s),
            "");
}

TEST(ExportedModelE2ETest, ALabsTorchScriptColorizerExactlyOnceThroughAWorkerKill) {
  Cluster cluster("exported");
  const fs::path models = cluster.dir() / "models", in = cluster.dir() / "scans",
                 ref = cluster.dir() / "reference", out = cluster.dir() / "colorized";
  ASSERT_NO_FATAL_FAILURE(ExportAndReference(cluster, "5", kImages, 16, models, in, ref));
  const fs::path colorizer = models / "colorizer.pt";
  ASSERT_EQ(FilesBelow(ref).size(), static_cast<size_t>(kImages));

  const std::string one = InventoryYaml({{1, "T4 (emulated)", "16GiB", 0.6}});
  ASSERT_TRUE(cluster.StartWorkerLab({{"boxa", one}, {"boxb", one}, {"boxc", one}},
                                     "infer_chunk_images: 50\nlease_ms: 3000\n"));
  ASSERT_TRUE(
      cluster.AllowEntrypoint("model:colorizer", colorizer.string(), "the lab's colorizer"));

  api::Json spec = ModelSpec("colorize-own", "model:colorizer", in, out);
  // The module states its convention; the spec may state it too.
  spec.update({{"global_batch", 3},
               {"min_devices", 2},
               {"max_devices", 3},
               {"max_attempts", 5},
               {"image", {{"input", "gray"}, {"range", {-1, 1}}}}});
  api::JobId id = 0;
  ASSERT_TRUE(cluster.SubmitJob(spec, &id));
  const std::string target = "/api/v1/jobs/" + std::to_string(id);

  ASSERT_TRUE(cluster.RunningPast(id, 600, 240s));
  const std::set<std::string> planned = cluster.PlannedNodes(id);
  const std::string victim = planned.contains("boxb") ? "boxb" : *planned.begin();
  ASSERT_GT(KillProcessesUnder(cluster.dir() / ("agent-" + victim), "tessera-worker"), 0);
  ASSERT_TRUE(cluster.EndsIn(id, "succeeded", 400s));
  int recoveries = 0;
  for (const auto& e : cluster.Events(id)) recoveries += e.to_state == "recovering";
  EXPECT_GE(recoveries, 1) << "the killed worker must have cost an attempt";
  EXPECT_EQ(cluster.GetJson(target)["inference"]["images_done"], kImages);

  ExpectOutputsExactlyOnce(out, ref);
}

// Inference fills the gaps, with real agents and workers: the exported
// colorizer's infer job runs on two or three nodes; a train job needing two
// devices arrives; the infer job's ranks beyond its lowest give their devices back
// (stopped by their agents), the train job runs on them and succeeds, and
// the infer job, on its remaining rank, finishes with every output exactly
// once and byte-equal to one process.
TEST(ExportedModelE2ETest, InferenceGivesDevicesBackToTrainingWithoutLosingAnImage) {
  constexpr int kScans = 3000;
  Cluster cluster("exported-yield");
  const fs::path models = cluster.dir() / "models", in = cluster.dir() / "scans",
                 ref = cluster.dir() / "reference", out = cluster.dir() / "colorized";
  ASSERT_NO_FATAL_FAILURE(ExportAndReference(cluster, "0", kScans, 48, models, in, ref));
  const fs::path colorizer = models / "colorizer.pt";
  const std::string one = InventoryYaml({{1, "T4 (emulated)", "4GiB", 0.3}});
  ASSERT_TRUE(cluster.StartWorkerLab({{"boxa", one}, {"boxb", one}, {"boxc", one}},
                                     "infer_chunk_images: 30\nlease_ms: 3000\n"));
  ASSERT_TRUE(cluster.AllowEntrypoint("model:colorizer", colorizer.string()));
  ASSERT_TRUE(cluster.AllowEntrypoint("model:sequence", (models / "sequence.pt").string()));

  const api::Json train_spec = {{"name", "train-own"},
                                {"kind", "train"},
                                {"entrypoint", "model:sequence"},
                                {"dataset", in.string()},
                                {"global_batch", 8},
                                {"steps", 30},
                                {"min_devices", 2},
                                {"max_devices", 2},
                                {"layout", "data"},
                                {"args", {"--loss", "l1", "--image-size", "16"}}};
  int status = 0;
  // A dry run until the sequence's profile is measured, so the train job
  // arrives while the archive is still being colorized.
  ASSERT_TRUE(WaitFor(
      [&] {
        cluster.PostJson("/api/v1/plans", train_spec, &status);
        return status == 200;
      },
      120s))
      << status;
  api::Json spec = ModelSpec("colorize-archive", "model:colorizer", in, out);
  spec.update({{"global_batch", 3}, {"min_devices", 1}});
  api::JobId infer = 0;
  ASSERT_TRUE(cluster.SubmitJob(spec, &infer));
  ASSERT_TRUE(cluster.RunningPast(infer, 60, 240s));
  // On two or three nodes: either way the train job needs a device of it. A
  // node that was suspect when the job was placed (a late beat on a loaded
  // host) is joined once it beats again (GrowInference: no job waits, chunks
  // are left).
  ASSERT_TRUE(WaitFor([&] { return cluster.PlannedNodes(infer).size() >= 2; }, 90s))
      << cluster.GetJson("/api/v1/jobs/" + std::to_string(infer)).dump() << "\n"
      << cluster.controller()->Log();

  api::JobId train_id = 0;
  ASSERT_TRUE(cluster.SubmitJob(train_spec, &train_id));
  ASSERT_TRUE(cluster.EndsIn(train_id, "succeeded", 240s)) << "infer " << cluster.JobState(infer);
  std::string gave;
  for (const auto& e : cluster.Events(infer)) {
    if (e.reason.find("to job " + std::to_string(train_id)) != std::string::npos) gave = e.reason;
  }
  EXPECT_NE(gave.find("inference fills the gaps"), std::string::npos) << gave;
  const std::string target = "/api/v1/jobs/" + std::to_string(infer);
  ASSERT_TRUE(cluster.EndsIn(infer, "succeeded", 400s));
  EXPECT_EQ(cluster.GetJson(target).value("attempt", 0), 1) << "no attempt was spent";
  EXPECT_EQ(cluster.GetJson(target)["inference"]["images_done"], kScans);
  ExpectOutputsExactlyOnce(out, ref);
}

TEST(ExportedModelE2ETest, AFileThatIsNotAModelFailsTheJobWithTheReason) {
  Cluster cluster("exported-bad");
  const fs::path in = cluster.dir() / "scans", out = cluster.dir() / "out";
  const fs::path junk = cluster.dir() / "colorizer.pt";
  std::ofstream(junk) << "a text file saved with the wrong name\n";
  ASSERT_EQ(GenImages(in, 4, 16, 60s), "");
  ASSERT_TRUE(
      cluster.StartWorkerLab({{"boxa", InventoryYaml({{1, "T4 (emulated)", "1GiB", 0.6}})}}));
  ASSERT_TRUE(cluster.AllowEntrypoint("model:colorizer", junk.string()));

  api::JobId id = 0;
  ASSERT_TRUE(cluster.SubmitJob(ModelSpec("not-a-model", "model:colorizer", in, out), &id));
  ASSERT_TRUE(WaitFor([&] { return cluster.JobState(id) == "failed"; }, 120s))
      << cluster.JobState(id) << "\n"
      << cluster.controller()->Log();
  const api::Json done = cluster.GetJson("/api/v1/jobs/" + std::to_string(id));
  EXPECT_NE(done["reason"].get<std::string>().find(
                "neither a TorchScript file nor an AOTInductor package"),
            std::string::npos)
      << done.dump(2);
  EXPECT_TRUE(cluster.controller()->running()) << "tesserad must not crash";
}

// examples/own-model/run.sh as a lab runs it: the CLI allows both models
// and submits one infer job each; both succeed with every output written.
TEST(ExportedModelE2ETest, TheOwnModelExampleRunsThroughTheCli) {
  Cluster cluster("own-model-example");
  const std::string worker = BinaryPath("tessera-worker");
  const std::string one = InventoryYaml({{1, "T4 (emulated)", "4GiB", 0.6}});
  ASSERT_TRUE(cluster.StartWorkerLab({{"boxa", one}, {"boxb", one}}));
  const fs::path work = cluster.dir() / "example";
  std::map<std::string, std::string> env = {{"TESSERA_SERVER", cluster.controller_url()},
                                            {"TESSERA_TOKEN", cluster.admin_token()},
                                            {"TESSERA_CLI", BinaryPath("tessera")},
                                            {"TESSERA_WORKER", worker},
                                            {"TESSERA_PYTHON", TESSERA_PYTHON},
                                            {"OWN_MODEL_DIR", work.string()},
                                            {"OWN_MODEL_IMAGES", "40"}};
  if (cluster.tls()) env["TESSERA_CA_FILE"] = cluster.ca_file().string();
  ASSERT_EQ(RunTool({"/bin/bash", TESSERA_OWN_MODEL_RUN}, env, cluster.dir() / "example.log", 400s),
            "");
  const std::string log = ReadText(cluster.dir() / "example.log");
  for (const char* model : {"colorizer", "denoiser"}) {
    EXPECT_EQ(FilesBelow(work / (std::string("out-") + model)).size(), 40u) << log;
    EXPECT_NE(log.find(std::string("(model:own-") + model + "): succeeded"), std::string::npos)
        << log;
  }
  // The sequence trained, planned by its layers (a plan names layer ranges of
  // the file's eight layers).
  const size_t at = log.find("(model:own-sequence): succeeded");
  ASSERT_NE(at, std::string::npos) << log;
  const std::string line = log.substr(at, log.find('\n', at) - at);
  EXPECT_NE(line.find("-8"), std::string::npos) << line;
}

// A lab's scripted nn.Sequential trained through tesserad as a pipeline:
// tesserad profiles the file (on first ask) and cuts its eight layers into
// two stages on two of the three nodes; when the second stage's node dies,
// the job is re-planned onto the two nodes left (another cut where their
// speeds differ) in the same attempt: the first stage keeps its layers, a new
// rank on the third node loads the lost stage's from the checkpoint, and the
// job finishes with a falling loss.
TEST(ExportedModelE2ETest, ALabsSequenceOfLayersTrainsAsAPipelineAndRecovers) {
  Cluster cluster("exported-train");
  const fs::path models = cluster.dir() / "models", in = cluster.dir() / "scans";
  ASSERT_EQ(RunTool({TESSERA_PYTHON, TESSERA_OWN_MODEL_EXPORT, "--out", models.string(),
                     "--fit-steps", "0"},
                    {}, cluster.dir() / "export.log", 300s),
            "");
  ASSERT_EQ(GenImages(in, 32, 24, 60s), "");
  ASSERT_TRUE(
      cluster.StartWorkerLab({{"boxa", InventoryYaml({{1, "A (emulated)", "4GiB", 0.6}})},
                              {"boxb", InventoryYaml({{1, "B (emulated)", "4GiB", 0.3}})},
                              {"boxc", InventoryYaml({{1, "C (emulated)", "4GiB", 0.3}})}}));
  ASSERT_TRUE(cluster.AllowEntrypoint("model:sequence", (models / "sequence.pt").string()));

  api::JobId id = 0;
  ASSERT_TRUE(
      cluster.SubmitJob({{"name", "train-own"},
                         {"min_devices", 2},
                         {"max_devices", 2},
                         {"kind", "train"},
                         {"entrypoint", "model:sequence"},
                         {"dataset", in.string()},
                         {"global_batch", 8},
                         {"steps", 600},
                         {"layout", "pipeline"},
                         {"max_attempts", 3},
                         {"args",
                          {"--loss", "l1", "--image-size", "16", "--optimizer", "adam", "--lr",
                           "0.003", "--threads", "1", "--checkpoint-every-steps", "5"}}},
                        &id));
  const std::string path = "/api/v1/jobs/" + std::to_string(id);
  auto steps_of = [&](int attempt) {
    int64_t last = 0, first = INT64_MAX;
    for (const auto& p :
         cluster
             .GetJson(path + "/metrics?attempt=" + std::to_string(attempt) + "&rank=0&limit=1000")
             .value("points", api::Json::array())) {
      last = std::max<int64_t>(last, p.value("step", 0));
      first = std::min<int64_t>(first, p.value("step", 0));
    }
    return std::make_pair(first, last);
  };
  // The profile is measured first (the job waits), then the pipeline runs.
  ASSERT_TRUE(
      WaitFor([&] { return steps_of(1).second >= 20 || cluster.JobState(id) == "failed"; }, 180s))
      << cluster.GetJson(path).dump(2) << "\n"
      << cluster.controller()->Log();
  ASSERT_EQ(cluster.JobState(id), "running") << cluster.GetJson(path).dump(2);
  const api::Json plan = cluster.GetJson(path)["plan"];
  EXPECT_EQ(plan["layout"], "pipeline") << plan.dump();
  ASSERT_EQ(plan["replicas"].size(), 1u) << plan.dump();
  const api::Json& stages = plan["replicas"][0]["stages"];
  ASSERT_EQ(stages.size(), 2u) << plan.dump();
  EXPECT_EQ(stages[0]["layers"][0], 0) << plan.dump();
  EXPECT_EQ(stages[0]["layers"][1], stages[1]["layers"][0]) << plan.dump();
  EXPECT_EQ(stages[1]["layers"][1], 8) << "the file's eight layers: " << plan.dump();
  const std::set<std::string> before = cluster.PlannedNodes(id);
  ASSERT_EQ(before.size(), 2u) << plan.dump();
  const std::string second = stages[1]["devices"][0].get<std::string>();
  const std::string victim = second.substr(0, second.find(':'));

  EXPECT_GT(cluster.KillNode(victim), 0);
  ASSERT_TRUE(cluster.EndsIn(id, "succeeded", 240s));
  const api::Json done = cluster.GetJson(path);
  const std::set<std::string> after = cluster.PlannedNodes(id);
  EXPECT_EQ(after.size(), 2u);
  EXPECT_FALSE(after.contains(victim)) << victim;
  EXPECT_EQ(cluster.GetJson(path)["plan"]["layout"], "pipeline");
  // The surviving stage kept its layers and step; the lost stage's layers
  // came from the checkpoint to a new rank on the free node, in attempt 1.
  EXPECT_EQ(done.value("attempt", 0), 1) << done.dump(2);
  std::string events;
  for (const auto& e : cluster.Events(id)) events += e.to_state + " (" + e.reason + ")\n";
  EXPECT_NE(events.find("load them from the newest checkpoint"), std::string::npos) << events;
  EXPECT_EQ(events.find("recovering"), std::string::npos) << events;
  EXPECT_EQ(steps_of(1).second, 600);
  const api::Json metrics = cluster.GetJson(path + "/metrics?rank=0&limit=1000");
  std::vector<double> losses;
  for (const auto& p : metrics.value("points", api::Json::array())) {
    if (p.contains("loss") && p["loss"].is_number()) losses.push_back(p["loss"].get<double>());
  }
  ASSERT_GE(losses.size(), 10u) << metrics.dump();
  const double first = (losses[0] + losses[1] + losses[2]) / 3;
  const double last =
      (losses[losses.size() - 1] + losses[losses.size() - 2] + losses[losses.size() - 3]) / 3;
  EXPECT_LT(last, first) << "first " << first << " last " << last;
}

#endif  // TESSERA_E2E_HAVE_WORKER

}  // namespace
}  // namespace tessera::testing
