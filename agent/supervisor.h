// Supervisor: starts, watches and stops the worker processes of this node.
//
// `Supervisor` is the interface the agent loop talks to; `ProcessSupervisor`
// is the real one: real processes started through a ProcessLauncher
// (common/process_launcher.h), each in its own session and process group,
// with its rank directory (launch/rank_files.h) as cwd, its stdout+stderr
// appended to a size-capped, rotated log, and a shim between the agent and
// the worker that records the worker's exit code in the rank directory.
//
// Before a start: the rank's folders are made 0700 (launch/rank_files.h); a
// launch whose env sets a denied key (api::IsDeniedEnvKey) is refused; rank 0
// is refused while its MASTER_PORT is in use on this node; a launch's
// run_as account is resolved: an agent running as root starts the worker as
// that account (supplementary groups, gid, then uid dropped in the worker's
// process just before exec, HOME/USER/LOGNAME set to the account's; its
// progress file is handed to the account, its plan made group-readable);
// any other agent refuses an account that is not its own, and no worker
// runs as root through run_as. Refusals become exited workers with
// kExitCodeLaunchFailed and the reason (naming the field) in their log.
//
// Life of a worker record: Start -> kRunning -> (Stop -> kStopping) ->
// kExited, then Forget. An exited record stays (and is reported) until the
// agent forgets it, and a key that ever ran is never started again -- not
// even by a restarted agent: exit.json in the rank dir remembers it.
//
// Files: plan.json, worker.pid and exit.json are written atomically through
// options.fs (common/atomic_file.h). A plan that cannot be written fails
// the start (an exited worker, the reason in its log); a pid file that
// cannot be written is returned by Start (the worker runs, but a restarted
// agent will not re-adopt it); an exit.json that cannot be written is said
// in the worker's log (the monitor thread has no caller to tell).
//
// Re-adoption: the pid file in each rank dir lets a RESTARTED agent find the
// workers of its predecessor (Recover()). A worker is adopted when its pid is
// alive, its process start time equals the recorded one and its
// /proc/<pid>/environ carries the recorded TESSERA_JOB_ID / TESSERA_ATTEMPT /
// RANK (when readable), which rules out pid reuse. Workers are deliberately
// NOT tied to the agent with PR_SET_PDEATHSIG: that would kill them on every
// agent restart. Instead the re-adopting agent stops whatever the controller
// no longer wants on its first answered heartbeat. An adopted worker is not
// our child, so its exit status is lost to us: it is reported as exited with
// exit_code -1 ("unknown"); so is a recorded worker that died while no agent
// ran (its stale pid file is dropped).
//
// Thread safety: every method is safe to call from any thread.
#ifndef TESSERA_AGENT_SUPERVISOR_H_
#define TESSERA_AGENT_SUPERVISOR_H_

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <map>
#include <optional>
#include <thread>
#include <vector>

#include "api/agent_protocol.h"
#include "common/clock.h"
#include "common/file_system.h"
#include "common/mutex.h"
#include "common/process_launcher.h"
#include "common/status.h"
#include "common/thread_annotations.h"
#include "launch/rank_files.h"
#include "launch/worker_env.h"

namespace tessera::agent {

// Exit code reported when the real one is unknowable (adopted or lost worker).
inline constexpr int64_t kExitCodeUnknown = -1;
// Exit code of a launch that could not start (bad argv, exec failure, ...).
inline constexpr int64_t kExitCodeLaunchFailed = 127;

class Supervisor {
 public:
  virtual ~Supervisor() = default;

  // Starts `launch` with `device_env` (launch/worker_env.h) added to its env;
  // a launch with a reform (a rank joining a running world) has its
  // reform.json written before it starts.
  // A key this supervisor knows, or that ran before (exit.json on disk), is
  // not started again. A launch that cannot start becomes an exited worker
  // with kExitCodeLaunchFailed and the reason in its log; the error is also
  // returned for the agent's own log.
  virtual Status Start(const api::WorkerLaunch& launch, const launch::EnvMap& device_env) = 0;

  // Hands a running worker its place in a re-formed attempt: writes
  // launch.reform (api/agent_protocol.h) atomically to the worker's
  // reform.json, readable by the worker's account as its plan is, when its
  // generation is newer than the last one written for that key. No effect for
  // a null reform, an older generation, or a worker that is not running.
  virtual Status Reform(const api::WorkerLaunch& launch) = 0;

  // Asks a running worker to stop: SIGTERM to its process group now, SIGKILL
  // after the grace period. No effect on stopping, exited or unknown keys.
  virtual void Stop(const api::WorkerKey& key) = 0;

  // Drops an exited worker's record (its logs stay on disk). No effect on
  // running or stopping workers.
  virtual void Forget(const api::WorkerKey& key) = 0;

  // Records a launch the agent refused before starting it (e.g. a device
  // index this node lacks) as an exited worker with kExitCodeLaunchFailed and
  // `why` in its log, so it is reported once and never retried.
  virtual void Reject(const api::WorkerLaunch& launch, const Status& why) = 0;

  // Every known worker, sorted by key, with its latest progress, its newest
  // progress lines (at most api::kMaxProgressLinesPerWorker) and log tail.
  virtual std::vector<api::WorkerStatus> Snapshot() = 0;

  // Stops every worker and waits until all have exited (at most the grace
  // period plus a margin, on the supervisor's clock). Returns true when none
  // runs any more.
  virtual bool StopAllAndWait() = 0;
};

struct SupervisorOptions {
  std::filesystem::path state_dir;  // REQUIRES: non-empty
  std::chrono::milliseconds stop_grace{10'000};
  int64_t log_max_bytes = 16 * 1024 * 1024;     // per live log file; 0: no cap
  int log_keep = 3;                             // rotated files kept: worker.log.1 .. .N
  std::chrono::milliseconds poll_interval{50};  // reaping, escalation, rotation
  // The clean base every worker env starts from (launch env and agent vars are
  // added on top); launch::DefaultBaseEnv() when not set.
  std::optional<launch::EnvMap> base_env;
  Clock* clock = SystemClock::Default();                   // not owned
  FileSystem* fs = FileSystem::Default();                  // rank files and /proc; not owned
  ProcessLauncher* launcher = ProcessLauncher::Default();  // starts workers; not owned
};

struct RecoveryReport {
  int adopted = 0;  // alive and matching: supervised again
  int exited = 0;   // had ended under the previous agent (exit.json)
  int dropped = 0;  // stale pid file: process gone or pid reused
};

class ProcessSupervisor final : public Supervisor {
 public:
  explicit ProcessSupervisor(SupervisorOptions options);
  // Stops watching; leaves workers running so a new agent can re-adopt them.
  ~ProcessSupervisor() override;
  ProcessSupervisor(const ProcessSupervisor&) = delete;
  ProcessSupervisor& operator=(const ProcessSupervisor&) = delete;

  // Re-adopts the workers recorded in the state dir. Call once, before the
  // first Start.
  Result<RecoveryReport> Recover() EXCLUDES(mu_);

  Status Start(const api::WorkerLaunch& launch, const launch::EnvMap& device_env) override
      EXCLUDES(mu_);
  Status Reform(const api::WorkerLaunch& launch) override EXCLUDES(mu_);
  void Stop(const api::WorkerKey& key) override EXCLUDES(mu_);
  void Forget(const api::WorkerKey& key) override EXCLUDES(mu_);
  void Reject(const api::WorkerLaunch& launch, const Status& why) override EXCLUDES(mu_);
  std::vector<api::WorkerStatus> Snapshot() override EXCLUDES(mu_);
  bool StopAllAndWait() override EXCLUDES(mu_);

  // The worker's status without log tail and progress; nullopt when unknown.
  std::optional<api::WorkerStatus> Get(const api::WorkerKey& key) EXCLUDES(mu_);
  // Polls Get until the worker has exited or `timeout` passed on the
  // options' clock.
  std::optional<api::WorkerStatus> WaitForExit(const api::WorkerKey& key,
                                               std::chrono::milliseconds timeout) EXCLUDES(mu_);

 private:
  struct Worker {
    api::WorkerKey key;
    launch::RankPaths paths;
    pid_t pid = 0;  // also the process group id (the worker is a session leader)
    uint64_t start_ticks = 0;
    bool is_child = false;  // started by us (waitpid) or adopted (polled)
    api::WorkerState state = api::WorkerState::kRunning;
    int64_t exit_code = 0;
    std::optional<std::chrono::steady_clock::time_point> kill_at;
    int64_t reform_generation = 0;  // the newest written to reform.json
  };

  void MonitorLoop() EXCLUDES(mu_);
  void PollLocked(Worker& w) REQUIRES(mu_);
  void MarkExitedLocked(Worker& w, int64_t exit_code) REQUIRES(mu_);
  Status StartLocked(const api::WorkerLaunch& launch, const launch::EnvMap& device_env)
      REQUIRES(mu_);
  void RecordLaunchFailureLocked(const api::WorkerKey& key, const launch::RankPaths& paths,
                                 const std::string& reason) REQUIRES(mu_);

  const SupervisorOptions options_;
  const launch::EnvMap base_env_;
  Mutex mu_;
  std::condition_variable_any cv_;
  bool shutting_down_ GUARDED_BY(mu_) = false;
  std::map<api::WorkerKey, Worker> workers_ GUARDED_BY(mu_);
  std::thread monitor_;
};

}  // namespace tessera::agent

#endif  // TESSERA_AGENT_SUPERVISOR_H_
