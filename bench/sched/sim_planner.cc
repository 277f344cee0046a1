#include "bench/sched/sim_planner.h"

#include <algorithm>
#include <vector>

#include "scheduler/builtin_profiles.h"
#include "scheduler/planner.h"

namespace tessera::scheduler::sim {

namespace {

// What a plan of `job` depends on, for the caches.
std::string JobKey(const TraceJob& job, int64_t max_devices) {
  return std::string(JobKindName(job.kind)) + "|" + job.model + "|" +
         std::to_string(job.global_batch) + "|" + std::to_string(job.min_devices) + "|" +
         std::to_string(max_devices) + "|" + std::to_string(job.image_width) + "x" +
         std::to_string(job.image_height);
}

}  // namespace

SimPlanner::SimPlanner(const ClusterSnapshot& cluster) : cluster_(cluster), classes_(cluster) {
  for (const std::string& m : BuiltinProfileNames()) profiles_.emplace(m, *BuiltinProfile(m));
}

SimPlanner::SimPlanner(const ClusterSnapshot& cluster, std::map<std::string, ModelProfile> profiles)
    : cluster_(cluster), classes_(cluster), profiles_(std::move(profiles)) {}

Result<PlanSet> SimPlanner::Plan(const TraceJob& job, int64_t max_devices, const DeviceSet& busy) {
  std::string key = JobKey(job, max_devices);
  for (const std::string& d : busy) key += "|" + d;
  if (auto it = cache_.find(key); it != cache_.end()) return it->second;
  ++plans_made_;
  ClusterSnapshot snap = cluster_;
  for (Node& n : snap.nodes) {
    for (Device& d : n.devices) d.busy = busy.contains(DeviceId{n.name, d.index}.ToString());
  }
  JobRequest request;
  request.kind = job.kind;
  request.global_batch = job.global_batch;
  request.min_devices = static_cast<int>(job.min_devices);
  request.max_devices = static_cast<int>(max_devices);
  if (job.image_width > 0 && job.image_height > 0) {
    request.image =
        ImageSize{static_cast<int>(job.image_width), static_cast<int>(job.image_height)};
  }
  auto profile = profiles_.find(job.model);
  if (profile == profiles_.end()) return NotFound("no profile of " + job.model);
  PlannerOptions options;
  options.fastest_only = true;  // callers need the best plan only
  Result<PlanSet> plans = MakePlans(snap, profile->second, request, options);
  if (plans.ok()) {
    // Callers need the best plan only; keep the cache small.
    plans->plans.resize(std::min<size_t>(plans->plans.size(), 1));
    plans->rejected.clear();
    plans->baselines.clear();
  }
  return cache_.emplace(std::move(key), std::move(plans)).first->second;
}

Result<RateOnDevices> SimPlanner::Rate(const TraceJob& job, int64_t max_devices,
                                       const DeviceSet& on) {
  // Plan on the representative set of `on`'s shape (NodeClasses), remembered
  // by the shape; then rename the plan's devices to devices of `on`.
  // Fewer devices than the job's minimum: no plan. A maximum the set does
  // not reach bounds nothing: one question for every such maximum.
  const auto size = static_cast<int64_t>(on.size());
  if (size < std::max<int64_t>(job.min_devices, 1)) return RateOnDevices{};
  if (max_devices >= size) max_devices = 0;
  TESSERA_ASSIGN_OR_RETURN(NodeClasses::Shape shape, classes_.Canonicalize(on));
  const std::string key = JobKey(job, max_devices) + "|" + shape.key;
  auto it = rates_.find(key);
  if (it == rates_.end()) {
    DeviceSet busy;
    for (const Node& n : cluster_.nodes) {
      for (const Device& d : n.devices) {
        const std::string id = DeviceId{n.name, d.index}.ToString();
        if (!shape.representative.contains(id)) busy.insert(id);
      }
    }
    Result<PlanSet> plans = Plan(job, max_devices, busy);
    Rated rated;
    if (plans.ok() && !plans->plans.empty()) {
      const scheduler::Plan& best = plans->plans.front();
      rated.rate = static_cast<double>(job.global_batch) / best.predicted.step_s;
      rated.planned = best.Devices();
    }
    it = rates_.emplace(key, std::move(rated)).first;
  }
  RateOnDevices out;
  out.rate = it->second.rate;
  out.used = shape.ToQuery(it->second.planned);
  return out;
}

}  // namespace tessera::scheduler::sim
