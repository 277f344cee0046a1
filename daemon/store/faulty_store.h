// FaultyStore: wraps another Store and fails a chosen read or write, for
// tests of error paths (a full disk, a busy database, a lost connection).
//
// Every Store method is classified as a read or a write (Health and Stats are
// neither and never fail). ArmWriteFault(n, s) makes the n-th write from now
// (1-based) return `s` without reaching the wrapped store; ArmReadFault
// likewise for reads. With `sticky`, that write and every later one fails
// until Disarm(). Calls that are not failed pass through unchanged.
//
// Ownership: does not own the wrapped store, which must outlive it.
// Thread safety: as safe as the wrapped store; the counters are atomic and
// the armed faults are GUARDED_BY a mutex.
#ifndef TESSERA_DAEMON_STORE_FAULTY_STORE_H_
#define TESSERA_DAEMON_STORE_FAULTY_STORE_H_

#include <atomic>
#include <cstdint>
#include <optional>

#include "common/mutex.h"
#include "common/thread_annotations.h"
#include "daemon/store/store.h"

namespace tessera::daemon {

class FaultyStore final : public Store {
 public:
  // REQUIRES: base != nullptr.
  explicit FaultyStore(Store* base) : base_(base) {}

  // REQUIRES: nth >= 1; status not OK.
  void ArmWriteFault(int64_t nth, Status status, bool sticky = false) EXCLUDES(mu_);
  void ArmReadFault(int64_t nth, Status status, bool sticky = false) EXCLUDES(mu_);
  void Disarm() EXCLUDES(mu_);
  // Calls seen since construction (failed ones included).
  int64_t writes_seen() const { return writes_seen_.load(); }
  int64_t reads_seen() const { return reads_seen_.load(); }

  Status Health() override { return base_->Health(); }

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

  StoreStats Stats() override { return base_->Stats(); }

 private:
  struct Fault {
    int64_t at = 0;  // absolute call number that fails first
    Status status;
    bool sticky = false;
  };
  // The fault for this call, or OK to pass through.
  Status NextWrite() EXCLUDES(mu_);
  Status NextRead() EXCLUDES(mu_);
  static Status Check(const std::optional<Fault>& fault, int64_t call);

  Store* const base_;
  std::atomic<int64_t> writes_seen_{0};
  std::atomic<int64_t> reads_seen_{0};
  Mutex mu_;
  std::optional<Fault> write_fault_ GUARDED_BY(mu_);
  std::optional<Fault> read_fault_ GUARDED_BY(mu_);
};

}  // namespace tessera::daemon

#endif  // TESSERA_DAEMON_STORE_FAULTY_STORE_H_
