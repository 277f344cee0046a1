// JobController: the controller's loop. It places pending jobs with the
// planner, hands every node its desired workers, watches the ranks the
// agents report, detects dead nodes and failed ranks, and recovers: stop
// the attempt, back off, re-plan on the devices still healthy, launch the
// next attempt (which resumes from the newest complete checkpoint).
// A failed rank's reason carries the error its last log lines name
// (daemon/controller/rank_error.h); two attempts in a row that fail with the same error
// before any progress are a crash loop, and the job fails with that error
// instead of spending its remaining attempts. A running infer attempt whose
// ranks lease chunks independently goes on without a lost node's ranks
// (their chunks go back to the queue) instead of restarting, and gives some
// of its ranks' devices back to a waiting train job that needs them
// (YieldInferToTraining).
//
// Reconciliation is by level, not by edge: OnHeartbeat records what a node
// runs and answers with everything it should run; Tick compares the reports
// with the attempts recorded in the store. Every decision is a state-machine
// step (daemon/controller/job_state_machine.h) written to the store with its reason, so
// the events show each step.
//
// Queue policy: pending jobs by priority (high first), then by their users'
// weighted shares of the devices (a user who queued many jobs does not make
// the others wait behind all of them), then FIFO; a job whose user is at a
// limit (running jobs, devices) waits with that reason, and a user's device
// limit bounds the job's plan (scheduler/queue_order.h, options.users). The
// first job that cannot be placed (but would fit an idle cluster) is the
// head; a later job may backfill only if the head would still fit once every
// other running job ended, i.e. the backfill does not delay it. These
// decisions are the scheduler's pure pass (scheduler/queue_pass.h); the
// controller reads the queue, lists infer inputs and commits each decision.
//
// Profiles learn from running jobs (scheduler/compute_correction.h): every
// progress line a train rank of a whole-model replica reports (after its
// first two steps; pipeline stages are not used) gives its
// compute time per step, set against its stage's prediction in the plan; per
// job key (CorrectionKey: entrypoint and the options that change its compute)
// and device type, the factor corrects every later plan (waiting jobs are
// planned again when a factor moves notably, and a notable change is logged).
//
// After a controller restart, Recover() rebuilds the active attempts from
// the store; nodes get a full dead-timeout of grace before they can be
// declared dead, so healthy running jobs keep running.
//
// Ownership: borrows the store and the clock; both must outlive it.
// Thread safety: all public methods are safe to call concurrently (one
// mutex, mu_; the *Locked methods require it held); Tick is meant for one
// controller thread, OnHeartbeat for HTTP sessions.
#ifndef TESSERA_DAEMON_CONTROLLER_JOB_CONTROLLER_H_
#define TESSERA_DAEMON_CONTROLLER_JOB_CONTROLLER_H_

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "api/agent_protocol.h"
#include "api/types.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "common/status.h"
#include "common/thread_annotations.h"
#include "daemon/auth/lease_tokens.h"
#include "daemon/controller/attempt_launch.h"
#include "daemon/controller/failure_detector.h"
#include "daemon/controller/input_lister.h"
#include "daemon/controller/job_admission.h"
#include "daemon/controller/job_state_machine.h"
#include "daemon/controller/long_poll_set.h"
#include "daemon/controller/move_costs.h"
#include "daemon/controller/planning.h"
#include "daemon/controller/queue_view.h"
#include "daemon/store/store.h"
#include "scheduler/compute_correction.h"
#include "scheduler/queue_order.h"

namespace tessera::daemon {

// Observed over predicted compute beyond this (or below its inverse) on a
// full window of observations: the profile is measured again.
inline constexpr double kContradictedFactor = 1.5;

struct JobControllerOptions {
  FailureDetectorOptions detector;
  LaunchOptions launch;
  int64_t retry_backoff_ms = 500;  // delay before the first re-plan
  int64_t max_retry_backoff_ms = 10'000;
  int64_t launch_timeout_ms = 120'000;  // starting -> every rank running
  int64_t stop_wait_ms = 10'000;        // how long a re-plan waits for old ranks to stop
  // Crash loops: an attempt whose rank failed with the same named error
  // (daemon/controller/rank_error.h) as the attempt before it, neither having made
  // progress, fails the job with that error instead of retrying. Progress
  // is a reported step, or (for scripts that report none) a run longer
  // than this window.
  int64_t crash_loop_window_ms = 300'000;
  // Measured profiles of builtin models and of model: entrypoints' files
  // (daemon/controller/profile_cache.h).
  ProfileLookup profiles;
  // Measures a profile again (ProfileCache::Remeasure; true when queued),
  // asked for once per correction key when the steps of running jobs
  // contradict it: a factor beyond kContradictedFactor either way over a full
  // window of observations (scheduler/compute_correction.h). Once `profiles`
  // answers another profile for it, the key's corrections start afresh.
  // Unset: profiles are never measured again.
  std::function<bool(const ProfileTarget& target, const std::string& why)> remeasure_profile;
  // Infer jobs: images per chunk, and the tokens their ranks lease chunks
  // with (not owned; without it infer ranks get no token and cannot lease).
  int64_t infer_chunk_images = 32;
  const LeaseTokens* lease_tokens = nullptr;
  // Pools whose nodes run no agent (a Slurm partition) know their health
  // better than heartbeats: true (healthy) or false (dead) overrides the
  // failure detector for that node; nullopt leaves it to the detector.
  std::function<std::optional<bool>(const std::string& node)> node_up;
  // Elastic training (JobController::GrowTraining): a running train job grows
  // onto free devices when no job waits, at most every grow_check_ms, once its
  // attempt has run unchanged for grow_settle_ms, when the wider plan predicts
  // a step at least grow_min_speedup times faster; 0 turns growth off.
  double grow_min_speedup = 1.2;
  int64_t grow_check_ms = 2000;
  int64_t grow_settle_ms = 10'000;
  // Sharing the lab (JobController::ShareForWaiting, scheduler/share_policy.h):
  // while a train job waits for devices, the share policy may shrink running
  // train jobs that can re-form and allow it (JobSpec::elastic), settled for
  // grow_settle_ms, when the lab's predicted normalized throughput gains more
  // over share_horizon_s (or the job's remaining time) than a move costs: the
  // job's last re-form as measured (move_costs.h), else the mean of those
  // measured, else move_cost_s. Checked at most every grow_check_ms.
  bool share_running_jobs = true;
  // A move onto none of a job's devices (a world with no survivor cannot
  // re-form) restarts it from its checkpoint there; false: the policy keeps
  // one of its devices in every move.
  bool share_restart_moves = true;
  // A running train job that restarts from its checkpoint and would finish
  // more than this many times its time alone on its fair share after its
  // submission, where it is (a job on the lab's slowest devices all along),
  // swaps a slower device for a faster one with a job ahead of its share
  // (the policy's catch-up, ShareOptions::catch_up_above); 0: never.
  double share_catch_up_above = 2.0;
  double move_cost_s = 10;
  double share_horizon_s = 1800;
  // The data roots an infer job's input listing is checked against (not
  // owned; without it inputs are listed unchecked).
  const JobAdmission* admission = nullptr;
  // Users' weights and limits: the queue interleaves users by weighted
  // device share, and holds a job whose user is at a limit
  // (scheduler/queue_order.h).
  scheduler::UserPolicies users;
  // kFairShare (users interleaved by weighted share) or kFifo.
  scheduler::QueueOrdering ordering = scheduler::QueueOrdering::kFairShare;
};

class JobController {
 public:
  JobController(Store* store, const Clock* clock, JobControllerOptions options);

  // Rebuilds the active attempts from the store. Call once at start.
  Status Recover() EXCLUDES(mu_);

  // Records a node's report and answers, through `done`, with every worker
  // the node should run. Long poll: when request.wait_ms > 0 and the node
  // already runs exactly its desired set, the answer is parked (no thread
  // waits for it) until that set changes or wait_ms passes, so a new launch
  // reaches the agent at once; `done` is then called from the controller's
  // long-poll thread. Otherwise `done` is called before this returns.
  // REQUIRES: the request passed HeartbeatRequestFromJson; done does not
  // block and does not call back into the controller.
  using HeartbeatDone = std::function<void(api::HeartbeatResponse)>;
  void OnHeartbeat(const api::HeartbeatRequest& request, HeartbeatDone done) EXCLUDES(mu_);

  // OnHeartbeat, waiting for the answer (blocks while it is parked).
  api::HeartbeatResponse OnHeartbeat(const api::HeartbeatRequest& request) EXCLUDES(mu_);

  // Answers every parked heartbeat now, and later ones at once (the daemon
  // is stopping).
  void Shutdown() EXCLUDES(mu_);

  // Heartbeats parked right now.
  size_t parked_heartbeats() const { return polls_.parked(); }

  // One pass: node health, attempt outcomes, retries, placement.
  Status Tick() EXCLUDES(mu_);

  // Ranked plans for a spec on the cluster as it is now (dry run); while the
  // model's profile is being measured, MeasuringProfileAnswer (a state).
  Result<api::Json> Preview(const api::JobSpec& spec) EXCLUDES(mu_);

  // Why a pending job is still waiting (the planner's reason), or empty.
  // Does not wait for a running Tick.
  std::string WaitingReason(api::JobId job) EXCLUDES(waiting_mu_);
  // The waiting jobs in the order the last pass considered them (position,
  // user, priority, the user's weighted share, why each waits), held ones
  // last; refreshed every pass, and at most once a second while every device
  // is busy.
  std::vector<api::QueueRow> Queue() EXCLUDES(waiting_mu_);

  // The ranks of `job`'s attempt `attempt` that still run (dropped ones left
  // out, joined ones in), each with its device ("node:index"); nullopt when
  // that attempt is not active. For the infer progress (InferenceTracker).
  std::optional<std::map<int64_t, std::string>> LiveRanks(api::JobId job, int64_t attempt)
      EXCLUDES(mu_);

 private:
  struct Active {
    AttemptLaunch launch;
    std::chrono::steady_clock::time_point launched_at;
    // Ranks of a lost node that a running infer attempt goes on without
    // (DropLostInferRanksLocked): no longer desired, counted or busy.
    std::set<int64_t> dropped;
    // Dropped ranks a planned re-form left out that stay desired until the
    // time given: their agents stop them only once the kept ranks have left
    // the old world, so a left-out rank's stop (which its world agrees on at
    // the step's end) cannot stop the kept ones with it.
    std::map<int64_t, std::chrono::steady_clock::time_point> leaving;
    // A restart move the share round ordered (ShareForWaiting): no rank is
    // desired any more (agents stop them; a train rank saves a checkpoint as
    // it stops), but their devices stay busy until none of them runs; then
    // the job is pending again (JobEvent::kMoved) and restarts from its
    // checkpoint on the devices reserved for it (move_targets_).
    struct Move {
      std::string reason;  // the event's
    };
    std::optional<Move> move;
    // Whether `rank` is still to run on its device: not dropped, or leaving,
    // and not stopped for a move.
    bool Desired(int64_t rank) const {
      return !move && (!dropped.contains(rank) || leaving.contains(rank));
    }
    // Whether `rank`'s process still holds its device: desired, or stopping
    // for a move.
    bool Holds(int64_t rank) const { return Desired(rank) || (move && !dropped.contains(rank)); }
    std::string owner;  // the job's user (its share and limits)
    // What its ranks' compute observations correct (CorrectionKey); empty:
    // nothing (infer attempts).
    std::string correction_key;
    std::map<int64_t, int64_t> observed_step;  // by rank: the newest step observed
    // Ranks that joined the running attempt (GrowTraining, GrowInference) and
    // were not yet reported: their agent starts them after its next beat.
    std::map<int64_t, std::chrono::steady_clock::time_point> joining;
    int64_t min_devices = 1;  // the spec's: an infer job yields no more
    // A train rank waits to re-form after its collective failed while every
    // node of the attempt still answers (RegroupLocked): when that was first
    // seen, and how many times the attempt re-formed in place for it.
    std::optional<std::chrono::steady_clock::time_point> peer_lost_seen;
    int regroups = 0;
  };
  // How many times an attempt re-forms in place for ranks that lost a peer
  // while every node answers (RegroupLocked).
  static constexpr int kMaxRegroups = 2;
  struct Report {
    std::chrono::steady_clock::time_point seen;
    std::vector<api::WorkerStatus> workers;
    int64_t hold_ms = 0;  // the wait_ms the beat asked for
  };

  int64_t SteadyMs(std::chrono::steady_clock::time_point t) const;
  // Classifies every node, sets node.health, and appends (node, health)
  // for each that changed to *changes (Tick records them after mu_).
  std::map<std::string, NodeHealth> UpdateNodeHealthLocked(
      std::vector<api::Node>* nodes, std::vector<std::pair<std::string, std::string>>* changes)
      REQUIRES(mu_);
  Status CheckActiveLocked(const std::map<std::string, NodeHealth>& health) REQUIRES(mu_);
  Status RetryRecoveringLocked(const std::map<std::string, NodeHealth>& health) REQUIRES(mu_);
  // Places pending jobs. Plans outside mu_ (a slow plan never delays a
  // heartbeat) on the nodes and the devices `held` as Tick saw them, and
  // commits each placement under mu_. Tick's thread only.
  Status PlaceQueued(const std::vector<api::Node>& nodes, const std::set<std::string>& held)
      EXCLUDES(mu_);
  // PlanJob, remembered per job and cluster state: a job is planned again
  // only when the nodes (inventory, health) or the busy devices changed, or
  // its model's profile was not measured yet. Its first plan only is wanted
  // (PlannerOptions::fastest_only: the others may be fewer). Tick's thread only.
  Result<scheduler::PlanSet> PlanCached(const api::Job& job, const std::vector<api::Node>& nodes,
                                        const std::set<std::string>& busy);
  // Logs EmulationCapacityWarnings (daemon/controller/planning.h) when they change.
  void WarnAboutEmulationLocked(const std::vector<api::Node>& nodes) REQUIRES(mu_);
  // Whether an infer job's input is listed into chunks (always true for
  // other jobs). Starts the background listing the first time; while it
  // runs the job waits with "listing input (N found)"; a listing that fails
  // (the input cannot be read) fails the job with the reason. Not under mu_.
  Result<bool> InferInputReady(const api::Job& job) EXCLUDES(mu_);
  // Running jobs and devices per user (active attempts, dropped ranks not
  // counted).
  std::map<std::string, scheduler::UserUsage> UsageByUser() EXCLUDES(mu_);
  // Whether a job of `pending` waits for devices: one its user's limits
  // (users: max_running_jobs, max_devices) do not hold, given what each user
  // holds (`usage`, from UsageByUser). Growth waits for those only; a job a
  // limit holds cannot take a free device anyway.
  bool PlaceableWaiting(const std::vector<api::Job>& pending,
                        const std::map<std::string, scheduler::UserUsage>& usage) const;
  // Launches `best` for the job (planned on the devices Tick saw free).
  Status PlaceLocked(const api::Job& job, const std::vector<api::Node>& nodes,
                     const scheduler::Plan& best, std::set<std::string>* placed_devices)
      REQUIRES(mu_);
  // Applies a state-machine event and records it.
  Result<api::Job> StepLocked(const api::Job& job, JobEvent event, const std::string& reason,
                              std::optional<api::Json> plan = std::nullopt) REQUIRES(mu_);
  // The devices of active attempts' ranks, a planned re-form's left-out ranks
  // included while they stay (Active::leaving: their process still holds the
  // device's memory).
  std::set<std::string> BusyDevicesLocked() const REQUIRES(mu_);
  // Plans for `spec`, with its model: entrypoint's registered file (PlanJob).
  Result<scheduler::PlanSet> Plan(const scheduler::ClusterSnapshot& snapshot,
                                  const api::JobSpec& spec,
                                  const scheduler::PlannerOptions& options = {});
  // The registered file of a `model:` train spec's entrypoint; "" otherwise.
  std::string ModelFileOf(const api::JobSpec& spec);
  // Hands the profiles due to be measured again to options_.remeasure_profile
  // and starts the corrections afresh of those measured again since
  // (job_controller_profiles.cc). Outside the lock.
  void RecheckProfiles() EXCLUDES(mu_);
  const api::WorkerStatus* FindReportLocked(const std::string& node,
                                            const api::WorkerKey& key) const REQUIRES(mu_);
  // Whether Slurm says whether `node` is up (options_.node_up answers for it):
  // its ranks are Slurm's to place, not the controller's to move.
  bool UnderSlurm(const std::string& node) const;
  // The devices ("node:index") of `active`'s live ranks (dropped ones left
  // out), and whether each of them is reported running on a node not
  // UnderSlurm: what a re-form or growth of a running attempt starts from.
  // `releasing`: the devices of its dropped ranks still running on a healthy
  // node (left out by a re-form, or yielded by an infer attempt): busy until
  // their agent reports them gone, but already given up.
  struct LiveDevices {
    std::set<std::string> devices;
    bool every_rank_runs = true;
    std::set<std::string> releasing;
  };
  LiveDevices LiveDevicesLocked(const Active& active) const REQUIRES(mu_);
  // Rewrites `active`'s stored attempt (its launch and dropped ranks,
  // StoredAttemptJson), so a restarted controller adopts the attempt as it
  // runs now. A failed write is logged: the running attempt goes on.
  void SaveAttemptLocked(const Active& active) REQUIRES(mu_);
  // The stored records of the jobs with an active attempt, read outside the
  // lock (the store is slow); a job the store cannot read is left out.
  std::map<api::JobId, api::Job> ActiveJobRecords() EXCLUDES(mu_);
  bool JobHasLiveWorkersLocked(api::JobId job,
                               const std::map<std::string, NodeHealth>& health) const REQUIRES(mu_);
  // Called when `active`'s attempt of `job` ended with a failed rank or a
  // lost node; `error` is the failed rank's named error (empty for none or a
  // node loss). Returns the crash loop's description when this attempt
  // failed as the one before it did, both without progress (see
  // JobControllerOptions::crash_loop_window_ms), and remembers this failure.
  std::optional<std::string> CrashLoopLocked(const api::Job& job, const Active& active,
                                             const std::string& error) REQUIRES(mu_);
  // A running infer attempt whose ranks are independent (each leases its own
  // chunks: no tiles shared over a process group) loses only the ranks of a
  // lost node, as long as a rank survives: they are dropped, the chunks they
  // had leased go back to the queue at once, and the event says so. Returns
  // whether it dropped them (else the attempt is recovered as usual).
  Result<bool> DropLostInferRanksLocked(const api::Job& job, Active* active,
                                        const std::map<std::string, std::vector<int64_t>>& lost)
      REQUIRES(mu_);
  // A running train attempt that lost `lost`'s nodes goes on with its
  // survivors (daemon/controller/train_reform.h): re-planned on their devices,
  // each handed its place (WorkerLaunch::reform), the unused ones dropped,
  // the job's plan and event updated, the stored attempt rewritten. Returns
  // false with *why set when it cannot (the attempt is then restarted as
  // usual, and the event says why).
  // With `lost` empty, `cause` heads the event and the ranks re-form in
  // place, on their own devices (RegroupLocked).
  Result<bool> ReformTrainLocked(const api::Job& job, Active* active,
                                 const std::map<std::string, std::vector<int64_t>>& lost,
                                 std::string* why, const std::string& cause = "") REQUIRES(mu_);
  // A running train attempt one of whose ranks waits to re-form (its
  // collective failed: progress event peer_lost) while no node of the
  // attempt is lost and each has beaten since it was first seen (a
  // connection that failed under load, not a node): its ranks re-form in
  // place, in the same attempt, at most kMaxRegroups times; otherwise the
  // waiting rank gives up after its collective timeout and the attempt
  // fails as before. `waiting`: the waiting ranks' "rank R on N" texts, of
  // lines that name the attempt's newest world (a line of a world before, or
  // one without a generation, is not counted).
  // Returns whether it re-formed.
  Result<bool> RegroupLocked(const api::Job& job, Active* active,
                             const std::vector<std::string>& waiting) REQUIRES(mu_);
  // Re-forms `active`'s attempt onto `best` (planned on `nodes`): the ranks in
  // `survivors` keep their processes, ranks on new devices join, `gone` and
  // left-out ones are dropped; the stored attempt, the job's plan and a
  // `reformed` event ("<head>: ...") record it. False with *why when the
  // launch cannot be built.
  Result<bool> ApplyReformLocked(const api::Job& job, Active* active, const scheduler::Plan& best,
                                 const std::vector<api::Node>& nodes,
                                 const std::set<int64_t>& survivors, const std::set<int64_t>& gone,
                                 const std::string& head, std::string* why) REQUIRES(mu_);
  // Sharing the lab: while a train job waits, the share policy
  // (scheduler/share_policy.h) over every running and waiting job; running
  // train jobs it shrinks re-form onto the devices it leaves them, and the
  // next pass places the waiting job on the rest. Steps in
  // job_controller_share.cc. Tick's thread only.
  Status ShareForWaiting(const std::vector<api::Node>& nodes, const std::set<std::string>& held)
      EXCLUDES(mu_);
  std::chrono::steady_clock::time_point share_checked_at_{};  // Tick's thread only
  // A restart move's attempt (Active::move) once none of its ranks runs:
  // returns true after the kMoved step (the job is pending, the attempt's
  // result starts with kMovedAttemptResult, its devices reserved for a while);
  // false while a rank still runs.
  Result<bool> EndMoveLocked(const api::Job& job, const Active& active,
                             const std::map<std::string, NodeHealth>& health) REQUIRES(mu_);
  // The devices a moved job is to restart on: no other job is planned on them
  // until it is placed there, leaves the queue, or `until` passes (set when
  // its moved attempt ended: kMoveReservation, 60 s, later).
  struct MoveTarget {
    std::set<std::string> devices;
    std::optional<std::chrono::steady_clock::time_point> until;
  };
  std::map<api::JobId, MoveTarget> move_targets_ GUARDED_BY(mu_);
  // Orders a restart move of `active` onto `to` (its ranks stop, `to` is
  // reserved) and stores it with the attempt.
  void OrderMoveLocked(Active* active, const std::set<std::string>& to, const std::string& reason)
      REQUIRES(mu_);
  // Recover(): the move a stored attempt names, if any, ordered again.
  void RecoverMoveLocked(const api::Json& stored, Active* active) REQUIRES(mu_);
  // Drops the reservations whose time is up.
  void ExpireMoveTargetsLocked() REQUIRES(mu_);
  // The devices reserved for moved jobs.
  std::set<std::string> ReservedDevicesLocked() const REQUIRES(mu_);
  // Elastic training: a running train attempt that could re-form grows onto
  // free devices when no job waits and its plan with them predicts a step at
  // least options.grow_min_speedup faster (train_reform.h). Tick's thread only.
  Status GrowTraining(const std::vector<api::Node>& nodes, const std::set<std::string>& held)
      EXCLUDES(mu_);
  std::chrono::steady_clock::time_point grow_checked_at_{};  // Tick's thread only
  // Why each running elastic train job did not grow at the last check, logged
  // when it changes (so that "why does my job not use the free node" has an
  // answer in the log without a line every check). Tick's thread only.
  void NoteGrowVerdict(api::JobId job, std::string verdict);
  std::map<api::JobId, std::string> grow_verdicts_;  // Tick's thread only
  // Inference fills the gaps: a waiting train job that the free devices
  // cannot hold, but that fits once running infer jobs of no higher priority
  // give back some of their independent ranks (each keeps its min_devices,
  // at least one), gets them:
  // those ranks are dropped, their leased chunks go back to the queue at once
  // (nothing is lost: outputs are written atomically and a redone chunk skips
  // what exists), and the infer job's event names the train job. At most one
  // train job a second; the next pass places it. Tick's thread only.
  Status YieldInferToTraining(const std::vector<api::Node>& nodes,
                              const std::set<std::string>& held) EXCLUDES(mu_);
  // The other half: while no job waits, at most every grow_check_ms, a
  // running infer attempt of an elastic job with independent ranks, every
  // live rank running,
  // grow_settle_ms after its launch, with chunks no rank leased yet and fewer
  // live ranks than its max_devices (and its user's device limit), gets new
  // ranks on the free devices its best plan over its own and the free ones
  // adds (daemon/controller/infer_growth.h); the stored attempt, the job's
  // plan and a ranks_joined event record them. Tick's thread only.
  Status GrowInference(const std::vector<api::Node>& nodes, const std::set<std::string>& held)
      EXCLUDES(mu_);
  std::chrono::steady_clock::time_point infer_grow_checked_at_{};  // Tick's thread only
  // The active attempt `launch` of `job`, launched now.
  Active ActiveOf(const api::Job& job, AttemptLaunch launch) const;
  // Whether every rank of the attempt leases its own chunks (no tiles shared
  // over a process group: one stage per replica, no tiling).
  static bool IndependentRanks(const AttemptLaunch& launch);
  // Drops `ranks` of a running infer attempt: their leases are handed back
  // now, they are no longer desired or busy; `why` is the event's reason.
  Status DropInferRanksLocked(const api::Job& job, Active* active,
                              const std::vector<int64_t>& ranks, const std::string& why)
      REQUIRES(mu_);
  std::chrono::steady_clock::time_point yield_checked_at_{};  // Tick's thread only

  Store* const store_;
  const Clock* const clock_;
  const JobControllerOptions options_;
  const std::chrono::steady_clock::time_point started_;

  std::vector<api::WorkerLaunch> DesiredForLocked(const std::string& node) const REQUIRES(mu_);
  // The answer to a node's heartbeat as things are now.
  api::HeartbeatResponse ResponseFor(const std::string& node) EXCLUDES(mu_);

  Mutex mu_;
  uint64_t generation_ GUARDED_BY(mu_) = 0;  // bumped with every change of active_
  bool shutting_down_ GUARDED_BY(mu_) = false;
  std::map<api::JobId, Active> active_ GUARDED_BY(mu_);
  MoveCosts move_costs_ GUARDED_BY(mu_);  // what re-forms of train jobs cost
  std::map<std::string, Report> reports_ GUARDED_BY(mu_);
  // What the last answer to each node handed it: each desired key with its
  // re-form generation. A beat is parked only while that is still what the
  // node should run, so an order made between two beats is answered at once.
  std::map<std::string, std::map<api::WorkerKey, int64_t>> answered_with_ GUARDED_BY(mu_);
  // Nodes checked early after a rank reported peer loss.
  PeerLossChecks peer_checks_ GUARDED_BY(mu_);
  std::map<api::JobId, std::chrono::steady_clock::time_point> retry_at_ GUARDED_BY(mu_);
  // Rank 0 of an attempt that left active_ keeps its rendezvous port until it
  // has stopped (SIGTERM, the grace, SIGKILL): a new master at that address
  // must not be given the port meanwhile. So does rank 0 of a world a re-form
  // left: its process (the same key, running on) still hosts that world's
  // store. Forgotten once its node has been silent a while.
  struct StoppingMaster {
    std::string node;
    api::WorkerKey key;
    AttemptLaunch launch;  // its master address and port (AddMasterPort)
    std::chrono::steady_clock::time_point ended;
  };
  std::vector<StoppingMaster> stopping_masters_ GUARDED_BY(mu_);
  // Moves an ending attempt's rank 0 into stopping_masters_.
  void RememberStoppingMasterLocked(const AttemptLaunch& launch) REQUIRES(mu_);
  // The last failure of each job that ended without progress (in memory: a
  // restarted controller starts counting again).
  struct CrashRecord {
    std::string signature;  // CrashSignature of the named error
    int64_t attempt = 0;
  };
  std::map<api::JobId, CrashRecord> crash_history_ GUARDED_BY(mu_);
  std::vector<std::string> emulation_warnings_ GUARDED_BY(mu_);  // last logged
  // PlanCached's memory: per job, the newest few (cluster key, plans).
  // Used by Tick's thread only (no lock).
  struct CachedPlan {
    uint64_t cluster_key = 0;
    Result<scheduler::PlanSet> plans = Status(StatusCode::kInternal, "not planned");
  };
  std::map<api::JobId, std::vector<CachedPlan>> plan_cache_;
  // Compute observations of running train ranks (OnHeartbeat) and the factors
  // plans apply (Plan); its own short lock, so planning outside mu_ reads it.
  void ObserveComputeLocked(const api::HeartbeatRequest& request) REQUIRES(mu_);
  // Hands the completed steps the ranks of active train attempts report to
  // move_costs_ (a beat that arrived at `arrived`).
  void ObserveStepsLocked(const api::HeartbeatRequest& request,
                          std::chrono::steady_clock::time_point arrived) REQUIRES(mu_);
  // Profiles the steps of running jobs contradict, by correction key: due to
  // be measured again (asked by ObserveComputeLocked, handed to the hook by
  // RecheckProfiles outside the lock), asked once per key, and being measured
  // again (the profile in use when asked, to tell the new one).
  struct ProfileRecheck {
    api::JobId job = 0;
    std::string why;
  };
  struct Remeasuring {
    ProfileTarget target;
    scheduler::ModelProfile old;
  };
  std::map<std::string, ProfileRecheck> recheck_due_ GUARDED_BY(mu_);
  std::set<std::string> recheck_asked_ GUARDED_BY(mu_);
  std::map<std::string, Remeasuring> remeasuring_ GUARDED_BY(mu_);
  Mutex corrections_mu_;  // taken after mu_ when both are held
  scheduler::ComputeCorrection corrections_ GUARDED_BY(corrections_mu_);
  // The same steps by the ranks' own work, which is what says whether a profile
  // is wrong: on an emulated device that holds (relative speed < 1) a step's
  // compute_cpu_s / its speed, since its compute_s also holds the time the
  // rank waited for a host core; elsewhere its compute_s.
  scheduler::ComputeCorrection work_corrections_ GUARDED_BY(corrections_mu_);
  // What a rank's steps are observed against, by "node:index": the device's
  // type, and the relative speed of an emulated device that holds (< 1; else 0).
  struct DeviceKind {
    std::string type;
    double hold_speed = 0;
  };
  std::map<std::string, DeviceKind> device_kinds_ GUARDED_BY(mu_);
  uint64_t inventory_key_ = 0;     // of the nodes Tick saw last
  uint64_t plans_made_ = 0;        // PlanJob calls by PlanCached (tests)
  uint64_t share_plans_made_ = 0;  // PlanJob calls by ShareForWaiting (tests)

 public:
  // How many plans Tick actually computed (cache misses); for tests.
  uint64_t plans_made() const { return plans_made_; }
  // How many plans the share rounds computed; for tests.
  uint64_t share_plans_made() const { return share_plans_made_; }

 private:
  // Why pending jobs wait: written by Tick, read by API calls, so it has its
  // own lock and a GET never waits for a planning pass.
  void SetWaiting(api::JobId job, const std::string& why) EXCLUDES(waiting_mu_);
  Mutex waiting_mu_;
  std::map<api::JobId, std::string> waiting_ GUARDED_BY(waiting_mu_);
  std::vector<api::QueueRow> queue_ GUARDED_BY(waiting_mu_);
  // When Tick last ran a placement pass (Tick's thread only).
  std::chrono::steady_clock::time_point passed_at_{};
  // Lists infer jobs' inputs in the background (daemon/controller/input_lister.h).
  InputLister lister_;
  // Parked heartbeats; told of every change of active_. Last member: its
  // thread runs callbacks that use the members above until it is joined.
  LongPollSet polls_;
};

}  // namespace tessera::daemon

#endif  // TESSERA_DAEMON_CONTROLLER_JOB_CONTROLLER_H_
