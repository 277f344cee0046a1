// TrainReform: what the controller decides when a node of a running train
// attempt is lost and the survivors can go on without restarting
// (the worker's side is worker/runtime/reform.h).
//
// Steps of a re-forming (JobController runs them; these are its pure parts):
//   1. ReformBlocker: the attempt can re-form only when the job runs
//      tessera-worker's trainer (a builtin model other than gan-pix2pix, or a
//      model: entrypoint: a lab's script cannot re-form a world); else the
//      reason, which the restart's event names. Layers that only the lost
//      ranks held (OrphanLayers: a pipeline stage on the lost node) are
//      loaded from the newest checkpoint by the ranks that take them.
//   2. The controller plans the job again on the survivors' devices (plus the
//      free ones while no job waits) and builds the ranks of that plan as a
//      fresh launch would (attempt_launch.h; the same attempt, a new
//      rendezvous port).
//   3. ReformRanks: each rank of that launch is given to the survivor on its
//      device: the survivor keeps its key (its agent does not restart it) and
//      gets WorkerLaunch::reform {generation, env, plan}; survivors the new
//      plan leaves out are dropped, with WorkerLaunch::reform {generation,
//      left_out: true}: a left-out rank still desired (a planned re-form
//      keeps it so a moment) is handed that and exits at once; otherwise
//      its agent stops it.
// The same steps grow a running attempt onto devices that became free (a node
// back, a job ended; JobController::GrowTraining decides when): the plan then
// also has ranks on devices no running rank holds, which join as new ranks of
// the attempt (their agents start them with the reform order, and they take
// their state from the running ranks).
//
// Thread safety: pure functions.
#ifndef TESSERA_DAEMON_CONTROLLER_TRAIN_REFORM_H_
#define TESSERA_DAEMON_CONTROLLER_TRAIN_REFORM_H_

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "api/agent_protocol.h"
#include "api/types.h"
#include "common/status.h"
#include "daemon/controller/attempt_launch.h"

namespace tessera::daemon {

// Why `launch` of a job with `spec` cannot re-form; nullopt when it can.
std::optional<std::string> ReformBlocker(const api::JobSpec& spec, const AttemptLaunch& launch);

// The layers of `launch`'s plan that only ranks in `lost` held ("2-3", or "5"
// for one; a gap-free range is printed as first-last, otherwise a list);
// nullopt when every layer has a surviving owner.
std::optional<std::string> OrphanLayers(const AttemptLaunch& launch, const std::set<int64_t>& lost);

// The generation a new re-forming of `launch` gets: one more than any rank's.
int64_t NextReformGeneration(const AttemptLaunch& launch);

// The generation of the world in which rank status `w` (an exited rank's last
// progress line) made `job`'s last step; nullopt when it did not (no step
// count in the spec, or its last line short of it). A rank's line names the
// world that made its step ("generation", 0 before any re-form).
std::optional<int64_t> AllStepsDoneIn(const api::Job& job, const api::WorkerStatus& w);

struct ReformedRanks {
  AttemptLaunch launch;         // the old ranks (same keys), survivors with their reform,
                                // the unused ones with their left-out order
  std::vector<int64_t> unused;  // survivors the new plan leaves out (old rank numbers)
  std::vector<int64_t> joined;  // new ranks (numbered after the old ones)
};

// Gives every rank of `fresh` (the new plan) to the survivor of `old` on the
// same device; a rank on a device no survivor holds joins as a new rank
// (appended: its key's rank is its index), with fresh's launch and the reform.
// REQUIRES: `survivors` are ranks of `old`; `fresh` is of the same attempt.
Result<ReformedRanks> ReformRanks(const AttemptLaunch& old, const std::set<int64_t>& survivors,
                                  const AttemptLaunch& fresh, int64_t generation);

}  // namespace tessera::daemon

#endif  // TESSERA_DAEMON_CONTROLLER_TRAIN_REFORM_H_
