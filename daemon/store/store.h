// Store: the durable state of tesserad behind one interface ("Env"-style).
//
// Purpose: jobs, job attempts, the append-only event log, nodes and their
// devices, users and API tokens, the entrypoint allow-list, the agent join
// token and the nodes' own credentials. Backends: SqliteStore
// (daemon/store/sqlite_store.h, the real one), MemoryStore (daemon/store/memory_store.h,
// same semantics, no disk) and FaultyStore (daemon/store/faulty_store.h, wraps
// another and injects errors).
//
// Semantics every backend shares (tests/daemon/store*_test.cc check them):
// - A write that returns OK is durable (SqliteStore: committed with
//   synchronous=FULL before the call returns).
// - TransitionJob is a compare-and-set on the job's state; the state change
//   and its event are written together or not at all. InsertJob writes the
//   job and its submission event together.
// - The store does not know the job state machine; callers consult
//   daemon/controller/job_state_machine.h first.
// - Storage without policy: backends store and return rows. Whether a
//   presented API token, join token or node credential is valid (secret
//   compare, revocation) and what an enrolment may do are decided once,
//   above the store, in daemon/auth/; who may do what (roles, owners) is
//   ControlPlaneService's.
// - Tokens: only an id, a salt and SHA-256(salt || secret) are stored; the
//   plaintext is returned once by CreateToken and never kept.
// - Errors: kNotFound for a missing row, kFailedPrecondition for a failed
//   compare-and-set, kAlreadyExists for a duplicate key, kInvalidArgument for
//   malformed input (naming the field), kUnavailable for a closed or busy
//   store.
// - Timestamps are Unix milliseconds supplied by the caller (the store reads
//   no clock for records).
//
// Ownership: the caller owns the Store; returned values are copies.
// Thread safety: every method of every backend is safe to call concurrently.
#ifndef TESSERA_DAEMON_STORE_STORE_H_
#define TESSERA_DAEMON_STORE_STORE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/entrypoint_kind.h"
#include "api/node_identity.h"
#include "api/types.h"
#include "common/status.h"

namespace tessera::daemon {

// A job to insert; the store assigns the id.
struct NewJob {
  std::string owner;
  api::JobSpec spec;
  int64_t now_ms = 0;                // created_ms, updated_ms and the event's ts_ms
  std::string reason = "submitted";  // the submission event's reason
};

// A compare-and-set state change and the event that records it.
struct JobTransition {
  api::JobId job_id = 0;
  api::JobState expected = api::JobState::kPending;  // refused unless the job is in it
  api::JobState next = api::JobState::kPending;
  std::string reason;
  int64_t attempt = 0;            // the job's attempt count after the change
  std::optional<api::Json> plan;  // replaces the job's plan when set
  int64_t now_ms = 0;
};

// One attempt of a job: the plan it ran with and how it ended.
struct JobAttempt {
  api::JobId job_id = 0;
  int64_t attempt = 0;  // 1-based
  api::Json plan;       // null when none
  int64_t started_ms = 0;
  std::optional<int64_t> ended_ms;
  std::string result;  // "" while running; e.g. "succeeded", "rank 2 exited 137"
  friend bool operator==(const JobAttempt&, const JobAttempt&) = default;
};

// ---- inference chunks ----
// An infer job's input, split into chunks that ranks lease (api/lease_protocol.h).
enum class ChunkState { kPending, kLeased, kDone };
std::string_view ChunkStateName(ChunkState state);  // "pending" | "leased" | "done"

struct InferChunk {
  api::JobId job_id = 0;
  int64_t chunk = 0;  // 0-based, dense per job
  std::vector<std::string> items;
  ChunkState state = ChunkState::kPending;
  int64_t attempt = 0;  // holder of the lease (kLeased) or the attempt that finished it (kDone)
  int64_t rank = -1;
  int64_t lease_until_ms = 0;
  int64_t done_ms = 0;
  friend bool operator==(const InferChunk&, const InferChunk&) = default;
};

// One lease call: record `completed` as done, renew what (attempt, rank)
// holds, and lease up to max_chunks more. A call asking for chunks
// (max_chunks > 0) says the rank holds nothing but `completed`: chunks still
// leased to it (granted by an answer it never received) are handed to it
// again first. Then a chunk can be leased when it is pending, or leased with
// lease_until_ms <= now_ms, or leased by an attempt older than `attempt`
// (that attempt ended). Lowest chunk numbers first.
struct ChunkLeaseRequest {
  api::JobId job_id = 0;
  int64_t attempt = 0;
  int64_t rank = 0;
  std::vector<int64_t> completed;  // chunk numbers whose outputs are on disk
  int64_t max_chunks = 1;
  int64_t now_ms = 0;
  int64_t lease_until_ms = 0;
};

struct ChunkCounts {
  int64_t chunks_total = 0;
  int64_t chunks_done = 0;
  int64_t chunks_leased = 0;  // leased, expired or not
  int64_t images_total = 0;
  int64_t images_done = 0;
  friend bool operator==(const ChunkCounts&, const ChunkCounts&) = default;
};

struct ChunkLeaseResult {
  std::vector<InferChunk> leased;  // newly leased chunks
  int64_t newly_done = 0;          // chunks of `completed` that were not done before
  ChunkCounts counts;              // after the call
};

// ---- metrics history ----
// Every progress line a heartbeat brings is kept per (job, rank) across
// attempts, thinned so a week-long run stays small. With M the highest step
// of a (job, rank) and B = M - recent_steps:
// - steps > B ("recent"): every point is kept;
// - steps <= B ("older"): only points whose step is a multiple of the
//   series' stride s are kept. s is a power of two, starts at 1 and never
//   shrinks; whenever more than older_points older points remain, s doubles
//   and the older points whose step is not a multiple of it are removed.
// So the older part holds at most older_points evenly spaced steps, and each
// write does work bounded by the points it adds plus older_points.
struct MetricsRetention {
  int64_t recent_steps = 1000;
  int64_t older_points = 500;
};

// One history point of a job (see api::MetricPoint).
struct JobMetricPoint {
  api::JobId job_id = 0;
  api::MetricPoint point;
};

// What one heartbeat brings, written together (one transaction for
// SqliteStore, so a beat costs one commit however many ranks it reports).
struct ProgressReport {
  std::map<api::JobId, api::Json> latest;  // each job's new progress summary
  std::vector<JobMetricPoint> points;      // appended to the metrics history
};

// An API token without its secret.
struct TokenInfo {
  std::string id;  // public part of the token, also the key to revoke it
  std::string user;
  api::Role role = api::Role::kUser;
  int64_t created_ms = 0;
  std::optional<int64_t> revoked_ms;
  friend bool operator==(const TokenInfo&, const TokenInfo&) = default;
};

// What CreateToken returns: the only time the plaintext exists.
struct IssuedToken {
  TokenInfo info;
  std::string plaintext;  // "tsr_<id>_<secret>"
};

// A stored secret: a random salt and SHA-256(salt || secret)
// (daemon/auth/token_crypto.h), never the secret.
struct SecretDigest {
  std::string salt;
  std::string hash;
  friend bool operator==(const SecretDigest&, const SecretDigest&) = default;
};

// An API token's row: its info and the digest of its secret.
struct TokenRecord {
  TokenInfo info;
  SecretDigest secret;
  friend bool operator==(const TokenRecord&, const TokenRecord&) = default;
};

// A node credential's row (api/node_identity.h): the enrolment admins see and
// the digest of the credential's secret.
struct NodeCredentialRecord {
  api::NodeEnrolment enrolment;
  SecretDigest secret;
  friend bool operator==(const NodeCredentialRecord&, const NodeCredentialRecord&) = default;
};

// A latency histogram. counts[i] counts samples <= upper_bounds[i] and above
// the previous bound (not cumulative); counts.back() is the +Inf bucket, so
// counts.size() == upper_bounds.size() + 1.
struct HistogramSnapshot {
  std::vector<double> upper_bounds;
  std::vector<uint64_t> counts;
  double sum = 0.0;
  uint64_t count = 0;
};

struct StoreStats {
  HistogramSnapshot commit_seconds;  // time of each write transaction (batch)
  uint64_t commits = 0;              // write transactions committed
  uint64_t writes = 0;               // write operations acknowledged (OK or not)
};

// The built-in entrypoints every new store starts with (api/entrypoint_kind.h).
using api::kBuiltinEntrypoints;

// How many jobs are in each state.
using JobStateCounts = std::map<api::JobState, int64_t>;

class Store {
 public:
  virtual ~Store() = default;

  // OK while the store is open and usable; kUnavailable once closed.
  virtual Status Health() = 0;

  // ---- jobs ----
  // Inserts a pending job and its submission event (from "" to "pending").
  // Returns the job with its assigned id.
  virtual Result<api::Job> InsertJob(const NewJob& job) = 0;
  virtual Result<api::Job> GetJob(api::JobId id) = 0;
  // Jobs with id > query.after matching the filters, by ascending id, at most
  // query.limit (clamped to 1..1000). next_after is set when more may follow.
  virtual Result<api::JobPage> ListJobs(const api::JobQuery& query) = 0;
  // Compare-and-set: kNotFound when the job is missing, kFailedPrecondition
  // when it is not in t.expected. Appends the event in the same transaction.
  // Returns the job after the change.
  virtual Result<api::Job> TransitionJob(const JobTransition& t) = 0;
  // Events of a job with id > after, oldest first, at most limit (clamped to
  // 1..1000). An unknown job has no events (empty list).
  virtual Result<std::vector<api::Event>> ListEvents(api::JobId job, int64_t after,
                                                     int64_t limit) = 0;
  // Replaces the job's latest progress summary (no event). kNotFound if missing.
  virtual Status SetJobProgress(api::JobId job, const api::Json& progress) = 0;
  // Every state appears, zero when no job is in it.
  virtual Result<JobStateCounts> CountJobsByState() = 0;

  // ---- metrics history ----
  // Sets each job's latest progress (as SetJobProgress) and appends the
  // points to the jobs' histories, thinned by the backend's MetricsRetention,
  // all in one write. A point already recorded (same job, rank, attempt and
  // step) is kept as it was. Jobs that do not exist are skipped. REQUIRES:
  // step, rank >= 0 (else kInvalidArgument naming "points[i].step" / ".rank").
  virtual Status RecordProgress(const ProgressReport& report) = 0;
  // A page of a job's history (api::MetricsPage: by step, attempt, rank;
  // never splitting a step). query.limit is clamped to
  // 1..api::kMaxMetricsPageSize. An unknown job has an empty history.
  virtual Result<api::MetricsPage> ListMetrics(const api::MetricsQuery& query) = 0;

  // ---- attempts ----
  // kNotFound when the job is missing, kAlreadyExists for a duplicate number.
  virtual Status InsertAttempt(const JobAttempt& attempt) = 0;
  virtual Result<JobAttempt> GetAttempt(api::JobId job, int64_t attempt) = 0;
  // Ascending attempt number.
  virtual Result<std::vector<JobAttempt>> ListAttempts(api::JobId job) = 0;
  virtual Status FinishAttempt(api::JobId job, int64_t attempt, int64_t ended_ms,
                               std::string_view result) = 0;
  virtual Status DeleteAttempt(api::JobId job, int64_t attempt) = 0;
  // Replaces the attempt's plan in one write (a running attempt that
  // re-formed, grew or dropped ranks). kNotFound when there is no such attempt.
  virtual Status SetAttemptPlan(api::JobId job, int64_t attempt, const api::Json& plan) = 0;

  // ---- nodes ----
  // Inserts or replaces the node and its whole device list (device.node is
  // set to node.name). REQUIRES: non-empty name, valid health, unique device
  // indices (else kInvalidArgument).
  virtual Status UpsertNode(const api::Node& node) = 0;
  virtual Result<api::Node> GetNode(std::string_view name) = 0;
  // By name; devices by index.
  virtual Result<std::vector<api::Node>> ListNodes() = 0;
  // health: "healthy" | "suspect" | "dead".
  virtual Status SetNodeHealth(std::string_view name, std::string_view health) = 0;

  // ---- users and tokens ----
  // Rows only: daemon/auth/api_tokens.h decides whether a presented token is
  // valid.
  // Issues a token for `user`: a fresh id and secret (daemon/auth/token_crypto.h)
  // stored as a row by InsertToken. Returns the plaintext, the only time it
  // exists. Not virtual: written once for every backend. REQUIRES: non-empty
  // user (else kInvalidArgument).
  Result<IssuedToken> CreateToken(std::string_view user, api::Role role, int64_t now_ms);
  // Stores a token's row, creating its user if new. kAlreadyExists for an id
  // in use. REQUIRES: non-empty id and user (ValidateTokenRecord).
  virtual Status InsertToken(const TokenRecord& record) = 0;
  // The row of a token, revoked or not; kNotFound for an unknown id.
  virtual Result<TokenRecord> GetToken(std::string_view token_id) = 0;
  // Sets revoked_ms; a revoked token keeps its first revocation time.
  // kNotFound for an unknown id.
  virtual Status RevokeToken(std::string_view token_id, int64_t now_ms) = 0;
  // Ordered by user, then id. No secrets.
  virtual Result<std::vector<TokenInfo>> ListTokens() = 0;

  // ---- entrypoint allow-list ----
  // By name.
  virtual Result<std::vector<api::Entrypoint>> ListEntrypoints() = 0;
  virtual Result<api::Entrypoint> GetEntrypoint(std::string_view name) = 0;
  // Inserts or replaces. REQUIRES: "builtin:<x>" with an empty command, or
  // "cmd:<x>" / "model:<x>" with an absolute command path (else
  // kInvalidArgument).
  virtual Status PutEntrypoint(const api::Entrypoint& entrypoint) = 0;
  virtual Status DeleteEntrypoint(std::string_view name) = 0;

  // ---- agent join token ----
  // Stores a fresh salt and SHA-256(salt || plaintext) by PutAgentJoinToken,
  // replacing any earlier join token. Not virtual. REQUIRES: non-empty
  // plaintext (else kInvalidArgument).
  Status SetAgentJoinToken(std::string_view plaintext);
  // Replaces the stored join token digest.
  virtual Status PutAgentJoinToken(const SecretDigest& digest) = 0;
  // kNotFound when no join token is set.
  virtual Result<SecretDigest> GetAgentJoinToken() = 0;

  // ---- node credentials (api/node_identity.h) ----
  // Rows only: the enrolment rules and the credential check are
  // daemon/auth/node_credentials.h's.
  // The record of `node`; kNotFound ("node X is not enrolled") when none.
  virtual Result<NodeCredentialRecord> GetNodeCredential(std::string_view node) = 0;
  // The record holding credential id `credential_id`; kNotFound when none.
  virtual Result<NodeCredentialRecord> FindNodeCredential(std::string_view credential_id) = 0;
  // Compare-and-set on record.enrolment.node's record: writes `record` (all
  // of it) when the node's current enrolment equals `expected` (nullopt: the
  // node has no record); kFailedPrecondition when it does not.
  // kAlreadyExists when another node holds the credential id. REQUIRES:
  // non-empty node name and credential id (else kInvalidArgument).
  virtual Status PutNodeCredential(const NodeCredentialRecord& record,
                                   const std::optional<api::NodeEnrolment>& expected) = 0;
  // Compare-and-set: forgets expected.node's record when its enrolment
  // equals `expected`. kNotFound when the node has no record,
  // kFailedPrecondition when it differs.
  virtual Status DeleteNodeCredential(const api::NodeEnrolment& expected) = 0;
  // Every enrolment, revoked ones too, by node name. No secrets.
  virtual Result<std::vector<api::NodeEnrolment>> ListNodeEnrolments() = 0;
  // Sets the node's revoked_ms; a revoked node keeps its first revocation
  // time. kNotFound for a name never enrolled.
  virtual Status RevokeNode(std::string_view node, int64_t now_ms) = 0;

  // ---- inference chunks ----
  // Writes every chunk of an infer job (numbered from 0) in one transaction.
  // kNotFound when the job is missing; kAlreadyExists when it has chunks.
  virtual Status InsertChunks(api::JobId job,
                              const std::vector<std::vector<std::string>>& chunks) = 0;
  // See ChunkLeaseRequest. Completing a chunk that is already done, or that
  // the job does not have, changes nothing (the call stays idempotent under
  // retries); everything happens in one transaction, durable on return.
  virtual Result<ChunkLeaseResult> LeaseChunks(const ChunkLeaseRequest& request) = 0;
  // All zero for a job without chunks.
  virtual Result<ChunkCounts> CountChunks(api::JobId job) = 0;
  // A listing written in batches (daemon/controller/input_lister.h), each batch its own
  // transaction: AppendChunks adds chunks numbered first_chunk, first_chunk
  // + 1, ... (kAlreadyExists when one of them exists, kNotFound for a
  // missing job); SealChunks marks the job's input complete (InsertChunks
  // seals at once); ChunksSealed says whether it is; DeleteChunks drops the
  // job's chunks (an unsealed listing left by a restart is listed again).
  virtual Status AppendChunks(api::JobId job, int64_t first_chunk,
                              const std::vector<std::vector<std::string>>& chunks) = 0;
  virtual Status SealChunks(api::JobId job) = 0;
  virtual Result<bool> ChunksSealed(api::JobId job) = 0;
  virtual Status DeleteChunks(api::JobId job) = 0;
  // Every chunk of the job, by number (tests and tools; large for big jobs).
  virtual Result<std::vector<InferChunk>> ListChunks(api::JobId job) = 0;

  // ---- metrics ----
  virtual StoreStats Stats() = 0;
};

// Checks shared by every backend, so they refuse the same inputs.
Status ValidateNode(const api::Node& node);
// The pending job row `in` makes (id 0: the backend assigns it); kInvalidArgument
// naming "owner" when it has none.
Result<api::Job> PendingJobOf(const NewJob& in);
Status ValidateNodeHealth(std::string_view health);
Status ValidateEntrypoint(const api::Entrypoint& entrypoint);
Status ValidateTokenRecord(const TokenRecord& record);
Status ValidateNodeCredentialRecord(const NodeCredentialRecord& record);
Status ValidateChunkLeaseRequest(const ChunkLeaseRequest& request);
std::optional<ChunkState> ParseChunkState(std::string_view name);
// Whether `chunk` may be leased by `request` (see ChunkLeaseRequest).
bool ChunkLeasable(const InferChunk& chunk, const ChunkLeaseRequest& request);
// Clamps a page size to 1..1000.
int64_t ClampStoreLimit(int64_t limit);
Status ValidateProgressReport(const ProgressReport& report);
// Orders metric points as pages list them: step, attempt, rank.
bool MetricPageOrder(const api::MetricPoint& a, const api::MetricPoint& b);
// Cuts `rows` (the first limit + 1 points of a query, in page order) into a
// page that never splits a step: the trailing points of a step that does not
// fit whole are left for the next page; when the first step alone has more
// than `limit` points, `whole_step(step)` supplies all of them.
Result<api::MetricsPage> CutMetricsPage(
    api::JobId job, std::vector<api::MetricPoint> rows, int64_t limit,
    const std::function<Result<std::vector<api::MetricPoint>>(int64_t step)>& whole_step);

}  // namespace tessera::daemon

#endif  // TESSERA_DAEMON_STORE_STORE_H_
