// NodeInventory: what one node offers the cluster, as the agent sees it.
//
// An inventory is the list of devices (api::Device, the shape the controller
// stores) plus the links between GPU pairs, which every heartbeat carries
// (api::DeviceLink) so the planner prefers NVLink neighbours.
//
// Sources, combined by LoadInventory():
//   - NVML discovery (agent/nvml_discovery.h): real NVIDIA GPUs, when
//     libnvidia-ml.so.1 loads; absent library means "no GPUs", not an error.
//   - CPU discovery (agent/cpu_discovery.h): without a GPU the node offers its
//     CPU as one device of type "cpu".
//   - An inventory file (agent/inventory_file.h) declaring EMULATED devices;
//     they replace discovery unless the file says `combine: true`. It may
//     also declare the node's network link.
//   - Device benchmarks (agent/device_benchmark.h), cached in the state dir
//     (agent/benchmark_cache.h) so restarts reuse them.
//   - Builtin models' layer profiles measured on each real GPU type
//     (api::Device::profiles; InventoryOptions::profile), cached likewise; a
//     profile that fails is logged and left out (the planner then estimates
//     that type's times from its throughput).
//
// Thread safety: plain values; InventoryProvider implementations document
// their own.
#ifndef TESSERA_AGENT_INVENTORY_H_
#define TESSERA_AGENT_INVENTORY_H_

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/device_benchmark.h"
#include "agent/gloo_link_benchmark.h"
#include "agent/inventory_file.h"
#include "api/types.h"
#include "common/status.h"

namespace tessera::agent {

// How two GPUs of one node reach each other.
enum class LinkKind {
  kNvLink,  // at least one active NVLink between the pair
  kPcie,    // through PCIe switches / host bridge on one CPU socket
  kSystem,  // across CPU sockets (SMP interconnect)
  kUnknown,
};
std::string_view LinkKindName(LinkKind kind);

struct DeviceLink {
  int64_t a = 0;  // device indices on this node, a < b
  int64_t b = 0;
  LinkKind kind = LinkKind::kUnknown;
  int64_t nvlink_count = 0;  // active NVLinks between a and b
  // NVML topology level of the common ancestor: "internal", "single",
  // "multiple", "hostbridge", "node", "system" (nvidia-smi topo: PIX, PXB,
  // PHB, NODE, SYS), or empty when unknown.
  std::string topology;
  friend bool operator==(const DeviceLink&, const DeviceLink&) = default;
};

struct NodeInventory {
  std::vector<api::Device> devices;  // index == position in this vector
  std::vector<DeviceLink> links;
  // The node's link to the others as the inventory file declares it; absent:
  // unknown (the planner assumes its default).
  std::optional<NetworkSpec> network;
  // This machine's loopback Gloo link (agent/gloo_link_benchmark.h), measured
  // when a device's ranks talk Gloo (an emulated or a CPU device) and the
  // measurement is on; absent otherwise or when it failed.
  std::optional<LinkFigures> gloo_link;

  // The device with this index, or nullptr.
  const api::Device* Find(int64_t index) const;
};

api::Json ToJson(const DeviceLink& link);
// The protocol's form of a discovered link (kind "nvlink", "pcie", "system", "unknown").
api::DeviceLink ToProtocol(const DeviceLink& link);

// Produces the node's inventory. The agent calls Load() at start and on
// SIGHUP, Refresh() before every heartbeat (utilization, memory used).
// Thread safety: called from the agent loop thread only.
class InventoryProvider {
 public:
  virtual ~InventoryProvider() = default;
  // A full (re)load: discovery, inventory file, benchmarks (cached).
  virtual Result<NodeInventory> Load() = 0;
  // Updates live figures (utilization, memory used) in place.
  virtual void Refresh(NodeInventory* inventory) = 0;
};

struct InventoryOptions {
  std::filesystem::path inventory_file;  // empty: none
  std::filesystem::path state_dir;       // benchmark cache lives here; empty: no cache
  std::string nvml_library = "libnvidia-ml.so.1";
  std::filesystem::path proc_root = "/proc";
  // Measures a device when the cache has no figures for it; empty: no
  // measurement, figures stay 0 (--no-benchmark). main() passes
  // RunDeviceBenchmark.
  DeviceBenchmarkFn benchmark;
  // Measures a builtin model's layer profile on a real GPU ("cuda:K"): the JSON
  // text `tessera-worker profile` prints (main() passes RunProfileChild). Unset:
  // devices carry no profiles (--no-profile), and the planner estimates GPU
  // times from their throughput. Each model of `profile_models` is measured once
  // per GPU type of the node, and cached with the benchmark under
  // `profile_version` (the worker's identity: another worker measures again).
  std::function<Result<std::string>(const std::string& device, const std::string& model)> profile;
  std::vector<std::string> profile_models;
  std::string profile_version;
  // Measures the loopback Gloo link (main() passes RunGlooLinkChild); unset: not
  // measured (--no-benchmark). Run at every Load of a node with a Gloo device,
  // never cached: it is the host's state, not a device's.
  std::function<Result<LinkFigures>()> gloo_link;
  bool rebenchmark = false;    // ignore the cache and measure again
  bool force_combine = false;  // add file devices to discovered ones even without `combine: true`
  // Cores emulated devices may use (CheckEmulationCapacity); 0: this machine's.
  double host_cores = 0;
};

class NvmlLibrary;

// The real provider: NVML / CPU discovery, inventory file, benchmarks.
// A bad inventory file makes Load() fail with the offending field named.
class SystemInventoryProvider final : public InventoryProvider {
 public:
  explicit SystemInventoryProvider(InventoryOptions options);
  ~SystemInventoryProvider() override;
  Result<NodeInventory> Load() override;
  void Refresh(NodeInventory* inventory) override;

 private:
  InventoryOptions options_;
  std::unique_ptr<NvmlLibrary> nvml_;  // opened on the first GPU refresh
  bool nvml_tried_ = false;
  // CPU utilization is the busy share of /proc/stat between two Refresh calls.
  uint64_t last_cpu_busy_ = 0;
  uint64_t last_cpu_total_ = 0;
};

}  // namespace tessera::agent

#endif  // TESSERA_AGENT_INVENTORY_H_
