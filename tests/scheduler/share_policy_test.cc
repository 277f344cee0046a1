#include "scheduler/share_policy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "scheduler/planner.h"
#include "tests/scheduler/builders.h"

namespace tessera::scheduler::testing {
namespace {

// A throughput model the tests control: a job's rate on n devices is the sum
// of its per-device speeds (by group) times scaling^(n-1); the job uses the
// prefix of its fastest devices (at most max_devices) that gives the most.
struct Speeds {
  std::map<std::string, double> per_group;  // absent group: 1
  double scaling = 1.0;
};

class Fixture {
 public:
  // Devices "<group>:<i>" in groups of `count`, listed group by group.
  Fixture& Group(const std::string& group, int count) {
    for (int i = 0; i < count; ++i) {
      devices_.push_back(ShareDevice{group + ":" + std::to_string(i), group});
    }
    return *this;
  }
  Fixture& Waiting(int64_t id, const std::string& user, Speeds speeds, int64_t max_devices = 0,
                   int64_t min_devices = 1, int64_t priority = 0) {
    AllocJob j;
    j.id = id;
    j.user = user;
    j.priority = priority;
    j.min_devices = min_devices;
    j.max_devices = max_devices;
    jobs_.push_back(j);
    speeds_[id] = std::move(speeds);
    return *this;
  }
  Fixture& Running(int64_t id, const std::string& user, Speeds speeds, DeviceSet held, bool movable,
                   double remaining_s, double move_cost_s) {
    Waiting(id, user, std::move(speeds));
    jobs_.back().held = std::move(held);
    jobs_.back().movable = movable;
    jobs_.back().remaining_s = remaining_s;
    jobs_.back().move_cost_s = move_cost_s;
    return *this;
  }
  // A running job's cost of a move onto none of its devices.
  Fixture& RestartCost(int64_t id, double seconds) {
    for (AllocJob& j : jobs_) {
      if (j.id == id) j.restart_cost_s = seconds;
    }
    return *this;
  }
  // A waiting job's work, in the rate's units (its expected run time is work
  // over its rate).
  Fixture& Work(int64_t id, double work) {
    for (AllocJob& j : jobs_) {
      if (j.id == id) j.work = work;
    }
    return *this;
  }
  // Any other field of job `id`.
  Fixture& With(int64_t id, const std::function<void(AllocJob&)>& edit) {
    for (AllocJob& j : jobs_) {
      if (j.id == id) edit(j);
    }
    return *this;
  }
  Fixture& Weight(const std::string& user, double weight) {
    policies_.users[user].weight = weight;
    return *this;
  }
  Fixture& Policy(const std::string& user, UserPolicy policy) {
    policies_.users[user] = policy;
    return *this;
  }

  Allocation Run() const {
    ShareHooks hooks;
    hooks.rate = [this](const AllocJob& job, const DeviceSet& devices) -> Result<RateOnDevices> {
      const Speeds& s = speeds_.at(job.id);
      std::vector<std::pair<double, std::string>> by_speed;
      for (const std::string& d : devices) {
        const std::string group = d.substr(0, d.find(':'));
        auto it = s.per_group.find(group);
        by_speed.emplace_back(it == s.per_group.end() ? 1.0 : it->second, d);
      }
      std::sort(by_speed.rbegin(), by_speed.rend());
      RateOnDevices best;
      double sum = 0;
      for (size_t n = 1; n <= by_speed.size(); ++n) {
        if (job.max_devices > 0 && static_cast<int64_t>(n) > job.max_devices) break;
        sum += by_speed[n - 1].first;
        const double rate = sum * std::pow(s.scaling, static_cast<double>(n - 1));
        if (rate > best.rate) {
          best.rate = rate;
          best.used.clear();
          for (size_t i = 0; i < n; ++i) best.used.insert(by_speed[i].second);
        }
      }
      return best;
    };
    Result<Allocation> a = Allocate(jobs_, devices_, policies_, hooks, options);
    EXPECT_TRUE(a.ok()) << a.status().ToString();
    return a.ok() ? *a : Allocation{};
  }

  ShareOptions options;

 private:
  std::vector<ShareDevice> devices_;
  std::vector<AllocJob> jobs_;
  std::map<int64_t, Speeds> speeds_;
  UserPolicies policies_;
};

const AllocDecision& Of(const Allocation& a, int64_t id) {
  for (const AllocDecision& d : a.jobs) {
    if (d.id == id) return d;
  }
  static const AllocDecision kNone;
  ADD_FAILURE() << "no decision for job " << id;
  return kNone;
}

TEST(SharePolicyTest, EachDeviceTypeGoesToTheJobItHelpsMostWhateverTheQueueOrder) {
  // Job "picky" runs 10x faster on the fast type; job "easy" nearly as fast on
  // the slow one. Whichever comes first in the queue, picky gets the fast device.
  struct Row {
    const char* name;
    int64_t picky_id;
    int64_t easy_id;
  };
  for (const Row& row : {Row{"picky first", 1, 2}, Row{"easy first", 2, 1}}) {
    SCOPED_TRACE(row.name);
    Fixture f;
    f.Group("fast", 1).Group("slow", 1);
    f.Waiting(row.picky_id, "alice", {{{"fast", 10}, {"slow", 1}}}, 1);
    f.Waiting(row.easy_id, "bob", {{{"fast", 3}, {"slow", 2.5}}}, 1);
    const Allocation a = f.Run();
    EXPECT_EQ(Of(a, row.picky_id).devices, DeviceSet{"fast:0"});
    EXPECT_EQ(Of(a, row.easy_id).devices, DeviceSet{"slow:0"});
    EXPECT_EQ(Of(a, row.picky_id).action, AllocAction::kStart);
    EXPECT_NE(Of(a, row.easy_id).reason.find("starts on slow:0"), std::string::npos);
  }
}

TEST(SharePolicyTest, UsersShareDevicesByWeightAndLeftoversAreNotWasted) {
  struct Row {
    const char* name;
    double heavy_weight;
    int64_t light_max;  // the light user's job's bound; 0: none
    size_t heavy_devices;
    size_t light_devices;
  };
  const Row rows[] = {
      {"equal weights", 1, 0, 3, 3},
      {"weight 2 to 1", 2, 0, 4, 2},
      {"the light job takes one: the rest goes to the other", 2, 1, 5, 1},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    Fixture f;
    f.Group("a", 6).Weight("heavy", row.heavy_weight);
    f.Waiting(1, "heavy", {}).Waiting(2, "light", {}, row.light_max);
    const Allocation a = f.Run();
    EXPECT_EQ(Of(a, 1).devices.size(), row.heavy_devices);
    EXPECT_EQ(Of(a, 2).devices.size(), row.light_devices);
  }
}

TEST(SharePolicyTest, ARunningJobShrinksForAWaitingOneOnlyWhenTheMovePaysForItself) {
  struct Row {
    const char* name;
    bool movable;
    double remaining_s;
    double move_cost_s;
    AllocAction running;
    AllocAction waiting;
    size_t running_devices;
  };
  const Row rows[] = {
      {"a cheap move and hours left: shrink", true, 3600, 30, AllocAction::kShrink,
       AllocAction::kStart, 2},
      {"the move costs more than the gain before it ends", true, 60, 600, AllocAction::kKeep,
       AllocAction::kWait, 4},
      {"a job that may not move keeps its devices", false, 3600, 0, AllocAction::kKeep,
       AllocAction::kWait, 4},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    Fixture f;
    f.Group("a", 4);
    f.Running(1, "alice", {{}, 0.9}, {"a:0", "a:1", "a:2", "a:3"}, row.movable, row.remaining_s,
              row.move_cost_s);
    f.Waiting(2, "bob", {{}, 0.9});
    const Allocation a = f.Run();
    EXPECT_EQ(Of(a, 1).action, row.running) << Of(a, 1).reason;
    EXPECT_EQ(Of(a, 2).action, row.waiting) << Of(a, 2).reason;
    EXPECT_EQ(Of(a, 1).devices.size(), row.running_devices);
    if (row.running == AllocAction::kShrink) {
      EXPECT_NE(Of(a, 1).reason.find("job 2 of bob takes its devices"), std::string::npos)
          << Of(a, 1).reason;
      EXPECT_NE(Of(a, 1).reason.find("normalized throughput"), std::string::npos);
    } else {
      EXPECT_EQ(Of(a, 2).reason.rfind(
                    "needs 1 device; 0 are left after the jobs before it in the queue; the "
                    "devices that free up are held for it",
                    0),
                0u)
          << Of(a, 2).reason;
    }
  }
}

// Bob's job needs 4 devices and finds fewer free: alice's running job holds 3
// until it ends. The devices that free up are held for bob's job (EASY
// backfill): dave's later 1-device job starts only when it ends before alice's
// job does, or on a device bob's job will not need; it grows only as far.
TEST(SharePolicyTest, AJobShortOfDevicesHoldsThoseThatFreeUpAgainstLaterJobs) {
  struct Row {
    const char* name;
    int devices;
    double alices_remaining_s;  // 0: unknown
    double daves_work;          // seconds on one device; 0: unknown
    AllocAction daves;
    size_t daves_devices;
    const char* bobs_reason_part;
  };
  const Row rows[] = {
      {"ends before bob's job can start: starts", 4, 600, 300, AllocAction::kStart, 1,
       "held for it (enough in about 10 min, as predicted)"},
      {"would hold its device past then: waits behind bob's", 4, 600, 3600, AllocAction::kWait, 0,
       "held for it (enough in about 10 min, as predicted)"},
      {"its length unknown: waits", 4, 600, 0, AllocAction::kWait, 0, "held for it"},
      {"alice's end unknown: nothing passes", 4, 0, 300, AllocAction::kWait, 0,
       "the devices that free up are held for it"},
      {"a device bob's job will not need: starts there, and grows no further", 5, 600, 3600,
       AllocAction::kStart, 1, "held for it (enough in about 10 min, as predicted)"},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    Fixture f;
    f.Group("a", row.devices);
    f.Running(1, "alice", {}, {"a:0", "a:1", "a:2"}, false, row.alices_remaining_s, 0);
    f.Waiting(2, "bob", {}, 0, 4);
    f.Waiting(3, "dave", {}).Work(3, row.daves_work);
    const Allocation a = f.Run();
    EXPECT_EQ(Of(a, 2).action, AllocAction::kWait);
    EXPECT_NE(Of(a, 2).reason.find(row.bobs_reason_part), std::string::npos) << Of(a, 2).reason;
    EXPECT_EQ(Of(a, 3).action, row.daves) << Of(a, 3).reason;
    EXPECT_EQ(Of(a, 3).devices.size(), row.daves_devices);
    if (row.daves == AllocAction::kWait) {
      EXPECT_NE(Of(a, 3).reason.find("waiting behind job 2 of bob"), std::string::npos)
          << Of(a, 3).reason;
    }
  }
}

// Bob's job fits only the big device (no plan on a small one), which alice's
// running job prefers. Alice's job takes its minimum from its own small device
// instead and moves to both small ones, when the move pays for itself.
TEST(SharePolicyTest, ARunningJobMakesRoomForAJobThatFitsOnlyItsDevice) {
  struct Row {
    const char* name;
    bool movable;
    double remaining_s;
    double move_cost_s;
    int64_t bobs_priority;
    AllocAction alices;
    DeviceSet alices_devices;
    AllocAction bobs;
  };
  const Row rows[] = {
      {"a cheap move and hours left: alice moves around her small device",
       true,
       3600,
       30,
       0,
       AllocAction::kMove,
       {"small:0", "small:1"},
       AllocAction::kStart},
      {"the move costs more than the gain before it ends",
       true,
       60,
       600,
       0,
       AllocAction::kKeep,
       {"big:0", "small:0"},
       AllocAction::kWait},
      {"a job that may not move keeps its devices",
       false,
       3600,
       0,
       0,
       AllocAction::kKeep,
       {"big:0", "small:0"},
       AllocAction::kWait},
      {"a waiting job of lower priority makes no room",
       true,
       3600,
       30,
       -1,
       AllocAction::kGrow,
       {"big:0", "small:0", "small:1"},
       AllocAction::kWait},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    Fixture f;
    f.Group("big", 1).Group("small", 2);
    f.Running(1, "alice", {{{"big", 4}, {"small", 1}}}, {"big:0", "small:0"}, row.movable,
              row.remaining_s, row.move_cost_s);
    f.Waiting(2, "bob", {{{"big", 4}, {"small", 0}}}, 1, 1, row.bobs_priority);
    const Allocation a = f.Run();
    EXPECT_EQ(Of(a, 1).action, row.alices) << Of(a, 1).reason;
    EXPECT_EQ(Of(a, 1).devices, row.alices_devices) << Of(a, 1).reason;
    EXPECT_EQ(Of(a, 2).action, row.bobs) << Of(a, 2).reason;
    if (row.bobs == AllocAction::kStart) {
      EXPECT_EQ(Of(a, 2).devices, DeviceSet{"big:0"});
      EXPECT_NE(Of(a, 1).reason.find("moves to small:0,small:1: job 2 of bob"), std::string::npos)
          << Of(a, 1).reason;
    }
  }
}

// Alice's job (one device at most) runs 10x faster on the big device than on
// the small one; bob's fits only the big one. Making room puts alice on the
// small device and bob on the big one; swapping them back would raise the
// normalized sum (alice gains more than bob loses) but leave bob on a device
// he has no plan on: no such trade. Bob starts on big:0 when the move pays,
// and otherwise waits, never "starts" where he cannot run.
TEST(SharePolicyTest, NoTradeLeavesAJobOnDevicesItHasNoPlanOn) {
  for (const double move_cost_s : {0.0, 1e6}) {
    SCOPED_TRACE(move_cost_s == 0 ? "a free move" : "a move that never pays");
    Fixture f;
    f.Group("big", 1).Group("small", 1);
    f.Running(1, "alice", {{{"big", 10}, {"small", 1}}}, {"big:0"}, true, 3600, move_cost_s);
    f.Waiting(2, "bob", {{{"big", 4}, {"small", 0}}}, 1);
    const Allocation a = f.Run();
    if (move_cost_s == 0) {
      EXPECT_EQ(Of(a, 1).action, AllocAction::kMove) << Of(a, 1).reason;
      EXPECT_EQ(Of(a, 1).devices, DeviceSet{"small:0"});
      EXPECT_EQ(Of(a, 2).action, AllocAction::kStart) << Of(a, 2).reason;
      EXPECT_EQ(Of(a, 2).devices, DeviceSet{"big:0"});
    } else {
      EXPECT_EQ(Of(a, 1).action, AllocAction::kKeep) << Of(a, 1).reason;
      EXPECT_EQ(Of(a, 2).action, AllocAction::kWait) << Of(a, 2).reason;
    }
    EXPECT_GT(Of(a, 2).action == AllocAction::kWait ? 1.0 : Of(a, 2).rate, 0) << Of(a, 2).reason;
  }
}

// The same move is onto none of alice's devices: a restart from her
// checkpoint, charged its own cost. Free moves and a free restart make it; a
// restart that costs more than it gains does not, though a re-form would be
// free.
TEST(SharePolicyTest, AMoveOntoNoneOfAJobsDevicesIsChargedItsRestartCost) {
  for (const double restart_cost_s : {0.0, 1e6}) {
    SCOPED_TRACE(restart_cost_s == 0 ? "a restart costs what a move does" : "a costly restart");
    Fixture f;
    f.Group("big", 1).Group("small", 1);
    f.Running(1, "alice", {{{"big", 10}, {"small", 1}}}, {"big:0"}, true, 3600, 0);
    f.RestartCost(1, restart_cost_s);
    f.Waiting(2, "bob", {{{"big", 4}, {"small", 0}}}, 1);
    const Allocation a = f.Run();
    if (restart_cost_s == 0) {
      EXPECT_EQ(Of(a, 1).action, AllocAction::kMove) << Of(a, 1).reason;
      EXPECT_EQ(Of(a, 2).action, AllocAction::kStart) << Of(a, 2).reason;
    } else {
      EXPECT_EQ(Of(a, 1).action, AllocAction::kKeep) << Of(a, 1).reason;
      EXPECT_EQ(Of(a, 2).action, AllocAction::kWait) << Of(a, 2).reason;
    }
  }
}

// Bob's gang job needs 4 of 5 devices: one is free, his own job holds one,
// and alice's job (at its minimum of 3) the others. It goes back to the
// queue for his when his would wait longer than it runs and alice's has more
// than that left on those devices, when it may restart (and has restarted
// fewer than max_restarts times), is of no higher priority and her weighted
// share is no smaller than his; else bob's waits.
TEST(SharePolicyTest, ARunningJobGoesBackToTheQueueForAShorterGangJob) {
  struct Row {
    const char* name;
    double bobs_run_s;          // on 4 devices; 0: work unknown
    double alices_remaining_s;  // on her 3 devices; 0: unknown
    bool requeueable;
    bool movable;
    double alices_weight;
    int64_t alices_priority;
    bool requeued;
    int64_t alices_restarts = 0;
  };
  const Row rows[] = {
      {"a short gang job: hers goes back to the queue", 600, 3600, true, true, 1, 0, true},
      {"no shorter than what hers has left there: waits", 2700, 3600, true, true, 1, 0, false},
      {"just shorter: hers goes", 2600, 3600, true, true, 1, 0, true},
      {"hers may not restart: waits", 600, 3600, false, true, 1, 0, false},
      {"hers not movable now: waits", 600, 3600, true, false, 1, 0, false},
      {"her weighted share is smaller: waits", 600, 3600, true, true, 4, 0, false},
      {"hers of a higher priority: waits", 600, 3600, true, true, 1, 1, false},
      {"his work unknown: waits", 0, 3600, true, true, 1, 0, false},
      {"her end unknown: waits", 600, 0, true, true, 1, 0, false},
      {"hers restarted once: goes", 600, 3600, true, true, 1, 0, true, 1},
      {"hers restarted twice already: waits", 600, 3600, true, true, 1, 0, false, 2},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    Fixture f;
    f.Group("a", 5);
    f.Running(1, "alice", {}, {"a:0", "a:1", "a:2"}, row.movable, row.alices_remaining_s, 60);
    f.With(1, [&](AllocJob& j) {
      j.min_devices = 3;
      j.requeueable = row.requeueable;
      j.priority = row.alices_priority;
      j.restarts = row.alices_restarts;
    });
    f.Running(3, "bob", {}, {"a:3"}, false, 0, 0);
    f.Waiting(2, "bob", {}, 0, 4).Work(2, row.bobs_run_s * 4);
    f.Weight("alice", row.alices_weight);
    const Allocation a = f.Run();
    if (row.requeued) {
      EXPECT_EQ(Of(a, 1).action, AllocAction::kRequeue) << Of(a, 1).reason;
      EXPECT_TRUE(Of(a, 1).devices.empty());
      EXPECT_NE(Of(a, 1).reason.find("goes back to the queue: job 2 of bob needs 4 devices"),
                std::string::npos)
          << Of(a, 1).reason;
      EXPECT_EQ(Of(a, 2).action, AllocAction::kStart) << Of(a, 2).reason;
      EXPECT_EQ(Of(a, 2).devices, (DeviceSet{"a:0", "a:1", "a:2", "a:4"}));
    } else {
      EXPECT_NE(Of(a, 1).action, AllocAction::kRequeue) << Of(a, 1).reason;
      const DeviceSet& hers = Of(a, 1).devices;  // hers still, a:4 too when it helps
      EXPECT_TRUE(hers.contains("a:0") && hers.contains("a:1") && hers.contains("a:2"));
      EXPECT_EQ(Of(a, 2).action, AllocAction::kWait) << Of(a, 2).reason;
    }
    EXPECT_EQ(Of(a, 3).action, AllocAction::kKeep);
  }
}

// Alice's job has run on the slow device since it started, bob's on the fast
// one (same speeds: no trade gains the lab anything); carol's jobs hold the
// middle device and wait. Every fair share is one device, the middle one
// (rate 10). Where it is alice's would finish 2.5x its time alone on that
// share; they swap devices when that is above the bound, both may restart
// from a checkpoint and may move now, and bob's, with what he has done on the
// fast device, stays within the bound on the slow one.
TEST(SharePolicyTest, AJobBehindItsFairShareSwapsItsSlowDeviceWithAJobAheadOfIt) {
  struct Row {
    const char* name;
    double bobs_age_s;  // he has run at 20 for all of it, of 36000 samples
    double bound;       // ShareOptions::catch_up_above
    bool alices_requeueable;
    bool bobs_movable;
    bool swapped;
  };
  const Row rows[] = {
      {"hers behind, his ahead: they swap", 1000, 2.0, true, true, true},
      {"hers within a looser bound: kept", 1000, 3.0, true, true, false},
      {"the catch-up off: kept", 1000, 0, true, true, false},
      {"his would end beyond the bound on the slow one: kept", 100, 2.0, true, true, false},
      {"hers may not restart: kept", 1000, 2.0, false, true, false},
      {"his not movable now: kept", 1000, 2.0, true, false, false},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    Fixture f;
    f.Group("fast", 1).Group("mid", 1).Group("slow", 1);
    f.options.catch_up_above = row.bound;
    const Speeds speeds{{{"fast", 20}, {"mid", 10}, {"slow", 4}}};
    // Alice's: 1000 s on the slow device, 32000 samples left (8000 s there).
    f.Running(1, "alice", speeds, {"slow:0"}, true, 8000, 60);
    f.With(1, [&](AllocJob& j) {
      j.max_devices = 1;
      j.requeueable = row.alices_requeueable;
      j.age_s = 1000;
      j.work_done = 4000;
    });
    const double bobs_done = 20 * row.bobs_age_s;
    f.Running(2, "bob", speeds, {"fast:0"}, row.bobs_movable, (36000 - bobs_done) / 20, 60);
    f.With(2, [&](AllocJob& j) {
      j.max_devices = 1;
      j.requeueable = true;
      j.age_s = row.bobs_age_s;
      j.work_done = bobs_done;
    });
    f.Running(3, "carol", speeds, {"mid:0"}, false, 0, 0);
    f.Waiting(4, "carol", speeds, 1).Work(4, 1e9);
    const Allocation a = f.Run();
    EXPECT_EQ(Of(a, 4).action, AllocAction::kWait) << Of(a, 4).reason;
    EXPECT_EQ(Of(a, 3).action, AllocAction::kKeep);
    if (row.swapped) {
      EXPECT_EQ(Of(a, 1).action, AllocAction::kMove) << Of(a, 1).reason;
      EXPECT_EQ(Of(a, 1).devices, DeviceSet{"fast:0"});
      EXPECT_TRUE(Of(a, 1).reason.starts_with("moves to fast:0: job 2 of bob takes its devices"))
          << Of(a, 1).reason;
      EXPECT_NE(Of(a, 1).reason.find("; where it is it would finish 2.5x its time alone on its "
                                     "fair share; it swaps slow:0 for fast:0 (1.4x at worst"),
                std::string::npos)
          << Of(a, 1).reason;
      EXPECT_EQ(Of(a, 2).action, AllocAction::kMove) << Of(a, 2).reason;
      EXPECT_EQ(Of(a, 2).devices, DeviceSet{"slow:0"});
      EXPECT_NE(Of(a, 2).reason.find("; job 1 of alice would finish 2.5x its time alone on its "
                                     "fair share where it is; it swaps fast:0 for slow:0"),
                std::string::npos)
          << Of(a, 2).reason;
    } else {
      EXPECT_EQ(Of(a, 1).action, AllocAction::kKeep) << Of(a, 1).reason;
      EXPECT_EQ(Of(a, 2).action, AllocAction::kKeep) << Of(a, 2).reason;
    }
  }
}

// Alice's job, far behind its fair share, holds fast:0. This round's trade
// gives fast:0 to bob's (which gains most from it) and alice's the slow
// device; the catch-up then swaps alice's onto carol's fast:1, which ends
// within the bound there. Alice's would only trade one fast device for
// another: no move (a restart from its checkpoint for nothing). Nor do bob's
// and carol's trade: carol's ends in 5 s, before her move would pay.
TEST(SharePolicyTest, ACatchUpThatOnlySwapsOneFastDeviceForAnotherIsNoMove) {
  Fixture f;
  f.Group("fast", 2).Group("slow", 1);
  f.options.catch_up_above = 2.0;
  auto restartable = [](double age_s, double work_done) {
    return [=](AllocJob& j) {
      j.max_devices = 1;
      j.requeueable = true;
      j.age_s = age_s;
      j.work_done = work_done;
    };
  };
  // Alice's: 2000 s left at 10 a second, 3x behind its fair share already.
  f.Running(1, "alice", {{{"fast", 10}, {"slow", 5}}}, {"fast:0"}, true, 2000, 60);
  f.With(1, restartable(10000, 20000));
  // Bob's: young, 10x faster on a fast device.
  f.Running(2, "bob", {{{"fast", 30}, {"slow", 3}}}, {"slow:0"}, true, 10000, 60);
  f.With(2, restartable(100, 300));
  // Carol's: about to end, within the bound even on the slow device.
  f.Running(3, "carol", {{{"fast", 10}, {"slow", 2}}}, {"fast:1"}, true, 5, 60);
  f.With(3, restartable(95, 950));
  const Allocation a = f.Run();
  for (int64_t id : {1, 2, 3}) {
    EXPECT_EQ(Of(a, id).action, AllocAction::kKeep) << id << ": " << Of(a, id).reason;
  }
  EXPECT_EQ(Of(a, 1).devices, DeviceSet{"fast:0"});
}

TEST(SharePolicyTest, ARunningJobGrowsOntoFreeDevicesAndPrefersItsOwn) {
  Fixture f;
  f.Group("a", 4);
  f.Running(1, "alice", {}, {"a:1"}, true, 3600, 30);
  const Allocation a = f.Run();
  EXPECT_EQ(Of(a, 1).action, AllocAction::kGrow);
  EXPECT_EQ(Of(a, 1).devices, (DeviceSet{"a:0", "a:1", "a:2", "a:3"}));
}

// The fill adds one device at a time. A job runs 1.0 a device on up to four
// "fast" devices, 0.7 a device on "other" ones, and at half the slowest
// device's pace on any mix of the two (a slow link between them): from four
// fast devices (4.0) no single device helps, while eight other ones run it at
// 5.6. Regroup plans it once on its devices and the free ones and takes the
// eight; with a user limit of four devices it keeps the four fast ones.
TEST(SharePolicyTest, AJobTakesTheSetItsPlanPrefersOverWhatTheFillLeftIt) {
  for (const int64_t limit : {0, 4}) {
    SCOPED_TRACE(limit == 0 ? "no limit" : "a user limit of 4 devices");
    std::vector<ShareDevice> devices;
    for (int i = 0; i < 4; ++i) devices.push_back({"fast:" + std::to_string(i), "fast"});
    for (int i = 0; i < 8; ++i) devices.push_back({"other:" + std::to_string(i), "other"});
    ShareHooks hooks;
    hooks.rate = [](const AllocJob& job, const DeviceSet& on) -> Result<RateOnDevices> {
      DeviceSet fast, other;
      for (const std::string& d : on) (d.starts_with("fast") ? fast : other).insert(d);
      auto cap = [&](DeviceSet set) {
        while (job.max_devices > 0 && static_cast<int64_t>(set.size()) > job.max_devices) {
          set.erase(std::prev(set.end()));
        }
        return set;
      };
      fast = cap(fast);
      other = cap(other);
      RateOnDevices best{static_cast<double>(fast.size()), fast};
      if (0.7 * static_cast<double>(other.size()) > best.rate) {
        best = {0.7 * static_cast<double>(other.size()), other};
      }
      DeviceSet mixed = cap(on);
      const double mixed_rate = 0.35 * static_cast<double>(mixed.size());
      if (!fast.empty() && !other.empty() && mixed_rate > best.rate) best = {mixed_rate, mixed};
      return best;
    };
    AllocJob job;
    job.id = 1;
    job.user = "carol";
    UserPolicies policies;
    if (limit > 0) policies.users["carol"].max_devices = limit;
    Result<Allocation> a = Allocate({job}, devices, policies, hooks, ShareOptions{});
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    const AllocDecision& d = Of(*a, 1);
    EXPECT_EQ(d.action, AllocAction::kStart) << d.reason;
    if (limit == 0) {
      EXPECT_EQ(d.devices.size(), 8u) << d.reason;
      EXPECT_TRUE(std::all_of(d.devices.begin(), d.devices.end(), [](const std::string& x) {
        return x.starts_with("other");
      })) << d.reason;
      EXPECT_NEAR(d.rate, 5.6, 1e-9);
    } else {
      EXPECT_EQ(d.devices, (DeviceSet{"fast:0", "fast:1", "fast:2", "fast:3"})) << d.reason;
    }
  }
}

TEST(SharePolicyTest, DevicesThatHelpNoJobStayFree) {
  // Scaling 0.3: a second device lowers the job's throughput.
  Fixture f;
  f.Group("a", 4).Waiting(1, "alice", {{}, 0.3});
  const Allocation a = f.Run();
  EXPECT_EQ(Of(a, 1).devices.size(), 1u);
  // min_gain: a fourth device adding 1 % of its fair throughput is not taken.
  Fixture g;
  g.Group("a", 4).Waiting(1, "alice", {{}, 0.99});
  g.options.min_gain = 0.5;
  EXPECT_LT(Of(g.Run(), 1).devices.size(), 4u);
}

TEST(SharePolicyTest, UserLimitsHoldJobsAndBoundTheirDevices) {
  Fixture f;
  f.Group("a", 4);
  UserPolicy alice;
  alice.max_devices = 2;
  alice.max_running_jobs = 1;
  f.Policy("alice", alice);
  f.Waiting(1, "alice", {}).Waiting(2, "alice", {});
  const Allocation a = f.Run();
  EXPECT_EQ(Of(a, 1).devices.size(), 2u);
  EXPECT_EQ(Of(a, 2).action, AllocAction::kWait);
  EXPECT_NE(Of(a, 2).reason.find("held by a user limit: alice runs 1 of 1 job allowed"),
            std::string::npos)
      << Of(a, 2).reason;
}

TEST(SharePolicyTest, AUserWithManyJobsDoesNotKeepAnotherUsersJobWaiting) {
  Fixture f;
  f.Group("a", 3);
  for (int64_t id = 1; id <= 5; ++id) f.Waiting(id, "bob", {});
  f.Waiting(6, "alice", {});
  const Allocation a = f.Run();
  EXPECT_EQ(Of(a, 6).action, AllocAction::kStart);
  size_t bob_started = 0;
  for (int64_t id = 1; id <= 5; ++id) bob_started += Of(a, id).action == AllocAction::kStart;
  EXPECT_EQ(bob_started, 2u);
}

TEST(SharePolicyTest, WithThePlannerEveryDeviceIsGivenOnceAndBothJobsRun) {
  const ClusterSnapshot cluster =
      ClusterBuilder().Node("fast").Gpus(2, "A", 80, 20).Node("slow").Gpus(2, "B", 16, 5).Build();
  std::vector<ShareDevice> devices;
  for (const Node& n : cluster.nodes) {
    for (const Device& d : n.devices) {
      devices.push_back({DeviceId{n.name, d.index}.ToString(), n.name + "/" + d.type});
    }
  }
  ShareHooks hooks;
  int64_t calls = 0;
  hooks.rate = [&](const AllocJob& job, const DeviceSet& on) -> Result<RateOnDevices> {
    ++calls;
    ClusterSnapshot snap = cluster;
    for (Node& n : snap.nodes) {
      for (Device& d : n.devices) d.busy = !on.contains(DeviceId{n.name, d.index}.ToString());
    }
    JobRequest request = Train(32);
    request.max_devices = static_cast<int>(job.max_devices);
    Result<PlanSet> plans = MakePlans(snap, MediumModel(), request);
    if (!plans.ok() || plans->plans.empty()) return RateOnDevices{};
    RateOnDevices r;
    r.rate = 32 / plans->plans.front().predicted.step_s;
    for (const DeviceId& d : plans->plans.front().Devices()) r.used.insert(d.ToString());
    return r;
  };
  std::vector<AllocJob> jobs(2);
  jobs[0].id = 1;
  jobs[0].user = "alice";
  jobs[1].id = 2;
  jobs[1].user = "bob";
  Result<Allocation> a = Allocate(jobs, devices, UserPolicies{}, hooks);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  DeviceSet seen;
  for (const AllocDecision& d : a->jobs) {
    EXPECT_EQ(d.action, AllocAction::kStart) << d.reason;
    EXPECT_GT(d.rate, 0);
    EXPECT_GT(d.fair_rate, 0);
    for (const std::string& dev : d.devices) EXPECT_TRUE(seen.insert(dev).second) << dev;
  }
  EXPECT_GT(a->normalized_total, 1.0);
  EXPECT_EQ(a->rate_calls, calls);  // each job and device set asked once
}

TEST(SharePolicyTest, TheRateHookIsRequired) {
  Result<Allocation> a = Allocate({}, {}, UserPolicies{}, ShareHooks{});
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), StatusCode::kInvalidArgument);
}

// Jobs the caller lists wrongly get an error naming them, not an exception: a
// held device that is not among the devices (once tesserad's, for a rank on a
// node gone suspect), or one id twice. Each with another job, so that the
// policy would trade between them.
TEST(SharePolicyTest, JobsListedWronglyAreAnErrorNamingThem) {
  struct Row {
    std::string name;
    std::vector<AllocJob> jobs;
    std::string says;
  };
  AllocJob held_elsewhere;
  held_elsewhere.id = 1;
  held_elsewhere.user = "alice";
  held_elsewhere.held = {"a:0", "gone:0"};
  held_elsewhere.movable = true;
  AllocJob other;
  other.id = 2;
  other.user = "bob";
  other.held = {"a:1"};
  other.movable = true;
  AllocJob twice = other;
  twice.held.clear();
  const std::vector<Row> rows = {
      {"held_device_not_listed", {held_elsewhere, other}, "job 1 holds gone:0"},
      {"id_twice", {other, twice}, "job 2 is listed twice"},
  };
  const std::vector<ShareDevice> devices = {{"a:0", "a"}, {"a:1", "a"}, {"b:0", "b"}};
  ShareHooks hooks;
  hooks.rate = [](const AllocJob&, const DeviceSet& on) -> Result<RateOnDevices> {
    return RateOnDevices{static_cast<double>(on.size()), on};
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    Result<Allocation> a = Allocate(row.jobs, devices, UserPolicies{}, hooks);
    ASSERT_FALSE(a.ok());
    EXPECT_EQ(a.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(a.status().message().find(row.says), std::string::npos) << a.status().ToString();
  }
}

}  // namespace
}  // namespace tessera::scheduler::testing
