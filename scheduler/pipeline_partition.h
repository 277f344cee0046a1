// Pipeline partition: contiguous, uneven layer ranges over an ordering of devices.
//
// Purpose: given devices in pipeline order (possibly of different speeds and
// memory), a replica batch, a micro-batch count and a schedule, choose stage
// boundaries that minimise the slowest stage including its send time, subject to
// each device's memory under the schedule; ties are broken by the smaller sum of
// stage times. A dynamic programme over (stage, first layer) solves this exactly
// in O(S x L^2); a local search then moves boundaries one layer at a time while the
// replica's step time sum(t) + (M - 1) x max(t) improves.
// The all-depths variant takes devices from the END of the pipeline: order[0] is
// the last stage, order[1] the one before, ...; one pass yields the best partition
// for every depth S onto order[S-1], ..., order[0].
// Thread safety: pure functions over a const CostModel.
#ifndef TESSERA_SCHEDULER_PIPELINE_PARTITION_H_
#define TESSERA_SCHEDULER_PIPELINE_PARTITION_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "scheduler/cost_model.h"
#include "scheduler/plan.h"

namespace tessera::scheduler {

struct Partition {
  std::vector<CandidateStage> stages;  // pipeline order
  double bottleneck_s = 0;             // max stage time per micro-batch
  double replica_s = 0;                // sum(t) + (M - 1) x max(t)
};

struct PartitionParams {
  int64_t batch = 1;  // the replica's batch
  int micro_batches = 1;
  Schedule schedule = Schedule::k1F1B;
  bool replicated = false;  // other replicas hold the same layers (gradient buckets)
};

// result[S - 1]: best partition with S stages on reverse_order[S-1..0], or nullopt
// when no partition fits in memory. S runs up to min(max_stages, devices, layers).
std::vector<std::optional<Partition>> PartitionAllDepths(const CostModel& cost,
                                                         const std::vector<int>& reverse_order,
                                                         const PartitionParams& params,
                                                         int max_stages);

// Best partition using exactly `devices` in this pipeline order.
std::optional<Partition> PartitionLayers(const CostModel& cost, const std::vector<int>& devices,
                                         const PartitionParams& params);

// Time sum(t) + (M - 1) max(t) and memory check of given stages; nullopt if a
// stage does not fit. Fills bottleneck_s / replica_s.
std::optional<Partition> ScorePartition(const CostModel& cost, std::vector<CandidateStage> stages,
                                        const PartitionParams& params);

}  // namespace tessera::scheduler

#endif  // TESSERA_SCHEDULER_PIPELINE_PARTITION_H_
