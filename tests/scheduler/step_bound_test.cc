// Step bounds (scheduler/step_bound.h): never above the step time the cost model gives
// any pipeline or hybrid candidate, on clusters and models where the devices' speeds
// differ per layer; and the planner's fastest_only search, which skips by them,
// returns the plan the full search returns.
#include "scheduler/step_bound.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "scheduler/builtin_profiles.h"
#include "scheduler/cost_model.h"
#include "scheduler/planner.h"
#include "tests/scheduler/builders.h"

namespace tessera::scheduler {
namespace {

using testing::ClusterBuilder;
using testing::Infer;
using testing::MediumModel;
using testing::ModelBuilder;
using testing::Train;

// Two types, each faster on half the layers (measured times): no device is
// uniformly faster, so a layer's fastest device is not the whole model's.
ModelProfile CrossedModel() {
  ModelProfile m = ModelBuilder("crossed").Input(1).Layers(8, 1, 10, 6, 2).Build();
  for (size_t l = 0; l < m.layers.size(); ++l) {
    const bool even = l % 2 == 0;
    m.layers[l].measured_forward_ms["fast-even"] = even ? 0.5 : 3.0;
    m.layers[l].measured_forward_ms["fast-odd"] = even ? 2.5 : 0.4;
    m.layers[l].measured_forward_fixed_ms["fast-even"] = even ? 0.2 : 0.05;
    m.layers[l].measured_forward_fixed_ms["fast-odd"] = 0.1;
  }
  return m;
}

struct Scenario {
  std::string name;
  ClusterSnapshot cluster;
  ModelProfile model;
  JobRequest request;
  bool skips = true;  // fastest_only skips a layout or grouping on some device set
};

void PrintTo(const Scenario& s, std::ostream* os) { *os << s.name; }

std::vector<Scenario> Scenarios() {
  const ClusterSnapshot one_node = ClusterBuilder().Node("a").Gpus(4, "A", 24, 30).Build();
  const ClusterSnapshot mixed = ClusterBuilder()
                                    .Node("a", 10, 50)
                                    .Gpus(2, "A", 40, 120)
                                    .NvLink(0, 1)
                                    .Node("b", 10, 16)
                                    .Gpus(3, "B", 16, 15)
                                    .Node("c", 1, 8)
                                    .Gpus(2, "C", 8, 6)
                                    .Build();
  const ClusterSnapshot crossed = ClusterBuilder()
                                      .Node("x")
                                      .Gpus(2, "fast-even", 16, 10)
                                      .Node("y")
                                      .Gpus(3, "fast-odd", 16, 10)
                                      .Build();
  const ModelProfile colorize = *BuiltinProfile("colorize-unet");
  const ModelProfile denoiser = *BuiltinProfile("denoiser-dncnn");
  return {
      {"medium_train_one_node", one_node, MediumModel(), Train(32)},
      {"medium_infer_one_node", one_node, MediumModel(), Infer(64)},
      {"medium_train_mixed", mixed, MediumModel(), Train(48)},
      {"medium_infer_mixed", mixed, MediumModel(), Infer(96)},
      {"colorize_train_mixed", mixed, colorize, Train(16)},
      {"colorize_infer_mixed", mixed, colorize, Infer(32)},
      {"denoiser_infer_mixed", mixed, denoiser, Infer(200)},
      {"medium_infer_large_batch", mixed, MediumModel(), Infer(600)},
      {"crossed_train", crossed, CrossedModel(), Train(24), false},
      {"crossed_infer", crossed, CrossedModel(), Infer(40), false},
  };
}

// Splits [0, L) into `stages` contiguous ranges on `devices`, at random cuts.
std::vector<CandidateStage> RandomStages(std::mt19937& rng, const std::vector<int>& devices,
                                         int L) {
  const int S = static_cast<int>(devices.size());
  std::vector<int> cuts(L - 1);
  for (int i = 0; i < L - 1; ++i) cuts[i] = i + 1;
  std::shuffle(cuts.begin(), cuts.end(), rng);
  cuts.resize(S - 1);
  std::sort(cuts.begin(), cuts.end());
  cuts.push_back(L);
  std::vector<CandidateStage> stages;
  int begin = 0;
  for (int s = 0; s < S; ++s) {
    stages.push_back(CandidateStage{devices[s], begin, cuts[s]});
    begin = cuts[s];
  }
  return stages;
}

class StepBoundTest : public ::testing::TestWithParam<Scenario> {};

TEST_P(StepBoundTest, NoPipelineIsFasterThanItsBound) {
  const Scenario& sc = GetParam();
  const CostModel cm = CostModel::Create(sc.cluster, sc.model, sc.request);
  std::vector<int> all(cm.num_devices());
  for (int i = 0; i < cm.num_devices(); ++i) all[i] = i;
  const int L = cm.num_layers();
  const int64_t B = sc.request.global_batch;
  const double bound = PipelineStepLowerBound(cm, all, cm.num_devices());
  ASSERT_GT(bound, 0);
  std::mt19937 rng(7);
  int feasible = 0;
  double fastest = 1e300;
  for (int trial = 0; trial < 3000; ++trial) {
    std::vector<int> order = all;
    std::shuffle(order.begin(), order.end(), rng);
    const int S = std::uniform_int_distribution<int>(2, std::min(cm.num_devices(), L))(rng);
    order.resize(S);
    Candidate c;
    c.schedule = cm.training() ? Schedule::k1F1B : Schedule::kGPipe;
    // Small counts most often: the bound is tightest there.
    c.micro_batches = static_cast<int>(std::min<int64_t>(
        B, trial % 2 ? std::uniform_int_distribution<int64_t>(1, B)(rng)
                     : std::uniform_int_distribution<int64_t>(1, std::min<int64_t>(B, 12))(rng)));
    c.replicas.push_back(CandidateReplica{B, RandomStages(rng, order, L)});
    const Evaluation ev = cm.Evaluate(c);
    if (!ev.feasible) continue;
    ++feasible;
    fastest = std::min(fastest, ev.step_s);
    ASSERT_GE(ev.step_s, bound * (1 - 1e-9))
        << "trial " << trial << ", " << S << " stages, M " << c.micro_batches;
  }
  EXPECT_GE(feasible, 100);
  // Not a bound of 0: within a small factor of the fastest pipeline sampled.
  EXPECT_GT(bound, fastest / 20);
}

TEST_P(StepBoundTest, NoHybridIsFasterThanItsGroupingsBound) {
  const Scenario& sc = GetParam();
  const CostModel cm = CostModel::Create(sc.cluster, sc.model, sc.request);
  const int L = cm.num_layers();
  const int64_t B = sc.request.global_batch;
  std::mt19937 rng(11);
  int feasible = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::vector<int> devices(cm.num_devices());
    for (int i = 0; i < cm.num_devices(); ++i) devices[i] = i;
    std::shuffle(devices.begin(), devices.end(), rng);
    devices.resize(std::uniform_int_distribution<int>(3, cm.num_devices())(rng));
    // Replicas: a first one of 2 devices or more, the rest cut at random.
    std::vector<std::vector<int>> grouping;
    const int first = std::uniform_int_distribution<int>(
        2, std::min<int>(L, static_cast<int>(devices.size()) - 1))(rng);
    grouping.emplace_back(devices.begin(), devices.begin() + first);
    for (size_t i = first; i < devices.size();) {
      const size_t n =
          std::min<size_t>(devices.size() - i, std::uniform_int_distribution<size_t>(1, 3)(rng));
      grouping.emplace_back(devices.begin() + static_cast<std::ptrdiff_t>(i),
                            devices.begin() + static_cast<std::ptrdiff_t>(i + n));
      i += n;
    }
    const int R = static_cast<int>(grouping.size());
    if (B < R) continue;
    Candidate c;
    c.schedule = cm.training() ? Schedule::k1F1B : Schedule::kGPipe;
    // Small counts most often; every fourth trial any count (above 64 too, where
    // the bound holds for all counts at once).
    const int64_t most = trial % 4 == 0 ? B / R : std::min<int64_t>(B / R, 8);
    c.micro_batches = static_cast<int>(std::uniform_int_distribution<int64_t>(1, most)(rng));
    // Shares of at least M each, the rest at random.
    std::vector<int64_t> shares(R, c.micro_batches);
    for (int64_t left = B - R * c.micro_batches; left > 0; --left) {
      ++shares[std::uniform_int_distribution<int>(0, R - 1)(rng)];
    }
    bool fits = true;
    for (int r = 0; r < R; ++r) {
      if (static_cast<int>(grouping[r].size()) > L) fits = false;
    }
    if (!fits) continue;
    for (int r = 0; r < R; ++r) {
      c.replicas.push_back(CandidateReplica{shares[r], RandomStages(rng, grouping[r], L)});
    }
    const Evaluation ev = cm.Evaluate(c);
    if (!ev.feasible) continue;
    ++feasible;
    const double bound = HybridStepLowerBound(cm, grouping);
    ASSERT_GT(bound, 0);
    ASSERT_GE(ev.step_s, bound * (1 - 1e-9))
        << "trial " << trial << ", " << R << " replicas, M " << c.micro_batches;
  }
  EXPECT_GE(feasible, 100);
}

TEST_P(StepBoundTest, FastestOnlyReturnsTheFullSearchsFirstPlan) {
  const Scenario& sc = GetParam();
  // The whole cluster, and each device set of 3 or more made by leaving one out.
  std::vector<ClusterSnapshot> clusters = {sc.cluster};
  for (size_t n = 0; n < sc.cluster.nodes.size(); ++n) {
    for (size_t d = 0; d < sc.cluster.nodes[n].devices.size(); ++d) {
      ClusterSnapshot c = sc.cluster;
      c.nodes[n].devices[d].busy = true;
      if (c.DeviceCount() >= 4) clusters.push_back(c);
    }
  }
  PlannerOptions fastest;
  fastest.fastest_only = true;
  int skipped = 0;
  for (size_t i = 0; i < clusters.size(); ++i) {
    SCOPED_TRACE("cluster " + std::to_string(i));
    Result<PlanSet> full = MakePlans(clusters[i], sc.model, sc.request);
    Result<PlanSet> quick = MakePlans(clusters[i], sc.model, sc.request, fastest);
    ASSERT_EQ(full.ok(), quick.ok());
    if (!full.ok()) continue;
    const Plan& a = full->plans.front();
    const Plan& b = quick->plans.front();
    EXPECT_EQ(a.layout, b.layout);
    EXPECT_EQ(a.Devices(), b.Devices());
    EXPECT_EQ(a.micro_batches, b.micro_batches);
    EXPECT_DOUBLE_EQ(a.predicted.step_s, b.predicted.step_s);
    for (const Rejection& r : quick->rejected) {
      if (r.reason.find("not searched") != std::string::npos) ++skipped;
    }
  }
  // Where the devices are alike per layer, some layout or grouping was skipped, so
  // the comparison above covers the skipping.
  if (sc.skips) {
    EXPECT_GT(skipped, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Scenarios, StepBoundTest, ::testing::ValuesIn(Scenarios()),
                         [](const auto& info) { return info.param.name; });

TEST(FastestOnlyTest, AnArchivesPipelinesAndGroupingsAreSkippedWithTheirBound) {
  // Inference of the colorizer on mixed devices: data parallel wins by far, so
  // the pipeline search and most groupings are skipped, each with its bound.
  const ClusterSnapshot mixed =
      ClusterBuilder().Node("a").Gpus(4, "A", 40, 120).Node("b").Gpus(3, "C", 16, 8).Build();
  PlannerOptions fastest;
  fastest.fastest_only = true;
  Result<PlanSet> full = MakePlans(mixed, *BuiltinProfile("colorize-unet"), Infer(32));
  Result<PlanSet> quick = MakePlans(mixed, *BuiltinProfile("colorize-unet"), Infer(32), fastest);
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  ASSERT_TRUE(quick.ok()) << quick.status().ToString();
  EXPECT_EQ(full->plans.front().layout, Layout::kData);
  EXPECT_DOUBLE_EQ(full->plans.front().predicted.step_s, quick->plans.front().predicted.step_s);
  // The full search lists a pipeline plan; the quick one its bound instead.
  auto has = [](const PlanSet& set, Layout l) {
    return std::any_of(set.plans.begin(), set.plans.end(),
                       [l](const Plan& p) { return p.layout == l; });
  };
  EXPECT_TRUE(has(*full, Layout::kPipeline));
  EXPECT_FALSE(has(*quick, Layout::kPipeline));
  bool bounded = false;
  for (const Rejection& r : quick->rejected) {
    if (r.layout == Layout::kPipeline && r.reason.find("not searched") != std::string::npos) {
      bounded = true;
    }
  }
  EXPECT_TRUE(bounded);
}

}  // namespace
}  // namespace tessera::scheduler
