// Step bounds: the least step time any plan of a layout (or of a replica grouping) can
// have on a set of devices, from the cost model's terms alone, without a search.
//
// Purpose: a planner asked for its fastest plan only (PlannerOptions::fastest_only)
// skips a layout (or a hybrid grouping) whose bound is not below the fastest plan it
// has already found: no plan of it could have won. The bound must never exceed the step time
// CostModel::Evaluate gives any candidate of the layout on those devices; it is
// loose (it charges every layer on its fastest device, every stage boundary on the
// fastest link, perfectly even stages), and tight enough where a pipeline loses by
// far: per-micro-batch fixed times and messages that a data-parallel plan does not pay.
// Thread safety: pure functions over a const CostModel.
#ifndef TESSERA_SCHEDULER_STEP_BOUND_H_
#define TESSERA_SCHEDULER_STEP_BOUND_H_

#include <cstdint>
#include <vector>

#include "scheduler/cost_model.h"

namespace tessera::scheduler {

// A lower bound on CostModel::Evaluate(c).step_s for every single-replica pipeline c
// of 2 to max_stages stages over distinct devices of `devices`, with any micro-batch
// count the model allows (1..batch, and at most its max_micro_batches when
// training), holding the global batch. Infinity when no such pipeline exists
// (fewer than 2 devices or layers, or max_stages < 2).
// Steps:
//   1. Per layer, its least compute (per sample) and fixed (per micro-batch) time
//      over the devices' speed classes; the fastest link (most bytes/s, least
//      latency) between two of the devices; the smallest message between layers.
//   2. For S stages and M micro-batches, the stage times sum to at least
//      micro x (compute + (S - 1) x message / bandwidth) + fixed + S x overhead +
//      (S - 1) x forward_send_messages x latency (micro = B / M), and the replica
//      takes sum + (M - 1) x max >= sum x (M + S - 1) / S (CostModel::ReplicaSeconds);
//      the step adds only non-negative terms.
//   3. That bound is convex in M: its minimum is at the integers around
//      sqrt(a (S - 1) / c) (a: the terms per sample x B, c: the terms per
//      micro-batch), clamped to the allowed counts; the least over S is returned.
// REQUIRES: devices are indices of cm's devices.
double PipelineStepLowerBound(const CostModel& cm, const std::vector<int>& devices, int max_stages);

// A lower bound on CostModel::Evaluate(c).step_s for every candidate c whose replicas
// are `replicas` (replica r's devices, each a stage, in any order), with any split of
// the global batch (at least M samples a replica) and any micro-batch count M (1..B /
// replicas, and the model's limit when training). Infinity when there is no such
// candidate (no replica, a replica of more devices than layers, B < replicas); 0 for
// inference on single-device replicas only (each paced on its own: no common step).
// Steps:
//   1. Per replica, the terms of PipelineStepLowerBound's step 1 over its devices.
//   2. For each M up to 64: each replica's time for b samples is at least the
//      larger of two lines in b (PipelineStepLowerBound, step 2); the step is at
//      least the least level at which the replicas hold B samples between them
//      (bisection); for every M above 64 at once, lines below those of every such M.
//   3. The least over M.
// REQUIRES: replicas hold distinct indices of cm's devices.
double HybridStepLowerBound(const CostModel& cm, const std::vector<std::vector<int>>& replicas);

}  // namespace tessera::scheduler

#endif  // TESSERA_SCHEDULER_STEP_BOUND_H_
