#include "daemon/store/faulty_store.h"

#include <utility>

namespace tessera::daemon {

#define TESSERA_FAULT_(kind)         \
  do {                               \
    Status fault_ = Next##kind();    \
    if (!fault_.ok()) return fault_; \
  } while (0)

void FaultyStore::ArmWriteFault(int64_t nth, Status status, bool sticky) {
  MutexLock lock(mu_);
  write_fault_ = Fault{writes_seen_.load() + nth, std::move(status), sticky};
}

void FaultyStore::ArmReadFault(int64_t nth, Status status, bool sticky) {
  MutexLock lock(mu_);
  read_fault_ = Fault{reads_seen_.load() + nth, std::move(status), sticky};
}

void FaultyStore::Disarm() {
  MutexLock lock(mu_);
  write_fault_.reset();
  read_fault_.reset();
}

Status FaultyStore::Check(const std::optional<Fault>& fault, int64_t call) {
  if (!fault) return Status::Ok();
  if (call == fault->at || (fault->sticky && call > fault->at)) return fault->status;
  return Status::Ok();
}

Status FaultyStore::NextWrite() {
  MutexLock lock(mu_);
  return Check(write_fault_, ++writes_seen_);
}

Status FaultyStore::NextRead() {
  MutexLock lock(mu_);
  return Check(read_fault_, ++reads_seen_);
}

Result<api::Job> FaultyStore::InsertJob(const NewJob& job) {
  TESSERA_FAULT_(Write);
  return base_->InsertJob(job);
}
Result<api::Job> FaultyStore::GetJob(api::JobId id) {
  TESSERA_FAULT_(Read);
  return base_->GetJob(id);
}
Result<api::JobPage> FaultyStore::ListJobs(const api::JobQuery& query) {
  TESSERA_FAULT_(Read);
  return base_->ListJobs(query);
}
Result<api::Job> FaultyStore::TransitionJob(const JobTransition& t) {
  TESSERA_FAULT_(Write);
  return base_->TransitionJob(t);
}
Result<std::vector<api::Event>> FaultyStore::ListEvents(api::JobId job, int64_t after,
                                                        int64_t limit) {
  TESSERA_FAULT_(Read);
  return base_->ListEvents(job, after, limit);
}
Status FaultyStore::SetJobProgress(api::JobId job, const api::Json& progress) {
  TESSERA_FAULT_(Write);
  return base_->SetJobProgress(job, progress);
}
Result<std::map<api::JobState, int64_t>> FaultyStore::CountJobsByState() {
  TESSERA_FAULT_(Read);
  return base_->CountJobsByState();
}
Status FaultyStore::RecordProgress(const ProgressReport& report) {
  TESSERA_FAULT_(Write);
  return base_->RecordProgress(report);
}
Result<api::MetricsPage> FaultyStore::ListMetrics(const api::MetricsQuery& query) {
  TESSERA_FAULT_(Read);
  return base_->ListMetrics(query);
}
Status FaultyStore::InsertAttempt(const JobAttempt& attempt) {
  TESSERA_FAULT_(Write);
  return base_->InsertAttempt(attempt);
}
Result<JobAttempt> FaultyStore::GetAttempt(api::JobId job, int64_t attempt) {
  TESSERA_FAULT_(Read);
  return base_->GetAttempt(job, attempt);
}
Result<std::vector<JobAttempt>> FaultyStore::ListAttempts(api::JobId job) {
  TESSERA_FAULT_(Read);
  return base_->ListAttempts(job);
}
Status FaultyStore::FinishAttempt(api::JobId job, int64_t attempt, int64_t ended_ms,
                                  std::string_view result) {
  TESSERA_FAULT_(Write);
  return base_->FinishAttempt(job, attempt, ended_ms, result);
}
Status FaultyStore::DeleteAttempt(api::JobId job, int64_t attempt) {
  TESSERA_FAULT_(Write);
  return base_->DeleteAttempt(job, attempt);
}
Status FaultyStore::UpsertNode(const api::Node& node) {
  TESSERA_FAULT_(Write);
  return base_->UpsertNode(node);
}
Result<api::Node> FaultyStore::GetNode(std::string_view name) {
  TESSERA_FAULT_(Read);
  return base_->GetNode(name);
}
Result<std::vector<api::Node>> FaultyStore::ListNodes() {
  TESSERA_FAULT_(Read);
  return base_->ListNodes();
}
Status FaultyStore::SetNodeHealth(std::string_view name, std::string_view health) {
  TESSERA_FAULT_(Write);
  return base_->SetNodeHealth(name, health);
}
Status FaultyStore::InsertToken(const TokenRecord& record) {
  TESSERA_FAULT_(Write);
  return base_->InsertToken(record);
}
Result<TokenRecord> FaultyStore::GetToken(std::string_view token_id) {
  TESSERA_FAULT_(Read);
  return base_->GetToken(token_id);
}
Status FaultyStore::RevokeToken(std::string_view token_id, int64_t now_ms) {
  TESSERA_FAULT_(Write);
  return base_->RevokeToken(token_id, now_ms);
}
Result<std::vector<TokenInfo>> FaultyStore::ListTokens() {
  TESSERA_FAULT_(Read);
  return base_->ListTokens();
}
Result<std::vector<api::Entrypoint>> FaultyStore::ListEntrypoints() {
  TESSERA_FAULT_(Read);
  return base_->ListEntrypoints();
}
Result<api::Entrypoint> FaultyStore::GetEntrypoint(std::string_view name) {
  TESSERA_FAULT_(Read);
  return base_->GetEntrypoint(name);
}
Status FaultyStore::PutEntrypoint(const api::Entrypoint& entrypoint) {
  TESSERA_FAULT_(Write);
  return base_->PutEntrypoint(entrypoint);
}
Status FaultyStore::DeleteEntrypoint(std::string_view name) {
  TESSERA_FAULT_(Write);
  return base_->DeleteEntrypoint(name);
}
Status FaultyStore::PutAgentJoinToken(const SecretDigest& digest) {
  TESSERA_FAULT_(Write);
  return base_->PutAgentJoinToken(digest);
}
Result<SecretDigest> FaultyStore::GetAgentJoinToken() {
  TESSERA_FAULT_(Read);
  return base_->GetAgentJoinToken();
}

Result<NodeCredentialRecord> FaultyStore::GetNodeCredential(std::string_view node) {
  TESSERA_FAULT_(Read);
  return base_->GetNodeCredential(node);
}
Result<NodeCredentialRecord> FaultyStore::FindNodeCredential(std::string_view credential_id) {
  TESSERA_FAULT_(Read);
  return base_->FindNodeCredential(credential_id);
}
Status FaultyStore::PutNodeCredential(const NodeCredentialRecord& record,
                                      const std::optional<api::NodeEnrolment>& expected) {
  TESSERA_FAULT_(Write);
  return base_->PutNodeCredential(record, expected);
}
Status FaultyStore::DeleteNodeCredential(const api::NodeEnrolment& expected) {
  TESSERA_FAULT_(Write);
  return base_->DeleteNodeCredential(expected);
}
Result<std::vector<api::NodeEnrolment>> FaultyStore::ListNodeEnrolments() {
  TESSERA_FAULT_(Read);
  return base_->ListNodeEnrolments();
}
Status FaultyStore::RevokeNode(std::string_view node, int64_t now_ms) {
  TESSERA_FAULT_(Write);
  return base_->RevokeNode(node, now_ms);
}

Status FaultyStore::InsertChunks(api::JobId job,
                                 const std::vector<std::vector<std::string>>& chunks) {
  TESSERA_FAULT_(Write);
  return base_->InsertChunks(job, chunks);
}
Result<ChunkLeaseResult> FaultyStore::LeaseChunks(const ChunkLeaseRequest& request) {
  TESSERA_FAULT_(Write);
  return base_->LeaseChunks(request);
}
Result<ChunkCounts> FaultyStore::CountChunks(api::JobId job) {
  TESSERA_FAULT_(Read);
  return base_->CountChunks(job);
}
Status FaultyStore::AppendChunks(api::JobId job, int64_t first_chunk,
                                 const std::vector<std::vector<std::string>>& chunks) {
  TESSERA_FAULT_(Write);
  return base_->AppendChunks(job, first_chunk, chunks);
}
Status FaultyStore::SealChunks(api::JobId job) {
  TESSERA_FAULT_(Write);
  return base_->SealChunks(job);
}
Result<bool> FaultyStore::ChunksSealed(api::JobId job) {
  TESSERA_FAULT_(Read);
  return base_->ChunksSealed(job);
}
Status FaultyStore::DeleteChunks(api::JobId job) {
  TESSERA_FAULT_(Write);
  return base_->DeleteChunks(job);
}
Result<std::vector<InferChunk>> FaultyStore::ListChunks(api::JobId job) {
  TESSERA_FAULT_(Read);
  return base_->ListChunks(job);
}

#undef TESSERA_FAULT_

}  // namespace tessera::daemon
