// Attempt ranks -> hetjob components -> back to ranks, table-style.
#include "slurm/hetjob_mapping.h"

#include <gtest/gtest.h>

namespace tessera::slurm {
namespace {

// Nodes of the tables: GPU type per device index.
const std::map<std::string, std::vector<std::string>> kTypes = {
    {"fa", {"a100", "a100"}}, {"fb", {"t4"}},         {"fc", {"a100", "a100"}},
    {"fd", {"t4", "t4"}},     {"fe", {"a100", "t4"}}, {"cpu", {}},
};

struct Case {
  std::string name;
  std::vector<RankSlot> ranks;
  std::vector<Component> components;
  std::vector<RankPlace> places;  // index == rank
};

const Case kCases[] = {
    {"one rank", {{0, "fb", {0}}}, {{{"fb"}, 1, "gpu:t4:1"}}, {{0, "fb", 0}}},
    {"mixed a100 pair and a t4",
     {{0, "fa", {0}}, {1, "fa", {1}}, {2, "fb", {0}}},
     {{{"fa"}, 2, "gpu:a100:2"}, {{"fb"}, 1, "gpu:t4:1"}},
     {{0, "fa", 0}, {0, "fa", 1}, {1, "fb", 0}}},
    {"identical nodes share a component",
     {{0, "fa", {0}}, {1, "fa", {1}}, {2, "fc", {0}}, {3, "fc", {1}}, {4, "fb", {0}}},
     {{{"fa", "fc"}, 2, "gpu:a100:2"}, {{"fb"}, 1, "gpu:t4:1"}},
     {{0, "fa", 0}, {0, "fa", 1}, {0, "fc", 0}, {0, "fc", 1}, {1, "fb", 0}}},
    {"same type, other count: own component",
     {{0, "fa", {0}}, {1, "fa", {1}}, {2, "fc", {1}}},
     {{{"fa"}, 2, "gpu:a100:2"}, {{"fc"}, 1, "gpu:a100:1"}},
     {{0, "fa", 0}, {0, "fa", 1}, {1, "fc", 0}}},
    {"ranks interleaved over nodes keep rank order per node",
     {{0, "fd", {1}}, {1, "fa", {0}}, {2, "fd", {0}}},
     {{{"fd"}, 2, "gpu:t4:2"}, {{"fa"}, 1, "gpu:a100:1"}},
     {{0, "fd", 0}, {1, "fa", 0}, {0, "fd", 1}}},
    {"a node with two types asks for both",
     {{0, "fe", {0}}, {1, "fe", {1}}},
     {{{"fe"}, 2, "gpu:a100:1,gpu:t4:1"}},
     {{0, "fe", 0}, {0, "fe", 1}}},
    {"a rank spanning two GPUs",
     {{0, "fa", {0, 1}}, {1, "fb", {0}}},
     {{{"fa"}, 1, "gpu:a100:2"}, {{"fb"}, 1, "gpu:t4:1"}},
     {{0, "fa", 0}, {1, "fb", 0}}},
    {"CPU ranks ask for no GRES",
     {{0, "cpu", {}}, {1, "cpu", {}}},
     {{{"cpu"}, 2, ""}},
     {{0, "cpu", 0}, {0, "cpu", 1}}},
    {"given out of order",
     {{2, "fb", {0}}, {0, "fa", {0}}, {1, "fa", {1}}},
     {{{"fa"}, 2, "gpu:a100:2"}, {{"fb"}, 1, "gpu:t4:1"}},
     {{0, "fa", 0}, {0, "fa", 1}, {1, "fb", 0}}},
};

TEST(HetJobMappingTest, PlanToComponentsToRanks) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    auto m = MapRanks(c.ranks, kTypes);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    EXPECT_EQ(m->components, c.components);
    EXPECT_EQ(m->ranks, c.places);
    // Back: every Slurm task (node, SLURM_LOCALID) finds its rank.
    for (size_t r = 0; r < c.places.size(); ++r) {
      EXPECT_EQ(RankAt(*m, c.places[r].node, c.places[r].local), static_cast<int64_t>(r));
    }
    EXPECT_EQ(RankAt(*m, "nowhere", 0), std::nullopt);
    EXPECT_EQ(RankAt(*m, c.places[0].node, 99), std::nullopt);
    // The attempt file carries it unchanged.
    auto back = HetJobMappingFromJson(ToJson(*m));
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(back->components, m->components);
    EXPECT_EQ(back->ranks, m->ranks);
  }
}

TEST(HetJobMappingTest, RefusesRanksThatDoNotMap) {
  struct Bad {
    std::string name;
    std::vector<RankSlot> ranks;
    std::string field;
  };
  const Bad cases[] = {
      {"no ranks", {}, "ranks"},
      {"a rank twice", {{0, "fa", {0}}, {0, "fa", {1}}}, "ranks"},
      {"a gap", {{0, "fa", {0}}, {2, "fa", {1}}}, "ranks"},
      {"negative", {{-1, "fa", {0}}}, "ranks"},
      {"unknown node", {{0, "fz", {0}}}, "ranks[0].devices"},
      {"device the node lacks", {{0, "fa", {0}}, {1, "fb", {1}}}, "ranks[1].devices"},
  };
  for (const Bad& b : cases) {
    SCOPED_TRACE(b.name);
    auto m = MapRanks(b.ranks, kTypes);
    ASSERT_FALSE(m.ok());
    EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(m.status().field(), b.field);
  }
}

}  // namespace
}  // namespace tessera::slurm
