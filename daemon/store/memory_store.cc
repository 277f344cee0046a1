#include "daemon/store/memory_store.h"

#include <algorithm>

#include "daemon/controller/job_state_machine.h"

namespace tessera::daemon {
namespace {

std::string JobNotFound(api::JobId id) { return "job " + std::to_string(id) + " not found"; }

}  // namespace

MemoryStore::MemoryStore(MetricsRetention metrics_retention)
    : retention_{std::max<int64_t>(0, metrics_retention.recent_steps),
                 std::max<int64_t>(1, metrics_retention.older_points)} {
  for (std::string_view name : kBuiltinEntrypoints) {
    entrypoints_[std::string(name)] = api::Entrypoint{std::string(name), "", "built-in model"};
  }
}

Status MemoryStore::Health() { return Status::Ok(); }

Result<api::Job> MemoryStore::InsertJob(const NewJob& in) {
  MutexLock lock(mu_);
  ++writes_;
  TESSERA_ASSIGN_OR_RETURN(api::Job job, PendingJobOf(in));
  job.id = next_job_id_++;
  jobs_[job.id] = job;
  events_.push_back(api::Event{next_event_id_++, job.id, in.now_ms, "", "pending", 0, in.reason});
  return job;
}

Result<api::Job> MemoryStore::GetJob(api::JobId id) {
  MutexLock lock(mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return NotFound(JobNotFound(id));
  return it->second;
}

Result<api::JobPage> MemoryStore::ListJobs(const api::JobQuery& q) {
  MutexLock lock(mu_);
  const int64_t limit = ClampStoreLimit(q.limit);
  api::JobPage page;
  for (auto it = jobs_.upper_bound(q.after); it != jobs_.end(); ++it) {
    const api::Job& job = it->second;
    if (q.state && job.state != *q.state) continue;
    if (q.owner && job.owner != *q.owner) continue;
    if (static_cast<int64_t>(page.jobs.size()) == limit) {
      page.next_after = page.jobs.back().id;
      break;
    }
    page.jobs.push_back(job);
  }
  return page;
}

Result<api::Job> MemoryStore::TransitionJob(const JobTransition& t) {
  MutexLock lock(mu_);
  ++writes_;
  auto it = jobs_.find(t.job_id);
  if (it == jobs_.end()) return NotFound(JobNotFound(t.job_id));
  api::Job& job = it->second;
  if (job.state != t.expected) {
    return FailedPrecondition("job " + std::to_string(t.job_id) + " is " +
                              std::string(api::JobStateName(job.state)) + ", expected " +
                              std::string(api::JobStateName(t.expected)));
  }
  events_.push_back(api::Event{next_event_id_++, job.id, t.now_ms,
                               std::string(api::JobStateName(job.state)),
                               std::string(api::JobStateName(t.next)), t.attempt, t.reason});
  job.state = t.next;
  job.attempt = t.attempt;
  job.reason = t.reason;
  job.updated_ms = t.now_ms;
  if (t.plan) job.plan = *t.plan;
  return job;
}

Result<std::vector<api::Event>> MemoryStore::ListEvents(api::JobId job, int64_t after,
                                                        int64_t limit) {
  MutexLock lock(mu_);
  limit = ClampStoreLimit(limit);
  std::vector<api::Event> out;
  for (const api::Event& e : events_) {
    if (e.job_id != job || e.id <= after) continue;
    out.push_back(e);
    if (static_cast<int64_t>(out.size()) == limit) break;
  }
  return out;
}

Status MemoryStore::SetJobProgress(api::JobId job, const api::Json& progress) {
  MutexLock lock(mu_);
  ++writes_;
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return NotFound(JobNotFound(job));
  it->second.progress = progress;
  return Status::Ok();
}

Status MemoryStore::RecordProgress(const ProgressReport& report) {
  MutexLock lock(mu_);
  ++writes_;
  TESSERA_RETURN_IF_ERROR(ValidateProgressReport(report));
  for (const auto& [job, progress] : report.latest) {
    auto it = jobs_.find(job);
    if (it != jobs_.end()) it->second.progress = progress;
  }
  std::map<std::pair<api::JobId, int64_t>, std::vector<const api::MetricPoint*>> series;
  for (const JobMetricPoint& p : report.points) {
    if (jobs_.contains(p.job_id)) series[{p.job_id, p.point.rank}].push_back(&p.point);
  }
  for (const auto& [key, points] : series) AppendSeriesLocked(metrics_[key], points);
  return Status::Ok();
}

void MemoryStore::AppendSeriesLocked(MetricSeries& s,
                                     const std::vector<const api::MetricPoint*>& points) {
  for (const api::MetricPoint* p : points) s.max_step = std::max(s.max_step, p->step);
  const int64_t boundary = s.max_step - retention_.recent_steps;
  for (const api::MetricPoint* p : points) {
    if (p->step <= boundary && p->step % s.stride != 0) continue;
    s.points.try_emplace({p->step, p->attempt}, *p);
  }
  // Removes the older points (step <= boundary) above `from` that are not
  // multiples of the stride; returns how many older points remain.
  auto thin = [&](int64_t from) {
    int64_t older = 0;
    for (auto it = s.points.begin(); it != s.points.end() && it->first.first <= boundary;) {
      if (it->first.first > from && it->first.first % s.stride != 0) {
        it = s.points.erase(it);
      } else {
        ++older;
        ++it;
      }
    }
    return older;
  };
  int64_t older = thin(s.thinned_through);
  s.thinned_through = std::max(s.thinned_through, boundary);
  while (older > retention_.older_points && s.stride <= boundary) {
    s.stride *= 2;
    older = thin(-1);
  }
  if (older > retention_.older_points) {
    s.points.erase(s.points.begin(), s.points.upper_bound({boundary, INT64_MAX}));
  }
}

Result<api::MetricsPage> MemoryStore::ListMetrics(const api::MetricsQuery& query) {
  MutexLock lock(mu_);
  const int64_t limit = std::clamp<int64_t>(query.limit, 1, api::kMaxMetricsPageSize);
  const int64_t since = query.since.value_or(-1);
  std::vector<api::MetricPoint> all;
  for (auto it = metrics_.lower_bound({query.job_id, INT64_MIN});
       it != metrics_.end() && it->first.first == query.job_id; ++it) {
    if (query.rank && it->first.second != *query.rank) continue;
    for (auto p = it->second.points.upper_bound({since, INT64_MAX}); p != it->second.points.end();
         ++p) {
      if (!query.attempt || p->second.attempt == *query.attempt) all.push_back(p->second);
    }
  }
  std::sort(all.begin(), all.end(), MetricPageOrder);
  std::vector<api::MetricPoint> rows(
      all.begin(),
      all.begin() + std::min<std::ptrdiff_t>(static_cast<std::ptrdiff_t>(all.size()), limit + 1));
  return CutMetricsPage(query.job_id, std::move(rows), limit,
                        [&all](int64_t step) -> Result<std::vector<api::MetricPoint>> {
                          std::vector<api::MetricPoint> out;
                          for (const api::MetricPoint& p : all) {
                            if (p.step == step) out.push_back(p);
                          }
                          return out;
                        });
}

Result<JobStateCounts> MemoryStore::CountJobsByState() {
  MutexLock lock(mu_);
  std::map<api::JobState, int64_t> counts;
  for (api::JobState s : kAllJobStates) counts[s] = 0;
  for (const auto& [id, job] : jobs_) ++counts[job.state];
  return counts;
}

Status MemoryStore::InsertAttempt(const JobAttempt& a) {
  MutexLock lock(mu_);
  ++writes_;
  if (!jobs_.contains(a.job_id)) return NotFound(JobNotFound(a.job_id));
  auto [it, inserted] = attempts_.try_emplace({a.job_id, a.attempt}, a);
  if (!inserted) {
    return AlreadyExists(
        "attempt " + std::to_string(a.attempt) + " of job " + std::to_string(a.job_id) + " exists",
        "attempt");
  }
  return Status::Ok();
}

Result<JobAttempt> MemoryStore::GetAttempt(api::JobId job, int64_t attempt) {
  MutexLock lock(mu_);
  auto it = attempts_.find({job, attempt});
  if (it == attempts_.end()) return NotFound("attempt not found");
  return it->second;
}

Result<std::vector<JobAttempt>> MemoryStore::ListAttempts(api::JobId job) {
  MutexLock lock(mu_);
  std::vector<JobAttempt> out;
  for (auto it = attempts_.lower_bound({job, INT64_MIN});
       it != attempts_.end() && it->first.first == job; ++it) {
    out.push_back(it->second);
  }
  return out;
}

Status MemoryStore::FinishAttempt(api::JobId job, int64_t attempt, int64_t ended_ms,
                                  std::string_view result) {
  MutexLock lock(mu_);
  ++writes_;
  auto it = attempts_.find({job, attempt});
  if (it == attempts_.end()) return NotFound("attempt not found");
  it->second.ended_ms = ended_ms;
  it->second.result = std::string(result);
  return Status::Ok();
}

Status MemoryStore::DeleteAttempt(api::JobId job, int64_t attempt) {
  MutexLock lock(mu_);
  ++writes_;
  if (attempts_.erase({job, attempt}) == 0) return NotFound("attempt not found");
  return Status::Ok();
}

Status MemoryStore::SetAttemptPlan(api::JobId job, int64_t attempt, const api::Json& plan) {
  MutexLock lock(mu_);
  ++writes_;
  auto it = attempts_.find({job, attempt});
  if (it == attempts_.end()) return NotFound("attempt not found");
  it->second.plan = plan;
  return Status::Ok();
}

Status MemoryStore::UpsertNode(const api::Node& node) {
  TESSERA_RETURN_IF_ERROR(ValidateNode(node));
  MutexLock lock(mu_);
  ++writes_;
  api::Node copy = node;
  for (api::Device& d : copy.devices) d.node = copy.name;
  std::sort(copy.devices.begin(), copy.devices.end(),
            [](const api::Device& a, const api::Device& b) { return a.index < b.index; });
  nodes_[copy.name] = std::move(copy);
  return Status::Ok();
}

Result<api::Node> MemoryStore::GetNode(std::string_view name) {
  MutexLock lock(mu_);
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return NotFound("node " + std::string(name) + " not found");
  return it->second;
}

Result<std::vector<api::Node>> MemoryStore::ListNodes() {
  MutexLock lock(mu_);
  std::vector<api::Node> out;
  for (const auto& [name, node] : nodes_) out.push_back(node);
  return out;
}

Status MemoryStore::SetNodeHealth(std::string_view name, std::string_view health) {
  TESSERA_RETURN_IF_ERROR(ValidateNodeHealth(health));
  MutexLock lock(mu_);
  ++writes_;
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return NotFound("node " + std::string(name) + " not found");
  it->second.health = std::string(health);
  return Status::Ok();
}

Status MemoryStore::InsertToken(const TokenRecord& record) {
  TESSERA_RETURN_IF_ERROR(ValidateTokenRecord(record));
  MutexLock lock(mu_);
  ++writes_;
  if (tokens_.contains(record.info.id)) {
    return AlreadyExists("token " + record.info.id + " exists", "id");
  }
  tokens_[record.info.id] = record;
  return Status::Ok();
}

Result<TokenRecord> MemoryStore::GetToken(std::string_view token_id) {
  MutexLock lock(mu_);
  auto it = tokens_.find(token_id);
  if (it == tokens_.end()) return NotFound("token " + std::string(token_id) + " not found");
  return it->second;
}

Status MemoryStore::RevokeToken(std::string_view token_id, int64_t now_ms) {
  MutexLock lock(mu_);
  ++writes_;
  auto it = tokens_.find(token_id);
  if (it == tokens_.end()) return NotFound("token " + std::string(token_id) + " not found");
  if (!it->second.info.revoked_ms) it->second.info.revoked_ms = now_ms;
  return Status::Ok();
}

Result<std::vector<TokenInfo>> MemoryStore::ListTokens() {
  MutexLock lock(mu_);
  std::vector<TokenInfo> out;
  for (const auto& [id, t] : tokens_) out.push_back(t.info);
  std::sort(out.begin(), out.end(), [](const TokenInfo& a, const TokenInfo& b) {
    return std::tie(a.user, a.id) < std::tie(b.user, b.id);
  });
  return out;
}

Result<std::vector<api::Entrypoint>> MemoryStore::ListEntrypoints() {
  MutexLock lock(mu_);
  std::vector<api::Entrypoint> out;
  for (const auto& [name, e] : entrypoints_) out.push_back(e);
  return out;
}

Result<api::Entrypoint> MemoryStore::GetEntrypoint(std::string_view name) {
  MutexLock lock(mu_);
  auto it = entrypoints_.find(name);
  if (it == entrypoints_.end()) {
    return NotFound("entrypoint " + std::string(name) + " is not allowed");
  }
  return it->second;
}

Status MemoryStore::PutEntrypoint(const api::Entrypoint& entrypoint) {
  TESSERA_RETURN_IF_ERROR(ValidateEntrypoint(entrypoint));
  MutexLock lock(mu_);
  ++writes_;
  entrypoints_[entrypoint.name] = entrypoint;
  return Status::Ok();
}

Status MemoryStore::DeleteEntrypoint(std::string_view name) {
  MutexLock lock(mu_);
  ++writes_;
  auto it = entrypoints_.find(name);
  if (it == entrypoints_.end()) return NotFound("entrypoint " + std::string(name) + " not found");
  entrypoints_.erase(it);
  return Status::Ok();
}

Status MemoryStore::PutAgentJoinToken(const SecretDigest& digest) {
  MutexLock lock(mu_);
  ++writes_;
  join_token_ = digest;
  return Status::Ok();
}

Result<SecretDigest> MemoryStore::GetAgentJoinToken() {
  MutexLock lock(mu_);
  if (!join_token_) return NotFound("no agent join token is set");
  return *join_token_;
}

// ---------------------------------------------------------------- node credentials

namespace {

Status NotEnrolled(std::string_view node) {
  return NotFound("node " + std::string(node) + " is not enrolled");
}

}  // namespace

Result<NodeCredentialRecord> MemoryStore::GetNodeCredential(std::string_view node) {
  MutexLock lock(mu_);
  auto it = node_credentials_.find(node);
  if (it == node_credentials_.end()) return NotEnrolled(node);
  return it->second;
}

Result<NodeCredentialRecord> MemoryStore::FindNodeCredential(std::string_view credential_id) {
  MutexLock lock(mu_);
  for (const auto& [name, record] : node_credentials_) {
    if (record.enrolment.credential_id == credential_id) return record;
  }
  return NotFound("no node credential " + std::string(credential_id));
}

Status MemoryStore::PutNodeCredential(const NodeCredentialRecord& record,
                                      const std::optional<api::NodeEnrolment>& expected) {
  TESSERA_RETURN_IF_ERROR(ValidateNodeCredentialRecord(record));
  const std::string& node = record.enrolment.node;
  MutexLock lock(mu_);
  ++writes_;
  auto it = node_credentials_.find(node);
  std::optional<api::NodeEnrolment> current;
  if (it != node_credentials_.end()) current = it->second.enrolment;
  if (current != expected) {
    return FailedPrecondition("the enrolment of node " + node + " changed meanwhile");
  }
  for (const auto& [name, other] : node_credentials_) {
    if (name != node && other.enrolment.credential_id == record.enrolment.credential_id) {
      return AlreadyExists("credential id in use", "credential_id");
    }
  }
  node_credentials_[node] = record;
  return Status::Ok();
}

Status MemoryStore::DeleteNodeCredential(const api::NodeEnrolment& expected) {
  MutexLock lock(mu_);
  ++writes_;
  auto it = node_credentials_.find(expected.node);
  if (it == node_credentials_.end()) return NotEnrolled(expected.node);
  if (it->second.enrolment != expected) {
    return FailedPrecondition("the enrolment of node " + expected.node + " changed meanwhile");
  }
  node_credentials_.erase(it);
  return Status::Ok();
}

Result<std::vector<api::NodeEnrolment>> MemoryStore::ListNodeEnrolments() {
  MutexLock lock(mu_);
  std::vector<api::NodeEnrolment> out;
  for (const auto& [name, record] : node_credentials_) out.push_back(record.enrolment);
  return out;
}

Status MemoryStore::RevokeNode(std::string_view node, int64_t now_ms) {
  MutexLock lock(mu_);
  ++writes_;
  auto it = node_credentials_.find(node);
  if (it == node_credentials_.end()) return NotEnrolled(node);
  if (!it->second.enrolment.revoked_ms) it->second.enrolment.revoked_ms = now_ms;
  return Status::Ok();
}

StoreStats MemoryStore::Stats() {
  MutexLock lock(mu_);
  StoreStats s;
  s.commits = writes_;
  s.writes = writes_;
  s.commit_seconds.counts = {0};
  return s;
}

// ------------------------------------------------------------ infer chunks

Status MemoryStore::InsertChunks(api::JobId job,
                                 const std::vector<std::vector<std::string>>& chunks) {
  MutexLock lock(mu_);
  ++writes_;
  if (!jobs_.contains(job)) return NotFound(JobNotFound(job));
  auto& stored = chunks_[job];
  if (!stored.empty()) return AlreadyExists("job " + std::to_string(job) + " already has chunks");
  for (size_t i = 0; i < chunks.size(); ++i) {
    InferChunk c;
    c.job_id = job;
    c.chunk = static_cast<int64_t>(i);
    c.items = chunks[i];
    stored.push_back(std::move(c));
  }
  sealed_.insert(job);
  return Status::Ok();
}

Status MemoryStore::AppendChunks(api::JobId job, int64_t first_chunk,
                                 const std::vector<std::vector<std::string>>& chunks) {
  MutexLock lock(mu_);
  ++writes_;
  if (!jobs_.contains(job)) return NotFound(JobNotFound(job));
  auto& stored = chunks_[job];
  if (first_chunk != static_cast<int64_t>(stored.size())) {
    return AlreadyExists("job " + std::to_string(job) + " has " + std::to_string(stored.size()) +
                         " chunks, not " + std::to_string(first_chunk));
  }
  for (size_t i = 0; i < chunks.size(); ++i) {
    InferChunk c;
    c.job_id = job;
    c.chunk = first_chunk + static_cast<int64_t>(i);
    c.items = chunks[i];
    stored.push_back(std::move(c));
  }
  return Status::Ok();
}

Status MemoryStore::SealChunks(api::JobId job) {
  MutexLock lock(mu_);
  ++writes_;
  if (!jobs_.contains(job)) return NotFound(JobNotFound(job));
  sealed_.insert(job);
  return Status::Ok();
}

Result<bool> MemoryStore::ChunksSealed(api::JobId job) {
  MutexLock lock(mu_);
  return sealed_.contains(job);
}

Status MemoryStore::DeleteChunks(api::JobId job) {
  MutexLock lock(mu_);
  ++writes_;
  chunks_.erase(job);
  sealed_.erase(job);
  return Status::Ok();
}

ChunkCounts MemoryStore::CountChunksLocked(api::JobId job) const {
  ChunkCounts counts;
  auto it = chunks_.find(job);
  if (it == chunks_.end()) return counts;
  for (const InferChunk& c : it->second) {
    const auto images = static_cast<int64_t>(c.items.size());
    ++counts.chunks_total;
    counts.images_total += images;
    if (c.state == ChunkState::kDone) {
      ++counts.chunks_done;
      counts.images_done += images;
    } else if (c.state == ChunkState::kLeased) {
      ++counts.chunks_leased;
    }
  }
  return counts;
}

Result<ChunkLeaseResult> MemoryStore::LeaseChunks(const ChunkLeaseRequest& r) {
  TESSERA_RETURN_IF_ERROR(ValidateChunkLeaseRequest(r));
  MutexLock lock(mu_);
  ++writes_;
  if (!jobs_.contains(r.job_id)) return NotFound(JobNotFound(r.job_id));
  ChunkLeaseResult out;
  std::vector<InferChunk>& chunks = chunks_[r.job_id];
  for (int64_t done : r.completed) {
    if (done < 0 || done >= static_cast<int64_t>(chunks.size())) continue;
    InferChunk& c = chunks[static_cast<size_t>(done)];
    if (c.state == ChunkState::kDone) continue;
    c.state = ChunkState::kDone;
    c.attempt = r.attempt;
    c.rank = r.rank;
    c.done_ms = r.now_ms;
    ++out.newly_done;
  }
  for (InferChunk& c : chunks) {
    if (c.state == ChunkState::kLeased && c.attempt == r.attempt && c.rank == r.rank) {
      c.lease_until_ms = r.lease_until_ms;
    }
  }
  if (r.max_chunks > 0) {
    // Chunks the rank still holds (an answer it never got) come first.
    for (InferChunk& c : chunks) {
      if (static_cast<int64_t>(out.leased.size()) >= r.max_chunks) break;
      if (c.state == ChunkState::kLeased && c.attempt == r.attempt && c.rank == r.rank) {
        out.leased.push_back(c);
      }
    }
  }
  for (InferChunk& c : chunks) {
    if (static_cast<int64_t>(out.leased.size()) >= r.max_chunks) break;
    if (!ChunkLeasable(c, r)) continue;
    c.state = ChunkState::kLeased;
    c.attempt = r.attempt;
    c.rank = r.rank;
    c.lease_until_ms = r.lease_until_ms;
    out.leased.push_back(c);
  }
  out.counts = CountChunksLocked(r.job_id);
  return out;
}

Result<ChunkCounts> MemoryStore::CountChunks(api::JobId job) {
  MutexLock lock(mu_);
  return CountChunksLocked(job);
}

Result<std::vector<InferChunk>> MemoryStore::ListChunks(api::JobId job) {
  MutexLock lock(mu_);
  auto it = chunks_.find(job);
  if (it == chunks_.end()) return std::vector<InferChunk>{};
  return it->second;
}

}  // namespace tessera::daemon
