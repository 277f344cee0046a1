// A lab's own jobs, written by `tessera trace` (cli/trace_export.h), are a
// trace the simulator reads (bench/sched/trace.h): the two agree on the
// format, a model: entrypoint's jobs read with its --profile.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "bench/sched/clusters.h"
#include "bench/sched/profile_files.h"
#include "bench/sched/sim_planner.h"
#include "bench/sched/trace.h"
#include "cli/trace_export.h"
#include "scheduler/builtin_profiles.h"
#include "tests/common/temp_dir.h"

namespace tessera::scheduler::sim {
namespace {

api::Json JobJson(api::JobId id, const std::string& owner, int64_t created_ms, api::JobKind kind,
                  const std::string& entrypoint, int64_t batch, int64_t steps) {
  api::Job j;
  j.id = id;
  j.owner = owner;
  j.created_ms = created_ms;
  j.spec.name = "job-" + std::to_string(id);
  j.spec.kind = kind;
  j.spec.entrypoint = entrypoint;
  j.spec.global_batch = batch;
  j.spec.steps = steps;
  return api::ToJson(j);
}

TEST(LabTraceTest, TheCliWritesTheColumnsTheSimulatorReads) {
  EXPECT_EQ(std::string(cli::kTraceHeader), std::string(kCsvHeader) + "," + kCsvImageColumns);
}

TEST(LabTraceTest, ALabsJobsReplayAsTheyWereSubmitted) {
  api::Json archive =
      JobJson(3, "carol", 65'000, api::JobKind::kInfer, "builtin:colorize-unet", 32, 0);
  archive["inference"] = {{"images_total", 6400}};
  const std::string csv = cli::JobsAsTrace(
      {JobJson(1, "alice", 5'000, api::JobKind::kTrain, "builtin:denoiser-dncnn", 16, 3000),
       JobJson(2, "bob", 35'000, api::JobKind::kTrain, "model:own-unet", 8, 700), archive,
       JobJson(4, "dave", 1'000, api::JobKind::kTrain, "cmd:ddp", 8, 0)});
  testing::TempDir dir;
  const std::string path = dir.File("lab.csv");
  std::ofstream(path) << csv;

  // The lab's own model needs its profile.
  const std::map<std::string, ModelProfile> builtins = SimProfiles({});
  Result<Trace> unknown = ReadTrace(path, &builtins);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().field(), "model");

  NamedProfile own{"own-unet", *BuiltinProfile("colorize-unet")};
  const std::map<std::string, ModelProfile> profiles = SimProfiles({own});
  Result<Trace> trace = ReadTrace(path, &profiles);
  ASSERT_TRUE(trace.ok()) << trace.status().ToString() << "\n" << csv;
  ASSERT_EQ(trace->jobs.size(), 3u);  // the script's job is a comment
  EXPECT_EQ(trace->jobs[0].user, "alice");
  EXPECT_DOUBLE_EQ(trace->jobs[0].submit_s, 0);
  EXPECT_EQ(trace->jobs[0].steps, 3000);
  EXPECT_EQ(trace->jobs[1].model, "own-unet");
  EXPECT_DOUBLE_EQ(trace->jobs[1].submit_s, 30);
  EXPECT_EQ(trace->jobs[1].global_batch, 8);
  EXPECT_EQ(trace->jobs[2].kind, JobKind::kInfer);
  EXPECT_EQ(trace->jobs[2].steps, 200);  // 6400 images, 32 a step
  EXPECT_DOUBLE_EQ(trace->jobs[2].submit_s, 60);
  EXPECT_EQ(trace->jobs[0].image_width, 0);  // none named: the profile's own
}

// A job's images travel from tesserad's spec to the simulator's job, and the
// planner prices them: the same training job at twice the crop's side takes
// longer per step, as tesserad plans it (its profile scaled by the pixels).
TEST(LabTraceTest, AJobsImagesAreReplayedAtTheirSize) {
  api::Json small = JobJson(1, "alice", 0, api::JobKind::kTrain, "builtin:colorize-unet", 16, 100);
  api::Json large = JobJson(2, "bob", 0, api::JobKind::kTrain, "builtin:colorize-unet", 16, 100);
  small["spec"]["args"] = {"--image-size", "128"};
  large["spec"]["args"] = {"--image-size", "256"};
  testing::TempDir dir;
  const std::string path = dir.File("lab.csv");
  std::ofstream(path) << cli::JobsAsTrace({small, large});
  const std::map<std::string, ModelProfile> profiles = SimProfiles({});
  Result<Trace> trace = ReadTrace(path, &profiles);
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  ASSERT_EQ(trace->jobs.size(), 2u);
  EXPECT_EQ(trace->jobs[0].image_width, 128);
  EXPECT_EQ(trace->jobs[1].image_height, 256);

  const Cluster lab = DemoLab();
  SimPlanner planner(lab.snapshot, profiles);
  Result<PlanSet> at_128 = planner.Plan(trace->jobs[0], 1, {});
  Result<PlanSet> at_256 = planner.Plan(trace->jobs[1], 1, {});
  ASSERT_TRUE(at_128.ok() && at_256.ok());
  const double ratio = at_256->plans[0].predicted.step_s / at_128->plans[0].predicted.step_s;
  EXPECT_GT(ratio, 2.0) << "four times the pixels";
}

}  // namespace
}  // namespace tessera::scheduler::sim
