// The Store's row methods as one list (an X-macro), so that every backend
// declares its overrides, and every wrapper forwards them, from the list
// instead of writing the 43 signatures again. Contracts: daemon/store/store.h.
//
// TESSERA_STORE_METHODS(X) calls X(kind, return type, name, (parameters),
// (arguments)) once per method; kind is Read or Write (how FaultyStore counts
// it). Health() and Stats() are not in the list: they are neither.
//
// The compiler checks the list against store.h both ways: an entry that is
// not a Store method fails `override`, and a Store method missing from the
// list leaves every backend abstract.
#ifndef TESSERA_DAEMON_STORE_STORE_METHODS_H_
#define TESSERA_DAEMON_STORE_STORE_METHODS_H_

// clang-format off
#define TESSERA_STORE_METHODS(X) \
  X(Write, Result<api::Job>, InsertJob, (const NewJob& job), (job)) \
  X(Read, Result<api::Job>, GetJob, (api::JobId id), (id)) \
  X(Read, Result<api::JobPage>, ListJobs, (const api::JobQuery& query), (query)) \
  X(Write, Result<api::Job>, TransitionJob, (const JobTransition& t), (t)) \
  X(Read, Result<std::vector<api::Event>>, ListEvents, (api::JobId job, int64_t after, int64_t limit), (job, after, limit)) \
  X(Write, Status, SetJobProgress, (api::JobId job, const api::Json& progress), (job, progress)) \
  X(Read, Result<JobStateCounts>, CountJobsByState, (), ()) \
  X(Write, Status, RecordProgress, (const ProgressReport& report), (report)) \
  X(Read, Result<api::MetricsPage>, ListMetrics, (const api::MetricsQuery& query), (query)) \
  X(Write, Status, InsertAttempt, (const JobAttempt& attempt), (attempt)) \
  X(Read, Result<JobAttempt>, GetAttempt, (api::JobId job, int64_t attempt), (job, attempt)) \
  X(Read, Result<std::vector<JobAttempt>>, ListAttempts, (api::JobId job), (job)) \
  X(Write, Status, FinishAttempt, (api::JobId job, int64_t attempt, int64_t ended_ms, std::string_view result), (job, attempt, ended_ms, result)) \
  X(Write, Status, DeleteAttempt, (api::JobId job, int64_t attempt), (job, attempt)) \
  X(Write, Status, SetAttemptPlan, (api::JobId job, int64_t attempt, const api::Json& plan), (job, attempt, plan)) \
  X(Write, Status, UpsertNode, (const api::Node& node), (node)) \
  X(Read, Result<api::Node>, GetNode, (std::string_view name), (name)) \
  X(Read, Result<std::vector<api::Node>>, ListNodes, (), ()) \
  X(Write, Status, SetNodeHealth, (std::string_view name, std::string_view health), (name, health)) \
  X(Write, Status, InsertToken, (const TokenRecord& record), (record)) \
  X(Read, Result<TokenRecord>, GetToken, (std::string_view token_id), (token_id)) \
  X(Write, Status, RevokeToken, (std::string_view token_id, int64_t now_ms), (token_id, now_ms)) \
  X(Read, Result<std::vector<TokenInfo>>, ListTokens, (), ()) \
  X(Read, Result<std::vector<api::Entrypoint>>, ListEntrypoints, (), ()) \
  X(Read, Result<api::Entrypoint>, GetEntrypoint, (std::string_view name), (name)) \
  X(Write, Status, PutEntrypoint, (const api::Entrypoint& entrypoint), (entrypoint)) \
  X(Write, Status, DeleteEntrypoint, (std::string_view name), (name)) \
  X(Write, Status, PutAgentJoinToken, (const SecretDigest& digest), (digest)) \
  X(Read, Result<SecretDigest>, GetAgentJoinToken, (), ()) \
  X(Read, Result<NodeCredentialRecord>, GetNodeCredential, (std::string_view node), (node)) \
  X(Read, Result<NodeCredentialRecord>, FindNodeCredential, (std::string_view credential_id), (credential_id)) \
  X(Write, Status, PutNodeCredential, (const NodeCredentialRecord& record, const std::optional<api::NodeEnrolment>& expected), (record, expected)) \
  X(Write, Status, DeleteNodeCredential, (const api::NodeEnrolment& expected), (expected)) \
  X(Read, Result<std::vector<api::NodeEnrolment>>, ListNodeEnrolments, (), ()) \
  X(Write, Status, RevokeNode, (std::string_view node, int64_t now_ms), (node, now_ms)) \
  X(Write, Status, InsertChunks, (api::JobId job, const std::vector<std::vector<std::string>>& chunks), (job, chunks)) \
  X(Write, Result<ChunkLeaseResult>, LeaseChunks, (const ChunkLeaseRequest& request), (request)) \
  X(Read, Result<ChunkCounts>, CountChunks, (api::JobId job), (job)) \
  X(Write, Status, AppendChunks, (api::JobId job, int64_t first_chunk, const std::vector<std::vector<std::string>>& chunks), (job, first_chunk, chunks)) \
  X(Write, Status, SealChunks, (api::JobId job), (job)) \
  X(Read, Result<bool>, ChunksSealed, (api::JobId job), (job)) \
  X(Write, Status, DeleteChunks, (api::JobId job), (job)) \
  X(Read, Result<std::vector<InferChunk>>, ListChunks, (api::JobId job), (job))
// clang-format on

// Declares one method of the list as an override, inside a backend's class.
#define TESSERA_STORE_OVERRIDE(kind, ret, name, params, args) ret name params override;

#endif  // TESSERA_DAEMON_STORE_STORE_METHODS_H_
