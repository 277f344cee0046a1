// SlurmAttempt: one attempt of a Tessera job as one Slurm job.
//
// The pool writes the attempt — every rank's WorkerLaunch (argv, the torchrun
// environment and rank plan tesserad built), the hetjob mapping and the
// devices of its nodes — to <rank_root>/jobs/<job>/<attempt>/attempt.json on
// the folder every node sees, then submits a batch job named
// "tessera-<job>-<attempt>" whose script runs one heterogeneous step:
//   srun --het-group=0 -n N0 --ntasks-per-node=K0 LAUNCHER attempt.json : --het-group=1 ...
// (an attempt of one component is an ordinary job: no --het-group)
// Each task runs tessera-slurm-launch (slurm/launcher.h), which finds its rank
// and runs the rank's command. Per-rank files (progress, log, pid, exit) are
// launch::RankPathsFor(rank_root, key), the layout an agent's ranks use too,
// so the pool reads them with the same readers (launch/rank_files.h).
//
// Thread safety: pure functions and plain values.
#ifndef TESSERA_SLURM_SLURM_ATTEMPT_H_
#define TESSERA_SLURM_SLURM_ATTEMPT_H_

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "api/agent_protocol.h"
#include "api/types.h"
#include "common/status.h"
#include "slurm/hetjob_mapping.h"
#include "slurm/slurm_client.h"

namespace tessera::slurm {

struct SlurmAttempt {
  api::JobId job_id = 0;
  int64_t attempt = 0;
  HetJobMapping mapping;
  std::vector<api::WorkerLaunch> launches;  // index == rank
  std::map<std::string, api::Node> nodes;   // the attempt's nodes: devices, cores
  std::string rank_root;                    // per-rank folders live below it
};

api::Json ToJson(const SlurmAttempt& attempt);
Result<SlurmAttempt> SlurmAttemptFromJson(const api::Json& j);

// Builds the attempt from its launches (one per rank, in any order) and the
// nodes they name. kInvalidArgument when the ranks do not map (see MapRanks).
Result<SlurmAttempt> AttemptOf(std::vector<api::WorkerLaunch> launches,
                               const std::map<int64_t, std::string>& rank_nodes,
                               const std::map<std::string, api::Node>& nodes,
                               const std::string& rank_root);

std::string JobName(api::JobId job, int64_t attempt);
// (job, attempt) of a name JobName made; nullopt for other jobs' names.
std::optional<std::pair<api::JobId, int64_t>> ParseJobName(const std::string& name);

// <rank_root>/jobs/<job>/<attempt>: attempt.json and the rank folders.
std::filesystem::path AttemptDir(const std::string& rank_root, api::JobId job, int64_t attempt);

// The batch job: one component per mapping component, the script running
// `launcher attempt_file` in every task of one heterogeneous step; Slurm's
// own output goes to slurm-<id>.out beside the attempt file.
HetJobRequest BuildHetJobRequest(const SlurmAttempt& attempt, const std::string& attempt_file,
                                 const std::string& launcher, const std::string& partition);

}  // namespace tessera::slurm

#endif  // TESSERA_SLURM_SLURM_ATTEMPT_H_
