// SimPlanner: the planner (MakePlans on the builtin reference profiles, or on
// profiles the caller gives) as the
// simulator asks it, remembered for the whole run: the best plan of a trace
// job on the devices not busy (the queue pass), and a job's throughput on a
// set of devices (the share policy).
// Ownership: borrows the cluster, which must outlive it.
// Thread safety: not thread-safe (one run at a time).
#ifndef TESSERA_BENCH_SCHED_SIM_PLANNER_H_
#define TESSERA_BENCH_SCHED_SIM_PLANNER_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "bench/sched/trace.h"
#include "common/status.h"
#include "scheduler/cluster_snapshot.h"
#include "scheduler/model_profile.h"
#include "scheduler/node_classes.h"
#include "scheduler/plan.h"
#include "scheduler/queue_pass.h"
#include "scheduler/share_policy.h"

namespace tessera::scheduler::sim {

class SimPlanner {
 public:
  // With the builtin reference profiles (scheduler/builtin_profiles.h).
  explicit SimPlanner(const ClusterSnapshot& cluster);
  // With the given profiles by model name (TraceJob::model), e.g. the ones
  // tesserad measured.
  SimPlanner(const ClusterSnapshot& cluster, std::map<std::string, ModelProfile> profiles);

  // The job's ranked plans (the best only) on the devices not in `busy`, at most
  // `max_devices` (0: any). Remembered by job shape and busy devices.
  Result<PlanSet> Plan(const TraceJob& job, int64_t max_devices, const DeviceSet& busy);

  // The job's best plan on at most `max_devices` of `on`: samples per second
  // and the devices it uses. Answers are remembered by the set's shape
  // (scheduler/node_classes.h): alike nodes and devices are one question.
  Result<RateOnDevices> Rate(const TraceJob& job, int64_t max_devices, const DeviceSet& on);

  int64_t plans_made() const { return plans_made_; }

 private:
  struct Rated {
    double rate = 0;                // 0: no plan
    std::vector<DeviceId> planned;  // on the shape's representative set
  };
  const ClusterSnapshot& cluster_;
  NodeClasses classes_;
  std::map<std::string, ModelProfile> profiles_;
  std::map<std::string, Result<PlanSet>> cache_;
  std::map<std::string, Rated> rates_;  // by job and shape
  int64_t plans_made_ = 0;
};

}  // namespace tessera::scheduler::sim

#endif  // TESSERA_BENCH_SCHED_SIM_PLANNER_H_
