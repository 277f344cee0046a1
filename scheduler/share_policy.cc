// The heterogeneity-aware, elastic, fair share policy.
//
// Steps (as in share_policy.h):
//   1. fair shares and each job's reference throughput on a representative
//      slice of the cluster;
//   2. fixed jobs keep their devices;
//   3. minimums: running movable jobs from their own devices, then waiting
//      jobs in the queue's weighted-fair order from the free ones; a waiting
//      job with no plan on them may have a running job take its minimum
//      elsewhere (MakeRoom); the first one short of devices by count holds
//      those that free up (Reserve), and a job behind it starts only if it
//      leaves that reservation intact (Backfills), unless running jobs go
//      back to the queue for it (Requeue);
//   4. fill: one device at a time to the job it raises most, normalized,
//      users below their weighted share first (behind a reservation, only
//      its spare devices, or to jobs that end before it starts); then each
//      job planned on its devices and the ones left free, taking that plan's
//      when it gains (Regroup); then trades: two jobs swap devices of two
//      groups when that raises their normalized sum and leaves each with a
//      plan; then catch-up: a job far behind its fair share swaps a slower
//      device for a faster one with a job that stays within it (CatchUp);
//   5. moves: a running job moves only when the gain over its horizon pays
//      for the move, or it is a catch-up swap that beats what the job behind
//      holds, or the move starts a waiting job that could start
//      nowhere else and leaves the mover its fair share's throughput, unless
//      the mover ends before the move would pay for itself (and,
//      where it must, the move keeps one of its devices); otherwise it is
//      fixed and steps 3-4 run again;
//   6. decisions with their reasons.
// Here steps 1-3's minimums, 5 and 6; step 3's reservation, requeue and room
// are in share_reservation.cc, step 4 in share_fill.cc (the Allocator they
// share: share_allocator.h).
#include "scheduler/share_policy.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "common/enum_names.h"
#include "scheduler/share_allocator.h"

namespace tessera::scheduler {

namespace share_internal {

Result<RateOnDevices> Allocator::Rate(const AllocJob& job, const DeviceSet& devices) {
  if (devices.empty()) return RateOnDevices{};
  auto key = std::make_pair(job.id, std::to_string(job.max_devices) + "|" + Join(devices));
  if (auto it = rates_.find(key); it != rates_.end()) return it->second;
  TESSERA_ASSIGN_OR_RETURN(RateOnDevices r, hooks_.rate(job, devices));
  if (!(r.rate > 0) || r.used.empty()) r = RateOnDevices{};
  return rates_.emplace(std::move(key), std::move(r)).first->second;
}

Status Allocator::FairShares() {
  // (1) Users' weighted shares of the devices, split among their jobs.
  std::map<std::string, int64_t> jobs_of;
  for (const AllocJob& j : jobs_) ++jobs_of[j.user];
  double total_weight = 0;
  for (const auto& [user, n] : jobs_of) total_weight += policies_.For(user).weight;
  const double n_devices = static_cast<double>(devices_.size());
  for (const AllocJob& j : jobs_) {
    const double user_share = n_devices * policies_.For(j.user).weight / total_weight;
    user_devices_share_[j.user] = user_share;
    auto share =
        static_cast<int64_t>(std::floor(user_share / static_cast<double>(jobs_of[j.user]) + 0.5));
    share = std::max({share, int64_t{1}, j.min_devices});
    if (j.max_devices > 0) share = std::min(share, j.max_devices);
    share = std::min<int64_t>(share, static_cast<int64_t>(devices_.size()));
    fair_devices_[j.id] = share;
    // A slice of `share` devices spread evenly over the list.
    DeviceSet slice;
    for (int64_t i = 0; i < share; ++i) {
      const auto at = static_cast<size_t>((static_cast<double>(i) + 0.5) * n_devices /
                                          static_cast<double>(share));
      slice.insert(devices_[std::min(at, devices_.size() - 1)].id);
    }
    TESSERA_ASSIGN_OR_RETURN(double rate, RateOf(j, slice));
    if (!(rate > 0)) {
      // The slice cannot hold it (memory): its throughput on the whole
      // cluster, scaled to its share.
      DeviceSet all;
      for (const ShareDevice& d : devices_) all.insert(d.id);
      TESSERA_ASSIGN_OR_RETURN(double whole, RateOf(j, all));
      rate = whole * static_cast<double>(share) / n_devices;
    }
    fair_rate_[j.id] = rate;
  }
  return Status::Ok();
}

Result<std::optional<DeviceSet>> Allocator::Minimum(const AllocJob& job, const DeviceSet& from) {
  const int64_t available = static_cast<int64_t>(from.size());
  const int64_t upper = job.max_devices > 0 ? std::min(job.max_devices, available) : available;
  for (int64_t n = std::max<int64_t>(job.min_devices, 1); n <= upper; ++n) {
    AllocJob capped = job;
    capped.max_devices = n;
    TESSERA_ASSIGN_OR_RETURN(RateOnDevices r, Rate(capped, from));
    if (r.rate > 0) return std::optional<DeviceSet>(r.used);
  }
  return std::optional<DeviceSet>();
}

Result<Assignment> Allocator::Assign(const std::set<int64_t>& fixed) {
  Assignment a;
  DeviceSet free;
  for (const ShareDevice& d : devices_) free.insert(d.id);
  std::map<std::string, UserUsage> usage;
  auto take = [&](const AllocJob& j, const DeviceSet& devices) {
    for (const std::string& d : devices) free.erase(d);
    a.given[j.id].insert(devices.begin(), devices.end());
    usage[j.user].devices += static_cast<int64_t>(devices.size());
  };
  // (2) Fixed jobs keep their devices; every running job counts as running.
  for (const AllocJob& j : jobs_) {
    if (j.held.empty()) continue;
    usage[j.user].running_jobs += 1;
    if (fixed.contains(j.id)) take(j, j.held);
  }
  // (3) Minimums: running movable jobs from their own devices.
  for (const AllocJob& j : jobs_) {
    if (j.held.empty() || fixed.contains(j.id)) continue;
    TESSERA_ASSIGN_OR_RETURN(std::optional<DeviceSet> own, Minimum(j, j.held));
    take(j, own ? *own : j.held);
  }
  // Then waiting jobs, in the queue's order.
  std::vector<QueuedJob> queued;
  for (const AllocJob& j : jobs_) {
    if (!j.held.empty()) continue;
    const double fair = fair_rate_.at(j.id);
    queued.push_back(QueuedJob{j.id, j.user, j.priority, j.min_devices,
                               j.work > 0 && fair > 0 ? j.work / fair : 0.0, j.waited_s});
  }
  std::optional<Reservation> reserved;
  for (const QueueEntry& e : OrderQueue(queued, usage, policies_)) {
    const AllocJob& j = *by_id_.at(e.id);
    const std::string limit =
        LimitHolds(j.user, policies_.For(j.user), usage[j.user], j.min_devices);
    if (!limit.empty()) {
      a.waits[j.id] = "held by a user limit: " + limit;
      continue;
    }
    const int64_t need = std::max<int64_t>(j.min_devices, 1);
    AllocJob capped = j;
    capped.max_devices =
        DeviceBound(policies_.For(j.user), usage[j.user].devices, j.max_devices).value_or(0);
    if (static_cast<int64_t>(free.size()) < need) {
      a.waits[j.id] = "needs " + std::to_string(need) + " device" + (need == 1 ? "" : "s") + "; " +
                      std::to_string(free.size()) +
                      " are left after the jobs before it in the queue";
      if (!reserved && need <= static_cast<int64_t>(devices_.size())) {
        TESSERA_ASSIGN_OR_RETURN(reserved, Reserve(j, need, a, free));
        TESSERA_ASSIGN_OR_RETURN(std::optional<DeviceSet> made,
                                 Requeue(capped, need, *reserved, fixed, &a, &free, &usage));
        if (made) {
          reserved.reset();
          a.waits.erase(j.id);
          usage[j.user].running_jobs += 1;
          take(j, *made);
          continue;
        }
        a.waits[j.id] += reserved->shadow_s > 0
                             ? "; the devices that free up are held for it (enough in about " +
                                   Fixed(reserved->shadow_s / 60, 0) + " min, as predicted)"
                             : "; the devices that free up are held for it";
      }
      continue;
    }
    TESSERA_ASSIGN_OR_RETURN(std::optional<DeviceSet> mine, Minimum(capped, free));
    if (!mine && !reserved) {
      TESSERA_ASSIGN_OR_RETURN(mine, MakeRoom(capped, fixed, &a, &free, &usage));
    }
    if (!mine) {
      a.waits[j.id] = "no plan on the " + std::to_string(free.size()) + " devices left";
      continue;
    }
    if (reserved) {
      TESSERA_ASSIGN_OR_RETURN(bool fits, Backfills(j, *mine, &*reserved));
      if (!fits) {
        const AllocJob& head = *by_id_.at(reserved->id);
        a.waits[j.id] = "waiting behind job " + std::to_string(head.id) + " of " + head.user +
                        " (the devices that free up are held for it; this job would hold " +
                        std::to_string(mine->size()) + " past its predicted start)";
        continue;
      }
    }
    usage[j.user].running_jobs += 1;
    take(j, *mine);
  }
  // (4) Fill.
  TESSERA_RETURN_IF_ERROR(Fill(fixed, &a, &free, &usage, &reserved));
  TESSERA_RETURN_IF_ERROR(Regroup(fixed, &a, &free, &usage, &reserved));
  TESSERA_RETURN_IF_ERROR(Trade(fixed, &a));
  TESSERA_RETURN_IF_ERROR(CatchUp(fixed, &a));
  // Each job on the devices its plan uses.
  for (auto& [id, given] : a.given) {
    const AllocJob& j = *by_id_.at(id);
    if (fixed.contains(id)) {
      TESSERA_ASSIGN_OR_RETURN(double rate, RateOf(j, given));
      a.objective += rate / fair_rate_.at(id);
      continue;
    }
    TESSERA_ASSIGN_OR_RETURN(RateOnDevices r, Rate(j, given));
    if (!r.used.empty()) given = r.used;
    a.objective += r.rate / fair_rate_.at(id);
  }
  return a;
}

Result<std::vector<AllocDecision>> Allocator::Decide(
    const Assignment& a, const std::set<int64_t>& fixed,
    const std::map<int64_t, std::string>& moved_why) {
  std::map<std::string, int64_t> owner;
  for (const auto& [id, given] : a.given) {
    for (const std::string& d : given) owner[d] = id;
  }
  std::vector<AllocDecision> out;
  for (const AllocJob& j : jobs_) {
    AllocDecision d;
    d.id = j.id;
    d.fair_rate = fair_rate_.at(j.id);
    d.fair_devices = fair_devices_.at(j.id);
    auto it = a.given.find(j.id);
    if (auto q = a.requeued.find(j.id); q != a.requeued.end()) {
      d.action = AllocAction::kRequeue;
      d.reason = q->second;
      out.push_back(std::move(d));
      continue;
    }
    if (it == a.given.end()) {
      d.action = AllocAction::kWait;
      d.reason = a.waits.contains(j.id) ? a.waits.at(j.id) : "no device left";
      out.push_back(std::move(d));
      continue;
    }
    d.devices = it->second;
    TESSERA_ASSIGN_OR_RETURN(d.rate, RateOf(j, d.devices));
    const double times = d.fair_rate > 0 ? d.rate / d.fair_rate : 0;
    const std::string predicted = "predicted " + Fixed(d.rate, 1) + " " + options_.rate_unit +
                                  ", " + Fixed(times, 2) + "x its throughput on a fair share of " +
                                  std::to_string(d.fair_devices) + " device" +
                                  (d.fair_devices == 1 ? "" : "s");
    if (j.held.empty()) {
      d.action = AllocAction::kStart;
      d.reason = "starts on " + Join(d.devices) + ": " + predicted;
    } else if (fixed.contains(j.id) || d.devices == j.held) {
      d.action = AllocAction::kKeep;
    } else {
      DeviceSet gave, got;
      std::set_difference(j.held.begin(), j.held.end(), d.devices.begin(), d.devices.end(),
                          std::inserter(gave, gave.end()));
      std::set_difference(d.devices.begin(), d.devices.end(), j.held.begin(), j.held.end(),
                          std::inserter(got, got.end()));
      if (got.empty()) {
        d.action = AllocAction::kShrink;
        d.reason = "shrinks to " + Join(d.devices);
      } else if (gave.empty()) {
        d.action = AllocAction::kGrow;
        d.reason = "grows onto " + Join(d.devices);
      } else {
        d.action = AllocAction::kMove;
        d.reason = "moves to " + Join(d.devices);
      }
      std::set<int64_t> takers;
      for (const std::string& dev : gave) {
        if (auto o = owner.find(dev); o != owner.end() && o->second != j.id)
          takers.insert(o->second);
      }
      std::string for_whom;
      for (int64_t t : takers) {
        for_whom += std::string(for_whom.empty() ? "" : ", ") + "job " + std::to_string(t) +
                    " of " + by_id_.at(t)->user;
      }
      if (!for_whom.empty()) d.reason += ": " + for_whom + " takes its devices";
      d.reason += "; " + predicted;
      if (auto w = moved_why.find(j.id); w != moved_why.end()) d.reason += "; " + w->second;
    }
    out.push_back(std::move(d));
  }
  return out;
}

Result<Allocation> Allocator::Run() {
  for (const AllocJob& j : jobs_) by_id_[j.id] = &j;
  for (const ShareDevice& d : devices_) group_of_[d.id] = d.group;
  TESSERA_RETURN_IF_ERROR(FairShares());
  // (2) Running jobs that may not move.
  std::set<int64_t> fixed;
  for (const AllocJob& j : jobs_) {
    if (!j.held.empty() && !j.movable) fixed.insert(j.id);
  }
  TESSERA_ASSIGN_OR_RETURN(Assignment a, Assign(fixed));
  // (5) Moves: each running movable job judged once.
  std::set<int64_t> judged;
  std::map<int64_t, std::string> moved_why;
  while (true) {
    const AllocJob* mover = nullptr;
    for (const AllocJob& j : jobs_) {
      if (j.held.empty() || fixed.contains(j.id) || judged.contains(j.id)) continue;
      auto it = a.given.find(j.id);
      if (it != a.given.end() && it->second != j.held) {
        mover = &j;
        break;
      }
    }
    if (mover == nullptr) break;
    judged.insert(mover->id);
    std::set<int64_t> kept = fixed;
    kept.insert(mover->id);
    TESSERA_ASSIGN_OR_RETURN(Assignment b, Assign(kept));
    TESSERA_ASSIGN_OR_RETURN(double now, RateOf(*mover, mover->held));
    const double horizon = mover->remaining_s > 0 ? std::min(options_.horizon_s, mover->remaining_s)
                                                  : options_.horizon_s;
    const double gain = (a.objective - b.objective) * horizon;
    const DeviceSet& to = a.given.at(mover->id);
    const bool keeps_one = KeepsOne(*mover, to);
    const double move_s = MoveSeconds(*mover, to);
    const double cost = move_s * now / fair_rate_.at(mover->id);
    // Fairness: a move that lets a waiting job start, which would otherwise
    // wait, and leaves the mover at least its fair share's throughput is made
    // even when the lab's sum does not pay for it: no job holds another off
    // the only devices it can use beyond its own share.
    bool starts_a_waiter = false;
    for (const AllocJob& w : jobs_) {
      starts_a_waiter =
          starts_a_waiter || (w.held.empty() && a.given.contains(w.id) && !b.given.contains(w.id));
    }
    TESSERA_ASSIGN_OR_RETURN(double then, RateOf(*mover, to));
    const double then_share = then / fair_rate_.at(mover->id);
    // (Not for a job about to end anyway: the waiting one starts then.)
    const bool ends_soon = mover->remaining_s > 0 && mover->remaining_s <= move_s;
    const bool fair_move = starts_a_waiter && then_share >= 1.0 - 1e-9 && !ends_soon;
    // A catch-up swaps a job behind its fair share off the device this
    // round's fill or trades gave it: it is a move only when it beats what the
    // job holds (else one fast device for another, a restart for nothing).
    auto caught_up = a.caught_up.find(mover->id);
    if (caught_up != a.caught_up.end() && a.behind.contains(mover->id) && !(then > now)) {
      caught_up = a.caught_up.end();
    }
    if ((gain > cost || fair_move || caught_up != a.caught_up.end()) &&
        (keeps_one || !mover->move_keeps_a_device)) {
      moved_why[mover->id] =
          caught_up != a.caught_up.end() && !(gain > cost) ? caught_up->second
          : gain > cost
              ? "the lab's normalized throughput " + Fixed(b.objective, 2) + " -> " +
                    Fixed(a.objective, 2) + " (" +
                    Fixed(b.objective > 0 ? a.objective / b.objective : 0, 2) + "x) over " +
                    Fixed(horizon, 0) + " s outweighs the move's " + Fixed(move_s, 0) + " s"
              : "it keeps " + Fixed(then_share, 2) +
                    "x its fair share's throughput, and the job it makes room for "
                    "could start nowhere else";
      continue;
    }
    fixed = std::move(kept);
    a = std::move(b);
  }
  Allocation out;
  TESSERA_ASSIGN_OR_RETURN(out.jobs, Decide(a, fixed, moved_why));
  out.normalized_total = a.objective;
  out.rate_calls = static_cast<int64_t>(rates_.size());
  return out;
}

}  // namespace share_internal

namespace {

constexpr EnumName<AllocAction> kAllocActionNames[] = {
    {AllocAction::kKeep, "keep"},       {AllocAction::kStart, "start"},
    {AllocAction::kGrow, "grow"},       {AllocAction::kShrink, "shrink"},
    {AllocAction::kMove, "move"},       {AllocAction::kWait, "wait"},
    {AllocAction::kRequeue, "requeue"},
};
static_assert(IsValidNameTable(kAllocActionNames));

}  // namespace

std::string_view AllocActionName(AllocAction action) { return NameOf(kAllocActionNames, action); }

Result<Allocation> Allocate(const std::vector<AllocJob>& jobs,
                            const std::vector<ShareDevice>& devices, const UserPolicies& policies,
                            const ShareHooks& hooks, const ShareOptions& options) {
  if (!hooks.rate) return InvalidArgument("the rate hook is required", "hooks.rate");
  std::set<std::string> listed;
  for (const ShareDevice& d : devices) listed.insert(d.id);
  std::set<int64_t> ids;
  for (const AllocJob& j : jobs) {
    if (!ids.insert(j.id).second) {
      return InvalidArgument("job " + std::to_string(j.id) + " is listed twice", "jobs");
    }
    for (const std::string& d : j.held) {
      if (!listed.contains(d)) {
        return InvalidArgument(
            "job " + std::to_string(j.id) + " holds " + d + ", which is not among the devices",
            "jobs");
      }
    }
  }
  if (devices.empty() || jobs.empty()) {
    Allocation out;
    for (const AllocJob& j : jobs) {
      AllocDecision d;
      d.id = j.id;
      d.devices = j.held;
      d.action = j.held.empty() ? AllocAction::kWait : AllocAction::kKeep;
      if (j.held.empty()) d.reason = "no device in the cluster";
      out.jobs.push_back(std::move(d));
    }
    return out;
  }
  share_internal::Allocator allocator(jobs, devices, policies, hooks, options);
  return allocator.Run();
}

}  // namespace tessera::scheduler
