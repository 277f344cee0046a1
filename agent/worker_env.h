// Worker environment: the node-local part of the worker env contract.
//
// The controller sends RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
// MASTER_ADDR, MASTER_PORT, TESSERA_JOB_ID, TESSERA_ATTEMPT and
// TESSERA_CHECKPOINT_DIR in WorkerLaunch.env. The agent adds, from the rank's
// device_indices and its inventory:
//   TESSERA_DEVICE        "cpu", or "cuda:0" for a real GPU (CUDA_VISIBLE_DEVICES
//                         narrows the rank to its devices, so its first one is
//                         cuda:0, the next cuda:1, ...); "cpu" for emulated devices
//   TESSERA_DEVICE_SPEED  relative speed of the device (emulated: declared speed;
//                         real: 1); the slowest when a rank spans several
//   TESSERA_DEVICE_MEMORY emulated devices only: the declared memory in bytes (the
//                         smallest when a rank spans several); the worker fails
//                         like a GPU out of memory past it
//   CUDA_VISIBLE_DEVICES  the rank's real GPUs by UUID (index when unknown);
//                         empty for CPU and emulated ranks, hiding every GPU
//   CUDA_DEVICE_ORDER     PCI_BUS_ID, so CUDA and NVML number GPUs alike
// The supervisor adds TESSERA_PLAN and TESSERA_PROGRESS_FILE (rank dir paths)
// and TESSERA_JOB_ID / TESSERA_ATTEMPT / RANK from the WorkerKey.
// Thread safety: pure function.
#ifndef TESSERA_AGENT_WORKER_ENV_H_
#define TESSERA_AGENT_WORKER_ENV_H_

#include <map>
#include <string>

#include "agent/inventory.h"
#include "api/agent_protocol.h"
#include "common/status.h"

namespace tessera::agent {

using EnvMap = std::map<std::string, std::string>;

// Device variables for `launch` on a node with `inventory`. An index the
// inventory lacks, or a rank mixing real GPUs with CPU/emulated devices, is
// kInvalidArgument naming "device_indices[i]".
Result<EnvMap> DeviceEnvFor(const api::WorkerLaunch& launch, const NodeInventory& inventory);

}  // namespace tessera::agent

#endif  // TESSERA_AGENT_WORKER_ENV_H_
