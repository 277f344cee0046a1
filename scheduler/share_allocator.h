// The share policy's allocator (share_policy.h's Allocate): internal to the
// scheduler library, one Allocator per call. Its steps live in three files:
//   share_policy.cc       steps 1-2, 3's minimums, 5 and 6 (Run, Assign, Decide);
//   share_reservation.cc  step 3's reservation, backfill, requeue and room
//                         (Reserve, Backfills, Requeue, MakeRoom);
//   share_fill.cc         step 4 (Fill, Regroup, Trade, CatchUp).
// Ownership: borrows the call's jobs, devices, policies, hooks and options for
// its life. Thread safety: one thread; remembers the hook's answers.
#ifndef TESSERA_SCHEDULER_SHARE_ALLOCATOR_H_
#define TESSERA_SCHEDULER_SHARE_ALLOCATOR_H_

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "scheduler/share_policy.h"

namespace tessera::scheduler::share_internal {

// "a:0,a:1".
inline std::string Join(const DeviceSet& devices) {
  std::string out;
  for (const std::string& d : devices) out += (out.empty() ? "" : ",") + d;
  return out;
}

// `v` with `digits` decimals, for reasons ("1.31").
inline std::string Fixed(double v, int digits) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// Whether running `job`'s move onto `to` keeps one of the devices it holds
// (it re-forms around it; else it restarts from its checkpoint).
inline bool KeepsOne(const AllocJob& job, const DeviceSet& to) {
  return std::any_of(to.begin(), to.end(),
                     [&](const std::string& d) { return job.held.contains(d); });
}

// Seconds of progress running `job`'s move onto `to` costs: move_cost_s when
// it keeps a device (or no restart cost is known), else restart_cost_s.
inline double MoveSeconds(const AllocJob& job, const DeviceSet& to) {
  return KeepsOne(job, to) || !(job.restart_cost_s > 0) ? job.move_cost_s : job.restart_cost_s;
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
  std::set<int64_t> behind;  // of those, the jobs behind their fair share (not their partners)
  double objective = 0;
};

// Allocate's work for one call (share_policy.h's steps).
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

}  // namespace tessera::scheduler::share_internal

#endif  // TESSERA_SCHEDULER_SHARE_ALLOCATOR_H_
