// Rank plan: the controller's layout for one training attempt (TESSERA_PLAN),
// parsed, validated, and turned into this rank's role.
//
// The plan lists replicas (data-parallel copies of the model); each replica is
// a pipeline of stages, each stage one rank owning a half-open range of
// layers. Data parallel = every replica has one stage; pipeline = one replica;
// hybrid = several replicas of several stages, possibly cut differently.
//
// Pure: no I/O, no torch. Thread safety: values.
#ifndef TESSERA_WORKER_RUNTIME_PLAN_H_
#define TESSERA_WORKER_RUNTIME_PLAN_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "scheduler/layout.h"

namespace tessera::worker {

// The planner's vocabulary (scheduler/layout.h): the rank plan's "layout" and
// "schedule" are its names. A training plan is data, pipeline or hybrid.
using scheduler::Layout;
using scheduler::LayoutName;
using scheduler::Schedule;
using scheduler::ScheduleName;

struct StagePlan {
  int rank = 0;
  int64_t layer_begin = 0;  // half-open [layer_begin, layer_end)
  int64_t layer_end = 0;
  int64_t predicted_peak_bytes = 0;  // the planner's peak memory for this stage; 0: unknown
};

struct ReplicaPlan {
  int64_t batch = 0;  // this replica's share of the global batch
  std::vector<StagePlan> stages;
};

struct Plan {
  Layout layout = Layout::kData;
  int64_t global_batch = 0;
  int64_t micro_batches = 1;
  Schedule schedule = Schedule::k1F1B;
  std::vector<ReplicaPlan> replicas;
};

// The rank plan file's text as a JSON object (training and inference read
// their own fields from it); kInvalidArgument when it is not one.
Result<nlohmann::json> ParsePlanDocument(std::string_view json_text);

// Parses the plan JSON. Errors are kInvalidArgument with `field` set to the
// JSON path ("replicas[1].stages[0].layers").
Result<Plan> ParsePlan(std::string_view json_text);

// Checks the plan against the world size and the model's layer count: batch
// shares positive and summing to global_batch, every replica's stages cover
// [0, num_layers) contiguously with non-empty ranges, every rank in
// [0, world_size) appears exactly once, layout consistent with the shape.
Status ValidatePlan(const Plan& plan, int world_size, int64_t num_layers);

// Plan for a single process training on the whole batch.
Plan SingleProcessPlan(int64_t global_batch, int64_t micro_batches, int64_t num_layers);

// What one rank does.
struct RankRole {
  int replica = 0;
  int stage = 0;
  int num_stages = 1;
  int64_t layer_begin = 0;
  int64_t layer_end = 0;
  int prev_rank = -1;  // previous stage of the same replica, or -1
  int next_rank = -1;  // next stage, or -1
  int64_t replica_batch = 0;
  int64_t sample_offset = 0;         // first sample of this replica within a global batch
  int64_t predicted_peak_bytes = 0;  // the planner's peak memory of this stage; 0: unknown
  bool first_stage() const { return prev_rank < 0; }
  bool last_stage() const { return next_rank < 0; }
};

// REQUIRES: ValidatePlan(plan, ...) is OK. kNotFound if `rank` is not in the plan.
Result<RankRole> RoleForRank(const Plan& plan, int rank);

// Owner set: the ranks that own a layer, one per replica, in replica order.
// Every distinct owner set gets one gradient all-reduce group; groups are
// listed in order of their first layer so every rank creates them in the same
// order.
struct OwnerGroup {
  std::vector<int> ranks;       // ordered by replica index
  std::vector<int64_t> layers;  // layers owned by exactly this set
};
std::vector<OwnerGroup> LayerOwnerGroups(const Plan& plan, int64_t num_layers);

// True when, in every owner group, all members sit at the same stage index of
// pipelines of the same length, so 1F1B issues their collectives (synchronized
// batch norm) in the same order. When false the trainer runs GPipe for models
// with batch norm: all forwards then all backwards is the same order for all.
bool OwnerGroupsShareStagePositions(const Plan& plan, int64_t num_layers);

// Micro-batch count every replica uses: min(micro_batches, smallest replica
// batch), so all replicas run the same number of micro-batches.
int64_t EffectiveMicroBatches(const Plan& plan);

// Splits `batch` into `parts` sizes differing by at most one, larger first.
std::vector<int64_t> SplitMicroBatches(int64_t batch, int64_t parts);

}  // namespace tessera::worker

#endif  // TESSERA_WORKER_RUNTIME_PLAN_H_
