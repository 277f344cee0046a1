#include "scheduler/queue_pass.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "scheduler/planner.h"
#include "tests/scheduler/builders.h"

namespace tessera::scheduler::testing {
namespace {

// A waiting job and what its plan hook needs besides the pass's fields.
struct TestJob {
  PassJob pass;
  std::string model = "medium";  // "medium", or any other name: unknown (NotFound)
  int64_t batch = 16;            // 0: an invalid request (InvalidArgument)
};

class JobBuilder {
 public:
  JobBuilder(int64_t id, std::string user) {
    job_.pass.id = id;
    job_.pass.user = std::move(user);
  }
  // Exactly n devices (a rigid job).
  JobBuilder& Devices(int64_t n) { return Devices(n, n); }
  JobBuilder& Devices(int64_t min, int64_t max) {
    job_.pass.min_devices = min;
    job_.pass.max_devices = max;
    return *this;
  }
  JobBuilder& Priority(int64_t p) {
    job_.pass.priority = p;
    return *this;
  }
  JobBuilder& Model(std::string m) {
    job_.model = std::move(m);
    return *this;
  }
  JobBuilder& Batch(int64_t b) {
    job_.batch = b;
    return *this;
  }
  operator TestJob() const { return job_; }  // NOLINT: a builder

 private:
  TestJob job_;
};

JobBuilder Job(int64_t id, std::string user) { return JobBuilder(id, std::move(user)).Devices(1); }

// One node "n" of `gpus` identical devices n:0, n:1, ...
ClusterSnapshot Node(int gpus) {
  return ClusterBuilder().Node("n").Gpus(gpus, "A", 16, 10).Build();
}

// The real planner on `cluster` with the devices in `busy` marked busy.
// `calls` counts plans (may be null).
QueuePassHooks PlanOn(const ClusterSnapshot& cluster, const std::vector<TestJob>& jobs,
                      std::shared_ptr<int> calls = nullptr) {
  std::map<int64_t, TestJob> by_id;
  for (const TestJob& j : jobs) by_id[j.pass.id] = j;
  QueuePassHooks hooks;
  hooks.plan = [cluster, by_id, calls](const PassJob& job,
                                       const DeviceSet& busy) -> Result<PlanSet> {
    if (calls) ++*calls;
    const TestJob& t = by_id.at(job.id);
    if (t.model != "medium") return NotFound("unknown model " + t.model);
    ClusterSnapshot snap = cluster;
    for (scheduler::Node& n : snap.nodes) {
      for (Device& d : n.devices) d.busy = busy.contains(DeviceId{n.name, d.index}.ToString());
    }
    JobRequest request = Train(t.batch);
    request.min_devices = static_cast<int>(job.min_devices);
    request.max_devices = static_cast<int>(job.max_devices);
    return MakePlans(snap, MediumModel(), request);
  };
  return hooks;
}

std::vector<PassJob> PassJobs(const std::vector<TestJob>& jobs) {
  std::vector<PassJob> out;
  for (const TestJob& j : jobs) out.push_back(j.pass);
  return out;
}

UserPolicies Limit(const std::string& user, int64_t max_running_jobs, int64_t max_devices) {
  UserPolicies p;
  p.users[user].max_running_jobs = max_running_jobs;
  p.users[user].max_devices = max_devices;
  return p;
}

// What one decision should be.
struct Want {
  int64_t id = 0;
  PassAction action = PassAction::kWait;
  std::string reason;  // the reason, or (ending in "*") its beginning; "" for any
  int devices = 0;     // kPlace: devices of its plan
  bool head = false;
};

Want Place(int64_t id, int devices = 1) { return {id, PassAction::kPlace, "", devices, false}; }
Want Wait(int64_t id, std::string reason = "") { return {id, PassAction::kWait, reason, 0, false}; }
Want Head(int64_t id) { return {id, PassAction::kWait, "", 0, true}; }
Want Never(int64_t id, std::string reason) { return {id, PassAction::kNever, reason, 0, false}; }

struct PassCase {
  const char* name;
  int gpus;
  DeviceSet busy;  // held by running jobs
  std::map<std::string, UserUsage> usage;
  UserPolicies policies;
  QueueOrdering ordering;
  std::vector<TestJob> jobs;
  std::vector<Want> want;  // in the order the pass considers the jobs
};

TEST(QueuePassTest, DecidesEveryJobInQueueOrder) {
  const auto fair = QueueOrdering::kFairShare;
  const auto fifo = QueueOrdering::kFifo;
  const std::string behind_1 = "waiting behind job 1 (placing it now would delay that job)";
  const std::vector<PassCase> cases = {
      {"fair: bob's one job runs before alice's second",
       2,
       {},
       {},
       {},
       fair,
       {Job(1, "alice"), Job(2, "alice"), Job(3, "alice"), Job(4, "bob")},
       {Place(1), Place(4), Head(2), Wait(3)}},
      {"fifo: alice's jobs in submission order, bob last",
       2,
       {},
       {},
       {},
       fifo,
       {Job(1, "alice"), Job(2, "alice"), Job(3, "alice"), Job(4, "bob")},
       {Place(1), Place(2), Head(3), Wait(4)}},
      {"priority before submission, in both orders",
       1,
       {},
       {},
       {},
       fifo,
       {Job(1, "alice"), Job(2, "bob").Priority(5)},
       {Place(2), Head(1)}},
      {"a later job backfills while the head still fits once the running jobs end",
       4,
       {"n:0", "n:1"},
       {},
       {},
       fair,
       {Job(1, "alice").Devices(3), Job(2, "bob"), Job(3, "carol")},
       // 2 fits beside the head (4 - 1 >= 3); 3 would leave the head 2 of 4.
       {Head(1), Place(2), Wait(3, behind_1)}},
      {"no backfill that would delay the head",
       4,
       {"n:0"},
       {},
       {},
       fair,
       {Job(1, "alice").Devices(4), Job(2, "bob"), Job(3, "bob").Priority(-1)},
       {Head(1), Wait(2, behind_1), Wait(3, behind_1)}},
      {"a job too large for the idle cluster blocks nobody",
       2,
       {"n:0"},
       {},
       {},
       fair,
       {Job(1, "alice").Devices(4), Job(2, "bob")},
       {Wait(1, "job needs at least 4 devices*"), Place(2)}},
      {"a job that can never be planned: never, and it blocks nobody",
       2,
       {},
       {},
       {},
       fair,
       {Job(1, "alice").Model("nosuch"), Job(2, "bob").Batch(0), Job(3, "carol").Devices(2)},
       {Never(1, "cannot plan: unknown model nosuch"), Never(2, "cannot plan: *"), Place(3, 2)}},
      {"a user at a limit now is held; the others go on",
       4,
       {"n:0"},
       {{"alice", UserUsage{1, 1}}},
       Limit("alice", 1, 0),
       fair,
       {Job(1, "alice"), Job(2, "bob")},
       {Place(2), Wait(1, "held by a user limit: alice runs 1 of 1 job allowed")}},
      {"a job placed in this pass counts against its user's job limit",
       4,
       {},
       {},
       Limit("alice", 1, 0),
       fair,
       {Job(1, "alice"), Job(2, "alice")},
       {Place(1), Wait(2, "held by a user limit: alice runs 1 of 1 job allowed")}},
      {"... and against the device limit",
       4,
       {},
       {},
       Limit("bob", 0, 3),
       fair,
       {Job(1, "bob").Devices(2), Job(2, "bob").Devices(2)},
       {Place(1, 2),
        Wait(2,
             "held by a user limit: bob holds 2 of 3 devices allowed; this job needs at least "
             "2")}},
      {"a user's device limit bounds the plan, others take what is best",
       8,
       {},
       {},
       Limit("bob", 0, 2),
       fair,
       {Job(1, "bob").Devices(1, 0), Job(2, "alice").Devices(1, 4)},
       {Place(1, 2), Place(2, 4)}},
  };
  for (const PassCase& c : cases) {
    SCOPED_TRACE(c.name);
    auto decisions = RunQueuePass(PassJobs(c.jobs), c.usage, c.policies, c.busy,
                                  PlanOn(Node(c.gpus), c.jobs), c.ordering);
    ASSERT_TRUE(decisions.ok()) << decisions.status().ToString();
    ASSERT_EQ(decisions->size(), c.want.size());
    for (size_t i = 0; i < c.want.size(); ++i) {
      const Want& w = c.want[i];
      const PassDecision& d = (*decisions)[i];
      SCOPED_TRACE("job " + std::to_string(w.id));
      EXPECT_EQ(d.job.id, w.id);
      EXPECT_EQ(PassActionName(d.action), PassActionName(w.action)) << d.reason;
      EXPECT_EQ(d.head, w.head);
      if (w.reason.ends_with("*")) {
        EXPECT_TRUE(d.reason.starts_with(w.reason.substr(0, w.reason.size() - 1))) << d.reason;
      } else if (!w.reason.empty()) {
        EXPECT_EQ(d.reason, w.reason);
      }
      if (w.action == PassAction::kPlace) {
        ASSERT_TRUE(d.plan.has_value());
        EXPECT_EQ(d.plan->Devices().size(), static_cast<size_t>(w.devices));
        EXPECT_TRUE(d.reason.empty());
      } else {
        EXPECT_FALSE(d.plan.has_value());
      }
    }
  }
}

// Alice's job needs 3 of 4 devices; n:0 frees in 600 s, n:1 is held by a job
// backfilled in an earlier pass for 2 h; n:2 and n:3 are free. With predicted
// ends, bob's 1-device job backfills only if it ends before alice's can start
// (600 s), else it would hold n:2 or n:3 past then (EASY backfill); without
// them, only this pass's backfills count, and bob's job takes a device the
// head will need, pass after pass.
TEST(QueuePassTest, BehindTheHeadOnlyJobsThatEndBeforeItCanStartTakeItsDevices) {
  const std::string behind_1 = "waiting behind job 1 (placing it now would delay that job)";
  struct Row {
    const char* name;
    bool predicted_ends;  // hooks.running and hooks.run_s set
    double n0_ends_in_s;  // 0: unknown
    double bobs_run_s;    // 0: unknown
    PassAction bobs;
  };
  const Row rows[] = {
      {"ends before the head can start: backfills", true, 600, 300, PassAction::kPlace},
      {"would hold a device past the head's start: waits", true, 600, 3600, PassAction::kWait},
      {"its length unknown: waits", true, 600, 0, PassAction::kWait},
      {"the device's end unknown: the head starts when n:1 frees, in 2 h; bob's ends first", true,
       0, 3600, PassAction::kPlace},
      {"no predicted ends: the head fits once every other job ended, so bob's backfills", false,
       600, 3600, PassAction::kPlace},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    const std::vector<TestJob> jobs = {Job(1, "alice").Devices(3), Job(2, "bob")};
    QueuePassHooks hooks = PlanOn(Node(4), jobs);
    if (row.predicted_ends) {
      hooks.running = [&]() -> Result<std::vector<RunningHold>> {
        return std::vector<RunningHold>{{{"n:0"}, row.n0_ends_in_s}, {{"n:1"}, 7200}};
      };
      hooks.run_s = [&](const PassJob& j, const Plan&) { return j.id == 2 ? row.bobs_run_s : 0; };
    }
    auto decisions = RunQueuePass(PassJobs(jobs), {}, {}, {"n:0", "n:1"}, hooks);
    ASSERT_TRUE(decisions.ok()) << decisions.status().ToString();
    ASSERT_EQ(decisions->size(), 2u);
    EXPECT_TRUE((*decisions)[0].head);
    EXPECT_EQ(PassActionName((*decisions)[1].action), PassActionName(row.bobs))
        << (*decisions)[1].reason;
    // With predicted ends both say when the head can start.
    const std::string starts = row.n0_ends_in_s > 0 ? "about 10 min" : "about 120 min";
    if (row.predicted_ends) {
      EXPECT_NE((*decisions)[0].reason.find("; can start in " + starts), std::string::npos)
          << (*decisions)[0].reason;
    }
    if (row.bobs == PassAction::kWait) {
      EXPECT_EQ((*decisions)[1].reason,
                row.predicted_ends
                    ? "waiting behind job 1 (placing it now would delay that job, "
                      "which can start in " +
                          starts + ", as the running jobs' predicted ends free its devices)"
                    : behind_1);
    }
  }
}

TEST(QueuePassTest, PlacedJobsTakeDistinctFreeDevices) {
  const std::vector<TestJob> jobs = {Job(1, "a").Devices(2), Job(2, "b"), Job(3, "c").Devices(2)};
  auto decisions = RunQueuePass(PassJobs(jobs), {}, {}, {"n:1"}, PlanOn(Node(6), jobs));
  ASSERT_TRUE(decisions.ok());
  DeviceSet taken;
  size_t devices = 0;
  for (const PassDecision& d : *decisions) {
    ASSERT_EQ(d.action, PassAction::kPlace) << d.reason;
    for (const DeviceId& dev : d.plan->Devices()) taken.insert(dev.ToString());
    devices += d.plan->Devices().size();
  }
  EXPECT_EQ(devices, 5u);
  EXPECT_EQ(taken.size(), 5u) << "two jobs were placed on one device";
  EXPECT_FALSE(taken.contains("n:1")) << "a busy device was planned on";
}

TEST(QueuePassTest, AJobThatIsNotReadyIsSkippedWithoutAPlanAndBlocksNobody) {
  const std::vector<TestJob> jobs = {Job(1, "a").Devices(4), Job(2, "b")};
  auto calls = std::make_shared<int>(0);
  QueuePassHooks hooks = PlanOn(Node(4), jobs, calls);
  hooks.ready = [](const PassJob& j) -> Result<bool> { return j.id != 1; };
  auto decisions = RunQueuePass(PassJobs(jobs), {}, {}, {"n:0"}, hooks);
  ASSERT_TRUE(decisions.ok());
  ASSERT_EQ(decisions->size(), 2u);
  EXPECT_EQ((*decisions)[0].action, PassAction::kNotReady);
  EXPECT_TRUE((*decisions)[0].reason.empty());
  EXPECT_EQ((*decisions)[1].action, PassAction::kPlace) << "job 2 waited behind a job not ready";
  EXPECT_EQ(*calls, 1) << "a job not ready was planned";
}

TEST(QueuePassTest, CommitSaysWhatAPlacedJobHolds) {
  // Job 1 is not placed after all (the caller failed it): its devices stay
  // free for job 2 and alice is not charged for it.
  const std::vector<TestJob> jobs = {Job(1, "alice").Devices(2), Job(2, "alice").Devices(2)};
  QueuePassHooks hooks = PlanOn(Node(2), jobs);
  std::vector<std::string> seen;
  hooks.commit = [&](const PassDecision& d) -> Result<DeviceSet> {
    seen.push_back(std::to_string(d.job.id) + " " + std::string(PassActionName(d.action)));
    if (d.job.id == 1) return DeviceSet{};
    DeviceSet held;
    for (const DeviceId& dev : d.plan->Devices()) held.insert(dev.ToString());
    return held;
  };
  auto decisions = RunQueuePass(PassJobs(jobs), {}, Limit("alice", 1, 0), {}, hooks);
  ASSERT_TRUE(decisions.ok());
  EXPECT_EQ(seen, (std::vector<std::string>{"1 place", "2 place"}));
}

TEST(QueuePassTest, AHookErrorEndsThePassAfterTheDecisionsCommitted) {
  const std::vector<TestJob> jobs = {Job(1, "a"), Job(2, "b"), Job(3, "c")};
  struct Case {
    const char* name;
    bool ready_fails;  // else commit fails
  };
  for (const Case& c : {Case{"ready", true}, Case{"commit", false}}) {
    SCOPED_TRACE(c.name);
    QueuePassHooks hooks = PlanOn(Node(4), jobs);
    std::vector<int64_t> committed;
    hooks.ready = [&](const PassJob& j) -> Result<bool> {
      if (c.ready_fails && j.id == 2) return Internal("store down");
      return true;
    };
    hooks.commit = [&](const PassDecision& d) -> Result<DeviceSet> {
      if (!c.ready_fails && d.job.id == 2) return Internal("store down");
      committed.push_back(d.job.id);
      return DeviceSet{"n:" + std::to_string(d.job.id)};
    };
    auto decisions = RunQueuePass(PassJobs(jobs), {}, {}, {}, hooks);
    ASSERT_FALSE(decisions.ok());
    EXPECT_EQ(decisions.status().message(), "store down");
    EXPECT_EQ(committed, (std::vector<int64_t>{1})) << "a job after the error was committed";
  }
}

}  // namespace
}  // namespace tessera::scheduler::testing
