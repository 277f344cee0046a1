// Hybrid search: several data-parallel replicas, some of several stages
// (Search::SearchHybrid, scheduler/search/search.h).
//
// Steps:
//   1. Groupings of the free devices into replicas (HybridGroupings). Each keeps its
//      first replicas within max_devices and counts only with two replicas or more,
//      one of them of two devices or more; duplicates are dropped.
//      a. Devices that hold the whole model as single replicas, the others pooled
//         into pipelines: all together, per node, or in pairs; or each joining one
//         of the slowest whole-model devices (the fastest small device the slowest).
//      b. Up to 16 devices: the q fastest alone, the others in pairs, every q.
//      c. One replica per node; one per (node, speed class).
//      d. For p = 2..min(max_pipeline_stages, layers): chunks of p devices inside each
//         node; stripes across each node's speed ranks; chunks of p in the
//         node-grouped order when some node cannot host p (beyond 128 devices only
//         when p is a multiple of the smallest node).
//   2. Groupings with more replicas than samples are skipped; groupings made of the
//      same kinds of replicas (Signature: speed classes, memory, links) are searched
//      once; with fastest_only, a grouping whose lower bound on the step time
//      (HybridStepLowerBound, scheduler/step_bound.h) is above the fastest plan found
//      so far is skipped.
//   3. Every other grouping is scored over M = 1..B / R by ScanMicroBatches
//      (local_search.h) of HybridAt:
//      a. shares in proportion to replica speed, at least M each;
//      b. each replica is ordered (ReplicaOrders) and partitioned for its own devices
//         (PartReplica), memoised by (signature, share, M); beyond 16 devices by
//         (signature, M bucket 1, 4, 16, ...) and characterised once per kind;
//      c. Characterize: each stage's time per micro-batch, b / M x alpha + beta, and
//         the largest share that fits memory;
//      d. shares by SplitBatch (scheduler/batch_split.h) with the exact inverse of
//         T_r(b); no split: a reason;
//      e. the candidate is scored; up to 16 devices, once more partitioned for the
//         new shares, unless they did not change.
//   4. No hybrid plan: the reason "needs at least 3 free devices", the least bound
//      of the groupings skipped, or "no replica grouping fits in memory".
//   Search::Run then polishes the best hybrid plan (Polish, local_search.cc).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "scheduler/batch_split.h"
#include "scheduler/pipeline_partition.h"
#include "scheduler/planner_text.h"
#include "scheduler/search/local_search.h"
#include "scheduler/search/search.h"
#include "scheduler/step_bound.h"

namespace tessera::scheduler {

// Stages for a replica's devices: the best order and partition at (b, m).
std::optional<std::vector<CandidateStage>> Search::PartReplica(const std::vector<int>& devs,
                                                               int64_t b, int m) {
  PartitionParams params{b, m, schedule_, /*replicated=*/true};
  std::optional<Partition> best;
  for (const std::vector<int>& order : ReplicaOrders(devs)) {
    const std::optional<Partition>& p = Partitioned(order, params);
    if (p && (!best || p->replica_s < best->replica_s)) best = p;
  }
  if (!best) return std::nullopt;
  return best->stages;
}

// Per-stage time coefficients and the largest batch that fits, for m micro-batches.
Search::ReplicaPart Search::Characterize(const std::vector<CandidateStage>& stages, int m) const {
  ReplicaPart rp;
  rp.stages = stages;
  const int S = static_cast<int>(rp.stages.size());
  int64_t cap_micro = std::numeric_limits<int64_t>::max() / 4;
  for (int s = 0; s < S; ++s) {
    const CandidateStage& st = rp.stages[s];
    const int next = s + 1 < S ? rp.stages[s + 1].device : -1;
    const int prev = s > 0 ? rp.stages[s - 1].device : -1;
    const double t0 = cm_.StageSeconds(st.device, st.begin, st.end, 0, next, prev);
    const double t1 = cm_.StageSeconds(st.device, st.begin, st.end, 1, next, prev);
    rp.beta.push_back(t0);
    rp.alpha.push_back(t1 - t0);
    const double room = static_cast<double>(cm_.device(st.device).usable_bytes) -
                        cm_.ReplicaWeightBytes(st.begin, st.end, /*replicated=*/true);
    const int in_flight = cm_.training() ? CostModel::InFlight(schedule_, m, S, s) : 1;
    const double per_micro = in_flight * cm_.ActivationBytesPerSample(st.begin, st.end);
    if (room < 0) cap_micro = 0;
    if (per_micro > 0 && room >= 0) {
      cap_micro = std::min<int64_t>(cap_micro, static_cast<int64_t>(std::floor(room / per_micro)));
    }
  }
  rp.cap = cap_micro >= std::numeric_limits<int64_t>::max() / 8 ? req_.global_batch : cap_micro * m;
  return rp;
}

std::vector<std::vector<int>> Search::ReplicaOrders(const std::vector<int>& devs) const {
  std::vector<std::vector<int>> all = SubsetOrders(devs);
  if (devs.size() > 4) all.resize(std::min<size_t>(all.size(), 2));
  // Orders that look the same to the cost model (same classes, memory and links
  // along the chain) give the same partition: keep one of each.
  std::vector<std::vector<int>> out;
  std::set<std::vector<double>> seen;
  for (auto& order : all) {
    std::vector<double> key;
    for (size_t i = 0; i < order.size(); ++i) {
      key.push_back(cm_.device(order[i]).speed_class);
      key.push_back(static_cast<double>(cm_.device(order[i]).usable_bytes));
      if (i + 1 < order.size()) {
        const Link l = cm_.LinkBetween(order[i], order[i + 1]);
        key.push_back(l.bandwidth_bytes_per_s);
        key.push_back(l.latency_s);
      }
    }
    if (seen.insert(key).second) out.push_back(std::move(order));
  }
  return out;
}

double Search::ReplicaSeconds(const ReplicaPart& p, int64_t b, int m) {
  const double micro = static_cast<double>(b) / m;
  double sum = 0, mx = 0;
  for (size_t s = 0; s < p.alpha.size(); ++s) {
    const double t = micro * p.alpha[s] + p.beta[s];
    sum += t;
    mx = std::max(mx, t);
  }
  return sum + (m - 1) * mx;
}

// Key of a replica's devices for memoisation: speed classes, memory and links.
std::vector<double> Search::Signature(const std::vector<int>& devs) const {
  std::vector<double> key;
  for (size_t i = 0; i < devs.size(); ++i) {
    key.push_back(cm_.device(devs[i]).speed_class);
    key.push_back(static_cast<double>(cm_.device(devs[i]).usable_bytes));
    for (size_t j = 0; j < devs.size(); ++j) {
      if (i == j) continue;
      const Link l = cm_.LinkBetween(devs[i], devs[j]);
      key.push_back(l.bandwidth_bytes_per_s);
      key.push_back(l.latency_s);
    }
  }
  return key;
}

std::vector<std::vector<std::vector<int>>> Search::HybridGroupings() const {
  std::vector<std::vector<std::vector<int>>> out;
  auto add = [&](std::vector<std::vector<int>> g) {
    // Keep replicas within the device budget: drop the slowest replicas.
    std::erase_if(g, [](const std::vector<int>& r) { return r.empty(); });
    bool multi = false;
    int total = 0;
    for (const auto& r : g) {
      multi |= r.size() >= 2;
      total += static_cast<int>(r.size());
    }
    while (total > max_devices_ && !g.empty()) {
      total -= static_cast<int>(g.back().size());
      g.pop_back();
    }
    if (g.size() < 2 || !multi) return;
    for (auto& r : g) std::sort(r.begin(), r.end());
    if (std::find(out.begin(), out.end(), g) == out.end()) out.push_back(std::move(g));
  };
  const int maxp = std::min(opt_.max_pipeline_stages, cm_.num_layers());
  // Devices that hold the whole model stay single replicas; the others are pooled
  // into pipelines: all together, per node, or in pairs.
  {
    const int L = cm_.num_layers();
    const double need = cm_.WeightBytes(0, L) + cm_.ActivationBytesPerSample(0, L);
    std::vector<std::vector<int>> singles;
    std::vector<int> rest;
    for (int d : by_node_) {
      if (static_cast<double>(cm_.device(d).usable_bytes) >= need) {
        singles.push_back({d});
      } else {
        rest.push_back(d);
      }
    }
    if (!singles.empty() && rest.size() >= 2) {
      auto g = singles;
      if (static_cast<int>(rest.size()) <= maxp) g.push_back(rest);
      add(g);
      g = singles;
      for (const auto& devs : node_devices_) {
        std::vector<int> mine;
        for (int d : devs) {
          if (std::find(rest.begin(), rest.end(), d) != rest.end()) mine.push_back(d);
        }
        if (mine.size() >= 2 && static_cast<int>(mine.size()) <= maxp) g.push_back(mine);
      }
      add(g);
      g = singles;
      for (size_t i = 0; i + 1 < rest.size(); i += 2) g.push_back({rest[i], rest[i + 1]});
      add(g);
    }
    // Each small device joins one of the slowest whole-model devices (the fastest
    // small device the slowest one), balancing replica speeds.
    if (!singles.empty() && !rest.empty()) {
      auto speed_of = [&](int d) { return cm_.device(d).model_seconds; };
      std::vector<std::vector<int>> g = singles;
      std::stable_sort(g.begin(), g.end(), [&](const auto& a, const auto& b) {
        return speed_of(a[0]) > speed_of(b[0]);
      });
      std::vector<int> small = rest;
      std::stable_sort(small.begin(), small.end(),
                       [&](int a, int b) { return speed_of(a) < speed_of(b); });
      for (size_t i = 0; i < small.size() && i < g.size(); ++i) g[i].push_back(small[i]);
      if (small.size() > g.size() + 1) {
        g.emplace_back(small.begin() + static_cast<std::ptrdiff_t>(g.size()), small.end());
      }
      add(g);
    }
    // Heterogeneous speeds: the q fastest devices alone, the others in pairs.
    if (by_speed_.size() <= 16) {
      for (size_t q = 1; q + 2 <= by_speed_.size(); ++q) {
        std::vector<std::vector<int>> g;
        for (size_t i = 0; i < q; ++i) g.push_back({by_speed_[i]});
        for (size_t i = q; i + 1 < by_speed_.size(); i += 2) {
          g.push_back({by_speed_[i], by_speed_[i + 1]});
        }
        add(g);
      }
    }
  }
  // One replica per node; one per (node, type).
  add(node_devices_);
  {
    std::vector<std::vector<int>> g;
    for (const auto& devs : node_devices_) {
      std::map<int, std::vector<int>> cls;
      for (int d : devs) cls[cm_.device(d).speed_class].push_back(d);
      for (auto& [c, v] : cls) g.push_back(v);
    }
    add(g);
  }
  for (int p = 2; p <= maxp; ++p) {
    // Contiguous chunks of p inside each node; stripes inside each node; chunks
    // across the node-grouped order.
    std::vector<std::vector<int>> chunks, stripes, across;
    for (const auto& devs : node_devices_) {
      const int n = static_cast<int>(devs.size());
      const int c = n / p;
      for (int j = 0; j < c; ++j) {
        chunks.emplace_back(devs.begin() + j * p, devs.begin() + (j + 1) * p);
        std::vector<int> s;
        for (int i = 0; i < p; ++i) s.push_back(devs[j + i * c]);
        stripes.push_back(s);
      }
    }
    size_t smallest_node = by_node_.size();
    for (const auto& devs : node_devices_) smallest_node = std::min(smallest_node, devs.size());
    // Replicas spanning nodes only when some node cannot host a whole replica; on
    // large clusters only whole multiples of the smallest node.
    const bool spans = static_cast<size_t>(p) > smallest_node &&
                       (free_.size() <= 128 || p % std::max<size_t>(smallest_node, 1) == 0);
    for (size_t j = 0; spans && j + p <= by_node_.size(); j += p) {
      across.emplace_back(by_node_.begin() + j, by_node_.begin() + j + p);
    }
    add(chunks);
    add(stripes);
    add(across);
  }
  return out;
}

void Search::SearchHybrid() {
  const int64_t B = req_.global_batch;
  std::set<std::vector<std::vector<double>>> seen_shapes;
  double skipped = kInf;  // the least bound of the groupings skipped (fastest_only)
  for (const auto& grouping : HybridGroupings()) {
    const int R = static_cast<int>(grouping.size());
    if (B < R) continue;
    std::vector<std::vector<double>> sigs;
    for (const auto& r : grouping) sigs.push_back(Signature(r));
    // Groupings made of the same kinds of replicas (e.g. chunks and stripes of
    // identical devices) predict alike: search one of them.
    std::vector<std::vector<double>> shape = sigs;
    std::sort(shape.begin(), shape.end());
    if (!seen_shapes.insert(shape).second) continue;
    if (opt_.fastest_only) {
      const double bound = HybridStepLowerBound(cm_, grouping);
      if (bound > Fastest() * (1 + 1e-9)) {
        skipped = std::min(skipped, bound);
        continue;
      }
    }
    std::map<std::vector<double>, int> sig_id;
    std::vector<int> group(R);
    for (int r = 0; r < R; ++r) {
      group[r] = sig_id.emplace(sigs[r], static_cast<int>(sig_id.size())).first->second;
    }
    std::vector<double> speed(R, 0);
    double total_speed = 0;
    for (int r = 0; r < R; ++r) {
      for (int d : grouping[r]) speed[r] += 1.0 / cm_.device(d).model_seconds;
      total_speed += speed[r];
    }
    ScanMicroBatches(B / R,
                     [&](int m) { return HybridAt(grouping, sigs, group, speed, total_speed, m); });
  }
  if (best_.find(Layout::kHybrid) == best_.end() && Wants(Layout::kHybrid)) {
    if (free_.size() < 3) {
      Note(Layout::kHybrid, "needs at least 3 free devices");
    } else if (skipped < kInf) {
      Note(Layout::kHybrid,
           Fmt("every replica grouping left is at least %.3g s a step", skipped) +
               Fmt(", slower than the fastest plan found (%.3g s): not searched", Fastest()));
    } else {
      Note(Layout::kHybrid, "no replica grouping fits in memory");
    }
  }
}

double Search::HybridAt(const std::vector<std::vector<int>>& grouping,
                        const std::vector<std::vector<double>>& sigs, const std::vector<int>& group,
                        const std::vector<double>& speed, double total_speed, int m) {
  const int R = static_cast<int>(grouping.size());
  const int64_t B = req_.global_batch;
  std::vector<int64_t> b(R);
  for (int r = 0; r < R; ++r) {
    b[r] = std::max<int64_t>(m, static_cast<int64_t>(std::llround(B * speed[r] / total_speed)));
  }
  double best = kInf;
  const bool exact = free_.size() <= 16;
  for (int round = 0; round < (exact ? 2 : 1); ++round) {
    // Partition every replica for its batch. Small clusters: exactly for (batch, m).
    // Large ones: one partition per replica kind and micro-batch bucket (1, 4, 16, ...),
    // re-characterised for m; the DP is the costly step.
    std::vector<ReplicaPart> owned;
    owned.reserve(R);
    std::map<int, size_t> by_group;
    std::vector<const ReplicaPart*> parts(R);
    int bucket = 1;
    while (bucket * 4 <= m) bucket *= 4;
    for (int r = 0; r < R; ++r) {
      auto key = std::make_tuple(sigs[r], exact ? b[r] : 0, exact ? m : bucket);
      auto it = part_memo_.find(key);
      if (it == part_memo_.end()) {
        it = part_memo_.emplace(key, PartReplica(grouping[r], b[r], exact ? m : bucket)).first;
      }
      if (!it->second) {
        return best;
      }
      if (exact) {
        owned.push_back(Characterize(MapStages(*it->second, grouping[r]), m));
        parts[r] = &owned.back();
        continue;
      }
      auto g = by_group.find(group[r]);
      if (g == by_group.end()) {
        owned.push_back(Characterize(*it->second, m));
        g = by_group.emplace(group[r], owned.size() - 1).first;
      }
      parts[r] = &owned[g->second];
    }
    // Members of one group share the same partition shape; map it onto their devices.
    SplitCosts sc;
    sc.count = R;
    sc.min_share = m;
    for (int r = 0; r < R; ++r) sc.caps.push_back(std::min<int64_t>(parts[r]->cap, B));
    sc.cost = [&](int r, int64_t s) { return ReplicaSeconds(*parts[r], s, m); };
    // T_r(b) = sum_s t_s + (m-1) max_s t_s with t_s = b/m alpha_s + beta_s is the max
    // over s of affine functions, so its inverse is a closed-form minimum.
    sc.max_share_within = [&](int r, double level) {
      const ReplicaPart& p = *parts[r];
      double sum_a = 0, sum_b = 0;
      for (size_t i = 0; i < p.alpha.size(); ++i) {
        sum_a += p.alpha[i];
        sum_b += p.beta[i];
      }
      double most = 9e18;
      for (size_t i = 0; i < p.alpha.size(); ++i) {
        const double slope = (sum_a + (m - 1) * p.alpha[i]) / m;
        const double room = level - sum_b - (m - 1) * p.beta[i];
        if (room < 0) return int64_t{0};
        if (slope > 0) most = std::min(most, room / slope * (1 + 1e-12));
      }
      return static_cast<int64_t>(std::floor(std::min(most, 9e18)));
    };
    auto shares = SplitBatch(B, sc);
    if (!shares) {
      Note(Layout::kHybrid, "global batch " + std::to_string(B) + " does not fit " +
                                std::to_string(R) + " replicas with " + std::to_string(m) +
                                " micro-batches");
      return best;
    }
    Candidate c;
    c.micro_batches = m;
    c.schedule = schedule_;
    for (int r = 0; r < R; ++r) {
      c.replicas.push_back(CandidateReplica{(*shares)[r], MapStages(*parts[r], grouping[r])});
    }
    best = std::min(best, Consider(c));
    if (*shares == b) break;
    b = *shares;
  }
  return best;
}

// A memoised partition was computed on one member of a signature group; place
// it on this replica's devices, matching by position in the sorted member list.
std::vector<CandidateStage> Search::MapStages(const ReplicaPart& part,
                                              const std::vector<int>& devs) const {
  return MapStages(part.stages, devs);
}
std::vector<CandidateStage> Search::MapStages(const std::vector<CandidateStage>& stages,
                                              const std::vector<int>& devs) const {
  std::vector<int> owner_sorted;
  for (const CandidateStage& s : stages) owner_sorted.push_back(s.device);
  const bool same =
      std::is_permutation(owner_sorted.begin(), owner_sorted.end(), devs.begin(), devs.end());
  if (same) return stages;
  std::vector<int> sorted_owner = owner_sorted;
  std::sort(sorted_owner.begin(), sorted_owner.end());
  std::vector<CandidateStage> out = stages;
  for (CandidateStage& s : out) {
    const size_t pos =
        std::lower_bound(sorted_owner.begin(), sorted_owner.end(), s.device) - sorted_owner.begin();
    s.device = devs[pos];
  }
  return out;
}

}  // namespace tessera::scheduler
