// Reconciler: the agent's pure decision of one heartbeat.
//
// Given DESIRED (HeartbeatResponse.desired: everything the node should run)
// and ACTUAL (the supervisor's table: what runs, stops or has exited), decide
//   start   desired and unknown to the supervisor
//   stop    running but no longer desired
//   forget  exited and no longer desired (the controller has seen the end)
//   keep    everything else: desired and running/stopping/exited, or
//           stopping and not desired (already on its way out)
// A desired key that has exited is kept, never started again: the controller
// must stop listing it (level-triggered, see api/agent_protocol.h).
// Thread safety: pure function.
#ifndef TESSERA_AGENT_RECONCILER_H_
#define TESSERA_AGENT_RECONCILER_H_

#include <vector>

#include "api/agent_protocol.h"

namespace tessera::agent {

struct ReconcileActions {
  std::vector<api::WorkerLaunch> start;  // in desired order, each key once
  std::vector<api::WorkerKey> stop;      // sorted
  std::vector<api::WorkerKey> forget;    // sorted
  std::vector<api::WorkerKey> keep;      // sorted
};

ReconcileActions Reconcile(const std::vector<api::WorkerLaunch>& desired,
                           const std::vector<api::WorkerStatus>& actual);

}  // namespace tessera::agent

#endif  // TESSERA_AGENT_RECONCILER_H_
