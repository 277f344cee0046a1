// SlurmClient: what Tessera needs from a Slurm cluster, as an interface, so
// the Slurm pool is tested against a fault-injecting fake
// (slurm/fake_slurm_client.h) and runs against slurmrestd
// (slurm/slurm_rest_client.h).
//
// - ListNodes: every node with its state, partitions and GRES string.
// - SubmitHetJob: one batch job with one component per group of identical
//   ranks (a single component is an ordinary job); returns the leader's id.
// - GetJob / ListJobs: every component's state (a heterogeneous job is one
//   record per component, sharing het_job_id).
// - CancelJob: cancels the job (every component of a heterogeneous one).
//
// Errors: a transport failure is kUnavailable; Slurm refusing a request is
// kFailedPrecondition (or kNotFound for an unknown job) with Slurm's message.
// Thread safety: implementations say.
#ifndef TESSERA_SLURM_SLURM_CLIENT_H_
#define TESSERA_SLURM_SLURM_CLIENT_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"

namespace tessera::slurm {

struct SlurmNode {
  std::string name;
  std::string address;                   // NodeAddr (what peers connect to)
  std::string state;                     // lower case: "idle", "mixed", "allocated", "down", ...
  std::vector<std::string> state_flags;  // upper case: "DRAIN", "NOT_RESPONDING", ...
  std::vector<std::string> partitions;
  std::string gres;  // e.g. "gpu:a100:2(S:0-1),gpu:t4:1"
  int64_t cpus = 0;
  std::string reason;  // why it is down or drained
};

// One component of a heterogeneous job (sbatch options, by slurmrestd's names).
struct JobComponent {
  std::string partition;
  std::vector<std::string> nodelist;  // the nodes it must run on
  int64_t tasks_per_node = 1;
  std::string gres;  // per node, e.g. "gpu:a100:2"; empty: no GRES
  std::map<std::string, std::string> environment;
};

struct HetJobRequest {
  std::string name;                      // job name (every component gets it)
  std::string script;                    // the batch script, "#!/bin/sh\n..."
  std::string working_dir;               // current_working_directory
  std::string standard_output;           // path; %j is the job id
  std::vector<JobComponent> components;  // at least one
};

struct SlurmJob {
  int64_t job_id = 0;
  int64_t het_job_id = 0;      // 0 when not heterogeneous
  int64_t het_job_offset = 0;  // component index
  std::string name;
  std::string state;  // upper case: "PENDING", "RUNNING", "COMPLETED", "NODE_FAIL", ...
  int64_t exit_code = 0;
  std::string nodes;
  std::string state_reason;
};

// Whether a job in `state` will not run any more.
bool IsTerminalJobState(const std::string& state);

class SlurmClient {
 public:
  virtual ~SlurmClient() = default;
  virtual Result<std::vector<SlurmNode>> ListNodes() = 0;
  virtual Result<int64_t> SubmitHetJob(const HetJobRequest& request) = 0;
  // Every component of the job (its het_job_id's components).
  virtual Result<std::vector<SlurmJob>> GetJob(int64_t job_id) = 0;
  virtual Result<std::vector<SlurmJob>> ListJobs() = 0;
  virtual Status CancelJob(int64_t job_id) = 0;
};

}  // namespace tessera::slurm

#endif  // TESSERA_SLURM_SLURM_CLIENT_H_
