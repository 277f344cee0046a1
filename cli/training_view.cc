#include "cli/training_view.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <ctime>
#include <optional>
#include <tuple>

#include "cli/text_table.h"

namespace tessera::cli {
namespace {

std::string Printf(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, v);
  return buf;
}

// The shortest text that reads back as the same double (CSV cells).
std::string Exact(double v) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  return ec == std::errc() ? std::string(buf, end) : "";
}

std::string Opt(const std::optional<double>& v, const char* fmt) {
  return v ? Printf(fmt, *v) : "-";
}

// The newest point of each rank in the newest attempt.
std::map<int64_t, api::MetricPoint> NewestByRank(const std::vector<api::MetricPoint>& points) {
  int64_t attempt = 0;
  for (const api::MetricPoint& p : points) attempt = std::max(attempt, p.attempt);
  std::map<int64_t, api::MetricPoint> out;
  for (const api::MetricPoint& p : points) {
    if (p.attempt != attempt) continue;
    auto [it, inserted] = out.try_emplace(p.rank, p);
    if (!inserted && p.step > it->second.step) it->second = p;
  }
  return out;
}

}  // namespace

std::map<int64_t, RankDevice> RankDevicesOf(const api::Json& plan, const api::Json& nodes) {
  std::map<std::string, int64_t> memory;  // "node:index" -> bytes
  if (nodes.is_array()) {
    for (const api::Json& n : nodes) {
      if (!n.is_object() || !n.contains("name") || !n["name"].is_string()) continue;
      for (const api::Json& d : n.value("devices", api::Json::array())) {
        if (!d.is_object() || !d.contains("index") || !d["index"].is_number_integer()) continue;
        const api::Json bytes = d.value("memory_bytes", api::Json(0));
        memory[n["name"].get<std::string>() + ":" + std::to_string(d["index"].get<int64_t>())] =
            bytes.is_number_integer() ? bytes.get<int64_t>() : 0;
      }
    }
  }
  std::map<int64_t, RankDevice> out;
  if (!plan.is_object() || !plan.contains("replicas") || !plan["replicas"].is_array()) return out;
  int64_t rank = 0;
  for (const api::Json& r : plan["replicas"]) {
    if (!r.is_object() || !r.contains("stages") || !r["stages"].is_array()) continue;
    for (const api::Json& s : r["stages"]) {
      if (!s.is_object() || !s.contains("devices") || !s["devices"].is_array()) continue;
      for (const api::Json& d : s["devices"]) {
        if (!d.is_string()) continue;
        const std::string label = d.get<std::string>();
        auto it = memory.find(label);
        out[rank++] = RankDevice{label, it == memory.end() ? 0 : it->second};
      }
    }
  }
  return out;
}

std::string Sparkline(const std::vector<double>& values, int width) {
  static constexpr const char* kBlocks[] = {"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
  if (values.empty() || width <= 0) return "";
  const size_t cells = std::min(values.size(), static_cast<size_t>(width));
  std::vector<double> means;
  for (size_t c = 0; c < cells; ++c) {
    const size_t begin = c * values.size() / cells;
    const size_t end = (c + 1) * values.size() / cells;
    double sum = 0;
    for (size_t i = begin; i < end; ++i) sum += values[i];
    means.push_back(sum / static_cast<double>(end - begin));
  }
  const auto [lo, hi] = std::minmax_element(means.begin(), means.end());
  std::string out;
  for (double m : means) {
    int level = 3;  // a flat line sits in the middle
    if (*hi > *lo) level = static_cast<int>((m - *lo) / (*hi - *lo) * 7.0 + 0.5);
    out += kBlocks[std::clamp(level, 0, 7)];
  }
  return out;
}

std::vector<api::MetricPoint> LossSeries(const std::vector<api::MetricPoint>& points) {
  std::map<int64_t, api::MetricPoint> by_step;
  for (const api::MetricPoint& p : points) {
    if (!p.loss) continue;
    auto [it, inserted] = by_step.try_emplace(p.step, p);
    const api::MetricPoint& q = it->second;
    // A newer attempt wins; within one attempt the lowest rank.
    if (!inserted && std::make_tuple(-p.attempt, p.rank) < std::make_tuple(-q.attempt, q.rank)) {
      it->second = p;
    }
  }
  std::vector<api::MetricPoint> out;
  for (auto& [step, p] : by_step) out.push_back(std::move(p));
  return out;
}

std::string LossLines(const std::vector<api::MetricPoint>& points, int width) {
  const std::vector<api::MetricPoint> series = LossSeries(points);
  if (series.empty()) return "loss     (no values yet)\n";
  std::vector<double> values;
  for (const api::MetricPoint& p : series) values.push_back(*p.loss);
  std::string out = "loss     " + Sparkline(values, width) + "  " + Printf("%.4g", values.front()) +
                    " -> " + Printf("%.4g", values.back()) + "  (steps " +
                    std::to_string(series.front().step) + "-" + std::to_string(series.back().step) +
                    ")\n";
  // Where each later attempt starts: its lowest step.
  std::map<int64_t, int64_t> first_step;
  for (const api::MetricPoint& p : points) {
    auto [it, inserted] = first_step.try_emplace(p.attempt, p.step);
    if (!inserted) it->second = std::min(it->second, p.step);
  }
  for (auto it = first_step.begin(); it != first_step.end(); ++it) {
    if (it == first_step.begin()) continue;
    out += "recovered: attempt " + std::to_string(it->first) + " from step " +
           std::to_string(it->second) + "\n";
  }
  return out;
}

std::string RankTable(const std::vector<api::MetricPoint>& points,
                      const std::map<int64_t, RankDevice>& devices) {
  std::vector<std::vector<std::string>> rows = {
      {"RANK", "DEVICE", "STEP", "STEP S", "COMPUTE", "COMM", "BUBBLE", "MEMORY"}};
  for (const auto& [rank, p] : NewestByRank(points)) {
    const double total = p.compute_s.value_or(0) + p.comm_s.value_or(0) + p.bubble_s.value_or(0);
    const bool split = p.compute_s || p.comm_s || p.bubble_s;
    auto part = [&](const std::optional<double>& v) -> std::string {
      if (!v) return "-";
      std::string cell = Printf("%.3f", *v);
      if (total > 0) cell += " (" + Printf("%.0f", *v / total * 100) + "%)";
      return cell;
    };
    auto device = devices.find(rank);
    std::string memory = "-";
    if (p.peak_memory_bytes) {
      memory = FormatMemory(*p.peak_memory_bytes);
      if (device != devices.end() && device->second.memory_bytes > 0) {
        const int64_t of = device->second.memory_bytes;
        memory += " of " + FormatMemory(of) + " (" +
                  Printf("%.0f", static_cast<double>(*p.peak_memory_bytes) /
                                     static_cast<double>(of) * 100) +
                  "%)";
      }
    }
    rows.push_back({std::to_string(rank), device == devices.end() ? "-" : device->second.label,
                    std::to_string(p.step), split ? Printf("%.3f", total) : "-", part(p.compute_s),
                    part(p.comm_s), part(p.bubble_s), memory});
  }
  return FormatTable(rows);
}

std::string MetricsTable(const std::vector<api::MetricPoint>& points) {
  std::vector<std::vector<std::string>> rows = {{"STEP", "ATTEMPT", "RANK", "TIME", "LOSS",
                                                 "SAMPLES/S", "COMPUTE S", "COMM S", "BUBBLE S",
                                                 "PEAK MEMORY"}};
  for (const api::MetricPoint& p : points) {
    rows.push_back({std::to_string(p.step), std::to_string(p.attempt), std::to_string(p.rank),
                    FormatUtc(p.ts_ms), Opt(p.loss, "%.4g"), Opt(p.samples_per_s, "%.1f"),
                    Opt(p.compute_s, "%.3f"), Opt(p.comm_s, "%.3f"), Opt(p.bubble_s, "%.3f"),
                    p.peak_memory_bytes ? FormatMemory(*p.peak_memory_bytes) : "-"});
  }
  return FormatTable(rows);
}

std::string MetricsCsv(const std::vector<api::MetricPoint>& points) {
  std::string out =
      "step,attempt,rank,ts_ms,loss,samples_per_s,compute_s,comm_s,bubble_s,peak_memory_bytes,"
      "predicted_peak_memory_bytes\n";
  auto real = [](const std::optional<double>& v) { return v ? Exact(*v) : ""; };
  auto integer = [](const std::optional<int64_t>& v) { return v ? std::to_string(*v) : ""; };
  for (const api::MetricPoint& p : points) {
    out += std::to_string(p.step) + "," + std::to_string(p.attempt) + "," + std::to_string(p.rank) +
           "," + std::to_string(p.ts_ms) + "," + real(p.loss) + "," + real(p.samples_per_s) + "," +
           real(p.compute_s) + "," + real(p.comm_s) + "," + real(p.bubble_s) + "," +
           integer(p.peak_memory_bytes) + "," + integer(p.predicted_peak_memory_bytes) + "\n";
  }
  return out;
}

std::string FormatMemory(int64_t bytes) {
  constexpr double kKiB = 1024.0;
  const double b = static_cast<double>(bytes);
  if (b < kKiB) return std::to_string(bytes) + " B";
  if (b < kKiB * kKiB) return Printf("%.1f KiB", b / kKiB);
  if (b < kKiB * kKiB * kKiB) return Printf("%.1f MiB", b / (kKiB * kKiB));
  return Printf("%.1f GiB", b / (kKiB * kKiB * kKiB));
}

}  // namespace tessera::cli
