// FakeControlPlane: a small in-memory api::ControlPlane for route tests.
//
// The routes' contract is the ControlPlane interface; the real service is
// tested in tests/daemon/ on a real SQLite file. This fake keeps jobs,
// events, nodes and entrypoints in maps, knows two tokens ("user-token" for
// user "alice", "admin-token" for admin "root") and the join token
// "join-token", and lets a test inject the next error of any call.
#ifndef TESSERA_TESTS_API_FAKE_CONTROL_PLANE_H_
#define TESSERA_TESTS_API_FAKE_CONTROL_PLANE_H_

#include <algorithm>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "api/control_plane.h"

namespace tessera::api::testing {

class FakeControlPlane : public ControlPlane {
 public:
  // The next call of any method (except Authenticate*) returns this error.
  std::optional<Status> next_error;
  Status ready = Status::Ok();
  std::string extra_metrics = "tessera_jobs{state=\"pending\"} 0\n";
  // What the last calls received.
  std::optional<JobQuery> last_query;
  std::optional<JobSpec> last_spec;
  std::optional<Json> last_heartbeat;
  std::vector<Node> nodes;
  std::vector<Entrypoint> entrypoints;
  // What Queue returns.
  std::vector<QueueRow> queue;
  // Log lines JobLogs returns; unset: the interface's default (unimplemented).
  std::optional<std::vector<std::string>> logs;
  std::optional<std::pair<int64_t, int64_t>> last_logs_rank_tail;
  // The plan set PreviewPlan returns; unset: unimplemented (no planner wired in).
  std::optional<Json> preview;
  // Answers PreviewPlan gives first, one per call, before `preview` (e.g. the
  // measuring_profile state).
  std::vector<Json> preview_first;
  int preview_calls = 0;
  // Each job's metrics history (what JobMetrics pages through), any order.
  std::map<JobId, std::vector<MetricPoint>> metrics;
  std::vector<MetricsQuery> metrics_queries;  // every JobMetrics call

  Result<Principal> Authenticate(std::string_view token) override {
    if (token == "user-token") return Principal{"alice", Role::kUser};
    if (token == "admin-token") return Principal{"root", Role::kAdmin};
    return Unauthenticated("unknown or revoked token");
  }
  Status AuthenticateAgent(std::string_view token) override {
    if (token == "join-token") return Status::Ok();
    return Unauthenticated("wrong join token");
  }

  // Node identity: enrolling NAME gives the credential "node-token-NAME";
  // `revoked` names are refused, `in_use` ones exist already.
  std::set<std::string, std::less<>> enrolled, in_use, revoked;
  Result<std::string> AuthenticateNode(std::string_view token) override {
    std::lock_guard lock(mu_);
    if (!token.starts_with("node-token-")) return Unauthenticated("not a node credential");
    std::string node(token.substr(11));
    if (revoked.contains(node)) return Unauthenticated("revoked");
    return node;
  }
  Result<IssuedNodeCredential> EnrolNode(std::string_view node) override {
    std::lock_guard lock(mu_);
    if (auto e = TakeError()) return *e;
    if (revoked.contains(node)) return PermissionDenied("revoked");
    if (in_use.contains(node)) return AlreadyExists("in use", "node");
    enrolled.emplace(node);
    return IssuedNodeCredential{NodeEnrolment{std::string(node), "id", 1, {}, {}},
                                "node-token-" + std::string(node)};
  }
  Result<std::vector<NodeEnrolment>> ListNodeEnrolments(const Principal& who) override {
    std::lock_guard lock(mu_);
    if (!who.is_admin()) return PermissionDenied("admins only");
    std::vector<NodeEnrolment> out;
    for (const std::string& n : enrolled) out.push_back(NodeEnrolment{n, "id", 1, {}, {}});
    return out;
  }
  Status RevokeNode(const Principal& who, std::string_view node) override {
    std::lock_guard lock(mu_);
    if (!who.is_admin()) return PermissionDenied("admins only");
    if (!enrolled.contains(node)) return NotFound("not enrolled");
    revoked.emplace(node);
    return Status::Ok();
  }
  Result<Json> JoinBundle(const Principal& who) override {
    if (!who.is_admin()) return PermissionDenied("admins only");
    return Json{{"join_token", "join-token"}, {"ca_sha256", nullptr}};
  }
  Result<Job> SubmitJob(const Principal& who, const JobSpec& spec) override {
    std::lock_guard lock(mu_);
    if (auto e = TakeError()) return *e;
    last_spec = spec;
    Job job;
    job.id = next_id_++;
    job.owner = who.user;
    job.spec = spec;
    job.created_ms = job.updated_ms = 1000 * job.id;
    jobs_[job.id] = job;
    events_[job.id].push_back(
        Event{static_cast<int64_t>(events_.size()), job.id, 0, "", "pending", 0, "submitted"});
    return job;
  }
  Result<JobPage> ListJobs(const Principal& who, const JobQuery& query) override {
    std::lock_guard lock(mu_);
    if (auto e = TakeError()) return *e;
    last_query = query;
    JobPage page;
    for (auto it = jobs_.upper_bound(query.after); it != jobs_.end(); ++it) {
      if (query.state && it->second.state != *query.state) continue;
      if (query.owner && it->second.owner != *query.owner) continue;
      if (static_cast<int64_t>(page.jobs.size()) == query.limit) {
        page.next_after = page.jobs.back().id;
        break;
      }
      page.jobs.push_back(it->second);
    }
    return page;
  }
  Result<Job> GetJob(const Principal& who, JobId id) override {
    std::lock_guard lock(mu_);
    if (auto e = TakeError()) return *e;
    auto it = jobs_.find(id);
    if (it == jobs_.end()) return NotFound("no job " + std::to_string(id));
    if (!who.is_admin() && it->second.owner != who.user) return PermissionDenied("not your job");
    return it->second;
  }
  Result<Job> CancelJob(const Principal& who, JobId id) override {
    std::lock_guard lock(mu_);
    if (auto e = TakeError()) return *e;
    auto it = jobs_.find(id);
    if (it == jobs_.end()) return NotFound("no job " + std::to_string(id));
    if (IsTerminal(it->second.state)) return FailedPrecondition("job already ended");
    it->second.state = JobState::kCancelled;
    return it->second;
  }
  Result<std::vector<Event>> ListEvents(const Principal& who, JobId id, int64_t after,
                                        int64_t limit) override {
    std::lock_guard lock(mu_);
    if (auto e = TakeError()) return *e;
    auto it = events_.find(id);
    if (it == events_.end()) return NotFound("no job " + std::to_string(id));
    std::vector<Event> out;
    for (const Event& ev : it->second) {
      if (ev.id > after && static_cast<int64_t>(out.size()) < limit) out.push_back(ev);
    }
    return out;
  }
  Result<std::vector<QueueRow>> Queue(const Principal& who) override {
    std::lock_guard lock(mu_);
    if (auto e = TakeError()) return *e;
    return queue;
  }
  Result<std::vector<std::string>> JobLogs(const Principal& who, JobId id, int64_t rank,
                                           int64_t tail) override {
    {
      std::lock_guard lock(mu_);
      if (auto e = TakeError()) return *e;
      last_logs_rank_tail = {rank, tail};
      if (logs) return *logs;
    }
    return ControlPlane::JobLogs(who, id, rank, tail);
  }
  // Pages like the real store: by step, attempt, rank; whole steps only.
  Result<MetricsPage> JobMetrics(const Principal& who, const MetricsQuery& query) override {
    std::lock_guard lock(mu_);
    if (auto e = TakeError()) return *e;
    metrics_queries.push_back(query);
    auto job = jobs_.find(query.job_id);
    if (job == jobs_.end()) return NotFound("no job " + std::to_string(query.job_id));
    if (!who.is_admin() && job->second.owner != who.user) return PermissionDenied("not your job");
    std::vector<MetricPoint> all;
    for (const MetricPoint& p : metrics[query.job_id]) {
      if (query.rank && p.rank != *query.rank) continue;
      if (query.attempt && p.attempt != *query.attempt) continue;
      if (query.since && p.step <= *query.since) continue;
      all.push_back(p);
    }
    std::sort(all.begin(), all.end(), [](const MetricPoint& a, const MetricPoint& b) {
      return std::tie(a.step, a.attempt, a.rank) < std::tie(b.step, b.attempt, b.rank);
    });
    MetricsPage page;
    page.job_id = query.job_id;
    for (size_t i = 0; i < all.size();) {
      size_t end = i;
      while (end < all.size() && all[end].step == all[i].step) ++end;
      if (!page.points.empty() &&
          page.points.size() + (end - i) > static_cast<size_t>(query.limit)) {
        page.next_since = page.points.back().step;
        break;
      }
      page.points.insert(page.points.end(), all.begin() + static_cast<std::ptrdiff_t>(i),
                         all.begin() + static_cast<std::ptrdiff_t>(end));
      i = end;
    }
    return page;
  }
  // Changes a job as tesserad would (state, plan, spec, ...).
  void UpdateJob(JobId id, const std::function<void(Job&)>& change) {
    std::lock_guard lock(mu_);
    change(jobs_.at(id));
  }
  // Attaches inference progress to a job (what GetJob returns).
  void SetInference(JobId id, Json inference) {
    std::lock_guard lock(mu_);
    jobs_.at(id).inference = std::move(inference);
  }
  std::optional<std::pair<JobId, LeaseRequest>> last_lease;
  Result<LeaseResponse> LeaseChunks(JobId id, std::string_view token,
                                    const LeaseRequest& request) override {
    std::lock_guard lock(mu_);
    if (token != "lease-token") return Unauthenticated("not a lease token");
    last_lease = {id, request};
    LeaseResponse out;
    out.chunks = {{0, {"scan-0001.png"}}};
    out.lease_ms = 30000;
    return out;
  }
  Result<std::vector<Node>> ListNodes(const Principal& who) override {
    std::lock_guard lock(mu_);
    if (auto e = TakeError()) return *e;
    return nodes;
  }
  Result<Json> PreviewPlan(const Principal& who, const JobSpec& spec) override {
    std::lock_guard lock(mu_);
    if (auto e = TakeError()) return *e;
    last_spec = spec;
    if (preview_calls < static_cast<int>(preview_first.size())) {
      return preview_first[static_cast<size_t>(preview_calls++)];
    }
    ++preview_calls;
    if (preview) return *preview;
    return Unimplemented("no planner is wired in");
  }
  Result<std::vector<Entrypoint>> ListEntrypoints(const Principal& who) override {
    std::lock_guard lock(mu_);
    if (auto e = TakeError()) return *e;
    return entrypoints;
  }
  Status AllowEntrypoint(const Principal& who, const Entrypoint& entrypoint) override {
    std::lock_guard lock(mu_);
    if (auto e = TakeError()) return *e;
    if (!who.is_admin()) return PermissionDenied("admin only");
    entrypoints.push_back(entrypoint);
    return Status::Ok();
  }
  Status DisallowEntrypoint(const Principal& who, std::string_view name) override {
    std::lock_guard lock(mu_);
    if (auto e = TakeError()) return *e;
    if (!who.is_admin()) return PermissionDenied("admin only");
    for (auto it = entrypoints.begin(); it != entrypoints.end(); ++it) {
      if (it->name == name) {
        entrypoints.erase(it);
        return Status::Ok();
      }
    }
    return NotFound("no such entrypoint");
  }
  Result<Json> Heartbeat(const Json& heartbeat) override {
    std::lock_guard lock(mu_);
    if (auto e = TakeError()) return *e;
    last_heartbeat = heartbeat;
    return Json{{"desired", Json::array()}, {"heartbeat_interval_ms", 1000}};
  }
  Status Ready() override { return ready; }
  void AppendMetrics(std::string* out) override { out->append(extra_metrics); }

  // Adds a job owned by `owner` directly.
  JobId AddJob(const std::string& owner, JobState state = JobState::kPending) {
    std::lock_guard lock(mu_);
    Job job;
    job.id = next_id_++;
    job.owner = owner;
    job.state = state;
    job.spec.name = "job-" + std::to_string(job.id);
    jobs_[job.id] = job;
    return job.id;
  }

 private:
  std::optional<Status> TakeError() {
    std::optional<Status> e;
    e.swap(next_error);
    return e;
  }
  std::mutex mu_;
  JobId next_id_ = 1;
  std::map<JobId, Job> jobs_;
  std::map<JobId, std::vector<Event>> events_;
};

}  // namespace tessera::api::testing

#endif  // TESSERA_TESTS_API_FAKE_CONTROL_PLANE_H_
