#include "daemon/store/latency_histogram.h"

#include <algorithm>
#include <utility>

namespace tessera::daemon {

LatencyHistogram::LatencyHistogram(std::vector<double> upper_bounds) {
  h_.upper_bounds = std::move(upper_bounds);
  h_.counts.assign(h_.upper_bounds.size() + 1, 0);
}

void LatencyHistogram::Record(double seconds) {
  MutexLock lock(mu_);
  auto it = std::lower_bound(h_.upper_bounds.begin(), h_.upper_bounds.end(), seconds);
  ++h_.counts[static_cast<size_t>(it - h_.upper_bounds.begin())];
  h_.sum += seconds;
  ++h_.count;
}

HistogramSnapshot LatencyHistogram::Snapshot() const {
  MutexLock lock(mu_);
  return h_;
}

std::vector<double> LatencyHistogram::DefaultBounds() {
  return {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5};
}

}  // namespace tessera::daemon
