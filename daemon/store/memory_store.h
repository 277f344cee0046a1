// MemoryStore: a Store kept in process memory, with SqliteStore's semantics.
//
// Purpose: fast tests and tools that need a store but no file. Nothing
// survives destruction. Ids are assigned from 1 upward like SQLite's.
// Stats(): every write counts as one commit; the histogram stays empty.
//
// Ownership: owns its data. Thread safety: every method takes one mutex (mu_;
// the *Locked helpers require it held).
#ifndef TESSERA_DAEMON_STORE_MEMORY_STORE_H_
#define TESSERA_DAEMON_STORE_MEMORY_STORE_H_

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "common/thread_annotations.h"
#include "daemon/store/store.h"

namespace tessera::daemon {

class MemoryStore final : public Store {
 public:
  // Seeded with kBuiltinEntrypoints.
  explicit MemoryStore(MetricsRetention metrics_retention = {});

  Status Health() override;

  Result<api::Job> InsertJob(const NewJob& job) override;
  Result<api::Job> GetJob(api::JobId id) override;
  Result<api::JobPage> ListJobs(const api::JobQuery& query) override;
  Result<api::Job> TransitionJob(const JobTransition& t) override;
  Result<std::vector<api::Event>> ListEvents(api::JobId job, int64_t after, int64_t limit) override;
  Status SetJobProgress(api::JobId job, const api::Json& progress) override;
  Result<std::map<api::JobState, int64_t>> CountJobsByState() override;
  Status RecordProgress(const ProgressReport& report) override;
  Result<api::MetricsPage> ListMetrics(const api::MetricsQuery& query) override;

  Status InsertAttempt(const JobAttempt& attempt) override;
  Result<JobAttempt> GetAttempt(api::JobId job, int64_t attempt) override;
  Result<std::vector<JobAttempt>> ListAttempts(api::JobId job) override;
  Status FinishAttempt(api::JobId job, int64_t attempt, int64_t ended_ms,
                       std::string_view result) override;
  Status DeleteAttempt(api::JobId job, int64_t attempt) override;

  Status UpsertNode(const api::Node& node) override;
  Result<api::Node> GetNode(std::string_view name) override;
  Result<std::vector<api::Node>> ListNodes() override;
  Status SetNodeHealth(std::string_view name, std::string_view health) override;

  Status InsertToken(const TokenRecord& record) override;
  Result<TokenRecord> GetToken(std::string_view token_id) override;
  Status RevokeToken(std::string_view token_id, int64_t now_ms) override;
  Result<std::vector<TokenInfo>> ListTokens() override;

  Result<std::vector<api::Entrypoint>> ListEntrypoints() override;
  Result<api::Entrypoint> GetEntrypoint(std::string_view name) override;
  Status PutEntrypoint(const api::Entrypoint& entrypoint) override;
  Status DeleteEntrypoint(std::string_view name) override;

  Status PutAgentJoinToken(const SecretDigest& digest) override;
  Result<SecretDigest> GetAgentJoinToken() override;

  Result<NodeCredentialRecord> GetNodeCredential(std::string_view node) override;
  Result<NodeCredentialRecord> FindNodeCredential(std::string_view credential_id) override;
  Status PutNodeCredential(const NodeCredentialRecord& record,
                           const std::optional<api::NodeEnrolment>& expected) override;
  Status DeleteNodeCredential(const api::NodeEnrolment& expected) override;
  Result<std::vector<api::NodeEnrolment>> ListNodeEnrolments() override;
  Status RevokeNode(std::string_view node, int64_t now_ms) override;

  Status InsertChunks(api::JobId job, const std::vector<std::vector<std::string>>& chunks) override;
  Result<ChunkLeaseResult> LeaseChunks(const ChunkLeaseRequest& request) override;
  Result<ChunkCounts> CountChunks(api::JobId job) override;
  Status AppendChunks(api::JobId job, int64_t first_chunk,
                      const std::vector<std::vector<std::string>>& chunks) override;
  Status SealChunks(api::JobId job) override;
  Result<bool> ChunksSealed(api::JobId job) override;
  Status DeleteChunks(api::JobId job) override;
  Result<std::vector<InferChunk>> ListChunks(api::JobId job) override;

  StoreStats Stats() override;

 private:
  ChunkCounts CountChunksLocked(api::JobId job) const REQUIRES(mu_);

  // One (job, rank)'s history: points by (step, attempt), thinned as
  // MetricsRetention says.
  struct MetricSeries {
    int64_t max_step = -1;
    int64_t stride = 1;
    int64_t thinned_through = -1;
    std::map<std::pair<int64_t, int64_t>, api::MetricPoint> points;
  };
  void AppendSeriesLocked(MetricSeries& series, const std::vector<const api::MetricPoint*>& points)
      REQUIRES(mu_);

  Mutex mu_;
  api::JobId next_job_id_ GUARDED_BY(mu_) = 1;
  int64_t next_event_id_ GUARDED_BY(mu_) = 1;
  std::map<api::JobId, api::Job> jobs_ GUARDED_BY(mu_);
  std::vector<api::Event> events_ GUARDED_BY(mu_);
  std::map<std::pair<api::JobId, int64_t>, JobAttempt> attempts_ GUARDED_BY(mu_);
  std::map<std::string, api::Node, std::less<>> nodes_ GUARDED_BY(mu_);
  std::map<std::string, TokenRecord, std::less<>> tokens_ GUARDED_BY(mu_);  // by id
  std::map<std::string, api::Entrypoint, std::less<>> entrypoints_ GUARDED_BY(mu_);
  std::optional<SecretDigest> join_token_ GUARDED_BY(mu_);
  std::map<api::JobId, std::vector<InferChunk>> chunks_ GUARDED_BY(mu_);  // by chunk number
  std::set<api::JobId> sealed_ GUARDED_BY(mu_);                           // inputs listed whole
  std::map<std::string, NodeCredentialRecord, std::less<>> node_credentials_
      GUARDED_BY(mu_);  // by node
  const MetricsRetention retention_;
  std::map<std::pair<api::JobId, int64_t>, MetricSeries> metrics_
      GUARDED_BY(mu_);  // by (job, rank)
  uint64_t writes_ GUARDED_BY(mu_) = 0;
};

}  // namespace tessera::daemon

#endif  // TESSERA_DAEMON_STORE_MEMORY_STORE_H_
