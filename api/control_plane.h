// ControlPlane: what the HTTP routes ask of the controller.
//
// The api/ module knows nothing of the daemon's internals; tesserad
// implements this interface (daemon/control_plane_service.h) on top of its
// store, state machine and planner. Routes are plain functions that call it,
// so they are tested without sockets against a real implementation on a
// temporary SQLite file.
//
// Authorization is the implementation's job: every call that takes a
// Principal checks it (a user sees and changes only their own jobs; admin
// calls need Role::kAdmin) and answers kPermissionDenied / kNotFound.
//
// Thread safety: implementations must be safe to call from many HTTP
// sessions at once.
#ifndef TESSERA_API_CONTROL_PLANE_H_
#define TESSERA_API_CONTROL_PLANE_H_

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "api/lease_protocol.h"
#include "api/node_identity.h"
#include "api/types.h"
#include "common/status.h"

namespace tessera::api {

class ControlPlane {
 public:
  virtual ~ControlPlane() = default;

  // Maps a bearer token (the text after "Bearer ") to a user.
  // kUnauthenticated when unknown or revoked.
  virtual Result<Principal> Authenticate(std::string_view bearer_token) = 0;

  // Checks an agent's join token. kUnauthenticated when wrong.
  virtual Status AuthenticateAgent(std::string_view join_token) = 0;

  // REQUIRES: spec passed ValidateJobSpec. Checks the entrypoint allow-list
  // (kInvalidArgument naming "entrypoint"), makes the job durable (the
  // returned Job is on disk when this returns), records a "submitted" event.
  virtual Result<Job> SubmitJob(const Principal& who, const JobSpec& spec) = 0;

  virtual Result<JobPage> ListJobs(const Principal& who, const JobQuery& query) = 0;
  virtual Result<Job> GetJob(const Principal& who, JobId id) = 0;
  // kFailedPrecondition when the job already ended.
  virtual Result<Job> CancelJob(const Principal& who, JobId id) = 0;
  // Events with id > after, oldest first, at most limit.
  virtual Result<std::vector<Event>> ListEvents(const Principal& who, JobId id, int64_t after,
                                                int64_t limit) = 0;

  virtual Result<std::vector<Node>> ListNodes(const Principal& who) = 0;

  // The waiting jobs in the order the scheduler offers them devices, as of
  // its last pass; a non-admin sees other users' rows without job id or
  // reason.
  virtual Result<std::vector<QueueRow>> Queue(const Principal& who) {
    return Unimplemented("this control plane does not show its queue");
  }

  // The last `tail` lines (1..100) of a rank's log in the job's newest
  // attempt, as that rank's agent last reported them. kNotFound when no
  // agent reported a log for that rank.
  virtual Result<std::vector<std::string>> JobLogs(const Principal& who, JobId id, int64_t rank,
                                                   int64_t tail) {
    return Unimplemented("logs are not available from this control plane");
  }

  // A page of a job's metrics history: the progress lines its ranks wrote,
  // across attempts, each with its attempt (a change marks a recovery; the
  // job's events say when), thinned as daemon/README.md says. Visible to the
  // job's owner and admins, like GetJob. kInvalidArgument naming "rank",
  // "attempt", "since" (all >= 0) or "limit" (1..kMaxMetricsPageSize).
  virtual Result<MetricsPage> JobMetrics(const Principal& who, const MetricsQuery& query) {
    return Unimplemented("metrics history is not available from this control plane");
  }

  // The chunk lease route of infer jobs (api/lease_protocol.h), called by
  // the job's ranks with their lease token (TESSERA_LEASE_TOKEN).
  // kUnauthenticated unless lease_token belongs to (job, request.attempt);
  // kFailedPrecondition when that attempt is no longer the job's current
  // one, or the job is not an infer job; kNotFound for a missing job.
  virtual Result<LeaseResponse> LeaseChunks(JobId job, std::string_view lease_token,
                                            const LeaseRequest& request) {
    return Unimplemented("chunk leases are not available from this control plane");
  }

  // Dry run of the planner for a spec: ranked plans with reasons, as JSON.
  // While the model's profile is being measured, the state instead:
  // {"state": "measuring_profile", "message": "measuring the model profile
  // (about N s)", "retry_after_s": R} (the route answers it with 202).
  // kUnimplemented until a planner is wired in.
  virtual Result<Json> PreviewPlan(const Principal& who, const JobSpec& spec) = 0;

  // Entrypoint allow-list. Listing is open to every user; changes need admin.
  virtual Result<std::vector<Entrypoint>> ListEntrypoints(const Principal& who) = 0;
  virtual Status AllowEntrypoint(const Principal& who, const Entrypoint& entrypoint) = 0;
  virtual Status DisallowEntrypoint(const Principal& who, std::string_view name) = 0;

  // Agent protocol: one heartbeat in, the desired state for that node out
  // (see api/agent_protocol.h). REQUIRES: AuthenticateAgent succeeded.
  virtual Result<Json> Heartbeat(const Json& heartbeat) = 0;

  // Heartbeat answered later: `done` gets the answer exactly once, from any
  // thread, possibly after this call returned (a long poll is parked until
  // the node has work or its wait ends, and no thread waits for it). The
  // HTTP route uses this one. Default: done(Heartbeat(heartbeat)) at once.
  // REQUIRES: AuthenticateAgent succeeded; done does not block.
  using HeartbeatDone = std::function<void(Result<Json>)>;
  virtual void HeartbeatAsync(const Json& heartbeat, HeartbeatDone done) {
    done(Heartbeat(heartbeat));
  }

  // ---- node identity (api/node_identity.h) ----
  // The node a heartbeat's credential belongs to. kUnauthenticated when it
  // is malformed, unknown or revoked (the join token is not a credential).
  virtual Result<std::string> AuthenticateNode(std::string_view credential) {
    return Unauthenticated("node credentials are not available from this control plane");
  }
  // Enrols a node and returns its credential, once (the rules are in
  // api/node_identity.h). REQUIRES: AuthenticateAgent (the join token)
  // succeeded and the name passed ValidateNodeName.
  virtual Result<IssuedNodeCredential> EnrolNode(std::string_view node) {
    return Unimplemented("node enrolment is not available from this control plane");
  }
  // Admin only (kPermissionDenied otherwise): every enrolment; revoking a
  // node's credential (its heartbeats are refused at once; kNotFound for a
  // name never enrolled); readmitting a revoked name so it may enrol again.
  virtual Result<std::vector<NodeEnrolment>> ListNodeEnrolments(const Principal& who) {
    return Unimplemented("node enrolments are not available from this control plane");
  }
  virtual Status RevokeNode(const Principal& who, std::string_view node) {
    return Unimplemented("node enrolments are not available from this control plane");
  }
  virtual Status ReadmitNode(const Principal& who, std::string_view node) {
    return Unimplemented("node enrolments are not available from this control plane");
  }
  // Admin only: what a new node needs besides the controller's URL, as
  // {"join_token", "ca_sha256" (null without TLS)} (api/join_bundle.h).
  virtual Result<Json> JoinBundle(const Principal& who) {
    return Unimplemented("join bundles are not available from this control plane");
  }

  // Readiness: OK once the store is open and the daemon is not stopping.
  virtual Status Ready() = 0;

  // Appends Prometheus text-format lines for controller-owned metrics
  // (jobs by state, store commit latency) to *out.
  virtual void AppendMetrics(std::string* out) = 0;
};

}  // namespace tessera::api

#endif  // TESSERA_API_CONTROL_PLANE_H_
