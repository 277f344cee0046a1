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
//      for the move, or it is a catch-up swap, or the move starts a waiting job that could start
//      nowhere else and leaves the mover its fair share's throughput, unless
//      the mover ends before the move would pay for itself (and,
//      where it must, the move keeps one of its devices); otherwise it is
//      fixed and steps 3-4 run again;
//   6. decisions with their reasons.
#include "scheduler/share_policy.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <limits>
#include <optional>
#include <set>
#include <tuple>
#include <utility>

#include "common/enum_names.h"

namespace tessera::scheduler {

namespace {

constexpr EnumName<AllocAction> kAllocActionNames[] = {
    {AllocAction::kKeep, "keep"},       {AllocAction::kStart, "start"},
    {AllocAction::kGrow, "grow"},       {AllocAction::kShrink, "shrink"},
    {AllocAction::kMove, "move"},       {AllocAction::kWait, "wait"},
    {AllocAction::kRequeue, "requeue"},
};
static_assert(IsValidNameTable(kAllocActionNames));

std::string Join(const DeviceSet& devices) {
  std::string out;
  for (const std::string& d : devices) out += (out.empty() ? "" : ",") + d;
  return out;
}

std::string Fixed(double v, int digits) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// The reservation of the first waiting job that lacks devices only by count
// (EASY backfill, as Slurm's): the devices that free up are held for it. By
// `shadow_s` seconds from now, when the placed jobs' predicted ends have freed
// enough, it can start; `spare` devices more than it needs are free by then.
// A job behind it starts only if it ends by then or fits in the spare ones.
struct Reservation {
  int64_t id = 0;
  double shadow_s = 0;  // 0: not predictable (an end unknown): nothing ends by then
  int64_t spare = 0;
};

// One allocation of the free devices (steps 3-4) with the jobs in `fixed`
// kept where they are.
struct Assignment {
  std::map<int64_t, DeviceSet> given;  // placed jobs only
  std::map<int64_t, std::string> waits;
  std::map<int64_t, std::string> requeued;   // running jobs sent back to the queue, why
  std::map<int64_t, std::string> caught_up;  // running jobs swapped onto faster devices, why
  double objective = 0;
};

class Allocator {
 public:
  Allocator(const std::vector<AllocJob>& jobs, const std::vector<ShareDevice>& devices,
            const UserPolicies& policies, const ShareHooks& hooks, const ShareOptions& options)
      : jobs_(jobs), devices_(devices), policies_(policies), hooks_(hooks), options_(options) {}

  Result<Allocation> Run();

 private:
  Result<RateOnDevices> Rate(const AllocJob& job, const DeviceSet& devices);
  Result<double> RateOf(const AllocJob& job, const DeviceSet& devices) {
    TESSERA_ASSIGN_OR_RETURN(RateOnDevices r, Rate(job, devices));
    return r.rate;
  }
  Status FairShares();
  // The smallest plan of `job` on `from`: min_devices, or more when that many
  // hold no plan. nullopt when no count does.
  Result<std::optional<DeviceSet>> Minimum(const AllocJob& job, const DeviceSet& from);
  Result<Assignment> Assign(const std::set<int64_t>& fixed);
  // Predicted seconds until placed `job` ends on `devices`: a running job's
  // remaining_s, a starting job's work over its throughput there; infinity
  // when unknown.
  Result<double> EndsIn(const AllocJob& job, const DeviceSet& devices);
  // The reservation for `head`, which needs `need` devices and finds fewer
  // free, against the jobs placed so far in `a`.
  Result<Reservation> Reserve(const AllocJob& head, int64_t need, const Assignment& a,
                              const DeviceSet& free);
  // Whether `job`, holding `devices` until it ends, leaves `r` intact: it ends
  // by the shadow time, or the devices come out of the spare ones (taken).
  Result<bool> Backfills(const AllocJob& job, const DeviceSet& devices, Reservation* r);
  // Running jobs back to the queue for `head` (capped by its user's limit),
  // which needs `need` devices, finds fewer free, and holds reservation `r`
  // (share_policy.h, step 3): they leave *a (their reasons in a->requeued)
  // and *usage, their devices go to *free, and `head`'s minimum on them
  // (not yet taken) is returned; nullopt when no such jobs make room.
  Result<std::optional<DeviceSet>> Requeue(const AllocJob& head, int64_t need, const Reservation& r,
                                           const std::set<int64_t>& fixed, Assignment* a,
                                           DeviceSet* free,
                                           std::map<std::string, UserUsage>* usage);
  // Room for waiting `job`, which has no plan on *free: the minimum of a
  // running movable job (not in `fixed`, of no higher priority) taken again
  // from its own and the free devices less what `job` takes from them, its
  // own devices first. Returns `job`'s minimum (not yet taken), or nullopt
  // when no running job's devices make room.
  Result<std::optional<DeviceSet>> MakeRoom(const AllocJob& job, const std::set<int64_t>& fixed,
                                            Assignment* a, DeviceSet* free,
                                            std::map<std::string, UserUsage>* usage);
  Status Fill(const std::set<int64_t>& fixed, Assignment* a, DeviceSet* free,
              std::map<std::string, UserUsage>* usage, std::optional<Reservation>* reserved);
  Status Regroup(const std::set<int64_t>& fixed, Assignment* a, DeviceSet* free,
                 std::map<std::string, UserUsage>* usage, std::optional<Reservation>* reserved);
  Status Trade(const std::set<int64_t>& fixed, Assignment* a);
  // Projected finish-time fairness of placed `job` on `devices`: seconds from
  // its submission to its predicted end there (a running job's move cost
  // counted when `devices` differ from what it holds) over its run time alone
  // on its fair share; nullopt when its age or work is unknown.
  Result<std::optional<double>> FinishFairness(const AllocJob& job, const DeviceSet& devices);
  Status CatchUp(const std::set<int64_t>& fixed, Assignment* a);
  Result<std::vector<AllocDecision>> Decide(const Assignment& a, const std::set<int64_t>& fixed,
                                            const std::map<int64_t, std::string>& moved_why);

  const std::vector<AllocJob>& jobs_;
  const std::vector<ShareDevice>& devices_;
  const UserPolicies& policies_;
  const ShareHooks& hooks_;
  const ShareOptions& options_;

  std::map<int64_t, const AllocJob*> by_id_;
  std::map<int64_t, double> fair_rate_;
  std::map<int64_t, int64_t> fair_devices_;
  std::map<std::string, double> user_devices_share_;  // weighted even share, in devices
  std::map<std::pair<int64_t, std::string>, RateOnDevices> rates_;
  std::map<std::string, std::string> group_of_;
};

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
    if (const int64_t cap = DeviceCap(policies_.For(j.user), usage[j.user]); cap > 0) {
      capped.max_devices = capped.max_devices > 0 ? std::min(capped.max_devices, cap) : cap;
    }
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

Result<double> Allocator::EndsIn(const AllocJob& job, const DeviceSet& devices) {
  constexpr double kUnknown = std::numeric_limits<double>::infinity();
  if (!job.held.empty()) return job.remaining_s > 0 ? job.remaining_s : kUnknown;
  if (!(job.work > 0)) return kUnknown;
  TESSERA_ASSIGN_OR_RETURN(double rate, RateOf(job, devices));
  return rate > 0 ? job.work / rate : kUnknown;
}

Result<Reservation> Allocator::Reserve(const AllocJob& head, int64_t need, const Assignment& a,
                                       const DeviceSet& free) {
  // The placed jobs by predicted end; the head can start once the free
  // devices and those of the jobs ended by then make `need`.
  std::vector<std::pair<double, int64_t>> ends;
  for (const auto& [id, given] : a.given) {
    TESSERA_ASSIGN_OR_RETURN(double t, EndsIn(*by_id_.at(id), given));
    ends.emplace_back(t, static_cast<int64_t>(given.size()));
  }
  std::sort(ends.begin(), ends.end());
  Reservation r{head.id, 0, 0};
  auto available = static_cast<int64_t>(free.size());
  for (const auto& [t, n] : ends) {
    if (!std::isfinite(t)) break;
    available += n;
    if (available >= need) {
      r.shadow_s = t;
      r.spare = available - need;
      break;
    }
  }
  return r;
}

Result<std::optional<DeviceSet>> Allocator::Requeue(const AllocJob& head, int64_t need,
                                                    const Reservation& r,
                                                    const std::set<int64_t>& fixed, Assignment* a,
                                                    DeviceSet* free,
                                                    std::map<std::string, UserUsage>* usage) {
  const std::optional<DeviceSet> none;
  if (!(r.shadow_s > 0) || !(head.work > 0)) return none;
  auto share_of = [&](const std::string& user) {
    return static_cast<double>((*usage)[user].devices) / policies_.For(user).weight;
  };
  const double head_share = share_of(head.user);
  // The candidates: the largest weighted shares first, then the most left.
  std::vector<const AllocJob*> candidates;
  for (const AllocJob& v : jobs_) {
    if (v.held.empty() || fixed.contains(v.id) || !v.requeueable ||
        v.restarts >= options_.max_restarts || v.priority > head.priority || !(v.remaining_s > 0) ||
        !a->given.contains(v.id) || share_of(v.user) < head_share) {
      continue;
    }
    candidates.push_back(&v);
  }
  std::stable_sort(candidates.begin(), candidates.end(), [&](const AllocJob* x, const AllocJob* y) {
    const double sx = share_of(x->user), sy = share_of(y->user);
    if (sx != sy) return sx > sy;
    return x->remaining_s > y->remaining_s;
  });
  DeviceSet pool = *free;
  size_t taken = 0;
  while (static_cast<int64_t>(pool.size()) < need && taken < candidates.size()) {
    const DeviceSet& theirs = a->given.at(candidates[taken++]->id);
    pool.insert(theirs.begin(), theirs.end());
  }
  if (static_cast<int64_t>(pool.size()) < need) return none;
  TESSERA_ASSIGN_OR_RETURN(std::optional<DeviceSet> mine, Minimum(head, pool));
  if (!mine) return none;
  TESSERA_ASSIGN_OR_RETURN(double run_s, EndsIn(head, *mine));
  // Only the jobs whose devices the head's plan uses go; each only when the
  // swap pays for its restart.
  std::vector<const AllocJob*> victims;
  for (size_t i = 0; i < taken; ++i) {
    const DeviceSet& theirs = a->given.at(candidates[i]->id);
    if (std::none_of(theirs.begin(), theirs.end(),
                     [&](const std::string& d) { return mine->contains(d); })) {
      continue;
    }
    const AllocJob& v = *candidates[i];
    const double cost = v.restart_cost_s > 0 ? v.restart_cost_s : v.move_cost_s;
    // What it has left, on the head's devices: the shorter job goes first.
    TESSERA_ASSIGN_OR_RETURN(double now, RateOf(v, v.held));
    TESSERA_ASSIGN_OR_RETURN(double there, RateOf(v, *mine));
    const double left_there = there > 0 ? v.remaining_s * now / there : v.remaining_s;
    if (!(r.shadow_s > run_s + cost) || !(left_there > run_s + cost)) return none;
    victims.push_back(&v);
  }
  for (const AllocJob* v : victims) {
    const DeviceSet& theirs = a->given.at(v->id);
    free->insert(theirs.begin(), theirs.end());
    UserUsage& used = (*usage)[v->user];
    used.devices -= static_cast<int64_t>(theirs.size());
    used.running_jobs -= 1;
    a->given.erase(v->id);
    a->requeued[v->id] = "goes back to the queue: job " + std::to_string(head.id) + " of " +
                         head.user + " needs " + std::to_string(need) +
                         (need == 1 ? " device" : " devices") + " and would otherwise wait about " +
                         Fixed(r.shadow_s / 60, 0) + " min; it runs about " + Fixed(run_s / 60, 0) +
                         " min on them, and this job, with about " + Fixed(v->remaining_s / 60, 0) +
                         " min left, resumes from its checkpoint once devices free";
  }
  return mine;
}

Result<bool> Allocator::Backfills(const AllocJob& job, const DeviceSet& devices, Reservation* r) {
  TESSERA_ASSIGN_OR_RETURN(double t, EndsIn(job, devices));
  if (t <= r->shadow_s) return true;
  const auto n = static_cast<int64_t>(devices.size());
  if (n > r->spare) return false;
  r->spare -= n;
  return true;
}

Result<std::optional<DeviceSet>> Allocator::MakeRoom(const AllocJob& job,
                                                     const std::set<int64_t>& fixed, Assignment* a,
                                                     DeviceSet* free,
                                                     std::map<std::string, UserUsage>* usage) {
  for (const AllocJob& r : jobs_) {
    if (r.held.empty() || fixed.contains(r.id) || r.priority > job.priority) continue;
    const DeviceSet& took = a->given.at(r.id);
    DeviceSet pool = *free;
    pool.insert(took.begin(), took.end());
    TESSERA_ASSIGN_OR_RETURN(std::optional<DeviceSet> mine, Minimum(job, pool));
    if (!mine) continue;
    DeviceSet rest, own_rest;
    std::set_difference(pool.begin(), pool.end(), mine->begin(), mine->end(),
                        std::inserter(rest, rest.end()));
    std::set_intersection(rest.begin(), rest.end(), r.held.begin(), r.held.end(),
                          std::inserter(own_rest, own_rest.end()));
    std::optional<DeviceSet> theirs;
    if (!own_rest.empty()) {
      TESSERA_ASSIGN_OR_RETURN(theirs, Minimum(r, own_rest));
    }
    if (!theirs) {
      TESSERA_ASSIGN_OR_RETURN(theirs, Minimum(r, rest));
    }
    if (!theirs) continue;
    // r gives back its minimum and takes `theirs`; the caller takes `mine`.
    free->insert(took.begin(), took.end());
    (*usage)[r.user].devices -= static_cast<int64_t>(took.size());
    for (const std::string& d : *theirs) free->erase(d);
    (*usage)[r.user].devices += static_cast<int64_t>(theirs->size());
    a->given[r.id] = *theirs;
    return mine;
  }
  return std::optional<DeviceSet>();
}

Status Allocator::Fill(const std::set<int64_t>& fixed, Assignment* a, DeviceSet* free,
                       std::map<std::string, UserUsage>* usage,
                       std::optional<Reservation>* reserved) {
  double total_weight = 0;
  std::set<std::string> users;
  for (const AllocJob& j : jobs_) users.insert(j.user);
  for (const std::string& u : users) total_weight += policies_.For(u).weight;
  const double even = static_cast<double>(devices_.size()) / total_weight;
  while (!free->empty()) {
    // The first free device of each group.
    std::map<std::string, std::string> first_free;
    for (const std::string& d : *free) first_free.emplace(group_of_.at(d), d);
    struct Best {
      int64_t job = 0;
      std::string device;
      double gain = 0;
    };
    std::optional<Best> best_under, best_any;
    for (auto& [id, given] : a->given) {
      const AllocJob& j = *by_id_.at(id);
      if (fixed.contains(id)) continue;
      if (j.max_devices > 0 && static_cast<int64_t>(given.size()) >= j.max_devices) continue;
      const UserPolicy& policy = policies_.For(j.user);
      const UserUsage& used = (*usage)[j.user];
      if (policy.max_devices > 0 && used.devices >= policy.max_devices) continue;
      // Behind a reservation only a spare device, or one to a job that ends
      // before the reserved start anyway.
      if (*reserved && (*reserved)->spare <= 0) {
        TESSERA_ASSIGN_OR_RETURN(double ends, EndsIn(j, given));
        if (!(ends <= (*reserved)->shadow_s)) continue;
      }
      TESSERA_ASSIGN_OR_RETURN(double now, RateOf(j, given));
      const bool under = static_cast<double>(used.devices) / policy.weight < even;
      for (const auto& [group, device] : first_free) {
        // Its own device of the group, when one is free.
        std::string pick = device;
        for (const std::string& h : j.held) {
          if (free->contains(h) && group_of_.at(h) == group) {
            pick = h;
            break;
          }
        }
        DeviceSet more = given;
        more.insert(pick);
        TESSERA_ASSIGN_OR_RETURN(double rate, RateOf(j, more));
        double gain = (rate - now) / fair_rate_.at(id);
        if (j.held.contains(pick)) gain *= options_.keep_bonus;
        if (!(gain >= options_.min_gain)) continue;
        std::optional<Best>& slot = under ? best_under : best_any;
        if (!slot || gain > slot->gain) slot = Best{id, pick, gain};
        if (under && (!best_any || gain > best_any->gain)) best_any = Best{id, pick, gain};
      }
    }
    const std::optional<Best>& chosen = best_under ? best_under : best_any;
    if (!chosen) break;
    a->given[chosen->job].insert(chosen->device);
    free->erase(chosen->device);
    (*usage)[by_id_.at(chosen->job)->user].devices += 1;
    if (*reserved && (*reserved)->spare > 0) --(*reserved)->spare;
  }
  return Status::Ok();
}

Status Allocator::Regroup(const std::set<int64_t>& fixed, Assignment* a, DeviceSet* free,
                          std::map<std::string, UserUsage>* usage,
                          std::optional<Reservation>* reserved) {
  // The fill adds one device at a time, so it can stop on a set no single
  // device improves while a different set would: four fast devices where
  // eight of another type run the job faster. Each job is planned once on
  // what it was given and the devices left free, and takes that plan's
  // devices when they raise its normalized throughput by min_gain for each
  // device they add (and stay within its user's device limit); what it gives
  // up is free again.
  if (free->empty()) return Status::Ok();
  for (auto& [id, given] : a->given) {
    if (fixed.contains(id)) continue;
    const AllocJob& j = *by_id_.at(id);
    DeviceSet pool = given;
    pool.insert(free->begin(), free->end());
    TESSERA_ASSIGN_OR_RETURN(RateOnDevices wider, Rate(j, pool));
    TESSERA_ASSIGN_OR_RETURN(double now, RateOf(j, given));
    // min_gain for each device it adds, as the fill asks of one.
    const auto added = std::max<int64_t>(
        1, static_cast<int64_t>(wider.used.size()) - static_cast<int64_t>(given.size()));
    if (wider.used.empty() || !((wider.rate - now) / fair_rate_.at(id) >=
                                options_.min_gain * static_cast<double>(added))) {
      continue;
    }
    const UserPolicy& policy = policies_.For(j.user);
    UserUsage& used = (*usage)[j.user];
    const int64_t after =
        used.devices - static_cast<int64_t>(given.size()) + static_cast<int64_t>(wider.used.size());
    if (policy.max_devices > 0 && after > policy.max_devices) continue;
    // Behind a reservation: at most the spare devices more.
    const int64_t more =
        static_cast<int64_t>(wider.used.size()) - static_cast<int64_t>(given.size());
    if (*reserved && more > 0) {
      TESSERA_ASSIGN_OR_RETURN(double ends, EndsIn(j, given));
      if (!(ends <= (*reserved)->shadow_s)) {
        if (more > (*reserved)->spare) continue;
        (*reserved)->spare -= more;
      }
    }
    used.devices = after;
    free->insert(given.begin(), given.end());
    for (const std::string& d : wider.used) free->erase(d);
    given = wider.used;
    if (free->empty()) break;
  }
  return Status::Ok();
}

Status Allocator::Trade(const std::set<int64_t>& fixed, Assignment* a) {
  // Two jobs swap one device of one group for one of another when that raises
  // the sum of their normalized throughputs: each type goes to the job it
  // helps most relative to its others. Device counts do not change.
  auto firsts = [&](const DeviceSet& set) {
    std::map<std::string, std::string> out;
    for (const std::string& d : set) out.emplace(group_of_.at(d), d);
    return out;
  };
  for (int pass = 0; pass < 3; ++pass) {
    bool traded = false;
    for (auto i = a->given.begin(); i != a->given.end(); ++i) {
      if (fixed.contains(i->first)) continue;
      for (auto k = std::next(i); k != a->given.end(); ++k) {
        if (fixed.contains(k->first)) continue;
        const AllocJob& ji = *by_id_.at(i->first);
        const AllocJob& jk = *by_id_.at(k->first);
        const std::map<std::string, std::string> gi = firsts(i->second), gk = firsts(k->second);
        if (gi.size() + gk.size() < 3 && gi.begin()->first == gk.begin()->first) continue;
        TESSERA_ASSIGN_OR_RETURN(double ri, RateOf(ji, i->second));
        TESSERA_ASSIGN_OR_RETURN(double rk, RateOf(jk, k->second));
        double best = options_.min_gain;
        std::optional<std::pair<std::string, std::string>> swap;
        for (const auto& [group_i, di] : gi) {
          for (const auto& [group_k, dk] : gk) {
            if (group_i == group_k) continue;
            DeviceSet si = i->second, sk = k->second;
            si.erase(di);
            si.insert(dk);
            sk.erase(dk);
            sk.insert(di);
            TESSERA_ASSIGN_OR_RETURN(double ri2, RateOf(ji, si));
            TESSERA_ASSIGN_OR_RETURN(double rk2, RateOf(jk, sk));
            // A swap never leaves a job with no plan on what it holds.
            if (!(ri2 > 0) || !(rk2 > 0)) continue;
            const double delta =
                (ri2 - ri) / fair_rate_.at(ji.id) + (rk2 - rk) / fair_rate_.at(jk.id);
            if (delta > best) {
              best = delta;
              swap = std::make_pair(di, dk);
            }
          }
        }
        if (!swap) continue;
        i->second.erase(swap->first);
        i->second.insert(swap->second);
        k->second.erase(swap->second);
        k->second.insert(swap->first);
        traded = true;
      }
    }
    if (!traded) break;
  }
  return Status::Ok();
}

Result<std::optional<double>> Allocator::FinishFairness(const AllocJob& job,
                                                        const DeviceSet& devices) {
  const double fair = fair_rate_.at(job.id);
  TESSERA_ASSIGN_OR_RETURN(double rate, RateOf(job, devices));
  if (!(rate > 0) || !(fair > 0)) return std::optional<double>();
  if (job.held.empty()) {
    if (!(job.work > 0)) return std::optional<double>();
    return std::optional<double>((job.waited_s + job.work / rate) / (job.work / fair));
  }
  if (!(job.age_s > 0) || !(job.remaining_s > 0)) return std::optional<double>();
  TESSERA_ASSIGN_OR_RETURN(double now, RateOf(job, job.held));
  if (!(now > 0)) return std::optional<double>();
  const double left = job.remaining_s * now;
  double finish = left / rate;
  if (devices != job.held) {
    const bool keeps_one = std::any_of(devices.begin(), devices.end(),
                                       [&](const std::string& d) { return job.held.contains(d); });
    finish += keeps_one || !(job.restart_cost_s > 0) ? job.move_cost_s : job.restart_cost_s;
  }
  return std::optional<double>((job.age_s + finish) / ((job.work_done + left) / fair));
}

Status Allocator::CatchUp(const std::set<int64_t>& fixed, Assignment* a) {
  // A job that restarts from a checkpoint and has fallen behind its fair
  // share where it is (its projected finish-time fairness above
  // options.catch_up_above: a job on the lab's slowest devices for its whole
  // run) swaps a device of a slower group for one of a faster group with a
  // job starting now or another such job, when that lowers its own by the
  // fraction options.catch_up_gain and leaves the other within the bound (or
  // no worse off than it is): the slow devices go round instead of staying
  // with whoever started on them. The worst off first; each job swaps once a
  // round. Device counts do not change, so neither do shares.
  if (!(options_.catch_up_above > 0)) return Status::Ok();
  auto may_swap = [&](const AllocJob& j) {
    return !fixed.contains(j.id) && (j.held.empty() || j.requeueable);
  };
  std::vector<std::pair<double, int64_t>> behind;  // (-fairness, id): the worst off first
  for (const auto& [id, given] : a->given) {
    const AllocJob& j = *by_id_.at(id);
    if (j.held.empty() || !may_swap(j)) continue;
    TESSERA_ASSIGN_OR_RETURN(std::optional<double> rho, FinishFairness(j, given));
    if (rho && *rho > options_.catch_up_above) behind.emplace_back(-*rho, id);
  }
  std::sort(behind.begin(), behind.end());
  std::set<int64_t> swapped;
  for (const auto& [neg_rho, x] : behind) {
    if (swapped.contains(x)) continue;
    const AllocJob& jx = *by_id_.at(x);
    const double rho_x = -neg_rho;
    DeviceSet& gx = a->given.at(x);
    TESSERA_ASSIGN_OR_RETURN(double rx, RateOf(jx, gx));
    double best = std::numeric_limits<double>::infinity();
    std::optional<std::tuple<int64_t, std::string, std::string>> swap;
    for (auto& [y, gy] : a->given) {
      const AllocJob& jy = *by_id_.at(y);
      if (y == x || swapped.contains(y) || !may_swap(jy)) continue;
      TESSERA_ASSIGN_OR_RETURN(std::optional<double> rho_y, FinishFairness(jy, gy));
      if (!rho_y) continue;
      for (const std::string& dx : gx) {
        for (const std::string& dy : gy) {
          if (group_of_.at(dx) == group_of_.at(dy)) continue;
          DeviceSet sx = gx, sy = gy;
          sx.erase(dx);
          sx.insert(dy);
          sy.erase(dy);
          sy.insert(dx);
          TESSERA_ASSIGN_OR_RETURN(double rx2, RateOf(jx, sx));
          if (!(rx2 > rx)) continue;
          TESSERA_ASSIGN_OR_RETURN(std::optional<double> rho_x2, FinishFairness(jx, sx));
          TESSERA_ASSIGN_OR_RETURN(std::optional<double> rho_y2, FinishFairness(jy, sy));
          if (!rho_x2 || !rho_y2 || *rho_x2 > rho_x * (1.0 - options_.catch_up_gain) ||
              *rho_y2 > std::max(*rho_y, options_.catch_up_above)) {
            continue;
          }
          if (const double worst = std::max(*rho_x2, *rho_y2); worst < best) {
            best = worst;
            swap = std::make_tuple(y, dx, dy);
          }
        }
      }
    }
    if (!swap) continue;
    const auto& [y, dx, dy] = *swap;
    DeviceSet& gy = a->given.at(y);
    gx.erase(dx);
    gx.insert(dy);
    gy.erase(dy);
    gy.insert(dx);
    swapped.insert({x, y});
    a->caught_up[x] = "where it is it would finish " + Fixed(rho_x, 1) +
                      "x its time alone on its fair share; it swaps " + dx + " for " + dy + " (" +
                      Fixed(best, 1) + "x at worst for the two)";
    if (!by_id_.at(y)->held.empty()) {
      a->caught_up[y] = "job " + std::to_string(x) + " of " + jx.user + " would finish " +
                        Fixed(rho_x, 1) +
                        "x its time alone on its fair share where it is; it swaps " + dy + " for " +
                        dx + " (" + Fixed(best, 1) + "x at worst for the two)";
    }
  }
  return Status::Ok();
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
    const bool keeps_one = std::any_of(
        to.begin(), to.end(), [&](const std::string& d) { return mover->held.contains(d); });
    const double move_s =
        keeps_one || !(mover->restart_cost_s > 0) ? mover->move_cost_s : mover->restart_cost_s;
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
    const auto caught_up = a.caught_up.find(mover->id);
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

}  // namespace

std::string_view AllocActionName(AllocAction action) { return NameOf(kAllocActionNames, action); }

Result<Allocation> Allocate(const std::vector<AllocJob>& jobs,
                            const std::vector<ShareDevice>& devices, const UserPolicies& policies,
                            const ShareHooks& hooks, const ShareOptions& options) {
  if (!hooks.rate) return InvalidArgument("the rate hook is required", "hooks.rate");
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
  Allocator allocator(jobs, devices, policies, hooks, options);
  return allocator.Run();
}

}  // namespace tessera::scheduler
