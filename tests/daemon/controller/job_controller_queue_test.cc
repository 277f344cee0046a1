// The queue shared by several users: weighted fair order, user limits
// (scheduler/queue_order.h through JobControllerOptions::users).
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tests/daemon/controller/job_controller_test_fixture.h"

namespace tessera::daemon::job_controller_test {
namespace {

class JobControllerQueueTest : public JobControllerTest {
 protected:
  // Restarts the controller with `users` as its policies.
  void UsePolicies(scheduler::UserPolicies users) {
    options_.users = std::move(users);
    controller_ = std::make_unique<JobController>(store_.get(), &clock_, options_);
    ASSERT_TRUE(controller_->Recover().ok());
  }

  // Beats a node of `devices` devices, submits a one-device job for each
  // (label, user) in that order, runs one pass, and returns each job's state
  // by its label.
  std::map<std::string, JobState> OnePass(
      int devices, const std::vector<std::pair<std::string, std::string>>& jobs) {
    Beat(MakeNode("a", devices, 20));
    std::map<std::string, api::JobId> ids;
    for (const auto& [label, user] : jobs) ids[label] = Submit(CmdSpec(1), user);
    EXPECT_TRUE(controller_->Tick().ok());
    std::map<std::string, JobState> states;
    for (const auto& [label, id] : ids) states[label] = StateOf(id);
    return states;
  }
};

using States = std::map<std::string, JobState>;

TEST_F(JobControllerQueueTest, AUserWhoQueuedManyDoesNotMakeTheOthersWaitBehindAll) {
  // bob's job is submitted last.
  EXPECT_EQ(OnePass(2, {{"a1", "alice"}, {"a2", "alice"}, {"a3", "alice"}, {"b1", "bob"}}),
            (States{{"a1", JobState::kStarting},
                    {"a2", JobState::kPending},
                    {"a3", JobState::kPending},
                    {"b1", JobState::kStarting}}))
      << "bob's job waits behind all of alice's";
}

TEST_F(JobControllerQueueTest, FifoKeepsSubmissionOrderAcrossUsers) {
  options_.ordering = scheduler::QueueOrdering::kFifo;
  UsePolicies({});
  EXPECT_EQ(
      OnePass(2, {{"a1", "alice"}, {"a2", "alice"}, {"b1", "bob"}}),
      (States{
          {"a1", JobState::kStarting}, {"a2", JobState::kStarting}, {"b1", JobState::kPending}}));
}

TEST_F(JobControllerQueueTest, AUserOfWeightTwoGetsTwoDevicesPerOneOfWeightOne) {
  scheduler::UserPolicies users;
  users.users["alice"].weight = 2;
  UsePolicies(users);
  EXPECT_EQ(OnePass(3, {{"b1", "bob"}, {"b2", "bob"}, {"a1", "alice"}, {"a2", "alice"}}),
            (States{{"a1", JobState::kStarting},
                    {"a2", JobState::kStarting},
                    {"b1", JobState::kStarting},
                    {"b2", JobState::kPending}}));
}

TEST_F(JobControllerQueueTest, LimitsHoldJobsWithTheReasonAndBoundTheirPlans) {
  scheduler::UserPolicies users;
  users.users["*"].max_running_jobs = 1;
  users.users["bob"].max_devices = 2;
  UsePolicies(users);
  Beat(MakeNode("a", 4, 20));
  const api::JobId a1 = Submit(CmdSpec(1), "alice");
  const api::JobId a2 = Submit(CmdSpec(1), "alice");
  api::JobSpec wide = CmdSpec(1);
  wide.max_devices = 4;  // bob's limit bounds it to 2
  const api::JobId b1 = Submit(wide, "bob");
  ASSERT_TRUE(controller_->Tick().ok());
  EXPECT_EQ(StateOf(a1), JobState::kStarting);
  EXPECT_EQ(StateOf(a2), JobState::kPending);
  EXPECT_EQ(controller_->WaitingReason(a2), "held by a user limit: alice runs 1 of 1 job allowed");
  ASSERT_EQ(StateOf(b1), JobState::kStarting);
  size_t ranks = 0;
  for (const api::WorkerLaunch& l : Beat(MakeNode("a", 4, 20)).desired) {
    ranks += l.key.job_id == b1 ? 1 : 0;
  }
  EXPECT_EQ(ranks, 2u) << "bob's plan exceeds his device limit";
}

TEST_F(JobControllerQueueTest, TheQueueViewShowsPlacesSharesAndReasonsAndFollowsTheStore) {
  scheduler::UserPolicies users;
  users.users["carol"].max_running_jobs = 1;
  UsePolicies(users);
  api::Node a = Joined("a", 2, 20);
  const api::JobId running = Submit(CmdSpec(1), "carol");
  ASSERT_TRUE(controller_->Tick().ok());
  ASSERT_EQ(StateOf(running), JobState::kStarting);
  const api::JobId wide = Submit(CmdSpec(2), "alice");    // needs both devices
  const api::JobId carols = Submit(CmdSpec(1), "carol");  // carol's limit holds it
  ASSERT_TRUE(controller_->Tick().ok());
  std::vector<api::QueueRow> q = controller_->Queue();
  ASSERT_EQ(q.size(), 2u);
  EXPECT_EQ(q[0].id, wide);
  EXPECT_EQ(q[0].position, 1);
  EXPECT_EQ(q[0].user, "alice");
  EXPECT_EQ(q[0].reason, controller_->WaitingReason(wide));
  EXPECT_FALSE(q[0].reason.empty());
  EXPECT_EQ(q[1].id, carols);
  EXPECT_EQ(q[1].position, 0) << "held jobs have no position";
  EXPECT_DOUBLE_EQ(q[1].user_share, 1.0) << "carol holds one device at weight 1";
  EXPECT_EQ(q[1].reason, "held by a user limit: carol runs 1 of 1 job allowed");

  // Every device busy: a pass runs once a second, so a new submission shows
  // within a second, with why it waits.
  auto cancel = [&](api::JobId id) {
    JobTransition t{id, JobState::kPending, JobState::kCancelled,  "cancelled",
                    0,  std::nullopt,       clock_.NowUnixMillis()};
    ASSERT_TRUE(store_->TransitionJob(t).ok());
  };
  cancel(wide);  // the head, which a one-device job must not delay
  const api::JobId fill = Submit(CmdSpec(1), "bob");
  ASSERT_TRUE(controller_->Tick().ok());
  ASSERT_EQ(StateOf(fill), JobState::kStarting);
  const api::JobId late = Submit(CmdSpec(1), "dave");
  clock_.Advance(std::chrono::milliseconds(1100));
  Beat(a, Running(Beat(a)));  // the node stays healthy, its ranks run
  ASSERT_TRUE(controller_->Tick().ok());
  q = controller_->Queue();
  ASSERT_EQ(q.size(), 2u);
  EXPECT_EQ(q[0].id, late) << "dave holds nothing: first";
  EXPECT_EQ(q[0].position, 1);
  EXPECT_EQ(q[0].reason, "no free device (2 in the cluster); busy, excluded: a:0, a:1");
  EXPECT_EQ(q[1].id, carols);
  EXPECT_EQ(q[1].position, 0);

  // The queue empties as jobs leave it.
  cancel(carols);
  cancel(late);
  clock_.Advance(std::chrono::milliseconds(1100));
  Beat(a, Running(Beat(a)));  // the node stays healthy, its ranks run
  ASSERT_TRUE(controller_->Tick().ok());
  EXPECT_TRUE(controller_->Queue().empty());
}

}  // namespace
}  // namespace tessera::daemon::job_controller_test
