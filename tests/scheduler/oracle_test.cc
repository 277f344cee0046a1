// The planner's best plan must be within 1% of the exhaustive oracle's best
// predicted step time on a table of small mixed clusters.
#include "tests/scheduler/oracle.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <ostream>
#include <random>
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

std::vector<OracleCase> Cases() {
  std::vector<OracleCase> cases;
  cases.push_back(
      {"two_fast_two_slow",
       ClusterBuilder().Node("a").Gpus(2, "fast", 24, 40).Gpus(2, "slow", 24, 10).Build(),
       MediumModel(), Train(16), true});
  cases.push_back({"one_big_memory_three_small",
                   ClusterBuilder().Node("a").Gpu("big", 80, 20).Gpus(3, "small", 8, 20).Build(),
                   ModelBuilder().Input(1).Layers(12, 2, 150, 50, 4).Build(), Train(16), true});
  cases.push_back({"two_nodes_slow_network", TwoNodes({2, "fast", 24, 40}, {2, "fast", 24, 40}, 1),
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
                   TwoNodes({2, "fast", 16, 40}, {2, "fast", 16, 40}, 100),
                   ModelBuilder().Input(1).Layers(12, 4, 200, 20, 2).Build(), Train(16), true});
  cases.push_back({"model_too_big_mixed_nodes",
                   TwoNodes({2, "fast", 16, 40}, {2, "mid", 16, 20}, 50),
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
  cases.push_back({"five_small_memory_tight", TwoNodes({3, "mid", 8, 20}, {2, "fast", 12, 40}),
                   ModelBuilder().Input(1).Layers(8, 3, 250, 40, 6).Build(), Train(10), false});
  return cases;
}

void PrintTo(const OracleCase& c, std::ostream* os) { *os << c.name; }

class OracleTest : public ::testing::TestWithParam<OracleCase> {};

TEST_P(OracleTest, PlannerBestIsWithinOnePercentOfOracle) {
  const OracleCase& c = GetParam();
  // The search itself: no baseline kept within a margin (a policy, tested apart).
  PlannerOptions search_only;
  search_only.baseline_margin = 0;
  auto plans = MakePlans(c.cluster, c.model, c.request, search_only);
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

// Random mixed clusters (deterministic seeds): uncorrelated speed, memory, links and
// layer shapes, where ordering and grouping heuristics are easiest to fool. The
// first seeds listed once beat earlier versions of the planner by 4-14%.
OracleCase RandomCase(int seed, int min_devices, int max_devices, int max_layers) {
  std::mt19937 rng(seed);
  auto U = [&](double a, double b) { return std::uniform_real_distribution<double>(a, b)(rng); };
  auto I = [&](int a, int b) { return std::uniform_int_distribution<int>(a, b)(rng); };
  ClusterBuilder cb;
  const int devices = I(min_devices, max_devices);
  const int nodes = I(1, std::min(devices, 2));
  int made = 0;
  for (int n = 0; n < nodes; ++n) {
    cb.Node("n" + std::to_string(n), U(1, 100), U(8, 32));
    const int here = n == nodes - 1 ? devices - made : I(1, devices - made - (nodes - n - 1));
    for (int i = 0; i < here; ++i) cb.Gpu("t" + std::to_string(made + i), U(2, 24), U(5, 60));
    made += here;
  }
  ModelBuilder mb;
  mb.Input(1);
  const int layers = I(3, max_layers);
  for (int l = 0; l < layers; ++l) mb.Layers(1, U(0.2, 20), U(1, 400), U(1, 60), U(0.1, 30));
  const bool infer = I(0, 3) == 0;
  const int batch = I(1, 12);
  return {"seed" + std::to_string(seed), cb.Build(), mb.Build(),
          infer ? Infer(batch) : Train(batch), max_devices <= 4};
}

std::vector<OracleCase> RandomCases() {
  std::vector<OracleCase> cases;
  for (int seed : {4, 37, 127, 150, 182, 248, 922, 1421, 7, 11, 23, 42, 99, 256, 512, 777}) {
    cases.push_back(RandomCase(seed, 2, 4, 10));
  }
  for (int seed : {1, 2, 3, 5, 8, 13}) {
    OracleCase c = RandomCase(seed, 5, 6, 8);
    c.name = "six_" + c.name;
    cases.push_back(std::move(c));
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(MixedClusters, OracleTest, ::testing::ValuesIn(Cases()),
                         [](const auto& info) { return info.param.name; });
INSTANTIATE_TEST_SUITE_P(RandomClusters, OracleTest, ::testing::ValuesIn(RandomCases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace tessera::scheduler::testing
