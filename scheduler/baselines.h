// Baselines: the plans a lab would run by hand, which the planner's best plan is
// compared with (PlanSet::baselines; scheduler/plan.h, Baseline).
//
// Purpose: even_all, data parallel over all free devices, and best_group, the same
// over the best group of identical devices, both with even shares, scored by the same
// CostModel::Evaluate as every candidate. MakePlans (scheduler/planner.cc) puts a
// baseline faster than the best data plan in its place, keeps one within the margin
// (PlannerOptions::baseline_margin) and reports the chosen plan's speedup over both.
// Internal to the planner. Ownership: values.
// Thread safety: pure functions.
#ifndef TESSERA_SCHEDULER_BASELINES_H_
#define TESSERA_SCHEDULER_BASELINES_H_

#include <string>
#include <vector>

#include "scheduler/cost_model.h"
#include "scheduler/job_request.h"
#include "scheduler/plan.h"

namespace tessera::scheduler {

// A baseline with its candidate and evaluation (when feasible).
struct ScoredBaseline {
  Baseline info;
  Candidate candidate;
  Evaluation ev;
};

// even_all, then best_group. Linear in the devices: one Evaluate per speed class plus one.
// REQUIRES: free_devices are indices of cm's free devices in device-table order (MakePlans'
// filter), at least one.
std::vector<ScoredBaseline> ScoreBaselines(const CostModel& cm, const JobRequest& req,
                                           const std::vector<int>& free_devices);

// "1.42x an even split over all 5 devices, 1.18x the 2 A100s alone"; an infeasible
// baseline: "<description> does not fit: <reason>". Empty for no scores.
std::string SpeedupText(const std::vector<BaselineScore>& scores);

}  // namespace tessera::scheduler

#endif  // TESSERA_SCHEDULER_BASELINES_H_
