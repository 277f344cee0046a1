#include "scheduler/plan_json.h"

#include <gtest/gtest.h>

#include "scheduler/planner.h"
#include "tests/scheduler/builders.h"

namespace tessera::scheduler::testing {
namespace {

Plan HybridPlan() {
  Plan p;
  p.layout = Layout::kHybrid;
  p.dp = 2;
  p.pp = 2;
  p.micro_batches = 8;
  p.schedule = Schedule::k1F1B;
  p.replicas.push_back(Replica{160,
                               0.625,
                               {Stage{{{"boxA", 0}}, 0, 14, 0.01, 61'000'000'000},
                                Stage{{{"boxA", 1}}, 14, 31, 0.01, 50'000'000'000}}});
  p.replicas.push_back(Replica{
      96, 0.375, {Stage{{{"boxB", 0}}, 0, 11, 0.02, 10}, Stage{{{"boxB", 1}}, 11, 31, 0.02, 10}}});
  p.predicted.step_s = 0.412;
  p.predicted.samples_per_s = 621;
  p.predicted.bubble = 0.09;
  p.predicted.comm = 0.11;
  p.predicted.peak_memory_bytes["boxA:0"] = 61'000'000'000;
  p.why = "because";
  return p;
}

TEST(PlanJsonTest, PlanHasTheDesignShape) {
  const nlohmann::json j = ToJson(HybridPlan());
  EXPECT_EQ(j["layout"], "hybrid");
  EXPECT_EQ(j["dp"], 2);
  EXPECT_EQ(j["pp"], 2);
  EXPECT_EQ(j["micro_batches"], 8);
  EXPECT_EQ(j["schedule"], "1f1b");
  ASSERT_EQ(j["replicas"].size(), 2u);
  EXPECT_EQ(j["replicas"][0]["batch"], 160);
  EXPECT_DOUBLE_EQ(j["replicas"][0]["grad_weight"].get<double>(), 0.625);
  EXPECT_EQ(j["replicas"][0]["stages"][0]["devices"], nlohmann::json::array({"boxA:0"}));
  EXPECT_EQ(j["replicas"][0]["stages"][1]["layers"], nlohmann::json::array({14, 31}));
  EXPECT_DOUBLE_EQ(j["predicted"]["step_s"].get<double>(), 0.412);
  EXPECT_DOUBLE_EQ(j["predicted"]["samples_per_s"].get<double>(), 621);
  EXPECT_DOUBLE_EQ(j["predicted"]["bubble"].get<double>(), 0.09);
  EXPECT_DOUBLE_EQ(j["predicted"]["comm"].get<double>(), 0.11);
  EXPECT_EQ(j["predicted"]["peak_mem_bytes"]["boxA:0"], 61'000'000'000);
  EXPECT_EQ(j["why"], "because");
  EXPECT_FALSE(j.contains("tiling"));
}

TEST(PlanJsonTest, SetHasPlansAndRejections) {
  PlanSet set;
  set.plans.push_back(HybridPlan());
  set.rejected.push_back({Layout::kData, "doesn't fit on boxB:0"});
  set.rejected.push_back({Layout::kAuto, "busy, excluded: boxC:0"});
  const nlohmann::json j = ToJson(set);
  ASSERT_EQ(j["plans"].size(), 1u);
  EXPECT_EQ(j["plans"][0]["layout"], "hybrid");
  ASSERT_EQ(j["rejected"].size(), 2u);
  EXPECT_EQ(j["rejected"][0],
            (nlohmann::json{{"layout", "data"}, {"reason", "doesn't fit on boxB:0"}}));
  EXPECT_EQ(j["rejected"][1]["layout"], "any");
}

TEST(PlanJsonTest, TiledPlanCarriesTiling) {
  JobRequest r = Infer(1);
  r.image = ImageSize{4096, 4096};
  auto got = MakePlans(ClusterBuilder().Node("a").Gpu("x", 24, 20).Build(),
                       ModelBuilder().Layers(4, 5, 1, 10, 100).Halo(8).Build(), r);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  const nlohmann::json j = ToJson(*got);
  bool found = false;
  for (const auto& p : j["plans"]) {
    if (p["layout"] == "tiled") {
      found = true;
      EXPECT_EQ(p["tiling"]["overlap_px"], 16);
      EXPECT_GT(p["tiling"]["tiles_per_image"].get<int64_t>(), 1);
    }
  }
  EXPECT_TRUE(found) << j.dump();
}

}  // namespace
}  // namespace tessera::scheduler::testing
