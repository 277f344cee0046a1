// Batch split: integer batch shares that minimise the slowest participant.
//
// Purpose: shares sized to each participant's speed and memory: integers in
// [min_share, cap_i] that sum to `total` and minimise max_i cost_i(share_i) for
// non-decreasing cost functions. Exact: a bisection on the step time finds the
// largest level every participant can reach without exceeding `total`, then the
// remaining samples go one at a time to the participant whose cost grows least
// (water-filling), which is optimal for non-decreasing costs.
// Thread safety: pure functions.
#ifndef TESSERA_SCHEDULER_BATCH_SPLIT_H_
#define TESSERA_SCHEDULER_BATCH_SPLIT_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

namespace tessera::scheduler {

struct SplitCosts {
  int count = 0;
  // cost(i, share): non-decreasing in share.
  std::function<double(int, int64_t)> cost;
  // Largest share s with cost(i, s) <= level (may return less than min_share).
  std::function<int64_t(int, double)> max_share_within;
  std::vector<int64_t> caps;  // per participant upper bound (memory)
  int64_t min_share = 1;
};

// nullopt when no split exists (count x min_share > total, or caps too small).
std::optional<std::vector<int64_t>> SplitBatch(int64_t total, const SplitCosts& costs);

// Linear costs: cost_i(s) = s x seconds_per_sample[i].
// REQUIRES: seconds_per_sample[i] > 0 and caps.size() == seconds_per_sample.size().
std::optional<std::vector<int64_t>> SplitBatchLinear(int64_t total,
                                                     const std::vector<double>& seconds_per_sample,
                                                     const std::vector<int64_t>& caps,
                                                     int64_t min_share = 1);

}  // namespace tessera::scheduler

#endif  // TESSERA_SCHEDULER_BATCH_SPLIT_H_
