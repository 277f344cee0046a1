// One placement pass over the waiting jobs.
//
// Steps (as in queue_pass.h):
//   1. order the jobs (OrderQueue);
//   2. per job: a. limits on this pass's usage; b. the user's device bound;
//      c. ready; d. plan on the free devices (never / wait / head);
//      e. backfill behind the head only if it does not delay the head: it ends
//         before the head's predicted start, or the head still fits then
//         (Shadow); without predicted ends, if the head still fits once
//         every other job ended;
//      f. place, and grow busy and the user's usage by what it holds.
#include "scheduler/queue_pass.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "common/enum_names.h"

namespace tessera::scheduler {

constexpr EnumName<PassAction> kPassActionNames[] = {
    {PassAction::kPlace, "place"},
    {PassAction::kWait, "wait"},
    {PassAction::kNotReady, "not_ready"},
    {PassAction::kNever, "never"},
};
static_assert(IsValidNameTable(kPassActionNames));

std::string_view PassActionName(PassAction action) {
  return NameOf(kPassActionNames, action, "wait");
}

namespace {

DeviceSet DevicesOf(const Plan& plan) {
  DeviceSet out;
  for (const DeviceId& d : plan.Devices()) out.insert(d.ToString());
  return out;
}

// When the head can start (step 2e): in `s` seconds, with `busy` the devices
// held then.
struct Shadow {
  double s = 0;
  DeviceSet busy;
};

// The head's start: the first of the predicted `ends` (the running jobs', and
// those of the jobs placed in this pass) by which it has a plan on the devices
// free then. nullopt when it fits at none (an end unknown: it never comes).
Result<std::optional<Shadow>> HeadStart(const PassJob& head, const DeviceSet& busy,
                                        std::vector<RunningHold> ends,
                                        const QueuePassHooks& hooks) {
  std::erase_if(ends, [](const RunningHold& r) { return !(r.ends_in_s > 0); });
  std::sort(ends.begin(), ends.end(),
            [](const RunningHold& a, const RunningHold& b) { return a.ends_in_s < b.ends_in_s; });
  Shadow at{0, busy};
  for (const RunningHold& r : ends) {
    for (const std::string& d : r.devices) at.busy.erase(d);
    at.s = r.ends_in_s;
    if (hooks.plan(head, at.busy).ok()) return std::optional<Shadow>(std::move(at));
  }
  return std::optional<Shadow>();
}

// "can start in about 12 min, as the running jobs' predicted ends free its devices".
std::string StartsIn(const Shadow& shadow) {
  const auto minutes = std::max<int64_t>(1, std::llround(shadow.s / 60));
  return "can start in about " + std::to_string(minutes) +
         " min, as the running jobs' predicted ends free its devices";
}

}  // namespace

Result<std::vector<PassDecision>> RunQueuePass(const std::vector<PassJob>& jobs,
                                               const std::map<std::string, UserUsage>& usage,
                                               const UserPolicies& policies,
                                               const DeviceSet& busy_before,
                                               const QueuePassHooks& hooks,
                                               QueueOrdering ordering) {
  // Step 1: the order.
  std::vector<QueuedJob> queued;
  std::map<int64_t, const PassJob*> by_id;
  queued.reserve(jobs.size());
  for (const PassJob& j : jobs) {
    queued.push_back(QueuedJob{j.id, j.user, j.priority, j.min_devices});
    by_id[j.id] = &j;
  }
  const std::vector<QueueEntry> order = OrderQueue(queued, usage, policies, ordering);

  std::map<std::string, UserUsage> holds_now = usage;  // grows with this pass's placements
  DeviceSet busy = busy_before;                        // likewise
  std::optional<PassJob> head;           // the first job that must wait for busy devices
  DeviceSet backfilled;                  // devices taken by jobs placed behind the head
  std::optional<Shadow> shadow;          // when the head can start, if predicted
  std::vector<RunningHold> placed_ends;  // jobs placed in this pass, with their ends
  std::vector<PassDecision> decisions;
  decisions.reserve(order.size());

  // Records a decision and lets the caller commit it; returns the devices a
  // placed job holds.
  auto decide = [&](PassDecision d) -> Result<DeviceSet> {
    DeviceSet held;
    if (hooks.commit) {
      TESSERA_ASSIGN_OR_RETURN(held, hooks.commit(d));
    } else if (d.action == PassAction::kPlace) {
      held = DevicesOf(*d.plan);
    }
    decisions.push_back(std::move(d));
    return held;
  };

  for (const QueueEntry& entry : order) {
    PassDecision d;
    d.job = *by_id.at(entry.id);
    d.user_share = entry.user_share;

    // Step 2a: a job placed earlier in this pass counts against its user's limits.
    const UserPolicy& policy = policies.For(entry.user);
    UserUsage& holds = holds_now[entry.user];
    const std::string limit =
        entry.held.empty() ? LimitHolds(entry.user, policy, holds, d.job.min_devices) : entry.held;
    if (!limit.empty()) {
      d.reason = "held by a user limit: " + limit;
      d.held = true;
      TESSERA_RETURN_IF_ERROR(decide(std::move(d)).status());
      continue;
    }
    // Step 2b: the user's device limit bounds this job's plan (at least its
    // minimum: the limit did not hold it).
    d.job.max_devices = DeviceBound(policy, holds.devices, d.job.max_devices).value_or(0);
    // Step 2c: ready to be planned?
    if (hooks.ready) {
      TESSERA_ASSIGN_OR_RETURN(bool ready, hooks.ready(d.job));
      if (!ready) {
        d.action = PassAction::kNotReady;
        TESSERA_RETURN_IF_ERROR(decide(std::move(d)).status());
        continue;
      }
    }
    // Step 2d: plan on the free devices.
    Result<PlanSet> plans = hooks.plan(d.job, busy);
    if (!plans.ok() && (plans.status().code() == StatusCode::kNotFound ||
                        plans.status().code() == StatusCode::kInvalidArgument)) {
      d.action = PassAction::kNever;
      d.reason = "cannot plan: " + plans.status().message();
      TESSERA_RETURN_IF_ERROR(decide(std::move(d)).status());
      continue;
    }
    if (!plans.ok() || plans->plans.empty()) {
      d.reason = plans.ok() ? "no plan" : plans.status().message();
      // Only a job that would fit on the idle cluster blocks the jobs behind it.
      if (!head && hooks.plan(d.job, {}).ok()) {
        head = d.job;
        d.head = true;
        if (hooks.running) {
          TESSERA_ASSIGN_OR_RETURN(std::vector<RunningHold> ends, hooks.running());
          ends.insert(ends.end(), placed_ends.begin(), placed_ends.end());
          TESSERA_ASSIGN_OR_RETURN(shadow, HeadStart(*head, busy, std::move(ends), hooks));
          if (shadow) d.reason += "; " + StartsIn(*shadow);
        }
      }
      TESSERA_RETURN_IF_ERROR(decide(std::move(d)).status());
      continue;
    }
    const Plan& best = plans->plans.front();
    const double run_s = hooks.run_s ? hooks.run_s(d.job, best) : 0;
    const bool ends_before_head = shadow && run_s > 0 && run_s <= shadow->s;
    // Step 2e: backfill only if the head still fits at its predicted start
    // (or, without one, once every job ended except those placed behind it,
    // this one included), unless this job ends before that start.
    if (head && !ends_before_head) {
      DeviceSet would_hold = backfilled;
      if (shadow) would_hold.insert(shadow->busy.begin(), shadow->busy.end());
      for (const DeviceId& dev : best.Devices()) would_hold.insert(dev.ToString());
      if (!hooks.plan(*head, would_hold).ok()) {
        d.reason = "waiting behind job " + std::to_string(head->id) +
                   " (placing it now would delay that job" +
                   (shadow ? ", which " + StartsIn(*shadow) : std::string()) + ")";
        TESSERA_RETURN_IF_ERROR(decide(std::move(d)).status());
        continue;
      }
    }
    // Step 2f: place it; what it holds is busy and charged to its user.
    d.action = PassAction::kPlace;
    d.plan = best;
    TESSERA_ASSIGN_OR_RETURN(DeviceSet placed, decide(std::move(d)));
    busy.insert(placed.begin(), placed.end());
    if (head && !ends_before_head) backfilled.insert(placed.begin(), placed.end());
    if (!head) placed_ends.push_back(RunningHold{placed, run_s});
    if (!placed.empty()) {
      holds.running_jobs += 1;
      holds.devices += static_cast<int64_t>(placed.size());
    }
  }
  return decisions;
}

}  // namespace tessera::scheduler
