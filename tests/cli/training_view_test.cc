// How the CLI renders a training job's metrics history.
#include "cli/training_view.h"

#include <gtest/gtest.h>

#include "tests/cli/builders.h"

namespace tessera::cli {
namespace {

TEST(TrainingViewTest, SparklineScalesRunsBetweenLowAndHigh) {
  struct Case {
    std::vector<double> values;
    int width;
    std::string line;
  } cases[] = {
      {{}, 10, ""},
      {{1, 2, 3, 4, 5, 6, 7, 8}, 8, "▁▂▃▄▅▆▇█"},
      {{8, 7, 6, 5, 4, 3, 2, 1}, 4, "█▆▃▁"},  // runs of two, each at its mean
      {{5, 5, 5}, 10, "▄▄▄"},                 // a flat line sits in the middle
      {{0, 10}, 0, ""},
  };
  for (const Case& c : cases) EXPECT_EQ(Sparkline(c.values, c.width), c.line);
}

TEST(TrainingViewTest, LossSeriesTakesTheNewestAttemptThenTheLowestRank) {
  using testing::Point;
  const std::vector<api::MetricPoint> points = {
      Point(2, 1, 1, 0.9), Point(2, 1, 0, 1.0), Point(3, 1, 0, 0.8),
      Point(3, 2, 1, 0.7), Point(1, 1, 0, 1.5), Point(4, 2, 0, std::nullopt),
  };
  std::vector<std::pair<int64_t, double>> got;
  for (const api::MetricPoint& p : LossSeries(points)) got.emplace_back(p.step, *p.loss);
  EXPECT_EQ(got, (std::vector<std::pair<int64_t, double>>{{1, 1.5}, {2, 1.0}, {3, 0.7}}));
  EXPECT_EQ(LossLines({Point(1, 1, 0, std::nullopt)}, 10), "loss     (no values yet)\n");
}

TEST(TrainingViewTest, RanksFollowThePlanReplicaByReplicaStageByStage) {
  const api::Json plan = api::Json::parse(R"({"replicas": [
      {"stages": [{"devices": ["a:0"]}, {"devices": ["a:1"]}]},
      {"stages": [{"devices": ["b:0"]}, {"devices": [7]}, {"devices": ["c:2"]}]}]})");
  const api::Json nodes = api::Json::parse(R"([
      {"name": "a", "devices": [{"index": 0, "memory_bytes": 100}, {"index": 1}]},
      {"name": "b", "devices": [{"index": 0, "memory_bytes": 200}]}])");
  const std::map<int64_t, RankDevice> ranks = RankDevicesOf(plan, nodes);
  ASSERT_EQ(ranks.size(), 4u);
  EXPECT_EQ(ranks.at(0).label, "a:0");
  EXPECT_EQ(ranks.at(0).memory_bytes, 100);
  EXPECT_EQ(ranks.at(1).memory_bytes, 0) << "memory not reported";
  EXPECT_EQ(ranks.at(2).label, "b:0");
  EXPECT_EQ(ranks.at(3).label, "c:2") << "a malformed device is skipped";
  EXPECT_EQ(ranks.at(3).memory_bytes, 0) << "an unknown node";
  EXPECT_TRUE(RankDevicesOf(nullptr, nodes).empty());
}

TEST(TrainingViewTest, MemoryReadsInItsUnit) {
  EXPECT_EQ(FormatMemory(512), "512 B");
  EXPECT_EQ(FormatMemory(3 << 20), "3.0 MiB");
  EXPECT_EQ(FormatMemory(int64_t{80} << 30), "80.0 GiB");
}

}  // namespace
}  // namespace tessera::cli
