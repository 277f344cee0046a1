#include "scheduler/planner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "tests/scheduler/builders.h"

namespace tessera::scheduler::testing {
namespace {

int64_t BatchSum(const Plan& p) {
  int64_t sum = 0;
  for (const Replica& r : p.replicas) sum += r.batch;
  return sum;
}

const Plan* Find(const PlanSet& set, Layout layout) {
  for (const Plan& p : set.plans) {
    if (p.layout == layout) return &p;
  }
  return nullptr;
}

bool AnyReason(const PlanSet& set, Layout layout, const std::string& part) {
  for (const Rejection& r : set.rejected) {
    if (r.layout == layout && r.reason.find(part) != std::string::npos) return true;
  }
  return false;
}

std::string Reasons(const PlanSet& set) {
  std::string out;
  for (const Rejection& r : set.rejected)
    out += std::string(LayoutName(r.layout)) + ": " + r.reason + "\n";
  return out;
}

// ---- infeasible jobs: a clear reason, not an empty list ----

struct InfeasibleCase {
  std::string name;
  ClusterSnapshot cluster;
  ModelProfile model;
  JobRequest request;
  StatusCode code;
  std::string message_part;
};

class InfeasibleTest : public ::testing::TestWithParam<InfeasibleCase> {};

TEST_P(InfeasibleTest, ReturnsReason) {
  const InfeasibleCase& c = GetParam();
  auto got = MakePlans(c.cluster, c.model, c.request);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), c.code);
  EXPECT_NE(got.status().message().find(c.message_part), std::string::npos)
      << got.status().message();
}

INSTANTIATE_TEST_SUITE_P(
    Table, InfeasibleTest,
    ::testing::Values(
        InfeasibleCase{"no_device", ClusterSnapshot{}, MediumModel(), Train(8),
                       StatusCode::kFailedPrecondition, "no free device"},
        InfeasibleCase{
            "all_busy",
            ClusterBuilder().Node("a").Gpu("x", 24, 20, true).Gpu("x", 24, 20, true).Build(),
            MediumModel(), Train(8), StatusCode::kFailedPrecondition, "busy, excluded: a:0, a:1"},
        // The GPU box: the agent found three GPUs but could not measure them.
        InfeasibleCase{"unmeasured_gpus_say_why",
                       [] {
                         ClusterSnapshot c =
                             ClusterBuilder().Node("gpubox").Gpus(2, "A100", 80, 0).Build();
                         for (Device& d : c.nodes[0].devices) {
                           d.unmeasured_reason = "benchmark of cuda:" + std::to_string(d.index) +
                                                 " failed: CUDA is not available";
                         }
                         return c;
                       }(),
                       MediumModel(), Train(8), StatusCode::kFailedPrecondition,
                       "no measured throughput or memory, excluded: gpubox:0 (benchmark of "
                       "cuda:0 failed: CUDA is not available), gpubox:1 (benchmark of cuda:1 "
                       "failed: CUDA is not available)"},
        InfeasibleCase{"fits_nowhere", ClusterBuilder().Node("a").Gpus(2, "tiny", 1, 20).Build(),
                       ModelBuilder().Layers(4, 1, 2000, 1, 1).Build(), Train(8),
                       StatusCode::kFailedPrecondition, "doesn't fit on a:0"},
        InfeasibleCase{"too_few_devices", ClusterBuilder().Node("a").Gpus(2, "x", 24, 20).Build(),
                       MediumModel(),
                       [] {
                         JobRequest r = Train(8);
                         r.min_devices = 3;
                         return r;
                       }(),
                       StatusCode::kFailedPrecondition, "at least 3 devices"},
        InfeasibleCase{"zero_batch", ClusterBuilder().Node("a").Gpus(2, "x", 24, 20).Build(),
                       MediumModel(), Train(0), StatusCode::kInvalidArgument, "must be positive"},
        InfeasibleCase{"no_layers", ClusterBuilder().Node("a").Gpus(2, "x", 24, 20).Build(),
                       ModelProfile{}, Train(4), StatusCode::kInvalidArgument, "no layers"},
        InfeasibleCase{"tiled_training", ClusterBuilder().Node("a").Gpus(2, "x", 24, 20).Build(),
                       MediumModel(), Train(4, Layout::kTiled), StatusCode::kInvalidArgument,
                       "inference only"}),
    [](const auto& info) { return info.param.name; });

TEST(PlannerTest, InvalidArgumentNamesTheField) {
  JobRequest r = Train(8);
  r.min_devices = 4;
  r.max_devices = 2;
  auto got = MakePlans(ClusterBuilder().Node("a").Gpus(2, "x", 24, 20).Build(), MediumModel(), r);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().field(), "max_devices");
}

TEST(PlannerTest, BadSharedCpuFiguresNameTheField) {
  struct Row {
    const char* what;
    std::function<void(ClusterSnapshot&)> mutate;
    const char* field;
  };
  const Row rows[] = {
      {"zero relative speed", [](ClusterSnapshot& c) { c.nodes[0].devices[1].relative_speed = 0; },
       "nodes[0].devices[1].relative_speed"},
  };
  for (const Row& row : rows) {
    ClusterSnapshot c = ClusterBuilder().Node("a").Gpus(2, "x", 24, 20).Build();
    row.mutate(c);
    auto got = MakePlans(c, MediumModel(), Train(8));
    ASSERT_FALSE(got.ok()) << row.what;
    EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument) << row.what;
    EXPECT_EQ(got.status().field(), row.field) << row.what;
  }
}

// ---- shapes of the answer ----

TEST(PlannerTest, OneDeviceGetsTheWholeBatch) {
  auto got =
      MakePlans(ClusterBuilder().Node("a").Gpu("x", 24, 20).Build(), MediumModel(), Train(8));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->plans.size(), 1u);
  const Plan& p = got->plans[0];
  EXPECT_EQ(p.layout, Layout::kData);
  ASSERT_EQ(p.replicas.size(), 1u);
  EXPECT_EQ(p.replicas[0].batch, 8);
  EXPECT_DOUBLE_EQ(p.replicas[0].gradient_weight, 1.0);
  EXPECT_EQ(p.replicas[0].stages[0].layer_begin, 0);
  EXPECT_EQ(p.replicas[0].stages[0].layer_end, 12);
  EXPECT_EQ(p.predicted.comm, 0);
  EXPECT_GT(p.predicted.samples_per_s, 0);
}

TEST(PlannerTest, IdenticalDevicesReduceToTheEvenSplit) {
  for (int64_t batch : {64, 66}) {
    auto got =
        MakePlans(ClusterBuilder().Node("a").Gpus(4, "same", 24, 20).Build(),
                  ModelBuilder().Layers(12, 8, 1, 10, 4).Build(), Train(batch, Layout::kData));
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    const Plan& p = got->plans[0];
    ASSERT_EQ(p.replicas.size(), 4u);
    int64_t lo = batch, hi = 0;
    for (const Replica& r : p.replicas) {
      lo = std::min(lo, r.batch);
      hi = std::max(hi, r.batch);
    }
    EXPECT_LE(hi - lo, 1) << "batch " << batch;
    EXPECT_EQ(BatchSum(p), batch);
  }
}

TEST(PlannerTest, GlobalBatchSmallerThanDeviceCount) {
  auto got = MakePlans(ClusterBuilder().Node("a").Gpus(4, "same", 24, 20).Build(), MediumModel(),
                       Train(2));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  for (const Plan& p : got->plans) {
    EXPECT_EQ(BatchSum(p), 2);
    EXPECT_LE(p.replicas.size(), 2u);
    EXPECT_LE(p.micro_batches, 2);
    for (const Replica& r : p.replicas) EXPECT_GE(r.batch, p.micro_batches);
  }
}

TEST(PlannerTest, UnevenSharesFollowSpeedAndWeightsSumToOne) {
  // 3x faster device gets 3x the samples; weights are batch / global batch.
  auto got = MakePlans(ClusterBuilder().Node("a").Gpu("fast", 24, 60).Gpu("slow", 24, 20).Build(),
                       ModelBuilder().Layers(4, 20, 1, 1, 1).Build(), Train(64, Layout::kData));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  const Plan& p = got->plans[0];
  ASSERT_EQ(p.replicas.size(), 2u);
  std::vector<int64_t> batches = {p.replicas[0].batch, p.replicas[1].batch};
  std::sort(batches.begin(), batches.end());
  EXPECT_EQ(batches, (std::vector<int64_t>{16, 48}));
  double weights = 0;
  for (const Replica& r : p.replicas) {
    weights += r.gradient_weight;
    EXPECT_DOUBLE_EQ(r.gradient_weight, r.batch / 64.0);
  }
  EXPECT_DOUBLE_EQ(weights, 1.0);
}

TEST(PlannerTest, BusyDevicesAreExcludedAndReported) {
  auto got = MakePlans(
      ClusterBuilder().Node("a").Gpu("x", 24, 20).Gpu("x", 24, 20, true).Gpu("x", 24, 20).Build(),
      MediumModel(), Train(16));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  for (const Plan& p : got->plans) {
    for (const DeviceId& d : p.Devices()) EXPECT_NE(d.ToString(), "a:1");
  }
  EXPECT_TRUE(AnyReason(*got, Layout::kAuto, "busy, excluded: a:1"));
}

TEST(PlannerTest, ModelTooBigForOneDeviceIsPipelinedWithReason) {
  // 12 x 150 MB params x 4 (params, grads, Adam) = 7.2 GB; 4 GB devices hold 3.6 GB.
  auto got = MakePlans(ClusterBuilder().Node("a").Gpus(4, "small", 4, 20).Build(),
                       ModelBuilder().Layers(12, 2, 150, 10, 2).Build(), Train(16));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(Find(*got, Layout::kData), nullptr);
  EXPECT_TRUE(AnyReason(*got, Layout::kData, "doesn't fit on a:0")) << Reasons(*got);
  const Plan* pipe = Find(*got, Layout::kPipeline);
  ASSERT_NE(pipe, nullptr);
  // Every stage respects its device's memory.
  for (const auto& [id, bytes] : pipe->predicted.peak_memory_bytes) EXPECT_LE(bytes, 3.6e9);
  // Stages tile the layers in order.
  int expect = 0;
  for (const Stage& s : pipe->replicas[0].stages) {
    EXPECT_EQ(s.layer_begin, expect);
    EXPECT_EQ(s.devices.size(), 1u);
    expect = s.layer_end;
  }
  EXPECT_EQ(expect, 12);
}

TEST(PlannerTest, PipelineKeepsNeighboursOnFastLinks) {
  // Two nodes of two devices on a slow network; the model needs all four devices.
  auto got =
      MakePlans(TwoNodes({2, "x", 4, 20}, {2, "x", 4, 20}, 1),
                ModelBuilder().Layers(12, 2, 230, 10, 20).Build(), Train(16, Layout::kPipeline));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  const Plan& p = got->plans[0];
  ASSERT_EQ(p.replicas[0].stages.size(), 4u);
  int hops = 0;
  const auto& st = p.replicas[0].stages;
  for (size_t s = 0; s + 1 < st.size(); ++s)
    hops += st[s].devices[0].node != st[s + 1].devices[0].node;
  EXPECT_EQ(hops, 1);
}

TEST(PlannerTest, ForcedLayoutReturnsOnlyThatLayout) {
  const ClusterSnapshot c = ClusterBuilder().Node("a").Gpus(4, "x", 24, 20).Build();
  for (Layout l : {Layout::kData, Layout::kPipeline, Layout::kHybrid}) {
    auto got = MakePlans(c, MediumModel(), Train(16, l));
    ASSERT_TRUE(got.ok()) << LayoutName(l) << ": " << got.status().ToString();
    ASSERT_FALSE(got->plans.empty());
    for (const Plan& p : got->plans) EXPECT_EQ(p.layout, l);
  }
}

TEST(PlannerTest, DeviceBoundsAreRespected) {
  JobRequest r = Train(32);
  r.min_devices = 2;
  r.max_devices = 3;
  auto got = MakePlans(ClusterBuilder().Node("a").Gpus(6, "x", 24, 20).Build(), MediumModel(), r);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  for (const Plan& p : got->plans) {
    EXPECT_GE(p.Devices().size(), 2u);
    EXPECT_LE(p.Devices().size(), 3u);
  }
}

TEST(PlannerTest, PlansAreRankedAndExplained) {
  auto got =
      MakePlans(ClusterBuilder().Node("a").Gpus(2, "fast", 24, 40).Gpus(2, "slow", 24, 10).Build(),
                MediumModel(), Train(32));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_GE(got->plans.size(), 2u);
  for (size_t i = 1; i < got->plans.size(); ++i) {
    EXPECT_LE(got->plans[i - 1].predicted.step_s, got->plans[i].predicted.step_s);
    EXPECT_NE(got->plans[i].why.find("x the chosen step time"), std::string::npos);
  }
  EXPECT_NE(got->plans[0].why.find("fastest of"), std::string::npos);
  for (const Rejection& r : got->rejected) EXPECT_EQ(r.reason.find('\n'), std::string::npos);
}

TEST(PlannerTest, InferenceUsesForwardOnlySchedule) {
  auto got = MakePlans(ClusterBuilder().Node("a").Gpus(3, "x", 24, 20).Build(), MediumModel(),
                       Infer(12, Layout::kPipeline));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->plans[0].schedule, Schedule::kGPipe);
}

// Inference ranks lease chunks and run them at their own pace: a slow device
// adds its rate to the job's, where a training step waits for it.
TEST(PlannerTest, InferenceRanksRunAtTheirOwnPaceSoSlowDevicesAddTheirRate) {
  const ClusterSnapshot lab =
      ClusterBuilder().Node("a").Gpus(2, "fast", 24, 40).Node("b").Gpus(2, "slow", 24, 5).Build();
  auto all = MakePlans(lab, MediumModel(), Infer(8, Layout::kData));
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_EQ(all->plans[0].Devices().size(), 4u) << "every device that holds the model";
  JobRequest two = Infer(8, Layout::kData);
  two.max_devices = 2;
  auto fast = MakePlans(lab, MediumModel(), two);
  ASSERT_TRUE(fast.ok()) << fast.status().ToString();
  ASSERT_EQ(fast->plans[0].Devices().size(), 2u);
  EXPECT_EQ(fast->plans[0].Devices()[0].node, "a");
  // The slow pair adds about its 1/8 of the fast pair's rate.
  const double gain =
      all->plans[0].predicted.samples_per_s / fast->plans[0].predicted.samples_per_s;
  EXPECT_GT(gain, 1.05);
  EXPECT_LT(gain, 1.2);
  // Training on the same devices: each step waits for the slowest replica.
  auto train = MakePlans(lab, MediumModel(), Train(8, Layout::kData));
  ASSERT_TRUE(train.ok()) << train.status().ToString();
  EXPECT_EQ(train->plans[0].Devices().size(), 2u);
}

TEST(PlannerTest, HugeImageInferenceIsTiled) {
  // 8192 x 8192 image: 1024x the nominal pixels; whole-image activations do not fit.
  JobRequest r = Infer(2);
  r.image = ImageSize{8192, 8192};
  const ModelProfile m = ModelBuilder().Input(0.8).Layers(8, 5, 1, 10, 16).Halo(16).Build();
  auto got =
      MakePlans(ClusterBuilder().Node("a").Gpu("fast", 24, 40).Gpu("slow", 12, 10).Build(), m, r);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  const Plan* tiled = Find(*got, Layout::kTiled);
  ASSERT_NE(tiled, nullptr);
  EXPECT_EQ(got->plans[0].layout, Layout::kTiled);
  ASSERT_TRUE(tiled->tiling.has_value());
  EXPECT_EQ(tiled->tiling->overlap_px, 32);
  EXPECT_GT(tiled->tiling->tiles_per_image, 1);
  ASSERT_EQ(tiled->replicas.size(), 2u);
  // Tiles are shared by speed: the 4x faster device gets more tiles.
  int64_t fast = 0, slow = 0;
  for (const Replica& rep : tiled->replicas) {
    (rep.stages[0].devices[0].index == 0 ? fast : slow) = rep.batch;
  }
  EXPECT_GT(fast, 3 * slow);
  EXPECT_EQ(fast + slow, 2 * tiled->tiling->tiles_per_image);
  EXPECT_TRUE(AnyReason(*got, Layout::kData, "doesn't fit"));
}

// A job that asks for three devices gets tiles on all three, even where the
// split by speed alone would leave the slow one without a tile.
TEST(PlannerTest, TiledInferenceGivesATileToEveryDeviceMinDevicesAsksFor) {
  struct Row {
    const char* name;
    int64_t min_devices;
    size_t devices_with_tiles;
  };
  const Row rows[] = {{"min 1: by speed alone", 1, 2}, {"min 3: every device", 3, 3}};
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    JobRequest r = Infer(3);
    r.global_batch = 1;
    r.min_devices = row.min_devices;
    r.max_devices = 3;
    r.image = ImageSize{1024, 1024};
    const ModelProfile m = ModelBuilder().Input(0.8).Layers(8, 5, 1, 10, 16).Halo(16).Build();
    auto got = MakePlans(ClusterBuilder()
                             .Node("a")
                             .Gpu("fast", 12, 40)
                             .Gpu("fast", 12, 40)
                             .Gpu("slow", 12, 1)
                             .Build(),
                         m, r);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    const Plan* tiled = Find(*got, Layout::kTiled);
    ASSERT_NE(tiled, nullptr);
    EXPECT_EQ(tiled->replicas.size(), row.devices_with_tiles);
  }
}

// ---- models that cannot be split (gan-pix2pix) ----

ModelProfile DataParallelOnly(ModelProfile m, int max_micro_batches = 0) {
  m.name = "gan";
  m.data_parallel_only = true;
  m.max_micro_batches = max_micro_batches;
  return m;
}

struct UnsplittableCase {
  std::string name;
  ClusterSnapshot cluster;
  ModelProfile model;
  JobRequest request;
  bool feasible;
  // Infeasible: parts of the error message; feasible: parts of the rejection reasons.
  std::vector<std::string> reason_parts;
};

class UnsplittableTest : public ::testing::TestWithParam<UnsplittableCase> {};

TEST_P(UnsplittableTest, OnlyDataParallelPlansWithReasonsForTheRest) {
  const UnsplittableCase& c = GetParam();
  auto got = MakePlans(c.cluster, c.model, c.request);
  if (!c.feasible) {
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.status().code(), StatusCode::kFailedPrecondition);
    for (const std::string& part : c.reason_parts) {
      EXPECT_NE(got.status().message().find(part), std::string::npos)
          << part << " not in: " << got.status().message();
    }
    return;
  }
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_FALSE(got->plans.empty());
  for (const Plan& p : got->plans) {
    EXPECT_EQ(p.layout, Layout::kData);
    for (const Replica& r : p.replicas) {
      ASSERT_EQ(r.stages.size(), 1u);
      EXPECT_EQ(r.stages[0].layer_begin, 0);
      EXPECT_EQ(r.stages[0].layer_end, static_cast<int>(c.model.layers.size()));
    }
    if (c.model.max_micro_batches > 0) {
      EXPECT_LE(p.micro_batches, c.model.max_micro_batches);
    }
  }
  for (const Baseline& b : got->baselines) {
    if (b.plan) {
      EXPECT_EQ(b.plan->layout, Layout::kData);
    }
  }
  EXPECT_TRUE(AnyReason(*got, Layout::kPipeline, "gan cannot be split into stages"))
      << Reasons(*got);
  EXPECT_TRUE(AnyReason(*got, Layout::kHybrid, "gan cannot be split into stages")) << Reasons(*got);
  for (const std::string& part : c.reason_parts) {
    EXPECT_NE(Reasons(*got).find(part), std::string::npos) << part << " not in:\n" << Reasons(*got);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Planner, UnsplittableTest,
    ::testing::Values(
        // A medium model on four devices: the splittable one gets pipeline and hybrid plans
        // too (SplittableModelGetsEveryLayout), this one only data.
        UnsplittableCase{"medium_on_four",
                         ClusterBuilder().Node("a").Gpus(4, "x", 24, 20).Build(),
                         DataParallelOnly(MediumModel()),
                         Train(16),
                         true,
                         {}},
        // Mixed speeds across nodes.
        UnsplittableCase{"mixed_nodes",
                         ClusterBuilder()
                             .Node("a")
                             .Gpu("fast", 24, 40)
                             .Node("b")
                             .Gpu("slow", 12, 10)
                             .Gpu("slow", 12, 10)
                             .Build(),
                         DataParallelOnly(MediumModel(), 1),
                         Train(32),
                         true,
                         {}},
        // Too big for one device: a splittable model is pipelined, this one cannot be.
        UnsplittableCase{"too_big_for_one_device",
                         ClusterBuilder().Node("a").Gpus(4, "small", 4, 20).Build(),
                         DataParallelOnly(ModelBuilder().Layers(12, 2, 150, 10, 2).Build()),
                         Train(16),
                         false,
                         {"data: doesn't fit on a:0",
                          "pipeline: gan cannot be split into stages (data parallel only)",
                          "hybrid: gan cannot be split into stages"}},
        // A forced pipeline is refused with the reason.
        UnsplittableCase{"forced_pipeline",
                         ClusterBuilder().Node("a").Gpus(4, "x", 24, 20).Build(),
                         DataParallelOnly(MediumModel()),
                         Train(16, Layout::kPipeline),
                         false,
                         {"pipeline: gan cannot be split into stages"}},
        // Shares of 32 need 2 micro-batches in 3.6 GB (21 samples each); the model trains
        // one a step, so no plan, and the reason says why.
        UnsplittableCase{"one_micro_batch_does_not_fit",
                         ClusterBuilder().Node("a").Gpus(2, "small", 4, 20).Build(),
                         DataParallelOnly(MediumModel(), 1),
                         Train(64),
                         false,
                         {"micro-batches: the model trains at most 1 a step"}}),
    [](const auto& info) { return info.param.name; });

TEST(PlannerTest, SplittableModelGetsEveryLayout) {
  // The counterpart of UnsplittableTest: the same inputs give the other layouts.
  auto medium = MakePlans(ClusterBuilder().Node("a").Gpus(4, "x", 24, 20).Build(), MediumModel(),
                          Train(16, Layout::kPipeline));
  ASSERT_TRUE(medium.ok()) << medium.status().ToString();
  EXPECT_NE(Find(*medium, Layout::kPipeline), nullptr);
  auto big = MakePlans(ClusterBuilder().Node("a").Gpus(4, "small", 4, 20).Build(),
                       ModelBuilder().Layers(12, 2, 150, 10, 2).Build(), Train(16));
  ASSERT_TRUE(big.ok()) << big.status().ToString();
  auto accumulates = MakePlans(ClusterBuilder().Node("a").Gpus(2, "small", 4, 20).Build(),
                               MediumModel(), Train(64));
  ASSERT_TRUE(accumulates.ok()) << accumulates.status().ToString();
  EXPECT_GE(accumulates->plans[0].micro_batches, 2);
}

}  // namespace
}  // namespace tessera::scheduler::testing
