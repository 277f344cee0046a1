#include "scheduler/pipeline_partition.h"

#include <algorithm>
#include <limits>

namespace tessera::scheduler {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

struct Cell {
  double max = kInf;
  double sum = kInf;
  int end = -1;  // end of this stage's layer range
};

bool Better(double max_a, double sum_a, const Cell& b) {
  if (max_a < b.max * (1 - 1e-12)) return true;
  if (max_a > b.max * (1 + 1e-12)) return false;
  return sum_a < b.sum;
}

void Refine(const CostModel& cost, Partition& p, const PartitionParams& params) {
  const int S = static_cast<int>(p.stages.size());
  if (S < 2) return;
  const int limit = 4 * cost.num_layers();
  for (int round = 0; round < limit; ++round) {
    bool improved = false;
    for (int i = 0; i + 1 < S && !improved; ++i) {
      for (int delta : {-1, 1}) {
        std::vector<CandidateStage> trial = p.stages;
        trial[i].end += delta;
        trial[i + 1].begin += delta;
        if (trial[i].end <= trial[i].begin || trial[i + 1].end <= trial[i + 1].begin) continue;
        auto scored = ScorePartition(cost, std::move(trial), params);
        if (scored && scored->replica_s < p.replica_s * (1 - 1e-12)) {
          p = std::move(*scored);
          improved = true;
          break;
        }
      }
    }
    if (!improved) return;
  }
}

}  // namespace

std::optional<Partition> ScorePartition(const CostModel& cost, std::vector<CandidateStage> stages,
                                        const PartitionParams& params) {
  const int S = static_cast<int>(stages.size());
  const int M = params.micro_batches;
  const double micro = static_cast<double>(params.batch) / M;
  const int64_t micro_ceil = (params.batch + M - 1) / M;
  double max_t = 0;
  std::vector<double> times(S), cycles;
  const bool cycled = cost.training() && params.schedule == Schedule::k1F1B;
  for (int s = 0; s < S; ++s) {
    const CandidateStage& st = stages[s];
    const double mem =
        cost.StageMemoryBytes(st.begin, st.end, micro_ceil,
                              CostModel::InFlight(params.schedule, M, S, s), params.replicated);
    if (mem > static_cast<double>(cost.device(st.device).usable_bytes)) return std::nullopt;
    const double t =
        cost.StageSeconds(st.device, st.begin, st.end, micro, s + 1 < S ? stages[s + 1].device : -1,
                          s > 0 ? stages[s - 1].device : -1);
    times[s] = t;
    max_t = std::max(max_t, t);
    if (cycled && s > 0) {  // the 1F1B round trip, as CostModel::Evaluate
      const CandidateStage& ps = stages[s - 1];
      auto busy = [&](const CandidateStage& x) {
        return micro * cost.ComputeSeconds(x.device, x.begin, x.end) +
               cost.FixedSeconds(x.device, x.begin, x.end) + cost.options().micro_batch_overhead_s;
      };
      cycles.push_back((busy(ps) + busy(st) +
                        cost.RoundTripMessageSeconds(ps.device, st.device, st.begin, micro)) /
                       2);
    }
  }
  Partition p;
  p.stages = std::move(stages);
  p.bottleneck_s = max_t;
  p.replica_s = CostModel::ReplicaSeconds(times, cycles, M);
  return p;
}

namespace {

// PartitionAllDepths, with `only_deepest`: the partitions of depth K alone
// (PartitionLayers), so the caps below follow that depth's slowest stage and
// its local search always runs.
//
// Steps:
//   1. The DP of (slowest stage, sum of stage times) for every depth.
//   2. When the micro-batches are few, the same DP minimising the sum of stage
//      times under caps on the slowest stage, from no cap down; a cap that every
//      depth's last answer already meets gives that answer again and is skipped.
//   3. The local search (Refine) of the depths within 5 % of the best.
std::vector<std::optional<Partition>> Partitions(const CostModel& cost, const std::vector<int>& rev,
                                                 const PartitionParams& params, int max_stages,
                                                 bool only_deepest) {
  const int L = cost.num_layers();
  const int K = std::min({max_stages, static_cast<int>(rev.size()), L});
  std::vector<std::optional<Partition>> result(std::max(K, 0));
  if (K <= 0 || params.micro_batches < 1 || params.batch < params.micro_batches) return result;
  const int first_depth = only_deepest ? K : 1;
  const int M = params.micro_batches;
  const double micro = static_cast<double>(params.batch) / M;
  const double micro_ceil = static_cast<double>((params.batch + M - 1) / M);
  const double overhead = cost.options().micro_batch_overhead_s;
  const bool train = cost.training();

  // Weights, and the gradient buckets of replicated layers (CostModel::ReplicaWeightBytes).
  std::vector<double> W = cost.WeightPrefix();
  if (params.replicated && cost.training()) {
    for (size_t i = 0; i < W.size(); ++i) W[i] += cost.ParameterPrefix()[i];
  }
  const std::vector<double>& A = cost.ActivationPrefix();
  std::vector<double> out_bytes(L), io_bytes(L), in_bytes(L), transient_bytes(L);
  for (int l = 0; l < L; ++l) {
    out_bytes[l] = cost.OutputBytes(l);
    io_bytes[l] = cost.LayerIoBytes(l);
    in_bytes[l] = cost.InputBytes(l);
    transient_bytes[l] = cost.TransientBytes(l);
  }
  // h[k][a]: best for layers [a, L) on rev[k], ..., rev[0] with rev[k] starting at a.
  // min_sum == false: lexicographic (slowest stage, then sum of stage times).
  // min_sum == true: smallest sum with every stage at most `cap` (ties: slower max).
  std::vector<std::vector<Cell>> h(K, std::vector<Cell>(L));
  // The slowest stage of each depth's answer of the last run (kInf: none).
  std::vector<double> dp_max(K, kInf);
  auto run = [&](double cap, bool min_sum) {
    std::fill(dp_max.begin(), dp_max.end(), kInf);
    auto better = [min_sum](double mx, double sm, const Cell& b) {
      if (!min_sum) return Better(mx, sm, b);
      if (sm < b.sum * (1 - 1e-12)) return true;
      if (sm > b.sum * (1 + 1e-12)) return false;
      return mx < b.max;
    };
    for (int k = 0; k < K; ++k) {
      const int dev = rev[k];
      const std::vector<double>& C = cost.ComputePrefix(dev);
      const std::vector<double>& F = cost.FixedPrefix(dev);
      const double usable = static_cast<double>(cost.device(dev).usable_bytes);
      const bool has_next = k > 0;
      const bool has_prev_dev = k + 1 < K;
      Link next_link, prev_link;
      if (has_next) next_link = cost.LinkBetween(dev, rev[k - 1]);
      if (has_prev_dev) prev_link = cost.LinkBetween(dev, rev[k + 1]);
      const double next_per_byte = has_next ? micro / next_link.bandwidth_bytes_per_s : 0;
      // In-flight micro-batches depend on the stage's distance from the end only.
      const int in_flight =
          train ? (params.schedule == Schedule::kGPipe ? M : std::min(M, k + 1)) : 1;
      const double act_factor = in_flight * micro_ceil;
      const double msg_factor = std::max(2, in_flight);  // as CostModel::StageMemoryBytes
      for (int a = 0; a < L; ++a) h[k][a] = Cell{};
      for (int a = 0; a + k < L; ++a) {
        if (a > 0 && !has_prev_dev) break;  // a stage starting after 0 needs a device before it
        double fixed = overhead;
        if (train && a > 0) {
          fixed += prev_link.latency_s + micro * out_bytes[a - 1] / prev_link.bandwidth_bytes_per_s;
        }
        if (has_next) fixed += next_link.latency_s;
        Cell best;
        if (!has_next) {
          double io_max = 0;
          if (!train) {
            for (int l = a; l < L; ++l) io_max = std::max(io_max, io_bytes[l]);
          }
          double mem;
          if (train) {
            double transient = 0;
            for (int l = a; l < L; ++l) transient = std::max(transient, transient_bytes[l]);
            // As CostModel::StageMemoryBytes: kept activations and the stage input per
            // in-flight micro-batch, one micro-batch's backward working set and messages.
            mem = W[L] - W[a] + act_factor * (A[L] - A[a] + in_bytes[a]) +
                  micro_ceil * (transient + (a > 0 ? msg_factor * in_bytes[a] : 0));
          } else {
            mem = W[L] - W[a] + act_factor * io_max;
          }
          const double t = micro * (C[L] - C[a]) + (F[L] - F[a]) + fixed;
          if (mem <= usable && t <= cap) best = Cell{t, t, L};
          h[k][a] = best;
          continue;
        }
        double io_max = 0, transient = 0;
        const std::vector<Cell>& rest_row = h[k - 1];
        // The stage's memory is held(e) = W[e] + act_factor * A[e] + micro_ceil *
        // transient(e) + const_held: its terms of `a` alone once.
        const double const_held = train ? -W[a] + act_factor * (in_bytes[a] - A[a]) +
                                              micro_ceil * (a > 0 ? msg_factor * in_bytes[a] : 0)
                                        : -W[a];
        for (int e = a + 1; e <= L - k; ++e) {
          if (!train) io_max = std::max(io_max, io_bytes[e - 1]);
          if (train) transient = std::max(transient, transient_bytes[e - 1]);
          const double held = train ? W[e] + act_factor * A[e] + micro_ceil * transient + const_held
                                    : W[e] + const_held + act_factor * io_max;
          if (held > usable) break;  // grows with e
          const double base = micro * (C[e] - C[a]) + (F[e] - F[a]) + fixed;
          if (base > cap) break;                                 // grows with e
          if (!min_sum && base > best.max * (1 + 1e-12)) break;  // cannot win any more
          const Cell& rest = rest_row[e];
          if (rest.end < 0) continue;
          const double t = base + next_per_byte * out_bytes[e - 1];
          if (t > cap) continue;
          const double mx = std::max(t, rest.max);
          const double sm = t + rest.sum;
          if (better(mx, sm, best)) best = Cell{mx, sm, e};
        }
        h[k][a] = best;
      }
    }
    std::vector<std::optional<Partition>> found(K);
    for (int S = first_depth; S <= K; ++S) {
      if (h[S - 1][0].end < 0) continue;
      std::vector<CandidateStage> stages;
      int a = 0;
      for (int k = S - 1; k >= 0; --k) {
        const int e = h[k][a].end;
        stages.push_back(CandidateStage{rev[k], a, e});
        a = e;
      }
      found[S - 1] = ScorePartition(cost, std::move(stages), params);
      dp_max[S - 1] = h[S - 1][0].max;
    }
    return found;
  };

  std::vector<std::optional<Partition>> raw = run(kInf, false);
  double best_raw = kInf, smallest_max = kInf;
  for (const auto& p : raw) {
    if (!p) continue;
    best_raw = std::min(best_raw, p->replica_s);
    smallest_max = std::min(smallest_max, p->bottleneck_s);
  }
  // Few micro-batches weigh the sum of stage times, not only the slowest stage:
  // on small problems also minimise the sum under a few caps on the slowest stage.
  if (smallest_max < kInf && static_cast<int64_t>(K) * L * L <= 20000 && M < 4 * K) {
    bool ran = false;  // dp_max holds the answers of a min-sum run
    for (double factor : {kInf, 5.0, 3.0, 2.0, 1.5, 1.25, 1.1, 1.05}) {
      const double cap = smallest_max * factor;
      if (ran && std::all_of(dp_max.begin(), dp_max.end(),
                             [cap](double m) { return m == kInf || m <= cap; })) {
        continue;
      }
      ran = true;
      auto alt = run(cap, true);
      for (int S = 1; S <= K; ++S) {
        if (alt[S - 1] && (!raw[S - 1] || alt[S - 1]->replica_s < raw[S - 1]->replica_s)) {
          raw[S - 1] = std::move(alt[S - 1]);
          best_raw = std::min(best_raw, raw[S - 1]->replica_s);
        }
      }
    }
  }
  // The local search is the costly part: only for depths near the best one.
  for (int S = 1; S <= K; ++S) {
    if (!raw[S - 1]) continue;
    if (raw[S - 1]->replica_s <= best_raw * 1.05) Refine(cost, *raw[S - 1], params);
    result[S - 1] = std::move(raw[S - 1]);
  }
  return result;
}

}  // namespace

std::vector<std::optional<Partition>> PartitionAllDepths(const CostModel& cost,
                                                         const std::vector<int>& rev,
                                                         const PartitionParams& params,
                                                         int max_stages) {
  return Partitions(cost, rev, params, max_stages, /*only_deepest=*/false);
}

std::optional<Partition> PartitionLayers(const CostModel& cost, const std::vector<int>& devices,
                                         const PartitionParams& params) {
  std::vector<int> rev(devices.rbegin(), devices.rend());
  const int S = static_cast<int>(devices.size());
  if (S > cost.num_layers()) return std::nullopt;
  auto all = Partitions(cost, rev, params, S, /*only_deepest=*/true);
  if (static_cast<int>(all.size()) < S) return std::nullopt;
  return all[S - 1];
}

}  // namespace tessera::scheduler
