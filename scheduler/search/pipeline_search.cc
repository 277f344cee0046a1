// Pipeline search: one replica of several stages (Search::SearchPipeline,
// scheduler/search/search.h).
//
// Steps:
//   1. Depth limit K = min(max_pipeline_stages, max_devices, layers); with
//      fastest_only, K = 1 when a lower bound on every deeper pipeline's step time
//      (scheduler/step_bound.h) is above the fastest plan found so far (the data
//      plans), with the bound as the reason (BoundPipelines).
//   2. Device orders (PipelineOrders), each cut to K devices, duplicates dropped: by
//      speed; node-grouped; by memory ascending and descending; node-grouped with small
//      memory last in the pipeline; nodes in reverse order of speed. An order lists the
//      pipeline from its LAST stage.
//   3. Scoring an order at M micro-batches: one DP (PartitionAllDepths,
//      scheduler/pipeline_partition.h) yields the best partition for every depth
//      S <= K on the order's first S devices; each is scored. When K <= 8, each such
//      subset of S >= 2 devices is also partitioned (PartitionLayers) and scored in its
//      other orders (SubsetOrders: by memory and by speed both ways, node-grouped with
//      memory descending, nodes both ways).
//   4. When K > 8 and there are more than two orders: the orders are ranked at one M
//      (min(B, 4 K)) and only the two best are kept.
//   5. Every order is scored over M = 1..B by ScanMicroBatches (local_search.h).
//   6. ImprovePipelineOrder (local_search.cc): a local search around the best pipeline.
//   7. No pipeline while K >= 2: the reason "no partition of L layers over up to K
//      devices fits in memory".
#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "scheduler/pipeline_partition.h"
#include "scheduler/planner_text.h"
#include "scheduler/search/local_search.h"
#include "scheduler/search/search.h"
#include "scheduler/step_bound.h"

namespace tessera::scheduler {

int Search::MaxStages() const {
  return std::min({opt_.max_pipeline_stages, max_devices_, cm_.num_layers(), depth_cap_});
}

void Search::BoundPipelines() {
  if (!opt_.fastest_only || MaxStages() < 2) return;
  const double found = Fastest();
  if (!(found < kInf)) return;
  const double bound = PipelineStepLowerBound(cm_, free_, MaxStages());
  if (!(bound > found * (1 + 1e-9))) return;
  depth_cap_ = 1;
  Note(Layout::kPipeline,
       Fmt("at least %.3g s a step on these devices", bound) +
           Fmt(", slower than the fastest plan found (%.3g s): not searched", found));
}

std::vector<std::vector<int>> Search::PipelineOrders() const {
  // Each list is in REVERSE pipeline order (element 0 = last stage); the DP
  // uses its first S entries for an S-stage pipeline.
  const int K = MaxStages();
  std::vector<std::vector<int>> lists;
  auto add = [&](std::vector<int> v) {
    if (static_cast<int>(v.size()) > K) v.resize(K);
    if (std::find(lists.begin(), lists.end(), v) == lists.end()) lists.push_back(std::move(v));
  };
  add(by_speed_);
  add(by_node_);
  std::vector<int> mem = free_;
  std::stable_sort(mem.begin(), mem.end(), [&](int a, int b) {
    return cm_.device(a).usable_bytes < cm_.device(b).usable_bytes;
  });
  add(mem);
  std::vector<int> mem_desc(mem.rbegin(), mem.rend());
  add(mem_desc);
  // Node-grouped, small memory last in the pipeline (first in this list).
  std::vector<int> node_mem;
  for (const auto& devs : node_devices_) {
    std::vector<int> v = devs;
    std::stable_sort(v.begin(), v.end(), [&](int a, int b) {
      return cm_.device(a).usable_bytes < cm_.device(b).usable_bytes;
    });
    node_mem.insert(node_mem.end(), v.begin(), v.end());
  }
  add(node_mem);
  // Nodes in reverse order of speed.
  std::vector<int> node_rev;
  for (auto it = node_devices_.rbegin(); it != node_devices_.rend(); ++it) {
    node_rev.insert(node_rev.end(), it->begin(), it->end());
  }
  add(node_rev);
  return lists;
}

// Orders of one selected subset worth trying (pipeline order).
std::vector<std::vector<int>> Search::SubsetOrders(const std::vector<int>& subset) const {
  std::vector<std::vector<int>> out;
  auto add = [&](std::vector<int> v) {
    if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(std::move(v));
  };
  auto sorted_by = [&](auto key, bool desc) {
    std::vector<int> v = subset;
    std::stable_sort(v.begin(), v.end(),
                     [&](int a, int b) { return desc ? key(a) > key(b) : key(a) < key(b); });
    return v;
  };
  auto mem = [&](int d) { return static_cast<double>(cm_.device(d).usable_bytes); };
  auto speed = [&](int d) { return -cm_.device(d).model_seconds; };
  auto node = [&](int d) {
    return static_cast<double>(std::find(nodes_.begin(), nodes_.end(), cm_.device(d).node) -
                               nodes_.begin());
  };
  add(sorted_by(mem, true));
  add(sorted_by(mem, false));
  add(sorted_by(speed, true));
  add(sorted_by(speed, false));
  // Node-grouped with memory descending inside each node, nodes both ways.
  for (bool desc : {false, true}) {
    std::vector<int> v = subset;
    std::stable_sort(v.begin(), v.end(), [&](int a, int b) {
      if (node(a) != node(b)) return desc ? node(a) > node(b) : node(a) < node(b);
      return mem(a) > mem(b);
    });
    add(v);
  }
  return out;
}

// A layer partition reads a device only through its speed class (its compute and
// fixed-time prefixes, CostModel::ComputePrefix), its usable memory and its links to
// the stages beside it (pipeline_partition.cc): orders equal in these get equal
// partitions, stage for stage.
std::vector<double> Search::ShapeOf(const std::vector<int>& order) const {
  std::vector<double> shape;
  shape.reserve(order.size() * 6);
  for (size_t i = 0; i < order.size(); ++i) {
    const DeviceInfo& d = cm_.device(order[i]);
    shape.push_back(d.speed_class);
    shape.push_back(static_cast<double>(d.usable_bytes));
    if (i + 1 == order.size()) break;
    for (const Link& l :
         {cm_.LinkBetween(order[i], order[i + 1]), cm_.LinkBetween(order[i + 1], order[i])}) {
      shape.push_back(l.bandwidth_bytes_per_s);
      shape.push_back(l.latency_s);
    }
  }
  return shape;
}

namespace {

// Puts a partition of depth S made on a shape-equal order onto `rev`'s devices:
// stage j on rev[S - 1 - j], as PartitionAllDepths and PartitionLayers (which
// reverses its order) place them. REQUIRES: S <= rev.size().
void PlaceStages(const std::vector<int>& rev, std::optional<Partition>* p) {
  if (!*p) return;
  std::vector<CandidateStage>& stages = (*p)->stages;
  for (size_t j = 0; j < stages.size(); ++j) stages[j].device = rev[stages.size() - 1 - j];
}

}  // namespace

const std::optional<Partition>& Search::Partitioned(const std::vector<int>& order,
                                                    const PartitionParams& params) {
  auto key = std::make_tuple(order, params.batch, params.micro_batches, params.replicated);
  auto it = partitions_.find(key);
  if (it != partitions_.end()) return it->second;
  auto shape_key =
      std::make_tuple(ShapeOf(order), params.batch, params.micro_batches, params.replicated);
  auto same = partitions_by_shape_.find(shape_key);
  if (same == partitions_by_shape_.end()) {
    same = partitions_by_shape_.emplace(std::move(shape_key), PartitionLayers(cm_, order, params))
               .first;
    return partitions_.emplace(std::move(key), same->second).first->second;
  }
  // An order of interchangeable devices: the same partition on this order's devices.
  std::optional<Partition> renamed = same->second;
  PlaceStages(std::vector<int>(order.rbegin(), order.rend()), &renamed);
  return partitions_.emplace(std::move(key), std::move(renamed)).first->second;
}

std::vector<std::optional<Partition>> Search::PartitionedAllDepths(const std::vector<int>& rev,
                                                                   const PartitionParams& params,
                                                                   int max_stages) {
  auto key = std::make_tuple(ShapeOf(rev), params.batch, params.micro_batches, params.replicated,
                             max_stages);
  auto it = all_depths_by_shape_.find(key);
  if (it == all_depths_by_shape_.end()) {
    it = all_depths_by_shape_
             .emplace(std::move(key), PartitionAllDepths(cm_, rev, params, max_stages))
             .first;
  }
  std::vector<std::optional<Partition>> all = it->second;
  for (std::optional<Partition>& p : all) PlaceStages(rev, &p);
  return all;
}

void Search::SearchPipeline() {
  BoundPipelines();
  const int K = MaxStages();
  if (K < 1) return;
  const int64_t B = req_.global_batch;
  const bool small = K <= 8;
  std::vector<std::vector<int>> orders = PipelineOrders();
  auto scan = [&](const std::vector<int>& rev, int m) {
    PartitionParams params{B, m, schedule_};
    auto all = PartitionedAllDepths(rev, params, K);
    double best = kInf;
    for (int S = 1; S <= static_cast<int>(all.size()); ++S) {
      if (all[S - 1]) {
        Candidate c;
        c.micro_batches = m;
        c.schedule = schedule_;
        c.replicas.push_back(CandidateReplica{B, all[S - 1]->stages});
        best = std::min(best, Consider(c));
      }
      if (!small || S < 2) continue;
      // Small pipelines: the same devices in other orders.
      std::vector<int> subset(rev.begin(), rev.begin() + S);
      for (const std::vector<int>& order : SubsetOrders(subset)) {
        const std::optional<Partition>& p = Partitioned(order, params);
        if (!p) continue;
        Candidate c;
        c.micro_batches = m;
        c.schedule = schedule_;
        c.replicas.push_back(CandidateReplica{B, p->stages});
        best = std::min(best, Consider(c));
      }
    }
    return best;
  };
  if (!small && orders.size() > 2) {
    // Large pipelines: rank the orders at one typical micro-batch count and scan
    // M only for the two best.
    const int m_ref = static_cast<int>(std::min<int64_t>(B, 4 * K));
    std::vector<std::pair<double, size_t>> ranked;
    for (size_t i = 0; i < orders.size(); ++i) ranked.emplace_back(scan(orders[i], m_ref), i);
    std::sort(ranked.begin(), ranked.end());
    std::vector<std::vector<int>> keep;
    for (size_t i = 0; i < 2; ++i) keep.push_back(orders[ranked[i].second]);
    orders = std::move(keep);
  }
  for (const std::vector<int>& rev : orders) {
    ScanMicroBatches(B, [&](int m) { return scan(rev, m); });
  }
  ImprovePipelineOrder();
  if (best_.find(Layout::kPipeline) == best_.end() && K >= 2 && Wants(Layout::kPipeline)) {
    Note(Layout::kPipeline, "no partition of " + std::to_string(cm_.num_layers()) +
                                " layers over up to " + std::to_string(K) +
                                " devices fits in memory");
  }
}

}  // namespace tessera::scheduler
