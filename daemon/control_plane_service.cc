#include "daemon/control_plane_service.h"

#include <algorithm>
#include <charconv>
#include <exception>
#include <functional>
#include <map>
#include <set>
#include <utility>

#include "daemon/auth/api_tokens.h"
#include "daemon/auth/node_credentials.h"

namespace tessera::daemon {
namespace {

constexpr int kMaxCasRetries = 5;

std::string FormatDouble(double v) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  if (ec != std::errc()) return "0";
  return std::string(buf, end);
}

Status AdminOnly(const api::Principal& who, std::string_view what) {
  if (who.is_admin()) return Status::Ok();
  return PermissionDenied(std::string(what) + " needs the admin role");
}

// Whether two node rows hold the same address and inventory (health and
// last_heartbeat_ms aside).
bool SameNodeRow(const api::Node& a, const api::Node& b) {
  if (a.address != b.address || a.cpu_cores != b.cpu_cores || a.links != b.links ||
      a.network != b.network || a.gloo_link != b.gloo_link ||
      a.devices.size() != b.devices.size()) {
    return false;
  }
  for (size_t i = 0; i < a.devices.size(); ++i) {
    if (api::ToJson(a.devices[i]) != api::ToJson(b.devices[i])) return false;
  }
  return true;
}

}  // namespace

ControlPlaneService::ControlPlaneService(Store* store, Clock* clock, ControlPlaneOptions options)
    : store_(store), clock_(clock), options_(std::move(options)) {}

// ---------------------------------------------------------------- auth

Result<api::Principal> ControlPlaneService::Authenticate(std::string_view bearer_token) {
  auto token = auth::AuthenticateApiToken(store_, bearer_token);
  if (!token.ok()) {
    if (token.status().code() == StatusCode::kUnauthenticated) return token.status();
    return token.status().WithPrefix("token lookup");
  }
  return api::Principal{token->user, token->role};
}

Status ControlPlaneService::AuthenticateAgent(std::string_view join_token) {
  return auth::CheckAgentJoinToken(store_, join_token);
}

// ---------------------------------------------------------------- jobs

Result<api::Job> ControlPlaneService::VisibleJob(const api::Principal& who, api::JobId id) {
  TESSERA_ASSIGN_OR_RETURN(api::Job job, store_->GetJob(id));
  if (!who.is_admin() && job.owner != who.user) {
    return PermissionDenied("job " + std::to_string(id) + " belongs to another user");
  }
  return job;
}

Result<api::Job> ControlPlaneService::SubmitJob(const api::Principal& who,
                                                const api::JobSpec& spec) {
  auto entrypoint = store_->GetEntrypoint(spec.entrypoint);
  if (!entrypoint.ok()) {
    if (entrypoint.status().code() == StatusCode::kNotFound) {
      return InvalidArgument("\"" + spec.entrypoint + "\" is not an allowed entrypoint",
                             "entrypoint");
    }
    return entrypoint.status();
  }
  if (options_.admission != nullptr) {
    TESSERA_RETURN_IF_ERROR(
        options_.admission->Check(who, spec, [this](api::JobId id) -> Result<std::string> {
          TESSERA_ASSIGN_OR_RETURN(api::Job job, store_->GetJob(id));
          return job.owner;
        }));
  }
  TESSERA_RETURN_IF_ERROR(CheckPendingLimit(who.user));
  return store_->InsertJob(NewJob{who.user, spec, clock_->NowUnixMillis(), "submitted"});
}

Result<std::vector<api::QueueRow>> ControlPlaneService::Queue(const api::Principal& who) {
  if (!options_.queue) return Unimplemented("this tesserad does not show its queue");
  std::vector<api::QueueRow> rows = options_.queue();
  if (!who.is_admin()) {
    for (api::QueueRow& r : rows) {
      if (r.user == who.user) continue;
      r.id = 0;  // another user's job: its place and user's share only
      r.reason.clear();
    }
  }
  return rows;
}

Status ControlPlaneService::CheckPendingLimit(const std::string& user) {
  const int64_t limit = options_.max_pending_jobs ? options_.max_pending_jobs(user) : 0;
  if (limit <= 0) return Status::Ok();
  api::JobQuery q;
  q.state = api::JobState::kPending;
  q.owner = user;
  q.limit = 500;
  int64_t pending = 0;
  while (pending < limit) {
    TESSERA_ASSIGN_OR_RETURN(api::JobPage page, store_->ListJobs(q));
    pending += static_cast<int64_t>(page.jobs.size());
    if (!page.next_after) break;
    q.after = *page.next_after;
  }
  if (pending < limit) return Status::Ok();
  return ResourceExhausted(user + " has " + std::to_string(pending) + " pending jobs, the most " +
                           "this lab allows (users." + user + ".max_pending_jobs or users.*); " +
                           "submit again when some have started");
}

Result<api::JobPage> ControlPlaneService::ListJobs(const api::Principal& who,
                                                   const api::JobQuery& query) {
  if (query.limit < 1 || query.limit > 500) return InvalidArgument("must be 1..500", "limit");
  if (query.after < 0) return InvalidArgument("must be >= 0", "after");
  api::JobQuery q = query;
  if (!who.is_admin()) {
    if (q.owner && *q.owner != who.user) {
      return PermissionDenied("only admins may list other users' jobs");
    }
    q.owner = who.user;
  }
  TESSERA_ASSIGN_OR_RETURN(api::JobPage page, store_->ListJobs(q));
  for (api::Job& job : page.jobs) job = WithInference(std::move(job));
  return page;
}

Result<api::Job> ControlPlaneService::GetJob(const api::Principal& who, api::JobId id) {
  TESSERA_ASSIGN_OR_RETURN(api::Job job, VisibleJob(who, id));
  return WithInference(std::move(job));
}

// ---------------------------------------------------------------- inference

api::Json ControlPlaneService::InferenceProgressOf(const api::Job& job) {
  if (job.spec.kind != api::JobKind::kInfer) return nullptr;
  auto counts = store_->CountChunks(job.id);
  if (!counts.ok() || counts->chunks_total == 0) return nullptr;
  std::optional<InferenceTracker::LiveRanks> live;
  const bool running =
      job.state == api::JobState::kStarting || job.state == api::JobState::kRunning;
  if (running && options_.live_ranks) live = options_.live_ranks(job.id, job.attempt);
  return api::ToJson(tracker_.Progress(job.id, job.attempt, *counts, job.plan, live));
}

api::Job ControlPlaneService::WithInference(api::Job job) {
  job.inference = InferenceProgressOf(job);
  if (job.state == api::JobState::kPending && options_.waiting_reason) {
    std::string why = options_.waiting_reason(job.id);
    // A listing is the job's own step, not a wait for others.
    if (!why.empty()) job.reason = why.starts_with("listing input") ? why : "waiting: " + why;
  }
  return job;
}

Result<api::LeaseResponse> ControlPlaneService::LeaseChunks(api::JobId id,
                                                            std::string_view lease_token,
                                                            const api::LeaseRequest& request) {
  if (options_.lease_tokens == nullptr ||
      !options_.lease_tokens->Check(lease_token, id, request.attempt, request.rank)) {
    return Unauthenticated("not the lease token of job " + std::to_string(id) + " attempt " +
                           std::to_string(request.attempt) + " rank " +
                           std::to_string(request.rank));
  }
  TESSERA_ASSIGN_OR_RETURN(api::Job job, store_->GetJob(id));
  if (job.spec.kind != api::JobKind::kInfer) {
    return FailedPrecondition("job " + std::to_string(id) + " is not an infer job");
  }
  const bool live = job.state == api::JobState::kStarting || job.state == api::JobState::kRunning;
  if (job.attempt != request.attempt || !live) {
    return FailedPrecondition("attempt " + std::to_string(request.attempt) + " of job " +
                              std::to_string(id) + " is no longer running");
  }
  const int64_t now = clock_->NowUnixMillis();
  const int64_t lease_ms = options_.lease_duration.count();
  ChunkLeaseRequest lease{id,  request.attempt, request.rank, {}, request.max_chunks,
                          now, now + lease_ms};
  for (const api::CompletedChunk& c : request.completed) lease.completed.push_back(c.chunk);
  TESSERA_ASSIGN_OR_RETURN(ChunkLeaseResult result, store_->LeaseChunks(lease));
  for (const api::CompletedChunk& c : request.completed) {
    tracker_.Record(id, request.attempt, request.rank, c.images, c.seconds);
  }
  api::LeaseResponse out;
  out.lease_ms = lease_ms;
  out.finished =
      result.counts.chunks_total > 0 && result.counts.chunks_done == result.counts.chunks_total;
  for (InferChunk& c : result.leased) out.chunks.push_back({c.chunk, std::move(c.items)});
  if (out.chunks.empty() && !out.finished) {
    // Other ranks hold the rest; one of their leases may come back.
    out.retry_after_ms = std::clamp<int64_t>(lease_ms / 10, 50, 1000);
  }
  return out;
}

Result<api::Job> ControlPlaneService::CancelJob(const api::Principal& who, api::JobId id) {
  TESSERA_ASSIGN_OR_RETURN(api::Job job, VisibleJob(who, id));
  if (api::IsTerminal(job.state)) {
    return FailedPrecondition("job " + std::to_string(id) + " already ended (" +
                              std::string(api::JobStateName(job.state)) + ")");
  }
  return ApplyJobEvent(id, JobEvent::kCancel, "cancelled by " + who.user);
}

Result<std::vector<api::Event>> ControlPlaneService::ListEvents(const api::Principal& who,
                                                                api::JobId id, int64_t after,
                                                                int64_t limit) {
  if (limit < 1 || limit > 1000) return InvalidArgument("must be 1..1000", "limit");
  if (after < 0) return InvalidArgument("must be >= 0", "after");
  TESSERA_RETURN_IF_ERROR(VisibleJob(who, id).status());
  return store_->ListEvents(id, after, limit);
}

Result<api::Job> ControlPlaneService::ApplyJobEvent(api::JobId id, JobEvent event,
                                                    std::string_view reason,
                                                    std::optional<api::Json> plan) {
  for (int i = 0;; ++i) {
    TESSERA_ASSIGN_OR_RETURN(api::Job job, store_->GetJob(id));
    TESSERA_ASSIGN_OR_RETURN(
        JobStep step,
        NextJobState(job.state, event, job.attempt, std::max<int64_t>(1, job.spec.max_attempts)));
    std::string why = reason.empty() ? step.reason : std::string(reason);
    if (step.attempts_exhausted && !reason.empty()) why += "; " + step.reason;
    const int64_t now = clock_->NowUnixMillis();
    auto moved = store_->TransitionJob(
        JobTransition{id, job.state, step.next, why, step.attempts_used, plan, now});
    if (moved.ok()) {
      if (event == JobEvent::kLaunch) {
        Status s = store_->InsertAttempt(
            JobAttempt{id, step.attempts_used, moved->plan, now, std::nullopt, ""});
        if (!s.ok() && s.code() != StatusCode::kAlreadyExists) return s;
      }
      return moved;
    }
    // Another writer moved the job first: re-read and decide again.
    if (moved.status().code() != StatusCode::kFailedPrecondition || i + 1 >= kMaxCasRetries) {
      return moved.status();
    }
  }
}

Result<api::MetricsPage> ControlPlaneService::JobMetrics(const api::Principal& who,
                                                         const api::MetricsQuery& query) {
  if (query.limit < 1 || query.limit > api::kMaxMetricsPageSize) {
    return InvalidArgument("must be 1.." + std::to_string(api::kMaxMetricsPageSize), "limit");
  }
  if (query.since && *query.since < 0) return InvalidArgument("must be >= 0", "since");
  if (query.rank && *query.rank < 0) return InvalidArgument("must be >= 0", "rank");
  if (query.attempt && *query.attempt < 0) return InvalidArgument("must be >= 0", "attempt");
  TESSERA_RETURN_IF_ERROR(VisibleJob(who, query.job_id).status());
  return store_->ListMetrics(query);
}

// ---------------------------------------------------------------- nodes

Result<std::vector<api::Node>> ControlPlaneService::ListNodes(const api::Principal& who) {
  TESSERA_ASSIGN_OR_RETURN(std::vector<api::Node> nodes, store_->ListNodes());
  {
    // The newest beats' times live in memory (see the class comment).
    MutexLock lock(nodes_mu_);
    for (api::Node& n : nodes) {
      auto it = nodes_.find(n.name);
      if (it != nodes_.end())
        n.last_heartbeat_ms = std::max(n.last_heartbeat_ms, it->second.seen_ms);
    }
  }
  if (options_.node_source) {
    for (api::Node& n : nodes) n.source = options_.node_source(n.name);
  }
  return nodes;
}

Result<api::Json> ControlPlaneService::PreviewPlan(const api::Principal& who,
                                                   const api::JobSpec& spec) {
  if (!options_.planner) return Unimplemented("planner not wired yet");
  TESSERA_ASSIGN_OR_RETURN(std::vector<api::Node> nodes, store_->ListNodes());
  try {
    return options_.planner(spec, nodes);
  } catch (const std::exception& e) {
    return Internal(std::string("planner threw: ") + e.what());
  }
}

// ---------------------------------------------------------------- entrypoints

Result<std::vector<api::Entrypoint>> ControlPlaneService::ListEntrypoints(
    const api::Principal& who) {
  return store_->ListEntrypoints();
}

Status ControlPlaneService::AllowEntrypoint(const api::Principal& who,
                                            const api::Entrypoint& entrypoint) {
  TESSERA_RETURN_IF_ERROR(AdminOnly(who, "changing the entrypoint allow-list"));
  return store_->PutEntrypoint(entrypoint);
}

Status ControlPlaneService::DisallowEntrypoint(const api::Principal& who, std::string_view name) {
  TESSERA_RETURN_IF_ERROR(AdminOnly(who, "changing the entrypoint allow-list"));
  return store_->DeleteEntrypoint(name);
}

// ---------------------------------------------------------------- agents

Result<std::vector<api::WorkerLaunch>> ControlPlaneService::ComputeDesiredWorkers(
    const api::HeartbeatRequest& heartbeat) {
  if (!options_.desired_workers) return std::vector<api::WorkerLaunch>{};
  return options_.desired_workers(heartbeat);
}

Status ControlPlaneService::RecordNodeRow(api::HeartbeatRequest* req, bool* send_inventory,
                                          int64_t now_ms) {
  std::optional<api::Node> known;
  {
    MutexLock lock(nodes_mu_);
    auto it = nodes_.find(req->node);
    if (it != nodes_.end()) known = it->second.row;
  }
  if (req->inventory_unchanged) {
    // The node's inventory is what it last sent: keep the stored one.
    std::optional<api::Node> stored = known;
    if (!stored) {
      auto got = store_->GetNode(req->node);
      if (got.ok()) stored = *std::move(got);
    }
    if (stored) {
      req->devices = stored->devices;
      req->links = stored->links;
      req->cpu_cores = stored->cpu_cores;
      req->network = stored->network;
      req->gloo_link = stored->gloo_link;
    } else {
      *send_inventory = true;  // e.g. a fresh database: ask for it
    }
  }
  api::Node node;
  node.name = req->node;
  node.address = req->address;
  node.health = "healthy";
  node.last_heartbeat_ms = now_ms;
  node.devices = req->devices;
  node.links = req->links;
  node.cpu_cores = req->cpu_cores;
  node.network = req->network;
  node.gloo_link = req->gloo_link;
  for (api::Device& d : node.devices) d.node = req->node;
  const bool write = !known || !SameNodeRow(*known, node) ||
                     now_ms - known->last_heartbeat_ms >= options_.node_row_refresh.count();
  uint64_t ticket = 0;
  {
    MutexLock lock(nodes_mu_);
    KnownNode& k = nodes_[req->node];
    k.seen_ms = std::max(k.seen_ms, now_ms);
    if (!write) return Status::Ok();
    ticket = k.write = ++node_writes_;
  }
  Status written = store_->UpsertNode(node);
  MutexLock lock(nodes_mu_);
  KnownNode& k = nodes_[req->node];
  if (written.ok() && k.write == ticket) {
    k.row = std::move(node);
  } else {
    // Failed, or another write for the node started meanwhile (which one
    // the store kept is not known here): the next beat writes again.
    k.row.reset();
  }
  return written;
}

Result<api::HeartbeatRequest> ControlPlaneService::RecordHeartbeat(const api::Json& heartbeat,
                                                                   bool* send_inventory) {
  TESSERA_ASSIGN_OR_RETURN(api::HeartbeatRequest req, api::HeartbeatRequestFromJson(heartbeat));
  *send_inventory = false;
  if (req.node.empty()) return InvalidArgument("must not be empty", "node");
  const int64_t now_ms = clock_->NowUnixMillis();
  TESSERA_RETURN_IF_ERROR(RecordNodeRow(&req, send_inventory, now_ms));

  // One progress summary per job (the newest line, daemon/progress_summary.h,
  // unless an earlier beat recorded a newer one), and every rank's lines for
  // the metrics history (the lines written since the agent's last delivered
  // beat, or the newest line from agents that do not send them): one store
  // write per beat (unknown jobs are skipped). A line sent again is the same
  // point again and is kept once.
  ProgressReport report;
  for (const api::WorkerStatus& w : req.workers) {
    if (w.progress.is_null() || w.key.rank < 0) continue;
    auto record = [&](const api::Json& line) {
      if (auto point = api::MetricPointFromProgressLine(line, w.key.attempt, w.key.rank, now_ms)) {
        report.points.push_back(JobMetricPoint{w.key.job_id, *std::move(point)});
      }
    };
    for (const api::Json& line : w.progress_lines) record(line);
    record(w.progress);
  }
  {
    MutexLock lock(logs_mu_);
    for (const auto& [job, w] : NewestProgressPerJob(req.workers)) {
      const ProgressAge age = AgeOf(*w);
      auto [recorded, first] = summary_age_.try_emplace(job, age);
      if (!first && age < recorded->second) continue;
      recorded->second = age;
      report.latest[job] = w->progress;
    }
  }
  if (!report.latest.empty() || !report.points.empty()) {
    TESSERA_RETURN_IF_ERROR(store_->RecordProgress(report));
  }
  {
    MutexLock lock(logs_mu_);
    for (const api::WorkerStatus& w : req.workers) {
      if (w.log_tail.empty() && !logs_.contains({w.key.job_id, w.key.rank})) continue;
      LogTail& tail = logs_[{w.key.job_id, w.key.rank}];
      if (w.key.attempt < tail.attempt) continue;  // an older attempt's leftovers
      tail.attempt = w.key.attempt;
      if (w.log_tail.empty()) continue;
      // Bounded per rank: the newest kMaxLogLines lines, each cut to
      // kMaxLogLineBytes.
      const size_t first = w.log_tail.size() > kMaxLogLines ? w.log_tail.size() - kMaxLogLines : 0;
      tail.lines.assign(w.log_tail.begin() + static_cast<std::ptrdiff_t>(first), w.log_tail.end());
      for (std::string& line : tail.lines) {
        if (line.size() > kMaxLogLineBytes) line.resize(kMaxLogLineBytes);
      }
    }
  }
  DropEndedJobsLogs();
  return req;
}

void ControlPlaneService::DropEndedJobsLogs() {
  // Steps: (1) every kLogSweepEvery, list the jobs that have tails and were
  // not seen ended yet; (2) ask the store (outside the lock) which of them
  // ended or are gone; (3) drop the gone ones' tails, note when each ended one
  // was first seen ended, and drop the tails of those ended longer than
  // kEndedLogsKeptFor ago or beyond the newest kEndedJobsWithLogs.
  std::set<api::JobId> jobs;
  std::chrono::steady_clock::time_point now;
  {
    MutexLock lock(logs_mu_);
    now = clock_->SteadyNow();
    if (now - logs_swept_at_ < kLogSweepEvery) return;
    logs_swept_at_ = now;
    // A job seen ended stays ended: only the others are asked again.
    for (const auto& [key, tail] : logs_) {
      if (!logs_ended_at_.contains(key.first)) jobs.insert(key.first);
    }
    for (const auto& [job, age] : summary_age_) {
      if (!logs_ended_at_.contains(job)) jobs.insert(job);
    }
  }
  std::set<api::JobId> gone;
  std::set<api::JobId> ended;
  for (api::JobId id : jobs) {
    auto job = store_->GetJob(id);
    if (!job.ok()) {
      if (job.status().code() == StatusCode::kNotFound) gone.insert(id);
    } else if (api::IsTerminal(job->state)) {
      ended.insert(id);
    }
  }
  MutexLock lock(logs_mu_);
  for (api::JobId id : ended) logs_ended_at_.try_emplace(id, now);
  std::vector<std::pair<std::chrono::steady_clock::time_point, api::JobId>> by_end;
  for (const auto& [id, at] : logs_ended_at_) by_end.emplace_back(at, id);
  std::sort(by_end.begin(), by_end.end(), std::greater<>());  // newest first
  std::set<api::JobId> drop = gone;
  for (size_t i = 0; i < by_end.size(); ++i) {
    if (i >= kEndedJobsWithLogs || now - by_end[i].first >= kEndedLogsKeptFor) {
      drop.insert(by_end[i].second);
      logs_ended_at_.erase(by_end[i].second);
    }
  }
  std::erase_if(logs_, [&](const auto& entry) { return drop.contains(entry.first.first); });
  std::erase_if(summary_age_, [&](const auto& entry) { return drop.contains(entry.first); });
}

Result<api::Json> ControlPlaneService::Heartbeat(const api::Json& heartbeat) {
  bool send_inventory = false;
  TESSERA_ASSIGN_OR_RETURN(api::HeartbeatRequest req, RecordHeartbeat(heartbeat, &send_inventory));
  api::HeartbeatResponse resp;
  resp.accepts_unchanged_inventory = true;
  resp.send_inventory = send_inventory;
  TESSERA_ASSIGN_OR_RETURN(resp.desired, ComputeDesiredWorkers(req));
  resp.heartbeat_interval_ms = options_.heartbeat_interval.count();
  return api::ToJson(resp, req.compact_launches);
}

void ControlPlaneService::HeartbeatAsync(const api::Json& heartbeat, HeartbeatDone done) {
  if (!options_.desired_workers_async) {
    done(Heartbeat(heartbeat));
    return;
  }
  bool send_inventory = false;
  Result<api::HeartbeatRequest> req = RecordHeartbeat(heartbeat, &send_inventory);
  if (!req.ok()) {
    done(req.status());
    return;
  }
  const int64_t interval = options_.heartbeat_interval.count();
  const bool compact = req->compact_launches;
  options_.desired_workers_async(*req, [interval, compact, send_inventory,
                                        done = std::move(done)](api::HeartbeatResponse resp) {
    resp.heartbeat_interval_ms = interval;
    resp.accepts_unchanged_inventory = true;
    resp.send_inventory = send_inventory;
    Result<api::Json> answer = [&]() -> Result<api::Json> {
      try {
        return api::ToJson(resp, compact);
      } catch (const std::exception& e) {
        return Internal(std::string("heartbeat answer: ") + e.what());
      }
    }();
    done(std::move(answer));
  });
}

Result<std::vector<std::string>> ControlPlaneService::JobLogs(const api::Principal& who,
                                                              api::JobId id, int64_t rank,
                                                              int64_t tail) {
  TESSERA_RETURN_IF_ERROR(VisibleJob(who, id).status());
  if (rank < 0) return InvalidArgument("must be >= 0", "rank");
  if (tail < 1 || tail > 100) return InvalidArgument("must be between 1 and 100", "tail");
  MutexLock lock(logs_mu_);
  auto it = logs_.find({id, rank});
  if (it == logs_.end() || it->second.lines.empty()) {
    return NotFound("no log reported for rank " + std::to_string(rank) + " of job " +
                    std::to_string(id));
  }
  const auto& lines = it->second.lines;
  size_t n = std::min(lines.size(), static_cast<size_t>(tail));
  return std::vector<std::string>(lines.end() - static_cast<std::ptrdiff_t>(n), lines.end());
}

// ---------------------------------------------------------------- node identity

Result<std::string> ControlPlaneService::AuthenticateNode(std::string_view credential) {
  return auth::AuthenticateNode(store_, credential, clock_->NowUnixMillis());
}

Result<api::IssuedNodeCredential> ControlPlaneService::EnrolNode(std::string_view node) {
  return auth::EnrolNode(store_, node, clock_->NowUnixMillis());
}

Result<std::vector<api::NodeEnrolment>> ControlPlaneService::ListNodeEnrolments(
    const api::Principal& who) {
  TESSERA_RETURN_IF_ERROR(AdminOnly(who, "listing node enrolments"));
  return store_->ListNodeEnrolments();
}

Status ControlPlaneService::RevokeNode(const api::Principal& who, std::string_view node) {
  TESSERA_RETURN_IF_ERROR(AdminOnly(who, "revoking a node"));
  return store_->RevokeNode(node, clock_->NowUnixMillis());
}

Status ControlPlaneService::ReadmitNode(const api::Principal& who, std::string_view node) {
  TESSERA_RETURN_IF_ERROR(AdminOnly(who, "readmitting a node"));
  return auth::ReadmitNode(store_, node);
}

Result<api::Json> ControlPlaneService::JoinBundle(const api::Principal& who) {
  TESSERA_RETURN_IF_ERROR(AdminOnly(who, "the join bundle"));
  if (!options_.join_bundle) return Unimplemented("no join bundle is configured");
  return options_.join_bundle();
}

// ---------------------------------------------------------------- health, metrics

Status ControlPlaneService::Ready() {
  if (stopping_) return Unavailable("tesserad is stopping");
  return store_->Health();
}

void ControlPlaneService::AppendInferenceMetrics(std::string* out) {
  api::JobQuery running;
  running.state = api::JobState::kRunning;
  running.limit = 1000;
  auto page = store_->ListJobs(running);
  if (!page.ok()) return;
  std::string total, done, rate;
  for (const api::Job& job : page->jobs) {
    api::Json p = InferenceProgressOf(job);
    if (p.is_null()) continue;
    const std::string label = "{job=\"" + std::to_string(job.id) + "\"} ";
    total += "tessera_infer_images_total" + label +
             std::to_string(p["images_total"].get<int64_t>()) + "\n";
    done += "tessera_infer_images_done" + label + std::to_string(p["images_done"].get<int64_t>()) +
            "\n";
    rate += "tessera_infer_images_per_second" + label +
            FormatDouble(p["images_per_s"].get<double>()) + "\n";
  }
  *out +=
      "# HELP tessera_infer_images_total Images in a running infer job's input.\n"
      "# TYPE tessera_infer_images_total gauge\n" +
      total +
      "# HELP tessera_infer_images_done Images of a running infer job written and recorded.\n"
      "# TYPE tessera_infer_images_done gauge\n" +
      done +
      "# HELP tessera_infer_images_per_second Images per second of a running infer job (all "
      "ranks).\n# TYPE tessera_infer_images_per_second gauge\n" +
      rate;
}

void ControlPlaneService::AppendMetrics(std::string* out) {
  auto counts = store_->CountJobsByState();
  if (counts.ok()) {
    *out += "# HELP tessera_jobs Jobs by state.\n# TYPE tessera_jobs gauge\n";
    for (const auto& [state, n] : *counts) {
      *out += "tessera_jobs{state=\"" + std::string(api::JobStateName(state)) + "\"} " +
              std::to_string(n) + "\n";
    }
  }
  AppendInferenceMetrics(out);
  const StoreStats stats = store_->Stats();
  const HistogramSnapshot& h = stats.commit_seconds;
  *out +=
      "# HELP tessera_store_commit_seconds Time of one store write transaction (group commit "
      "batch).\n# TYPE tessera_store_commit_seconds histogram\n";
  uint64_t cumulative = 0;
  for (size_t i = 0; i < h.upper_bounds.size(); ++i) {
    cumulative += i < h.counts.size() ? h.counts[i] : 0;
    *out += "tessera_store_commit_seconds_bucket{le=\"" + FormatDouble(h.upper_bounds[i]) + "\"} " +
            std::to_string(cumulative) + "\n";
  }
  *out += "tessera_store_commit_seconds_bucket{le=\"+Inf\"} " + std::to_string(h.count) + "\n";
  *out += "tessera_store_commit_seconds_sum " + FormatDouble(h.sum) + "\n";
  *out += "tessera_store_commit_seconds_count " + std::to_string(h.count) + "\n";
  *out +=
      "# HELP tessera_store_commits_total Store write transactions committed.\n"
      "# TYPE tessera_store_commits_total counter\n"
      "tessera_store_commits_total " +
      std::to_string(stats.commits) +
      "\n# HELP tessera_store_writes_total Store write operations acknowledged.\n"
      "# TYPE tessera_store_writes_total counter\n"
      "tessera_store_writes_total " +
      std::to_string(stats.writes) + "\n";
}

}  // namespace tessera::daemon
