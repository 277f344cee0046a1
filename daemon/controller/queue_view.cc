#include "daemon/controller/queue_view.h"

#include <utility>

namespace tessera::daemon {

std::vector<api::QueueRow> QueueRowsFromPass(const std::vector<scheduler::PassDecision>& decisions,
                                             const WaitingReasonFn& waiting_reason) {
  std::vector<api::QueueRow> rows;
  std::vector<api::QueueRow> held;
  for (const scheduler::PassDecision& d : decisions) {
    if (d.action == scheduler::PassAction::kPlace || d.action == scheduler::PassAction::kNever) {
      continue;
    }
    api::QueueRow row{0, d.job.id, d.job.user, d.job.priority, d.user_share, d.reason};
    if (d.action == scheduler::PassAction::kNotReady) row.reason = waiting_reason(d.job.id);
    if (d.held) {
      held.push_back(std::move(row));
    } else {
      row.position = static_cast<int64_t>(rows.size()) + 1;
      rows.push_back(std::move(row));
    }
  }
  rows.insert(rows.end(), held.begin(), held.end());
  return rows;
}

std::vector<api::QueueRow> QueueRowsFromOrder(
    const std::vector<api::Job>& pending, const std::map<std::string, scheduler::UserUsage>& usage,
    const scheduler::UserPolicies& policies, scheduler::QueueOrdering ordering,
    const WaitingReasonFn& waiting_reason) {
  std::vector<scheduler::QueuedJob> jobs;
  std::map<api::JobId, int64_t> priority;
  for (const api::Job& j : pending) {
    jobs.push_back(scheduler::QueuedJob{j.id, j.owner, j.spec.priority, j.spec.min_devices});
    priority[j.id] = j.spec.priority;
  }
  std::vector<api::QueueRow> rows;
  for (const scheduler::QueueEntry& e : scheduler::OrderQueue(jobs, usage, policies, ordering)) {
    std::string why = e.held.empty() ? waiting_reason(e.id) : "held by a user limit: " + e.held;
    if (why.empty()) why = "every device is busy";
    rows.push_back(
        api::QueueRow{e.position, e.id, e.user, priority[e.id], e.user_share, std::move(why)});
  }
  return rows;
}

}  // namespace tessera::daemon
