#include "scheduler/queue_order.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

namespace tessera::scheduler {
namespace {

QueuedJob Job(int64_t id, std::string user, int64_t priority = 0, int64_t min_devices = 1) {
  return QueuedJob{id, std::move(user), priority, min_devices};
}

// A job whose run time is expected to take `expected_s` and which has
// waited `waited_s`.
QueuedJob Timed(int64_t id, std::string user, double expected_s, double waited_s) {
  QueuedJob j = Job(id, std::move(user));
  j.expected_s = expected_s;
  j.waited_s = waited_s;
  return j;
}

UserPolicy Weight(double w) {
  UserPolicy p;
  p.weight = w;
  return p;
}

std::vector<int64_t> Ids(const std::vector<QueueEntry>& order) {
  std::vector<int64_t> ids;
  for (const QueueEntry& e : order) ids.push_back(e.id);
  return ids;
}

// Fair share (the default): priority, then the user's weighted share, then submission.
// Fifo: priority, then submission, whatever users hold and weigh.
TEST(QueueOrderTest, OrdersByPriorityThenUsersShareOrSubmission) {
  struct Case {
    const char* name;
    std::vector<QueuedJob> jobs;
    std::map<std::string, UserUsage> usage;
    UserPolicies policies;
    std::vector<int64_t> fair;
    std::vector<int64_t> fifo;
  };
  const std::vector<Case> cases = {
      {"one user: submission order",
       {Job(3, "a"), Job(1, "a"), Job(2, "a")},
       {},
       {},
       {1, 2, 3},
       {1, 2, 3}},
      {"priority first; then a, charged for its first job, after b",
       {Job(1, "a"), Job(2, "a", 5), Job(3, "b")},
       {},
       {},
       {2, 3, 1},
       {2, 1, 3}},
      {"a user who queued many does not starve the other",
       {Job(1, "a"), Job(2, "a"), Job(3, "a"), Job(4, "a"), Job(5, "b"), Job(6, "b")},
       {},
       {},
       {1, 5, 2, 6, 3, 4},
       {1, 2, 3, 4, 5, 6}},
      {"the user holding fewer devices goes first",
       {Job(1, "a"), Job(2, "b")},
       {{"a", UserUsage{1, 4}}, {"b", UserUsage{1, 1}}},
       {},
       {2, 1},
       {1, 2}},
      {"weights: a user of weight 2 gets two jobs' devices per one of weight 1",
       {Job(1, "a"), Job(2, "a"), Job(3, "a"), Job(4, "b"), Job(5, "b")},
       {},
       {{{"a", Weight(2)}}},
       {1, 4, 2, 3, 5},
       {1, 2, 3, 4, 5}},
      {"larger jobs charge more share",
       {Job(1, "a", 0, 4), Job(2, "a"), Job(3, "b"), Job(4, "b"), Job(5, "b")},
       {},
       {},
       {1, 3, 4, 5, 2},
       {1, 2, 3, 4, 5}},
      {"a user's shorter job first (response ratio 1.08 against 1.03)",
       {Timed(1, "a", 3600, 100), Timed(2, "a", 600, 50)},
       {},
       {},
       {2, 1},
       {1, 2}},
      {"a long job that waited long comes first (ratio 3 against 1): no starvation",
       {Timed(1, "a", 3600, 7200), Timed(2, "a", 60, 0)},
       {},
       {},
       {1, 2},
       {1, 2}},
      {"users interleave by share before any ratio",
       {Timed(1, "a", 60, 0), Timed(2, "a", 30, 0), Timed(3, "b", 6000, 0)},
       {},
       {},
       {1, 3, 2},
       {1, 2, 3}},
      {"unknown run times keep submission order",
       {Job(2, "a"), Job(1, "a"), Timed(3, "a", 0, 500)},
       {},
       {},
       {1, 2, 3},
       {1, 2, 3}},
      {"the default policy '*' weighs users without their own",
       {Job(1, "a"), Job(2, "a"), Job(3, "b"), Job(4, "b")},
       {},
       {{{"*", Weight(3)}, {"b", Weight(1)}}},
       {1, 3, 2, 4},
       {1, 2, 3, 4}},
      {"a user who queued many goes first in fifo",
       {Job(1, "a"), Job(2, "a"), Job(3, "a"), Job(4, "b")},
       {},
       {},
       {1, 4, 2, 3},
       {1, 2, 3, 4}},
      {"priority still goes first",
       {Job(1, "a"), Job(2, "a"), Job(3, "b", 5)},
       {},
       {},
       {3, 1, 2},
       {3, 1, 2}},
      {"what users hold and their weights do not matter in fifo",
       {Job(1, "a"), Job(2, "b")},
       {{"a", UserUsage{2, 8}}},
       {{{"b", Weight(0.5)}}},
       {2, 1},
       {1, 2}},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(Ids(OrderQueue(c.jobs, c.usage, c.policies)), c.fair) << c.name;
    EXPECT_EQ(Ids(OrderQueue(c.jobs, c.usage, c.policies, QueueOrdering::kFairShare)), c.fair)
        << c.name;
    EXPECT_EQ(Ids(OrderQueue(c.jobs, c.usage, c.policies, QueueOrdering::kFifo)), c.fifo) << c.name;
  }
}

TEST(QueueOrderTest, FifoStillHoldsJobsAtTheirUsersLimits) {
  UserPolicies policies;
  policies.users["a"].max_running_jobs = 1;
  const std::vector<QueueEntry> order = OrderQueue(
      {Job(1, "a"), Job(2, "b")}, {{"a", UserUsage{1, 1}}}, policies, QueueOrdering::kFifo);
  ASSERT_EQ(Ids(order), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(order[1].held, "a runs 1 of 1 job allowed");
}

TEST(QueueOrderTest, LimitsHoldJobsWithTheReason) {
  UserPolicies policies;
  policies.users["a"].max_running_jobs = 1;
  policies.users["b"].max_devices = 3;
  const std::vector<QueuedJob> jobs = {Job(1, "a"), Job(2, "b", 0, 2), Job(3, "b", 0, 1),
                                       Job(4, "c")};
  const std::map<std::string, UserUsage> usage = {{"a", UserUsage{1, 2}}, {"b", UserUsage{1, 2}}};
  const std::vector<QueueEntry> order = OrderQueue(jobs, usage, policies);
  ASSERT_EQ(order.size(), 4u);
  // c holds nothing: first; b's one-device job fits its limit (cap 1); the
  // rest are held, after the ready ones.
  EXPECT_EQ(Ids(order), (std::vector<int64_t>{4, 3, 1, 2}));
  EXPECT_EQ(order[0].position, 1);
  EXPECT_EQ(order[0].device_cap, 0);
  EXPECT_EQ(order[1].position, 2);
  EXPECT_EQ(order[1].device_cap, 1);
  EXPECT_EQ(order[2].position, 0);
  EXPECT_EQ(order[2].held, "a runs 1 of 1 job allowed");
  EXPECT_EQ(order[3].position, 0);
  EXPECT_EQ(order[3].held, "b holds 2 of 3 devices allowed; this job needs at least 2");
}

TEST(QueueOrderTest, EveryJobAppearsOnceAndNoneStarves) {
  // Jobs keep arriving for user a; b's one job must still reach the front
  // after a bounded number of a's jobs have run.
  std::vector<QueuedJob> jobs;
  for (int64_t i = 1; i <= 50; ++i) jobs.push_back(Job(i, "a"));
  jobs.push_back(Job(100, "b"));
  std::map<std::string, UserUsage> usage;
  int rounds = 0;
  while (true) {
    const std::vector<QueueEntry> order = OrderQueue(jobs, usage, {});
    ASSERT_EQ(order.size(), jobs.size());
    if (order.front().id == 100) break;
    // The first job runs (a's usage grows), and a submits another.
    usage[order.front().user].devices += 1;
    usage[order.front().user].running_jobs += 1;
    std::erase_if(jobs, [&](const QueuedJob& j) { return j.id == order.front().id; });
    jobs.push_back(Job(1000 + rounds, "a"));
    ASSERT_LT(++rounds, 3) << "b's job waits behind a's new ones";
  }
}

TEST(QueueOrderTest, ADevicesBoundIsTheSmallerOfTheJobsAndWhatTheLimitLeaves) {
  const struct {
    const char* name;
    int64_t limit;        // the user's max_devices; 0: none
    int64_t others;       // devices the user's other jobs hold
    int64_t max_devices;  // the job's own bound; 0: none
    std::optional<int64_t> bound;
  } cases[] = {
      {"neither", 0, 5, 0, std::nullopt},   {"the job's own", 0, 5, 3, 3},
      {"the limit's", 6, 2, 0, 4},          {"the job's, smaller", 6, 2, 3, 3},
      {"the limit's, smaller", 6, 4, 3, 2}, {"none left", 6, 6, 0, 0},
      {"past the limit", 6, 8, 3, -2},
  };
  for (const auto& c : cases) {
    UserPolicy policy;
    policy.max_devices = c.limit;
    EXPECT_EQ(DeviceBound(policy, c.others, c.max_devices), c.bound) << c.name;
  }
}

TEST(QueueOrderTest, ARunningJobGrowsWithinWhatItsUsersLimitLeavesIt) {
  const struct {
    const char* name;
    int64_t limit;        // the user's max_devices; 0: none
    int64_t others;       // devices the user's other jobs hold
    int64_t own;          // devices the job holds
    int64_t max_devices;  // the job's own bound; 0: none
    std::optional<int64_t> bound;
  } cases[] = {
      {"no bound", 0, 3, 2, 0, 0},
      {"the job's own", 0, 3, 2, 4, 4},
      {"the limit's", 6, 1, 2, 0, 5},
      {"the job's, smaller", 6, 1, 2, 3, 3},
      {"the limit leaves it what it has", 6, 4, 2, 0, std::nullopt},
      {"past the limit", 6, 5, 2, 8, std::nullopt},
  };
  for (const auto& c : cases) {
    UserPolicy policy;
    policy.max_devices = c.limit;
    EXPECT_EQ(GrowthBound(policy, c.others, c.own, c.max_devices), c.bound) << c.name;
  }
}

TEST(QueueOrderTest, PolicyValidationNamesTheField) {
  struct Case {
    UserPolicy policy;
    const char* field;
  };
  UserPolicy zero_weight = Weight(0), negative_jobs, negative_devices, negative_pending;
  negative_jobs.max_running_jobs = -1;
  negative_devices.max_devices = -1;
  negative_pending.max_pending_jobs = -2;
  for (const Case& c :
       {Case{zero_weight, "weight"}, Case{negative_jobs, "max_running_jobs"},
        Case{negative_devices, "max_devices"}, Case{negative_pending, "max_pending_jobs"}}) {
    Status st = c.policy.Validate();
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << c.field;
    EXPECT_EQ(st.field(), c.field);
  }
  EXPECT_TRUE(UserPolicy{}.Validate().ok());
}

}  // namespace
}  // namespace tessera::scheduler
