// Worker environment: the node-local part of the worker env contract, built
// the same way by the agent's supervisor (agent/supervisor.h) and the Slurm
// task launcher (slurm/launcher.h).
//
// The controller sends the torchrun contract (RANK, WORLD_SIZE, LOCAL_RANK,
// LOCAL_WORLD_SIZE, GROUP_RANK, ..., MASTER_ADDR, MASTER_PORT) and Tessera's
// own variables (TESSERA_JOB_ID, TESSERA_ATTEMPT, TESSERA_CHECKPOINT_DIR,
// TESSERA_LOCAL_BATCH, ...) in WorkerLaunch.env. The agent adds, from the
// rank's device_indices, its siblings on this node and the node's devices:
//   CUDA_VISIBLE_DEVICES  as torchrun: the real GPUs of every rank of the same job
//                         and attempt on this node, by UUID (index when unknown), in
//                         LOCAL_RANK order, so rank LOCAL_RANK's GPU is
//                         cuda:LOCAL_RANK and `torch.cuda.set_device(LOCAL_RANK)`
//                         works; another job's GPUs stay hidden. Empty for CPU and
//                         emulated ranks, hiding every GPU
//   TESSERA_DEVICE        "cpu", or "cuda:<i>" for a real GPU: the rank's first GPU
//                         within CUDA_VISIBLE_DEVICES (cuda:LOCAL_RANK when every
//                         rank of the job on this node has one real GPU); "cpu"
//                         for emulated devices
//   TESSERA_DEVICE_SPEED  relative speed of the device (emulated: declared speed;
//                         real: 1); the slowest when a rank spans several
//   TESSERA_DEVICE_MEMORY emulated devices only: the declared memory in bytes (the
//                         smallest when a rank spans several); the worker fails
//                         like a GPU out of memory past it
//   CUDA_DEVICE_ORDER     PCI_BUS_ID, so CUDA and NVML number GPUs alike
//   OMP_NUM_THREADS       unless the job's env sets it: the rank's share of the
//                         node's cores, max(1, cores / LOCAL_WORLD_SIZE)
// The launcher (supervisor or Slurm launcher) lays the job's env over a base
// env (DefaultBaseEnv()), then these, then TESSERA_PLAN and TESSERA_PROGRESS_FILE
// (launch/rank_files.h) and TESSERA_JOB_ID / TESSERA_ATTEMPT / RANK from the
// WorkerKey.
// Thread safety: DeviceEnvFor and FindDevice are pure functions;
// DefaultBaseEnv reads the process environment (not to be called while
// another thread changes it).
#ifndef TESSERA_LAUNCH_WORKER_ENV_H_
#define TESSERA_LAUNCH_WORKER_ENV_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "api/agent_protocol.h"
#include "api/types.h"
#include "common/status.h"

namespace tessera::launch {

using EnvMap = std::map<std::string, std::string>;

// Device and thread variables for `launch` on a node with `devices` (found by
// api::Device::index, not position) and `host_cores` logical cores (0:
// unknown, taken as 1). `node_desired` is the node's complete desired set (the
// heartbeat answer, or the ranks Slurm runs on the node); the launches of the same
// job and attempt in it are `launch`'s siblings, whose real GPUs it also sees
// (`launch` itself need not be in it). An index `devices` lacks, or a rank
// mixing real GPUs with CPU/emulated devices, is kInvalidArgument naming
// "device_indices[i]" / "device_indices"; a sibling's unknown or non-GPU
// devices are skipped (that sibling is refused on its own).
Result<EnvMap> DeviceEnvFor(const api::WorkerLaunch& launch,
                            const std::vector<api::WorkerLaunch>& node_desired,
                            const std::vector<api::Device>& devices, int64_t host_cores);

// The device with this index in `devices`, or nullptr. The pointer is into
// `devices` and valid while it is unchanged.
const api::Device* FindDevice(const std::vector<api::Device>& devices, int64_t index);

// The whole number `launch.env[name]` holds ("LOCAL_RANK", "WORLD_SIZE"), or
// nullopt when it is unset or not a whole number.
std::optional<int64_t> EnvInt(const api::WorkerLaunch& launch, const std::string& name);

// The clean base every worker's environment starts from: PATH (a fixed system
// path), LANG=C.UTF-8, and HOME, USER, LOGNAME, TMPDIR, TZ, LD_LIBRARY_PATH
// copied from this process's environment when set.
EnvMap DefaultBaseEnv();

}  // namespace tessera::launch

#endif  // TESSERA_LAUNCH_WORKER_ENV_H_
