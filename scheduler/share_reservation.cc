// Step 3 of the share policy (share_policy.h) beyond the minimums: the
// first waiting job short of devices by count holds those that free up.
//   1. Reserve: by the placed jobs' predicted ends (EndsIn), when enough
//      devices are free for it (the shadow time) and how many spare then;
//   2. Backfills: a job behind it starts only if it ends by then or fits in
//      the spare devices;
//   3. Requeue: running jobs go back to the queue for it when it would wait
//      longer than it runs there plus their restarts, and they have more
//      than that left there;
//   4. MakeRoom: a waiting job with no plan on the free devices may have a
//      running movable job take its minimum again elsewhere.
#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "scheduler/share_allocator.h"

namespace tessera::scheduler::share_internal {

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
    const double cost = MoveSeconds(v, DeviceSet{});  // a restart: it keeps none
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

}  // namespace tessera::scheduler::share_internal
