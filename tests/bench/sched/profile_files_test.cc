// A lab's own model profiles in the simulator (bench/sched/profile_files.h):
// what a profile file gives, what it refuses, and a trace of the lab's model
// replayed with it.
#include "bench/sched/profile_files.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "bench/sched/clusters.h"
#include "bench/sched/run.h"
#include "bench/sched/sim_planner.h"
#include "bench/sched/trace.h"
#include "scheduler/builtin_profiles.h"
#include "tests/common/temp_dir.h"

namespace tessera::scheduler::sim {
namespace {

using testing::TempDir;

// A profile as `tessera-worker profile` prints one: four conv-like layers of
// `flops` forward FLOPs a sample each, on 64x64 greyscale input.
nlohmann::json WorkerProfile(const std::string& model, double flops) {
  nlohmann::json layers = nlohmann::json::array();
  for (int i = 0; i < 4; ++i) {
    layers.push_back({{"name", "layer" + std::to_string(i)},
                      {"fwd_flops_per_sample", flops},
                      {"param_bytes", 4 << 20},
                      {"activation_bytes_per_sample", 1 << 20},
                      {"output_bytes_per_sample", 1 << 18}});
  }
  return {{"model", model}, {"batch", 8}, {"in_shape", {1, 64, 64}}, {"layers", layers}};
}

std::string WriteJson(const TempDir& dir, const std::string& name, const std::string& text) {
  const std::string path = dir.File(name);
  std::ofstream(path) << text;
  return path;
}

TEST(ProfileFilesTest, AProfileIsNamedByItsModelFieldOrByTheNameGiven) {
  TempDir dir;
  const std::string path = WriteJson(dir, "p.json", WorkerProfile("sequence", 2e9).dump());
  Result<NamedProfile> own = ReadProfileArg(path);
  ASSERT_TRUE(own.ok()) << own.status().ToString();
  EXPECT_EQ(own->name, "sequence");
  ASSERT_EQ(own->profile.layers.size(), 4u);
  EXPECT_DOUBLE_EQ(own->profile.layers[2].forward_flops, 2e9);

  Result<NamedProfile> named = ReadProfileArg("lab-colorizer=" + path);
  ASSERT_TRUE(named.ok()) << named.status().ToString();
  EXPECT_EQ(named->name, "lab-colorizer");
  EXPECT_EQ(named->profile.name, "lab-colorizer");
}

TEST(ProfileFilesTest, BadProfilesSayWhatIsWrongWithTheirPath) {
  TempDir dir;
  nlohmann::json no_layers = WorkerProfile("m", 1e9);
  no_layers.erase("layers");
  nlohmann::json no_model = WorkerProfile("m", 1e9);
  no_model.erase("model");
  nlohmann::json bad_batch = WorkerProfile("m", 1e9);
  bad_batch["batch"] = 0;
  struct Case {
    std::string arg;
    StatusCode code;
    std::string field;
    std::string says;
  };
  const Case cases[] = {
      {dir.File("missing.json"), StatusCode::kNotFound, "", "missing.json"},
      {WriteJson(dir, "cut.json", "{\"model\": "), StatusCode::kInvalidArgument, "",
       "cut.json: not a JSON object"},
      {WriteJson(dir, "list.json", "[1, 2]"), StatusCode::kInvalidArgument, "",
       "list.json: not a JSON object"},
      {WriteJson(dir, "no_layers.json", no_layers.dump()), StatusCode::kInvalidArgument, "layers",
       "no_layers.json"},
      {WriteJson(dir, "no_model.json", no_model.dump()), StatusCode::kInvalidArgument, "model",
       "no_model.json"},
      {WriteJson(dir, "bad_batch.json", bad_batch.dump()), StatusCode::kInvalidArgument, "batch",
       "bad_batch.json"},
      {"=" + WriteJson(dir, "ok.json", WorkerProfile("m", 1e9).dump()),
       StatusCode::kInvalidArgument, "name", "empty NAME"},
  };
  for (const Case& c : cases) {
    Result<NamedProfile> p = ReadProfileArg(c.arg);
    ASSERT_FALSE(p.ok()) << c.arg;
    EXPECT_EQ(p.status().code(), c.code) << c.arg << ": " << p.status().ToString();
    EXPECT_EQ(p.status().field(), c.field) << c.arg << ": " << p.status().ToString();
    EXPECT_NE(p.status().message().find(c.says), std::string::npos)
        << c.arg << ": " << p.status().ToString();
  }
}

TEST(ProfileFilesTest, OwnProfilesJoinTheBuiltinsAndReplaceOneOfTheirName) {
  TempDir dir;
  Result<NamedProfile> lab =
      ReadProfileArg("lab-unet=" + WriteJson(dir, "a.json", WorkerProfile("x", 1e9).dump()));
  Result<NamedProfile> over =
      ReadProfileArg(WriteJson(dir, "b.json", WorkerProfile("colorize-unet", 3e9).dump()));
  ASSERT_TRUE(lab.ok() && over.ok());
  const std::map<std::string, ModelProfile> all = SimProfiles({*lab, *over});
  EXPECT_EQ(all.size(), BuiltinProfileNames().size() + 1);
  ASSERT_TRUE(all.contains("lab-unet"));
  ASSERT_TRUE(all.contains("denoiser-dncnn"));
  EXPECT_EQ(all.at("colorize-unet").layers.size(), 4u);  // the file's, not the builtin's
  EXPECT_NE(BuiltinProfile("colorize-unet")->layers.size(), 4u);
}

TEST(ProfileFilesTest, ATraceOfTheLabsOwnModelIsReadAndReplayedWithItsProfile) {
  TempDir dir;
  const std::string trace_path =
      WriteJson(dir, "t.csv",
                std::string(kCsvHeaderTrainOnly) +
                    "\n0,alice,lab-unet,32,4000,1,0,0\n60,bob,lab-unet,32,4000,1,2,0\n");
  // Without the profile the trace names an unknown model.
  const std::map<std::string, ModelProfile> builtins = SimProfiles({});
  Result<Trace> unknown = ReadTrace(trace_path, &builtins);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().field(), "model");
  EXPECT_NE(unknown.status().message().find("'lab-unet'"), std::string::npos);

  // With it, the jobs run under each policy at the profile's predicted
  // speed: a model of 4x the FLOPs takes longer alone.
  auto alone_times = [&](double flops) {
    Result<NamedProfile> own = ReadProfileArg(
        "lab-unet=" + WriteJson(dir, "lab.json", WorkerProfile("exported", flops).dump()));
    EXPECT_TRUE(own.ok()) << own.status().ToString();
    const std::map<std::string, ModelProfile> profiles = SimProfiles({*own});
    Result<Trace> trace = ReadTrace(trace_path, &profiles);
    EXPECT_TRUE(trace.ok()) << trace.status().ToString();
    const Cluster lab = DemoLab();
    SimPlanner planner(lab.snapshot, profiles);
    SharedOptions options;
    options.grow_min_speedup = 1.2;
    const sim::Run shared = SimulateShared(*trace, lab, options, &planner);
    const sim::Run rigid = SimulateRigid(*trace, lab, QueueOrdering::kFifo, &planner);
    std::vector<double> alone;
    for (const sim::Run* run : {&shared, &rigid}) {
      EXPECT_EQ(run->jobs.size(), 2u);
      for (const JobOutcome& j : run->jobs) {
        EXPECT_GT(j.end_s, j.start_s) << run->policy << ": " << j.why_not;
        alone.push_back(j.alone_s);
      }
    }
    return alone;
  };
  const std::vector<double> light = alone_times(1e9);
  const std::vector<double> heavy = alone_times(4e9);
  ASSERT_EQ(light.size(), heavy.size());
  for (size_t i = 0; i < light.size(); ++i) {
    EXPECT_GT(light[i], 0);
    EXPECT_GT(heavy[i], 2 * light[i]) << i;
  }
}

}  // namespace
}  // namespace tessera::scheduler::sim
