// SharePolicy: which devices every running and waiting job gets, for the lab's
// sake rather than for the job at the head of the queue. Heterogeneity-aware
// (a device goes to the job it speeds up most, relative to that job's fair
// share), fair (users by weight; every job first gets its minimum, in the
// queue's weighted-fair order, so none starves) and elastic (a running job
// that may move is shrunk, grown or moved when the predicted gain over a
// horizon pays for the move).
//
// The objective (as Gavel's and Sia's): the sum over jobs of each job's
// predicted throughput on its devices relative to its throughput alone on its
// fair share of the cluster, where a job's fair share is its user's weighted
// share of the devices split evenly among that user's jobs, taken as a
// representative slice of the cluster (every device type in proportion).
//
// Steps (Allocate):
//   1. Fair shares: each user with a job here gets devices x weight / total
//      weight, split evenly among its jobs; a job's share is that rounded
//      (half up), at least 1 and its min_devices, at most its max_devices and
//      the cluster. Its reference throughput is hooks.rate on a slice of that
//      many devices spread evenly over the device list (the caller lists them
//      by node and type, so the slice holds every type in proportion).
//   2. Fixed jobs keep their devices: running jobs that may not move now
//      (AllocJob::movable false: opted out, a script that cannot re-form, or
//      moved too recently).
//   3. Minimums: running movable jobs first keep min_devices of their own
//      devices (the subset their plan prefers); then waiting jobs in the
//      queue's order (scheduler/queue_order.h: priority, users' weighted
//      shares, then a user's jobs by response ratio on their expected run
//      time, then age; limits hold jobs) each get min_devices of the free devices,
//      one at a time, each the device that raises its throughput most. A job
//      with no plan on the free devices (a model that fits only the device a
//      running job prefers) may have a running movable job of no higher
//      priority take its minimum again, from its own and the free devices
//      less the waiting job's, its own first (the move is judged in step 5
//      like any other). A job that cannot get its minimum waits, with the
//      reason. The first waiting job that lacks devices only by count (a
//      gang of 4 where 2 are free) holds a reservation (EASY backfill, as
//      Slurm's): by the placed jobs' predicted ends (AllocJob::remaining_s;
//      a starting job's work over its throughput) it can start in S seconds;
//      a job behind it starts only if it ends within S or fits in the
//      devices more than it needs that are free by then, and the fill below
//      gives devices only within those or to jobs that end within S (an end
//      unknown: S is 0, nothing passes). So no stream of small jobs starves
//      a large one.
//      Requeue: running jobs may go back to the queue for that job, the
//      head (a gang of 4 on a lab whose elastic jobs hold their minimums, or
//      any job when every device is held),
//      when it would otherwise wait S > its own run time there plus each
//      one's restart cost, and each has more than that left on those
//      devices (a short job does not wait behind a long one; swapping their
//      order shortens the sum of their completion times): requeueable
//      movable jobs (they
//      restart from a checkpoint), of no higher priority, whose
//      users hold no smaller weighted share of the devices than the head's
//      user, the largest shares first, restarted fewer than
//      options.max_restarts times. They stop with a checkpoint and wait
//      in the queue like any job, and the head starts on their devices.
//   4. Fill: while free devices are left, give one to the job whose
//      normalized throughput it raises most (gain / reference). Jobs of users
//      below their weighted share of devices go first; a job's own devices
//      count a little more (options.keep_bonus) so running jobs stay put when
//      it makes no difference. The fill stops when no device raises any job's
//      normalized throughput by options.min_gain. Then trades (Gavel's comparative advantage): two
//      jobs swap one device of one group for one of another when that raises the sum of their
//      normalized throughputs by min_gain; counts stay, so shares do too.
//      Then catch-up (finish-time fairness, as Themis'; Gavel shares the
//      fast devices over time for the same end): a job that restarts from a
//      checkpoint (requeueable) and, where it is, would finish more than
//      options.catch_up_above times its time alone on its fair share after
//      its submission (AllocJob::age_s, work_done, remaining_s: a job on the
//      lab's slowest devices since it started) swaps a device of a slower
//      group for one of a faster group with a starting job or another such
//      job, when that lowers its own by the fraction options.catch_up_gain
//      and leaves the other within the bound (or no worse off than it is).
//      The worst off first, each job once a round; counts stay.
//      Each job ends on the devices its best plan on what it was given uses
//      (the planner may leave some out).
//   5. Moves: a running movable job whose devices differ from what it holds
//      moves only when the allocation with the move beats the allocation with
//      the job kept in place by more than the move costs: the difference in
//      the sum of normalized throughput, over min(options.horizon_s, the time
//      the job has left), must exceed its move cost (AllocJob::move_cost_s)
//      times its normalized throughput now, or the move is a catch-up swap
//      (its cost is in the fairness it was judged by) that, for the job behind,
//      beats what it holds (a swap off the slow device this round's trades
//      gave it onto another fast one like its own is no move: a restart for
//      nothing). Otherwise it is fixed where it is
//      and steps 3-4 run again for the others. Each job is judged once. A
//      job whose move must keep one of its devices (AllocJob::
//      move_keeps_a_device) and would keep none is fixed the same way.
//   6. Decisions: keep, start, grow, shrink, move, wait or requeue, with the reason
//      users see ("shrinks to boxa:0,boxa:1: job 14 of bob needs devices; the
//      lab's normalized throughput 1.60 -> 2.10, 1.31x ...").
//
// Throughput comes only through hooks.rate (the caller plans the job with the
// planner on those devices); the policy does no I/O, reads no clock (dwell
// times arrive as AllocJob::movable) and calls the hook on the caller's thread.
// It remembers the hook's answers for the call, keyed by job and device set.
// Ownership: plain values; hooks borrowed for the call.
// Thread safety: a pure function.
#ifndef TESSERA_SCHEDULER_SHARE_POLICY_H_
#define TESSERA_SCHEDULER_SHARE_POLICY_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "scheduler/queue_order.h"
#include "scheduler/queue_pass.h"

namespace tessera::scheduler {

// A device the policy may give to jobs. `group`: devices of one group are
// interchangeable for every job (one node's devices of one type); the fill
// tries one device per group per step.
struct ShareDevice {
  std::string id;  // "node:index"
  std::string group;
};

// A running or waiting job as the policy sees it.
struct AllocJob {
  int64_t id = 0;  // submission order; distinct
  std::string user;
  int64_t priority = 0;
  int64_t min_devices = 1;
  int64_t max_devices = 0;  // 0: no bound
  // Running: the devices it holds; waiting: empty.
  DeviceSet held;
  // Running: whether the policy may shrink, grow or move it now. A waiting
  // job is always placed where the policy decides.
  bool movable = false;
  // Running: predicted seconds it has left at its current throughput (the
  // gain of a move is counted over at most this; a reservation, step 3, reads
  // when it ends). 0: unknown.
  double remaining_s = 0;
  // Running: seconds of progress a move loses (checkpoint or state transfer,
  // restart, steps redone).
  double move_cost_s = 0;
  // Running: seconds of progress a move onto none of `held` loses (the job
  // restarts from a checkpoint there, which costs more than re-forming around
  // a device it keeps); 0: move_cost_s.
  double restart_cost_s = 0;
  // Running: a move must keep at least one of `held` (the job re-forms around
  // the ranks it keeps, as tesserad's re-form does; a move onto none of them
  // would need a restart from a checkpoint). Shrinks and growth always keep
  // one.
  bool move_keeps_a_device = false;
  // Running: it may go back to the queue for a waiting job (step 3's
  // Requeue): it stops with a checkpoint, waits, and resumes from it when
  // placed again, which costs restart_cost_s (or move_cost_s).
  bool requeueable = false;
  // Running: how often it restarted from a checkpoint already (moved onto
  // none of its devices, or sent back to the queue).
  int64_t restarts = 0;
  // Waiting: its work, in the hook's rate units (e.g. samples: steps x global
  // batch; 0: unknown), and seconds it has waited. Its expected run time is
  // the work over its throughput on its fair share; the queue order ranks a
  // user's waiting jobs by response ratio with them (scheduler/queue_order.h).
  double work = 0;
  double waited_s = 0;
  // Running: seconds since its submission, and its work done so far (the
  // hook's rate units); with remaining_s they give its projected finish-time
  // fairness (step 4's catch-up). 0: unknown (no catch-up for it).
  double age_s = 0;
  double work_done = 0;
};

// What the hook answers: the job's best plan on (a subset of) the devices.
struct RateOnDevices {
  double rate = 0;  // throughput (work per second, e.g. samples/s); 0: no plan there
  DeviceSet used;   // the devices that plan uses
};

struct ShareHooks {
  // Required. The job's predicted throughput on at most `devices` (the planner
  // may leave some out). An error ends the allocation.
  std::function<Result<RateOnDevices>(const AllocJob& job, const DeviceSet& devices)> rate;
};

struct ShareOptions {
  // The gain of a move is counted over at most this many seconds.
  double horizon_s = 1800;
  // A device is given only when it raises a job's normalized throughput by at
  // least this much (1 = the job's throughput on its fair share).
  double min_gain = 0.02;
  // A running job's own device counts this much more in the fill (stickiness).
  double keep_bonus = 1.05;
  // A running job restarted this often already is not sent back to the
  // queue again (step 3's Requeue): a long job goes back a bounded number of
  // times however many shorter ones arrive.
  int64_t max_restarts = 2;
  // Step 4's catch-up: a running job that restarts from a checkpoint
  // (AllocJob::requeueable) and would finish more than catch_up_above times
  // its run time alone on its fair share after its submission, where it is,
  // swaps a slower device for a faster one with a starting job or another
  // such job, when that lowers its own by the fraction catch_up_gain and
  // leaves the other within catch_up_above (or no worse off). 0: never.
  double catch_up_above = 2.0;
  double catch_up_gain = 0.1;
  // What the hook's throughput counts, for the reasons ("samples/s").
  std::string rate_unit = "samples/s";
};

// kRequeue: a running job goes back to the queue (step 3's Requeue); it
// resumes from its checkpoint when it is placed again.
enum class AllocAction { kKeep, kStart, kGrow, kShrink, kMove, kWait, kRequeue };
std::string_view AllocActionName(AllocAction action);

struct AllocDecision {
  int64_t id = 0;
  AllocAction action = AllocAction::kWait;
  DeviceSet devices;         // what it runs on after this round (held, for kWait of a running job)
  double rate = 0;           // predicted throughput there
  double fair_rate = 0;      // its reference: alone on its fair share
  int64_t fair_devices = 0;  // its fair share, in devices
  std::string reason;        // for every action but kKeep
};

struct Allocation {
  std::vector<AllocDecision> jobs;  // one per job, in the input's order
  double normalized_total = 0;      // the objective: sum of rate / fair_rate
  int64_t rate_calls = 0;           // hook calls made (distinct job and device set)
};

// REQUIRES: every policy valid. Job ids not distinct, a held device not listed in
// `devices`, or no hooks.rate: kInvalidArgument naming it.
Result<Allocation> Allocate(const std::vector<AllocJob>& jobs,
                            const std::vector<ShareDevice>& devices, const UserPolicies& policies,
                            const ShareHooks& hooks, const ShareOptions& options = {});

}  // namespace tessera::scheduler

#endif  // TESSERA_SCHEDULER_SHARE_POLICY_H_
