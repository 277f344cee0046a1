#include "bench/sched/sim_planner.h"

#include <algorithm>
#include <vector>

#include "scheduler/builtin_profiles.h"
#include "scheduler/planner.h"

namespace tessera::scheduler::sim {

SimPlanner::SimPlanner(const ClusterSnapshot& cluster) : cluster_(cluster) {
  for (const std::string& m : BuiltinProfileNames()) profiles_.emplace(m, *BuiltinProfile(m));
}

SimPlanner::SimPlanner(const ClusterSnapshot& cluster,
                       std::map<std::string, ModelProfile> profiles)
    : cluster_(cluster), profiles_(std::move(profiles)) {}

Result<PlanSet> SimPlanner::Plan(const TraceJob& job, int64_t max_devices, const DeviceSet& busy) {
  std::string key = job.model + "|" + std::to_string(job.global_batch) + "|" +
                    std::to_string(job.min_devices) + "|" + std::to_string(max_devices);
  for (const std::string& d : busy) key += "|" + d;
  if (auto it = cache_.find(key); it != cache_.end()) return it->second;
  ++plans_made_;
  ClusterSnapshot snap = cluster_;
  for (Node& n : snap.nodes) {
    for (Device& d : n.devices) d.busy = busy.contains(DeviceId{n.name, d.index}.ToString());
  }
  JobRequest request;
  request.kind = JobKind::kTrain;
  request.global_batch = job.global_batch;
  request.min_devices = static_cast<int>(job.min_devices);
  request.max_devices = static_cast<int>(max_devices);
  auto profile = profiles_.find(job.model);
  if (profile == profiles_.end()) return NotFound("no profile of " + job.model);
  Result<PlanSet> plans = MakePlans(snap, profile->second, request);
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
  // Plan on the first k devices of each node, k = how many of that node `on`
  // holds; then give the plan's per-node counts back as devices of `on`.
  std::map<std::string, std::vector<std::string>> mine;  // node -> devices of `on`
  for (const std::string& d : on) mine[d.substr(0, d.rfind(':'))].push_back(d);
  DeviceSet busy;
  for (const Node& n : cluster_.nodes) {
    const auto it = mine.find(n.name);
    const size_t k = it == mine.end() ? 0 : it->second.size();
    for (size_t i = k; i < n.devices.size(); ++i) {
      busy.insert(DeviceId{n.name, n.devices[i].index}.ToString());
    }
  }
  Result<PlanSet> plans = Plan(job, max_devices, busy);
  if (!plans.ok() || plans->plans.empty()) return RateOnDevices{};
  const scheduler::Plan& best = plans->plans.front();
  RateOnDevices out;
  out.rate = static_cast<double>(job.global_batch) / best.predicted.step_s;
  std::map<std::string, size_t> used;
  for (const DeviceId& d : best.Devices()) ++used[d.node];
  for (const auto& [node, n] : used) {
    for (size_t i = 0; i < n; ++i) out.used.insert(mine.at(node)[i]);
  }
  return out;
}

}  // namespace tessera::scheduler::sim
