// The planner's best plan must be within 1% of the exhaustive oracle's best
// predicted step time on a table of small mixed clusters.
#include "tests/scheduler/oracle.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "scheduler/planner.h"
#include "tests/scheduler/builders.h"

namespace tessera::scheduler::testing {
namespace {

struct OracleCase {
  std::string name;
  ClusterSnapshot cluster;
  ModelProfile model;
  JobRequest request;
  bool hybrid_oracle;  // enumerate hybrid layouts too (<= 4 devices)
};

// 12 layers of 2 GFLOPs, 20 MB parameters, 10 MB kept activations, 4 MB output.
ModelProfile MediumModel(int layers = 12) {
  return ModelBuilder().Input(1).Layers(layers, 2, 20, 10, 4).Build();
}

std::vector<OracleCase> Cases() {
  std::vector<OracleCase> cases;
  cases.push_back(
      {"two_fast_two_slow",
       ClusterBuilder().Node("a").Gpus(2, "fast", 24, 40).Gpus(2, "slow", 24, 10).Build(),
       MediumModel(), Train(16), true});
  cases.push_back({"one_big_memory_three_small",
                   ClusterBuilder().Node("a").Gpu("big", 80, 20).Gpus(3, "small", 8, 20).Build(),
                   ModelBuilder().Input(1).Layers(12, 2, 150, 50, 4).Build(), Train(16), true});
  cases.push_back({"two_nodes_slow_network",
                   ClusterBuilder()
                       .Node("a", 1)
                       .Gpus(2, "fast", 24, 40)
                       .Node("b", 1)
                       .Gpus(2, "fast", 24, 40)
                       .Build(),
                   MediumModel(), Train(16), true});
  cases.push_back(
      {"identical_four_nvlink",
       ClusterBuilder().Node("a").Gpus(4, "same", 24, 30).NvLink(0, 1).NvLink(2, 3).Build(),
       ModelBuilder().Input(1).Layers(12, 2, 80, 10, 4).Build(), Train(16), true});
  cases.push_back(
      {"inference_three_mixed",
       ClusterBuilder().Node("a").Gpu("fast", 24, 40).Gpu("mid", 16, 20).Gpu("slow", 12, 8).Build(),
       MediumModel(), Infer(12), true});
  cases.push_back({"fast_pair_and_slow_node_memory_tight",
                   ClusterBuilder()
                       .Node("a")
                       .Gpus(2, "fast", 16, 40)
                       .Node("b", 25)
                       .Gpus(2, "slow", 8, 10)
                       .Build(),
                   ModelBuilder().Input(1).Layers(12, 2, 100, 60, 8).Build(), Train(16), true});
  cases.push_back({"model_too_big_for_one_device_two_nodes",
                   ClusterBuilder()
                       .Node("a", 100)
                       .Gpus(2, "fast", 16, 40)
                       .Node("b", 100)
                       .Gpus(2, "fast", 16, 40)
                       .Build(),
                   ModelBuilder().Input(1).Layers(12, 4, 200, 20, 2).Build(), Train(16), true});
  cases.push_back({"model_too_big_mixed_nodes",
                   ClusterBuilder()
                       .Node("a", 50)
                       .Gpus(2, "fast", 16, 40)
                       .Node("b", 50)
                       .Gpus(2, "mid", 16, 20)
                       .Build(),
                   ModelBuilder().Input(1).Layers(10, 4, 220, 20, 2).Build(), Train(16), true});
  cases.push_back(
      {"compute_heavy_model_needs_two_devices",
       ClusterBuilder().Node("a").Gpus(4, "small", 4, 20).NvLink(0, 1).NvLink(2, 3).Build(),
       ModelBuilder().Input(1).Layers(12, 40, 100, 20, 2).Build(), Train(16), true});
  cases.push_back({"six_mixed_two_nodes",
                   ClusterBuilder()
                       .Node("a")
                       .Gpus(2, "fast", 24, 40)
                       .Gpu("slow", 12, 10)
                       .Node("b")
                       .Gpus(3, "mid", 16, 20)
                       .Build(),
                   MediumModel(8), Train(12), false});
  cases.push_back(
      {"five_small_memory_tight",
       ClusterBuilder().Node("a").Gpus(3, "mid", 8, 20).Node("b").Gpus(2, "fast", 12, 40).Build(),
       ModelBuilder().Input(1).Layers(8, 3, 250, 40, 6).Build(), Train(10), false});
  return cases;
}

class OracleTest : public ::testing::TestWithParam<OracleCase> {};

TEST_P(OracleTest, PlannerBestIsWithinOnePercentOfOracle) {
  const OracleCase& c = GetParam();
  auto plans = MakePlans(c.cluster, c.model, c.request);
  ASSERT_TRUE(plans.ok()) << plans.status().ToString();
  ASSERT_FALSE(plans->plans.empty());
  const Plan& best = plans->plans.front();

  const CostModel cost = CostModel::Create(c.cluster, c.model, c.request);
  OracleOptions options;
  options.hybrid = c.hybrid_oracle;
  const OracleResult oracle =
      BruteForce(cost, c.request.min_devices, c.request.max_devices, options);
  ASSERT_LT(oracle.step_s, 1e30) << "oracle found nothing";
  std::printf("[%s] planner %.6f s (%s)  oracle %.6f s (%s, %lld candidates)\n", c.name.c_str(),
              best.predicted.step_s, std::string(LayoutName(best.layout)).c_str(), oracle.step_s,
              std::string(LayoutName(LayoutOf(oracle.best))).c_str(),
              static_cast<long long>(oracle.evaluated));
  EXPECT_LE(best.predicted.step_s, oracle.step_s * 1.01) << best.why;
  if (c.hybrid_oracle) {
    // The oracle saw every option the planner can build: nothing may beat it.
    EXPECT_GE(best.predicted.step_s, oracle.step_s * (1 - 1e-9));
  }
}

INSTANTIATE_TEST_SUITE_P(MixedClusters, OracleTest, ::testing::ValuesIn(Cases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace tessera::scheduler::testing
