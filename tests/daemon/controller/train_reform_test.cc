// train_reform: when survivors can re-form, and how the new plan's ranks are
// handed to the surviving processes. Pure; table tests.
#include "daemon/controller/train_reform.h"

#include <gtest/gtest.h>

#include <optional>
#include <set>
#include <string>
#include <vector>

namespace tessera::daemon {
namespace {

// A launch whose rank plan is `replicas` (each a list of [begin, end) stages,
// ranks numbered in order), rank r on node "n<r>" device 0.
AttemptLaunch LaunchOf(const std::vector<std::vector<std::pair<int, int>>>& replicas) {
  AttemptLaunch l;
  l.attempt = 1;
  api::Json reps = api::Json::array();
  int64_t rank = 0;
  for (const auto& stages : replicas) {
    api::Json s = api::Json::array();
    for (const auto& [b, e] : stages) {
      s.push_back({{"rank", rank}, {"layers", {b, e}}});
      RankLaunch r;
      r.node = "n" + std::to_string(rank);
      r.launch.key = {7, 1, rank};
      r.launch.env = {{"RANK", std::to_string(rank)}};
      l.ranks.push_back(r);
      ++rank;
    }
    reps.push_back({{"batch", 4}, {"stages", s}});
  }
  l.rank_plan = {{"layout", "data"}, {"global_batch", 8}, {"replicas", reps}};
  return l;
}

api::JobSpec SpecOf(const std::string& entrypoint) {
  api::JobSpec s;
  s.entrypoint = entrypoint;
  return s;
}

TEST(ReformBlockerTest, SaysWhySurvivorsCannotGoOn) {
  struct Case {
    const char* name;
    std::string entrypoint;
    std::string why;  // "" = can re-form; else a part of the reason
  };
  const Case cases[] = {
      {"builtin", "builtin:colorize-unet", ""},
      {"model_file", "model:lab-seq", ""},
      {"script", "cmd:train", "runs its own script"},
      {"gan", "builtin:gan-pix2pix", "gan-pix2pix cannot re-form"},
  };
  const AttemptLaunch launch = LaunchOf({{{0, 4}}, {{0, 4}}});
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto why = ReformBlocker(SpecOf(c.entrypoint), launch);
    if (c.why.empty()) {
      EXPECT_FALSE(why.has_value()) << *why;
    } else {
      ASSERT_TRUE(why.has_value());
      EXPECT_NE(why->find(c.why), std::string::npos) << *why;
    }
  }
  AttemptLaunch infer = LaunchOf({{{0, 1}}});
  infer.infer = true;
  EXPECT_TRUE(ReformBlocker(SpecOf("builtin:colorize-unet"), infer).has_value());
  EXPECT_TRUE(ReformBlocker(SpecOf("builtin:colorize-unet"), AttemptLaunch{}).has_value());
}

TEST(OrphanLayersTest, NamesTheLayersOnlyTheLostRanksHeld) {
  struct Case {
    const char* name;
    std::vector<std::vector<std::pair<int, int>>> plan;
    std::set<int64_t> lost;
    std::optional<std::string> orphans;
  };
  const Case cases[] = {
      {"data_replica_lost", {{{0, 4}}, {{0, 4}}, {{0, 4}}}, {0}, std::nullopt},
      {"hybrid_other_replica_whole", {{{0, 2}, {2, 4}}, {{0, 4}}}, {1}, std::nullopt},
      {"hybrid_cut_both_ways", {{{0, 2}, {2, 4}}, {{0, 3}, {3, 4}}}, {0, 3}, std::nullopt},
      {"pipeline_stage_lost", {{{0, 2}, {2, 4}}}, {1}, "2-3"},
      {"one_layer_lost", {{{0, 3}, {3, 4}}}, {1}, "3"},
      {"two_stages_apart", {{{0, 1}, {1, 2}, {2, 3}}}, {0, 2}, "0,2"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(OrphanLayers(LaunchOf(c.plan), c.lost), c.orphans);
  }
}

TEST(ReformRanksTest, EachNewRankGoesToTheSurvivorOnItsDevice) {
  const AttemptLaunch old = LaunchOf({{{0, 4}}, {{0, 4}}, {{0, 4}}});
  // The new plan: two ranks, on n2 and n0 (in that order); n1 left out.
  AttemptLaunch fresh = LaunchOf({{{0, 4}}, {{0, 4}}});
  fresh.ranks[0].node = "n2";
  fresh.ranks[0].launch.env = {{"RANK", "0"}, {"MASTER_PORT", "29600"}};
  fresh.ranks[1].node = "n0";
  fresh.ranks[1].launch.env = {{"RANK", "1"}, {"MASTER_PORT", "29600"}};
  auto got = ReformRanks(old, {0, 1, 2}, fresh, 3);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->unused, std::vector<int64_t>{1});
  const auto& ranks = got->launch.ranks;
  ASSERT_EQ(ranks.size(), 3u);
  EXPECT_EQ(ranks[2].launch.key.rank, 2) << "keys stay";
  EXPECT_EQ(ranks[2].launch.reform["env"]["RANK"], "0");
  EXPECT_EQ(ranks[0].launch.reform["env"]["RANK"], "1");
  EXPECT_EQ(ranks[0].launch.reform["generation"], 3);
  EXPECT_EQ(ranks[0].launch.env.at("MASTER_PORT"), "29600");
  // The left-out survivor is told it has no place in generation 3, so it
  // leaves at once (worker/runtime/reform.h).
  EXPECT_EQ(ranks[1].launch.reform, api::Json({{"generation", 3}, {"left_out", true}}));
  EXPECT_EQ(NextReformGeneration(got->launch), 4);
  EXPECT_EQ(NextReformGeneration(old), 1);

  // A rank on a device no survivor holds joins: a new key after the old
  // ones, started with its place (growth onto a free device).
  fresh.ranks[1].node = "n9";
  auto grown = ReformRanks(old, {0, 2}, fresh, 2);
  ASSERT_TRUE(grown.ok()) << grown.status().ToString();
  EXPECT_EQ(grown->joined, std::vector<int64_t>{3});
  ASSERT_EQ(grown->launch.ranks.size(), 4u);
  const RankLaunch& joined = grown->launch.ranks[3];
  EXPECT_EQ(joined.node, "n9");
  EXPECT_EQ(joined.launch.key.rank, 3);
  EXPECT_EQ(joined.launch.key.job_id, 7);
  EXPECT_EQ(joined.launch.reform["env"]["RANK"], "1");
  EXPECT_EQ(joined.launch.reform["generation"], 2);
  EXPECT_EQ(grown->unused, std::vector<int64_t>{0}) << "n0 is not in the new plan";
  EXPECT_EQ(grown->launch.ranks[0].launch.reform.value("left_out", false), true);
  EXPECT_TRUE(grown->launch.ranks[1].launch.reform.is_null()) << "lost, not left out: no order";
}

}  // namespace
}  // namespace tessera::daemon
