#include "api/http_metrics.h"

#include <cstdio>

namespace tessera::api {
namespace {

std::string FormatDouble(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.6g", v);
  return buf;
}

}  // namespace

void HttpMetrics::Record(const std::string& route, const std::string& method, int code,
                         double seconds) {
  std::lock_guard lock(mu_);
  ++counts_[{route, method, code}];
  Histogram& h = latency_[route];
  ++h.count;
  h.sum += seconds;
  for (size_t i = 0; i < kBuckets.size(); ++i) {
    if (seconds <= kBuckets[i]) {
      ++h.buckets[i];
      break;
    }
  }
}

int64_t HttpMetrics::Count(const std::string& route, const std::string& method, int code) const {
  std::lock_guard lock(mu_);
  auto it = counts_.find({route, method, code});
  return it == counts_.end() ? 0 : it->second;
}

void HttpMetrics::AppendPrometheus(std::string* out) const {
  std::lock_guard lock(mu_);
  out->append(
      "# HELP tessera_http_requests_total HTTP requests answered, by route, method and status.\n");
  out->append("# TYPE tessera_http_requests_total counter\n");
  for (const auto& [key, n] : counts_) {
    const auto& [route, method, code] = key;
    out->append("tessera_http_requests_total{route=\"" + route + "\",method=\"" + method +
                "\",code=\"" + std::to_string(code) + "\"} " + std::to_string(n) + "\n");
  }
  out->append("# HELP tessera_http_request_duration_seconds Time to handle an HTTP request.\n");
  out->append("# TYPE tessera_http_request_duration_seconds histogram\n");
  for (const auto& [route, h] : latency_) {
    int64_t cumulative = 0;
    for (size_t i = 0; i < kBuckets.size(); ++i) {
      cumulative += h.buckets[i];
      out->append("tessera_http_request_duration_seconds_bucket{route=\"" + route + "\",le=\"" +
                  FormatDouble(kBuckets[i]) + "\"} " + std::to_string(cumulative) + "\n");
    }
    out->append("tessera_http_request_duration_seconds_bucket{route=\"" + route +
                "\",le=\"+Inf\"} " + std::to_string(h.count) + "\n");
    out->append("tessera_http_request_duration_seconds_sum{route=\"" + route + "\"} " +
                FormatDouble(h.sum) + "\n");
    out->append("tessera_http_request_duration_seconds_count{route=\"" + route + "\"} " +
                std::to_string(h.count) + "\n");
  }
}

}  // namespace tessera::api
