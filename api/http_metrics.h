// HttpMetrics: request counters and a latency histogram for /metrics.
//
// Exposed in Prometheus text format (version 0.0.4):
//   tessera_http_requests_total{route="/api/v1/jobs/{id}",method="GET",code="200"}
//   tessera_http_request_duration_seconds_bucket{route=...,le="0.005"} ...
// Routes are route-table patterns, "static" or "unmatched", so label
// cardinality stays bounded whatever clients send.
//
// Thread safety: every method may be called from any thread.
#ifndef TESSERA_API_HTTP_METRICS_H_
#define TESSERA_API_HTTP_METRICS_H_

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

namespace tessera::api {

class HttpMetrics {
 public:
  // Upper bounds (seconds) of the histogram buckets; +Inf is implied.
  static constexpr std::array<double, 12> kBuckets = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                      0.1,   0.25,   0.5,   1.0,  2.5,   10.0};

  void Record(const std::string& route, const std::string& method, int code, double seconds);

  // Appends the text exposition of every series to *out.
  void AppendPrometheus(std::string* out) const;

  // Count of requests recorded for (route, method, code); for tests.
  int64_t Count(const std::string& route, const std::string& method, int code) const;

 private:
  struct Histogram {
    std::array<int64_t, kBuckets.size()> buckets{};  // non-cumulative
    int64_t count = 0;
    double sum = 0;
  };
  mutable std::mutex mu_;
  std::map<std::tuple<std::string, std::string, int>, int64_t> counts_;
  std::map<std::string, Histogram> latency_;
};

}  // namespace tessera::api

#endif  // TESSERA_API_HTTP_METRICS_H_
