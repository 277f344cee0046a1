// InferenceTracker: how fast each rank of an infer job works, for progress.
//
// Purpose: the lease route records every chunk a rank reports (images
// processed, seconds spent); Progress() combines that with the job's chunk
// counts from the store into api::InferenceProgress:
// - a rank's images/s = images it processed / seconds it spent on them, in
//   the job's current attempt (a new attempt starts from zero);
// - the job's images/s = the sum over the attempt's live ranks (all of them
//   busy), when the caller knows them (LiveRanks: a running infer attempt
//   drops ranks, giving their devices back or losing their node, and takes
//   new ones on devices that became free); a rank that left no longer counts,
//   one that joined counts from its first reported chunk. Without them, the
//   sum over every rank that reported in the attempt;
// - ETA = images not yet done / the job's images/s (unknown without a rate).
// Devices are the live ranks' (each named by LiveRanks, a joined rank with
// nothing reported yet at 0 images/s), else the reporting ranks' named from
// the job's plan, ranks numbered replica by replica, stage by stage (as
// daemon/controller/attempt_launch.h numbers them).
// Rates live in memory only: after a controller restart they start again.
//
// Ownership: owns its counters. Thread safety: every method is safe to call
// concurrently (one mutex).
#ifndef TESSERA_DAEMON_INFERENCE_TRACKER_H_
#define TESSERA_DAEMON_INFERENCE_TRACKER_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "api/lease_protocol.h"
#include "api/types.h"
#include "common/mutex.h"
#include "common/thread_annotations.h"
#include "daemon/store/store.h"

namespace tessera::daemon {

class InferenceTracker {
 public:
  // The ranks of an attempt that still work, each with its device
  // ("node:index").
  using LiveRanks = std::map<int64_t, std::string>;

  void Record(api::JobId job, int64_t attempt, int64_t rank, int64_t images, double seconds)
      EXCLUDES(mu_);
  // `live`: the attempt's live ranks, when known (see above).
  api::InferenceProgress Progress(api::JobId job, int64_t attempt, const ChunkCounts& counts,
                                  const api::Json& plan,
                                  const std::optional<LiveRanks>& live = std::nullopt) const
      EXCLUDES(mu_);
  void Forget(api::JobId job) EXCLUDES(mu_);

 private:
  struct RankWork {
    int64_t images = 0;
    double seconds = 0;
  };
  struct JobWork {
    int64_t attempt = 0;
    std::map<int64_t, RankWork> ranks;
  };
  mutable Mutex mu_;
  std::map<api::JobId, JobWork> jobs_ GUARDED_BY(mu_);
};

}  // namespace tessera::daemon

#endif  // TESSERA_DAEMON_INFERENCE_TRACKER_H_
