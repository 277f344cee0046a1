#include "slurm/slurm_nodes.h"

#include <algorithm>
#include <charconv>
#include <sstream>

namespace tessera::slurm {

Result<std::vector<GpuGres>> ParseGpuGres(const std::string& gres) {
  std::vector<GpuGres> out;
  // Entries are separated by commas outside parentheses ("(S:0-1)" may hold some).
  std::vector<std::string> entries;
  std::string cur;
  int depth = 0;
  for (char c : gres) {
    if (c == '(') ++depth;
    if (c == ')') depth = std::max(0, depth - 1);
    if (c == ',' && depth == 0) {
      entries.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) entries.push_back(cur);
  for (std::string e : entries) {
    if (auto p = e.find('('); p != std::string::npos) e = e.substr(0, p);
    std::vector<std::string> parts;
    std::stringstream s(e);
    std::string part;
    while (std::getline(s, part, ':')) parts.push_back(part);
    if (parts.empty() || parts[0] != "gpu") continue;
    GpuGres g;
    std::string count = "1";
    if (parts.size() == 2) {
      count = parts[1];
    } else if (parts.size() >= 3) {
      g.type = parts[1];
      count = parts[2];
    }
    auto [end, ec] = std::from_chars(count.data(), count.data() + count.size(), g.count);
    if (ec != std::errc() || end != count.data() + count.size() || g.count < 0) {
      return InvalidArgument("bad GPU count in GRES \"" + e + "\"", "gres");
    }
    if (g.count > 0) out.push_back(g);
  }
  return out;
}

bool SlurmNodeUp(const SlurmNode& node) {
  static const char* kUp[] = {"idle", "mixed", "allocated", "completing"};
  bool up = false;
  for (const char* s : kUp) up = up || node.state == s;
  if (!up) return false;
  static const char* kBadFlags[] = {"DRAIN",         "NOT_RESPONDING", "FAIL",
                                    "MAINTENANCE",   "POWERED_DOWN",   "POWER_DOWN",
                                    "POWERING_DOWN", "REBOOT_ISSUED"};
  for (const std::string& f : node.state_flags) {
    for (const char* bad : kBadFlags) {
      if (f == bad) return false;
    }
  }
  return true;
}

bool InPartition(const SlurmNode& node, const std::string& partition) {
  if (partition.empty()) return true;
  return std::find(node.partitions.begin(), node.partitions.end(), partition) !=
         node.partitions.end();
}

api::HeartbeatRequest HeartbeatFor(const SlurmNode& node, const std::vector<GpuGres>& gpus,
                                   const std::map<std::string, GpuType>& types,
                                   std::vector<std::string>* unknown_types) {
  api::HeartbeatRequest hb;
  hb.node = node.name;
  hb.address = node.address;
  hb.cpu_cores = node.cpus;
  int64_t index = 0;
  for (const GpuGres& g : gpus) {
    auto t = types.find(g.type);
    if (t == types.end()) {
      if (unknown_types != nullptr) unknown_types->push_back(g.type);
      continue;
    }
    for (int64_t i = 0; i < g.count; ++i) {
      api::Device d;
      d.node = node.name;
      d.index = index++;
      d.name = g.type.empty() ? std::string("gpu") : g.type;
      d.type = "cuda";
      d.memory_bytes = t->second.memory_bytes;
      d.measured_tflops = t->second.tflops;
      d.relative_speed = t->second.relative_speed;
      d.emulated = t->second.emulated;
      hb.devices.push_back(std::move(d));
    }
  }
  return hb;
}

}  // namespace tessera::slurm
