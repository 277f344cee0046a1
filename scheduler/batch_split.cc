#include "scheduler/batch_split.h"

#include <algorithm>
#include <cmath>
#include <queue>
#include <utility>

namespace tessera::scheduler {

std::optional<std::vector<int64_t>> SplitBatch(int64_t total, const SplitCosts& c) {
  const int n = c.count;
  if (n <= 0 || total < 0) return std::nullopt;
  int64_t cap_sum = 0;
  for (int i = 0; i < n; ++i) {
    if (c.caps[i] < c.min_share) return std::nullopt;
    cap_sum += std::min<int64_t>(c.caps[i], total);
  }
  if (static_cast<int64_t>(n) * c.min_share > total || cap_sum < total) return std::nullopt;

  auto share_at = [&](int i, double level) {
    int64_t s = c.max_share_within(i, level);
    return std::clamp<int64_t>(s, c.min_share, std::min<int64_t>(c.caps[i], total));
  };
  auto sum_at = [&](double level) {
    int64_t sum = 0;
    for (int i = 0; i < n; ++i) sum += share_at(i, level);
    return sum;
  };
  // lo: sum <= total; hi: sum >= total.
  double lo = 0, hi = 0;
  for (int i = 0; i < n; ++i) hi = std::max(hi, c.cost(i, std::min<int64_t>(c.caps[i], total)));
  if (sum_at(lo) > total) return std::nullopt;  // cannot happen given the checks above
  for (int iter = 0; iter < 100 && hi - lo > 1e-12 * std::max(1.0, hi); ++iter) {
    const double mid = 0.5 * (lo + hi);
    if (sum_at(mid) <= total) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  std::vector<int64_t> shares(n);
  int64_t assigned = 0;
  for (int i = 0; i < n; ++i) {
    shares[i] = share_at(i, lo);
    assigned += shares[i];
  }
  using Item = std::pair<double, int>;  // (cost after one more sample, participant)
  std::priority_queue<Item, std::vector<Item>, std::greater<>> heap;
  for (int i = 0; i < n; ++i) {
    if (shares[i] < c.caps[i]) heap.emplace(c.cost(i, shares[i] + 1), i);
  }
  while (assigned < total && !heap.empty()) {
    auto [cost, i] = heap.top();
    heap.pop();
    ++shares[i];
    ++assigned;
    if (shares[i] < c.caps[i]) heap.emplace(c.cost(i, shares[i] + 1), i);
  }
  if (assigned != total) return std::nullopt;
  return shares;
}

std::optional<std::vector<int64_t>> SplitBatchLinear(int64_t total,
                                                     const std::vector<double>& seconds_per_sample,
                                                     const std::vector<int64_t>& caps,
                                                     int64_t min_share) {
  SplitCosts c;
  c.count = static_cast<int>(seconds_per_sample.size());
  c.caps = caps;
  c.min_share = min_share;
  c.cost = [&](int i, int64_t s) { return static_cast<double>(s) * seconds_per_sample[i]; };
  c.max_share_within = [&](int i, double level) {
    const double s = std::floor(level / seconds_per_sample[i] * (1 + 1e-12));
    return s > 9e18 ? INT64_MAX : static_cast<int64_t>(s);
  };
  return SplitBatch(total, c);
}

}  // namespace tessera::scheduler
