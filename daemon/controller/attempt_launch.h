// AttemptLaunch: every rank of one attempt of a job, ready to hand to agents.
//
// BuildAttemptLaunch turns a chosen scheduler Plan into ranks: ranks are
// numbered replica by replica, stage by stage (so rank 0 is the first stage
// of the first replica and hosts the c10d rendezvous), each with the job's
// own env, then (overriding it) the environment torchrun gives a rank:
//   RANK, WORLD_SIZE, ROLE_RANK (= RANK), ROLE_WORLD_SIZE (= WORLD_SIZE),
//   ROLE_NAME ("default"), LOCAL_RANK, LOCAL_WORLD_SIZE (ranks on its node),
//   GROUP_RANK (its node's index among the attempt's nodes, in the order of
//   their first rank), GROUP_WORLD_SIZE (nodes), MASTER_ADDR, MASTER_PORT,
//   TORCHELASTIC_RESTART_COUNT (attempt - 1), TORCHELASTIC_MAX_RESTARTS
//   (max_attempts - 1), TORCHELASTIC_RUN_ID ("tessera-job-<id>"),
//   TORCH_NCCL_ASYNC_ERROR_HANDLING=1 and NCCL_ASYNC_ERROR_HANDLING=1;
//   TORCHELASTIC_USE_AGENT_STORE is never set (rank 0 hosts the store);
//   MASTER_PORT is unique among live attempts at the master's address
//   (PickMasterPort);
// and Tessera's own:
//   TESSERA_JOB_ID, TESSERA_ATTEMPT, TESSERA_CHECKPOINT_DIR,
//   TESSERA_COLLECTIVE_TIMEOUT_S  LaunchOptions::collective_timeout_s: how long a
//                                 collective may wait, so the survivors of a lost
//                                 node exit instead of hanging
//   TESSERA_LOCAL_BATCH           the samples of the rank's replica per step
//   TESSERA_GLOBAL_BATCH          the samples of all replicas per step
//   TESSERA_SAMPLE_OFFSET         the first sample of the rank's replica within
//                                 each global batch (replicas in rank order; the
//                                 stages of one pipeline replica share it)
//   TESSERA_INFER_DATASET,        an infer job's dataset and output, as the spec
//   TESSERA_INFER_OUTPUT          gives them (infer jobs only)
// (the agent adds CUDA_VISIBLE_DEVICES, TESSERA_DEVICE and OMP_NUM_THREADS,
// launch/worker_env.h); the command line of its entrypoint, and the rank plan
// the worker reads from TESSERA_PLAN:
//   {"layout", "global_batch", "micro_batches", "schedule",
//    "replicas": [{"batch", "stages": [{"rank", "device", "layers": [b, e]}]}],
//    "tiling": {"tile_px", "overlap_px", "tiles_per_image"}   (tiled plans only)}
// Ranks of an infer job also get TESSERA_LEASE_TOKEN (each rank its own),
// added by the controller when it hands the launch to an agent (never
// stored), and TESSERA_CONTROLLER_URL from their agent. Every rank's
// run_as is LaunchOptions::run_as of the job's owner.
// The AttemptLaunch is stored with the attempt (ToJson/FromJson), so a
// restarted controller hands agents exactly what they were running.
//
// Thread safety: pure functions.
#ifndef TESSERA_DAEMON_CONTROLLER_ATTEMPT_LAUNCH_H_
#define TESSERA_DAEMON_CONTROLLER_ATTEMPT_LAUNCH_H_

#include <map>
#include <set>
#include <string>
#include <vector>

#include "api/agent_protocol.h"
#include "api/types.h"
#include "common/status.h"
#include "scheduler/plan.h"

namespace tessera::daemon {

struct RankLaunch {
  std::string node;
  int64_t device_index = 0;
  api::WorkerLaunch launch;
};

struct AttemptLaunch {
  api::JobId job_id = 0;
  int64_t attempt = 0;
  api::Json plan;                 // the scheduler's plan as JSON (shown by the API)
  api::Json rank_plan;            // what TESSERA_PLAN holds
  bool infer = false;             // an infer job: ranks lease chunks
  std::vector<RankLaunch> ranks;  // index == rank
};

struct LaunchOptions {
  std::string worker_binary;    // absolute path of tessera-worker
  std::string checkpoint_root;  // checkpoints go to <root>/job-<id>
  int master_port_base = 29500;
  int master_port_span = 2000;
  int collective_timeout_s = 60;  // TESSERA_COLLECTIVE_TIMEOUT_S
  // Tessera user -> Unix account its workers run as (WorkerLaunch.run_as);
  // users not listed run as their agent's account.
  std::map<std::string, std::string> run_as;
};

// The rendezvous ports live attempts hold, by master address (MASTER_ADDR):
// a new attempt's master must not take one of those at its address.
using MasterPortsInUse = std::map<std::string, std::set<int>>;

// What an entrypoint runs (api/entrypoint_kind.h):
//   "builtin:<model>"  the reference worker: `<worker> train|infer --model
//                      <model> --data D` then train's `--steps N
//                      --checkpoint-every-s S` or infer's `--output O
//                      --checkpoint C`, then the job's args
//   "model:<name>"     the worker over the registered exported model file:
//                      `<worker> infer --model-file <command> --data D --output O`,
//                      the spec's image convention (api::ImageConventionArgs),
//                      then the job's args
//   "cmd:<name>"       the registered command with the job's args
struct EntrypointCommand {
  std::string name;
  std::string command;  // empty for builtin
};

// REQUIRES: plan has at least one stage; every planned device is on a node in
// `addresses` (node name -> address reachable by peers), else kInvalidArgument.
// MASTER_PORT is PickMasterPort's at the master's address, given `in_use`
// (kResourceExhausted when every port of the span is taken there).
Result<AttemptLaunch> BuildAttemptLaunch(const api::Job& job, int64_t attempt,
                                         const scheduler::Plan& plan, const api::Json& plan_json,
                                         const EntrypointCommand& entrypoint,
                                         const std::map<std::string, std::string>& addresses,
                                         const LaunchOptions& options,
                                         const MasterPortsInUse& in_use = {});

api::Json ToJson(const AttemptLaunch& launch);
Result<AttemptLaunch> AttemptLaunchFromJson(const api::Json& j);

// The stored form of a running attempt (the job attempt's plan column):
// ToJson(launch) and, when there are any, the ranks it goes on without
// ("dropped_ranks": a re-form left them out, a lost or yielding infer rank),
// so that a restarted controller neither hands nor counts them.
api::Json StoredAttemptJson(const AttemptLaunch& launch, const std::set<int64_t>& dropped);
// The dropped ranks `stored` names: none for an attempt stored without
// them; kInternal when the list is malformed or names no rank of `launch`.
Result<std::set<int64_t>> DroppedRanksOf(const api::Json& stored, const AttemptLaunch& launch);

// The rendezvous port an attempt tries first: spread over the configured
// span so consecutive attempts and concurrent jobs rarely meet.
int MasterPortFor(api::JobId job, int64_t attempt, const LaunchOptions& options);

// The rendezvous port of an attempt: MasterPortFor, or the next port of the
// span (wrapping) that `taken` lacks, so live attempts whose masters share an
// address never share a port. The master's agent also checks the port is
// free on its node before starting rank 0 (agent/supervisor.h).
// kResourceExhausted when the whole span is taken.
Result<int> PickMasterPort(api::JobId job, int64_t attempt, const std::set<int>& taken,
                           const LaunchOptions& options);

// The MASTER_ADDR and MASTER_PORT `launch` gave its ranks (stored attempts
// carry them), added to `in_use`; launches without them add nothing.
void AddMasterPort(const AttemptLaunch& launch, MasterPortsInUse* in_use);

}  // namespace tessera::daemon

#endif  // TESSERA_DAEMON_CONTROLLER_ATTEMPT_LAUNCH_H_
