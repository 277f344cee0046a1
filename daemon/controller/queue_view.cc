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

}  // namespace tessera::daemon
