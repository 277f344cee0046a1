// Slurm nodes as Tessera nodes: a node of the configured partition becomes a
// tesserad node (source "slurm") whose devices are its typed GPU GRES, one
// device per GPU, with the speed and memory configured for its GPU type; its
// health follows Slurm's node state.
//
// Thread safety: pure functions.
#ifndef TESSERA_SLURM_SLURM_NODES_H_
#define TESSERA_SLURM_SLURM_NODES_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "api/agent_protocol.h"
#include "common/status.h"
#include "slurm/slurm_client.h"

namespace tessera::slurm {

// What the admin declares for one GPU type (the GRES type, e.g. "a100").
struct GpuType {
  double tflops = 0;            // dense fp32 matmul throughput of one GPU
  double relative_speed = 1.0;  // emulated GPUs: the declared speed (<= 1 per host core)
  int64_t memory_bytes = 0;     // per GPU
  // Testbed only: the GPUs are emulated (the rank computes on the CPU at the
  // declared speed and fails past the declared memory), as an agent's
  // emulated devices. Real clusters leave it false.
  bool emulated = false;
};

struct GpuGres {
  std::string type;  // "" when the GRES is untyped ("gpu:2")
  int64_t count = 0;
  friend bool operator==(const GpuGres&, const GpuGres&) = default;
};

// The GPUs of a node's GRES string, e.g. "gpu:a100:2(S:0-1),gpu:t4:1,mps:100"
// -> [{a100, 2}, {t4, 1}]; other GRES are skipped. kInvalidArgument for a
// malformed count.
Result<std::vector<GpuGres>> ParseGpuGres(const std::string& gres);

// Whether Slurm would start work on the node: state idle, mixed, allocated or
// completing, and no DRAIN, NOT_RESPONDING, FAIL, MAINTENANCE or power-down flag.
bool SlurmNodeUp(const SlurmNode& node);

// Whether the node belongs to `partition` ("" matches every node).
bool InPartition(const SlurmNode& node, const std::string& partition);

// The heartbeat the pool sends on the node's behalf (no workers yet): its
// address, cores and one device per GPU, numbered in GRES order, named by
// type, with the configured throughput (or emulated speed) and memory. GPUs of a type missing from
// `types` are left out (listed in *unknown_types when given).
api::HeartbeatRequest HeartbeatFor(const SlurmNode& node, const std::vector<GpuGres>& gpus,
                                   const std::map<std::string, GpuType>& types,
                                   std::vector<std::string>* unknown_types = nullptr);

}  // namespace tessera::slurm

#endif  // TESSERA_SLURM_SLURM_NODES_H_
