// QueueView: the queue as users see it (GET /api/v1/queue, `tessera queue`):
// the waiting jobs with their place, their user's weighted device share and
// why each waits, held ones last without a place. Built from a placement
// pass's decisions (scheduler/queue_pass.h) or, while every device is busy
// and no pass runs, from the queue's order alone (scheduler/queue_order.h).
//
// Ownership: plain values. Thread safety: pure functions; `waiting_reason` is
// called on the caller's thread.
#ifndef TESSERA_DAEMON_CONTROLLER_QUEUE_VIEW_H_
#define TESSERA_DAEMON_CONTROLLER_QUEUE_VIEW_H_

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "api/types.h"
#include "scheduler/queue_order.h"
#include "scheduler/queue_pass.h"

namespace tessera::daemon {

// Why a job waits as the controller last said it ("" when it said nothing).
using WaitingReasonFn = std::function<std::string(api::JobId)>;

// The jobs a pass left waiting, in its order; placed jobs and jobs that can
// never be planned are left out. A job the pass skipped (not ready) gets
// waiting_reason's text.
std::vector<api::QueueRow> QueueRowsFromPass(const std::vector<scheduler::PassDecision>& decisions,
                                             const WaitingReasonFn& waiting_reason);

}  // namespace tessera::daemon

#endif  // TESSERA_DAEMON_CONTROLLER_QUEUE_VIEW_H_
