// JobStateMachine: the allowed life-cycle transitions of a job, as a pure
// function.
//
// Purpose: one place that says which (state, event) pairs are legal and what
// they lead to. The store does not enforce this table (it only compares and
// sets the state); the control plane and the reconciler ask NextJobState
// before every TransitionJob.
//
//   pending    --Plan-------> planned
//   planned    --Launch-----> starting   (starts attempt attempts_used + 1)
//   planned    --NodeLost---> pending    (plan invalid before launch; no attempt used)
//   starting   --AllRunning-> running
//   starting   --RankFailed-> recovering
//   starting   --NodeLost---> recovering
//   running    --RankFailed-> recovering
//   running    --NodeLost---> recovering
//   running    --Succeed----> succeeded
//   running    --RanksDropped-> running  (an infer attempt goes on without the
//                                       ranks of a lost node; no attempt used)
//   running    --Reformed---> running    (a train attempt's ranks re-formed)
//   running    --RanksJoined-> running   (new ranks join a running infer attempt
//                                       on devices that became free)
//   running    --Moved------> pending    (the share round stopped a train attempt
//                                       to restart it from its checkpoint on
//                                       other devices; the attempt is not
//                                       counted against max_attempts)
//   recovering --Retry------> pending    (attempts left) | failed (attempts exhausted)
//   any non-terminal --Fail---> failed
//   any non-terminal --Cancel-> cancelled
// Every other pair is refused with kFailedPrecondition and a reason.
//
// Ownership: values only. Thread safety: pure functions, safe anywhere.
#ifndef TESSERA_DAEMON_CONTROLLER_JOB_STATE_MACHINE_H_
#define TESSERA_DAEMON_CONTROLLER_JOB_STATE_MACHINE_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "api/types.h"
#include "common/status.h"

namespace tessera::daemon {

enum class JobEvent {
  kPlan,          // the planner chose a plan
  kLaunch,        // ranks of a new attempt are being launched
  kAllRunning,    // every rank of the attempt reported running
  kRankFailed,    // a rank exited abnormally
  kNodeLost,      // a node holding (or planned for) the job was declared dead
  kRetry,         // re-queue after a failed attempt
  kSucceed,       // every rank finished successfully
  kFail,          // give up: unrecoverable error
  kCancel,        // a user or admin cancelled the job
  kRanksDropped,  // a lost node's ranks left a running attempt that goes on
  kReformed,      // a running train attempt's ranks re-formed in a new world (a node
                  // lost, or devices gained), daemon/controller/train_reform.h
  kRanksJoined,   // new ranks joined a running infer attempt on devices that became
                  // free (JobController::GrowInference)
  kMoved,         // a running train attempt stopped (checkpoint saved) to restart on
                  // other devices (JobController::ShareForWaiting)
};

inline constexpr std::array<JobEvent, 13> kAllJobEvents = {
    JobEvent::kPlan,     JobEvent::kLaunch,       JobEvent::kAllRunning, JobEvent::kRankFailed,
    JobEvent::kNodeLost, JobEvent::kRetry,        JobEvent::kSucceed,    JobEvent::kFail,
    JobEvent::kCancel,   JobEvent::kRanksDropped, JobEvent::kReformed,   JobEvent::kRanksJoined,
    JobEvent::kMoved,
};

inline constexpr std::array<api::JobState, 8> kAllJobStates = {
    api::JobState::kPending, api::JobState::kPlanned,    api::JobState::kStarting,
    api::JobState::kRunning, api::JobState::kRecovering, api::JobState::kSucceeded,
    api::JobState::kFailed,  api::JobState::kCancelled,
};

// Stable lower-case name, e.g. "rank_failed".
std::string_view JobEventName(JobEvent event);
std::optional<JobEvent> ParseJobEvent(std::string_view name);

// The outcome of an allowed event.
struct JobStep {
  api::JobState next = api::JobState::kPending;
  int64_t attempts_used = 0;        // attempts started so far, after the step
  bool attempts_exhausted = false;  // a Retry that turned into failed
  std::string reason;               // machine-written description of the step
};

// Returns the next state for `event` in `current`, or kFailedPrecondition
// naming the state and event when the pair is not allowed. `moved_attempts`
// of the attempts used ended in a move (kMoved) and do not count.
// REQUIRES (else kInvalidArgument): 0 <= moved_attempts <= attempts_used,
// 1 <= max_attempts.
// Launch is refused when the counted attempts (attempts_used -
// moved_attempts) reach max_attempts; Retry then leads to failed with
// attempts_exhausted set.
Result<JobStep> NextJobState(api::JobState current, JobEvent event, int64_t attempts_used,
                             int64_t max_attempts, int64_t moved_attempts = 0);

}  // namespace tessera::daemon

#endif  // TESSERA_DAEMON_CONTROLLER_JOB_STATE_MACHINE_H_
