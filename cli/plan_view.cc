#include "cli/plan_view.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "cli/output_format.h"
#include "cli/training_view.h"

namespace tessera::cli {

using api::Json;

namespace {

const Json& Array(const Json& j, const char* key) {
  static const Json kEmpty = Json::array();
  return j.is_object() && j.contains(key) && j[key].is_array() ? j[key] : kEmpty;
}

std::string Plural(int64_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

}  // namespace

std::string FormatNumber(const Json& j, const char* key, const char* fmt) {
  if (!j.is_object()) return "-";
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return "-";
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, it->get<double>());
  return buf;
}

std::string PlanDevices(const Json& plan) {
  std::vector<std::string> ids;
  for (const Json& r : Array(plan, "replicas")) {
    for (const Json& s : Array(r, "stages")) {
      for (const Json& d : Array(s, "devices")) {
        if (d.is_string()) ids.push_back(d.get<std::string>());
      }
    }
  }
  constexpr size_t kShown = 6;
  std::string out;
  for (size_t i = 0; i < ids.size() && i < kShown; ++i) out += (i ? "," : "") + ids[i];
  if (ids.size() > kShown) out += ",... (" + std::to_string(ids.size()) + ")";
  return out.empty() ? "-" : out;
}

void PrintPlanDetail(std::ostream& out, const Json& plan) {
  const Json& replicas = Array(plan, "replicas");
  size_t most_stages = 0;
  for (const Json& r : replicas) most_stages = std::max(most_stages, Array(r, "stages").size());
  const Json predicted = plan.is_object() ? plan.value("predicted", Json::object()) : Json();
  out << Str(plan, "layout") << ": "
      << Plural(static_cast<int64_t>(replicas.size()), "replica", "replicas") << " x "
      << Plural(static_cast<int64_t>(most_stages), "stage", "stages") << ", "
      << Plural(Int(plan, "micro_batches"), "micro-batch", "micro-batches") << " ("
      << Str(plan, "schedule") << "); predicted " << FormatNumber(predicted, "step_s", "%.3g")
      << " s/step, " << FormatNumber(predicted, "samples_per_s", "%.1f") << " samples/s\n";
  if (!Str(plan, "why").empty()) out << "  " << Str(plan, "why") << "\n";
  std::vector<std::vector<std::string>> rows = {
      {"REPLICA", "STAGE", "DEVICE", "LAYERS", "BATCH", "STAGE S", "PEAK MEM"}};
  for (size_t r = 0; r < replicas.size(); ++r) {
    const Json& stages = Array(replicas[r], "stages");
    for (size_t s = 0; s < stages.size(); ++s) {
      const Json& layers = Array(stages[s], "layers");
      const std::string range = layers.size() == 2 && layers[0].is_number() && layers[1].is_number()
                                    ? std::to_string(layers[0].get<int64_t>()) + "-" +
                                          std::to_string(layers[1].get<int64_t>() - 1)
                                    : "-";
      const Json& devices = Array(stages[s], "devices");
      const bool has_memory = stages[s].is_object() && stages[s].contains("peak_mem_bytes") &&
                              stages[s]["peak_mem_bytes"].is_number();
      rows.push_back(
          {std::to_string(r), std::to_string(s),
           devices.empty() || !devices[0].is_string() ? "-" : devices[0].get<std::string>(), range,
           Str(replicas[r], "batch"), FormatNumber(stages[s], "time_s", "%.3g"),
           has_memory ? FormatMemory(Int(stages[s], "peak_mem_bytes")) : "-"});
    }
  }
  if (rows.size() > 1) PrintTable(out, rows);
}

}  // namespace tessera::cli
