// SlurmConfig: the `slurm:` block of tesserad's YAML config file. Absent:
// tesserad runs without a Slurm pool.
//
//   slurm:
//     url: http://127.0.0.1:6820          # slurmrestd (started with -s openapi/v0.0.38)
//     user: tessera                       # the Slurm user jobs run as
//     token_file: /etc/tessera/slurm.jwt  # its JWT (`scontrol token username=tessera`)
//     partition: gpu                      # the nodes Tessera may use ("" : all)
//     launcher: /usr/bin/tessera-slurm-launch   # as the nodes see it; default: beside tesserad
//     rank_root: /shared/tessera/slurm    # attempt files and rank logs, on a folder every
//                                         # node sees; default: <checkpoint_root>/slurm
//     poll_interval_ms: 500
//     gpu_types:                          # per GRES type: what the planner needs
//       a100: {tflops: 19.5, memory: 80GiB}
//       t4: {tflops: 8.1, memory: 16GiB}
//       # testbed only: {tflops: 0.05, relative_speed: 0.5, memory: 1GiB, emulated: true}
//   tflops (fp32, per GPU) and memory are required: the planner sizes each GPU's
//   share by them (an agent measures its GPUs; Slurm nodes run no agent).
//
// Thread safety: plain value and functions.
#ifndef TESSERA_SLURM_SLURM_CONFIG_H_
#define TESSERA_SLURM_SLURM_CONFIG_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "common/status.h"
#include "slurm/slurm_nodes.h"

namespace tessera::slurm {

struct SlurmConfig {
  std::string url;
  std::string user;
  std::string token_file;
  std::string partition;
  std::string launcher;
  std::string rank_root;
  int64_t poll_interval_ms = 500;
  std::map<std::string, GpuType> gpu_types;
};

// The `slurm:` block of the YAML file at `path`, or nullopt when it has none.
// kInvalidArgument naming the field ("slurm.gpu_types.a100.memory") when it
// is malformed.
Result<std::optional<SlurmConfig>> LoadSlurmConfig(const std::string& path);
// The same from YAML text (tests).
Result<std::optional<SlurmConfig>> ParseSlurmConfig(const std::string& yaml);

}  // namespace tessera::slurm

#endif  // TESSERA_SLURM_SLURM_CONFIG_H_
