// Exhaustive oracle: brute force over every layout, device subset, ordering,
// layer partition, batch split and micro-batch count, scored by the same
// CostModel the planner uses. Only for small clusters (<= 6 devices, <= 12 layers).
#ifndef TESSERA_TESTS_SCHEDULER_ORACLE_H_
#define TESSERA_TESTS_SCHEDULER_ORACLE_H_

#include <cstdint>
#include <limits>

#include "scheduler/cost_model.h"

namespace tessera::scheduler::testing {

struct OracleOptions {
  bool data = true;
  bool pipeline = true;
  bool hybrid = true;  // set partitions into replicas; expensive beyond 4 devices
};

struct OracleResult {
  double step_s = std::numeric_limits<double>::infinity();
  Candidate best;
  int64_t evaluated = 0;
};

// min_devices / max_devices as in JobRequest (0: no upper bound).
OracleResult BruteForce(const CostModel& cost, int min_devices, int max_devices,
                        const OracleOptions& options);

}  // namespace tessera::scheduler::testing

#endif  // TESSERA_TESTS_SCHEDULER_ORACLE_H_
