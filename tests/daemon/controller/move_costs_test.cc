#include "daemon/controller/move_costs.h"

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <vector>

namespace tessera::daemon {
namespace {

using std::chrono::milliseconds;

TEST(MoveCostsTest, AReformCostsItsPauseLessOneStep) {
  const MoveCosts::TimePoint t0{};
  struct Event {
    enum Kind { kStep, kBegin } kind;
    int64_t ms;
    int64_t step;                                      // kStep
    double step_s;                                     // kBegin
    std::optional<int64_t> generation = std::nullopt;  // kStep: the line's; kBegin: the new world
  };
  struct Row {
    const char* what;
    std::vector<Event> events;
    std::optional<double> cost;  // returned by the last event (a step)
  };
  const Row rows[] = {
      {"steps with no re-form measure nothing",
       {{Event::kStep, 0, 5, 0}, {Event::kStep, 900, 6, 0}},
       std::nullopt},
      {"the first step past the order ends it: 4 s less a 0.5 s step",
       {{Event::kStep, 0, 7, 0}, {Event::kBegin, 1000, 0, 0.5}, {Event::kStep, 5000, 8, 0}},
       3.5},
      {"a step reported late (not past the order's) does not end it",
       {{Event::kStep, 0, 7, 0}, {Event::kBegin, 1000, 0, 0.5}, {Event::kStep, 2000, 7, 0}},
       std::nullopt},
      {"a pause shorter than a step costs nothing",
       {{Event::kStep, 0, 7, 0}, {Event::kBegin, 1000, 0, 2}, {Event::kStep, 2000, 8, 0}},
       0.0},
      {"a second order replaces one whose world never stepped",
       {{Event::kStep, 0, 7, 0},
        {Event::kBegin, 1000, 0, 0},
        {Event::kBegin, 6000, 0, 0},
        {Event::kStep, 7000, 8, 0}},
       1.0},
      {"a job never seen stepping: any step ends it",
       {{Event::kBegin, 1000, 0, 0}, {Event::kStep, 3000, 1, 0}},
       2.0},
      {"steps the old world made before the order, reported after it, do not end it",
       {{Event::kStep, 0, 7, 0, 0},
        {Event::kBegin, 1000, 0, 0.5, 1},
        {Event::kStep, 1200, 8, 0, 0},
        {Event::kStep, 1400, 9, 0, 0}},
       std::nullopt},
      {"the new world's first step ends it, whatever its number",
       {{Event::kStep, 0, 7, 0, 0},
        {Event::kBegin, 1000, 0, 0.5, 1},
        {Event::kStep, 1200, 9, 0, 0},
        {Event::kStep, 4000, 9, 0, 1}},
       2.5},
  };
  for (const Row& r : rows) {
    MoveCosts costs(10);
    std::optional<double> last;
    for (const Event& e : r.events) {
      if (e.kind == Event::kBegin) {
        costs.Begin(7, e.generation.value_or(1), e.step_s, t0 + milliseconds(e.ms));
      } else {
        last = costs.Stepped(7, e.step, e.generation, t0 + milliseconds(e.ms));
      }
    }
    EXPECT_EQ(last.has_value(), r.cost.has_value()) << r.what;
    if (last && r.cost) {
      EXPECT_DOUBLE_EQ(*last, *r.cost) << r.what;
    }
    EXPECT_DOUBLE_EQ(costs.For(7).seconds, r.cost.value_or(10)) << r.what;
    EXPECT_EQ(costs.For(7).basis, r.cost ? "measured at its last re-form" : "configured") << r.what;
  }
}

TEST(MoveCostsTest, AJobNeverMovedIsChargedTheMeanOfTheMeasuredOnes) {
  const MoveCosts::TimePoint t0{};
  MoveCosts costs(10);
  for (auto [job, pause_ms] : {std::pair<api::JobId, int64_t>{1, 2000}, {2, 4000}}) {
    costs.Stepped(job, 3, 0, t0);
    costs.Begin(job, 1, 0, t0);
    ASSERT_TRUE(costs.Stepped(job, 4, 1, t0 + milliseconds(pause_ms)).has_value());
  }
  EXPECT_DOUBLE_EQ(costs.For(1).seconds, 2);
  EXPECT_DOUBLE_EQ(costs.For(2).seconds, 4);
  EXPECT_DOUBLE_EQ(costs.For(3).seconds, 3);
  EXPECT_EQ(costs.For(3).basis, "the mean of 2 measured re-forms");
  // A job that ended is charged no more, but its move still counts.
  costs.Forget(2);
  EXPECT_DOUBLE_EQ(costs.For(2).seconds, 3);
  // Its steps are forgotten too: a later attempt's step 1 passes a new order.
  costs.Begin(2, 1, 0, t0);
  EXPECT_TRUE(costs.Stepped(2, 1, std::nullopt, t0 + milliseconds(500)).has_value());
}

// A restart is not measured: it costs what a move of the job does, but never
// less than the configured cost.
TEST(MoveCostsTest, ARestartCostsAtLeastTheConfiguredCost) {
  const MoveCosts::TimePoint t0{};
  MoveCosts costs(10);
  EXPECT_DOUBLE_EQ(costs.ForRestart(1).seconds, 10);
  EXPECT_EQ(costs.ForRestart(1).basis, "configured");
  for (auto [job, pause_ms] : {std::pair<api::JobId, int64_t>{1, 500}, {2, 30'000}}) {
    costs.Stepped(job, 3, 0, t0);
    costs.Begin(job, 1, 0, t0);
    ASSERT_TRUE(costs.Stepped(job, 4, 1, t0 + milliseconds(pause_ms)).has_value());
  }
  EXPECT_DOUBLE_EQ(costs.For(1).seconds, 0.5);
  EXPECT_DOUBLE_EQ(costs.ForRestart(1).seconds, 10);
  EXPECT_EQ(costs.ForRestart(1).basis, "configured: a restart is not measured");
  EXPECT_DOUBLE_EQ(costs.ForRestart(2).seconds, 30);
  EXPECT_EQ(costs.ForRestart(2).basis, "measured at its last re-form");
}

}  // namespace
}  // namespace tessera::daemon
