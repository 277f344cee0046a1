// The queue's order: weighted fair queueing by users' device shares.
//
// Steps (as in queue_order.h):
//   1. each user's weighted share from what they hold;
//   2. pick the highest priority, then the smallest weighted share (not for
//      kFifo), then the oldest job;
//   3. hold a job whose user is at a limit now, else give it the next
//      position and charge its user's share as if it ran;
//   4. cap its devices by what the user's limit leaves.
#include "scheduler/queue_order.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <tuple>

namespace tessera::scheduler {

Status UserPolicy::Validate() const {
  if (!(weight > 0) || !std::isfinite(weight)) return InvalidArgument("must be > 0", "weight");
  if (max_running_jobs < 0) return InvalidArgument("must be >= 0", "max_running_jobs");
  if (max_devices < 0) return InvalidArgument("must be >= 0", "max_devices");
  if (max_pending_jobs < 0) return InvalidArgument("must be >= 0", "max_pending_jobs");
  return Status::Ok();
}

const UserPolicy& UserPolicies::For(const std::string& user) const {
  static const UserPolicy kDefault;
  if (auto it = users.find(user); it != users.end()) return it->second;
  if (auto it = users.find("*"); it != users.end()) return it->second;
  return kDefault;
}

namespace {

std::string Plural(int64_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

}  // namespace

std::string LimitHolds(const std::string& user, const UserPolicy& policy, const UserUsage& held,
                       int64_t min_devices) {
  min_devices = std::max<int64_t>(min_devices, 1);
  if (policy.max_running_jobs > 0 && held.running_jobs >= policy.max_running_jobs) {
    return user + " runs " + std::to_string(held.running_jobs) + " of " +
           Plural(policy.max_running_jobs, "job", "jobs") + " allowed";
  }
  if (policy.max_devices > 0 && held.devices + min_devices > policy.max_devices) {
    return user + " holds " + std::to_string(held.devices) + " of " +
           Plural(policy.max_devices, "device", "devices") + " allowed; this job needs at least " +
           std::to_string(min_devices);
  }
  return "";
}

int64_t DeviceCap(const UserPolicy& policy, const UserUsage& held) {
  return policy.max_devices > 0 ? std::max<int64_t>(policy.max_devices - held.devices, 0) : 0;
}

std::optional<int64_t> DeviceBound(const UserPolicy& policy, int64_t others, int64_t max_devices) {
  std::optional<int64_t> bound;
  if (max_devices > 0) bound = max_devices;
  if (policy.max_devices > 0) {
    const int64_t left = policy.max_devices - others;
    bound = bound ? std::min(*bound, left) : left;
  }
  return bound;
}

std::optional<int64_t> GrowthBound(const UserPolicy& policy, int64_t others, int64_t own,
                                   int64_t max_devices) {
  if (const std::optional<int64_t> left = DeviceBound(policy, others, 0); left && *left <= own) {
    return std::nullopt;
  }
  return DeviceBound(policy, others, max_devices).value_or(0);
}

std::vector<QueueEntry> OrderQueue(const std::vector<QueuedJob>& jobs,
                                   const std::map<std::string, UserUsage>& usage,
                                   const UserPolicies& policies, QueueOrdering ordering) {
  // Step 1: what each user holds (charged further as their jobs are ranked).
  std::map<std::string, UserUsage> charged = usage;
  for (const QueuedJob& j : jobs) charged.try_emplace(j.user);
  auto share = [&](const std::string& user) {
    return static_cast<double>(charged[user].devices) / policies.For(user).weight;
  };

  std::vector<const QueuedJob*> left;
  left.reserve(jobs.size());
  for (const QueuedJob& j : jobs) left.push_back(&j);

  std::vector<QueueEntry> ready;
  std::vector<QueueEntry> held;
  while (!left.empty()) {
    // Step 2: the next job to rank.
    size_t best = 0;
    auto key = [&](const QueuedJob* j) {
      const bool fifo = ordering == QueueOrdering::kFifo;
      const double s = fifo ? 0.0 : share(j->user);
      const double ratio = !fifo && j->expected_s > 0
                               ? (std::max(j->waited_s, 0.0) + j->expected_s) / j->expected_s
                               : 1.0;
      return std::make_tuple(-j->priority, s, -ratio, j->id);
    };
    for (size_t i = 1; i < left.size(); ++i) {
      if (key(left[i]) < key(left[best])) best = i;
    }
    const QueuedJob& job = *left[best];
    left.erase(left.begin() + static_cast<std::ptrdiff_t>(best));

    // Step 3: held by a limit (on what the user holds now), or ranked and
    // charged as if it ran.
    const UserPolicy& policy = policies.For(job.user);
    const auto now = usage.find(job.user);
    const UserUsage holds = now == usage.end() ? UserUsage{} : now->second;
    QueueEntry entry;
    entry.id = job.id;
    entry.user = job.user;
    entry.user_share = share(job.user);
    entry.held = LimitHolds(job.user, policy, holds, job.min_devices);
    if (!entry.held.empty()) {
      held.push_back(std::move(entry));
      continue;
    }
    // Step 4: what the device limit leaves this job.
    entry.device_cap = DeviceCap(policy, holds);
    entry.position = static_cast<int64_t>(ready.size()) + 1;
    charged[job.user].devices += std::max<int64_t>(job.min_devices, 1);
    ready.push_back(std::move(entry));
  }
  ready.insert(ready.end(), std::make_move_iterator(held.begin()),
               std::make_move_iterator(held.end()));
  return ready;
}

}  // namespace tessera::scheduler
