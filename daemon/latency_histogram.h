// LatencyHistogram: a fixed-bucket histogram of durations in seconds, for the
// Prometheus exposition of store commit latency.
//
// Ownership: owns its counters. Thread safety: Record and Snapshot may be
// called concurrently (one mutex).
#ifndef TESSERA_DAEMON_LATENCY_HISTOGRAM_H_
#define TESSERA_DAEMON_LATENCY_HISTOGRAM_H_

#include <cstdint>
#include <mutex>
#include <vector>

#include "daemon/store.h"

namespace tessera::daemon {

class LatencyHistogram {
 public:
  // REQUIRES: upper_bounds strictly increasing.
  explicit LatencyHistogram(std::vector<double> upper_bounds = DefaultBounds());

  void Record(double seconds);
  HistogramSnapshot Snapshot() const;

  // 0.5 ms .. 2.5 s, roughly doubling.
  static std::vector<double> DefaultBounds();

 private:
  mutable std::mutex mu_;
  HistogramSnapshot h_;
};

}  // namespace tessera::daemon

#endif  // TESSERA_DAEMON_LATENCY_HISTOGRAM_H_
