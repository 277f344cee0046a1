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
//       tflops_half: 312    # optional declared fp16/bf16 matmul TFLOPS, > 0
//   network:                # optional: this node's link to the other nodes
//     bandwidth: 100Mbit    # required: bits/s with a bit unit (bit, Kbit, Mbit,
//                           # Gbit, Tbit; Kibit.. binary), or bytes/s with a
//                           # byte unit (B, KB, MB, GB, TB decimal; K, KiB, M,
//                           # MiB, .. binary); a plain number is bytes/s; an
//                           # optional "/s" may follow; > 0
//     latency: 2ms          # required: one-way, s / ms / us / ns (a plain
//                           # number is seconds), 0 <= x <= 10 s
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
  std::optional<double> tflops;       // declared; else measured CPU x relative_speed
  std::optional<double> tflops_half;  // declared; else the planner's 2 x tflops
  friend bool operator==(const EmulatedDeviceSpec&, const EmulatedDeviceSpec&) = default;
};

// The link between this node and the others, as the operator declares it
// (an emulated cluster's nodes cost what their real links would).
struct NetworkSpec {
  double bandwidth_bytes_per_s = 0;  // > 0
  double latency_s = 0;              // one way, >= 0
  friend bool operator==(const NetworkSpec&, const NetworkSpec&) = default;
};

struct InventoryFile {
  bool combine = false;  // false: declared devices replace discovery
  std::vector<EmulatedDeviceSpec> devices;
  std::optional<NetworkSpec> network;  // absent: the node's link is unknown
};

// Parses the text of an inventory file.
Result<InventoryFile> ParseInventoryFile(std::string_view text);
// Reads and parses `path`; errors name the file in the message.
Result<InventoryFile> LoadInventoryFile(const std::filesystem::path& path);

// Emulated devices compute on this host's CPU: a device of relative speed s
// keeps s of one core busy while it computes (worker/runtime/emulated_device.h),
// so the declared speeds together may not exceed the host's cores, or the
// devices would wait for cores and be slower than declared. kFailedPrecondition
// (field "devices") naming the sum and the cores when they do; host_cores <= 0
// skips the check. Agents sharing one host each see only their own file;
// tesserad warns about the host's total (daemon/controller/planning.h).
Status CheckEmulationCapacity(const InventoryFile& file, double host_cores);

}  // namespace tessera::agent

#endif  // TESSERA_AGENT_INVENTORY_FILE_H_
