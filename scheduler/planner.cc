#include "scheduler/planner.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "scheduler/baselines.h"
#include "scheduler/batch_split.h"
#include "scheduler/pipeline_partition.h"
#include "scheduler/planner_text.h"
#include "scheduler/tiling.h"

namespace tessera::scheduler {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr size_t kMaxReasonsPerLayout = 4;

// Micro-batch counts tried first: 1, 2, 3, 4, 6, 8, 12, 16, ... up to max_m.
std::vector<int> CoarseMicroBatches(int64_t max_m) {
  std::vector<int> out;
  for (int64_t p = 1; p <= max_m; p *= 2) {
    out.push_back(static_cast<int>(p));
    if (p >= 2 && p + p / 2 <= max_m) out.push_back(static_cast<int>(p + p / 2));
  }
  if (max_m >= 1) out.push_back(static_cast<int>(max_m));
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// Minimises f over micro-batch counts 1..max_m: a coarse geometric scan, then a
// local descent with steps 8, 4, 2, 1 around the best.
void ScanMicroBatches(int64_t max_m, const std::function<double(int)>& f) {
  if (max_m < 1) return;
  std::map<int, double> seen;
  auto eval = [&](int m) {
    auto it = seen.find(m);
    if (it != seen.end()) return it->second;
    const double v = f(m);
    seen[m] = v;
    return v;
  };
  int best = 1;
  double best_v = kInf;
  // Memory rounding (ceil(b / M)) makes the curve bumpy: small ranges are scanned whole.
  std::vector<int> first;
  if (max_m <= 32) {
    for (int m = 1; m <= max_m; ++m) first.push_back(m);
  } else {
    first = CoarseMicroBatches(max_m);
  }
  for (int m : first) {
    const double v = eval(m);
    if (v < best_v) {
      best_v = v;
      best = m;
    }
  }
  if (best_v == kInf) return;
  for (int step : {8, 4, 2, 1}) {
    if (step * 64 < best) break;  // large counts: finer steps change little
    bool moved = true;
    while (moved) {
      moved = false;
      for (int m : {best - step, best + step}) {
        if (m < 1 || m > max_m) continue;
        const double v = eval(m);
        if (v < best_v) {
          best_v = v;
          best = m;
          moved = true;
        }
      }
    }
  }
}

class Search {
 public:
  Search(const CostModel& cm, const JobRequest& req, const PlannerOptions& opt,
         std::vector<int> free_devices)
      : cm_(cm), req_(req), opt_(opt), free_(std::move(free_devices)) {
    const int n = static_cast<int>(free_.size());
    max_devices_ = req.max_devices > 0 ? std::min(req.max_devices, n) : n;
    schedule_ = cm.training() ? Schedule::k1F1B : Schedule::kGPipe;
    by_speed_ = free_;
    std::sort(by_speed_.begin(), by_speed_.end(), [&](int a, int b) {
      const double sa = cm.device(a).model_seconds, sb = cm.device(b).model_seconds;
      if (sa != sb) return sa < sb;
      return a < b;
    });
    // Nodes by aggregate speed, devices inside a node by speed.
    std::map<int, double> node_speed;
    for (int d : free_) node_speed[cm.device(d).node] += 1.0 / cm.device(d).model_seconds;
    for (auto& [node, speed] : node_speed) nodes_.push_back(node);
    std::stable_sort(nodes_.begin(), nodes_.end(),
                     [&](int a, int b) { return node_speed[a] > node_speed[b]; });
    for (int node : nodes_) {
      std::vector<int> devs;
      for (int d : by_speed_) {
        if (cm.device(d).node == node) devs.push_back(d);
      }
      node_devices_.push_back(devs);
      by_node_.insert(by_node_.end(), devs.begin(), devs.end());
    }
  }

  bool Wants(Layout l) const { return req_.layout == Layout::kAuto || req_.layout == l; }

  void Run() {
    if (Wants(Layout::kData)) SearchData();
    if (cm_.data_parallel_only()) {
      // Every replica keeps all layers on one device: nothing to cut.
      const std::string why = (model_name_.empty() ? std::string("the model") : model_name_) +
                              " cannot be split into stages (data parallel only)";
      if (Wants(Layout::kPipeline)) Note(Layout::kPipeline, why);
      if (Wants(Layout::kHybrid)) Note(Layout::kHybrid, why);
    } else {
      RunStaged();
    }
    if (req_.kind == JobKind::kInfer && (Wants(Layout::kTiled)) &&
        (req_.image || req_.layout == Layout::kTiled)) {
      SearchTiled();
    }
  }

  void RunStaged() {
    if (Wants(Layout::kPipeline)) SearchPipeline();
    if (Wants(Layout::kHybrid)) {
      SearchHybrid();
      Polish(Layout::kHybrid);
    }
  }

  // Scores a candidate and keeps it if it is the best of its layout.
  double Consider(const Candidate& c) {
    int used = 0;
    for (const CandidateReplica& r : c.replicas) used += static_cast<int>(r.stages.size());
    if (used < req_.min_devices || used > max_devices_) return kInf;
    const Layout layout = LayoutOf(c);
    if (!Wants(layout)) return kInf;
    ++evaluated_;
    Evaluation ev = cm_.Evaluate(c);
    if (!ev.feasible) {
      Note(layout, ev.reason);
      return kInf;
    }
    auto it = best_.find(layout);
    if (it == best_.end() || ev.step_s < it->second.second.step_s) {
      best_[layout] = {c, ev};
    }
    return ev.step_s;
  }

  void Note(Layout layout, const std::string& reason) {
    auto& list = reasons_[layout];
    if (list.size() >= kMaxReasonsPerLayout) return;
    if (std::find(list.begin(), list.end(), reason) == list.end()) list.push_back(reason);
  }

  // Final local search on the best plan of a layout, scored by the full cost model
  // (so the all-reduce, which the partition DP does not see, is weighed too): move a
  // stage boundary by one layer, one sample between replicas, swap two stages'
  // devices inside a replica, change M by one. Small plans only (<= 16 devices).
  void Polish(Layout layout) {
    for (int iter = 0; iter < 200; ++iter) {
      auto it = best_.find(layout);
      if (it == best_.end()) return;
      const Candidate base = it->second.first;
      const double before = it->second.second.step_s;
      int devices = 0;
      for (const CandidateReplica& r : base.replicas) devices += static_cast<int>(r.stages.size());
      if (devices > 16) return;
      auto improved = [&](const Candidate& c) { return Consider(c) < before * (1 - 1e-12); };
      bool moved = false;
      const int R = static_cast<int>(base.replicas.size());
      for (int r = 0; r < R && !moved; ++r) {
        const int S = static_cast<int>(base.replicas[r].stages.size());
        for (int i = 0; i + 1 < S && !moved; ++i) {
          for (int delta : {-1, 1}) {
            Candidate c = base;
            auto& st = c.replicas[r].stages;
            st[i].end += delta;
            st[i + 1].begin += delta;
            if (st[i].end <= st[i].begin || st[i + 1].end <= st[i + 1].begin) continue;
            if ((moved = improved(c))) break;
          }
        }
        for (int i = 0; i < S && !moved; ++i) {
          for (int j = i + 1; j < S && !moved; ++j) {
            Candidate c = base;
            std::swap(c.replicas[r].stages[i].device, c.replicas[r].stages[j].device);
            moved = improved(c);
          }
        }
      }
      // Exchange two devices between replicas.
      for (int a = 0; a < R && !moved; ++a) {
        for (int b = a + 1; b < R && !moved; ++b) {
          for (size_t i = 0; i < base.replicas[a].stages.size() && !moved; ++i) {
            for (size_t j = 0; j < base.replicas[b].stages.size() && !moved; ++j) {
              Candidate c = base;
              std::swap(c.replicas[a].stages[i].device, c.replicas[b].stages[j].device);
              moved = improved(c);
            }
          }
        }
      }
      // The same boundary in every replica at once (the largest stage sets the all-reduce).
      for (int i = 0; i < 16 && !moved; ++i) {
        for (int delta : {-1, 1}) {
          Candidate c = base;
          bool any = false, ok = true;
          for (auto& rep : c.replicas) {
            auto& st = rep.stages;
            if (i + 1 >= static_cast<int>(st.size())) continue;
            st[i].end += delta;
            st[i + 1].begin += delta;
            ok &= st[i].end > st[i].begin && st[i + 1].end > st[i + 1].begin;
            any = true;
          }
          if (!any || !ok) continue;
          if ((moved = improved(c))) break;
        }
      }
      for (int a = 0; a < R && !moved; ++a) {
        for (int b = 0; b < R && !moved; ++b) {
          if (a == b || base.replicas[a].batch <= base.micro_batches) continue;
          Candidate c = base;
          --c.replicas[a].batch;
          ++c.replicas[b].batch;
          moved = improved(c);
        }
      }
      for (int delta : {-1, 1}) {
        if (moved) break;
        Candidate c = base;
        c.micro_batches += delta;
        if (c.micro_batches >= 1) moved = improved(c);
      }
      if (!moved) return;
    }
  }

  // ---- data parallel ----
  void SearchData() {
    const int L = cm_.num_layers();
    const int64_t B = req_.global_batch;
    const double weights = cm_.WeightBytes(0, L);
    const double act = cm_.ActivationBytesPerSample(0, L);
    std::vector<int> fits;
    for (int d : by_speed_) {
      const double usable = static_cast<double>(cm_.device(d).usable_bytes);
      if (usable < weights + act) {
        Note(Layout::kData, "doesn't fit on " + cm_.device(d).id.ToString() +
                                ": the whole model needs " + Gb(weights + act) +
                                " for one sample, " + Gb(usable) + " usable");
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

  void TrySubset(std::vector<int> subset) {
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

  // ---- pipeline ----
  int MaxStages() const {
    return std::min({opt_.max_pipeline_stages, max_devices_, cm_.num_layers()});
  }

  std::vector<std::vector<int>> PipelineOrders() const {
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
  std::vector<std::vector<int>> SubsetOrders(const std::vector<int>& subset) const {
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

  void SearchPipeline() {
    const int K = MaxStages();
    if (K < 1) return;
    const int64_t B = req_.global_batch;
    const bool small = K <= 8;
    std::vector<std::vector<int>> orders = PipelineOrders();
    auto scan = [&](const std::vector<int>& rev, int m) {
      PartitionParams params{B, m, schedule_};
      auto all = PartitionAllDepths(cm_, rev, params, K);
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
          auto p = PartitionLayers(cm_, order, params);
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

  // Local search around the best pipeline: other orders of its devices (all of them
  // when cheap, else pairwise swaps), swapping in unused devices, then the
  // micro-batch count again for the order found. Bounded by a work budget.
  void ImprovePipelineOrder() {
    auto it = best_.find(Layout::kPipeline);
    if (it == best_.end()) return;
    const int64_t B = req_.global_batch;
    const double L = cm_.num_layers();
    std::vector<int> order;
    for (const CandidateStage& st : it->second.first.replicas[0].stages) order.push_back(st.device);
    int m = it->second.first.micro_batches;
    double best = it->second.second.step_s;
    constexpr double kBudget = 4e6;  // partition-steps spent on this search
    auto score = [&](const std::vector<int>& ord, int micro) {
      auto p = PartitionLayers(cm_, ord, {B, micro, schedule_});
      if (!p) return kInf;
      Candidate c;
      c.micro_batches = micro;
      c.schedule = schedule_;
      c.replicas.push_back(CandidateReplica{B, p->stages});
      return Consider(c);
    };
    auto take = [&](const std::vector<int>& ord) {
      const double v = score(ord, m);
      if (v < best * (1 - 1e-12)) {
        best = v;
        order = ord;
        return true;
      }
      return false;
    };
    const int max_depth = MaxStages();
    // Small problems: every ordered subset of the free devices (at this m).
    {
      const int n = static_cast<int>(free_.size());
      double ordered = 0, p = 1;
      for (int k = 1; k <= std::min(n, max_depth); ++k) {
        p *= n - k + 1;
        if (k >= 2) ordered += p;
      }
      if (n <= 8 && ordered * max_depth * L * L <= kBudget) {
        for (int mask = 1; mask < (1 << n); ++mask) {
          std::vector<int> t;
          for (int i = 0; i < n; ++i) {
            if (mask & (1 << i)) t.push_back(free_[i]);
          }
          if (t.size() < 2 || static_cast<int>(t.size()) > max_depth) continue;
          std::sort(t.begin(), t.end());
          do {
            take(t);
          } while (std::next_permutation(t.begin(), t.end()));
        }
      }
    }
    for (int round = 0; round < 4; ++round) {
      const double before = best;
      const int S = static_cast<int>(order.size());
      const double dp_cost = S * L * L;  // one partition, roughly
      double perms = 1;
      for (int i = 2; i <= S; ++i) perms *= i;
      if (perms * dp_cost <= kBudget) {
        std::vector<int> p = order;
        std::sort(p.begin(), p.end());
        do {
          take(p);
        } while (std::next_permutation(p.begin(), p.end()));
      } else if (S * S / 2.0 * dp_cost <= kBudget) {
        for (int i = 0; i < S; ++i) {
          for (int j = i + 1; j < S; ++j) {
            std::vector<int> t = order;
            std::swap(t[i], t[j]);
            take(t);
          }
        }
      }
      // Replace a stage's device by an unused one, insert one, or drop one.
      std::vector<int> unused;
      for (int d : free_) {
        if (std::find(order.begin(), order.end(), d) == order.end()) unused.push_back(d);
      }
      if (static_cast<double>(unused.size() + 1) * (2 * S + 1) * dp_cost <= kBudget) {
        const std::vector<int> base = order;
        for (int u : unused) {
          for (int i = 0; i < S; ++i) {
            std::vector<int> t = base;
            t[i] = u;
            take(t);
          }
          for (int i = 0; i <= S && S < max_depth; ++i) {
            std::vector<int> t = base;
            t.insert(t.begin() + i, u);
            take(t);
          }
        }
        for (int i = 0; i < S && S > 2; ++i) {
          std::vector<int> t = base;
          t.erase(t.begin() + i);
          take(t);
        }
      }
      if (!(best < before * (1 - 1e-12))) break;
    }
    ScanMicroBatches(B, [&](int micro) { return score(order, micro); });
  }

  // ---- hybrid ----
  struct ReplicaPart {
    std::vector<CandidateStage> stages;
    std::vector<double> alpha;  // per stage seconds per sample of micro-batch
    std::vector<double> beta;   // per stage fixed seconds per micro-batch
    int64_t cap = 0;            // max replica batch that fits
  };

  // Stages for a replica's devices: the best order and partition at (b, m).
  std::optional<std::vector<CandidateStage>> PartReplica(const std::vector<int>& devs, int64_t b,
                                                         int m) {
    PartitionParams params{b, m, schedule_, /*replicated=*/true};
    std::optional<Partition> best;
    for (const std::vector<int>& order : ReplicaOrders(devs)) {
      auto p = PartitionLayers(cm_, order, params);
      if (p && (!best || p->replica_s < best->replica_s)) best = std::move(p);
    }
    if (!best) return std::nullopt;
    return best->stages;
  }

  // Per-stage time coefficients and the largest batch that fits, for m micro-batches.
  ReplicaPart Characterize(const std::vector<CandidateStage>& stages, int m) const {
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
        cap_micro =
            std::min<int64_t>(cap_micro, static_cast<int64_t>(std::floor(room / per_micro)));
      }
    }
    rp.cap =
        cap_micro >= std::numeric_limits<int64_t>::max() / 8 ? req_.global_batch : cap_micro * m;
    return rp;
  }

  std::vector<std::vector<int>> ReplicaOrders(const std::vector<int>& devs) const {
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

  static double ReplicaSeconds(const ReplicaPart& p, int64_t b, int m) {
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
  std::vector<double> Signature(const std::vector<int>& devs) const {
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

  std::vector<std::vector<std::vector<int>>> HybridGroupings() const {
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

  void SearchHybrid() {
    const int64_t B = req_.global_batch;
    std::set<std::vector<std::vector<double>>> seen_shapes;
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
      ScanMicroBatches(
          B / R, [&](int m) { return HybridAt(grouping, sigs, group, speed, total_speed, m); });
    }
    if (best_.find(Layout::kHybrid) == best_.end() && Wants(Layout::kHybrid)) {
      Note(Layout::kHybrid, free_.size() < 3 ? "needs at least 3 free devices"
                                             : "no replica grouping fits in memory");
    }
  }

  double HybridAt(const std::vector<std::vector<int>>& grouping,
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
  std::vector<CandidateStage> MapStages(const ReplicaPart& part,
                                        const std::vector<int>& devs) const {
    return MapStages(part.stages, devs);
  }
  std::vector<CandidateStage> MapStages(const std::vector<CandidateStage>& stages,
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
      const size_t pos = std::lower_bound(sorted_owner.begin(), sorted_owner.end(), s.device) -
                         sorted_owner.begin();
      s.device = devs[pos];
    }
    return out;
  }

  // ---- tiled ----
  void SearchTiled() {
    const int nominal = nominal_px_;
    const int w = req_.image ? req_.image->width : nominal;
    const int h = req_.image ? req_.image->height : nominal;
    std::vector<int> devs = by_speed_;
    if (static_cast<int>(devs.size()) > max_devices_) devs.resize(max_devices_);
    std::vector<std::string> reasons;
    auto tp = PlanTiles(cm_, devs, w, h, halo_px_, req_.global_batch, &reasons);
    for (const std::string& r : reasons) Note(Layout::kTiled, r);
    if (!tp) return;
    if (static_cast<int>(tp->devices.size()) < req_.min_devices) {
      Note(Layout::kTiled, "fewer than min_devices devices get tiles");
      return;
    }
    Plan p;
    p.layout = Layout::kTiled;
    p.dp = static_cast<int>(tp->devices.size());
    p.pp = 1;
    p.micro_batches = 1;
    p.schedule = Schedule::kGPipe;
    p.tiling = tp->tiling;
    int64_t total_tiles = 0;
    for (int64_t t : tp->tiles) total_tiles += t;
    for (size_t i = 0; i < tp->devices.size(); ++i) {
      const DeviceInfo& d = cm_.device(tp->devices[i]);
      Replica r;
      r.batch = tp->tiles[i];
      r.gradient_weight = static_cast<double>(tp->tiles[i]) / static_cast<double>(total_tiles);
      r.stages.push_back(Stage{{d.id},
                               0,
                               cm_.num_layers(),
                               tp->device_s[i] / static_cast<double>(tp->tiles[i]),
                               tp->peak_memory_bytes[i]});
      p.replicas.push_back(std::move(r));
      p.predicted.peak_memory_bytes[d.id.ToString()] = tp->peak_memory_bytes[i];
    }
    p.predicted.step_s = tp->step_s;
    p.predicted.samples_per_s = static_cast<double>(req_.global_batch) / tp->step_s;
    p.why = std::to_string(tp->tiling.tiles_per_image) + " tiles of " +
            std::to_string(tp->tiling.tile_px) + " px (overlap " +
            std::to_string(tp->tiling.overlap_px) + " px) per image, shared by speed";
    tiled_ = std::move(p);
  }

  const CostModel& cm_;
  const JobRequest& req_;
  const PlannerOptions& opt_;
  std::vector<int> free_;
  std::vector<int> by_speed_;
  std::vector<int> by_node_;
  std::vector<int> nodes_;
  std::vector<std::vector<int>> node_devices_;
  std::set<int> fit_;
  std::map<std::tuple<std::vector<double>, int64_t, int>,
           std::optional<std::vector<CandidateStage>>>
      part_memo_;
  std::set<std::vector<int>> seen_subsets_;
  int max_devices_ = 0;
  Schedule schedule_ = Schedule::k1F1B;

 public:
  int nominal_px_ = 256;
  int halo_px_ = 0;
  std::string model_name_;
  int evaluated_ = 0;
  std::map<Layout, std::pair<Candidate, Evaluation>> best_;
  std::map<Layout, std::vector<std::string>> reasons_;
  std::optional<Plan> tiled_;
};

std::string Describe(const CostModel& cm, const Candidate& c, const Evaluation& ev) {
  const CandidateReplica& crit = c.replicas[ev.critical_replica];
  const CandidateStage& st = crit.stages[ev.bottleneck_stage];
  const std::string dev = cm.device(st.device).id.ToString();
  std::string s;
  if (crit.stages.size() > 1) {
    s = "stage " + std::to_string(ev.bottleneck_stage) + " (" + dev + ", layers [" +
        std::to_string(st.begin) + "," + std::to_string(st.end) + ")) is the bottleneck at " +
        Ms(ev.stage_time_s[ev.critical_replica][ev.bottleneck_stage]) + " per micro-batch";
  } else {
    s = "slowest replica " + dev + " computes " + std::to_string(crit.batch) + " samples";
  }
  if (ev.bubble > 0.005) s += Fmt(", bubble %.0f%%", ev.bubble * 100);
  if (ev.allreduce_s > 0) s += ", all-reduce adds " + Ms(ev.allreduce_s);
  return s;
}

}  // namespace

Layout LayoutOf(const Candidate& c) {
  bool multi = false;
  for (const CandidateReplica& r : c.replicas) multi |= r.stages.size() > 1;
  if (!multi) return Layout::kData;
  return c.replicas.size() == 1 ? Layout::kPipeline : Layout::kHybrid;
}

Plan ToPlan(const CostModel& cm, const Candidate& c, const Evaluation& ev) {
  Plan p;
  p.layout = LayoutOf(c);
  p.dp = static_cast<int>(c.replicas.size());
  p.micro_batches = c.micro_batches;
  p.schedule = c.schedule;
  for (size_t r = 0; r < c.replicas.size(); ++r) {
    const CandidateReplica& cr = c.replicas[r];
    Replica rep;
    rep.batch = cr.batch;
    rep.gradient_weight = static_cast<double>(cr.batch) / static_cast<double>(cm.global_batch());
    for (size_t s = 0; s < cr.stages.size(); ++s) {
      const CandidateStage& cs = cr.stages[s];
      const DeviceId& id = cm.device(cs.device).id;
      rep.stages.push_back(
          Stage{{id}, cs.begin, cs.end, ev.stage_time_s[r][s], ev.stage_memory_bytes[r][s]});
      p.predicted.peak_memory_bytes[id.ToString()] = ev.stage_memory_bytes[r][s];
    }
    p.pp = std::max(p.pp, static_cast<int>(cr.stages.size()));
    p.replicas.push_back(std::move(rep));
  }
  p.predicted.step_s = ev.step_s;
  p.predicted.samples_per_s = ev.samples_per_s;
  p.predicted.bubble = ev.bubble;
  p.predicted.comm = ev.comm;
  p.why = Describe(cm, c, ev);
  return p;
}

namespace {

// MakePlans on devices of one collective backend (or devices without one).
Result<PlanSet> MakePlansOneBackend(const ClusterSnapshot& cluster, const ModelProfile& model,
                                    const JobRequest& request, const PlannerOptions& options) {
  const CostModel cm = CostModel::Create(cluster, model, request, options.cost);

  PlanSet out;
  // Step 1: filter devices.
  std::vector<int> free_devices;
  std::vector<std::string> busy, slow;
  for (int i = 0; i < cm.num_devices(); ++i) {
    const DeviceInfo& d = cm.device(i);
    if (d.busy) {
      busy.push_back(d.id.ToString());
    } else if (d.model_seconds >= 1e8 || d.memory_bytes <= 0) {
      slow.push_back(d.id.ToString());
    } else {
      free_devices.push_back(i);
    }
  }
  auto list = [](const std::vector<std::string>& ids) {
    std::string s;
    for (size_t i = 0; i < ids.size() && i < 8; ++i) s += (i ? ", " : "") + ids[i];
    if (ids.size() > 8) s += ", ... (" + std::to_string(ids.size()) + " in all)";
    return s;
  };
  if (!busy.empty()) out.rejected.push_back({Layout::kAuto, "busy, excluded: " + list(busy)});
  if (!slow.empty()) {
    out.rejected.push_back(
        {Layout::kAuto, "no measured throughput or memory, excluded: " + list(slow)});
  }
  auto summary = [&out](std::string head) {
    for (const Rejection& r : out.rejected) {
      head += "; ";
      if (r.layout != Layout::kAuto) head += std::string(LayoutName(r.layout)) + ": ";
      head += r.reason;
    }
    return FailedPrecondition(head);
  };
  if (free_devices.empty()) {
    return summary("no free device (" + std::to_string(cm.num_devices()) + " in the cluster)");
  }
  if (static_cast<int>(free_devices.size()) < request.min_devices) {
    return summary("job needs at least " + std::to_string(request.min_devices) + " devices, " +
                   std::to_string(free_devices.size()) + " free");
  }

  // Steps 2-4: rank, partition, score.
  Search search(cm, request, options, free_devices);
  search.nominal_px_ = model.nominal_image_px;
  search.halo_px_ = model.halo_px;
  search.model_name_ = model.name;
  search.Run();

  // Step 5: the hand-made baselines, scored like every candidate. A baseline faster
  // than the best data plan found takes its place (the search never returns a plan
  // slower than a plan a lab would make by hand); forced non-data layouts only
  // report the comparison. Tiled-only inference has none.
  std::vector<ScoredBaseline> baselines;
  if (!(request.kind == JobKind::kInfer && request.layout == Layout::kTiled)) {
    baselines = ScoreBaselines(cm, request, free_devices);
  }
  const ScoredBaseline* winner = nullptr;
  if (search.Wants(Layout::kData)) {
    auto data = search.best_.find(Layout::kData);
    double bar = data == search.best_.end() ? kInf : data->second.second.step_s;
    for (const ScoredBaseline& b : baselines) {
      if (b.info.feasible && b.ev.step_s < bar * (1 - 1e-12)) {
        winner = &b;
        bar = b.ev.step_s;
      }
    }
    if (winner) search.best_[Layout::kData] = {winner->candidate, winner->ev};
  }
  // Within the margin of the best baseline, the baseline is kept (PlannerOptions).
  const ScoredBaseline* kept = nullptr;
  double kept_over = 0;  // the best other plan's step time, when a baseline is kept
  if (request.layout == Layout::kAuto && options.baseline_margin > 0) {
    const ScoredBaseline* base = nullptr;
    for (const ScoredBaseline& b : baselines) {
      if (b.info.feasible && (base == nullptr || b.ev.step_s < base->ev.step_s)) base = &b;
    }
    double found = search.tiled_ ? search.tiled_->predicted.step_s : kInf;
    for (const auto& [layout, best] : search.best_) found = std::min(found, best.second.step_s);
    if (base != nullptr && found < base->ev.step_s * (1 - 1e-12) &&
        found > base->ev.step_s * (1 - options.baseline_margin)) {
      kept = base;
      kept_over = found;
      winner = base;
      search.best_[Layout::kData] = {base->candidate, base->ev};
    }
  }

  for (auto& [layout, best] : search.best_) {
    out.plans.push_back(ToPlan(cm, best.first, best.second));
    if (winner && layout == Layout::kData) {
      out.plans.back().why = winner->info.description + ": " + out.plans.back().why;
    }
  }
  if (search.tiled_) out.plans.push_back(*search.tiled_);
  std::stable_sort(out.plans.begin(), out.plans.end(), [&kept](const Plan& a, const Plan& b) {
    if (kept) {  // the kept baseline (the data plan) goes first
      const bool ka = a.layout == Layout::kData, kb = b.layout == Layout::kData;
      if (ka != kb) return ka;
    }
    return a.predicted.step_s < b.predicted.step_s;
  });
  std::set<Layout> has_plan;
  for (const Plan& p : out.plans) has_plan.insert(p.layout);
  for (auto& [layout, reasons] : search.reasons_) {
    if (has_plan.count(layout)) continue;  // keep reasons only for layouts ruled out
    for (const std::string& r : reasons) out.rejected.push_back({layout, r});
  }
  if (!out.plans.empty()) {
    Plan& chosen = out.plans.front();
    const double best = chosen.predicted.step_s;
    for (const ScoredBaseline& b : baselines) {
      Baseline full = b.info;
      if (full.feasible) {
        full.speedup = best > 0 ? full.step_s / best : 0;
        full.plan = ToPlan(cm, b.candidate, b.ev);
        full.plan->why = full.description + ": " + full.plan->why;
      }
      chosen.baselines.push_back(static_cast<const BaselineScore&>(full));
      out.baselines.push_back(std::move(full));
    }
    const std::string layouts = std::to_string(out.plans.size()) + " layouts";
    const std::string scored = std::to_string(search.evaluated_) + " candidates scored";
    std::string head = "fastest of " + layouts + " (" + scored + ")";
    std::string tail = chosen.why;
    if (kept) {
      head = kept->info.description +
             Fmt(" is kept: the best other plan is predicted only %.1f%% faster",
                 (1 - kept_over / best) * 100) +
             Fmt(" (%.0f%% margin; ", options.baseline_margin * 100) + layouts + ", " + scored +
             ")";
      tail = tail.substr(kept->info.description.size() + 2);
    } else if (winner && chosen.layout == Layout::kData) {
      head = winner->info.description + " is the best plan found (fastest of " + layouts + ", " +
             scored + ")";
      tail = tail.substr(winner->info.description.size() + 2);
    }
    if (!chosen.baselines.empty()) head += "; " + SpeedupText(chosen.baselines);
    chosen.why = head + "; " + tail;
    for (size_t i = 1; i < out.plans.size(); ++i) {
      out.plans[i].why = Fmt("%.2fx the chosen step time; ", out.plans[i].predicted.step_s / best) +
                         out.plans[i].why;
    }
    return out;
  }
  return summary("no feasible plan for " +
                 (model.name.empty() ? std::string("the model") : model.name) +
                 " with global batch " + std::to_string(request.global_batch) + " on " +
                 std::to_string(free_devices.size()) + " free devices");
}

// The cluster with only the devices of `backend` (and those without one).
ClusterSnapshot OnlyBackend(const ClusterSnapshot& cluster, const std::string& backend) {
  ClusterSnapshot out = cluster;
  std::set<DeviceId> kept;
  for (Node& n : out.nodes) {
    std::erase_if(n.devices,
                  [&](const Device& d) { return !d.backend.empty() && d.backend != backend; });
    for (const Device& d : n.devices) kept.insert(DeviceId{n.name, d.index});
  }
  std::erase_if(out.device_links,
                [&](const DeviceLink& l) { return !kept.contains(l.a) || !kept.contains(l.b); });
  return out;
}

}  // namespace

Result<PlanSet> MakePlans(const ClusterSnapshot& cluster, const ModelProfile& model,
                          const JobRequest& request, const PlannerOptions& options) {
  TESSERA_RETURN_IF_ERROR(cluster.Validate());
  TESSERA_RETURN_IF_ERROR(model.Validate());
  TESSERA_RETURN_IF_ERROR(request.Validate());
  if (options.max_pipeline_stages < 1) {
    return InvalidArgument("must be at least 1", "max_pipeline_stages");
  }
  // Backends of the devices a plan could use (free ones).
  std::map<std::string, int> backends;
  for (const Node& n : cluster.nodes) {
    for (const Device& d : n.devices) {
      if (!d.busy && !d.backend.empty()) ++backends[d.backend];
    }
  }
  if (backends.size() < 2) return MakePlansOneBackend(cluster, model, request, options);

  // A job's ranks share one collective library: plan each backend's devices alone
  // and keep the fastest.
  struct Option {
    std::string backend;
    Result<PlanSet> plans;
  };
  std::vector<Option> options_by_backend;
  for (const auto& [backend, count] : backends) {
    options_by_backend.push_back(
        {backend, MakePlansOneBackend(OnlyBackend(cluster, backend), model, request, options)});
  }
  const Option* best = nullptr;
  for (const Option& o : options_by_backend) {
    if (!o.plans.ok()) continue;
    if (best == nullptr ||
        o.plans->plans.front().predicted.step_s < best->plans->plans.front().predicted.step_s) {
      best = &o;
    }
  }
  auto devices = [&](const std::string& backend) {
    const int n = backends.at(backend);
    return std::to_string(n) + " " + backend + (n == 1 ? " device" : " devices");
  };
  std::string why =
      "one collective backend per job (NCCL on CUDA GPUs, Gloo on CPUs and "
      "emulated devices; a job's ranks cannot mix them)";
  if (best == nullptr) {
    std::string message = "no feasible plan on any one backend: " + why;
    for (const Option& o : options_by_backend) {
      message += "; the " + devices(o.backend) + ": " + o.plans.status().message();
    }
    return FailedPrecondition(message);
  }
  PlanSet out = *best->plans;
  why += ": planned on the " + devices(best->backend);
  for (const Option& o : options_by_backend) {
    if (&o == best) continue;
    why += "; the " + devices(o.backend) + " alone: ";
    why += o.plans.ok() ? Fmt("%.3f s a step", o.plans->plans.front().predicted.step_s)
                        : o.plans.status().message();
  }
  out.rejected.insert(out.rejected.begin(), Rejection{Layout::kAuto, why});
  return out;
}

}  // namespace tessera::scheduler
