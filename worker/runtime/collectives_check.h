// CollectivesCheck: a short self-test of the rank's collectives on its own
// device (NCCL on a GPU, Gloo on a CPU): all-reduce of a tensor whose sum every
// rank can check, broadcast from rank 0, barrier. A lab runs it as
// `tessera-worker collectives-check` under the torchrun environment (any world
// size, one process per GPU) to see that its GPUs and network carry collectives,
// and the GPU check (scripts/gpu-check.sh) runs it at world size 1.
//
// Thread safety: runs on the calling thread; one per process.
#ifndef TESSERA_WORKER_RUNTIME_COLLECTIVES_CHECK_H_
#define TESSERA_WORKER_RUNTIME_COLLECTIVES_CHECK_H_

#include <cstdint>
#include <nlohmann/json.hpp>

#include "common/status.h"
#include "worker/runtime/dist_env.h"

namespace tessera::worker {

struct CollectivesCheckOptions {
  int64_t size_mb = 64;  // all-reduced tensor, float32
  int iters = 10;        // timed all-reduces after one warm-up
};

// Returns {"backend", "device", "rank", "world_size", "allreduce_ok",
// "allreduce_ms" (median), "allreduce_busbw_gbps", "broadcast_ok", "barrier_ok"};
// an error when the device or the group cannot be had, or a collective fails.
Result<nlohmann::json> RunCollectivesCheck(const DistEnv& env,
                                           const CollectivesCheckOptions& options);

}  // namespace tessera::worker

#endif  // TESSERA_WORKER_RUNTIME_COLLECTIVES_CHECK_H_
