// QueuePass: one placement pass over the waiting jobs. Given the queue, what
// users hold, their policies and the busy devices, it decides for every job:
// place it now (with its plan), let it wait (with the reason users see), or
// never (it can never be planned). The controller runs one pass per tick
// (daemon/controller/job_controller.cc, PlaceQueued); bench/sched/trace_sim.cc
// replays traces through the same pass.
//
// Steps (RunQueuePass):
//   1. Order the jobs (OrderQueue, scheduler/queue_order.h): priority, then
//      users' weighted device shares (kFairShare) or submission (kFifo);
//      jobs a user's limit holds on what users hold now come last, held.
//   2. For each job in that order:
//      a. Limits, re-checked on the usage this pass has grown (a job placed
//         earlier in the pass counts against its user): a job at its user's
//         limit waits, "held by a user limit: <why>".
//      b. Its device bound: the user's device limit lowers max_devices to what
//         the limit still allows (DeviceCap).
//      c. hooks.ready: a job that is not ready (an infer job whose input is
//         still being listed) is skipped; the hook says why.
//      d. Plan it on the devices not busy (hooks.plan). kNotFound or
//         kInvalidArgument: it can never be planned (never, "cannot plan:
//         <why>"). Any other error
//         or no plan: it waits with the error's message ("no plan"). The first
//         such job that has a plan on the idle cluster (nothing busy) is the
//         head; a job that would not fit even then blocks nobody.
//      e. Behind a head, a job backfills only if it does not delay the head
//         (EASY backfill, as Slurm's). With predicted ends (hooks.running for
//         the running jobs, hooks.run_s for those placed in this pass), the
//         head can start in S seconds: at the first end by which it has a
//         plan on the devices free then (jobs whose end is unknown never
//         end). A job then backfills if it ends within S (hooks.run_s), or if
//         the head still has a plan at S with this job's devices and those of
//         the jobs backfilled past S taken too. A job backfilled in an
//         earlier pass runs, with its end, in the next, so the devices the
//         head needs stay held for it: no stream of small jobs starves it.
//         Without S (no hook, or the head fits at no predicted end), the head
//         must still have a plan once every other running job ended, on the
//         devices the jobs backfilled in this pass hold plus this job's.
//         Otherwise it waits, "waiting behind job <head> (placing it now
//         would delay that job)", with ", which can start in about N min, as
//         the running jobs' predicted ends free its devices" where S is known
//         (the head's own reason ends the same way).
//      f. Place it with its best plan (the PlanSet's first): hooks.commit
//         says which devices it now holds; they become busy (and, behind a
//         head, backfilled), and its user is charged a running job and those
//         devices, before the next job is considered.
// The pass itself does no I/O and reads no clock: everything it learns comes
// through its arguments and hooks, and the caller performs every effect (the
// controller through its hooks, a simulator from the returned decisions).
//
// Ownership: plain values; the hooks are borrowed for the call.
// Thread safety: a pure function; the hooks are called on the caller's thread,
// one at a time, in the order of the steps.
#ifndef TESSERA_SCHEDULER_QUEUE_PASS_H_
#define TESSERA_SCHEDULER_QUEUE_PASS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "scheduler/plan.h"
#include "scheduler/queue_order.h"

namespace tessera::scheduler {

// A waiting job as the pass sees it; the caller keeps the rest of the job (its
// model, batch) by id, for its plan hook.
struct PassJob {
  int64_t id = 0;  // submission order; distinct
  std::string user;
  int64_t priority = 0;  // higher first
  int64_t min_devices = 1;
  int64_t max_devices = 0;  // 0: no bound
};

enum class PassAction {
  kPlace,     // start it now, with `plan`
  kWait,      // not now; `reason` says why
  kNotReady,  // skipped: hooks.ready said not yet (and said why)
  kNever,     // it can never be planned; `reason` says why (the caller fails the job)
};
std::string_view PassActionName(PassAction action);

struct PassDecision {
  // The job as it was planned: max_devices lowered to its user's device limit.
  PassJob job;
  PassAction action = PassAction::kWait;
  // kWait and kNever: the reason users see; "" otherwise.
  std::string reason;
  // kPlace: the plan to start (the first of its PlanSet).
  std::optional<Plan> plan;
  // kWait: this job is the head, the one later jobs must not delay.
  bool head = false;
  // kWait: a user's limit holds it (step 2a).
  bool held = false;
  // Its user's weighted device share when the job was ranked (QueueEntry).
  double user_share = 0;
};

// Devices are named "node:index" (DeviceId::ToString).
using DeviceSet = std::set<std::string>;

// A running job as the backfill rule sees it (step 2e).
struct RunningHold {
  DeviceSet devices;     // what it holds
  double ends_in_s = 0;  // predicted seconds until it ends; 0: unknown
};

struct QueuePassHooks {
  // Required. Ranked plans for `job` on the devices not in `busy`. kNotFound
  // or kInvalidArgument: the job can never be planned; any other error: it
  // waits with the message. Called once per job not held or skipped, once
  // more for a job that becomes the head (busy empty), for the head once per
  // predicted end until it fits (step 2e), and once for the head per job
  // considered behind it that does not end before the head's start.
  std::function<Result<PlanSet>(const PassJob& job, const DeviceSet& busy)> plan;
  // Optional (absent: every job is ready). Asked before a job no limit holds is
  // planned: false skips it this pass (kNotReady); an error ends the pass.
  std::function<Result<bool>(const PassJob& job)> ready;
  // Optional. Called with each decision as it is made, before the next job is
  // considered. For kPlace it returns the devices the job now holds: normally
  // its plan's; none when it was not placed after all (the caller failed it),
  // so they stay free and its user is not charged. The value is ignored for
  // other actions. An error ends the pass. Absent: a placed job holds its
  // plan's devices.
  std::function<Result<DeviceSet>(const PassDecision& decision)> commit;
  // Optional (step 2e). The running jobs with their predicted ends; asked once,
  // when a head is found. An error ends the pass.
  std::function<Result<std::vector<RunningHold>>()> running;
  // Optional (step 2e). Predicted seconds `job` runs on `plan`; 0: unknown.
  std::function<double(const PassJob& job, const Plan& plan)> run_s;
};

// REQUIRES: every policy valid (UserPolicy::Validate); job ids distinct;
// hooks.plan set.
// Returns one decision per job, in the order they were considered (step 1's),
// or the first error of a hook (decisions made until then were committed).
Result<std::vector<PassDecision>> RunQueuePass(const std::vector<PassJob>& jobs,
                                               const std::map<std::string, UserUsage>& usage,
                                               const UserPolicies& policies, const DeviceSet& busy,
                                               const QueuePassHooks& hooks,
                                               QueueOrdering ordering = QueueOrdering::kFairShare);

}  // namespace tessera::scheduler

#endif  // TESSERA_SCHEDULER_QUEUE_PASS_H_
