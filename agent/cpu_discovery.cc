#include "agent/cpu_discovery.h"

#include <sstream>
#include <string>

#include "common/file_system.h"

namespace tessera::agent {
namespace {

// The whole file ("" when it cannot be read).
std::string ReadText(const std::filesystem::path& path) {
  return FileSystem::Default()->ReadFile(path).value_or(std::string());
}

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t");
  size_t e = s.find_last_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  return s.substr(b, e - b + 1);
}

// Value of "Key:  1234 kB" in /proc/meminfo, in bytes.
std::optional<int64_t> MeminfoBytes(const std::filesystem::path& proc_root, const char* key) {
  std::istringstream in(ReadText(proc_root / "meminfo"));
  std::string line;
  const std::string prefix = std::string(key) + ":";
  while (std::getline(in, line)) {
    if (line.rfind(prefix, 0) != 0) continue;
    std::istringstream fields(line.substr(prefix.size()));
    int64_t kb = 0;
    if (!(fields >> kb)) return std::nullopt;
    return kb * 1024;
  }
  return std::nullopt;
}

}  // namespace

Result<api::Device> DiscoverCpuDevice(const std::filesystem::path& proc_root) {
  api::Device d;
  d.index = 0;
  d.type = "cpu";
  d.name = "cpu";
  {
    std::istringstream in(ReadText(proc_root / "cpuinfo"));
    std::string line;
    while (std::getline(in, line)) {
      auto colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string key = Trim(line.substr(0, colon));
      if (key == "model name" && d.name == "cpu") {
        std::string value = Trim(line.substr(colon + 1));
        if (!value.empty()) d.name = value;
      }
    }
  }
  auto total = MeminfoBytes(proc_root, "MemTotal");
  if (!total) return Internal("cannot read MemTotal from " + (proc_root / "meminfo").string());
  d.memory_bytes = *total;
  if (auto used = ReadMemoryUsed(proc_root)) d.memory_used_bytes = *used;
  std::istringstream machine_id(ReadText("/etc/machine-id"));
  std::string id;
  if (machine_id >> id) {
    d.uuid = "cpu-" + id;
  } else {
    d.uuid = "cpu-0";
  }
  return d;
}

std::optional<CpuTimes> ReadCpuTimes(const std::filesystem::path& proc_root) {
  std::istringstream in(ReadText(proc_root / "stat"));
  std::string label;
  if (!(in >> label) || label != "cpu") return std::nullopt;
  // user nice system idle iowait irq softirq steal
  uint64_t v[8] = {};
  for (auto& x : v) {
    if (!(in >> x)) return std::nullopt;
  }
  CpuTimes t;
  for (uint64_t x : v) t.total += x;
  t.busy = t.total - v[3] - v[4];
  return t;
}

std::optional<int64_t> ReadMemoryUsed(const std::filesystem::path& proc_root) {
  auto total = MeminfoBytes(proc_root, "MemTotal");
  auto available = MeminfoBytes(proc_root, "MemAvailable");
  if (!total || !available) return std::nullopt;
  return *total - *available;
}

}  // namespace tessera::agent
