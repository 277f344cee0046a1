// BuildAttemptLaunch: the environment every rank of an attempt is started with.
#include "daemon/controller/attempt_launch.h"

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "scheduler/layout.h"
#include "worker/runtime/plan.h"

namespace tessera::daemon {
namespace {

using EnvMap = std::map<std::string, std::string>;

scheduler::Stage StageOn(const std::string& node, int index, int begin, int end) {
  scheduler::Stage s;
  s.devices = {{node, index}};
  s.layer_begin = begin;
  s.layer_end = end;
  return s;
}

scheduler::Replica ReplicaOf(int64_t batch, std::vector<scheduler::Stage> stages) {
  scheduler::Replica r;
  r.batch = batch;
  r.stages = std::move(stages);
  return r;
}

// A 2-node hybrid plan over 12 samples: replica 0 (6 samples) is a pipeline
// from boxb:0 to boxa:1, replica 1 (2 samples) runs on boxa:0, replica 2
// (4 samples) on boxb:1. Ranks: 0 = boxb:0, 1 = boxa:1, 2 = boxa:0, 3 = boxb:1;
// boxb holds rank 0, so it is node (group) 0 although "boxa" sorts first.
scheduler::Plan TwoNodePlan() {
  scheduler::Plan p;
  p.layout = scheduler::Layout::kHybrid;
  p.dp = 3;
  p.pp = 2;
  p.micro_batches = 2;
  p.replicas = {ReplicaOf(6, {StageOn("boxb", 0, 0, 3), StageOn("boxa", 1, 3, 6)}),
                ReplicaOf(2, {StageOn("boxa", 0, 0, 6)}), ReplicaOf(4, {StageOn("boxb", 1, 0, 6)})};
  return p;
}

api::Job TwoNodeJob() {
  api::Job job;
  job.id = 42;
  job.spec.name = "ddp";
  job.spec.entrypoint = "cmd:train-ddp";
  job.spec.global_batch = 12;
  job.spec.max_attempts = 5;
  // Validation refuses the reserved keys; the launch must win over them anyway.
  job.spec.env = {{"OMP_NUM_THREADS", "3"},
                  {"MY_FLAG", "on"},
                  {"RANK", "99"},
                  {"GROUP_WORLD_SIZE", "7"},
                  {"TORCHELASTIC_USE_AGENT_STORE", "True"},
                  {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "0"},
                  {"TESSERA_LOCAL_BATCH", "1000"}};
  return job;
}

Result<AttemptLaunch> BuildTwoNodeLaunch() {
  LaunchOptions options;
  options.worker_binary = "/usr/bin/tessera-worker";
  options.checkpoint_root = "/ckpt";
  options.collective_timeout_s = 45;
  return BuildAttemptLaunch(TwoNodeJob(), /*attempt=*/3, TwoNodePlan(), api::Json::object(),
                            {"cmd:train-ddp", "/opt/lab/train.py"},
                            {{"boxa", "10.0.0.1"}, {"boxb", "10.0.0.2"}}, options);
}

struct RankRow {
  int rank;
  std::string node;
  int64_t device;
  EnvMap want;
};

class TwoNodeLaunch : public ::testing::TestWithParam<RankRow> {};

TEST_P(TwoNodeLaunch, RankEnvironment) {
  const RankRow& row = GetParam();
  auto launch = BuildTwoNodeLaunch();
  ASSERT_TRUE(launch.ok()) << launch.status().ToString();
  ASSERT_EQ(launch->ranks.size(), 4u);
  const RankLaunch& r = launch->ranks.at(row.rank);
  EXPECT_EQ(r.node, row.node);
  EXPECT_EQ(r.device_index, row.device);
  EXPECT_EQ(r.launch.device_indices, std::vector<int64_t>{row.device});
  EXPECT_EQ(r.launch.argv, std::vector<std::string>{"/opt/lab/train.py"});
  const EnvMap common = {
      {"RANK", std::to_string(row.rank)},
      {"ROLE_RANK", std::to_string(row.rank)},
      {"WORLD_SIZE", "4"},
      {"ROLE_WORLD_SIZE", "4"},
      {"ROLE_NAME", "default"},
      {"GROUP_WORLD_SIZE", "2"},
      {"MASTER_ADDR", "10.0.0.2"},
      {"MASTER_PORT", std::to_string(MasterPortFor(42, 3, LaunchOptions{}))},
      {"TORCHELASTIC_RESTART_COUNT", "2"},
      {"TORCHELASTIC_MAX_RESTARTS", "4"},
      {"TORCHELASTIC_RUN_ID", "tessera-job-42"},
      {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"},
      {"NCCL_ASYNC_ERROR_HANDLING", "1"},
      {"TESSERA_JOB_ID", "42"},
      {"TESSERA_ATTEMPT", "3"},
      {"TESSERA_CHECKPOINT_DIR", "/ckpt/job-42"},
      {"TESSERA_COLLECTIVE_TIMEOUT_S", "45"},
      {"TESSERA_GLOBAL_BATCH", "12"},
      {"OMP_NUM_THREADS", "3"},  // the job's own, kept
      {"MY_FLAG", "on"},
  };
  for (const EnvMap* want : {&common, &row.want}) {
    for (const auto& [k, v] : *want) {
      ASSERT_TRUE(r.launch.env.contains(k)) << k;
      EXPECT_EQ(r.launch.env.at(k), v) << k;
    }
  }
  EXPECT_FALSE(r.launch.env.contains("TORCHELASTIC_USE_AGENT_STORE"))
      << "rank 0 hosts the store at MASTER_ADDR:MASTER_PORT";
}

INSTANTIATE_TEST_SUITE_P(
    Ranks, TwoNodeLaunch,
    ::testing::Values(RankRow{0,
                              "boxb",
                              0,
                              {{"LOCAL_RANK", "0"},
                               {"LOCAL_WORLD_SIZE", "2"},
                               {"GROUP_RANK", "0"},
                               {"TESSERA_LOCAL_BATCH", "6"},
                               {"TESSERA_SAMPLE_OFFSET", "0"}}},
                      // The second stage of replica 0 shares its first stage's samples.
                      RankRow{1,
                              "boxa",
                              1,
                              {{"LOCAL_RANK", "0"},
                               {"LOCAL_WORLD_SIZE", "2"},
                               {"GROUP_RANK", "1"},
                               {"TESSERA_LOCAL_BATCH", "6"},
                               {"TESSERA_SAMPLE_OFFSET", "0"}}},
                      RankRow{2,
                              "boxa",
                              0,
                              {{"LOCAL_RANK", "1"},
                               {"LOCAL_WORLD_SIZE", "2"},
                               {"GROUP_RANK", "1"},
                               {"TESSERA_LOCAL_BATCH", "2"},
                               {"TESSERA_SAMPLE_OFFSET", "6"}}},
                      RankRow{3,
                              "boxb",
                              1,
                              {{"LOCAL_RANK", "1"},
                               {"LOCAL_WORLD_SIZE", "2"},
                               {"GROUP_RANK", "0"},
                               {"TESSERA_LOCAL_BATCH", "4"},
                               {"TESSERA_SAMPLE_OFFSET", "8"}}}),
    [](const auto& info) { return "rank" + std::to_string(info.param.rank); });

TEST(AttemptLaunchTest, FirstAttemptHasNoRestartsAndOneNodeIsOneGroup) {
  api::Job job = TwoNodeJob();
  job.spec.max_attempts = 1;
  scheduler::Plan plan;
  plan.replicas = {ReplicaOf(5, {StageOn("boxa", 0, 0, 6)}),
                   ReplicaOf(7, {StageOn("boxa", 1, 0, 6)})};
  LaunchOptions options;
  auto launch = BuildAttemptLaunch(job, 1, plan, api::Json::object(), {"cmd:x", "/bin/x"},
                                   {{"boxa", "10.0.0.1"}}, options);
  ASSERT_TRUE(launch.ok()) << launch.status().ToString();
  ASSERT_EQ(launch->ranks.size(), 2u);
  for (const RankLaunch& r : launch->ranks) {
    EXPECT_EQ(r.launch.env.at("TORCHELASTIC_RESTART_COUNT"), "0");
    EXPECT_EQ(r.launch.env.at("TORCHELASTIC_MAX_RESTARTS"), "0");
    EXPECT_EQ(r.launch.env.at("GROUP_RANK"), "0");
    EXPECT_EQ(r.launch.env.at("GROUP_WORLD_SIZE"), "1");
    EXPECT_EQ(r.launch.env.at("TESSERA_COLLECTIVE_TIMEOUT_S"), "60") << "the default";
  }
  EXPECT_EQ(launch->ranks[1].launch.env.at("TESSERA_LOCAL_BATCH"), "7");
  EXPECT_EQ(launch->ranks[1].launch.env.at("TESSERA_SAMPLE_OFFSET"), "5");
}

// Every rank of an infer job gets the spec's dataset and output (a cmd: script
// reads them there); a train job's ranks get neither.
TEST(AttemptLaunchTest, InferRanksGetTheDatasetAndOutput) {
  scheduler::Plan plan;
  plan.replicas = {ReplicaOf(5, {StageOn("boxa", 0, 0, 6)}),
                   ReplicaOf(7, {StageOn("boxa", 1, 0, 6)})};
  for (api::JobKind kind : {api::JobKind::kInfer, api::JobKind::kTrain}) {
    api::Job job = TwoNodeJob();
    job.spec.kind = kind;
    job.spec.dataset = "/srv/scans";
    job.spec.output = "/srv/colorized";
    auto launch = BuildAttemptLaunch(job, 1, plan, api::Json::object(), {"cmd:x", "/bin/x"},
                                     {{"boxa", "10.0.0.1"}}, LaunchOptions{});
    ASSERT_TRUE(launch.ok()) << launch.status().ToString();
    for (const RankLaunch& r : launch->ranks) {
      if (kind == api::JobKind::kInfer) {
        EXPECT_EQ(r.launch.env.at("TESSERA_INFER_DATASET"), "/srv/scans");
        EXPECT_EQ(r.launch.env.at("TESSERA_INFER_OUTPUT"), "/srv/colorized");
      } else {
        EXPECT_FALSE(r.launch.env.contains("TESSERA_INFER_DATASET"));
        EXPECT_FALSE(r.launch.env.contains("TESSERA_INFER_OUTPUT"));
      }
    }
  }
}

// What each entrypoint kind runs: the reference worker on a builtin model,
// the worker on a registered exported model file (its image convention as
// flags, no checkpoint), or the registered command; the job's args last.
TEST(AttemptLaunchTest, EachEntrypointKindBuildsItsCommandLine) {
  using Argv = std::vector<std::string>;
  api::ImageConvention colorizer;
  colorizer.input = "l";
  colorizer.output = "ab";
  colorizer.range = std::make_pair(-1.0, 1.0);
  colorizer.align_px = 16;
  colorizer.halo_px = 0;
  struct Row {
    const char* name;
    EntrypointCommand entrypoint;
    api::JobKind kind;
    api::ImageConvention image;
    Argv args;
    Argv want;
  } rows[] = {
      {"builtin_train",
       {"builtin:colorize-unet", ""},
       api::JobKind::kTrain,
       {},
       {"--lr", "0.1"},
       {"/usr/bin/tessera-worker", "train", "--model", "colorize-unet", "--data", "/srv/scans",
        "--steps", "100", "--checkpoint-every-s", "300", "--lr", "0.1"}},
      {"builtin_infer",
       {"builtin:colorize-unet", ""},
       api::JobKind::kInfer,
       {},
       {"--threads", "2"},
       {"/usr/bin/tessera-worker", "infer", "--model", "colorize-unet", "--data", "/srv/scans",
        "--output", "/srv/out", "--checkpoint", "/srv/ckpt", "--threads", "2"}},
      {"model_with_image",
       {"model:lab-unet", "/srv/models/unet.pt2"},
       api::JobKind::kInfer,
       colorizer,
       {"--batch", "4"},
       {"/usr/bin/tessera-worker", "infer", "--model-file", "/srv/models/unet.pt2", "--data",
        "/srv/scans", "--output", "/srv/out", "--image-input", "l", "--image-output", "ab",
        "--value-range=-1,1", "--align-px", "16", "--halo-px", "0", "--batch", "4"}},
      {"model_from_the_module",
       {"model:lab-unet", "/srv/models/unet.pt"},
       api::JobKind::kInfer,
       {},
       {},
       {"/usr/bin/tessera-worker", "infer", "--model-file", "/srv/models/unet.pt", "--data",
        "/srv/scans", "--output", "/srv/out"}},
      {"model_train",
       {"model:lab-seq", "/srv/models/seq.pt"},
       api::JobKind::kTrain,
       colorizer,
       {"--loss", "l1"},
       {"/usr/bin/tessera-worker",
        "train",
        "--model-file",
        "/srv/models/seq.pt",
        "--data",
        "/srv/scans",
        "--steps",
        "100",
        "--checkpoint-every-s",
        "300",
        "--image-input",
        "l",
        "--image-output",
        "ab",
        "--value-range=-1,1",
        "--align-px",
        "16",
        "--halo-px",
        "0",
        "--loss",
        "l1"}},
      {"command",
       {"cmd:restore", "/opt/lab/restore.py"},
       api::JobKind::kInfer,
       {},
       {"--fast"},
       {"/opt/lab/restore.py", "--fast"}},
  };
  scheduler::Plan plan;
  plan.replicas = {ReplicaOf(4, {StageOn("boxa", 0, 0, 1)})};
  LaunchOptions options;
  options.worker_binary = "/usr/bin/tessera-worker";
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    api::Job job = TwoNodeJob();
    job.spec.entrypoint = row.entrypoint.name;
    job.spec.kind = row.kind;
    job.spec.dataset = "/srv/scans";
    job.spec.steps = 100;
    job.spec.checkpoint_every_s = 300;
    if (row.kind == api::JobKind::kInfer) {
      job.spec.output = "/srv/out";
      if (row.entrypoint.name.starts_with("builtin:")) job.spec.checkpoint = "/srv/ckpt";
    }
    job.spec.image = row.image;
    job.spec.args = row.args;
    auto launch = BuildAttemptLaunch(job, 1, plan, api::Json::object(), row.entrypoint,
                                     {{"boxa", "10.0.0.1"}}, options);
    ASSERT_TRUE(launch.ok()) << launch.status().ToString();
    ASSERT_EQ(launch->ranks.size(), 1u);
    EXPECT_EQ(launch->ranks[0].launch.argv, row.want);
  }
}

TEST(AttemptLaunchTest, StoredLaunchKeepsTheContract) {
  auto launch = BuildTwoNodeLaunch();
  ASSERT_TRUE(launch.ok()) << launch.status().ToString();
  auto again = AttemptLaunchFromJson(ToJson(*launch));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  ASSERT_EQ(again->ranks.size(), launch->ranks.size());
  for (size_t i = 0; i < launch->ranks.size(); ++i) {
    EXPECT_EQ(again->ranks[i].launch.env, launch->ranks[i].launch.env) << i;
  }
}

// ---- the rank plan as the worker reads it ----

// One plan shape the planner produces, with the job it is for.
struct PlanShape {
  const char* name;
  scheduler::Layout layout;
  int micro_batches;
  scheduler::Schedule schedule;
  std::vector<scheduler::Replica> replicas;
  std::optional<scheduler::Tiling> tiling;
};

constexpr int64_t kShapeLayers = 6;

std::vector<PlanShape> PlanShapes() {
  using scheduler::Layout;
  using scheduler::Schedule;
  return {
      {"data",
       Layout::kData,
       1,
       Schedule::k1F1B,
       {ReplicaOf(5, {StageOn("boxa", 0, 0, 6)}), ReplicaOf(4, {StageOn("boxa", 1, 0, 6)}),
        ReplicaOf(3, {StageOn("boxb", 0, 0, 6)})},
       std::nullopt},
      {"data_accumulating",
       Layout::kData,
       4,
       Schedule::kGPipe,
       {ReplicaOf(8, {StageOn("boxa", 0, 0, 6)}), ReplicaOf(8, {StageOn("boxb", 0, 0, 6)})},
       std::nullopt},
      {"pipeline_1f1b",
       Layout::kPipeline,
       8,
       Schedule::k1F1B,
       {ReplicaOf(16,
                  {StageOn("boxa", 0, 0, 2), StageOn("boxa", 1, 2, 5), StageOn("boxb", 0, 5, 6)})},
       std::nullopt},
      {"pipeline_gpipe",
       Layout::kPipeline,
       4,
       Schedule::kGPipe,
       {ReplicaOf(12, {StageOn("boxb", 1, 0, 3), StageOn("boxa", 0, 3, 6)})},
       std::nullopt},
      {"hybrid_cut_differently",
       Layout::kHybrid,
       2,
       Schedule::k1F1B,
       {ReplicaOf(6, {StageOn("boxb", 0, 0, 3), StageOn("boxa", 1, 3, 6)}),
        ReplicaOf(2, {StageOn("boxa", 0, 0, 6)}),
        ReplicaOf(4,
                  {StageOn("boxb", 1, 0, 1), StageOn("boxb", 2, 1, 4), StageOn("boxa", 2, 4, 6)})},
       std::nullopt},
      {"hybrid_gpipe",
       Layout::kHybrid,
       3,
       Schedule::kGPipe,
       {ReplicaOf(9, {StageOn("boxa", 0, 0, 4), StageOn("boxa", 1, 4, 6)}),
        ReplicaOf(9, {StageOn("boxb", 0, 0, 2), StageOn("boxb", 1, 2, 6)})},
       std::nullopt},
      {"tiled",
       Layout::kTiled,
       1,
       Schedule::kGPipe,
       {ReplicaOf(3, {StageOn("boxa", 0, 0, 6)}), ReplicaOf(2, {StageOn("boxb", 0, 0, 6)}),
        ReplicaOf(1, {StageOn("boxb", 1, 0, 6)})},
       scheduler::Tiling{512, 64, 6}},
  };
}

Result<AttemptLaunch> LaunchShape(const PlanShape& shape) {
  scheduler::Plan plan;
  plan.layout = shape.layout;
  plan.micro_batches = shape.micro_batches;
  plan.schedule = shape.schedule;
  plan.replicas = shape.replicas;
  plan.tiling = shape.tiling;
  plan.dp = static_cast<int>(plan.replicas.size());
  api::Job job = TwoNodeJob();
  job.spec.kind = shape.tiling ? api::JobKind::kInfer : api::JobKind::kTrain;
  job.spec.global_batch = 0;
  for (const scheduler::Replica& r : plan.replicas) job.spec.global_batch += r.batch;
  return BuildAttemptLaunch(job, 1, plan, api::Json::object(), {"builtin:m", ""},
                            {{"boxa", "10.0.0.1"}, {"boxb", "10.0.0.2"}}, LaunchOptions{});
}

class RankPlanShapes : public ::testing::TestWithParam<PlanShape> {};

// The worker's plan parser (worker/runtime/plan.h) reads back every training
// shape the controller writes, and finds each rank where the launch put it.
TEST_P(RankPlanShapes, WorkerReadsWhatTheControllerWrites) {
  const PlanShape& shape = GetParam();
  auto launch = LaunchShape(shape);
  ASSERT_TRUE(launch.ok()) << launch.status().ToString();
  const std::string text = launch->rank_plan.dump();
  const int world = static_cast<int>(launch->ranks.size());
  auto parsed = worker::ParsePlan(text);
  if (shape.layout == scheduler::Layout::kTiled) {
    // Inference only: the training parser refuses it, naming the layout; the
    // infer plan reads it (tests/worker/runtime/inference_test.cc).
    ASSERT_FALSE(parsed.ok());
    EXPECT_EQ(parsed.status().field(), "layout");
    auto doc = worker::ParsePlanDocument(text);
    ASSERT_TRUE(doc.ok()) << doc.status().ToString();
    EXPECT_EQ(scheduler::ParseLayout((*doc)["layout"].get<std::string>()),
              scheduler::Layout::kTiled);
    return;
  }
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString() << "\n" << text;
  const worker::Plan& plan = *parsed;
  EXPECT_EQ(plan.layout, shape.layout);
  EXPECT_EQ(plan.micro_batches, shape.micro_batches);
  EXPECT_EQ(plan.schedule, shape.schedule);
  ASSERT_EQ(plan.replicas.size(), shape.replicas.size());
  int rank = 0;
  for (size_t r = 0; r < shape.replicas.size(); ++r) {
    EXPECT_EQ(plan.replicas[r].batch, shape.replicas[r].batch) << r;
    ASSERT_EQ(plan.replicas[r].stages.size(), shape.replicas[r].stages.size()) << r;
    for (size_t s = 0; s < shape.replicas[r].stages.size(); ++s) {
      const worker::StagePlan& got = plan.replicas[r].stages[s];
      const scheduler::Stage& want = shape.replicas[r].stages[s];
      EXPECT_EQ(got.rank, rank++) << r << "/" << s;
      EXPECT_EQ(got.layer_begin, want.layer_begin) << r << "/" << s;
      EXPECT_EQ(got.layer_end, want.layer_end) << r << "/" << s;
    }
  }
  ASSERT_TRUE(worker::ValidatePlan(plan, world, kShapeLayers).ok())
      << worker::ValidatePlan(plan, world, kShapeLayers).ToString();
  for (const RankLaunch& r : launch->ranks) {
    const int64_t rank_id = r.launch.key.rank;
    auto role = worker::RoleForRank(plan, static_cast<int>(rank_id));
    ASSERT_TRUE(role.ok()) << rank_id;
    EXPECT_EQ(std::to_string(role->replica_batch), r.launch.env.at("TESSERA_LOCAL_BATCH"))
        << rank_id;
    EXPECT_EQ(std::to_string(role->sample_offset), r.launch.env.at("TESSERA_SAMPLE_OFFSET"))
        << rank_id;
    EXPECT_EQ(std::to_string(plan.global_batch), r.launch.env.at("TESSERA_GLOBAL_BATCH"));
  }
}

INSTANTIATE_TEST_SUITE_P(EveryLayout, RankPlanShapes, ::testing::ValuesIn(PlanShapes()),
                         [](const auto& info) { return std::string(info.param.name); });

// Live attempts never share a rendezvous port at one master address.
TEST(MasterPortTest, PickSkipsPortsLiveAttemptsHold) {
  LaunchOptions options;
  options.master_port_base = 40000;
  options.master_port_span = 4;
  const int first = MasterPortFor(5, 1, options);  // 40000 + (35 + 1) % 4 = 40000
  struct Row {
    const char* name;
    std::set<int> taken;
    int want;  // 0: exhausted
  } rows[] = {
      {"free", {}, first},
      {"first_taken", {first}, first + 1},
      {"wraps", {40000, 40001, 40002}, 40003},
      {"wraps_past_the_end", {40001, 40002, 40003}, 40000},
      {"others_ports_do_not_matter", {39999, 40004}, first},
      {"all_taken", {40000, 40001, 40002, 40003}, 0},
  };
  ASSERT_EQ(first, 40000);
  for (const Row& row : rows) {
    auto port = PickMasterPort(5, 1, row.taken, options);
    if (row.want == 0) {
      EXPECT_EQ(port.status().code(), StatusCode::kResourceExhausted) << row.name;
    } else {
      ASSERT_TRUE(port.ok()) << row.name << ": " << port.status().ToString();
      EXPECT_EQ(*port, row.want) << row.name;
    }
  }
}

// Two jobs whose first choice collides (7*job + attempt meets modulo the
// span): the second, built while the first is live, gets another port, and
// a master at another address may reuse it.
TEST(MasterPortTest, CollidingAttemptsGetDistinctPortsAtOneAddress) {
  LaunchOptions options;
  options.master_port_span = 2000;
  api::Job a = TwoNodeJob(), b = TwoNodeJob();
  a.id = 1;
  b.id = 0;
  for (api::JobId id = 2; id < 5000; ++id) {
    if (MasterPortFor(id, 1, options) == MasterPortFor(1, 1, options)) {
      b.id = id;
      break;
    }
  }
  ASSERT_EQ(MasterPortFor(b.id, 1, options), MasterPortFor(a.id, 1, options));
  scheduler::Plan plan;
  plan.replicas = {ReplicaOf(4, {StageOn("boxa", 0, 0, 6)})};
  const std::map<std::string, std::string> addresses = {{"boxa", "10.0.0.1"}};
  auto first =
      BuildAttemptLaunch(a, 1, plan, api::Json::object(), {"cmd:x", "/bin/x"}, addresses, options);
  ASSERT_TRUE(first.ok());
  MasterPortsInUse in_use;
  AddMasterPort(*first, &in_use);
  ASSERT_EQ(in_use.at("10.0.0.1").size(), 1u);
  auto second = BuildAttemptLaunch(b, 1, plan, api::Json::object(), {"cmd:x", "/bin/x"}, addresses,
                                   options, in_use);
  ASSERT_TRUE(second.ok());
  EXPECT_NE(second->ranks[0].launch.env.at("MASTER_PORT"),
            first->ranks[0].launch.env.at("MASTER_PORT"));
  auto elsewhere = BuildAttemptLaunch(b, 1, plan, api::Json::object(), {"cmd:x", "/bin/x"},
                                      {{"boxa", "10.0.0.9"}}, options, in_use);
  ASSERT_TRUE(elsewhere.ok());
  EXPECT_EQ(elsewhere->ranks[0].launch.env.at("MASTER_PORT"),
            first->ranks[0].launch.env.at("MASTER_PORT"));
}

TEST(AttemptLaunchTest, RanksRunAsTheOwnersAccountAndTheStoredLaunchKeepsIt) {
  LaunchOptions options;
  options.run_as = {{"alice", "lab-alice"}};
  api::Job job = TwoNodeJob();
  job.owner = "alice";
  auto launch = BuildAttemptLaunch(job, 1, TwoNodePlan(), api::Json::object(),
                                   {"cmd:train-ddp", "/opt/lab/train.py"},
                                   {{"boxa", "10.0.0.1"}, {"boxb", "10.0.0.2"}}, options);
  ASSERT_TRUE(launch.ok());
  for (const RankLaunch& r : launch->ranks) EXPECT_EQ(r.launch.run_as, "lab-alice");
  auto again = AttemptLaunchFromJson(ToJson(*launch));
  ASSERT_TRUE(again.ok());
  for (const RankLaunch& r : again->ranks) EXPECT_EQ(r.launch.run_as, "lab-alice");
  job.owner = "bob";  // not mapped: the agent's own account
  auto bobs = BuildAttemptLaunch(job, 1, TwoNodePlan(), api::Json::object(),
                                 {"cmd:train-ddp", "/opt/lab/train.py"},
                                 {{"boxa", "10.0.0.1"}, {"boxb", "10.0.0.2"}}, options);
  ASSERT_TRUE(bobs.ok());
  EXPECT_EQ(bobs->ranks[0].launch.run_as, "");
}

}  // namespace
}  // namespace tessera::daemon
