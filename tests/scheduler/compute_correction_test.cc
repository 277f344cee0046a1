#include "scheduler/compute_correction.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "scheduler/planner.h"
#include "tests/scheduler/builders.h"

namespace tessera::scheduler {
namespace {

using testing::ClusterBuilder;
using testing::ModelBuilder;
using testing::Train;

struct Obs {
  double predicted_s, plan_scale, observed_s;
};

struct FactorCase {
  const char* name;
  std::vector<Obs> observations;
  double factor;  // expected Factor("k", "A")
  int samples;
};

class FactorTest : public ::testing::TestWithParam<FactorCase> {};

TEST_P(FactorTest, IsTheMedianRatioOnceEnoughAreIn) {
  const FactorCase& c = GetParam();
  ComputeCorrection corr;
  for (const Obs& o : c.observations)
    corr.Observe("k", "A", o.predicted_s, o.plan_scale, o.observed_s);
  EXPECT_NEAR(corr.Factor("k", "A"), c.factor, 1e-9);
  EXPECT_EQ(corr.Samples("k", "A"), c.samples);
  EXPECT_EQ(corr.Factor("k", "B"), 1.0) << "another type";
  EXPECT_EQ(corr.Factor("other", "A"), 1.0) << "another key";
}

std::vector<Obs> Repeat(int n, Obs o) { return std::vector<Obs>(static_cast<size_t>(n), o); }

std::vector<Obs> Concat(std::vector<Obs> a, const std::vector<Obs>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

INSTANTIATE_TEST_SUITE_P(
    Table, FactorTest,
    ::testing::Values(
        FactorCase{"none", {}, 1.0, 0},
        // Fewer than kMinSamples: not trusted yet.
        FactorCase{"too_few", Repeat(ComputeCorrection::kMinSamples - 1, {0.1, 1, 0.2}), 1.0,
                   ComputeCorrection::kMinSamples - 1},
        FactorCase{"twice_as_slow", Repeat(ComputeCorrection::kMinSamples, {0.1, 1, 0.2}), 2.0,
                   ComputeCorrection::kMinSamples},
        // The plan already assumed 0.5: its prediction 0.05 is 0.1 uncorrected.
        FactorCase{"plan_scale_undone", Repeat(8, {0.05, 0.5, 0.06}), 0.6, 8},
        // A few wild steps do not move the median; absurd ones are dropped.
        FactorCase{"outliers",
                   Concat(Repeat(9, {0.1, 1, 0.07}),
                          {{0.1, 1, 0.5}, {0.1, 1, 0.6}, {0.1, 1, 100}, {0.1, 1, 0}}),
                   0.7, 11},
        // Only the newest kWindow count: the device got faster.
        FactorCase{
            "window",
            Concat(Repeat(30, {0.1, 1, 0.2}), Repeat(ComputeCorrection::kWindow, {0.1, 1, 0.1})),
            1.0, ComputeCorrection::kWindow}),
    [](const auto& info) { return info.param.name; });

TEST(ComputeCorrectionTest, GenerationMovesOnlyWithNotableChanges) {
  ComputeCorrection corr;
  for (int i = 0; i < ComputeCorrection::kMinSamples; ++i) corr.Observe("k", "A", 0.1, 1, 0.15);
  const uint64_t after_first = corr.generation();
  EXPECT_EQ(after_first, 1u);
  for (int i = 0; i < 10; ++i) corr.Observe("k", "A", 0.1, 1, 0.151);  // within kNotable
  EXPECT_EQ(corr.generation(), after_first);
  for (int i = 0; i < ComputeCorrection::kWindow; ++i) corr.Observe("k", "A", 0.1, 1, 0.1);
  EXPECT_GT(corr.generation(), after_first);
}

TEST(ComputeCorrectionTest, ResetForgetsOneKeysObservations) {
  ComputeCorrection corr;
  for (int i = 0; i < ComputeCorrection::kMinSamples; ++i) {
    corr.Observe("k", "A", 0.1, 1, 0.2);
    corr.Observe("k", "B", 0.1, 1, 0.3);
    corr.Observe("other", "A", 0.1, 1, 0.05);
  }
  const uint64_t before = corr.generation();
  corr.Reset("k");
  EXPECT_GT(corr.generation(), before);
  EXPECT_DOUBLE_EQ(corr.Factor("k", "A"), 1.0);
  EXPECT_DOUBLE_EQ(corr.Factor("k", "B"), 1.0);
  EXPECT_EQ(corr.Samples("k", "B"), 0);
  EXPECT_DOUBLE_EQ(corr.Factor("other", "A"), 0.5) << "another key keeps its factor";
  const uint64_t after = corr.generation();
  corr.Reset("k");
  corr.Reset("never seen");
  EXPECT_EQ(corr.generation(), after) << "nothing changed";
}

// Emulated GPUs of every type plan on the worker's one CPU profile
// (measured_as "cpu"): a factor observed on one of them is the others' until
// they have their own. A type with its own measurement keeps 1.
TEST(ComputeCorrectionTest, TypesOfOneMeasurementShareItsFactorUntilTheyHaveTheirOwn) {
  ClusterSnapshot lab = ClusterBuilder()
                            .Node("a")
                            .Gpu("A100 (emulated)", 80, 20)
                            .Gpu("GTX1080 (emulated)", 8, 20)
                            .Gpu("RTX4090 (emulated)", 24, 20)
                            .Node("g")
                            .Gpu("H100", 80, 60)
                            .Build();
  for (int i = 0; i < 3; ++i) lab.nodes[0].devices[i].measured_as = "cpu";
  ComputeCorrection corr;
  auto scales = [&] {
    ClusterSnapshot s = lab;
    corr.Apply("job", &s);
    std::vector<double> out;
    for (const Node& n : s.nodes) {
      for (const Device& d : n.devices) out.push_back(std::round(d.compute_scale * 1e6) / 1e6);
    }
    return out;
  };
  EXPECT_EQ(scales(), (std::vector<double>{1, 1, 1, 1})) << "nothing observed";
  for (int i = 0; i < ComputeCorrection::kMinSamples; ++i) {
    corr.Observe("job", "A100 (emulated)", 0.1, 1, 0.3);
  }
  EXPECT_EQ(scales(), (std::vector<double>{3, 3, 3, 1}));
  for (int i = 0; i < ComputeCorrection::kMinSamples; ++i) {
    corr.Observe("job", "GTX1080 (emulated)", 0.1, 1, 0.2);
  }
  EXPECT_EQ(scales(), (std::vector<double>{3, 2, 2.5, 1}))
      << "the RTX4090 takes the median of the two known";
  for (int i = 0; i < ComputeCorrection::kMinSamples; ++i)
    corr.Observe("job", "H100", 0.1, 1, 0.05);
  EXPECT_EQ(scales(), (std::vector<double>{3, 2, 2.5, 0.5}));
  for (int i = 0; i < ComputeCorrection::kMinSamples - 1; ++i) {
    corr.Observe("job", "RTX4090 (emulated)", 0.1, 1, 0.1);
  }
  EXPECT_EQ(scales(), (std::vector<double>{3, 2, 2.5, 0.5})) << "too few of its own yet";
  corr.Observe("job", "RTX4090 (emulated)", 0.1, 1, 0.1);
  EXPECT_EQ(scales(), (std::vector<double>{3, 2, 1, 0.5}));
}

// A profile skewed on purpose: the devices of type B really compute 1.7x
// faster than their measured figure says (measured while the host was busy).
// Plans are made, "run" (each stage's observed compute is the truth, with a
// little noise), observed, and made again: within a few dozen steps the
// factor is within 10 % of the truth, and B's share of the batch grows.
TEST(ComputeCorrectionTest, ASkewedProfileIsCorrectedAndTheAllocationFollows) {
  const ClusterSnapshot cluster = ClusterBuilder()
                                      .Node("a")
                                      .Gpu("A", 16, 20)
                                      .Node("b")
                                      .Gpu("B", 16, 10)
                                      .Gpu("B", 16, 10)
                                      .Build();
  const ModelProfile model = ModelBuilder().Layers(4, 2, 1, 1, 1).Build();
  const double truth_b = 1 / 1.7;  // observed over predicted on B; A is as measured
  ComputeCorrection corr;
  auto b_share = [](const Plan& p) {
    int64_t b = 0;
    for (const Replica& r : p.replicas) {
      if (r.stages[0].devices[0].node == "b") b += r.batch;
    }
    return b;
  };
  int64_t first_share = -1, share = -1;
  int steps = 0;
  for (int round = 0; round < 8; ++round) {
    ClusterSnapshot snapshot = cluster;
    corr.Apply("job", &snapshot);
    Result<PlanSet> plans = MakePlans(snapshot, model, Train(60, Layout::kData));
    ASSERT_TRUE(plans.ok()) << plans.status().ToString();
    const Plan& plan = plans->plans.front();
    share = b_share(plan);
    if (first_share < 0) first_share = share;
    for (int step = 0; step < 5; ++step, ++steps) {
      for (const Replica& r : plan.replicas) {
        for (const Stage& s : r.stages) {
          const bool on_b = s.devices[0].node == "b";
          const double noise = 1 + 0.05 * std::sin(steps * 1.3 + s.devices[0].index);
          const double truth = s.compute_s / s.compute_scale * (on_b ? truth_b : 1.0) * noise;
          corr.Observe("job", on_b ? "B" : "A", s.compute_s, s.compute_scale, truth);
        }
      }
    }
  }
  EXPECT_LE(steps, 40);
  EXPECT_NEAR(corr.Factor("job", "B") / truth_b, 1.0, 0.10);
  EXPECT_NEAR(corr.Factor("job", "A"), 1.0, 0.10);
  EXPECT_GT(share, first_share) << "B's share of the 60 samples: " << first_share << " -> "
                                << share;
}

TEST(ComputeCorrectionTest, TheCostModelScalesEveryComputeTermOfTheDevice) {
  const ClusterSnapshot cluster = ClusterBuilder().Node("a").Gpu("A", 16, 20).Build();
  const ModelProfile model = ModelBuilder().Layers(2, 2, 1, 1, 1).Build();
  ClusterSnapshot scaled = cluster;
  scaled.nodes[0].devices[0].compute_scale = 1.5;
  auto plain = MakePlans(cluster, model, Train(8, Layout::kData));
  auto slow = MakePlans(scaled, model, Train(8, Layout::kData));
  ASSERT_TRUE(plain.ok() && slow.ok());
  const Stage& p = plain->plans.front().replicas[0].stages[0];
  const Stage& s = slow->plans.front().replicas[0].stages[0];
  EXPECT_NEAR(s.compute_s, 1.5 * p.compute_s, 1e-12);
  EXPECT_EQ(s.compute_scale, 1.5);
  EXPECT_GT(p.compute_s, 0);
  ClusterSnapshot bad = cluster;
  bad.nodes[0].devices[0].compute_scale = 0;
  EXPECT_EQ(MakePlans(bad, model, Train(8)).status().field(), "nodes[0].devices[0].compute_scale");
}

}  // namespace
}  // namespace tessera::scheduler
