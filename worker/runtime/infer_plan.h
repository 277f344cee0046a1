// InferPlan: what an inference rank reads of its attempt's rank plan
// (TESSERA_PLAN, written by tesserad from the planner's plan).
//
// Layouts ("layout", the planner's names: scheduler/layout.h):
//   any but "tiled"  every rank leases chunks on its own; images larger than
//                    --max-tile-px are tiled locally.
//   "tiled"          rank 0 leases; every rank runs its share of each image's
//                    tiles (tiled_ranks.h), proportional to the replicas'
//                    `batch` (device speed).
// Absent: "data".
//
// Thread safety: a plain function and a value.
#ifndef TESSERA_WORKER_RUNTIME_INFER_PLAN_H_
#define TESSERA_WORKER_RUNTIME_INFER_PLAN_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "scheduler/layout.h"
#include "worker/runtime/tiling.h"

namespace tessera::worker {

using scheduler::Layout;

struct InferPlan {
  Layout layout = Layout::kData;
  std::vector<int64_t> rank_weights;  // by rank: the batch of the replica it serves (0: none)
  std::optional<TileSpec> tiling;     // from "tiling": {"tile_px", "overlap_px"}
};

// Reads layout, replicas[].batch, replicas[].stages[].rank and tiling.
// kInvalidArgument naming the field for malformed JSON, a layout the planner
// does not name, or a rank outside [0, world_size).
Result<InferPlan> ParseInferPlan(const std::string& json_text, int world_size);

}  // namespace tessera::worker

#endif  // TESSERA_WORKER_RUNTIME_INFER_PLAN_H_
