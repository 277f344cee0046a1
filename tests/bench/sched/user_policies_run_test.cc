// Users' weights and limits in the simulator's runs (bench/sched/run.h, a
// cluster's UserPolicies): a heavier user's jobs finish sooner, a device limit
// holds under every policy and through growth, and jobs past a user's pending
// limit are refused at submission, as tesserad refuses them.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "bench/sched/clusters.h"
#include "bench/sched/run.h"
#include "bench/sched/sim_planner.h"
#include "bench/sched/trace.h"

namespace tessera::scheduler::sim {
namespace {

// Alice's and bob's `per_user` one-device denoiser jobs at once, alternating.
Trace TwoUsersAtOnce(int per_user, int64_t max_devices = 1) {
  Trace trace;
  trace.name = "two-users";
  for (int k = 0; k < 2 * per_user; ++k) {
    trace.jobs.push_back(TraceJob{.submit_s = 0,
                                  .user = k % 2 == 0 ? "alice" : "bob",
                                  .model = "denoiser-dncnn",
                                  .global_batch = 16,
                                  .steps = 3000,
                                  .min_devices = 1,
                                  .max_devices = max_devices});
  }
  return trace;
}

UserPolicies Weighted(double alice, double bob) {
  UserPolicies users;
  users.users["alice"].weight = alice;
  users.users["bob"].weight = bob;
  return users;
}

// `trace` on the demo lab with `users`, under the policies tesserad runs: the
// fair queue (rigid jobs) and the share policy (its rules).
std::vector<sim::Run> RunUnderEachPolicy(const Trace& trace, const UserPolicies& users) {
  Cluster lab = DemoLab();
  lab.users = users;
  SimPlanner planner(lab.snapshot);
  SharedOptions options;
  options.grow_min_speedup = 1.2;
  return {SimulateRigid(trace, lab, QueueOrdering::kFairShare, &planner),
          SimulateShared(trace, lab, options, &planner)};
}

double MeanEnd(const sim::Run& run, const Trace& trace, const std::string& user) {
  double sum = 0;
  int n = 0;
  for (size_t i = 0; i < run.jobs.size(); ++i) {
    if (trace.jobs[i].user != user) continue;
    EXPECT_GE(run.jobs[i].end_s, 0) << run.jobs[i].why_not;
    sum += run.jobs[i].end_s;
    ++n;
  }
  return sum / n;
}

TEST(UserPoliciesRunTest, TheHeavierUsersJobsFinishSooner) {
  const Trace trace = TwoUsersAtOnce(6);
  const std::vector<sim::Run> alice_heavy = RunUnderEachPolicy(trace, Weighted(3, 1));
  const std::vector<sim::Run> bob_heavy = RunUnderEachPolicy(trace, Weighted(1, 3));
  for (size_t p = 0; p < alice_heavy.size(); ++p) {
    SCOPED_TRACE(alice_heavy[p].policy);
    EXPECT_LT(MeanEnd(alice_heavy[p], trace, "alice"), MeanEnd(alice_heavy[p], trace, "bob"));
    EXPECT_LT(MeanEnd(bob_heavy[p], trace, "bob"), MeanEnd(bob_heavy[p], trace, "alice"));
  }
}

TEST(UserPoliciesRunTest, ADeviceLimitHoldsUnderEveryPolicyAndThroughGrowth) {
  // Alice's jobs may take any number of devices, but she may hold two; bob's
  // single job ends early, leaving the lab to her.
  Trace trace = TwoUsersAtOnce(3, /*max_devices=*/0);
  trace.jobs.erase(trace.jobs.begin() + 3, trace.jobs.end());  // alice, bob, alice
  trace.jobs[1].steps = 300;
  UserPolicies users;
  users.users["alice"].max_devices = 2;
  for (const sim::Run& run : RunUnderEachPolicy(trace, users)) {
    SCOPED_TRACE(run.policy);
    EXPECT_EQ(run.limit_breaks, 0) << run.first_limit_break;
    // Every plan and change of alice's jobs ("x2 on ...", "-> grow x3 ...")
    // holds at most two devices, and both of hers together never more:
    // each runs on one, or one waits while the other holds two.
    for (size_t i : {size_t{0}, size_t{2}}) {
      const std::string& plan = run.jobs[i].plan;
      ASSERT_GE(run.jobs[i].end_s, 0) << run.jobs[i].why_not;
      for (size_t at = plan.find('x'); at != std::string::npos; at = plan.find(" x", at + 1)) {
        const size_t digit = plan[at] == 'x' ? at + 1 : at + 2;
        EXPECT_LE(std::stoi(plan.substr(digit)), 2) << plan;
      }
    }
    const bool overlap =
        run.jobs[0].start_s < run.jobs[2].end_s && run.jobs[2].start_s < run.jobs[0].end_s;
    if (overlap) {
      EXPECT_EQ(run.jobs[0].plan.find("x2"), std::string::npos) << run.jobs[0].plan;
      EXPECT_EQ(run.jobs[2].plan.find("x2"), std::string::npos) << run.jobs[2].plan;
    }
  }
  // Without the limit her job grows past two once bob's has ended.
  const sim::Run free_run = RunUnderEachPolicy(trace, {}).back();
  bool past_two = false;
  for (size_t i : {size_t{0}, size_t{2}}) {
    past_two = past_two || free_run.jobs[i].plan.find("x3") != std::string::npos ||
               free_run.jobs[i].plan.find("x4") != std::string::npos ||
               free_run.jobs[i].plan.find("x5") != std::string::npos;
  }
  EXPECT_TRUE(past_two) << free_run.jobs[0].plan << " | " << free_run.jobs[2].plan;
}

TEST(UserPoliciesRunTest, AUserPastALimitIsCountedWithTheFirstMoment) {
  UserPolicies users;
  users.users["alice"].max_devices = 2;
  users.users["bob"].max_running_jobs = 1;
  sim::Run run;
  CheckLimits(users, {{"alice", {1, 2}}, {"bob", {1, 4}}}, 1800, &run);
  EXPECT_EQ(run.limit_breaks, 0);
  CheckLimits(users, {{"alice", {2, 3}}, {"bob", {1, 1}}}, 4500, &run);
  CheckLimits(users, {{"alice", {1, 1}}, {"bob", {2, 2}}}, 5400, &run);
  EXPECT_EQ(run.limit_breaks, 2);
  EXPECT_EQ(run.first_limit_break, "at 1.25 h alice holds 3 devices, 2 allowed");
}

TEST(UserPoliciesRunTest, AJobItsUsersLimitHoldsLeavesNoDeviceIdle) {
  // Alice's archive fills the lab; carol's short job and bob's long one take
  // their shares of it, and bob's second job waits, held by his limit of one
  // running job. When carol's job ends, its devices go back to the archive
  // while bob's second job waits (growth does not wait for a job a limit
  // holds; it did, and they stood idle until bob's first job ended).
  Trace trace;
  trace.name = "held-by-a-limit";
  trace.jobs = {{0, "alice", "colorize-unet", 32, 40'000, 1, 0, 0, JobKind::kInfer},
                {60, "carol", "denoiser-dncnn", 16, 1'000, 1, 2},
                {120, "bob", "denoiser-dncnn", 16, 8'000, 1, 1},
                {130, "bob", "denoiser-dncnn", 16, 4'000, 1, 1}};
  UserPolicies users;
  users.users["bob"].max_running_jobs = 1;
  const sim::Run run = RunUnderEachPolicy(trace, users).back();
  for (const JobOutcome& j : run.jobs) ASSERT_GE(j.end_s, 0) << j.why_not;
  EXPECT_GE(run.jobs[3].start_s, run.jobs[2].end_s) << "bob runs one job at a time";
  EXPECT_LT(run.jobs[1].end_s, run.jobs[2].end_s) << "carol's job ends while bob's waits";
  ASSERT_GT(run.time_waiting, 0);
  EXPECT_GT(run.busy_while_waiting / (run.time_waiting * run.devices), 0.99) << run.jobs[0].plan;
  EXPECT_EQ(run.limit_breaks, 0) << run.first_limit_break;
}

TEST(UserPoliciesRunTest, JobsPastAUsersPendingLimitAreRefusedAtSubmission) {
  // Six of alice's jobs at once on the demo lab; she may have two waiting.
  // Every job waits at its submission (no round ran yet), so the first two
  // are taken and the rest refused, as tesserad answers 429.
  Trace trace = TwoUsersAtOnce(6);
  std::erase_if(trace.jobs, [](const TraceJob& j) { return j.user != "alice"; });
  UserPolicies users;
  users.users["alice"].max_pending_jobs = 2;
  for (const sim::Run& run : RunUnderEachPolicy(trace, users)) {
    SCOPED_TRACE(run.policy);
    ASSERT_EQ(run.jobs.size(), 6u);
    for (size_t i = 0; i < 6; ++i) {
      if (i < 2) {
        EXPECT_GE(run.jobs[i].end_s, 0) << run.jobs[i].why_not;
      } else {
        EXPECT_LT(run.jobs[i].end_s, 0);
        EXPECT_NE(run.jobs[i].why_not.find("refused at submission: alice had 2 jobs waiting"),
                  std::string::npos)
            << run.jobs[i].why_not;
      }
    }
  }
}

}  // namespace
}  // namespace tessera::scheduler::sim
