#include "scheduler/pipeline_partition.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "tests/scheduler/builders.h"

namespace tessera::scheduler::testing {
namespace {

std::vector<int> Sizes(const Partition& p) {
  std::vector<int> out;
  for (const CandidateStage& s : p.stages) out.push_back(s.end - s.begin);
  return out;
}

struct PartitionCase {
  std::string name;
  ClusterSnapshot cluster;
  ModelProfile model;
  std::vector<int> devices;  // pipeline order
  int64_t batch;
  int micro_batches;
  std::vector<int> want_sizes;
};

class PartitionTableTest : public ::testing::TestWithParam<PartitionCase> {};

TEST_P(PartitionTableTest, LayerCounts) {
  const PartitionCase& c = GetParam();
  const CostModel cm = CostModel::Create(c.cluster, c.model, Train(c.batch));
  auto p = PartitionLayers(cm, c.devices, {c.batch, c.micro_batches, Schedule::k1F1B});
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(Sizes(*p), c.want_sizes);
}

INSTANTIATE_TEST_SUITE_P(
    Table, PartitionTableTest,
    ::testing::Values(
        // Identical devices: the even split.
        PartitionCase{"identical_even",
                      ClusterBuilder().Node("a").Gpus(4, "same", 24, 20).Build(),
                      ModelBuilder().Layers(12, 2, 10, 1, 0.1).Build(),
                      {0, 1, 2, 3},
                      16,
                      8,
                      {3, 3, 3, 3}},
        // Twice as fast: twice the layers.
        PartitionCase{"speed_two_to_one",
                      ClusterBuilder().Node("a").Gpu("fast", 24, 40).Gpu("slow", 24, 20).Build(),
                      ModelBuilder().Layers(12, 2, 10, 1, 0.1).Build(),
                      {0, 1},
                      16,
                      8,
                      {8, 4}},
        // Fast but small: memory caps the fast device's share.
        PartitionCase{"memory_caps_fast_device",
                      ClusterBuilder().Node("a").Gpu("fast", 1, 40).Gpu("big", 40, 20).Build(),
                      ModelBuilder().Layers(12, 2, 50, 1, 0.1).Build(),
                      {0, 1},
                      16,
                      8,
                      {4, 8}}),
    [](const auto& info) { return info.param.name; });

// Against every partition of 9 layers over every order of 3 mixed devices.
TEST(PipelinePartitionTest, MatchesBruteForceOverAllPartitions) {
  const ClusterSnapshot cluster = ClusterBuilder()
                                      .Node("a", 10, 8)
                                      .Gpu("fast", 24, 40)
                                      .Gpu("mid", 24, 25)
                                      .Node("b", 10)
                                      .Gpu("slow", 24, 10)
                                      .Build();
  ModelProfile model = ModelBuilder().Input(1).Layers(9, 1, 10, 5, 2).Build();
  for (int l = 0; l < 9; ++l) {
    model.layers[l].forward_flops *= 1 + (l * 7 % 5);
    model.layers[l].output_bytes = static_cast<int64_t>((1 + (l * 3 % 4)) * 5e6);
  }
  const CostModel cm = CostModel::Create(cluster, model, Train(12));
  std::vector<int> order = {0, 1, 2};
  do {
    for (int m : {1, 3, 12}) {
      const PartitionParams params{12, m, Schedule::k1F1B};
      double best_max = std::numeric_limits<double>::infinity();
      double best_total = best_max;
      for (int b1 = 1; b1 < 8; ++b1) {
        for (int b2 = b1 + 1; b2 < 9; ++b2) {
          auto p = ScorePartition(cm, {{order[0], 0, b1}, {order[1], b1, b2}, {order[2], b2, 9}},
                                  params);
          if (!p) continue;
          best_max = std::min(best_max, p->bottleneck_s);
          best_total = std::min(best_total, p->replica_s);
        }
      }
      auto got = PartitionLayers(cm, order, params);
      ASSERT_TRUE(got.has_value());
      EXPECT_LE(got->replica_s, best_total * 1.01) << "m=" << m;
      // Many micro-batches: the slowest stage decides, and the DP minimises it exactly.
      if (m == 12) {
        EXPECT_LE(got->bottleneck_s, best_max * (1 + 1e-9));
      }
    }
  } while (std::next_permutation(order.begin(), order.end()));
}

TEST(PipelinePartitionTest, AllDepthsUsesDevicesFromTheEnd) {
  const ClusterSnapshot cluster = ClusterBuilder().Node("a").Gpus(3, "same", 24, 20).Build();
  const CostModel cm =
      CostModel::Create(cluster, ModelBuilder().Layers(6, 2, 1, 1, 0.1).Build(), Train(8));
  auto all = PartitionAllDepths(cm, {2, 0, 1}, {8, 4, Schedule::k1F1B}, 3);
  ASSERT_EQ(all.size(), 3u);
  ASSERT_TRUE(all[0] && all[1] && all[2]);
  EXPECT_EQ(all[0]->stages.size(), 1u);
  EXPECT_EQ(all[0]->stages[0].device, 2);  // depth 1: the last stage only
  ASSERT_EQ(all[1]->stages.size(), 2u);
  EXPECT_EQ(all[1]->stages[0].device, 0);
  EXPECT_EQ(all[1]->stages[1].device, 2);
  EXPECT_EQ(Sizes(*all[2]), (std::vector<int>{2, 2, 2}));
}

TEST(PipelinePartitionTest, GPipeNeedsMoreMemoryThan1F1B) {
  // 8 micro-batches of 2 samples x 200 MB activations per stage: GPipe holds all 8
  // (4 GB) and does not fit in 3.6 GB; 1F1B holds at most 2.
  const ClusterSnapshot cluster = ClusterBuilder().Node("a").Gpus(2, "same", 4, 20).Build();
  const ModelProfile model = ModelBuilder().Layers(2, 2, 10, 250, 1).Build();
  const CostModel cm = CostModel::Create(cluster, model, Train(16));
  EXPECT_TRUE(PartitionLayers(cm, {0, 1}, {16, 8, Schedule::k1F1B}).has_value());
  EXPECT_FALSE(PartitionLayers(cm, {0, 1}, {16, 8, Schedule::kGPipe}).has_value());
}

TEST(PipelinePartitionTest, NothingFitsGivesNullopt) {
  const ClusterSnapshot cluster = ClusterBuilder().Node("a").Gpus(2, "same", 1, 20).Build();
  const CostModel cm =
      CostModel::Create(cluster, ModelBuilder().Layers(4, 1, 1000, 1, 1).Build(), Train(4));
  EXPECT_FALSE(PartitionLayers(cm, {0, 1}, {4, 1, Schedule::k1F1B}).has_value());
}

}  // namespace
}  // namespace tessera::scheduler::testing
