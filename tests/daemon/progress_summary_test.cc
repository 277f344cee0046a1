#include "daemon/progress_summary.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tessera::daemon {
namespace {

api::WorkerStatus W(api::JobId job, int64_t attempt, int64_t rank, api::Json progress) {
  api::WorkerStatus w;
  w.key = {job, attempt, rank};
  w.progress = std::move(progress);
  return w;
}

TEST(ProgressSummaryTest, AgeReadsAttemptGenerationAndStep) {
  struct Row {
    std::string name;
    api::WorkerStatus worker;
    ProgressAge want;
  };
  const std::vector<Row> rows = {
      {"every member", W(1, 3, 0, {{"step", 9}, {"generation", 2}}), {3, 2, 9}},
      {"no generation (a script's line)", W(1, 1, 0, {{"step", 9}}), {1, 0, 9}},
      {"not integers", W(1, 1, 0, {{"step", "9"}, {"generation", 1.5}}), {1, 0, 0}},
      {"no line", W(1, 2, 0, nullptr), {2, 0, 0}},
  };
  for (const Row& row : rows) EXPECT_EQ(AgeOf(row.worker), row.want) << row.name;
}

TEST(ProgressSummaryTest, TheNewestLineStandsForItsJob) {
  struct Row {
    std::string name;
    std::vector<api::WorkerStatus> workers;
    int64_t want_attempt;
    int64_t want_rank;
  };
  const std::vector<Row> rows = {
      {"a later step", {W(1, 1, 0, {{"step", 4}}), W(1, 1, 1, {{"step", 5}})}, 1, 1},
      {"equal: the lowest rank", {W(1, 1, 2, {{"step", 5}}), W(1, 1, 1, {{"step", 5}})}, 1, 1},
      {"a re-formed world over the left-out rank's later step",
       {W(1, 1, 0, {{"step", 40}, {"generation", 0}}),
        W(1, 1, 3, {{"step", 12}, {"generation", 1}})},
       1,
       3},
      {"a new attempt over an old one's later step",
       {W(1, 1, 0, {{"step", 40}, {"generation", 2}}), W(1, 2, 1, {{"step", 1}})},
       2,
       1},
      {"a worker without a line is skipped",
       {W(1, 3, 0, nullptr), W(1, 1, 1, {{"step", 1}})},
       1,
       1},
  };
  for (const Row& row : rows) {
    auto newest = NewestProgressPerJob(row.workers);
    ASSERT_EQ(newest.size(), 1u) << row.name;
    EXPECT_EQ(newest.at(1)->key.attempt, row.want_attempt) << row.name;
    EXPECT_EQ(newest.at(1)->key.rank, row.want_rank) << row.name;
  }
}

TEST(ProgressSummaryTest, EachJobHasItsOwn) {
  auto newest = NewestProgressPerJob(
      {W(1, 1, 0, {{"step", 4}}), W(2, 1, 0, {{"step", 9}}), W(1, 1, 1, {{"step", 7}})});
  ASSERT_EQ(newest.size(), 2u);
  EXPECT_EQ(newest.at(1)->key.rank, 1);
  EXPECT_EQ(newest.at(2)->key.rank, 0);
}

}  // namespace
}  // namespace tessera::daemon
