// Planner: the scheduler's entry point. A plain ClusterSnapshot, ModelProfile and
// JobRequest in; ranked Plans and the reasons for every rejected option out.
//
// Purpose: the search runs in small steps, each recording why it rejected an
// option (as Nomad's scheduler does): filter devices (busy or without throughput
// are excluded), rank them (by speed, memory, node), then for each layout build
// candidates and score them with the CostModel:
//   data      device subsets (speed prefixes, per node, per node union, per type);
//             integer batch shares by speed and memory; micro-batches (gradient
//             accumulation) only when memory requires them.
//   pipeline  device orderings (by speed, node, memory); an exact min-max layer
//             partition for every depth; micro-batch count by coarse scan + local search.
//   hybrid    replicas along node and device-type lines (per node, per node-and-type,
//             contiguous chunks, stripes); each replica partitioned for its own
//             devices; batch shares by replica speed; one micro-batch count.
//   tiled     (inference with an image) tile size and overlap; tiles shared by speed.
// The best plan of every feasible layout is returned, best first. The steps are
// written in planner.cc (MakePlans), scheduler/search/ (one file per layout, and the
// local searches) and baselines.cc, each file opening with the list of its steps.
//
// Baselines: every job that is not tiled-only also gets the two plans a lab would
// run by hand, scored by the same CostModel::Evaluate (PlanSet::baselines):
//   even_all    data parallel over all free devices (the max_devices fastest when
//               capped), even shares (B / N, the remainder one each to the first
//               devices in device-table order), the smallest M that fits memory;
//               infeasible, with the reason, when a device cannot hold the model
//               plus one sample, B < N or N < min_devices.
//   best_group  the same over the devices of one speed class (equal type and
//               throughput), for every class; the one with the lowest step time.
// The planner never returns a best plan predicted slower than a feasible baseline:
// when one is faster than the best data plan found (and the layout is auto or data)
// it becomes the data plan, and ranks first when it is the fastest of all ("an even
// split over all 4 devices is the best plan found"). The first plan's `why` and
// `baselines` give its speedup over both ("1.42x an even split over all 5 devices,
// 1.18x the 2 A100s alone") or why one does not fit. Forced pipeline / hybrid
// layouts report the speedups (possibly below 1) without replacing anything.
//
// One collective backend per job: when the free devices use more than one
// (Device::backend: NCCL on CUDA GPUs, Gloo on CPUs and emulated devices), each
// backend's devices are planned on their own and the backend with the fastest best
// plan is chosen; PlanSet::rejected says so and gives the other backends' best step
// time or why they failed. A device without a backend joins every class.
//
// Infeasible jobs: MakePlans returns kFailedPrecondition whose message lists
// the reasons, layout by layout ("no free device", "data: doesn't fit on boxB:0
// ..."). Malformed input returns kInvalidArgument with the offending field.
// Thread safety: pure function; safe to call concurrently.
#ifndef TESSERA_SCHEDULER_PLANNER_H_
#define TESSERA_SCHEDULER_PLANNER_H_

#include <string>

#include "common/status.h"
#include "scheduler/cluster_snapshot.h"
#include "scheduler/cost_model.h"
#include "scheduler/job_request.h"
#include "scheduler/model_profile.h"
#include "scheduler/plan.h"

namespace tessera::scheduler {

struct PlannerOptions {
  CostModelOptions cost;
  int max_pipeline_stages = 16;  // deepest pipeline (per replica) the search builds
  // With layout auto, a plan other than a hand-made baseline must be predicted at
  // least this fraction faster than the best baseline; otherwise the baseline is
  // returned first. A lab's own layout is simpler and its step time better known, and
  // the cost model's errors (a few percent, bench/hetero) would turn smaller
  // predicted gains into losses.
  double baseline_margin = 0.05;
  // Only the fastest plan is wanted (a scheduler asking a job's throughput on a set of
  // devices): the pipeline search, or a hybrid replica grouping, whose lower bound on
  // the step time (scheduler/step_bound.h) is above the fastest plan found before it
  // is not searched; a layout left without a plan gets that bound as its reason. The
  // first plan is the full search's, with one exception the bounds do not cover: the
  // full search polishes its best hybrid plan (regrouping devices), and when that plan
  // came from a skipped grouping and its polish would have won, the first plan here
  // is the next best (tests/scheduler/step_bound_test.cc compares the two on many
  // device sets). The PlanSet lists fewer layouts.
  bool fastest_only = false;
};

// REQUIRES: nothing; bad input yields kInvalidArgument.
Result<PlanSet> MakePlans(const ClusterSnapshot& cluster, const ModelProfile& model,
                          const JobRequest& request, const PlannerOptions& options = {});

// The layout a candidate has: one single-stage replica or several single-stage
// replicas: data; one multi-stage replica: pipeline; otherwise hybrid.
Layout LayoutOf(const Candidate& candidate);

// Turns a scored candidate into a Plan (device ids, layer ranges, predictions).
// REQUIRES: evaluation.feasible and evaluation came from cost.Evaluate(candidate).
Plan ToPlan(const CostModel& cost, const Candidate& candidate, const Evaluation& evaluation);

}  // namespace tessera::scheduler

#endif  // TESSERA_SCHEDULER_PLANNER_H_
