// Data-parallel search: replicas of one stage each, the whole model on every device
// (Search::SearchData, scheduler/search/search.h).
//
// Steps:
//   1. Devices that cannot hold the whole model plus one sample are dropped, each with
//      the reason "doesn't fit on <device>: the whole model needs ... for one sample".
//   2. Subsets of the devices left, each of at most B (global batch) and max_devices
//      devices:
//      a. growing prefixes of all of them by speed;
//      b. growing prefixes of each node's, by speed;
//      c. the devices of the first 1, 2, ... nodes (node order);
//      d. with several speed classes, growing prefixes of each class's (node after
//         node).
//   3. Each subset once (as a set of devices), with k devices in [min_devices,
//      max_devices]: for M in the coarse counts 1, 2, 3, 4, 6, 8, ... up to B / k,
//      integer shares by SplitBatchLinear (scheduler/batch_split.h: water-filling
//      by speed under the memory caps b_i <= M x cap_i); the first two M with shares
//      are scored, so M grows only when memory requires it (gradient accumulation).
//   4. No data plan while some device holds the model: the reason "global batch B
//      does not fit in the memory of the devices that hold the model".
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "scheduler/batch_split.h"
#include "scheduler/planner_text.h"
#include "scheduler/search/local_search.h"
#include "scheduler/search/search.h"

namespace tessera::scheduler {

void Search::SearchData() {
  const int L = cm_.num_layers();
  const int64_t B = req_.global_batch;
  const double weights = cm_.WeightBytes(0, L);
  const double act = cm_.ActivationBytesPerSample(0, L);
  std::vector<int> fits;
  for (int d : by_speed_) {
    const double usable = static_cast<double>(cm_.device(d).usable_bytes);
    if (usable < weights + act) {
      Note(Layout::kData, "doesn't fit on " + cm_.device(d).id.ToString() +
                              ": the whole model needs " + Gb(weights + act) + " for one sample, " +
                              Gb(usable) + " usable");
    } else {
      fit_.insert(d);
    }
  }
  auto try_list = [&](const std::vector<int>& order) {
    std::vector<int> subset;
    for (int d : order) {
      if (!fit_.count(d)) continue;
      subset.push_back(d);
      if (static_cast<int64_t>(subset.size()) > B) break;
      if (static_cast<int>(subset.size()) > max_devices_) break;
      TrySubset(subset);
    }
  };
  try_list(by_speed_);
  for (const auto& devs : node_devices_) try_list(devs);
  {
    std::vector<int> uni;
    for (const auto& devs : node_devices_) {
      uni.insert(uni.end(), devs.begin(), devs.end());
      std::vector<int> fitted;
      for (int d : uni) {
        if (fit_.count(d)) fitted.push_back(d);
      }
      if (static_cast<int64_t>(fitted.size()) <= B &&
          static_cast<int>(fitted.size()) <= max_devices_ && !fitted.empty()) {
        TrySubset(fitted);
      }
    }
  }
  std::map<int, std::vector<int>> by_class;
  for (int d : by_node_) by_class[cm_.device(d).speed_class].push_back(d);
  if (by_class.size() > 1) {
    for (const auto& [cls, devs] : by_class) try_list(devs);
  }
  if (best_.find(Layout::kData) == best_.end() && !fit_.empty()) {
    Note(Layout::kData, "global batch " + std::to_string(B) +
                            " does not fit in the memory of the devices that hold the model");
  }
}

void Search::TrySubset(std::vector<int> subset) {
  std::sort(subset.begin(), subset.end());
  if (!seen_subsets_.insert(subset).second) return;
  const int k = static_cast<int>(subset.size());
  if (k < req_.min_devices || k > max_devices_) return;
  const int L = cm_.num_layers();
  const int64_t B = req_.global_batch;
  const double weights = cm_.ReplicaWeightBytes(0, L, /*replicated=*/k > 1);
  const double act = cm_.ActivationBytesPerSample(0, L);
  std::vector<double> secs(k);
  std::vector<int64_t> cap_micro(k);
  for (int i = 0; i < k; ++i) {
    const DeviceInfo& d = cm_.device(subset[i]);
    secs[i] = d.model_seconds;
    const double room = static_cast<double>(d.usable_bytes) - weights;
    cap_micro[i] = act > 0 ? static_cast<int64_t>(std::min(9e15, std::floor(room / act))) : B;
  }
  int feasible = 0;
  for (int m : CoarseMicroBatches(B / k)) {
    std::vector<int64_t> caps(k);
    for (int i = 0; i < k; ++i) caps[i] = std::min<int64_t>(B, cap_micro[i] * m);
    auto shares = SplitBatchLinear(B, secs, caps, m);
    if (!shares) continue;
    Candidate c;
    c.micro_batches = m;
    c.schedule = schedule_;
    for (int i = 0; i < k; ++i) {
      c.replicas.push_back(CandidateReplica{(*shares)[i], {CandidateStage{subset[i], 0, L}}});
    }
    Consider(c);
    if (++feasible >= 2) break;
  }
}

}  // namespace tessera::scheduler
