#include "worker/runtime/plan.h"

#include <gtest/gtest.h>

#include <string>

#include "worker/runtime/dist_env.h"

namespace tessera::worker {
namespace {

constexpr char kHybrid[] = R"({"layout":"hybrid","global_batch":16,"micro_batches":4,
  "schedule":"gpipe","replicas":[
  {"batch":12,"stages":[{"rank":0,"layers":[0,7]},{"rank":1,"layers":[7,14]}]},
  {"batch":4, "stages":[{"rank":2,"layers":[0,9]},{"rank":3,"layers":[9,14]}]}]})";

TEST(PlanTest, ParsesHybridPlan) {
  auto plan = ParsePlan(kHybrid);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->layout, Layout::kHybrid);
  EXPECT_EQ(plan->schedule, Schedule::kGPipe);
  EXPECT_EQ(plan->global_batch, 16);
  ASSERT_EQ(plan->replicas.size(), 2u);
  EXPECT_EQ(plan->replicas[1].stages[0].layer_end, 9);
  EXPECT_TRUE(ValidatePlan(*plan, 4, 14).ok());
}

// A plan of one replica (batch 4 of global_batch 4) with these stages.
std::string OneReplica(const std::string& layout, const std::string& stages, int batch = 4) {
  return R"({"layout":")" + layout + R"(","global_batch":4,"replicas":[{"batch":)" +
         std::to_string(batch) + R"(,"stages":)" + stages + "}]}";
}

struct BadPlanCase {
  const char* name;
  std::string json;
  int world;
  int64_t layers;
  const char* field;
};

class BadPlanTest : public ::testing::TestWithParam<BadPlanCase> {};

TEST_P(BadPlanTest, IsRejectedNamingTheField) {
  const BadPlanCase& c = GetParam();
  auto plan = ParsePlan(c.json);
  Status s = plan.ok() ? ValidatePlan(*plan, c.world, c.layers) : plan.status();
  ASSERT_FALSE(s.ok()) << c.name;
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.field(), c.field) << s.ToString();
}

INSTANTIATE_TEST_SUITE_P(
    Table, BadPlanTest,
    ::testing::Values(
        BadPlanCase{"not json", "{", 1, 4, ""},
        BadPlanCase{"bad layout", R"({"layout":"ring","global_batch":1,"replicas":[]})", 1, 4,
                    "layout"},
        BadPlanCase{"bad schedule",
                    R"({"layout":"data","global_batch":1,"schedule":"zb","replicas":[]})", 1, 4,
                    "schedule"},
        BadPlanCase{"shares do not sum",
                    R"({"layout":"data","global_batch":10,"replicas":[
          {"batch":4,"stages":[{"rank":0,"layers":[0,4]}]},
          {"batch":4,"stages":[{"rank":1,"layers":[0,4]}]}]})",
                    2, 4, "replicas"},
        BadPlanCase{
            "gap in layers",
            OneReplica("pipeline", R"([{"rank":0,"layers":[0,2]},{"rank":1,"layers":[3,4]}])"), 2,
            4, "replicas[0].stages[1].layers"},
        BadPlanCase{"does not cover model", OneReplica("data", R"([{"rank":0,"layers":[0,3]}])"), 1,
                    4, "replicas[0].stages"},
        BadPlanCase{
            "rank twice",
            OneReplica("pipeline", R"([{"rank":0,"layers":[0,2]},{"rank":0,"layers":[2,4]}])"), 2,
            4, "replicas[0].stages[1].rank"},
        BadPlanCase{"rank outside world", OneReplica("data", R"([{"rank":3,"layers":[0,4]}])"), 1,
                    4, "replicas[0].stages[0].rank"},
        BadPlanCase{"missing rank", OneReplica("data", R"([{"rank":0,"layers":[0,4]}])"), 2, 4,
                    "replicas"},
        BadPlanCase{"data layout with two stages",
                    OneReplica("data", R"([{"rank":0,"layers":[0,2]},{"rank":1,"layers":[2,4]}])"),
                    2, 4, "replicas[0].stages"},
        BadPlanCase{"zero batch", OneReplica("data", R"([{"rank":0,"layers":[0,4]}])", /*batch=*/0),
                    1, 4, "replicas[0].batch"},
        BadPlanCase{"layers not a pair", OneReplica("data", R"([{"rank":0,"layers":[0]}])"), 1, 4,
                    "replicas[0].stages[0].layers"}),
    [](const auto& info) {
      std::string n = info.param.name;
      for (char& ch : n) {
        if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
      }
      return n;
    });

TEST(PlanTest, RolesAndNeighbours) {
  auto plan = ParsePlan(kHybrid);
  ASSERT_TRUE(plan.ok());
  auto r1 = RoleForRank(*plan, 1);
  ASSERT_TRUE(r1.ok());
  EXPECT_EQ(r1->replica, 0);
  EXPECT_EQ(r1->stage, 1);
  EXPECT_EQ(r1->prev_rank, 0);
  EXPECT_TRUE(r1->last_stage());
  EXPECT_EQ(r1->sample_offset, 0);
  auto r2 = RoleForRank(*plan, 2);
  ASSERT_TRUE(r2.ok());
  EXPECT_EQ(r2->replica, 1);
  EXPECT_TRUE(r2->first_stage());
  EXPECT_EQ(r2->next_rank, 3);
  EXPECT_EQ(r2->sample_offset, 12);
  EXPECT_EQ(r2->replica_batch, 4);
  EXPECT_FALSE(RoleForRank(*plan, 9).ok());
}

TEST(PlanTest, OwnerGroupsFollowDifferentCuts) {
  auto plan = ParsePlan(kHybrid);
  ASSERT_TRUE(plan.ok());
  auto groups = LayerOwnerGroups(*plan, 14);
  ASSERT_EQ(groups.size(), 3u);
  EXPECT_EQ(groups[0].ranks, (std::vector<int>{0, 2}));
  EXPECT_EQ(groups[0].layers.size(), 7u);
  EXPECT_EQ(groups[1].ranks, (std::vector<int>{1, 2}));
  EXPECT_EQ(groups[1].layers, (std::vector<int64_t>{7, 8}));
  EXPECT_EQ(groups[2].ranks, (std::vector<int>{1, 3}));
  EXPECT_EQ(groups[2].layers.size(), 5u);
}

TEST(PlanTest, StagePositionsOfOwnerGroups) {
  auto plan = ParsePlan(kHybrid);
  ASSERT_TRUE(plan.ok());
  // Rank 2 (stage 0) shares layers 7, 8 with rank 1 (stage 1).
  EXPECT_FALSE(OwnerGroupsShareStagePositions(*plan, 14));
  plan->replicas[1].stages[0].layer_end = 7;
  plan->replicas[1].stages[1].layer_begin = 7;
  EXPECT_TRUE(OwnerGroupsShareStagePositions(*plan, 14));
}

TEST(PlanTest, MicroBatchSplit) {
  EXPECT_EQ(SplitMicroBatches(10, 4), (std::vector<int64_t>{3, 3, 2, 2}));
  EXPECT_EQ(SplitMicroBatches(2, 4), (std::vector<int64_t>{1, 1}));
  auto plan = ParsePlan(kHybrid);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(EffectiveMicroBatches(*plan), 4);
  plan->replicas[1].batch = 3;
  EXPECT_EQ(EffectiveMicroBatches(*plan), 3);
}

TEST(DistEnvTest, ReadsTorchrunVariables) {
  std::map<std::string, std::string> vars{{"RANK", "2"},
                                          {"WORLD_SIZE", "4"},
                                          {"MASTER_ADDR", "10.0.0.1"},
                                          {"MASTER_PORT", "29400"},
                                          {"TESSERA_PLAN", "/tmp/plan.json"},
                                          {"TESSERA_DEVICE_SPEED", "0.5"}};
  auto env = ReadDistEnv([&](const std::string& k) -> std::optional<std::string> {
    auto it = vars.find(k);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  });
  ASSERT_TRUE(env.ok()) << env.status().ToString();
  EXPECT_TRUE(env->distributed);
  EXPECT_EQ(env->rank, 2);
  EXPECT_EQ(env->world_size, 4);
  EXPECT_EQ(env->master_port, 29400);
  EXPECT_DOUBLE_EQ(env->device_speed, 0.5);
  EXPECT_EQ(env->device, "cpu");
  EXPECT_EQ(env->gloo_socket_ifname, "") << "unset: Gloo picks the route to MASTER_ADDR";
}

TEST(DistEnvTest, GlooInterfaceIsTheFirstOfTorchrunsList) {
  struct Case {
    std::string value, interface;
  } cases[] = {{"eth1", "eth1"}, {"ib0,eth0", "ib0"}, {"", ""}};
  for (const Case& c : cases) {
    auto env = ReadDistEnv([&](const std::string& k) -> std::optional<std::string> {
      if (k == "GLOO_SOCKET_IFNAME") return c.value;
      return std::nullopt;
    });
    ASSERT_TRUE(env.ok()) << env.status().ToString();
    EXPECT_EQ(env->gloo_socket_ifname, c.interface) << c.value;
  }
}

TEST(DistEnvTest, CollectiveTimeoutFromTheLaunch) {
  struct Case {
    std::optional<std::string> value;
    int64_t seconds;
  } cases[] = {{std::nullopt, 300}, {"", 300}, {"60", 60}, {"1", 1}, {"86400", 86400}};
  for (const Case& c : cases) {
    auto env = ReadDistEnv([&](const std::string& k) -> std::optional<std::string> {
      if (k == "TESSERA_COLLECTIVE_TIMEOUT_S") return c.value;
      return std::nullopt;
    });
    ASSERT_TRUE(env.ok()) << env.status().ToString();
    EXPECT_EQ(env->collective_timeout.count(), c.seconds) << c.value.value_or("(unset)");
  }
}

TEST(DistEnvTest, RejectsBadValues) {
  struct Case {
    std::map<std::string, std::string> vars;
    const char* field;
  };
  const Case cases[] = {
      {{{"WORLD_SIZE", "two"}}, "WORLD_SIZE"},
      {{{"WORLD_SIZE", "2"}, {"RANK", "2"}}, "RANK"},
      {{{"WORLD_SIZE", "2"}, {"MASTER_PORT", "70000"}}, "MASTER_PORT"},
      {{{"TESSERA_PLAN", "p.json"}}, "WORLD_SIZE"},
      {{{"TESSERA_DEVICE_SPEED", "0"}}, "TESSERA_DEVICE_SPEED"},
      {{{"TESSERA_COLLECTIVE_TIMEOUT_S", "0"}}, "TESSERA_COLLECTIVE_TIMEOUT_S"},
      {{{"TESSERA_COLLECTIVE_TIMEOUT_S", "-5"}}, "TESSERA_COLLECTIVE_TIMEOUT_S"},
      {{{"TESSERA_COLLECTIVE_TIMEOUT_S", "90000"}}, "TESSERA_COLLECTIVE_TIMEOUT_S"},
      {{{"TESSERA_COLLECTIVE_TIMEOUT_S", "60s"}}, "TESSERA_COLLECTIVE_TIMEOUT_S"},
  };
  for (const Case& c : cases) {
    auto env = ReadDistEnv([&](const std::string& k) -> std::optional<std::string> {
      auto it = c.vars.find(k);
      if (it == c.vars.end()) return std::nullopt;
      return it->second;
    });
    ASSERT_FALSE(env.ok()) << c.field;
    EXPECT_EQ(env.status().field(), c.field);
  }
}

}  // namespace
}  // namespace tessera::worker
