// LatencyHistogram: a fixed-bucket histogram of durations in seconds, for the
// Prometheus exposition of store commit latency.
//
// Ownership: owns its counters. Thread safety: Record and Snapshot may be
// called concurrently (one mutex).
#ifndef TESSERA_DAEMON_STORE_LATENCY_HISTOGRAM_H_
#define TESSERA_DAEMON_STORE_LATENCY_HISTOGRAM_H_

#include <cstdint>
#include <vector>

#include "common/mutex.h"
#include "common/thread_annotations.h"
#include "daemon/store/store.h"

namespace tessera::daemon {

class LatencyHistogram {
 public:
  // REQUIRES: upper_bounds strictly increasing.
  explicit LatencyHistogram(std::vector<double> upper_bounds = DefaultBounds());

  void Record(double seconds) EXCLUDES(mu_);
  HistogramSnapshot Snapshot() const EXCLUDES(mu_);

  // 0.5 ms .. 2.5 s, roughly doubling.
  static std::vector<double> DefaultBounds();

 private:
  mutable Mutex mu_;
  HistogramSnapshot h_ GUARDED_BY(mu_);
};

}  // namespace tessera::daemon

#endif  // TESSERA_DAEMON_STORE_LATENCY_HISTOGRAM_H_
