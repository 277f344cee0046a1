// The Store suite over every backend (tests/daemon/store/store_test_fixture.h): the
// metrics history (RecordProgress, ListMetrics, thinning).
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "daemon/store/store.h"
#include "tests/daemon/store/store_test_fixture.h"

namespace tessera::daemon::store_test {
namespace {

// ---- metrics history ----

api::MetricPoint Point(int64_t step, int64_t rank, int64_t attempt = 1, double loss = 1.0) {
  api::MetricPoint p;
  p.step = step;
  p.rank = rank;
  p.attempt = attempt;
  p.ts_ms = 1000 + step;
  p.loss = loss;
  return p;
}

// (step, attempt, rank) of each point, to compare pages at a glance.
std::vector<std::tuple<int64_t, int64_t, int64_t>> Keys(const std::vector<api::MetricPoint>& ps) {
  std::vector<std::tuple<int64_t, int64_t, int64_t>> out;
  for (const api::MetricPoint& p : ps) out.emplace_back(p.step, p.attempt, p.rank);
  return out;
}

std::vector<int64_t> Steps(const std::vector<api::MetricPoint>& ps) {
  std::vector<int64_t> out;
  for (const api::MetricPoint& p : ps) out.push_back(p.step);
  return out;
}

api::MetricsQuery Query(api::JobId job, int64_t limit = 1000) {
  api::MetricsQuery q;
  q.job_id = job;
  q.limit = limit;
  return q;
}

TEST_P(StoreTest, RecordProgressSetsLatestAndKeepsEveryRanksLines) {
  api::Job job = Insert("alice", "j");
  api::MetricPoint full = Point(1, 1);
  full.samples_per_s = 120.5;
  full.compute_s = 0.25;
  full.comm_s = 0.125;
  full.bubble_s = 0.0625;
  full.peak_memory_bytes = int64_t{3} << 30;
  full.predicted_peak_memory_bytes = int64_t{2} << 30;
  ProgressReport beat;
  beat.latest[job.id] = api::Json{{"step", 2}, {"loss", 0.5}};
  beat.points = {{job.id, Point(2, 0)}, {job.id, full}, {job.id, Point(1, 0)}};
  beat.points.push_back({424242, Point(1, 0)});  // an unknown job is skipped
  ASSERT_TRUE(store_->RecordProgress(beat).ok());
  EXPECT_EQ(store_->GetJob(job.id)->progress, (api::Json{{"step", 2}, {"loss", 0.5}}));

  // The same line again (a rank that did not move on between beats) is
  // kept once, as first recorded.
  ProgressReport again;
  api::MetricPoint changed = Point(2, 0);
  changed.loss = 9.0;
  again.points = {{job.id, changed}};
  ASSERT_TRUE(store_->RecordProgress(again).ok());

  Reopen();
  auto page = store_->ListMetrics(Query(job.id));
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  EXPECT_EQ(page->job_id, job.id);
  using K = std::tuple<int64_t, int64_t, int64_t>;
  EXPECT_EQ(Keys(page->points), (std::vector<K>{{1, 1, 0}, {1, 1, 1}, {2, 1, 0}}));
  EXPECT_EQ(page->points[1], full) << "every figure round-trips";
  EXPECT_EQ(page->points[2].loss, 1.0);
  EXPECT_FALSE(page->next_since.has_value());
  EXPECT_TRUE(store_->ListMetrics(Query(424242))->points.empty());
  EXPECT_EQ(store_->ListEvents(job.id, 0, 100)->size(), 1u) << "progress is not an event";
}

TEST_P(StoreTest, HistoryKeepsEveryAttemptOfARepeatedStep) {
  api::Job job = Insert("alice", "j");
  ProgressReport r;
  for (int64_t step = 1; step <= 6; ++step) r.points.push_back({job.id, Point(step, 0, 1)});
  // Attempt 2 resumed from the checkpoint of step 4.
  for (int64_t step = 5; step <= 7; ++step) r.points.push_back({job.id, Point(step, 0, 2)});
  ASSERT_TRUE(store_->RecordProgress(r).ok());
  auto page = store_->ListMetrics(Query(job.id));
  ASSERT_TRUE(page.ok());
  using K = std::tuple<int64_t, int64_t, int64_t>;
  EXPECT_EQ(Keys(page->points), (std::vector<K>{{1, 1, 0},
                                                {2, 1, 0},
                                                {3, 1, 0},
                                                {4, 1, 0},
                                                {5, 1, 0},
                                                {5, 2, 0},
                                                {6, 1, 0},
                                                {6, 2, 0},
                                                {7, 2, 0}}));
  // A live view polls the current attempt after the step its ranks last reported.
  api::MetricsQuery current = Query(job.id);
  current.attempt = 2;
  current.since = 5;
  EXPECT_EQ(Keys(store_->ListMetrics(current)->points), (std::vector<K>{{6, 2, 0}, {7, 2, 0}}));
}

TEST_P(StoreTest, HistoryKeepsRecentStepsAndEvenlySpacedOlderOnes) {
  // recent_steps 20, older_points 8; one line per beat, as heartbeats bring them.
  api::Job job = Insert("alice", "j");
  for (int64_t step = 1; step <= 200; ++step) {
    ProgressReport beat;
    beat.points = {{job.id, Point(step, 0)}, {job.id, Point(step, 1)}};
    ASSERT_TRUE(store_->RecordProgress(beat).ok());
  }
  std::vector<int64_t> want = {32, 64, 96, 128, 160};  // stride 32: at most 8 before step 181
  for (int64_t step = 181; step <= 200; ++step) want.push_back(step);
  for (int64_t rank : {0, 1}) {
    api::MetricsQuery q = Query(job.id);
    q.rank = rank;
    auto page = store_->ListMetrics(q);
    ASSERT_TRUE(page.ok());
    EXPECT_EQ(Steps(page->points), want) << "rank " << rank;
  }
  // The same history written in a few large batches thins the same way.
  api::Job other = Insert("alice", "k");
  for (int64_t from = 1; from <= 200; from += 50) {
    ProgressReport batch;
    for (int64_t step = from; step < from + 50; ++step)
      batch.points.push_back({other.id, Point(step, 0)});
    ASSERT_TRUE(store_->RecordProgress(batch).ok());
  }
  EXPECT_EQ(Steps(store_->ListMetrics(Query(other.id))->points), want);
  // Late lines of an older step follow the stride too.
  ProgressReport late;
  late.points = {{other.id, Point(100, 0, 2)}, {other.id, Point(96, 0, 2)}};
  ASSERT_TRUE(store_->RecordProgress(late).ok());
  auto page = store_->ListMetrics(Query(other.id));
  using K = std::tuple<int64_t, int64_t, int64_t>;
  EXPECT_EQ(Keys(page->points)[2], (K{96, 1, 0}));
  EXPECT_EQ(Keys(page->points)[3], (K{96, 2, 0}));
  EXPECT_EQ(page->points.size(), want.size() + 1);
}

TEST_P(StoreTest, HistoryPagesBySinceWithoutSplittingAStep) {
  api::Job job = Insert("alice", "j");
  ProgressReport r;
  for (int64_t step = 1; step <= 5; ++step) {
    for (int64_t rank = 0; rank < 3; ++rank) r.points.push_back({job.id, Point(step, rank)});
  }
  ASSERT_TRUE(store_->RecordProgress(r).ok());

  // limit 4: the fourth point would start step 2, so a page holds one step.
  std::vector<int64_t> seen;
  std::optional<int64_t> since;
  for (int pages = 0; pages < 10; ++pages) {
    api::MetricsQuery q = Query(job.id, 4);
    q.since = since;
    auto page = store_->ListMetrics(q);
    ASSERT_TRUE(page.ok());
    ASSERT_FALSE(page->points.empty());
    EXPECT_EQ(page->points.size(), 3u);
    for (const api::MetricPoint& p : page->points) EXPECT_EQ(p.step, page->points[0].step);
    seen.push_back(page->points[0].step);
    if (!page->next_since) break;
    EXPECT_EQ(*page->next_since, page->points.back().step);
    since = page->next_since;
  }
  EXPECT_EQ(seen, (std::vector<int64_t>{1, 2, 3, 4, 5}));

  // A step with more points than the limit comes whole.
  auto whole = store_->ListMetrics(Query(job.id, 2));
  EXPECT_EQ(Steps(whole->points), (std::vector<int64_t>{1, 1, 1}));
  EXPECT_EQ(whole->next_since, 1);
  // One rank: plain pages of `limit` steps; the last page says nothing follows.
  api::MetricsQuery one = Query(job.id, 2);
  one.rank = 1;
  one.since = 2;
  auto mid = store_->ListMetrics(one);
  EXPECT_EQ(Steps(mid->points), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(mid->next_since, 4);
  one.since = 4;
  auto last = store_->ListMetrics(one);
  EXPECT_EQ(Steps(last->points), (std::vector<int64_t>{5}));
  EXPECT_FALSE(last->next_since.has_value());
  one.since = 5;
  EXPECT_TRUE(store_->ListMetrics(one)->points.empty());
}

TEST_P(StoreTest, RecordProgressIsOneWriteAndRefusesNegativeSteps) {
  api::Job job = Insert("alice", "j");
  ProgressReport beat;
  beat.latest[job.id] = api::Json{{"step", 1}};
  for (int64_t rank = 0; rank < 8; ++rank) beat.points.push_back({job.id, Point(1, rank)});
  const StoreStats before = store_->Stats();
  ASSERT_TRUE(store_->RecordProgress(beat).ok());
  EXPECT_EQ(store_->Stats().writes, before.writes + 1) << "one beat, one write";

  ProgressReport bad;
  bad.points = {{job.id, Point(2, 0)}, {job.id, Point(-1, 0)}};
  Status s = store_->RecordProgress(bad);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.field(), "points[1].step");
  EXPECT_EQ(store_->ListMetrics(Query(job.id))->points.size(), 8u) << "nothing of it written";
}

}  // namespace
}  // namespace tessera::daemon::store_test
