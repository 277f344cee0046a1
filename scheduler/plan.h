// Plan and PlanSet: what the planner returns.
//
// Purpose: a Plan is one complete layout: replicas (data-parallel groups), each
// a pipeline of stages; every stage holds exactly one device and a half-open
// layer range [layer_begin, layer_end). Each replica has an integer batch share
// (the shares sum to the global batch) and the weight its gradients get so the
// summed update equals the global-batch update. Predictions come from the cost
// model (scheduler/cost_model.h). A PlanSet holds the plans, best first, and one
// Rejection per option that was ruled out, with a one-line reason users see, and
// the baselines (hand-made even splits) the chosen plan is compared with.
// Ownership: plain values. Thread safety: values.
#ifndef TESSERA_SCHEDULER_PLAN_H_
#define TESSERA_SCHEDULER_PLAN_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "scheduler/cluster_snapshot.h"
#include "scheduler/job_request.h"
#include "scheduler/layout.h"

namespace tessera::scheduler {

struct Stage {
  std::vector<DeviceId> devices;  // exactly one device per stage
  int layer_begin = 0;            // half-open [layer_begin, layer_end)
  int layer_end = 0;
  double time_s = 0;              // per micro-batch: compute + sends + overhead
  int64_t peak_memory_bytes = 0;  // predicted peak on the stage's device
  double compute_s = 0;           // per step: forward + backward of its layers, all micro-batches
  double compute_scale = 1.0;     // the device's Device::compute_scale the plan assumed
};

struct Replica {
  int64_t batch = 0;           // samples (or tiles, for tiled plans) per step
  double gradient_weight = 0;  // batch / global_batch: scale local-mean gradients by this
  std::vector<Stage> stages;   // in pipeline order
};

struct Tiling {
  int tile_px = 0;     // square tile side, including overlap
  int overlap_px = 0;  // overlap between neighbouring tiles (2 x halo)
  int64_t tiles_per_image = 0;
};

struct Prediction {
  double step_s = 0;
  double samples_per_s = 0;
  double bubble = 0;  // pipeline idle fraction of the critical replica
  double comm = 0;    // fraction of the step spent in visible communication
  std::map<std::string, int64_t> peak_memory_bytes;  // by "node:index"
};

// How the chosen plan compares with one plan a lab would run by hand (a baseline,
// see Baseline): both are scored by the same CostModel::Evaluate.
struct BaselineScore {
  std::string name;         // "even_all" | "best_group"
  std::string description;  // "an even split over all 5 devices", "the 2 A100s alone"
  bool feasible = false;
  std::string reason;  // infeasible only: why it cannot run, one line
  double step_s = 0;   // feasible only: its predicted step time
  double speedup = 0;  // feasible only: step_s / the chosen plan's predicted step time
};

struct Plan {
  Layout layout = Layout::kData;
  int dp = 1;  // replicas
  int pp = 1;  // stages of the deepest replica
  int micro_batches = 1;
  Schedule schedule = Schedule::k1F1B;
  std::vector<Replica> replicas;
  std::optional<Tiling> tiling;
  Prediction predicted;
  std::string why;  // why this plan, in one line
  // The chosen (first) plan of a PlanSet only: its speedup over every baseline (the
  // same entries as PlanSet::baselines, without their plans). Empty on other plans.
  std::vector<BaselineScore> baselines;

  // All devices of the plan, replica by replica, stage by stage.
  std::vector<DeviceId> Devices() const;
};

struct Rejection {
  Layout layout = Layout::kAuto;  // kAuto: applies to every layout (e.g. busy devices)
  std::string reason;
};

// A hand-made plan: data parallel with an even batch split, the plan a lab runs
// without a planner. Two per job (scheduler/planner.h, "Baselines"):
//   even_all    an even split over all free devices (at most max_devices);
//   best_group  an even split over the devices of one speed class (equal type and
//               throughput), the class with the lowest predicted step time.
// Shares: global_batch / N each, the remainder one each to the first devices (in
// device-table order); micro-batches: the smallest M that fits memory.
struct Baseline : BaselineScore {
  std::optional<Plan> plan;  // feasible only: the baseline as a data plan
};

struct PlanSet {
  std::vector<Plan> plans;  // best (lowest predicted step time) first
  std::vector<Rejection> rejected;
  // even_all then best_group; speedups are over plans.front(). Empty for tiled-only
  // inference (layout forced to tiled), where a whole-image split is not an option.
  std::vector<Baseline> baselines;
};

}  // namespace tessera::scheduler

#endif  // TESSERA_SCHEDULER_PLAN_H_
