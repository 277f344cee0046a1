// DistEnv: the torchrun-compatible environment a worker rank is started with
// (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT)
// plus Tessera's own variables (TESSERA_*; daemon/controller/attempt_launch.h).
//
// Pure: the environment is read through a getter so tests can pass a table.
// Thread safety: values.
#ifndef TESSERA_WORKER_RUNTIME_DIST_ENV_H_
#define TESSERA_WORKER_RUNTIME_DIST_ENV_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "common/status.h"

namespace tessera::worker {

struct DistEnv {
  bool distributed = false;  // WORLD_SIZE present
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::string job_id;
  int attempt = 0;
  std::string plan_path;            // TESSERA_PLAN
  std::string checkpoint_dir;       // TESSERA_CHECKPOINT_DIR
  std::string progress_file;        // TESSERA_PROGRESS_FILE
  // TESSERA_REFORM_FILE: where the rank's agent writes its place in the
  // re-formed attempt after a node loss (worker/runtime/reform.h); empty: the
  // rank exits on a peer loss, as under torchrun.
  std::string reform_path;
  std::string device = "cpu";       // TESSERA_DEVICE
  double device_speed = 1.0;        // TESSERA_DEVICE_SPEED, (0, 1] slows compute down
  int64_t device_memory_bytes = 0;  // TESSERA_DEVICE_MEMORY: emulated device memory; 0: none
  std::string gloo_socket_ifname;   // GLOO_SOCKET_IFNAME (first of a comma list), as torchrun
  // TESSERA_COLLECTIVE_TIMEOUT_S: how long one collective may wait for its peers
  // before it fails (the survivors of a lost node exit), and how long a survivor
  // waits for its re-formed place; absent: 300 s.
  std::chrono::seconds collective_timeout{300};
};

using EnvGetter = std::function<std::optional<std::string>(const std::string& name)>;

inline constexpr int64_t kMaxCollectiveTimeoutSeconds = 86'400;

// Reads the variables; kInvalidArgument (field = variable name) for malformed
// numbers, RANK outside [0, WORLD_SIZE), a TESSERA_PLAN without WORLD_SIZE,
// a non-positive TESSERA_DEVICE_SPEED, a negative TESSERA_DEVICE_MEMORY or a
// TESSERA_COLLECTIVE_TIMEOUT_S outside 1..kMaxCollectiveTimeoutSeconds.
Result<DistEnv> ReadDistEnv(const EnvGetter& get);

// Getter over the process environment (std::getenv).
EnvGetter ProcessEnv();

}  // namespace tessera::worker

#endif  // TESSERA_WORKER_RUNTIME_DIST_ENV_H_
