// Baselines: every plan set scores the two plans a lab would run by hand (an even
// split over all devices, an even split over the best group of identical devices)
// with the same cost model, and the planner never returns a best plan slower than them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <regex>
#include <string>
#include <vector>

#include "scheduler/plan_json.h"
#include "scheduler/planner.h"
#include "tests/scheduler/builders.h"

namespace tessera::scheduler::testing {
namespace {

// Large gradients: the all-reduce matters across a slow network.
ModelProfile Wide() { return ModelBuilder().Input(1).Layers(8, 2, 150, 10, 4).Build(); }

const Baseline* FindBaseline(const PlanSet& set, const std::string& name) {
  for (const Baseline& b : set.baselines) {
    if (b.name == name) return &b;
  }
  return nullptr;
}

// The score's text in the chosen plan's why: "1.42x <description>" or
// "<description> does not fit: <reason>".
std::string ExpectedText(const BaselineScore& b) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2fx ", b.speedup);
  return b.feasible ? buf + b.description : b.description + " does not fit: " + b.reason;
}

struct BaselineCase {
  std::string name;
  ClusterSnapshot cluster;
  ModelProfile model;
  JobRequest request;
  std::string even_all;    // expected description
  std::string best_group;  // expected description
  bool even_all_feasible = true;
};

class BaselineTableTest : public ::testing::TestWithParam<BaselineCase> {};

TEST_P(BaselineTableTest, BestPlanIsNeverSlowerThanABaseline) {
  const BaselineCase& c = GetParam();
  auto got = MakePlans(c.cluster, c.model, c.request);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->baselines.size(), 2u);
  const Baseline* all = FindBaseline(*got, "even_all");
  const Baseline* group = FindBaseline(*got, "best_group");
  ASSERT_NE(all, nullptr);
  ASSERT_NE(group, nullptr);
  EXPECT_EQ(all->description, c.even_all);
  EXPECT_EQ(group->description, c.best_group);
  EXPECT_EQ(all->feasible, c.even_all_feasible) << all->reason;
  ASSERT_TRUE(group->feasible) << group->reason;

  const Plan& best = got->plans.front();
  ASSERT_EQ(best.baselines.size(), 2u);
  for (size_t i = 0; i < got->baselines.size(); ++i) {
    const Baseline& b = got->baselines[i];
    EXPECT_EQ(best.baselines[i].name, b.name);
    EXPECT_DOUBLE_EQ(best.baselines[i].speedup, b.speedup);
    // (b) the why names the speedup over both (or why one does not fit).
    EXPECT_NE(best.why.find(ExpectedText(b)), std::string::npos)
        << best.why << "\n expected: " << ExpectedText(b);
    if (!b.feasible) {
      EXPECT_FALSE(b.reason.empty());
      EXPECT_FALSE(b.plan.has_value());
      continue;
    }
    // (a) never slower than a baseline; equal when the baseline is the best plan.
    EXPECT_LE(best.predicted.step_s, b.step_s * (1 + 1e-12)) << b.description << ": " << best.why;
    EXPECT_GE(b.speedup, 1.0 - 1e-12);
    EXPECT_DOUBLE_EQ(b.speedup, b.step_s / best.predicted.step_s);
    // The baseline is an even data-parallel split, scored by the cost model.
    ASSERT_TRUE(b.plan.has_value());
    const Plan& p = *b.plan;
    EXPECT_EQ(p.layout, Layout::kData);
    EXPECT_DOUBLE_EQ(p.predicted.step_s, b.step_s);
    int64_t sum = 0, lo = p.replicas.front().batch, hi = lo;
    for (size_t r = 0; r < p.replicas.size(); ++r) {
      const Replica& rep = p.replicas[r];
      ASSERT_EQ(rep.stages.size(), 1u);
      sum += rep.batch;
      lo = std::min(lo, rep.batch);
      hi = std::max(hi, rep.batch);
      // The remainder goes one each to the first devices.
      if (r > 0) {
        EXPECT_LE(rep.batch, p.replicas[r - 1].batch);
      }
    }
    EXPECT_EQ(sum, c.request.global_batch);
    EXPECT_LE(hi - lo, 1);
  }
  for (size_t i = 1; i < got->plans.size(); ++i) EXPECT_TRUE(got->plans[i].baselines.empty());
}

INSTANTIATE_TEST_SUITE_P(
    Table, BaselineTableTest,
    ::testing::Values(
        BaselineCase{"homogeneous", ClusterBuilder().Node("a").Gpus(4, "A100", 40, 20).Build(),
                     MediumModel(), Train(32), "an even split over all 4 devices",
                     "the 4 A100s alone"},
        BaselineCase{
            "speeds_1_to_2",
            ClusterBuilder().Node("a").Gpus(2, "A100", 40, 40).Gpus(2, "T4", 16, 20).Build(),
            MediumModel(), Train(32), "an even split over all 4 devices", "the 2 A100s alone"},
        BaselineCase{"speeds_1_to_4", TwoNodes({1, "A100", 40, 40}, {3, "slow-gpu", 16, 10}),
                     MediumModel(), Train(48), "an even split over all 4 devices",
                     "the A100 alone"},
        BaselineCase{"device_too_small",
                     ClusterBuilder().Node("a").Gpus(2, "A100", 24, 20).Gpu("tiny", 1, 40).Build(),
                     MediumModel(), Train(32), "an even split over all 3 devices",
                     "the 2 A100s alone", false},
        BaselineCase{"slow_inter_node_link", TwoNodes({2, "A100", 40, 20}, {2, "V100", 32, 10}, 1),
                     Wide(), Train(32), "an even split over all 4 devices", "the 2 A100s alone"},
        BaselineCase{"inference_mixed",
                     ClusterBuilder().Node("a").Gpu("A100", 40, 40).Gpus(3, "T4", 16, 20).Build(),
                     MediumModel(), Infer(64), "an even split over all 4 devices",
                     "the 3 T4s alone"},
        BaselineCase{"one_device", ClusterBuilder().Node("a").Gpu("A100", 40, 20).Build(),
                     MediumModel(), Train(8), "the whole batch on a:0", "the A100 alone"},
        BaselineCase{
            "slow_group_wins_over_a_lone_fast_device",
            ClusterBuilder().Node("a").Gpu("A100", 40, 40).Gpus(3, "slow-gpu", 16, 20).Build(),
            MediumModel(), Train(48), "an even split over all 4 devices",
            "the 3 slow-gpu devices alone"},
        BaselineCase{
            "max_devices_caps_the_split",
            ClusterBuilder().Node("a").Gpus(2, "A100", 40, 40).Gpus(2, "T4", 16, 10).Build(),
            MediumModel(),
            [] {
              JobRequest r = Train(32);
              r.max_devices = 3;
              return r;
            }(),
            "an even split over the 3 fastest of 4 devices", "the 2 A100s alone"}),
    [](const auto& info) { return info.param.name; });

// (c) The model does not fit a small device: the even split over all devices is
// infeasible, says why, and the why of the chosen plan says so too.
TEST(BaselineTest, EvenSplitThatDoesNotFitASmallDeviceIsInfeasible) {
  auto got =
      MakePlans(ClusterBuilder().Node("a").Gpus(2, "A100", 24, 20).Gpu("tiny", 1, 40).Build(),
                MediumModel(), Train(32));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  const Baseline* all = FindBaseline(*got, "even_all");
  ASSERT_NE(all, nullptr);
  EXPECT_FALSE(all->feasible);
  EXPECT_EQ(all->reason.rfind("the whole model needs ", 0), 0u) << all->reason;
  EXPECT_NE(all->reason.find(" for one sample and a:2 has "), std::string::npos) << all->reason;
  EXPECT_NE(got->plans.front().why.find(
                "an even split over all 3 devices does not fit: " + all->reason + ", "),
            std::string::npos)
      << got->plans.front().why;
  const nlohmann::json j = ToJson(*got)["baselines"][0];
  EXPECT_EQ(j["feasible"], false);
  EXPECT_TRUE(j["plan"].is_null());
  EXPECT_TRUE(j["speedup"].is_null());
  EXPECT_EQ(j["reason"], all->reason);
}

// (d) Identical devices: the data plan is the even split, the speedup 1.00x.
TEST(BaselineTest, IdenticalDevicesMatchTheEvenSplit) {
  auto got = MakePlans(ClusterBuilder().Node("a").Gpus(4, "A100", 40, 20).Build(), MediumModel(),
                       Train(32));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  const Plan& best = got->plans.front();
  EXPECT_EQ(best.layout, Layout::kData);
  for (const Baseline& b : got->baselines) {
    ASSERT_TRUE(b.feasible) << b.reason;
    EXPECT_DOUBLE_EQ(b.step_s, best.predicted.step_s);
    EXPECT_DOUBLE_EQ(b.speedup, 1.0);
  }
  EXPECT_NE(best.why.find("1.00x an even split over all 4 devices, 1.00x the 4 A100s alone"),
            std::string::npos)
      << best.why;
}

// (d) The even split beats the best data plan the search found (it needs 5
// micro-batches to fit, between the counts the data search tries): it becomes the
// returned plan, ranked first, and its why says so.
TEST(BaselineTest, AFasterBaselineBecomesTheBestPlan) {
  // Usable memory holds the weights and 2.5 samples of activations: shares of 10
  // need M = 5.
  const ModelProfile m = MediumModel();
  // Parameters, gradients, Adam's two states and the data-parallel gradient buckets.
  const double weights = 12 * 20e6 * 5, act = 12 * 10e6;
  const double mem_gb = (weights + 2.5 * act) / 0.9 / kGB;
  auto got =
      MakePlans(ClusterBuilder().Node("a").Gpus(4, "A100", mem_gb, 20).Build(), m, Train(40));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  const Plan& best = got->plans.front();
  const Baseline* all = FindBaseline(*got, "even_all");
  ASSERT_NE(all, nullptr);
  ASSERT_TRUE(all->feasible) << all->reason;
  EXPECT_EQ(all->plan->micro_batches, 5);
  EXPECT_EQ(best.micro_batches, 5);
  EXPECT_DOUBLE_EQ(best.predicted.step_s, all->step_s);
  EXPECT_EQ(best.why.rfind("an even split over all 4 devices is the best plan found (fastest of "
                           "3 layouts, ",
                           0),
            0u)
      << best.why;
  EXPECT_NE(best.why.find("1.00x an even split over all 4 devices"), std::string::npos);
}

TEST(BaselineTest, SpeedupsOfAMixedClusterReadAsInTheIssue) {
  auto got = MakePlans(TwoNodes({2, "A100", 40, 40}, {3, "emulated-0.5", 16, 10}), MediumModel(),
                       Train(64));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  const std::regex text(
      R"(fastest of \d+ layouts \(\d+ candidates scored\); \d+\.\d\dx an even split over all 5 )"
      R"(devices, \d+\.\d\dx the 2 A100s alone; )");
  EXPECT_TRUE(std::regex_search(got->plans.front().why, text)) << got->plans.front().why;
}

TEST(BaselineTest, GroupsAreNamedByTypeCountAndSpeed) {
  // One type at two speeds: the description tells the classes apart.
  auto got = MakePlans(
      ClusterBuilder().Node("a").Gpus(2, "emulated", 16, 40).Gpu("emulated", 16, 10).Build(),
      MediumModel(), Train(16));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  const Baseline* group = FindBaseline(*got, "best_group");
  ASSERT_NE(group, nullptr);
  EXPECT_EQ(group->description.rfind("the 2 emulated devices at ", 0), 0u) << group->description;
  EXPECT_NE(group->description.find(" ms per sample alone"), std::string::npos);
  EXPECT_EQ(group->plan->replicas.size(), 2u);
}

TEST(BaselineTest, ForcedPipelineReportsWithoutReplacing) {
  auto got = MakePlans(ClusterBuilder().Node("a").Gpus(4, "A100", 40, 20).Build(), MediumModel(),
                       Train(32, Layout::kPipeline));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  for (const Plan& p : got->plans) EXPECT_EQ(p.layout, Layout::kPipeline);
  ASSERT_EQ(got->baselines.size(), 2u);
  EXPECT_TRUE(got->baselines[0].feasible);
  EXPECT_NE(got->plans.front().why.find("x an even split over all 4 devices"), std::string::npos);
}

TEST(BaselineTest, TiledOnlyInferenceHasNone) {
  JobRequest r = Infer(1, Layout::kTiled);
  r.image = ImageSize{4096, 4096};
  auto got = MakePlans(ClusterBuilder().Node("a").Gpus(2, "A100", 24, 20).Build(),
                       ModelBuilder().Layers(4, 5, 1, 10, 100).Halo(8).Build(), r);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(got->baselines.empty());
  EXPECT_TRUE(got->plans.front().baselines.empty());
  EXPECT_EQ(got->plans.front().why.find("even split"), std::string::npos);
  EXPECT_EQ(ToJson(*got)["baselines"], nlohmann::json::array());
}

TEST(BaselineTest, JsonCarriesRunnableBaselinePlans) {
  auto got =
      MakePlans(ClusterBuilder().Node("a").Gpus(2, "A100", 40, 40).Gpus(2, "T4", 16, 20).Build(),
                MediumModel(), Train(32));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  const nlohmann::json j = ToJson(*got);
  ASSERT_EQ(j["baselines"].size(), 2u);
  for (const auto& b : j["baselines"]) {
    EXPECT_TRUE(b["feasible"].get<bool>());
    EXPECT_FALSE(b.contains("reason"));
    EXPECT_GE(b["speedup"].get<double>(), 1.0 - 1e-12);
    EXPECT_EQ(b["plan"]["layout"], "data");
    EXPECT_EQ(b["plan"]["schedule"], "1f1b");
    EXPECT_TRUE(b["plan"]["replicas"][0]["stages"][0].contains("devices"));
    EXPECT_TRUE(b["plan"]["replicas"][0]["stages"][0].contains("layers"));
    EXPECT_TRUE(b["plan"]["predicted"].contains("step_s"));
    EXPECT_DOUBLE_EQ(b["plan"]["predicted"]["step_s"].get<double>(), b["step_s"].get<double>());
  }
  EXPECT_EQ(j["baselines"][0]["name"], "even_all");
  EXPECT_EQ(j["baselines"][1]["name"], "best_group");
  EXPECT_EQ(j["baselines"][1]["plan"]["replicas"].size(), 2u);
  // The chosen plan (a job's plan JSON) carries the scores without the plans.
  const nlohmann::json& first = j["plans"][0]["baselines"];
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first[0]["description"], "an even split over all 4 devices");
  EXPECT_FALSE(first[0].contains("plan"));
  for (size_t i = 1; i < j["plans"].size(); ++i) EXPECT_FALSE(j["plans"][i].contains("baselines"));
}

}  // namespace
}  // namespace tessera::scheduler::testing

namespace tessera::scheduler::testing {
namespace {

// Two devices of nearly one speed: the best uneven split beats the even split by
// less than the margin, so the even split (the lab's own layout) is kept and says so;
// without a margin the faster split comes first.
TEST(BaselineMarginTest, APlanWithinTheMarginOfTheBestBaselineKeepsTheBaseline) {
  const ClusterSnapshot cluster = TwoNodes({1, "A", 24, 40}, {1, "B", 24, 38});
  const ModelProfile model = ModelBuilder().Input(1).Layers(4, 2, 1, 1, 1).Build();
  const JobRequest request = Train(64);

  PlannerOptions none;
  none.baseline_margin = 0;
  auto free = MakePlans(cluster, model, request, none);
  ASSERT_TRUE(free.ok()) << free.status().ToString();
  const Baseline* even = FindBaseline(*free, "even_all");
  ASSERT_NE(even, nullptr);
  ASSERT_TRUE(even->feasible);
  const double found = free->plans.front().predicted.step_s;
  ASSERT_LT(found, even->step_s) << "an uneven split is faster";
  ASSERT_GT(found, even->step_s * 0.95) << "but by less than 5%";

  auto kept = MakePlans(cluster, model, request);  // default margin: 5%
  ASSERT_TRUE(kept.ok());
  const Plan& first = kept->plans.front();
  EXPECT_NEAR(first.predicted.step_s, even->step_s, 1e-12);
  EXPECT_EQ(first.layout, Layout::kData);
  EXPECT_NE(first.why.find("an even split over all 2 devices is kept: the best other plan is "
                           "predicted only"),
            std::string::npos)
      << first.why;
  for (const Replica& r : first.replicas) EXPECT_EQ(r.batch, 32);
}

// Node "a" of NCCL GPUs, node "b" of Gloo (emulated) devices.
ClusterSnapshot NcclAndGloo(const GpuGroup& nccl, const GpuGroup& gloo) {
  return ClusterBuilder()
      .Node("a")
      .Gpus(nccl)
      .Backend("nccl")
      .Node("b")
      .Gpus(gloo)
      .Backend("gloo")
      .Build();
}

// A job's ranks share one collective library: NCCL GPUs and Gloo (CPU, emulated)
// devices are planned apart, the faster backend wins and the reason says so.
TEST(BackendTest, APlanNeverMixesCollectiveBackends) {
  struct Case {
    const char* name;
    ClusterSnapshot cluster;
    std::string want_backend;  // of every device of every returned plan
    std::string want_reason;   // in rejected[0]; empty: no backend note
  };
  const Case cases[] = {
      {"gpus_win", NcclAndGloo({2, "A100", 40, 40}, {2, "emulated", 40, 5}), "nccl",
       "planned on the 2 nccl devices; the 2 gloo devices alone: "},
      {"more_emulated_win", NcclAndGloo({1, "T4", 40, 2}, {4, "emulated", 40, 10}), "gloo",
       "planned on the 4 gloo devices; the 1 nccl device alone: "},
      {"gloo_cannot_hold_the_model", NcclAndGloo({2, "A100", 40, 40}, {4, "emulated", 0.2, 80}),
       "nccl", "the 4 gloo devices alone: no feasible plan"},
      {"one_backend_free", NcclAndGloo({1, "A100", 40, 40, /*busy=*/true}, {2, "emulated", 40, 10}),
       "gloo", ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto got = MakePlans(c.cluster, MediumModel(), Train(32));
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    for (const Plan& p : got->plans) {
      for (const DeviceId& id : p.Devices()) {
        for (const Node& n : c.cluster.nodes) {
          if (n.name != id.node) continue;
          EXPECT_EQ(n.devices[id.index].backend, c.want_backend) << id.ToString();
        }
      }
    }
    for (const Baseline& b : got->baselines) {
      if (!b.plan) continue;
      for (const DeviceId& id : b.plan->Devices()) {
        EXPECT_EQ(id.node, c.want_backend == "nccl" ? "a" : "b") << b.name;
      }
    }
    if (c.want_reason.empty()) {
      for (const Rejection& r : got->rejected) {
        EXPECT_EQ(r.reason.find("collective backend"), std::string::npos) << r.reason;
      }
      continue;
    }
    ASSERT_FALSE(got->rejected.empty());
    EXPECT_EQ(got->rejected[0].reason.rfind("one collective backend per job", 0), 0u)
        << got->rejected[0].reason;
    EXPECT_NE(got->rejected[0].reason.find(c.want_reason), std::string::npos)
        << got->rejected[0].reason;
  }
}

TEST(BackendTest, NoBackendHoldsAPlanIsAnErrorNamingEach) {
  auto got = MakePlans(NcclAndGloo({1, "A100", 0.2, 40}, {1, "emulated", 0.2, 10}), MediumModel(),
                       Train(32));
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(got.status().message().find("the 1 gloo device: "), std::string::npos)
      << got.status().message();
  EXPECT_NE(got.status().message().find("the 1 nccl device: "), std::string::npos)
      << got.status().message();
}

}  // namespace
}  // namespace tessera::scheduler::testing
