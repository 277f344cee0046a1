// reform.h's pure parts: the order a survivor reads, its new environment, and
// the agreement on the step and the layers sent among the survivors.
#include "worker/runtime/reform.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "worker/runtime/await_work.h"

namespace tessera::worker {
namespace {

constexpr char kPlan[] = R"({"layout":"data","global_batch":8,"micro_batches":1,
 "replicas":[{"batch":8,"stages":[{"rank":0,"layers":[0,4]}]}]})";

std::string Order(const std::string& generation, const std::string& env,
                  const std::string& plan = kPlan) {
  return R"({"generation":)" + generation + R"(,"env":)" + env + R"(,"plan":)" + plan + "}";
}

TEST(ParseReformOrderTest, NamesTheFieldOfABadOrder) {
  const std::string env =
      R"({"RANK":"1","WORLD_SIZE":"2","LOCAL_RANK":"0","LOCAL_WORLD_SIZE":"1",
          "MASTER_ADDR":"10.0.0.2","MASTER_PORT":"29611"})";
  struct Case {
    const char* name;
    std::string text;
    std::string field;  // "" = parses
  };
  const Case cases[] = {
      {"good", Order("2", env), ""},
      {"not_json", "{", "reform"},
      {"no_generation", R"({"env":{},"plan":{}})", "reform.generation"},
      {"generation_zero", Order("0", env), "reform.generation"},
      {"env_not_object", Order("1", "[]"), "reform.env"},
      {"env_value_not_string", Order("1", R"({"RANK":1})"), "reform.env.RANK"},
      {"no_plan", R"({"generation":1,"env":{}})", "reform.plan"},
      {"left_out_not_bool", R"({"generation":2,"left_out":"yes"})", "reform.left_out"},
      {"left_out_false_needs_a_place", R"({"generation":2,"left_out":false})", "reform.env"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto got = ParseReformOrder(c.text);
    if (c.field.empty()) {
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      EXPECT_EQ(got->generation, 2);
      EXPECT_EQ(got->env.at("MASTER_PORT"), "29611");
      EXPECT_NE(got->plan_text.find("replicas"), std::string::npos);
    } else {
      ASSERT_FALSE(got.ok());
      EXPECT_EQ(got.status().field(), c.field) << got.status().ToString();
    }
  }
}

// A rank a planned re-form leaves out is told so without a place: no env, no
// plan.
TEST(ParseReformOrderTest, ALeftOutOrderNeedsNoPlace) {
  auto got = ParseReformOrder(R"({"generation":4,"left_out":true})");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->generation, 4);
  EXPECT_TRUE(got->left_out);
  EXPECT_TRUE(got->env.empty());
  EXPECT_TRUE(got->plan_text.empty());
  EXPECT_FALSE(ParseReformOrder(Order("4", "{}"))->left_out) << "a place by default";
  EXPECT_EQ(ParseReformOrder(R"({"left_out":true})").status().field(), "reform.generation");
}

// A joining rank's watcher starts at the generation it joined: the order file
// of that generation, already there, abandons nothing; a watcher of an older
// generation abandons the collectives for it.
TEST(ReformWatcherTest, TheOrderARankJoinedByIsNotNewerThanItsGeneration) {
  const std::string env =
      R"({"RANK":"2","WORLD_SIZE":"3","LOCAL_RANK":"0","LOCAL_WORLD_SIZE":"1",
          "MASTER_ADDR":"10.0.0.2","MASTER_PORT":"29611"})";
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("tessera-reform-watcher-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "reform.json").string();
  std::ofstream(path) << Order("2", env);
  struct Row {
    const char* name;
    int64_t start;
    bool abandoned;
  };
  for (const Row& row :
       {Row{"joined at generation 2", 2, false}, Row{"at generation 1", 1, true}}) {
    SCOPED_TRACE(row.name);
    ResumeCollectives();
    {
      ReformWatcher watcher(path, row.start);
      for (int i = 0; i < 50 && !CollectivesAbandoned(); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));  // 2.5 polls at least
      }
    }
    EXPECT_EQ(CollectivesAbandoned(), row.abandoned);
  }
  ResumeCollectives();
  std::filesystem::remove_all(dir);
}

TEST(ReformedEnvTest, TakesTheOrdersWorldAndKeepsTheRest) {
  DistEnv env;
  env.rank = 3;
  env.world_size = 4;
  env.master_port = 29500;
  env.checkpoint_dir = "/ckpt/job-1";
  env.device_speed = 0.5;
  auto order = ParseReformOrder(
      Order("1", R"({"RANK":"1","WORLD_SIZE":"3","LOCAL_RANK":"0","LOCAL_WORLD_SIZE":"1",
               "MASTER_ADDR":"10.0.0.2","MASTER_PORT":"29611"})"));
  ASSERT_TRUE(order.ok());
  auto next = ReformedEnv(env, *order);
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_EQ(next->rank, 1);
  EXPECT_EQ(next->world_size, 3);
  EXPECT_EQ(next->master_addr, "10.0.0.2");
  EXPECT_EQ(next->master_port, 29611);
  EXPECT_EQ(next->checkpoint_dir, "/ckpt/job-1");
  EXPECT_EQ(next->device_speed, 0.5);

  auto outside = ParseReformOrder(
      Order("1", R"({"RANK":"3","WORLD_SIZE":"3","LOCAL_RANK":"0","LOCAL_WORLD_SIZE":"1",
               "MASTER_ADDR":"a","MASTER_PORT":"1"})"));
  ASSERT_TRUE(outside.ok());
  EXPECT_EQ(ReformedEnv(env, *outside).status().field(), "RANK");
  auto missing = ParseReformOrder(Order("1", R"({"RANK":"0"})"));
  ASSERT_TRUE(missing.ok());
  EXPECT_FALSE(ReformedEnv(env, *missing).ok());
}

TEST(AgreeOnStateTest, NewestStepAndTheLayersEachRankLacks) {
  using Need = std::vector<std::pair<int64_t, int64_t>>;
  struct Case {
    const char* name;
    std::vector<HeldLayers> held;
    Need need;
    int64_t step;
    std::vector<LayerTransfer> transfers;
    bool ok = true;
  };
  const Case cases[] = {
      {"data_replicas_hold_everything", {{9, 0, 4}, {9, 0, 4}}, {{0, 4}, {0, 4}}, 9, {}},
      // A rank whose step failed before the optimizer step holds nothing at
      // the newest step: it gets every layer from the lowest rank that does.
      {"one_rank_a_step_behind",
       {{9, 0, 3}, {10, 0, 3}, {10, 0, 3}},
       {{0, 3}, {0, 3}, {0, 3}},
       10,
       {{0, 1, 0}, {1, 1, 0}, {2, 1, 0}}},
      // Stages re-cut: each takes what it lacks from the lowest owner.
      {"pipeline_recut",
       {{5, 0, 2}, {5, 2, 4}, {5, 0, 4}},
       {{1, 4}, {0, 2}, {0, 4}},
       5,
       {{2, 1, 0}, {3, 1, 0}, {0, 0, 1}, {1, 0, 1}}},
      {"a_joining_rank_gets_all",
       {{4, 0, 2}, {4, 0, 0}},
       {{0, 2}, {0, 2}},
       4,
       {{0, 0, 1}, {1, 0, 1}}},
      // A stage that was only on the lost node: from the checkpoint.
      {"layer_nobody_holds", {{5, 0, 2}}, {{0, 3}}, 5, {{2, kFromCheckpoint, 0}}},
      // Where nobody holds a layer at the newest step, its newest holder's
      // state is the one there is.
      {"holder_is_a_step_behind",
       {{5, 0, 2}, {6, 2, 4}},
       {{0, 4}, {0, 0}},
       6,
       {{2, 1, 0}, {3, 1, 0}}},
      {"one_rank_short", {{3, 0, 4}, {3, 0, 4}}, {{0, 4}, {0, 4}}, 3, {}, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto got = AgreeOnState(c.held, c.need);
    if (!c.ok) {  // a malformed call: one held per need
      std::vector<HeldLayers> short_held(c.held.begin(), c.held.end() - 1);
      EXPECT_FALSE(AgreeOnState(short_held, c.need).ok());
      continue;
    }
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(got->step, c.step);
    ASSERT_EQ(got->transfers.size(), c.transfers.size());
    for (size_t i = 0; i < c.transfers.size(); ++i) {
      EXPECT_EQ(got->transfers[i].layer, c.transfers[i].layer) << i;
      EXPECT_EQ(got->transfers[i].src, c.transfers[i].src) << i;
      EXPECT_EQ(got->transfers[i].dst, c.transfers[i].dst) << i;
    }
  }
}

}  // namespace
}  // namespace tessera::worker
