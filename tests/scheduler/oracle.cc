#include "tests/scheduler/oracle.h"

#include <algorithm>
#include <functional>
#include <vector>

namespace tessera::scheduler::testing {

namespace {

// Calls f(parts) for every composition of `total` into `k` parts, each >= lo.
void Compositions(int64_t total, int k, int64_t lo,
                  const std::function<void(const std::vector<int64_t>&)>& f) {
  std::vector<int64_t> parts(k);
  std::function<void(int, int64_t)> rec = [&](int i, int64_t left) {
    if (i == k - 1) {
      if (left >= lo) {
        parts[i] = left;
        f(parts);
      }
      return;
    }
    for (int64_t v = lo; left - v >= lo * (k - 1 - i); ++v) {
      parts[i] = v;
      rec(i + 1, left - v);
    }
  };
  if (k >= 1 && total >= lo * k) rec(0, total);
}

// Every layer partition of L layers into S contiguous non-empty ranges: cut points.
void LayerSplits(int L, int S, const std::function<void(const std::vector<int>&)>& f) {
  std::vector<int> bounds(S + 1);
  bounds[0] = 0;
  bounds[S] = L;
  std::function<void(int)> rec = [&](int i) {
    if (i == S) {
      f(bounds);
      return;
    }
    for (int b = bounds[i - 1] + 1; b <= L - (S - i); ++b) {
      bounds[i] = b;
      rec(i + 1);
    }
  };
  if (S == 1) {
    f(bounds);
  } else {
    rec(1);
  }
}

// All (ordering, partition) pipelines of exactly the devices in `devs`.
std::vector<std::vector<CandidateStage>> AllPipelines(std::vector<int> devs, int L) {
  std::vector<std::vector<CandidateStage>> out;
  const int S = static_cast<int>(devs.size());
  if (S > L) return out;
  std::sort(devs.begin(), devs.end());
  do {
    LayerSplits(L, S, [&](const std::vector<int>& b) {
      std::vector<CandidateStage> stages;
      for (int s = 0; s < S; ++s) stages.push_back(CandidateStage{devs[s], b[s], b[s + 1]});
      out.push_back(std::move(stages));
    });
  } while (std::next_permutation(devs.begin(), devs.end()));
  return out;
}

// Set partitions of `items` into blocks.
void SetPartitions(const std::vector<int>& items,
                   const std::function<void(const std::vector<std::vector<int>>&)>& f) {
  std::vector<std::vector<int>> blocks;
  std::function<void(size_t)> rec = [&](size_t i) {
    if (i == items.size()) {
      f(blocks);
      return;
    }
    for (size_t b = 0; b < blocks.size(); ++b) {
      blocks[b].push_back(items[i]);
      rec(i + 1);
      blocks[b].pop_back();
    }
    blocks.push_back({items[i]});
    rec(i + 1);
    blocks.pop_back();
  };
  rec(0);
}

}  // namespace

OracleResult BruteForce(const CostModel& cost, int min_devices, int max_devices,
                        const OracleOptions& options) {
  OracleResult result;
  const int L = cost.num_layers();
  const int64_t B = cost.global_batch();
  const Schedule schedule = cost.training() ? Schedule::k1F1B : Schedule::kGPipe;
  // GPipe predicts the same time as 1F1B and never less memory, so for training
  // only 1F1B needs enumerating (the planner reports 1F1B for the same reason).
  std::vector<int> free_devices;
  for (int i = 0; i < cost.num_devices(); ++i) {
    if (!cost.device(i).busy) free_devices.push_back(i);
  }
  const int n = static_cast<int>(free_devices.size());
  auto consider = [&](const Candidate& c) {
    ++result.evaluated;
    Evaluation ev = cost.Evaluate(c);
    if (ev.feasible && ev.step_s < result.step_s) {
      result.step_s = ev.step_s;
      result.best = c;
    }
  };
  for (int mask = 1; mask < (1 << n); ++mask) {
    std::vector<int> subset;
    for (int i = 0; i < n; ++i) {
      if (mask & (1 << i)) subset.push_back(free_devices[i]);
    }
    const int k = static_cast<int>(subset.size());
    if (k < min_devices || (max_devices > 0 && k > max_devices)) continue;
    // Data parallel: every batch split, every micro-batch count.
    if (options.data && k <= B) {
      Compositions(B, k, 1, [&](const std::vector<int64_t>& shares) {
        const int64_t smallest = *std::min_element(shares.begin(), shares.end());
        for (int m = 1; m <= smallest; ++m) {
          Candidate c;
          c.micro_batches = m;
          c.schedule = schedule;
          for (int i = 0; i < k; ++i) {
            c.replicas.push_back(CandidateReplica{shares[i], {CandidateStage{subset[i], 0, L}}});
          }
          consider(c);
        }
      });
    }
    // Pipeline: every ordering, every partition, every micro-batch count.
    if (options.pipeline && k >= 2) {
      for (const auto& stages : AllPipelines(subset, L)) {
        for (int m = 1; m <= B; ++m) {
          Candidate c;
          c.micro_batches = m;
          c.schedule = schedule;
          c.replicas.push_back(CandidateReplica{B, stages});
          consider(c);
        }
      }
    }
    // Hybrid: every set partition into >= 2 replicas with one of >= 2 devices.
    if (options.hybrid && k >= 3) {
      SetPartitions(subset, [&](const std::vector<std::vector<int>>& blocks) {
        const int R = static_cast<int>(blocks.size());
        if (R < 2 || R > B) return;
        bool multi = false;
        for (const auto& b : blocks) multi |= b.size() >= 2;
        if (!multi) return;
        std::vector<std::vector<std::vector<CandidateStage>>> options_per_block;
        for (const auto& b : blocks) options_per_block.push_back(AllPipelines(b, L));
        for (const auto& o : options_per_block) {
          if (o.empty()) return;
        }
        std::vector<size_t> pick(R, 0);
        while (true) {
          for (int m = 1; m * R <= B; ++m) {
            Compositions(B, R, m, [&](const std::vector<int64_t>& shares) {
              Candidate c;
              c.micro_batches = m;
              c.schedule = schedule;
              for (int r = 0; r < R; ++r) {
                c.replicas.push_back(CandidateReplica{shares[r], options_per_block[r][pick[r]]});
              }
              consider(c);
            });
          }
          int r = 0;
          while (r < R && ++pick[r] == options_per_block[r].size()) pick[r++] = 0;
          if (r == R) break;
        }
      });
    }
  }
  return result;
}

}  // namespace tessera::scheduler::testing
