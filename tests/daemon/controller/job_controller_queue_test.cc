// The queue shared by several users: weighted fair order, user limits
// (scheduler/queue_order.h through JobControllerOptions::users).
#include <string>

#include "tests/daemon/controller/job_controller_test_fixture.h"

namespace tessera::daemon::job_controller_test {
namespace {

using api::JobState;

class JobControllerQueueTest : public JobControllerTest {
 protected:
  // Restarts the controller with `users` as its policies.
  void UsePolicies(scheduler::UserPolicies users) {
    options_.users = std::move(users);
    controller_ = std::make_unique<JobController>(store_.get(), &clock_, options_);
    ASSERT_TRUE(controller_->Recover().ok());
  }
};

TEST_F(JobControllerQueueTest, AUserWhoQueuedManyDoesNotMakeTheOthersWaitBehindAll) {
  Beat(MakeNode("a", 2, 20));
  const api::JobId a1 = Submit(CmdSpec(1), "alice");
  const api::JobId a2 = Submit(CmdSpec(1), "alice");
  const api::JobId a3 = Submit(CmdSpec(1), "alice");
  const api::JobId b1 = Submit(CmdSpec(1), "bob");  // submitted last
  ASSERT_TRUE(controller_->Tick().ok());
  EXPECT_EQ(StateOf(a1), JobState::kStarting);
  EXPECT_EQ(StateOf(b1), JobState::kStarting) << "bob's job waits behind all of alice's";
  EXPECT_EQ(StateOf(a2), JobState::kPending);
  EXPECT_EQ(StateOf(a3), JobState::kPending);
}

TEST_F(JobControllerQueueTest, AUserOfWeightTwoGetsTwoDevicesPerOneOfWeightOne) {
  scheduler::UserPolicies users;
  users.users["alice"].weight = 2;
  UsePolicies(users);
  Beat(MakeNode("a", 3, 20));
  const api::JobId b1 = Submit(CmdSpec(1), "bob");
  const api::JobId b2 = Submit(CmdSpec(1), "bob");
  const api::JobId a1 = Submit(CmdSpec(1), "alice");
  const api::JobId a2 = Submit(CmdSpec(1), "alice");
  ASSERT_TRUE(controller_->Tick().ok());
  EXPECT_EQ(StateOf(b1), JobState::kStarting);
  EXPECT_EQ(StateOf(a1), JobState::kStarting);
  EXPECT_EQ(StateOf(a2), JobState::kStarting);
  EXPECT_EQ(StateOf(b2), JobState::kPending);
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

}  // namespace
}  // namespace tessera::daemon::job_controller_test
