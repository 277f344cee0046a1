// Inventory file: devices an operator declares by hand, mostly EMULATED
// devices (GPUs this machine lacks, simulated on the CPU at a declared
// relative speed) so a CPU-only lab can plan and run like a GPU cluster.
//
// Format (YAML; JSON is accepted too since it is a subset), see
// agent/README.md:
//
//   combine: false          # optional; true: add to discovered devices
//   devices:                # required, at least one entry
//     - name: "A100-80GB (emulated)"   # required string
//       memory: 80GiB       # required: bytes (integer) or <n>[KMGT][i]B
//       relative_speed: 1.0 # optional, default 1.0, 0 < x <= 1000
//       tflops: 19.5        # optional declared matmul TFLOPS, > 0
//
// Unknown keys and bad values are errors whose Status::field() is the path,
// e.g. "devices[1].memory".
// Thread safety: pure functions.
#ifndef TESSERA_AGENT_INVENTORY_FILE_H_
#define TESSERA_AGENT_INVENTORY_FILE_H_

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace tessera::agent {

struct EmulatedDeviceSpec {
  std::string name;
  int64_t memory_bytes = 0;
  double relative_speed = 1.0;
  std::optional<double> tflops;  // declared; else measured CPU x relative_speed
  friend bool operator==(const EmulatedDeviceSpec&, const EmulatedDeviceSpec&) = default;
};

struct InventoryFile {
  bool combine = false;  // false: declared devices replace discovery
  std::vector<EmulatedDeviceSpec> devices;
};

// Parses the text of an inventory file.
Result<InventoryFile> ParseInventoryFile(std::string_view text);
// Reads and parses `path`; errors name the file in the message.
Result<InventoryFile> LoadInventoryFile(const std::filesystem::path& path);

// "80GiB", "16G", "512MiB", "1024" -> bytes. Decimal (KB, MB, GB, TB) and
// binary (K, M, G, T, KiB, MiB, GiB, TiB) units; K/M/G/T alone are binary.
std::optional<int64_t> ParseByteSize(std::string_view text);

}  // namespace tessera::agent

#endif  // TESSERA_AGENT_INVENTORY_FILE_H_
