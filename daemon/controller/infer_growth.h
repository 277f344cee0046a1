// InferGrowth: how new ranks join a running infer attempt on devices that
// became free (JobController::GrowInference decides when).
//
// An infer attempt whose ranks lease chunks independently (one stage per
// replica, no tiling: JobController::IndependentRanks) takes new ranks
// without touching the running ones. Each new rank is the rank a fresh
// launch of the wider plan (attempt_launch.h, the same attempt) starts on its
// device: the job's command line, env and account, its device. It joins as a
// new rank of the attempt, numbered after the existing ones (dropped ranks
// keep their numbers, so a number is never used twice within an attempt), and
// its place in the attempt is written over the fresh launch's:
//   RANK, ROLE_RANK               its new number (it leases chunks as that rank)
//   WORLD_SIZE, ROLE_WORLD_SIZE   the attempt's ranks after the growth
//   LOCAL_RANK                    its place among the attempt's live ranks on its
//                                 node in LOCAL_RANK order, so cuda:LOCAL_RANK is
//                                 its own GPU (launch/worker_env.h)
//   LOCAL_WORLD_SIZE              the attempt's live ranks on its node, itself included
//   MASTER_ADDR, MASTER_PORT      the attempt's (rank 0's; no infer rank of this
//                                 kind rendezvouses)
// The attempt's plan (the scheduler's plan JSON the job shows) and its rank
// plan (TESSERA_PLAN) each gain one replica per new rank, so replica k stays
// rank k's, as a fresh launch numbers them; every rank's launch carries the
// new rank plan (a running rank read its own when it started).
//
// Thread safety: pure functions.
#ifndef TESSERA_DAEMON_CONTROLLER_INFER_GROWTH_H_
#define TESSERA_DAEMON_CONTROLLER_INFER_GROWTH_H_

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"
#include "daemon/controller/attempt_launch.h"

namespace tessera::daemon {

struct GrownInfer {
  AttemptLaunch launch;         // the old ranks unchanged, then the new ones
  std::vector<int64_t> joined;  // the new ranks' numbers, in `devices` order
};

// Adds to `old` (whose ranks in `dropped` no longer run) one rank per device
// of `devices` ("node:index"), taken from `fresh`.
// REQUIRES (else kInvalidArgument naming the device or the field): `old` is
// an infer attempt with a rank; `fresh` is a launch of the same job and
// attempt whose replicas are one stage each; every device of `devices` is a
// device of `fresh` that no live rank of `old` holds, each named once.
Result<GrownInfer> JoinInferRanks(const AttemptLaunch& old, const std::set<int64_t>& dropped,
                                  const AttemptLaunch& fresh,
                                  const std::vector<std::string>& devices);

}  // namespace tessera::daemon

#endif  // TESSERA_DAEMON_CONTROLLER_INFER_GROWTH_H_
