// The simulator's runs: one trace on one cluster under one policy, on a
// virtual clock, and what became of every job.
//   SimulateRigid   the queue pass (scheduler/queue_pass.h) as tesserad runs it
//                   today: each job keeps the devices of the plan it started
//                   with until it ends (rigid_run.cc);
//   SimulateShared  the share policy (scheduler/share_policy.h): every round
//                   decides the devices of every running and waiting job, and
//                   running jobs are shrunk, grown or moved at a cost
//                   (shared_run.cc).
// Thread safety: pure functions over the planner they are given.
#ifndef TESSERA_BENCH_SCHED_RUN_H_
#define TESSERA_BENCH_SCHED_RUN_H_

#include <map>
#include <string>
#include <vector>

#include "bench/sched/clusters.h"
#include "bench/sched/sim_planner.h"
#include "bench/sched/trace.h"
#include "scheduler/plan.h"
#include "scheduler/queue_order.h"

namespace tessera::scheduler::sim {

struct JobOutcome {
  double alone_s = 0;  // run time alone on the idle cluster; 0: it never fits
  // Run time alone on its user's fair share: a slice of devices / users devices
  // spread evenly over the cluster's device list (every type in proportion).
  double share_s = 0;
  double start_s = -1;
  double end_s = -1;
  std::string plan;     // "data x2 on boxa:0,boxa:1"
  std::string why_not;  // never planned / never fits / never started
  int64_t moves = 0;    // its shrinks, grows, moves and requeues (Run::moves)
};

struct Run {
  std::string policy;
  std::vector<JobOutcome> jobs;   // by trace index
  double busy_while_waiting = 0;  // device-seconds busy while a job waited
  double time_waiting = 0;        // seconds with a job waiting
  int devices = 0;
  double makespan_s = 0;
  int64_t moves = 0;   // shrinks, grows, moves and requeues of running jobs
  int64_t rounds = 0;  // scheduling rounds (queue passes or allocations)
  // Moments a user held more devices or ran more jobs than its limits
  // allow (users: max_devices, max_running_jobs), checked after every round,
  // and the first of them ("at 1.25 h alice holds 3 devices, 2 allowed").
  // 0 in a correct scheduler: the simulator checks what it cannot assume.
  int64_t limit_breaks = 0;
  std::string first_limit_break;
};

// Counts in `run` a moment at `now_s` where a user's `held` (devices and
// running jobs) is past its limits in `users`.
void CheckLimits(const UserPolicies& users, const std::map<std::string, UserUsage>& held,
                 double now_s, Run* run);

// "data x2 on boxa:0,boxa:1".
std::string PlanText(const Plan& p);

// Why tesserad would refuse `user`'s job at submission with `waiting` of the
// user's jobs waiting already (users: max_pending_jobs, HTTP 429), or "".
std::string RefusedAtSubmission(const UserPolicies& users, const std::string& user,
                                int64_t waiting);

// Rigid jobs through the queue pass, `ordering` (fifo or fair). fair backfills
// as tesserad does, by the running jobs' predicted ends (the pass's
// hooks.running and hooks.run_s); fifo, today's queue for comparison, as the
// pass did before: behind the head only this pass's backfills count.
Run SimulateRigid(const Trace& trace, const Cluster& cluster, QueueOrdering ordering,
                  SimPlanner* planner);

struct SharedOptions {
  // Seconds of progress a running job loses when it is shrunk, grown or moved
  // (checkpoint or state transfer, restart, steps redone).
  double move_cost_s = 60;
  // A job is not moved again within this many seconds of its last start or move.
  double min_dwell_s = 600;
  // Whether a job may move onto devices none of which it holds (a restart
  // from its checkpoint), as tesserad's share round does (share_restart_moves);
  // false: every move keeps one of the job's devices
  // (AllocJob::move_keeps_a_device), as tesserad with restarts off.
  bool restart_moves = true;
  // Free devices while no job waits. 0: the share policy decides then too
  // (any running job may be grown, shrunk or moved). > 0: as tesserad, the
  // policy runs only while a job waits; otherwise each running job, in
  // submission order, grows onto free devices (JobController::GrowTraining)
  // when its plan on its own and the free ones predicts this many times its
  // throughput and the time saved over its remaining work exceeds
  // move_cost_s; nothing else moves.
  double grow_min_speedup = 0;
  // Inference jobs (TraceJob::kind kInfer) run as independent ranks: one
  // shrinks by dropping ranks (their chunks in flight are done again) and
  // grows by new ranks joining, the others running on. A shrink or move costs
  // it this many seconds of progress; growth costs nothing.
  double infer_move_cost_s = 10;
  // An inference job is not grown or shrunk within this many seconds of its
  // start or last change (tesserad's grow_settle_ms).
  double infer_settle_s = 10;
  ShareOptions share;  // horizon, minimum gain
};

// Elastic jobs through the share policy. Inference jobs: with
// grow_min_speedup > 0 (tesserad's rules) the policy only starts and shrinks
// them, and while no job waits each grows onto every free device its plan
// uses (JobController::GrowInference: the user holding the fewest devices
// first); with 0 the policy decides their devices as any job's.
Run SimulateShared(const Trace& trace, const Cluster& cluster, const SharedOptions& options,
                   SimPlanner* planner);

// Each job's run time alone on the idle cluster (JobOutcome::alone_s) and on
// its user's fair share (share_s), or why it never fits (why_not).
std::vector<JobOutcome> AloneTimes(const Trace& trace, const Cluster& cluster, SimPlanner* planner);

}  // namespace tessera::scheduler::sim

#endif  // TESSERA_BENCH_SCHED_RUN_H_
