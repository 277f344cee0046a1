// Timings of the cluster benchmarks: steady-clock durations in seconds and
// milliseconds, and the spread of a set of latency samples as their tables
// print it.
#ifndef TESSERA_BENCH_CLUSTER_LATENCY_H_
#define TESSERA_BENCH_CLUSTER_LATENCY_H_

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <vector>

namespace tessera::bench {

inline double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}
inline double Ms(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

// How many samples, and their median, 99th percentile and largest (-1 without
// samples). A q-quantile is the element at floor(q n) of the sorted samples (the
// largest for q = 1).
struct Spread {
  size_t count = 0;
  double p50 = -1, p99 = -1, max = -1;
};

inline Spread SpreadOf(std::vector<double> samples) {
  Spread s;
  s.count = samples.size();
  if (samples.empty()) return s;
  std::sort(samples.begin(), samples.end());
  auto quantile = [&](double q) {
    return samples[std::min(samples.size() - 1,
                            static_cast<size_t>(q * static_cast<double>(samples.size())))];
  };
  s.p50 = quantile(0.5);
  s.p99 = quantile(0.99);
  s.max = quantile(1.0);
  return s;
}

}  // namespace tessera::bench

#endif  // TESSERA_BENCH_CLUSTER_LATENCY_H_
