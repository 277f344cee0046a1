#include "daemon/controller/job_state_machine.h"

#include <gtest/gtest.h>

#include <array>
#include <optional>
#include <set>

namespace tessera::daemon {
namespace {

using S = api::JobState;
constexpr std::optional<S> X = std::nullopt;  // refused

// The expected next state for every (state, event) pair, events in the
// order of kAllJobEvents:
//   Plan, Launch, AllRunning, RankFailed, NodeLost, Retry, Succeed, Fail, Cancel,
//   RanksDropped, Reformed, RanksJoined, Moved
struct Row {
  S state;
  std::array<std::optional<S>, 13> next;
};
const Row kExpected[] = {
    {S::kPending, {S::kPlanned, X, X, X, X, X, X, S::kFailed, S::kCancelled, X, X, X, X}},
    {S::kPlanned,
     {X, S::kStarting, X, X, S::kPending, X, X, S::kFailed, S::kCancelled, X, X, X, X}},
    {S::kStarting,
     {X, X, S::kRunning, S::kRecovering, S::kRecovering, X, X, S::kFailed, S::kCancelled, X, X, X,
      X}},
    {S::kRunning,
     {X, X, X, S::kRecovering, S::kRecovering, X, S::kSucceeded, S::kFailed, S::kCancelled,
      S::kRunning, S::kRunning, S::kRunning, S::kPending}},
    {S::kRecovering, {X, X, X, X, X, S::kPending, X, S::kFailed, S::kCancelled, X, X, X, X}},
    {S::kSucceeded, {X, X, X, X, X, X, X, X, X, X, X, X, X}},
    {S::kFailed, {X, X, X, X, X, X, X, X, X, X, X, X, X}},
    {S::kCancelled, {X, X, X, X, X, X, X, X, X, X, X, X, X}},
};

const Row& ExpectedRow(S state) {
  for (const Row& r : kExpected) {
    if (r.state == state) return r;
  }
  ADD_FAILURE() << "no expected row for " << api::JobStateName(state);
  return kExpected[0];
}

TEST(JobStateMachineTest, ExpectedTableCoversEveryState) {
  std::set<S> states;
  for (const Row& r : kExpected) states.insert(r.state);
  EXPECT_EQ(states.size(), kAllJobStates.size());
}

TEST(JobStateMachineTest, EveryStateEventPairMatchesTheTable) {
  int allowed = 0, refused = 0;
  for (S state : kAllJobStates) {
    const Row& row = ExpectedRow(state);
    for (size_t e = 0; e < kAllJobEvents.size(); ++e) {
      const JobEvent event = kAllJobEvents[e];
      SCOPED_TRACE(std::string(api::JobStateName(state)) + " + " +
                   std::string(JobEventName(event)));
      // One attempt used of three: no attempt limit is in play.
      auto step = NextJobState(state, event, /*attempts_used=*/1, /*max_attempts=*/3);
      if (row.next[e]) {
        ++allowed;
        ASSERT_TRUE(step.ok()) << step.status().ToString();
        EXPECT_EQ(step->next, *row.next[e]);
        EXPECT_FALSE(step->reason.empty());
        EXPECT_FALSE(step->attempts_exhausted);
        EXPECT_EQ(step->attempts_used, event == JobEvent::kLaunch ? 2 : 1);
      } else {
        ++refused;
        ASSERT_FALSE(step.ok());
        EXPECT_EQ(step.status().code(), StatusCode::kFailedPrecondition);
        EXPECT_NE(step.status().message().find(JobEventName(event)), std::string::npos);
        EXPECT_NE(step.status().message().find(api::JobStateName(state)), std::string::npos);
      }
    }
  }
  EXPECT_EQ(allowed + refused, 104);
  EXPECT_EQ(allowed, 24);
}

struct AttemptCase {
  S state;
  JobEvent event;
  int64_t used;
  int64_t max;
  std::optional<S> next;  // nullopt: refused
  int64_t used_after;
  bool exhausted;
  int64_t moved = 0;  // attempts that ended in a move: not counted
};

TEST(JobStateMachineTest, AttemptsAreCounted) {
  const AttemptCase cases[] = {
      {S::kPlanned, JobEvent::kLaunch, 0, 3, S::kStarting, 1, false},
      {S::kPlanned, JobEvent::kLaunch, 2, 3, S::kStarting, 3, false},
      {S::kPlanned, JobEvent::kLaunch, 3, 3, X, 0, false},
      {S::kRecovering, JobEvent::kRetry, 1, 3, S::kPending, 1, false},
      {S::kRecovering, JobEvent::kRetry, 2, 3, S::kPending, 2, false},
      {S::kRecovering, JobEvent::kRetry, 3, 3, S::kFailed, 3, true},
      {S::kRecovering, JobEvent::kRetry, 1, 1, S::kFailed, 1, true},
      {S::kRunning, JobEvent::kRankFailed, 3, 3, S::kRecovering, 3, false},
      // Moves keep the attempts used; only the ones that did not end in a move count.
      {S::kRunning, JobEvent::kMoved, 1, 1, S::kPending, 1, false},
      {S::kPlanned, JobEvent::kLaunch, 1, 1, S::kStarting, 2, false, /*moved=*/1},
      {S::kPlanned, JobEvent::kLaunch, 3, 2, S::kStarting, 4, false, /*moved=*/2},
      {S::kPlanned, JobEvent::kLaunch, 3, 2, X, 0, false, /*moved=*/1},
      {S::kRecovering, JobEvent::kRetry, 3, 2, S::kPending, 3, false, /*moved=*/2},
      {S::kRecovering, JobEvent::kRetry, 2, 1, S::kFailed, 2, true, /*moved=*/1},
  };
  for (const AttemptCase& c : cases) {
    SCOPED_TRACE(std::string(api::JobStateName(c.state)) + " + " +
                 std::string(JobEventName(c.event)) + " used=" + std::to_string(c.used) +
                 " max=" + std::to_string(c.max) + " moved=" + std::to_string(c.moved));
    auto step = NextJobState(c.state, c.event, c.used, c.max, c.moved);
    if (!c.next) {
      ASSERT_FALSE(step.ok());
      EXPECT_EQ(step.status().code(), StatusCode::kFailedPrecondition);
      EXPECT_NE(step.status().message().find("no attempts left"), std::string::npos);
      if (c.moved > 0) {
        EXPECT_NE(step.status().message().find("ended in a move"), std::string::npos)
            << step.status().message();
      }
      continue;
    }
    ASSERT_TRUE(step.ok()) << step.status().ToString();
    EXPECT_EQ(step->next, *c.next);
    EXPECT_EQ(step->attempts_used, c.used_after);
    EXPECT_EQ(step->attempts_exhausted, c.exhausted);
    if (c.exhausted) {
      EXPECT_NE(step->reason.find("attempts exhausted"), std::string::npos) << step->reason;
    }
  }
}

TEST(JobStateMachineTest, RejectsInvalidAttemptCounts) {
  EXPECT_EQ(NextJobState(S::kPending, JobEvent::kPlan, -1, 3).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(NextJobState(S::kPending, JobEvent::kPlan, 0, 0).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(NextJobState(S::kPending, JobEvent::kPlan, 1, 3, /*moved_attempts=*/2).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(NextJobState(S::kPending, JobEvent::kPlan, 1, 3, /*moved_attempts=*/-1).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(JobStateMachineTest, EventNamesRoundTrip) {
  std::set<std::string_view> names;
  for (JobEvent e : kAllJobEvents) {
    names.insert(JobEventName(e));
    EXPECT_EQ(ParseJobEvent(JobEventName(e)), e);
  }
  EXPECT_EQ(names.size(), kAllJobEvents.size());
  EXPECT_EQ(ParseJobEvent("explode"), std::nullopt);
}

}  // namespace
}  // namespace tessera::daemon
