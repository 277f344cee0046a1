// Local searches: the micro-batch scans and the neighbourhoods of the best plan found
// (scheduler/search/local_search.h, scheduler/search/search.h).
//
// ScanMicroBatches(max_m, f), for every layout but tiled:
//   1. M = every count 1..max_m when max_m <= 32, else the coarse counts 1, 2, 3, 4,
//      6, 8, 12, ..., max_m (CoarseMicroBatches).
//   2. From the best, when one is feasible: steps of 8, 4, 2, 1, moving M by the step
//      while f improves; the descent stops at a step below the best M / 64.
// Search::ImprovePipelineOrder, after the pipeline scans, around the best pipeline:
//   1. At most 8 free devices and within a work budget: every ordered subset of 2 to
//      K devices at the best M.
//   2. Up to 4 rounds, while the step time improves: every permutation of the best
//      order, or else every swap of two stages, when the budget allows; a stage's
//      device replaced by an unused one, an unused device inserted (below K stages),
//      a stage dropped (above 2 stages), when the budget allows.
//   3. ScanMicroBatches for the order found.
// Search::Polish(layout), after the hybrid search, on plans of at most 16 devices,
// scored by the full cost model (which sees the all-reduce); the first improvement is
// taken, up to 200 times:
//   1. per replica: a stage boundary moved by one layer; two stages' devices swapped;
//   2. two devices of different replicas swapped;
//   3. the same boundary moved in every replica at once;
//   4. one sample moved between replicas;
//   5. M +- 1.
#include "scheduler/search/local_search.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <utility>
#include <vector>

#include "scheduler/pipeline_partition.h"
#include "scheduler/search/search.h"

namespace tessera::scheduler {

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

// Local search around the best pipeline: other orders of its devices (all of them
// when cheap, else pairwise swaps), swapping in unused devices, then the
// micro-batch count again for the order found. Bounded by a work budget.
void Search::ImprovePipelineOrder() {
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
    const std::optional<Partition>& p = Partitioned(ord, {B, micro, schedule_});
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

// Final local search on the best plan of a layout, scored by the full cost model
// (so the all-reduce, which the partition DP does not see, is weighed too): move a
// stage boundary by one layer, one sample between replicas, swap two stages'
// devices inside a replica, change M by one. Small plans only (<= 16 devices).
void Search::Polish(Layout layout) {
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

}  // namespace tessera::scheduler
