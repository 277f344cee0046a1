// CPU discovery: a node without GPUs offers its CPU as one device of type
// "cpu" (name from /proc/cpuinfo "model name", memory = MemTotal).
// Thread safety: pure functions reading files.
#ifndef TESSERA_AGENT_CPU_DISCOVERY_H_
#define TESSERA_AGENT_CPU_DISCOVERY_H_

#include <cstdint>
#include <filesystem>
#include <optional>

#include "api/types.h"
#include "common/status.h"

namespace tessera::agent {

// The CPU device (index 0). `proc_root` is "/proc" except in tests.
// Fails only when MemTotal cannot be read.
Result<api::Device> DiscoverCpuDevice(const std::filesystem::path& proc_root = "/proc");

// Cumulative CPU time of the whole machine from <proc_root>/stat, in ticks.
struct CpuTimes {
  uint64_t busy = 0;
  uint64_t total = 0;
};
std::optional<CpuTimes> ReadCpuTimes(const std::filesystem::path& proc_root = "/proc");

// MemTotal - MemAvailable, in bytes.
std::optional<int64_t> ReadMemoryUsed(const std::filesystem::path& proc_root = "/proc");

}  // namespace tessera::agent

#endif  // TESSERA_AGENT_CPU_DISCOVERY_H_
