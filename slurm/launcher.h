// The Slurm task launcher (tessera-slurm-launch ATTEMPT_FILE): what every
// task of an attempt's heterogeneous step runs.
//
// PrepareTask finds the task's rank from Slurm's variables — SLURMD_NODENAME
// and SLURM_LOCALID (see HetJobMapping::RankAt); SLURM_HET_SIZE, when set,
// must equal the attempt's components — and builds the rank's process the
// way tessera-agent's supervisor does (both use launch/worker_env.h and
// launch/rank_files.h): the base environment, the rank's own (the torchrun
// contract and TESSERA_* variables tesserad built, MASTER_ADDR being rank 0's
// Slurm node), the device variables of launch::DeviceEnvFor for the node's
// devices, TESSERA_PLAN and TESSERA_PROGRESS_FILE in the rank's folder, and
// every SLURM_* variable passed through. On real GPUs Slurm's
// CUDA_VISIBLE_DEVICES (the step's GPUs on this node) is kept and the rank
// uses cuda:LOCAL_RANK, as under torchrun. So builtin and cmd: entrypoints
// run unchanged.
//
// RunTask runs it: writes the plan, starts the command (through
// options.launcher) in its own process group with stdout and stderr
// appended to the rank's worker.log (a command that cannot be executed says
// so there and exits 127, the rank's code), records its
// pid in worker.pid (the pool reports the rank running from then on),
// forwards SIGTERM, SIGINT and SIGHUP to it (Slurm's cancel), and when it
// ends writes exit.json ({"exit_code", "ended_ms"}) and returns its code
// (128 + signal when killed). The rank files are written atomically through
// options.fs (common/atomic_file.h): a plan or an exit.json that cannot be
// written is returned; a worker.pid that cannot be written is said in
// worker.log (the rank runs; the pool sees it once it ends).
//
// Thread safety: PrepareTask is pure; RunTask is for the launcher's one thread.
#ifndef TESSERA_SLURM_LAUNCHER_H_
#define TESSERA_SLURM_LAUNCHER_H_

#include <map>
#include <string>

#include "api/agent_protocol.h"
#include "common/clock.h"
#include "common/file_system.h"
#include "common/process_launcher.h"
#include "common/status.h"
#include "launch/rank_files.h"
#include "launch/worker_env.h"
#include "slurm/slurm_attempt.h"

namespace tessera::slurm {

struct TaskLaunch {
  int64_t rank = 0;
  api::WorkerLaunch launch;
  launch::EnvMap env;  // the complete environment of the rank's process
  launch::RankPaths paths;
};

// `slurm_env`: the task's environment (SLURMD_NODENAME, SLURM_LOCALID, ...);
// `base_env`: what every worker gets (launch::DefaultBaseEnv()).
// kInvalidArgument naming the variable when Slurm's variables do not match
// the attempt.
Result<TaskLaunch> PrepareTask(const SlurmAttempt& attempt,
                               const std::map<std::string, std::string>& slurm_env,
                               const launch::EnvMap& base_env);

struct RunTaskOptions {
  FileSystem* fs = FileSystem::Default();                  // the rank files; not owned
  ProcessLauncher* launcher = ProcessLauncher::Default();  // starts the rank; not owned
  const Clock* clock = SystemClock::Default();             // ended_ms of exit.json; not owned
};

// Runs the task to its end; returns its exit code. kInternal when it cannot
// start, or when its plan or exit.json cannot be written.
Result<int> RunTask(const TaskLaunch& task, const RunTaskOptions& options = {});

}  // namespace tessera::slurm

#endif  // TESSERA_SLURM_LAUNCHER_H_
