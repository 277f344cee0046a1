// One suite for every Store backend: SQLite on a temporary file, memory, and
// the fault-injecting wrapper with no fault armed.
#include "daemon/store.h"

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "daemon/faulty_store.h"
#include "daemon/memory_store.h"
#include "daemon/sqlite_store.h"
#include "daemon/token_crypto.h"
#include "tests/daemon/temp_dir.h"

namespace tessera::daemon {
namespace {

using api::JobState;

enum class Backend { kSqlite, kMemory, kFaultyMemory };

std::string BackendName(const ::testing::TestParamInfo<Backend>& info) {
  switch (info.param) {
    case Backend::kSqlite:
      return "Sqlite";
    case Backend::kMemory:
      return "Memory";
    case Backend::kFaultyMemory:
      return "FaultyOverMemory";
  }
  return "Unknown";
}

api::JobSpec Spec(std::string name, int64_t max_attempts = 3) {
  api::JobSpec s;
  s.name = std::move(name);
  s.entrypoint = "builtin:colorize-unet";
  s.dataset = "/srv/archive/scans";
  s.global_batch = 64;
  s.steps = 100;
  s.max_attempts = max_attempts;
  s.args = {"--lr", "0.001"};
  s.env = {{"FOO", "bar"}};
  return s;
}

api::Device Dev(int64_t index, bool emulated) {
  api::Device d;
  d.index = index;
  d.name = emulated ? "emulated-a100" : "cpu";
  d.uuid = "uuid-" + std::to_string(index);
  d.type = emulated ? "cuda" : "cpu";
  d.memory_bytes = 80'000'000'000;
  d.relative_speed = 0.5;
  d.emulated = emulated;
  return d;
}

// A small metrics retention, so thinning shows after a few hundred steps.
constexpr MetricsRetention kRetention{.recent_steps = 20, .older_points = 8};

SqliteStoreOptions SqliteOptions() {
  SqliteStoreOptions o;
  o.metrics_retention = kRetention;
  return o;
}

class StoreTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    switch (GetParam()) {
      case Backend::kSqlite: {
        auto s = SqliteStore::Open(dir_.File("tessera.db"), SqliteOptions());
        ASSERT_TRUE(s.ok()) << s.status().ToString();
        owned_ = std::move(s).value();
        store_ = owned_.get();
        break;
      }
      case Backend::kMemory:
        owned_ = std::make_unique<MemoryStore>(kRetention);
        store_ = owned_.get();
        break;
      case Backend::kFaultyMemory:
        owned_ = std::make_unique<MemoryStore>(kRetention);
        faulty_ = std::make_unique<FaultyStore>(owned_.get());
        store_ = faulty_.get();
        break;
    }
  }

  // SQLite: closes the file and opens it again (what a restarted tesserad
  // reads); the in-memory backends keep what they hold.
  void Reopen() {
    if (GetParam() != Backend::kSqlite) return;
    owned_.reset();
    auto s = SqliteStore::Open(dir_.File("tessera.db"), SqliteOptions());
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    owned_ = std::move(s).value();
    store_ = owned_.get();
  }

  api::Job Insert(const std::string& owner, const std::string& name, int64_t now = 1000) {
    auto job = store_->InsertJob(NewJob{owner, Spec(name), now, "submitted"});
    EXPECT_TRUE(job.ok()) << job.status().ToString();
    return job.ok() ? *job : api::Job{};
  }

  Result<api::Job> Move(api::JobId id, JobState from, JobState to, std::string reason,
                        int64_t attempt = 0, std::optional<api::Json> plan = std::nullopt) {
    return store_->TransitionJob(
        JobTransition{id, from, to, std::move(reason), attempt, std::move(plan), 2000});
  }

  testing::TempDir dir_;
  std::unique_ptr<Store> owned_;
  std::unique_ptr<FaultyStore> faulty_;
  Store* store_ = nullptr;
};

TEST_P(StoreTest, IsHealthyWhenOpen) { EXPECT_TRUE(store_->Health().ok()); }

TEST_P(StoreTest, InsertJobAssignsIncreasingIdsAndRoundTrips) {
  api::Job a = Insert("alice", "first", 1234);
  api::Job b = Insert("alice", "second");
  EXPECT_GT(a.id, 0);
  EXPECT_GT(b.id, a.id);
  EXPECT_EQ(a.state, JobState::kPending);
  auto got = store_->GetJob(a.id);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->owner, "alice");
  EXPECT_EQ(got->spec, Spec("first"));
  EXPECT_EQ(got->state, JobState::kPending);
  EXPECT_EQ(got->attempt, 0);
  EXPECT_EQ(got->created_ms, 1234);
  EXPECT_EQ(got->updated_ms, 1234);
  EXPECT_EQ(got->reason, "submitted");
  EXPECT_TRUE(got->plan.is_null());
  EXPECT_TRUE(got->progress.is_null());
}

TEST_P(StoreTest, InsertJobRefusesEmptyOwner) {
  auto job = store_->InsertJob(NewJob{"", Spec("x"), 1, "submitted"});
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(job.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(job.status().field(), "owner");
}

TEST_P(StoreTest, GetMissingJobIsNotFound) {
  EXPECT_EQ(store_->GetJob(4242).status().code(), StatusCode::kNotFound);
}

TEST_P(StoreTest, InsertJobWritesSubmissionEvent) {
  api::Job job = Insert("alice", "j", 777);
  auto events = store_->ListEvents(job.id, 0, 100);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 1u);
  EXPECT_EQ((*events)[0].job_id, job.id);
  EXPECT_EQ((*events)[0].from_state, "");
  EXPECT_EQ((*events)[0].to_state, "pending");
  EXPECT_EQ((*events)[0].reason, "submitted");
  EXPECT_EQ((*events)[0].ts_ms, 777);
}

TEST_P(StoreTest, TransitionJobChangesStateAndAppendsEvent) {
  api::Job job = Insert("alice", "j");
  api::Json plan = {{"layout", "data"}, {"dp", 2}};
  auto moved = Move(job.id, JobState::kPending, JobState::kPlanned, "planned by test", 0, plan);
  ASSERT_TRUE(moved.ok()) << moved.status().ToString();
  EXPECT_EQ(moved->state, JobState::kPlanned);
  EXPECT_EQ(moved->plan, plan);
  EXPECT_EQ(moved->reason, "planned by test");
  EXPECT_EQ(moved->updated_ms, 2000);

  auto started = Move(job.id, JobState::kPlanned, JobState::kStarting, "launch", 1);
  ASSERT_TRUE(started.ok());
  EXPECT_EQ(started->attempt, 1);
  EXPECT_EQ(started->plan, plan) << "plan kept when the transition carries none";

  auto events = store_->ListEvents(job.id, 0, 100);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 3u);
  EXPECT_EQ((*events)[1].from_state, "pending");
  EXPECT_EQ((*events)[1].to_state, "planned");
  EXPECT_EQ((*events)[1].reason, "planned by test");
  EXPECT_EQ((*events)[2].from_state, "planned");
  EXPECT_EQ((*events)[2].to_state, "starting");
  EXPECT_EQ((*events)[2].attempt, 1);
  EXPECT_EQ((*events)[2].ts_ms, 2000);
}

TEST_P(StoreTest, TransitionJobIsCompareAndSet) {
  api::Job job = Insert("alice", "j");
  auto refused = Move(job.id, JobState::kRunning, JobState::kSucceeded, "wrong expectation");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("pending"), std::string::npos);
  // Neither the state nor the event log changed.
  EXPECT_EQ(store_->GetJob(job.id)->state, JobState::kPending);
  EXPECT_EQ(store_->ListEvents(job.id, 0, 100)->size(), 1u);
  // Two racers expecting the same state: exactly one wins.
  EXPECT_TRUE(Move(job.id, JobState::kPending, JobState::kCancelled, "first").ok());
  EXPECT_EQ(Move(job.id, JobState::kPending, JobState::kPlanned, "second").status().code(),
            StatusCode::kFailedPrecondition);
}

TEST_P(StoreTest, TransitionMissingJobIsNotFound) {
  EXPECT_EQ(Move(999, JobState::kPending, JobState::kPlanned, "x").status().code(),
            StatusCode::kNotFound);
}

TEST_P(StoreTest, ListJobsPagesWithCursorAndFilters) {
  std::vector<api::JobId> alice;
  for (int i = 0; i < 5; ++i) {
    alice.push_back(Insert("alice", "a" + std::to_string(i)).id);
    Insert("bob", "b" + std::to_string(i));
  }
  ASSERT_TRUE(Move(alice[1], JobState::kPending, JobState::kCancelled, "c").ok());

  api::JobQuery q;
  q.owner = "alice";
  q.limit = 2;
  std::vector<api::JobId> seen;
  int pages = 0;
  while (true) {
    auto page = store_->ListJobs(q);
    ASSERT_TRUE(page.ok()) << page.status().ToString();
    ++pages;
    for (const api::Job& j : page->jobs) {
      EXPECT_EQ(j.owner, "alice");
      seen.push_back(j.id);
    }
    if (!page->next_after) break;
    EXPECT_EQ(*page->next_after, page->jobs.back().id);
    q.after = *page->next_after;
  }
  EXPECT_EQ(seen, alice);
  EXPECT_EQ(pages, 3);

  api::JobQuery by_state;
  by_state.state = JobState::kCancelled;
  auto cancelled = store_->ListJobs(by_state);
  ASSERT_TRUE(cancelled.ok());
  ASSERT_EQ(cancelled->jobs.size(), 1u);
  EXPECT_EQ(cancelled->jobs[0].id, alice[1]);
  EXPECT_FALSE(cancelled->next_after);

  api::JobQuery all;
  all.limit = 100;
  EXPECT_EQ(store_->ListJobs(all)->jobs.size(), 10u);
  api::JobQuery exact;
  exact.limit = 10;
  auto page = store_->ListJobs(exact);
  EXPECT_EQ(page->jobs.size(), 10u);
  EXPECT_FALSE(page->next_after) << "a full last page has no cursor";
}

TEST_P(StoreTest, ListEventsPagesAndSeparatesJobs) {
  api::Job a = Insert("alice", "a");
  api::Job b = Insert("alice", "b");
  ASSERT_TRUE(Move(a.id, JobState::kPending, JobState::kPlanned, "1").ok());
  ASSERT_TRUE(Move(b.id, JobState::kPending, JobState::kPlanned, "x").ok());
  ASSERT_TRUE(Move(a.id, JobState::kPlanned, JobState::kStarting, "2", 1).ok());
  ASSERT_TRUE(Move(a.id, JobState::kStarting, JobState::kRunning, "3", 1).ok());

  auto first = store_->ListEvents(a.id, 0, 2);
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->size(), 2u);
  EXPECT_EQ((*first)[0].reason, "submitted");
  EXPECT_EQ((*first)[1].reason, "1");
  auto rest = store_->ListEvents(a.id, first->back().id, 100);
  ASSERT_TRUE(rest.ok());
  ASSERT_EQ(rest->size(), 2u);
  EXPECT_EQ((*rest)[0].reason, "2");
  EXPECT_EQ((*rest)[1].reason, "3");
  EXPECT_LT((*first)[1].id, (*rest)[0].id);
  EXPECT_EQ(store_->ListEvents(b.id, 0, 100)->size(), 2u);
  EXPECT_TRUE(store_->ListEvents(12345, 0, 100)->empty());
}

TEST_P(StoreTest, SetJobProgressStoresLatest) {
  api::Job job = Insert("alice", "j");
  api::Json p1 = {{"step", 10}};
  api::Json p2 = {{"step", 20}, {"loss", 0.5}};
  ASSERT_TRUE(store_->SetJobProgress(job.id, p1).ok());
  ASSERT_TRUE(store_->SetJobProgress(job.id, p2).ok());
  EXPECT_EQ(store_->GetJob(job.id)->progress, p2);
  EXPECT_EQ(store_->SetJobProgress(999, p1).code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->ListEvents(job.id, 0, 100)->size(), 1u) << "progress is not an event";
}

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

TEST_P(StoreTest, CountJobsByStateListsEveryState) {
  api::Job a = Insert("alice", "a");
  Insert("alice", "b");
  Insert("bob", "c");
  ASSERT_TRUE(Move(a.id, JobState::kPending, JobState::kPlanned, "p").ok());
  auto counts = store_->CountJobsByState();
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->size(), 8u);
  EXPECT_EQ(counts->at(JobState::kPending), 2);
  EXPECT_EQ(counts->at(JobState::kPlanned), 1);
  EXPECT_EQ(counts->at(JobState::kRunning), 0);
}

TEST_P(StoreTest, AttemptsCrud) {
  api::Job job = Insert("alice", "j");
  api::Json plan = {{"layout", "pipeline"}};
  JobAttempt a1{job.id, 1, plan, 100, std::nullopt, ""};
  JobAttempt a2{job.id, 2, api::Json(), 200, std::nullopt, ""};
  ASSERT_TRUE(store_->InsertAttempt(a2).ok());
  ASSERT_TRUE(store_->InsertAttempt(a1).ok());
  Status dup = store_->InsertAttempt(a1);
  EXPECT_EQ(dup.code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(store_->InsertAttempt(JobAttempt{999, 1, {}, 1, {}, ""}).code(), StatusCode::kNotFound);

  auto got = store_->GetAttempt(job.id, 1);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, a1);
  auto list = store_->ListAttempts(job.id);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].attempt, 1);
  EXPECT_EQ((*list)[1].attempt, 2);

  ASSERT_TRUE(store_->FinishAttempt(job.id, 1, 150, "rank 2 exited 137").ok());
  got = store_->GetAttempt(job.id, 1);
  EXPECT_EQ(got->ended_ms, 150);
  EXPECT_EQ(got->result, "rank 2 exited 137");
  EXPECT_EQ(store_->FinishAttempt(job.id, 9, 1, "x").code(), StatusCode::kNotFound);

  ASSERT_TRUE(store_->DeleteAttempt(job.id, 2).ok());
  EXPECT_EQ(store_->GetAttempt(job.id, 2).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->DeleteAttempt(job.id, 2).code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->ListAttempts(job.id)->size(), 1u);
}

TEST_P(StoreTest, UpsertNodeReplacesDevicesAndKeepsEmulatedFlag) {
  api::Node n;
  n.name = "boxA";
  n.address = "10.0.0.1";
  n.last_heartbeat_ms = 500;
  n.devices = {Dev(1, true), Dev(0, false)};
  ASSERT_TRUE(store_->UpsertNode(n).ok());
  auto got = store_->GetNode("boxA");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->address, "10.0.0.1");
  EXPECT_EQ(got->health, "healthy");
  EXPECT_EQ(got->last_heartbeat_ms, 500);
  ASSERT_EQ(got->devices.size(), 2u);
  EXPECT_EQ(got->devices[0].index, 0);
  EXPECT_FALSE(got->devices[0].emulated);
  EXPECT_EQ(got->devices[1].index, 1);
  EXPECT_TRUE(got->devices[1].emulated);
  EXPECT_EQ(got->devices[1].node, "boxA");
  EXPECT_EQ(got->devices[1].memory_bytes, 80'000'000'000);
  EXPECT_DOUBLE_EQ(got->devices[1].relative_speed, 0.5);

  n.address = "10.0.0.2";
  n.last_heartbeat_ms = 900;
  n.devices = {Dev(3, true)};
  ASSERT_TRUE(store_->UpsertNode(n).ok());
  got = store_->GetNode("boxA");
  EXPECT_EQ(got->address, "10.0.0.2");
  EXPECT_EQ(got->last_heartbeat_ms, 900);
  ASSERT_EQ(got->devices.size(), 1u);
  EXPECT_EQ(got->devices[0].index, 3);

  api::Node other;
  other.name = "aardvark";
  ASSERT_TRUE(store_->UpsertNode(other).ok());
  auto all = store_->ListNodes();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].name, "aardvark");
  EXPECT_EQ((*all)[1].name, "boxA");
  EXPECT_EQ((*all)[1].devices.size(), 1u);
  EXPECT_EQ(store_->GetNode("nope").status().code(), StatusCode::kNotFound);
}

TEST_P(StoreTest, UpsertNodeKeepsDeviceLinks) {
  api::Node n;
  n.name = "boxA";
  n.devices = {Dev(0, false), Dev(1, false), Dev(2, false)};
  n.links = {{0, 1, "nvlink", 4, "internal"}, {0, 2, "system", 0, "system"}};
  n.cpu_cores = 64;
  ASSERT_TRUE(store_->UpsertNode(n).ok());
  auto got = store_->GetNode("boxA");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->links, n.links);
  EXPECT_EQ(got->cpu_cores, 64);
  EXPECT_EQ(store_->ListNodes()->at(0).links, n.links);
  n.links = {};
  ASSERT_TRUE(store_->UpsertNode(n).ok());
  EXPECT_TRUE(store_->GetNode("boxA")->links.empty()) << "a heartbeat replaces the links";

  struct Case {
    api::DeviceLink link;
    std::string why;
  } bad[] = {{{0, 7, "pcie", 0, ""}, "unknown device"},
             {{1, 0, "pcie", 0, ""}, "a > b"},
             {{1, 1, "pcie", 0, ""}, "a == b"}};
  for (const Case& c : bad) {
    n.links = {c.link};
    Status s = store_->UpsertNode(n);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.why;
    EXPECT_EQ(s.field(), "links[0]") << c.why;
  }
  n.links = {{0, 1, "pcie", 0, ""}, {0, 1, "nvlink", 2, ""}};
  EXPECT_EQ(store_->UpsertNode(n).field(), "links[1]") << "duplicate pair";
}

TEST_P(StoreTest, NodeNetworkLinkSurvivesUpsertAndReopen) {
  api::Node n;
  n.name = "boxA";
  n.devices = {Dev(0, true)};
  n.network_bandwidth_bytes_per_s = 2.5e6;
  n.network_latency_s = 0.005;
  ASSERT_TRUE(store_->UpsertNode(n).ok());
  auto got = store_->GetNode("boxA");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_DOUBLE_EQ(got->network_bandwidth_bytes_per_s, 2.5e6);
  EXPECT_DOUBLE_EQ(got->network_latency_s, 0.005);
  EXPECT_DOUBLE_EQ(store_->ListNodes()->at(0).network_bandwidth_bytes_per_s, 2.5e6);

  // A second node that reports no link; the first one's link outlives a reopen.
  api::Node unknown = n;
  unknown.name = "boxB";
  unknown.network_bandwidth_bytes_per_s = 0;
  unknown.network_latency_s = 0;
  ASSERT_TRUE(store_->UpsertNode(unknown).ok());
  Reopen();
  got = store_->GetNode("boxA");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_DOUBLE_EQ(got->network_bandwidth_bytes_per_s, 2.5e6);
  EXPECT_DOUBLE_EQ(got->network_latency_s, 0.005);
  EXPECT_EQ(store_->GetNode("boxB")->network_bandwidth_bytes_per_s, 0);

  // The next heartbeat's link replaces it.
  n.network_bandwidth_bytes_per_s = 125e6;
  n.network_latency_s = 50e-6;
  ASSERT_TRUE(store_->UpsertNode(n).ok());
  EXPECT_DOUBLE_EQ(store_->GetNode("boxA")->network_bandwidth_bytes_per_s, 125e6);
  EXPECT_DOUBLE_EQ(store_->GetNode("boxA")->network_latency_s, 50e-6);
}

TEST_P(StoreTest, UpsertNodeRefusesBadInput) {
  api::Node unnamed;
  EXPECT_EQ(store_->UpsertNode(unnamed).code(), StatusCode::kInvalidArgument);
  api::Node dup;
  dup.name = "n";
  dup.devices = {Dev(0, true), Dev(0, true)};
  Status s = store_->UpsertNode(dup);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.field(), "devices[1].index");
  api::Node sick;
  sick.name = "n";
  sick.health = "sick";
  EXPECT_EQ(store_->UpsertNode(sick).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->GetNode("n").status().code(), StatusCode::kNotFound);
}

TEST_P(StoreTest, SetNodeHealth) {
  api::Node n;
  n.name = "boxB";
  n.devices = {Dev(0, true)};
  ASSERT_TRUE(store_->UpsertNode(n).ok());
  ASSERT_TRUE(store_->SetNodeHealth("boxB", "dead").ok());
  EXPECT_EQ(store_->GetNode("boxB")->health, "dead");
  EXPECT_EQ(store_->GetNode("boxB")->devices.size(), 1u);
  EXPECT_EQ(store_->SetNodeHealth("boxB", "zombie").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->SetNodeHealth("nope", "dead").code(), StatusCode::kNotFound);
}

// Tokens are rows: the store keeps and returns them; whether a presented
// token is valid is daemon/auth/api_tokens.h's (tests/daemon/auth/).
TEST_P(StoreTest, CreateTokenStoresTheDigestNotTheSecret) {
  auto issued = store_->CreateToken("alice", api::Role::kAdmin, 42);
  ASSERT_TRUE(issued.ok()) << issued.status().ToString();
  EXPECT_TRUE(issued->plaintext.starts_with("tsr_" + issued->info.id + "_"));
  EXPECT_EQ(issued->info, (TokenInfo{issued->info.id, "alice", api::Role::kAdmin, 42, {}}));
  auto row = store_->GetToken(issued->info.id);
  ASSERT_TRUE(row.ok()) << row.status().ToString();
  EXPECT_EQ(row->info, issued->info);
  const std::string secret = issued->plaintext.substr(issued->plaintext.rfind('_') + 1);
  EXPECT_FALSE(row->secret.salt.empty());
  EXPECT_EQ(row->secret.hash, *SaltedSha256(row->secret.salt, secret));
  EXPECT_EQ(store_->GetToken("feedfeedfeedfeed").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->CreateToken("", api::Role::kUser, 1).status().code(),
            StatusCode::kInvalidArgument);
}

TEST_P(StoreTest, InsertTokenKeepsTheRowAsGiven) {
  const TokenRecord revoked{TokenInfo{"00000000000000aa", "carol", api::Role::kUser, 5, 6},
                            SecretDigest{"salt", "hash"}};
  ASSERT_TRUE(store_->InsertToken(revoked).ok());
  EXPECT_EQ(*store_->GetToken("00000000000000aa"), revoked) << "a revoked row is still a row";
  Reopen();
  EXPECT_EQ(*store_->GetToken("00000000000000aa"), revoked);

  struct Row {
    const char* what;
    TokenRecord record;
    StatusCode want;
    std::string field;
  };
  const Row rows[] = {
      {"id in use", revoked, StatusCode::kAlreadyExists, ""},
      {"no id", TokenRecord{TokenInfo{"", "carol", api::Role::kUser, 1, {}}, {}},
       StatusCode::kInvalidArgument, "id"},
      {"no user", TokenRecord{TokenInfo{"00000000000000bb", "", api::Role::kUser, 1, {}}, {}},
       StatusCode::kInvalidArgument, "user"},
  };
  for (const Row& row : rows) {
    Status st = store_->InsertToken(row.record);
    EXPECT_EQ(st.code(), row.want) << row.what << ": " << st.ToString();
    if (!row.field.empty()) {
      EXPECT_EQ(st.field(), row.field) << row.what;
    }
  }
  EXPECT_EQ(store_->ListTokens()->size(), 1u) << "refused rows are not written";
}

TEST_P(StoreTest, RevokeTokenKeepsTheFirstRevocationTime) {
  auto t1 = store_->CreateToken("bob", api::Role::kUser, 1);
  auto t2 = store_->CreateToken("bob", api::Role::kUser, 2);
  ASSERT_TRUE(t1.ok() && t2.ok());
  ASSERT_TRUE(store_->RevokeToken(t1->info.id, 10).ok());
  EXPECT_EQ(store_->GetToken(t1->info.id)->info.revoked_ms, 10);
  EXPECT_FALSE(store_->GetToken(t2->info.id)->info.revoked_ms) << "other rows are unchanged";
  EXPECT_TRUE(store_->RevokeToken(t1->info.id, 20).ok()) << "revoking twice is fine";
  EXPECT_EQ(store_->RevokeToken("feedfeedfeedfeed", 1).code(), StatusCode::kNotFound);

  auto list = store_->ListTokens();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 2u);
  for (const TokenInfo& t : *list) {
    if (t.id == t1->info.id) {
      EXPECT_EQ(t.revoked_ms, 10) << "first revocation time kept";
    } else {
      EXPECT_FALSE(t.revoked_ms);
    }
  }
}

TEST_P(StoreTest, ListTokensOrderedByUserWithoutSecrets) {
  auto z = store_->CreateToken("zoe", api::Role::kUser, 1);
  auto a = store_->CreateToken("adam", api::Role::kAdmin, 2);
  ASSERT_TRUE(z.ok() && a.ok());
  auto list = store_->ListTokens();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0], a->info);
  EXPECT_EQ((*list)[1], z->info);
}

TEST_P(StoreTest, EntrypointsAreSeededAndEditable) {
  auto list = store_->ListEntrypoints();
  ASSERT_TRUE(list.ok());
  std::vector<std::string> names;
  for (const api::Entrypoint& e : *list) names.push_back(e.name);
  EXPECT_EQ(names, (std::vector<std::string>{"builtin:classifier-resnet", "builtin:colorize-unet",
                                             "builtin:denoiser-dncnn", "builtin:gan-pix2pix"}));

  api::Entrypoint cmd{"cmd:my-train", "/opt/lab/train.py", "lab script"};
  ASSERT_TRUE(store_->PutEntrypoint(cmd).ok());
  auto got = store_->GetEntrypoint("cmd:my-train");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->command, "/opt/lab/train.py");
  EXPECT_EQ(got->description, "lab script");
  cmd.description = "updated";
  ASSERT_TRUE(store_->PutEntrypoint(cmd).ok());
  EXPECT_EQ(store_->GetEntrypoint("cmd:my-train")->description, "updated");
  EXPECT_EQ(store_->ListEntrypoints()->size(), 5u);

  EXPECT_EQ(store_->PutEntrypoint({"cmd:rel", "train.py", ""}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->PutEntrypoint({"shell:rm", "/bin/rm", ""}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->PutEntrypoint({"builtin:x", "/bin/x", ""}).code(),
            StatusCode::kInvalidArgument);

  ASSERT_TRUE(store_->DeleteEntrypoint("cmd:my-train").ok());
  EXPECT_EQ(store_->GetEntrypoint("cmd:my-train").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->DeleteEntrypoint("cmd:my-train").code(), StatusCode::kNotFound);
}

TEST_P(StoreTest, AgentJoinTokenIsOneDigestRow) {
  EXPECT_EQ(store_->GetAgentJoinToken().status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->SetAgentJoinToken("").code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(store_->SetAgentJoinToken("join-me-please").ok());
  auto digest = store_->GetAgentJoinToken();
  ASSERT_TRUE(digest.ok()) << digest.status().ToString();
  EXPECT_EQ(digest->hash, *SaltedSha256(digest->salt, "join-me-please"));
  const SecretDigest rotated{"other-salt", "other-hash"};
  ASSERT_TRUE(store_->PutAgentJoinToken(rotated).ok());
  EXPECT_EQ(*store_->GetAgentJoinToken(), rotated) << "one row, replaced";
  Reopen();
  EXPECT_EQ(*store_->GetAgentJoinToken(), rotated);
}

// A node credential row with a made-up digest (the store does not look at it).
NodeCredentialRecord Credential(std::string node, std::string id, int64_t enrolled_ms) {
  NodeCredentialRecord r;
  r.enrolment.node = std::move(node);
  r.enrolment.credential_id = std::move(id);
  r.enrolment.enrolled_ms = enrolled_ms;
  r.secret = SecretDigest{"salt-" + r.enrolment.credential_id, "hash-" + r.enrolment.credential_id};
  return r;
}

// Node credentials are rows written by compare-and-set; the enrolment rules
// and the credential check are daemon/auth/node_credentials.h's. Each row is
// one call, in order, and the code it must give.
TEST_P(StoreTest, NodeCredentialRowsAreWrittenByCompareAndSet) {
  const NodeCredentialRecord a1 = Credential("boxa", "00000000000000a1", 1000);
  const NodeCredentialRecord a2 = Credential("boxa", "00000000000000a2", 1100);
  NodeCredentialRecord a2_used = a2;
  a2_used.enrolment.first_used_ms = 2000;
  const NodeCredentialRecord b1 = Credential("boxb", "00000000000000b1", 1200);
  const NodeCredentialRecord b_taking_a2s_id = Credential("boxb", "00000000000000a2", 1300);
  using Expected = std::optional<api::NodeEnrolment>;
  struct Row {
    const char* what;
    std::function<Status()> call;
    StatusCode want;
  };
  const Row rows[] = {
      {"put a1, none expected", [&] { return store_->PutNodeCredential(a1, Expected()); },
       StatusCode::kOk},
      {"put a2, none expected but a1 is there",
       [&] { return store_->PutNodeCredential(a2, Expected()); }, StatusCode::kFailedPrecondition},
      {"put a2 over a1", [&] { return store_->PutNodeCredential(a2, a1.enrolment); },
       StatusCode::kOk},
      {"put over a stale a1", [&] { return store_->PutNodeCredential(a1, a1.enrolment); },
       StatusCode::kFailedPrecondition},
      {"mark a2 used", [&] { return store_->PutNodeCredential(a2_used, a2.enrolment); },
       StatusCode::kOk},
      {"put b1", [&] { return store_->PutNodeCredential(b1, Expected()); }, StatusCode::kOk},
      {"an id another node holds",
       [&] { return store_->PutNodeCredential(b_taking_a2s_id, b1.enrolment); },
       StatusCode::kAlreadyExists},
      {"no node name",
       [&] { return store_->PutNodeCredential(Credential("", "00000000000000c1", 1), Expected()); },
       StatusCode::kInvalidArgument},
      {"no credential id",
       [&] { return store_->PutNodeCredential(Credential("boxc", "", 1), Expected()); },
       StatusCode::kInvalidArgument},
      {"revoke nobody", [&] { return store_->RevokeNode("nobody", 3000); }, StatusCode::kNotFound},
      {"revoke boxa", [&] { return store_->RevokeNode("boxa", 3000); }, StatusCode::kOk},
      {"revoke boxa again", [&] { return store_->RevokeNode("boxa", 3500); }, StatusCode::kOk},
      {"delete a stale boxa", [&] { return store_->DeleteNodeCredential(a2_used.enrolment); },
       StatusCode::kFailedPrecondition},
      {"delete nobody",
       [&] { return store_->DeleteNodeCredential(Credential("nobody", "x", 1).enrolment); },
       StatusCode::kNotFound},
  };
  for (const Row& row : rows) {
    Status st = row.call();
    EXPECT_EQ(st.code(), row.want) << row.what << ": " << st.ToString();
  }

  Reopen();
  NodeCredentialRecord a_now = a2_used;
  a_now.enrolment.revoked_ms = 3000;  // the first revocation time
  EXPECT_EQ(*store_->GetNodeCredential("boxa"), a_now);
  EXPECT_EQ(*store_->FindNodeCredential("00000000000000a2"), a_now);
  EXPECT_EQ(*store_->FindNodeCredential("00000000000000b1"), b1);
  EXPECT_EQ(store_->FindNodeCredential("00000000000000a1").status().code(), StatusCode::kNotFound)
      << "a replaced credential is gone";
  EXPECT_EQ(store_->GetNodeCredential("boxc").status().code(), StatusCode::kNotFound);
  auto list = store_->ListNodeEnrolments();
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_EQ(*list, (std::vector<api::NodeEnrolment>{a_now.enrolment, b1.enrolment}))
      << "by node name";

  ASSERT_TRUE(store_->DeleteNodeCredential(a_now.enrolment).ok());
  EXPECT_EQ(store_->GetNodeCredential("boxa").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(store_->PutNodeCredential(a1, Expected()).ok()) << "the name is free again";
}

// ---- inference chunks ----

std::vector<std::vector<std::string>> ChunksOf(int chunks, int per_chunk) {
  std::vector<std::vector<std::string>> out(static_cast<size_t>(chunks));
  for (int c = 0; c < chunks; ++c) {
    for (int i = 0; i < per_chunk; ++i) {
      out[static_cast<size_t>(c)].push_back("img/" + std::to_string(c * per_chunk + i) + ".png");
    }
  }
  return out;
}

ChunkLeaseRequest LeaseBy(api::JobId job, int64_t attempt, int64_t rank, int64_t max, int64_t now,
                          std::vector<int64_t> completed = {}) {
  return ChunkLeaseRequest{job, attempt, rank, std::move(completed), max, now, now + 1000};
}

std::vector<int64_t> Numbers(const std::vector<InferChunk>& chunks) {
  std::vector<int64_t> out;
  for (const InferChunk& c : chunks) out.push_back(c.chunk);
  return out;
}

TEST_P(StoreTest, InsertChunksOnceAndCount) {
  api::Job job = Insert("alice", "infer");
  ASSERT_TRUE(store_->InsertChunks(job.id, ChunksOf(3, 4)).ok());
  EXPECT_EQ(store_->InsertChunks(job.id, ChunksOf(1, 1)).code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(store_->InsertChunks(999, ChunksOf(1, 1)).code(), StatusCode::kNotFound);
  EXPECT_EQ(*store_->CountChunks(job.id), (ChunkCounts{3, 0, 0, 12, 0}));
  EXPECT_EQ(*store_->CountChunks(999), ChunkCounts{});
  auto listed = store_->ListChunks(job.id);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 3u);
  EXPECT_EQ((*listed)[2].items, ChunksOf(3, 4)[2]);
  EXPECT_EQ((*listed)[2].state, ChunkState::kPending);
}

TEST_P(StoreTest, LeaseHandsOutEachChunkOnceLowestFirst) {
  api::Job job = Insert("alice", "infer");
  ASSERT_TRUE(store_->InsertChunks(job.id, ChunksOf(5, 2)).ok());
  auto a = store_->LeaseChunks(LeaseBy(job.id, 1, 0, 2, 100));
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(Numbers(a->leased), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(a->leased[1].items, ChunksOf(5, 2)[1]);
  auto b = store_->LeaseChunks(LeaseBy(job.id, 1, 1, 10, 100));
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(Numbers(b->leased), (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(b->counts.chunks_leased, 5);
  auto none = store_->LeaseChunks(LeaseBy(job.id, 1, 2, 10, 200));
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->leased.empty());
}

TEST_P(StoreTest, CompletedChunksAreDoneOnceAndCounted) {
  api::Job job = Insert("alice", "infer");
  ASSERT_TRUE(store_->InsertChunks(job.id, ChunksOf(3, 4)).ok());
  ASSERT_TRUE(store_->LeaseChunks(LeaseBy(job.id, 1, 0, 2, 100)).ok());
  auto r = store_->LeaseChunks(LeaseBy(job.id, 1, 0, 0, 150, {0, 1}));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->newly_done, 2);
  EXPECT_TRUE(r->leased.empty()) << "max_chunks 0 only reports";
  EXPECT_EQ(r->counts, (ChunkCounts{3, 2, 0, 12, 8}));
  // A retried report changes nothing; an unknown chunk is ignored.
  auto again = store_->LeaseChunks(LeaseBy(job.id, 1, 0, 0, 160, {0, 1, 77}));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->newly_done, 0);
  EXPECT_EQ(again->counts.chunks_done, 2);
  auto chunks = store_->ListChunks(job.id);
  ASSERT_TRUE(chunks.ok());
  EXPECT_EQ((*chunks)[0].state, ChunkState::kDone);
  EXPECT_EQ((*chunks)[0].done_ms, 150);
  // Done chunks are never leased again.
  auto rest = store_->LeaseChunks(LeaseBy(job.id, 1, 1, 10, 170));
  EXPECT_EQ(Numbers(rest->leased), (std::vector<int64_t>{2}));
}

TEST_P(StoreTest, ExpiredLeaseGoesBackToTheQueueAndRenewalKeepsIt) {
  api::Job job = Insert("alice", "infer");
  ASSERT_TRUE(store_->InsertChunks(job.id, ChunksOf(2, 1)).ok());
  // Rank 0 holds chunk 0 until 1100, rank 1 chunk 1 until 1100.
  ASSERT_TRUE(store_->LeaseChunks(LeaseBy(job.id, 1, 0, 1, 100)).ok());
  ASSERT_TRUE(store_->LeaseChunks(LeaseBy(job.id, 1, 1, 1, 100)).ok());
  // Rank 0 renews at 900 (until 1900); rank 1 goes silent.
  ASSERT_TRUE(store_->LeaseChunks(LeaseBy(job.id, 1, 0, 0, 900)).ok());
  auto before = store_->LeaseChunks(LeaseBy(job.id, 1, 2, 5, 1099));
  EXPECT_TRUE(before->leased.empty()) << "nothing has expired yet";
  auto after = store_->LeaseChunks(LeaseBy(job.id, 1, 2, 5, 1100));
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(Numbers(after->leased), (std::vector<int64_t>{1})) << "rank 1's lease expired";
  EXPECT_EQ(after->leased[0].rank, 2);
}

TEST_P(StoreTest, LeasesOfAnEndedAttemptAreReclaimedAtOnce) {
  api::Job job = Insert("alice", "infer");
  ASSERT_TRUE(store_->InsertChunks(job.id, ChunksOf(3, 1)).ok());
  ASSERT_TRUE(store_->LeaseChunks(LeaseBy(job.id, 1, 0, 3, 100)).ok());
  ASSERT_TRUE(store_->LeaseChunks(LeaseBy(job.id, 1, 0, 0, 110, {0})).ok());
  auto next = store_->LeaseChunks(LeaseBy(job.id, 2, 0, 5, 120));
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(Numbers(next->leased), (std::vector<int64_t>{1, 2}));
  auto stale = store_->LeaseChunks(LeaseBy(job.id, 1, 0, 5, 130));
  EXPECT_TRUE(stale->leased.empty()) << "an older attempt cannot take a newer one's lease";
}

TEST_P(StoreTest, AskingAgainResendsChunksTheRankNeverGot) {
  api::Job job = Insert("alice", "infer");
  ASSERT_TRUE(store_->InsertChunks(job.id, ChunksOf(4, 1)).ok());
  // Rank 0's answer granting chunks 0 and 1 is lost; it retries the call.
  ASSERT_TRUE(store_->LeaseChunks(LeaseBy(job.id, 1, 0, 2, 100)).ok());
  ASSERT_TRUE(store_->LeaseChunks(LeaseBy(job.id, 1, 1, 1, 100)).ok());  // rank 1: chunk 2
  auto retry = store_->LeaseChunks(LeaseBy(job.id, 1, 0, 2, 110));
  ASSERT_TRUE(retry.ok());
  EXPECT_EQ(Numbers(retry->leased), (std::vector<int64_t>{0, 1}));
  // Having finished 0, it asks for 2: it gets 1 again, then a new one.
  auto next = store_->LeaseChunks(LeaseBy(job.id, 1, 0, 2, 120, {0}));
  EXPECT_EQ(Numbers(next->leased), (std::vector<int64_t>{1, 3}));
  // A renewal (max_chunks 0) hands out nothing.
  EXPECT_TRUE(store_->LeaseChunks(LeaseBy(job.id, 1, 0, 0, 130))->leased.empty());
}

TEST_P(StoreTest, LeaseRefusesBadRequests) {
  api::Job job = Insert("alice", "infer");
  EXPECT_EQ(store_->LeaseChunks(LeaseBy(999, 1, 0, 1, 100)).status().code(), StatusCode::kNotFound);
  struct Case {
    ChunkLeaseRequest request;
    std::string field;
  } cases[] = {
      {ChunkLeaseRequest{job.id, 0, 0, {}, 1, 100, 200}, "attempt"},
      {ChunkLeaseRequest{job.id, 1, -1, {}, 1, 100, 200}, "rank"},
      {ChunkLeaseRequest{job.id, 1, 0, {}, -1, 100, 200}, "max_chunks"},
      {ChunkLeaseRequest{job.id, 1, 0, {}, 1, 100, 50}, "lease_until_ms"},
  };
  for (const Case& c : cases) {
    auto r = store_->LeaseChunks(c.request);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << c.field;
    EXPECT_EQ(r.status().field(), c.field);
  }
}

TEST_P(StoreTest, StatsCountWrites) {
  const StoreStats before = store_->Stats();
  Insert("alice", "a");
  Insert("alice", "b");
  const StoreStats after = store_->Stats();
  EXPECT_EQ(after.writes, before.writes + 2);
  EXPECT_GE(after.commits, before.commits + 1);
  EXPECT_EQ(after.commit_seconds.counts.size(), after.commit_seconds.upper_bounds.size() + 1);
}

INSTANTIATE_TEST_SUITE_P(AllBackends, StoreTest,
                         ::testing::Values(Backend::kSqlite, Backend::kMemory,
                                           Backend::kFaultyMemory),
                         BackendName);

// ---- FaultyStore's own behaviour ----

TEST(FaultyStoreTest, FailsTheNthWriteOnly) {
  MemoryStore base;
  FaultyStore store(&base);
  store.ArmWriteFault(2, Unavailable("disk on fire"));
  EXPECT_TRUE(store.InsertJob(NewJob{"a", Spec("1"), 1, "submitted"}).ok());
  auto failed = store.InsertJob(NewJob{"a", Spec("2"), 1, "submitted"});
  EXPECT_EQ(failed.status().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(store.InsertJob(NewJob{"a", Spec("3"), 1, "submitted"}).ok());
  EXPECT_TRUE(store.ListJobs({}).ok()) << "reads are not affected";
  EXPECT_EQ(base.ListJobs({})->jobs.size(), 2u) << "the failed write never reached the base";
  EXPECT_EQ(store.writes_seen(), 3);
}

TEST(FaultyStoreTest, StickyReadFaultUntilDisarmed) {
  MemoryStore base;
  FaultyStore store(&base);
  store.ArmReadFault(1, Internal("io error"), /*sticky=*/true);
  EXPECT_EQ(store.ListNodes().status().code(), StatusCode::kInternal);
  EXPECT_EQ(store.GetJob(1).status().code(), StatusCode::kInternal);
  EXPECT_TRUE(store.SetAgentJoinToken("t").ok()) << "writes are not affected";
  store.Disarm();
  EXPECT_TRUE(store.ListNodes().ok());
}

}  // namespace
}  // namespace tessera::daemon
