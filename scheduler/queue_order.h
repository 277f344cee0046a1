// QueueOrder: the order in which waiting jobs are offered free devices, and
// the per-user limits that hold a job back. A lab shares its boxes between
// several people; one of them queueing hundreds of jobs must not make everyone
// else wait behind them.
//
// Purpose: jobs go in with their owner, priority and device bounds; users go in
// with what they hold now (running jobs, devices) and their policy (a weight and
// limits); out comes every job in the order the controller offers it devices,
// with its position among the jobs that may start, and for each job a user's
// limit holds back, why. Steps (OrderQueue):
//   1. Each user's weighted share: devices held / weight.
//   2. Repeatedly take, among the jobs left, those of the highest priority;
//      among them, the job of the user with the smallest weighted share;
//      ties (a user's own jobs) by the highest response ratio, (waited +
//      expected) / expected, for jobs whose expected run time is known
//      (highest response ratio next: shorter jobs first, and a waiting job's
//      ratio grows until it comes first); then by the oldest job (lowest id).
//   3. A taken job whose user is at a limit now (running jobs, devices) is
//      held with the reason; otherwise it gets the next position, and its
//      user's share grows by the devices it asks at least (min_devices), so
//      the user's next job ranks as if this one ran: users' jobs interleave
//      by weighted share (weighted fair queueing).
//   4. device_cap: how many devices the user's limit still allows the job
//      (0: no limit), for the planner's max_devices.
// The limits are checked on what users hold now; a caller that starts jobs in
// this order re-checks each with LimitHolds on its updated usage.
// With every user at weight 1, no limits and one user, the order is today's:
// priority, then submission. QueueOrdering::kFifo leaves step 2's share out:
// priority, then submission, whoever submitted (the limits still hold jobs).
//
// No job starves: a job's rank depends on its priority, its user's share and,
// among its user's jobs, its response ratio; a user's share falls as their
// jobs end, and a waiting job's ratio grows without bound while a newer job's
// starts at 1, so every waiting job of a user reaches the front once the jobs
// ahead of it (finitely many) have run.
// Ownership: plain values. Thread safety: pure function.
#ifndef TESSERA_SCHEDULER_QUEUE_ORDER_H_
#define TESSERA_SCHEDULER_QUEUE_ORDER_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace tessera::scheduler {

// One user's policy (tesserad's `users:`); "*" is the policy of users without
// their own entry.
struct UserPolicy {
  double weight = 1.0;           // share of the lab relative to others (> 0)
  int64_t max_running_jobs = 0;  // 0: no limit
  int64_t max_devices = 0;       // devices held at once over all running jobs; 0: no limit
  int64_t max_pending_jobs = 0;  // waiting jobs at once (checked at submission); 0: no limit

  // OK, or InvalidArgument naming the field ("weight", ...).
  Status Validate() const;
};

// Policies by user name, with "*" for everyone else.
struct UserPolicies {
  std::map<std::string, UserPolicy, std::less<>> users;
  // The user's own policy, else "*", else the default UserPolicy.
  const UserPolicy& For(const std::string& user) const;
};

// What a user holds now.
struct UserUsage {
  int64_t running_jobs = 0;
  int64_t devices = 0;
};

// How step 2 ranks jobs of equal priority.
enum class QueueOrdering {
  kFairShare,  // the user with the smallest weighted share first, then the oldest job
  kFifo,       // the oldest job first: no interleaving of users
};

struct QueuedJob {
  int64_t id = 0;  // submission order
  std::string user;
  int64_t priority = 0;  // higher first
  int64_t min_devices = 1;
  // Its predicted run time (e.g. alone on its fair share) and how long it has
  // waited, in seconds, for the response ratio (step 2); expected_s 0:
  // unknown (the job ranks as one that has not waited).
  double expected_s = 0;
  double waited_s = 0;
};

struct QueueEntry {
  int64_t id = 0;
  std::string user;
  // 1-based among the jobs that may start; 0 when held.
  int64_t position = 0;
  // Why a user's limit holds the job back ("alice runs 2 of her 2 jobs"); "".
  std::string held;
  // Devices the user's limit still allows this job; 0: no limit.
  int64_t device_cap = 0;
  // The user's weighted share when the job was ranked (devices / weight).
  double user_share = 0;
};

// Why `user` (holding `held`, under `policy`) may not start a job needing
// `min_devices` now ("alice runs 2 of 2 jobs allowed"), or "".
std::string LimitHolds(const std::string& user, const UserPolicy& policy, const UserUsage& held,
                       int64_t min_devices);

// Devices `policy` still allows a user holding `held`, for a job's
// max_devices; 0: no limit. A user at the limit also gets 0: REQUIRES the
// caller to have asked LimitHolds first (which holds the job then), or to
// read policy.max_devices itself (as growth of a running job does).
int64_t DeviceCap(const UserPolicy& policy, const UserUsage& held);

// The most devices a job may plan on: the smaller of its own bound
// `max_devices` (0: none) and what its user's device limit leaves it beside
// the `others` devices the user's other jobs hold (0 or less when the limit
// leaves none); nullopt when neither bounds it. For a waiting job `others` is
// all the user holds, for a running one all but its own.
std::optional<int64_t> DeviceBound(const UserPolicy& policy, int64_t others, int64_t max_devices);

// A running job's growth within DeviceBound: the most devices a job holding
// `own` may grow to (0: nothing bounds it), or nullopt when its user's device
// limit beside `others` leaves it no more than `own` (it does not grow).
std::optional<int64_t> GrowthBound(const UserPolicy& policy, int64_t others, int64_t own,
                                   int64_t max_devices);

// REQUIRES: every policy valid (UserPolicy::Validate); job ids distinct.
// Returns every job once: those that may start by position, then the held
// ones in the same rank order.
std::vector<QueueEntry> OrderQueue(const std::vector<QueuedJob>& jobs,
                                   const std::map<std::string, UserUsage>& usage,
                                   const UserPolicies& policies,
                                   QueueOrdering ordering = QueueOrdering::kFairShare);

}  // namespace tessera::scheduler

#endif  // TESSERA_SCHEDULER_QUEUE_ORDER_H_
