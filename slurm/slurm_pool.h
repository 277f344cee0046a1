// SlurmPool: a Slurm partition as a pool of tesserad nodes. Slurm owns the
// nodes; no tessera-agent runs on them. The pool stands in for their agents:
//
// Every poll (poll_interval) it lists the partition's nodes and Tessera's
// Slurm jobs through the SlurmClient, then, for every node Slurm has up,
// sends tesserad the heartbeat an agent would (through `heartbeat`, the same
// api::ControlPlane::Heartbeat agents reach over HTTP): the node's GPUs from
// its typed GRES (slurm/slurm_nodes.h) and the state of every rank it hosts.
// The answers are the desired sets, exactly as agents get them. So placement,
// the state machine, metrics and recovery are tesserad's own; nothing else in
// the controller knows about Slurm but its node health (NodeUp).
//
// - A new attempt in the desired sets (every one of its WORLD_SIZE ranks
//   desired on nodes that are up) becomes one heterogeneous Slurm job
//   (slurm/slurm_attempt.h), submitted once: its attempt.json is written
//   first (atomically, through options.fs) and kept, so a restarted pool
//   does not submit it again. An attempt.json that cannot be written is
//   PollOnce's error and nothing is submitted; the next poll tries again.
// - A rank is reported running once its launcher started it (worker.pid),
//   exited with its code once it wrote exit.json, and exited 137 (killed)
//   when its Slurm job ended without one (NODE_FAIL, cancelled), or 1 when
//   it never started. Progress lines and log tails come from the rank's
//   files, as an agent sends them.
// - An attempt that leaves the desired sets (stopped, cancelled, recovered)
//   while its Slurm job still runs is cancelled in Slurm.
// - NodeUp(node): what Slurm says of the node at the last successful poll;
//   nullopt for nodes it does not know or when Slurm has not answered for
//   stale_after (tesserad then judges by the missing heartbeats).
//
// Ownership: borrows the client and the clock (both outlive it).
// Thread safety: PollOnce is for one thread (Start runs it on its own);
// NodeUp and Owns may be called from any thread.
#ifndef TESSERA_SLURM_SLURM_POOL_H_
#define TESSERA_SLURM_SLURM_POOL_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "api/agent_protocol.h"
#include "common/clock.h"
#include "common/file_system.h"
#include "common/status.h"
#include "slurm/slurm_attempt.h"
#include "slurm/slurm_client.h"
#include "slurm/slurm_nodes.h"

namespace tessera::slurm {

struct SlurmPoolOptions {
  std::string partition;                     // "" : every node
  std::map<std::string, GpuType> gpu_types;  // by GRES type
  std::string launcher;                      // tessera-slurm-launch as the nodes see it
  std::string rank_root;                     // a folder tesserad and every node see
  std::chrono::milliseconds poll_interval{500};
  std::chrono::milliseconds stale_after{10'000};
  FileSystem* fs = FileSystem::Default();  // attempt and rank files; not owned
};

// api::ControlPlane::Heartbeat: a heartbeat's JSON in, the answer's out.
using HeartbeatFn = std::function<Result<api::Json>(const api::Json& heartbeat)>;

class SlurmPool {
 public:
  SlurmPool(SlurmClient* client, HeartbeatFn heartbeat, const Clock* clock,
            SlurmPoolOptions options);
  ~SlurmPool();  // stops the thread

  // One pass: nodes and jobs from Slurm, heartbeats, submissions, cancels.
  // Returns the first error (the pass goes on past per-attempt errors).
  Status PollOnce();

  void Start();  // PollOnce every poll_interval on a thread of its own
  void Stop();

  std::optional<bool> NodeUp(const std::string& node) const;
  bool Owns(const std::string& node) const;  // a node of this pool (up or not)

 private:
  using AttemptKey = std::pair<api::JobId, int64_t>;
  struct SlurmState {
    int64_t leader = 0;
    std::vector<std::string> states;  // per component
    bool terminal() const;
    bool all_completed() const;
  };
  std::vector<api::WorkerStatus> StatusesOn(const std::string& node,
                                            const std::map<AttemptKey, SlurmState>& slurm);
  const SlurmAttempt* AttemptFor(const AttemptKey& key);
  Status Submit(const AttemptKey& key,
                const std::vector<std::pair<std::string, api::WorkerLaunch>>& ranks,
                const std::map<std::string, api::Node>& nodes);

  SlurmClient* const client_;
  const HeartbeatFn heartbeat_;
  const Clock* const clock_;
  const SlurmPoolOptions options_;

  // Poll thread state.
  std::map<AttemptKey, SlurmAttempt> attempts_;  // attempt files read or written
  std::set<AttemptKey> cancelled_;
  std::map<api::WorkerKey, int64_t> delivered_step_;  // newest progress step sent
  std::set<std::string> warned_;

  mutable std::mutex mu_;
  std::map<std::string, bool> up_;                                // guarded by mu_
  std::optional<std::chrono::steady_clock::time_point> last_ok_;  // guarded by mu_

  std::mutex run_mu_;
  std::condition_variable run_cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace tessera::slurm

#endif  // TESSERA_SLURM_SLURM_POOL_H_
