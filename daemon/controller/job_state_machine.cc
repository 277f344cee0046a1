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

}  // namespace

std::string_view JobEventName(JobEvent event) { return NameOf(kEventNames, event); }

std::optional<JobEvent> ParseJobEvent(std::string_view name) {
  return ParseName(kEventNames, name);
}

Result<JobStep> NextJobState(JobState current, JobEvent event, int64_t attempts_used,
                             int64_t max_attempts) {
  if (attempts_used < 0) return InvalidArgument("attempts used must be >= 0", "attempt");
  if (max_attempts < 1) return InvalidArgument("max_attempts must be >= 1", "max_attempts");
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
        if (attempts_used >= max_attempts) {
          return Refuse(current, event,
                        "no attempts left (" + std::to_string(attempts_used) + " of " +
                            std::to_string(max_attempts) + " used)");
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
      break;
    case JobState::kRecovering:
      if (event == JobEvent::kRetry) {
        if (attempts_used >= max_attempts) {
          JobStep step = Step(JobState::kFailed, attempts_used,
                              "attempts exhausted (" + std::to_string(attempts_used) + " of " +
                                  std::to_string(max_attempts) + " used)");
          step.attempts_exhausted = true;
          return step;
        }
        return Step(JobState::kPending, attempts_used,
                    "retrying (" + std::to_string(attempts_used) + " of " +
                        std::to_string(max_attempts) + " attempts used)");
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
