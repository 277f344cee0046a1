// The queue users see, from a pass's decisions and from the order alone.
#include "daemon/controller/queue_view.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tessera::daemon {
namespace {

using scheduler::PassAction;
using scheduler::PassDecision;

PassDecision Decision(int64_t id, const std::string& user, PassAction action,
                      const std::string& reason = "", bool held = false, double share = 0) {
  PassDecision d;
  d.job.id = id;
  d.job.user = user;
  d.job.priority = id % 2;
  d.action = action;
  d.reason = reason;
  d.held = held;
  d.user_share = share;
  return d;
}

std::string Said(api::JobId id) { return "said about " + std::to_string(id); }

TEST(QueueViewTest, APassLeavesTheWaitingJobsInItsOrderHeldOnesLast) {
  const std::vector<PassDecision> decisions = {
      Decision(1, "alice", PassAction::kPlace),
      Decision(2, "bob", PassAction::kWait, "held by a user limit: bob runs 1 of 1 job allowed",
               /*held=*/true, 1.0),
      Decision(3, "carol", PassAction::kWait, "no free device", false, 0.5),
      Decision(4, "dave", PassAction::kNever, "cannot plan: unknown model"),
      Decision(5, "erin", PassAction::kNotReady),
      Decision(6, "alice", PassAction::kWait, "waiting behind job 3", false, 2.0),
  };
  const std::vector<api::QueueRow> rows = QueueRowsFromPass(decisions, Said);
  const std::vector<api::QueueRow> want = {
      {1, 3, "carol", 1, 0.5, "no free device"},
      {2, 5, "erin", 1, 0, "said about 5"},
      {3, 6, "alice", 0, 2.0, "waiting behind job 3"},
      {0, 2, "bob", 0, 1.0, "held by a user limit: bob runs 1 of 1 job allowed"},
  };
  EXPECT_EQ(rows, want);
}

}  // namespace
}  // namespace tessera::daemon
