#include "daemon/controller/job_state_machine.h"

#include <utility>

#include "common/enum_names.h"

namespace tessera::daemon {
namespace {

using api::JobState;

constexpr EnumName<JobEvent> kEventNames[] = {
    {JobEvent::kPlan, "plan"},
    {JobEvent::kLaunch, "launch"},
    {JobEvent::kAllRunning, "all_running"},
    {JobEvent::kRankFailed, "rank_failed"},
    {JobEvent::kNodeLost, "node_lost"},
    {JobEvent::kRetry, "retry"},
    {JobEvent::kSucceed, "succeed"},
    {JobEvent::kFail, "fail"},
    {JobEvent::kCancel, "cancel"},
    {JobEvent::kRanksDropped, "ranks_dropped"},
    {JobEvent::kReformed, "reformed"},
    {JobEvent::kRanksJoined, "ranks_joined"},
    {JobEvent::kMoved, "moved"},
};
static_assert(IsValidNameTable(kEventNames));

Status Refuse(JobState current, JobEvent event, std::string_view why) {
  std::string msg = "event '" + std::string(JobEventName(event)) + "' is not allowed in state '" +
                    std::string(api::JobStateName(current)) + "'";
  if (!why.empty()) msg += ": " + std::string(why);
  return FailedPrecondition(std::move(msg));
}

JobStep Step(JobState next, int64_t attempts_used, std::string reason) {
  return JobStep{next, attempts_used, false, std::move(reason)};
}

std::string Used(int64_t counted, int64_t max_attempts, int64_t moved_attempts) {
  std::string used = std::to_string(counted) + " of " + std::to_string(max_attempts) + " used";
  if (moved_attempts > 0) {
    used += ", " + std::to_string(moved_attempts) + " more ended in a move and do not count";
  }
  return used;
}

}  // namespace

std::string_view JobEventName(JobEvent event) { return NameOf(kEventNames, event); }

std::optional<JobEvent> ParseJobEvent(std::string_view name) {
  return ParseName(kEventNames, name);
}

Result<JobStep> NextJobState(JobState current, JobEvent event, int64_t attempts_used,
                             int64_t max_attempts, int64_t moved_attempts) {
  if (attempts_used < 0) return InvalidArgument("attempts used must be >= 0", "attempt");
  if (max_attempts < 1) return InvalidArgument("max_attempts must be >= 1", "max_attempts");
  if (moved_attempts < 0 || moved_attempts > attempts_used) {
    return InvalidArgument("moved attempts must be between 0 and the attempts used", "attempt");
  }
  const int64_t counted = attempts_used - moved_attempts;
  if (api::IsTerminal(current)) return Refuse(current, event, "the job has ended");

  // Every non-terminal state accepts Fail and Cancel.
  if (event == JobEvent::kFail) return Step(JobState::kFailed, attempts_used, "failed");
  if (event == JobEvent::kCancel) return Step(JobState::kCancelled, attempts_used, "cancelled");

  switch (current) {
    case JobState::kPending:
      if (event == JobEvent::kPlan) return Step(JobState::kPlanned, attempts_used, "planned");
      break;
    case JobState::kPlanned:
      if (event == JobEvent::kLaunch) {
        if (counted >= max_attempts) {
          return Refuse(current, event,
                        "no attempts left (" + Used(counted, max_attempts, moved_attempts) + ")");
        }
        return Step(JobState::kStarting, attempts_used + 1,
                    "launching attempt " + std::to_string(attempts_used + 1));
      }
      if (event == JobEvent::kNodeLost) {
        return Step(JobState::kPending, attempts_used, "a planned node was lost; re-planning");
      }
      break;
    case JobState::kStarting:
      if (event == JobEvent::kAllRunning) {
        return Step(JobState::kRunning, attempts_used, "every rank runs");
      }
      [[fallthrough]];
    case JobState::kRunning:
      if (event == JobEvent::kRankFailed) {
        return Step(JobState::kRecovering, attempts_used, "a rank failed");
      }
      if (event == JobEvent::kNodeLost) {
        return Step(JobState::kRecovering, attempts_used, "a node was lost");
      }
      if (current == JobState::kRunning && event == JobEvent::kSucceed) {
        return Step(JobState::kSucceeded, attempts_used, "succeeded");
      }
      if (current == JobState::kRunning && event == JobEvent::kRanksDropped) {
        return Step(JobState::kRunning, attempts_used, "a lost node's ranks were dropped");
      }
      if (current == JobState::kRunning && event == JobEvent::kReformed) {
        return Step(JobState::kRunning, attempts_used, "the ranks re-formed");
      }
      if (current == JobState::kRunning && event == JobEvent::kRanksJoined) {
        return Step(JobState::kRunning, attempts_used, "new ranks joined");
      }
      if (current == JobState::kRunning && event == JobEvent::kMoved) {
        return Step(JobState::kPending, attempts_used, "stopped to move; re-planning");
      }
      break;
    case JobState::kRecovering:
      if (event == JobEvent::kRetry) {
        if (counted >= max_attempts) {
          JobStep step =
              Step(JobState::kFailed, attempts_used,
                   "attempts exhausted (" + Used(counted, max_attempts, moved_attempts) + ")");
          step.attempts_exhausted = true;
          return step;
        }
        return Step(JobState::kPending, attempts_used,
                    "retrying (" + Used(counted, max_attempts, moved_attempts) + ")");
      }
      break;
    case JobState::kSucceeded:
    case JobState::kFailed:
    case JobState::kCancelled:
      break;
  }
  return Refuse(current, event, "");
}

}  // namespace tessera::daemon
