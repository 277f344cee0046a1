// ControlPlaneService: tesserad's implementation of api::ControlPlane on top
// of a Store, a Clock and the job state machine.
//
// Authorization: a user sees, cancels and lists only their own jobs (another
// user's job -> kPermissionDenied; a missing job -> kNotFound); admins see
// all. ListJobs for a non-admin forces owner = self; asking for another
// owner is kPermissionDenied. Entrypoint changes need an admin.
//
// Hooks the lead wires in (all optional, in Options):
// - planner: called by PreviewPlan with the spec and the current nodes;
//   without it PreviewPlan answers kUnimplemented("planner not wired yet").
// - desired_workers: called by Heartbeat (through the virtual
//   ComputeDesiredWorkers) to compute the node's complete desired set;
//   without it the desired set is empty.
//
// Node rows: a heartbeat writes the node's row (address, health "healthy",
// inventory, last_heartbeat_ms) only when it changes something durable: the
// first beat of a node since this service started, a changed address or
// inventory, or a stored last_heartbeat_ms older than
// options.node_row_refresh. Other beats only note the time in memory, and
// ListNodes shows that time. Liveness itself is the controller's (in memory,
// daemon/controller/failure_detector.h); after a restart the stored time is at most
// node_row_refresh old, and each node's first beat rewrites its row.
//
// Ownership: does not own the Store or the Clock; both must outlive it.
// Thread safety: every method may be called concurrently (durable state
// lives in the store, the node rows' cache and log tails under their own
// locks; options are read-only after construction).
#ifndef TESSERA_DAEMON_CONTROL_PLANE_SERVICE_H_
#define TESSERA_DAEMON_CONTROL_PLANE_SERVICE_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api/agent_protocol.h"
#include "api/control_plane.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "common/thread_annotations.h"
#include "daemon/auth/lease_tokens.h"
#include "daemon/controller/job_admission.h"
#include "daemon/controller/job_state_machine.h"
#include "daemon/inference_tracker.h"
#include "daemon/progress_summary.h"
#include "daemon/store/store.h"

namespace tessera::daemon {

// Ranked plans with reasons, as JSON, for a spec on the given nodes.
using PlannerFn =
    std::function<Result<api::Json>(const api::JobSpec& spec, const std::vector<api::Node>& nodes)>;

// The complete desired worker set for the node that sent `heartbeat`
// (already recorded in the store when called).
using DesiredWorkersFn =
    std::function<Result<std::vector<api::WorkerLaunch>>(const api::HeartbeatRequest& heartbeat)>;
// The same, answered through `done` now or later (a parked long poll), from
// any thread; the answer's heartbeat_interval_ms is ignored.
using DesiredWorkersAsyncFn = std::function<void(const api::HeartbeatRequest& heartbeat,
                                                 std::function<void(api::HeartbeatResponse)> done)>;

struct ControlPlaneOptions {
  std::chrono::milliseconds heartbeat_interval{1000};
  // Checks the ranks' chunk lease tokens; without it every lease call is
  // refused (kUnauthenticated). Not owned; must outlive the service.
  const LeaseTokens* lease_tokens = nullptr;
  // Why a pending job still waits (the planner's reason), or "": shown as
  // the job's reason while it is pending. Optional.
  std::function<std::string(api::JobId)> waiting_reason;
  // How long a chunk lease lasts without renewal.
  std::chrono::milliseconds lease_duration{30'000};
  // The ranks of a job's attempt that still work, each with its device
  // (JobController::LiveRanks), or nullopt when that attempt is not running:
  // an infer job's images/s and ETA then follow those ranks as they leave and
  // join (InferenceTracker). Optional: without it every rank that reported in
  // the attempt counts.
  std::function<std::optional<InferenceTracker::LiveRanks>(api::JobId, int64_t attempt)> live_ranks;
  PlannerFn planner;  // optional
  // This deployment's entrypoint policies and data roots, checked on every
  // submission after the allow-list (not owned; optional: without it only
  // ValidateJobSpec and the allow-list apply).
  const JobAdmission* admission = nullptr;
  // The most pending jobs a user may have (tesserad's users.*.
  // max_pending_jobs); a submission beyond it is refused
  // (kResourceExhausted, HTTP 429). Unset or 0: no limit. Two submissions of
  // one user in flight at once may both pass the check.
  std::function<int64_t(const std::string& user)> max_pending_jobs;
  // The queue as the controller's last pass ordered it (every user's rows);
  // optional: without it Queue answers kUnimplemented.
  std::function<std::vector<api::QueueRow>()> queue;
  // Where a node comes from ("agent" or "slurm"), shown by ListNodes;
  // optional (without it every node is "agent").
  std::function<std::string(const std::string& node)> node_source;
  DesiredWorkersFn desired_workers;  // optional
  // The join bundle's server part ({"join_token", "ca_sha256"}) for
  // JoinBundle; without it JoinBundle answers kUnimplemented. Optional.
  std::function<Result<api::Json>()> join_bundle;
  // Optional; when set, HeartbeatAsync uses it instead of desired_workers.
  DesiredWorkersAsyncFn desired_workers_async;
  // How old a node's stored last_heartbeat_ms may get before a beat that
  // changes nothing else rewrites it (see the class comment).
  std::chrono::milliseconds node_row_refresh{30'000};
};

class ControlPlaneService : public api::ControlPlane {
 public:
  // REQUIRES: store and clock non-null and outliving the service.
  ControlPlaneService(Store* store, Clock* clock, ControlPlaneOptions options = {});

  Result<api::Principal> Authenticate(std::string_view bearer_token) override;
  Status AuthenticateAgent(std::string_view join_token) override;

  Result<api::Job> SubmitJob(const api::Principal& who, const api::JobSpec& spec) override;
  Result<api::JobPage> ListJobs(const api::Principal& who, const api::JobQuery& query) override;
  Result<api::Job> GetJob(const api::Principal& who, api::JobId id) override;
  Result<api::Job> CancelJob(const api::Principal& who, api::JobId id) override;
  Result<std::vector<api::Event>> ListEvents(const api::Principal& who, api::JobId id,
                                             int64_t after, int64_t limit) override;
  Result<std::vector<api::Node>> ListNodes(const api::Principal& who) override;
  Result<std::vector<api::QueueRow>> Queue(const api::Principal& who) override;
  Result<std::vector<std::string>> JobLogs(const api::Principal& who, api::JobId id, int64_t rank,
                                           int64_t tail) override;
  Result<api::MetricsPage> JobMetrics(const api::Principal& who,
                                      const api::MetricsQuery& query) override;
  Result<api::Json> PreviewPlan(const api::Principal& who, const api::JobSpec& spec) override;
  Result<api::LeaseResponse> LeaseChunks(api::JobId job, std::string_view lease_token,
                                         const api::LeaseRequest& request) override;

  Result<std::vector<api::Entrypoint>> ListEntrypoints(const api::Principal& who) override;
  Status AllowEntrypoint(const api::Principal& who, const api::Entrypoint& entrypoint) override;
  Status DisallowEntrypoint(const api::Principal& who, std::string_view name) override;

  Result<api::Json> Heartbeat(const api::Json& heartbeat) override;

  Result<std::string> AuthenticateNode(std::string_view credential) override;
  Result<api::IssuedNodeCredential> EnrolNode(std::string_view node) override;
  Result<std::vector<api::NodeEnrolment>> ListNodeEnrolments(const api::Principal& who) override;
  Status RevokeNode(const api::Principal& who, std::string_view node) override;
  Status ReadmitNode(const api::Principal& who, std::string_view node) override;
  Result<api::Json> JoinBundle(const api::Principal& who) override;
  // Records the beat at once; the desired set comes from
  // options.desired_workers_async when set (possibly later), else as in
  // Heartbeat.
  void HeartbeatAsync(const api::Json& heartbeat, HeartbeatDone done) override;
  Status Ready() override;
  void AppendMetrics(std::string* out) override;

  // ---- for the daemon's own loops (reconciler, failure detector) ----

  // Applies a state-machine event to a job: reads it, asks NextJobState
  // (max_attempts from its spec), and compare-and-sets the new state with an
  // event. `reason` (if not empty) is recorded, else the machine's own.
  // Retries a few times when the job changed underneath. A Launch also
  // records the new attempt row with the job's plan.
  Result<api::Job> ApplyJobEvent(api::JobId id, JobEvent event, std::string_view reason,
                                 std::optional<api::Json> plan = std::nullopt);

  // The job's inference progress (null for train jobs or before its input
  // was split into chunks).
  api::Json InferenceProgressOf(const api::Job& job);

  // Makes Ready() answer kUnavailable (the daemon is stopping).
  void SetStopping() { stopping_ = true; }

 protected:
  // The desired-set hook. Default: options.desired_workers, or empty.
  virtual Result<std::vector<api::WorkerLaunch>> ComputeDesiredWorkers(
      const api::HeartbeatRequest& heartbeat);

 private:
  // The job if `who` may see it: kNotFound / kPermissionDenied otherwise.
  Result<api::Job> VisibleJob(const api::Principal& who, api::JobId id);

  // Records a heartbeat: the node, its progress, its ranks' logs. A beat
  // that says inventory_unchanged gets the stored inventory filled in;
  // *send_inventory tells whether the controller has none to fill in.
  Result<api::HeartbeatRequest> RecordHeartbeat(const api::Json& heartbeat, bool* send_inventory);

  // The node row a beat should leave in the store (filled from what this
  // service knows when the beat says inventory_unchanged), and whether it
  // must be written; records the beat's time in memory.
  Status RecordNodeRow(api::HeartbeatRequest* req, bool* send_inventory, int64_t now_ms)
      EXCLUDES(nodes_mu_);

  void AppendInferenceMetrics(std::string* out);
  // The job as the API shows it: with its inference progress, and a pending
  // job's reason saying why it still waits.
  api::Job WithInference(api::Job job);
  // kResourceExhausted when `user` already has their max_pending_jobs.
  Status CheckPendingLimit(const std::string& user);

  Store* const store_;
  Clock* const clock_;
  InferenceTracker tracker_;
  const ControlPlaneOptions options_;
  std::atomic<bool> stopping_{false};

  // Log tails from heartbeats, per (job, rank): the newest attempt's lines.
  struct LogTail {
    int64_t attempt = 0;
    std::vector<std::string> lines;
  };
  // Log tails are kept while their job lives and for kEndedLogsKeptFor after
  // a sweep first saw it ended (so a finished job's page still shows them),
  // at most kEndedJobsWithLogs ended jobs (the longest-ended go first). Every
  // kLogSweepEvery a beat sweeps; a job that is gone loses its tails at once.
  static constexpr size_t kMaxLogLines = 100;
  static constexpr size_t kMaxLogLineBytes = 4096;
  static constexpr std::chrono::seconds kLogSweepEvery{5};
  static constexpr std::chrono::minutes kEndedLogsKeptFor{15};
  static constexpr size_t kEndedJobsWithLogs = 32;
  void DropEndedJobsLogs() EXCLUDES(logs_mu_);
  // Node rows as this service last wrote (or read) them, and when each node
  // was last heard from.
  struct KnownNode {
    // As stored (row->last_heartbeat_ms: when written); none while unknown
    // (never written by this service, or a write failed or raced).
    std::optional<api::Node> row;
    int64_t seen_ms = 0;  // the newest beat's time
    uint64_t write = 0;   // the newest write started for it (0: none)
  };
  Mutex nodes_mu_;
  std::map<std::string, KnownNode, std::less<>> nodes_ GUARDED_BY(nodes_mu_);
  uint64_t node_writes_ GUARDED_BY(nodes_mu_) = 0;

  Mutex logs_mu_;
  std::map<std::pair<api::JobId, int64_t>, LogTail> logs_ GUARDED_BY(logs_mu_);
  std::chrono::steady_clock::time_point logs_swept_at_ GUARDED_BY(logs_mu_){};
  // Jobs with log tails that a sweep saw ended, and when it first did.
  std::map<api::JobId, std::chrono::steady_clock::time_point> logs_ended_at_ GUARDED_BY(logs_mu_);
  // The age of the progress summary last recorded per job, so that another
  // node's later beat with an older line (a left-out rank's, an ended
  // attempt's) does not replace it (daemon/progress_summary.h). Swept with
  // the log tails; after a restart the first beat's line is taken.
  std::map<api::JobId, ProgressAge> summary_age_ GUARDED_BY(logs_mu_);
};

}  // namespace tessera::daemon

#endif  // TESSERA_DAEMON_CONTROL_PLANE_SERVICE_H_
