// ClusterSnapshot: the plain picture of the cluster the planner plans on.
//
// Purpose: nodes, their devices (memory, measured throughput, memory bandwidth,
// busy or free, which measured layer times apply), the links between devices: a
// node's internal link (PCIe by default), optional device-pair overrides (NVLink),
// each node's network link and optional node-pair overrides; and which devices
// compute on a host's shared CPU cores (CPU and emulated devices). The daemon
// builds one from agent reports; tests build them by hand.
// Ownership: a plain value; the planner only reads it.
// Thread safety: a value; const methods are safe from any thread.
#ifndef TESSERA_SCHEDULER_CLUSTER_SNAPSHOT_H_
#define TESSERA_SCHEDULER_CLUSTER_SNAPSHOT_H_

#include <compare>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/status.h"

namespace tessera::scheduler {

// A device is identified by its node's name and its index on that node.
struct DeviceId {
  std::string node;
  int index = 0;

  // "node:index", e.g. "boxA:0".
  std::string ToString() const;
  friend auto operator<=>(const DeviceId&, const DeviceId&) = default;
  friend bool operator==(const DeviceId&, const DeviceId&) = default;
};

// A point-to-point link: time to send n bytes is latency_s + n / bandwidth_bytes_per_s.
struct Link {
  double bandwidth_bytes_per_s = 16e9;
  double latency_s = 10e-6;
};

struct Device {
  int index = 0;             // index on its node, unique within the node
  std::string type;          // device model, e.g. "A100-80GB"; keys measured layer times
  int64_t memory_bytes = 0;  // total device memory
  double tflops = 0;         // measured dense matmul throughput at fp32, TFLOPS
  double tflops_half = 0;    // at fp16/bf16; 0 means 2 x tflops
  double memory_bandwidth_bytes_per_s = 0;  // 0: memory-bound term ignored
  bool busy = false;                        // held by another job: never planned on
  // Measured layer times: when the profile has measured milliseconds for the type
  // `measured_as` (empty: `type`), this device's times are those divided by
  // `relative_speed`. An emulated GPU: "cpu" (the worker's profile is measured on
  // the CPU) and its emulated speed (<= 1: the worker can only slow down).
  std::string measured_as;
  double relative_speed = 1.0;  // > 0
  // Observed over predicted compute of the job's model on this device type
  // (scheduler/compute_correction.h): every compute time of the device is
  // multiplied by it. 1: the profile as measured.
  double compute_scale = 1.0;  // > 0
  // The collective library its rank would use: "nccl" (a CUDA GPU) or "gloo" (a CPU
  // or an emulated device). One job's ranks share one backend, so a plan never mixes
  // two (planner.h); empty: any (the planner treats it as compatible with all).
  std::string backend;
  // Why the device's throughput is unknown (the agent's benchmark failed, with
  // its reason); the planner excludes a device without throughput and says why.
  std::string unmeasured_reason;
};

struct Node {
  std::string name;
  std::vector<Device> devices;
  Link intra_node{16e9, 10e-6};  // between two devices of this node (PCIe default)
  Link network{1.25e9, 50e-6};   // this node's network interface (10 GbE default)
  // The machine the node runs on, when several nodes share one (a demo lab's
  // agents; empty: a machine of its own), and its logical cores (0: unknown).
  std::string host;
  int host_cores = 0;
  // CPU seconds a rank's process spends on one hop of a small collective (its
  // Gloo stack's thread wake-ups and socket calls; 0: not measured, e.g. NCCL on
  // a GPU). The ranks of one machine spend it on the machine's cores: a hop
  // takes at least (ranks on the machine) x this / host_cores (cost_model.h).
  double collective_cpu_per_hop_s = 0;
};

// Overrides the link between two devices of one node (e.g. an NVLink pair).
struct DeviceLink {
  DeviceId a;
  DeviceId b;
  Link link;
};

// Overrides the link between two nodes (default: the slower of the two network links).
struct NodeLink {
  std::string a;
  std::string b;
  Link link;
};

struct ClusterSnapshot {
  std::vector<Node> nodes;
  std::vector<DeviceLink> device_links;
  std::vector<NodeLink> node_links;
  // Layer profiles measured on real devices (the JSON `tessera-worker profile
  // --device cuda:K` prints), by Device::type then model name, one per type: a
  // caller merges the job's model's times into its profile under that type
  // (scheduler/model_profile.h AddMeasuredTimes) before planning.
  std::map<std::string, std::map<std::string, nlohmann::json>> device_profiles;

  // OK, or InvalidArgument naming the offending field (duplicate node names or
  // device indices, negative memory or throughput, links naming unknown devices).
  Status Validate() const;

  // Link between two distinct devices. REQUIRES: both exist in this snapshot.
  Link LinkBetween(const DeviceId& a, const DeviceId& b) const;

  // Number of devices (busy or free).
  int DeviceCount() const;
};

}  // namespace tessera::scheduler

#endif  // TESSERA_SCHEDULER_CLUSTER_SNAPSHOT_H_
