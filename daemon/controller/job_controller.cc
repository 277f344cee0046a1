#include "daemon/controller/job_controller.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <future>
#include <iomanip>
#include <memory>
#include <sstream>

#include "api/entrypoint_kind.h"
#include "daemon/controller/infer_input.h"
#include "daemon/controller/planning.h"
#include "daemon/controller/profile_cache.h"
#include "daemon/controller/rank_error.h"
#include "daemon/controller/train_reform.h"
#include "scheduler/plan_json.h"
#include "scheduler/queue_pass.h"

namespace tessera::daemon {
namespace {

using api::JobState;
using Steady = std::chrono::steady_clock;

std::string DeviceKey(const std::string& node, int64_t index) {
  return node + ":" + std::to_string(index);
}

// Every job in a state, following the pagination cursor.
Result<std::vector<api::Job>> AllJobsIn(Store* store, JobState state) {
  std::vector<api::Job> out;
  api::JobQuery q;
  q.state = state;
  q.limit = 1000;
  while (true) {
    TESSERA_ASSIGN_OR_RETURN(api::JobPage page, store->ListJobs(q));
    out.insert(out.end(), page.jobs.begin(), page.jobs.end());
    if (!page.next_after) break;
    q.after = *page.next_after;
  }
  return out;
}

// Whether every chunk of an infer job is done (false when unknown).
bool InferInputDone(Store* store, api::JobId job) {
  auto counts = store->CountChunks(job);
  return counts.ok() && counts->chunks_total > 0 && counts->chunks_done == counts->chunks_total;
}

std::string RankList(const std::vector<int64_t>& ranks) {
  std::ostringstream s;
  for (size_t i = 0; i < ranks.size(); ++i) s << (i ? "," : "") << ranks[i];
  return s.str();
}

// "node boxb lost (no heartbeat), ranks 2; node boxc ...": the event text of
// lost nodes, whatever the attempt does about them.
std::string LostNodesText(const std::map<std::string, std::vector<int64_t>>& lost) {
  std::string text;
  for (const auto& [node, ranks] : lost) {
    text += (text.empty() ? "" : "; ") + std::string("node ") + node +
            " lost (no heartbeat), ranks " + RankList(ranks);
  }
  return text;
}

}  // namespace

JobController::JobController(Store* store, const Clock* clock, JobControllerOptions options)
    : store_(store),
      clock_(clock),
      options_(std::move(options)),
      started_(clock->SteadyNow()),
      lister_(store, InputListerOptions{options_.infer_chunk_images}) {}

int64_t JobController::SteadyMs(Steady::time_point t) const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(clock_->SteadyNow() - t).count();
}

Status JobController::Recover() {
  MutexLock lock(mu_);
  for (JobState state : {JobState::kStarting, JobState::kRunning}) {
    TESSERA_ASSIGN_OR_RETURN(std::vector<api::Job> jobs, AllJobsIn(store_, state));
    for (const api::Job& job : jobs) {
      auto attempt = store_->GetAttempt(job.id, job.attempt);
      Result<AttemptLaunch> launch = attempt.ok() ? AttemptLaunchFromJson(attempt->plan)
                                                  : Result<AttemptLaunch>(attempt.status());
      if (!launch.ok()) {
        auto st =
            StepLocked(job, JobEvent::kFail,
                       "cannot resume after controller restart: " + launch.status().message());
        if (!st.ok()) return st.status();
        continue;
      }
      active_[job.id] = ActiveOf(job, *std::move(launch));
      spdlog::info("job {}: re-adopted attempt {} ({} ranks)", job.id, job.attempt,
                   active_[job.id].launch.ranks.size());
    }
  }
  // A plan chosen but never launched is stale after a restart.
  TESSERA_ASSIGN_OR_RETURN(std::vector<api::Job> planned, AllJobsIn(store_, JobState::kPlanned));
  for (const api::Job& job : planned) {
    auto st = StepLocked(job, JobEvent::kNodeLost, "controller restarted before launch; re-queued");
    if (!st.ok()) return st.status();
  }
  return Status::Ok();
}

std::vector<api::WorkerLaunch> JobController::DesiredForLocked(const std::string& node) const {
  std::vector<api::WorkerLaunch> out;
  for (const auto& [id, active] : active_) {
    for (const RankLaunch& r : active.launch.ranks) {
      if (r.node != node || active.dropped.contains(r.launch.key.rank)) continue;
      out.push_back(r.launch);
      if (active.launch.infer && options_.lease_tokens != nullptr) {
        // Per rank: a rank's token leases for that rank only.
        out.back().env["TESSERA_LEASE_TOKEN"] = options_.lease_tokens->For(
            active.launch.job_id, active.launch.attempt, r.launch.key.rank);
      }
    }
  }
  return out;
}

api::HeartbeatResponse JobController::ResponseFor(const std::string& node) {
  api::HeartbeatResponse response;
  response.heartbeat_interval_ms = options_.detector.heartbeat_interval_ms;
  MutexLock lock(mu_);
  response.desired = DesiredForLocked(node);
  return response;
}

void JobController::OnHeartbeat(const api::HeartbeatRequest& request, HeartbeatDone done) {
  // Read before looking, so a change made after the look reaches the poll.
  const uint64_t seen_news = polls_.news_count();
  api::HeartbeatResponse response;
  response.heartbeat_interval_ms = options_.detector.heartbeat_interval_ms;
  // What the node is handed: each desired key with its re-formed generation
  // (a running worker's new place changes no key, and must not wait out a hold).
  using Handed = std::map<api::WorkerKey, int64_t>;
  auto handed = [](const std::vector<api::WorkerLaunch>& launches) {
    Handed out;
    for (const auto& l : launches) {
      out[l.key] = l.reform.is_object() ? l.reform.value("generation", int64_t{0}) : 0;
    }
    return out;
  };
  Handed parked_with;
  bool park = false;
  {
    MutexLock lock(mu_);
    reports_[request.node] = Report{clock_->SteadyNow(), request.workers};
    ObserveComputeLocked(request);
    response.desired = DesiredForLocked(request.node);
    if (request.wait_ms > 0 && !shutting_down_) {
      std::set<api::WorkerKey> desired, reported;
      for (const auto& l : response.desired) desired.insert(l.key);
      for (const auto& w : request.workers) reported.insert(w.key);
      park = desired == reported;
      parked_with = handed(response.desired);
    }
  }
  if (!park) {
    done(std::move(response));
    return;
  }
  // Nothing for the node to do: park the answer until that changes. The
  // node counts as seen when its request arrived, not when the held answer
  // leaves: a hold is at most one interval, well inside the suspect
  // threshold, and a node that died while held is not kept alive by its
  // own dangling request.
  const std::string node = request.node;
  polls_.Park(
      std::chrono::milliseconds(request.wait_ms), seen_news,
      [this, node, handed, parked_with = std::move(parked_with)] {
        MutexLock lock(mu_);
        return handed(DesiredForLocked(node)) != parked_with;
      },
      [this, node, done = std::move(done)] { done(ResponseFor(node)); });
}

api::HeartbeatResponse JobController::OnHeartbeat(const api::HeartbeatRequest& request) {
  auto answer = std::make_shared<std::promise<api::HeartbeatResponse>>();
  std::future<api::HeartbeatResponse> future = answer->get_future();
  OnHeartbeat(request, [answer](api::HeartbeatResponse r) { answer->set_value(std::move(r)); });
  return future.get();
}

void JobController::Shutdown() {
  {
    MutexLock lock(mu_);
    shutting_down_ = true;
  }
  polls_.Shutdown();
}

Status JobController::Tick() {
  // The nodes are read before taking mu_ and their health changes written
  // after it: heartbeats (which need mu_) never wait for the store.
  Result<std::vector<api::Node>> listed = store_->ListNodes();
  std::vector<api::Node> nodes;
  std::vector<std::pair<std::string, std::string>> health_changes;
  std::set<std::string> held;
  bool changed = false;
  Status st = [&]() -> Status {
    MutexLock lock(mu_);
    const uint64_t before = generation_;
    Status checked = [&]() REQUIRES(mu_) -> Status {
      if (!listed.ok()) return listed.status();
      nodes = *std::move(listed);
      for (const api::Node& n : nodes) {
        for (const api::Device& d : n.devices) device_types_[DeviceKey(n.name, d.index)] = d.name;
      }
      std::map<std::string, NodeHealth> health = UpdateNodeHealthLocked(&nodes, &health_changes);
      WarnAboutEmulationLocked(nodes);
      TESSERA_RETURN_IF_ERROR(CheckActiveLocked(health));
      return RetryRecoveringLocked(health);
    }();
    held = BusyDevicesLocked();
    changed = generation_ != before;
    return checked;
  }();
  if (changed) polls_.Notify();  // answer parked heartbeats whose set changed
  for (const auto& [node, health] : health_changes) {
    Status recorded = store_->SetNodeHealth(node, health);
    if (!recorded.ok()) {
      spdlog::warn("node {}: cannot record health: {}", node, recorded.ToString());
    }
  }
  if (!st.ok()) return st;
  // Planning happens outside the lock: heartbeats are answered meanwhile.
  TESSERA_RETURN_IF_ERROR(PlaceQueued(nodes, held));
  {
    MutexLock lock(mu_);
    held = BusyDevicesLocked();  // what the pass just placed
  }
  TESSERA_RETURN_IF_ERROR(YieldInferToTraining(nodes, held));
  {
    MutexLock lock(mu_);
    held = BusyDevicesLocked();
  }
  return GrowTraining(nodes, held);
}

std::map<std::string, NodeHealth> JobController::UpdateNodeHealthLocked(
    std::vector<api::Node>* nodes, std::vector<std::pair<std::string, std::string>>* changes) {
  std::map<std::string, NodeHealth> out;
  for (api::Node& node : *nodes) {
    auto it = reports_.find(node.name);
    // A node not heard from since this controller started gets the full
    // timeout from the start, so a restart does not kill healthy jobs.
    Steady::time_point seen = it == reports_.end() ? started_ : it->second.seen;
    NodeHealth h = peer_checks_.Classify(node.name, seen, clock_->SteadyNow(), options_.detector);
    if (options_.node_up) {
      if (std::optional<bool> up = options_.node_up(node.name)) {
        h = *up ? NodeHealth::kHealthy : NodeHealth::kDead;
      }
    }
    out[node.name] = h;
    std::string name(NodeHealthName(h));
    if (node.health != name) {
      spdlog::info("node {}: {} -> {}", node.name, node.health, name);
      changes->emplace_back(node.name, name);
      node.health = name;
    }
  }
  return out;
}

const api::WorkerStatus* JobController::FindReportLocked(const std::string& node,
                                                         const api::WorkerKey& key) const {
  auto it = reports_.find(node);
  if (it == reports_.end()) return nullptr;
  for (const api::WorkerStatus& w : it->second.workers) {
    if (w.key == key) return &w;
  }
  return nullptr;
}

Result<api::Job> JobController::StepLocked(const api::Job& job, JobEvent event,
                                           const std::string& reason,
                                           std::optional<api::Json> plan) {
  TESSERA_ASSIGN_OR_RETURN(JobStep step,
                           NextJobState(job.state, event, job.attempt, job.spec.max_attempts));
  JobTransition t;
  t.job_id = job.id;
  t.expected = job.state;
  t.next = step.next;
  t.reason = reason;
  if (step.attempts_exhausted) {
    t.reason = "gave up after " + std::to_string(job.attempt) + " attempts: " + reason;
  }
  t.attempt = step.attempts_used;
  t.plan = std::move(plan);
  t.now_ms = clock_->NowUnixMillis();
  auto result = store_->TransitionJob(t);
  if (result.ok()) {
    spdlog::info("job {}: {} -> {} ({})", job.id, api::JobStateName(job.state),
                 api::JobStateName(step.next), t.reason);
  }
  return result;
}

Status JobController::CheckActiveLocked(const std::map<std::string, NodeHealth>& health) {
  for (auto it = active_.begin(); it != active_.end();) {
    const AttemptLaunch& launch = it->second.launch;
    auto job = store_->GetJob(it->first);
    if (!job.ok()) return job.status();
    if (job->state != JobState::kStarting && job->state != JobState::kRunning) {
      // Cancelled (or failed) from outside: drop it from every desired set.
      store_
          ->FinishAttempt(job->id, launch.attempt, clock_->NowUnixMillis(),
                          api::JobStateName(job->state))
          .IgnoreError();
      RememberStoppingMasterLocked(it->second.launch);
      it = active_.erase(it);
      ++generation_;
      continue;
    }

    std::map<std::string, std::vector<int64_t>> lost;  // dead node -> ranks
    std::string failed;        // the failed rank that says most, with its error
    std::string failed_error;  // that rank's named error (daemon/controller/rank_error.h), or empty
    int failed_weight = -1;
    int running = 0, done = 0;
    std::vector<int64_t> missing;
    std::string vanished;
    for (const RankLaunch& r : launch.ranks) {
      if (it->second.dropped.contains(r.launch.key.rank)) continue;
      auto h = health.find(r.node);
      if (h == health.end() || h->second == NodeHealth::kDead) {
        lost[r.node].push_back(r.launch.key.rank);
        continue;
      }
      const api::WorkerStatus* w = FindReportLocked(r.node, r.launch.key);
      auto joining = it->second.joining.find(r.launch.key.rank);
      if (w != nullptr && joining != it->second.joining.end()) {
        it->second.joining.erase(joining);
        joining = it->second.joining.end();
      }
      if (w == nullptr) {
        missing.push_back(r.launch.key.rank);
        const bool starting = joining != it->second.joining.end() &&
                              SteadyMs(joining->second) <= options_.launch_timeout_ms;
        // A running rank its (reporting) node no longer lists is gone.
        if (job->state == JobState::kRunning && reports_.contains(r.node) && vanished.empty() &&
            !starting) {
          vanished = "rank " + std::to_string(r.launch.key.rank) +
                     (joining != it->second.joining.end() ? " did not start on "
                                                          : " is no longer reported by ") +
                     r.node;
        }
      } else if (w->state == api::WorkerState::kExited) {
        if (w->exit_code == 0) {
          ++done;
        } else {
          // The rank that says why wins over one that only exited, and both
          // over a survivor that lost its peer (exit 75).
          const bool peer_lost = w->exit_code == api::kPeerLostExitCode;
          std::optional<std::string> named = peer_lost ? std::nullopt : NameRankError(w->log_tail);
          const int weight = peer_lost ? 0 : named ? 2 : 1;
          if (weight > failed_weight) {
            failed_weight = weight;
            failed = "rank " + std::to_string(r.launch.key.rank) + " on " + r.node +
                     " exited with code " + std::to_string(w->exit_code);
            if (named) failed += ": " + *named;
            failed_error = named.value_or("");
          }
        }
      } else {
        ++running;
      }
    }

    // A rank saw a peer vanish (its collective failed): check the attempt's
    // other nodes now instead of after the heartbeat timeout.
    std::set<std::string> reporters;
    for (const RankLaunch& r : launch.ranks) {
      const api::WorkerStatus* w = FindReportLocked(r.node, r.launch.key);
      if (w == nullptr) continue;
      // A trainer that waits to re-form says so in its progress instead.
      const bool waiting = w->state == api::WorkerState::kRunning && w->progress.is_object() &&
                           w->progress.value("event", "") == "peer_lost";
      if (waiting ||
          (w->state == api::WorkerState::kExited && w->exit_code == api::kPeerLostExitCode)) {
        reporters.insert(r.node);
      }
    }
    for (const RankLaunch& r : launch.ranks) {
      if (!reporters.empty() && !reporters.contains(r.node)) {
        peer_checks_.Begin(r.node, clock_->SteadyNow());
      }
    }

    if (!lost.empty() && job->state == JobState::kRunning && launch.infer) {
      TESSERA_ASSIGN_OR_RETURN(bool dropped, DropLostInferRanksLocked(*job, &it->second, lost));
      if (dropped) {
        ++it;
        continue;
      }
    }
    std::string no_reform;  // why the survivors of a lost node could not go on
    if (!lost.empty() && job->state == JobState::kRunning && !launch.infer) {
      TESSERA_ASSIGN_OR_RETURN(bool reformed,
                               ReformTrainLocked(*job, &it->second, lost, &no_reform));
      if (reformed) {
        ++it;
        continue;
      }
    }
    const int world = static_cast<int>(launch.ranks.size() - it->second.dropped.size());
    std::optional<JobEvent> event;
    std::string reason;
    if (!lost.empty()) {
      event = JobEvent::kNodeLost;
      reason = LostNodesText(lost);
      if (!no_reform.empty()) reason += " (the survivors cannot go on: " + no_reform + ")";
    } else if (!failed.empty() || !vanished.empty()) {
      event = JobEvent::kRankFailed;
      reason = failed.empty() ? vanished : failed;
      if (const int64_t g = NextReformGeneration(launch) - 1; g > 0) {
        reason = "after re-forming (generation " + std::to_string(g) + "): " + reason;
      }
    } else if (done == world && launch.infer && !InferInputDone(store_, job->id)) {
      event = JobEvent::kRankFailed;
      reason = "all " + std::to_string(world) + " ranks exited before every chunk was done";
    } else if (done == world) {
      if (job->state == JobState::kStarting) {
        // Finished before we saw them all running: record both steps.
        auto r = StepLocked(*job, JobEvent::kAllRunning,
                            "all " + std::to_string(world) + " ranks started");
        if (!r.ok()) return r.status();
        job = *r;
      }
      event = JobEvent::kSucceed;
      reason = "all " + std::to_string(world) + " ranks finished";
    } else if (job->state == JobState::kStarting && missing.empty()) {
      event = JobEvent::kAllRunning;
      reason = "all " + std::to_string(world) + " ranks running";
    } else if (job->state == JobState::kStarting &&
               SteadyMs(it->second.launched_at) > options_.launch_timeout_ms) {
      event = JobEvent::kRankFailed;
      reason = "ranks " + RankList(missing) + " did not start within " +
               std::to_string(options_.launch_timeout_ms / 1000) + " s";
    }
    if (!event) {
      ++it;
      continue;
    }
    if (*event == JobEvent::kRankFailed || *event == JobEvent::kNodeLost) {
      std::optional<std::string> loop =
          CrashLoopLocked(*job, it->second, *event == JobEvent::kRankFailed ? failed_error : "");
      if (loop) {
        event = JobEvent::kFail;
        reason = *loop + ": " + reason;
      }
    }
    auto next = StepLocked(*job, *event, reason);
    if (!next.ok()) return next.status();
    if (next->state == JobState::kRunning) {
      ++it;
      continue;
    }
    store_->FinishAttempt(job->id, launch.attempt, clock_->NowUnixMillis(), reason).IgnoreError();
    if (next->state == JobState::kRecovering) {
      // The first retry goes as soon as the old ranks stopped; later ones back off.
      int64_t backoff = job->attempt <= 1 ? 0 : options_.retry_backoff_ms;
      for (int64_t a = 2; a < job->attempt && backoff < options_.max_retry_backoff_ms; ++a) {
        backoff *= 2;
      }
      backoff = std::min(backoff, options_.max_retry_backoff_ms);
      retry_at_[job->id] = clock_->SteadyNow() + std::chrono::milliseconds(backoff);
    }
    RememberStoppingMasterLocked(it->second.launch);
    it = active_.erase(it);
    ++generation_;
  }
  return Status::Ok();
}

void JobController::RememberStoppingMasterLocked(const AttemptLaunch& launch) {
  if (launch.ranks.empty()) return;
  const RankLaunch& master = launch.ranks.front();
  AttemptLaunch ports;  // only what AddMasterPort reads
  ports.ranks.push_back(master);
  stopping_masters_.push_back(
      {master.node, master.launch.key, std::move(ports), clock_->SteadyNow()});
}

JobController::Active JobController::ActiveOf(const api::Job& job, AttemptLaunch launch) const {
  Active active;
  active.launch = std::move(launch);
  active.launched_at = clock_->SteadyNow();
  active.owner = job.owner;
  if (job.spec.kind == api::JobKind::kTrain) active.correction_key = CorrectionKey(job.spec);
  active.min_devices = job.spec.min_devices;
  return active;
}

bool JobController::IndependentRanks(const AttemptLaunch& launch) {
  if (!launch.infer || launch.rank_plan.contains("tiling")) return false;
  for (const auto& replica : launch.rank_plan.value("replicas", api::Json::array())) {
    if (replica.value("stages", api::Json::array()).size() != 1) return false;
  }
  return true;
}

Status JobController::DropInferRanksLocked(const api::Job& job, Active* active,
                                           const std::vector<int64_t>& ranks,
                                           const std::string& why) {
  const int64_t now = clock_->NowUnixMillis();
  for (int64_t rank : ranks) {
    // Renewing the rank's leases until now hands them back at once.
    ChunkLeaseRequest release;
    release.job_id = job.id;
    release.attempt = active->launch.attempt;
    release.rank = rank;
    release.max_chunks = 0;
    release.now_ms = now;
    release.lease_until_ms = now;
    TESSERA_ASSIGN_OR_RETURN(ChunkLeaseResult released, store_->LeaseChunks(release));
    (void)released;
    active->dropped.insert(rank);
  }
  TESSERA_ASSIGN_OR_RETURN(api::Job next, StepLocked(job, JobEvent::kRanksDropped, why));
  (void)next;
  ++generation_;
  return Status::Ok();
}

Result<bool> JobController::ReformTrainLocked(
    const api::Job& job, Active* active, const std::map<std::string, std::vector<int64_t>>& lost,
    std::string* why) {
  // Steps (daemon/controller/train_reform.h): (1) can it; (2) plan on the
  // survivors' devices; (3) ApplyReformLocked: hand each survivor its place
  // and record it.
  const AttemptLaunch& old = active->launch;
  std::set<int64_t> gone(active->dropped.begin(), active->dropped.end());
  for (const auto& [node, ranks] : lost) gone.insert(ranks.begin(), ranks.end());
  if (auto blocker = ReformBlocker(job.spec, old)) {
    *why = *blocker;
    return false;
  }
  std::set<int64_t> survivors;
  std::set<std::string> survivor_devices;
  for (const RankLaunch& r : old.ranks) {
    if (gone.contains(r.launch.key.rank)) continue;
    const api::WorkerStatus* w = FindReportLocked(r.node, r.launch.key);
    if (w == nullptr || w->state != api::WorkerState::kRunning) {
      *why = "rank " + std::to_string(r.launch.key.rank) + " is not running";
      return false;
    }
    if (options_.node_up && options_.node_up(r.node)) {
      *why = "rank " + std::to_string(r.launch.key.rank) + " runs under Slurm, not an agent";
      return false;
    }
    survivors.insert(r.launch.key.rank);
    survivor_devices.insert(DeviceKey(r.node, r.device_index));
  }
  if (survivors.empty()) {
    *why = "no rank survived";
    return false;
  }
  // (2) The survivors' devices, and the free ones while no job waits (a
  // waiting job comes first to those, as the queue would have it).
  TESSERA_ASSIGN_OR_RETURN(std::vector<api::Node> nodes, store_->ListNodes());
  TESSERA_ASSIGN_OR_RETURN(std::vector<api::Job> pending, AllJobsIn(store_, JobState::kPending));
  const std::set<std::string> busy = BusyDevicesLocked();
  std::set<std::string> others;
  for (api::Node& n : nodes) {  // as this pass sees them, not as last recorded
    for (api::Device& d : n.devices) {
      const std::string key = DeviceKey(n.name, d.index);
      if (survivor_devices.contains(key)) {
        d.busy = false;  // ours
      } else if (!pending.empty() || busy.contains(key)) {
        others.insert(key);
      }
    }
    if (lost.contains(n.name)) {
      n.health = "dead";
    } else if (std::any_of(n.devices.begin(), n.devices.end(), [&](const api::Device& d) {
                 return survivor_devices.contains(DeviceKey(n.name, d.index));
               })) {
      n.health = "healthy";
    }
  }
  Result<scheduler::PlanSet> plans = Plan(SnapshotOf(nodes, others), job.spec);
  if (!plans.ok() || plans->plans.empty()) {
    *why = "no plan fits the survivors: " +
           (plans.ok() ? std::string("none") : plans.status().message());
    return false;
  }
  std::string head = LostNodesText(lost);
  if (auto orphans = OrphanLayers(old, gone)) {
    head += " (layers " + *orphans +
            " were held only by the lost ranks: the ranks that take them load them from the "
            "newest checkpoint)";
  }
  return ApplyReformLocked(job, active, plans->plans.front(), nodes, survivors, gone, head, why);
}

Result<bool> JobController::ApplyReformLocked(const api::Job& job, Active* active,
                                              const scheduler::Plan& best,
                                              const std::vector<api::Node>& nodes,
                                              const std::set<int64_t>& survivors,
                                              const std::set<int64_t>& gone,
                                              const std::string& head, std::string* why) {
  const AttemptLaunch& old = active->launch;
  std::map<std::string, std::string> addresses;
  for (const api::Node& n : nodes) addresses[n.name] = n.address.empty() ? "127.0.0.1" : n.address;
  auto entry = store_->GetEntrypoint(job.spec.entrypoint);
  if (!entry.ok()) {
    *why = "entrypoint " + job.spec.entrypoint + " is no longer allowed";
    return false;
  }
  MasterPortsInUse ports;
  for (const auto& [id, a] : active_) AddMasterPort(a.launch, &ports);
  for (const StoppingMaster& m : stopping_masters_) AddMasterPort(m.launch, &ports);
  const api::Json plan_json = scheduler::ToJson(best);
  auto fresh = BuildAttemptLaunch(job, old.attempt, best, plan_json,
                                  EntrypointCommand{entry->name, entry->command}, addresses,
                                  options_.launch, ports);
  if (!fresh.ok()) {
    *why = fresh.status().message();
    return false;
  }
  const int64_t generation = NextReformGeneration(old);
  auto reformed = ReformRanks(old, survivors, *fresh, generation);
  if (!reformed.ok()) {
    *why = reformed.status().message();
    return false;
  }
  // The old rendezvous port stays held while its host runs.
  RememberStoppingMasterLocked(old);
  const size_t kept = fresh->ranks.size() - reformed->joined.size();
  const bool one = kept == 1;
  std::string reason = head + (one ? ": the running rank" : ": the " + std::to_string(kept) +
                                                                " running ranks") +
                       (gone.empty() ? (one ? " keeps its state" : " keep their state")
                                     : (one ? " re-forms without it" : " re-form without it")) +
                       (one ? " and trains on from its" : " and train on from their") +
                       " last completed step";
  if (!reformed->joined.empty()) {
    const bool one_joined = reformed->joined.size() == 1;
    reason += ", joined by " + std::to_string(reformed->joined.size()) + " new rank" +
              (one_joined ? "" : "s") + " (rank" + (one_joined ? " " : "s ") +
              RankList(reformed->joined) + ") that take" + (one_joined ? "s its" : " their") +
              " state from " + (one ? "it" : "them");
  }
  reason += " (generation " + std::to_string(generation) + ", " +
            std::string(scheduler::LayoutName(best.layout)) + " over " +
            std::to_string(fresh->ranks.size()) + " devices)";
  if (!reformed->unused.empty()) {
    reason += "; ranks " + RankList(reformed->unused) + " are left out of the new plan";
  }
  active->launch = std::move(reformed->launch);
  for (int64_t r : reformed->joined) active->joining[r] = clock_->SteadyNow();
  for (int64_t r : gone) active->dropped.insert(r);
  for (int64_t r : reformed->unused) active->dropped.insert(r);
  active->launched_at = clock_->SteadyNow();
  // Observations map ranks to stages by the first plan's numbering.
  active->correction_key.clear();
  if (auto record = store_->GetAttempt(job.id, old.attempt); record.ok()) {
    record->plan = ToJson(active->launch);
    if (store_->DeleteAttempt(job.id, record->attempt).ok()) {
      store_->InsertAttempt(*record).IgnoreError();
    }
  }
  TESSERA_ASSIGN_OR_RETURN(api::Job next, StepLocked(job, JobEvent::kReformed, reason, plan_json));
  (void)next;
  ++generation_;
  return true;
}

Status JobController::GrowTraining(const std::vector<api::Node>& nodes,
                                   const std::set<std::string>& held) {
  // Steps: (1) at most once every grow_check_ms, and only while no job waits
  // (free devices go to waiting jobs first); (2) take the running train
  // attempts that could re-form, unchanged for grow_settle_ms, every rank
  // running; (3) plan each on its own devices and on its own plus the free
  // ones (outside the lock); (4) when the second uses devices the attempt lacks
  // and predicts a step at least grow_min_speedup faster, re-form onto it: the
  // running ranks keep their state, the new ones join and take theirs from them.
  const auto now = clock_->SteadyNow();
  if (options_.grow_min_speedup <= 0 ||
      now - grow_checked_at_ < std::chrono::milliseconds(options_.grow_check_ms)) {
    return Status::Ok();
  }
  grow_checked_at_ = now;
  TESSERA_ASSIGN_OR_RETURN(std::vector<api::Job> pending, AllJobsIn(store_, JobState::kPending));
  if (!pending.empty()) return Status::Ok();
  struct Candidate {
    api::Job job;
    int64_t attempt = 0;
    int64_t generation = 0;
    std::set<std::string> devices;
  };
  std::vector<Candidate> candidates;
  {
    MutexLock lock(mu_);
    for (const auto& [id, active] : active_) {
      if (SteadyMs(active.launched_at) < options_.grow_settle_ms) continue;
      auto job = store_->GetJob(id);
      if (!job.ok() || job->state != JobState::kRunning) continue;
      if (ReformBlocker(job->spec, active.launch)) continue;
      Candidate c{*job, active.launch.attempt, NextReformGeneration(active.launch), {}};
      bool running = true;
      for (const RankLaunch& r : active.launch.ranks) {
        if (active.dropped.contains(r.launch.key.rank)) continue;
        const api::WorkerStatus* w = FindReportLocked(r.node, r.launch.key);
        running = running && w != nullptr && w->state == api::WorkerState::kRunning &&
                  !(options_.node_up && options_.node_up(r.node));
        c.devices.insert(DeviceKey(r.node, r.device_index));
      }
      if (running) candidates.push_back(std::move(c));
    }
  }
  for (const Candidate& c : candidates) {
    // (3) Its own devices count as free to both plans.
    std::vector<api::Node> mine = nodes;
    std::set<std::string> busy_now = held, others;
    for (const std::string& d : c.devices) busy_now.erase(d);
    for (api::Node& n : mine) {
      for (api::Device& d : n.devices) {
        const std::string key = DeviceKey(n.name, d.index);
        if (c.devices.contains(key)) d.busy = false;
        others.insert(key);
      }
    }
    for (const std::string& d : c.devices) others.erase(d);
    Result<scheduler::PlanSet> current = Plan(SnapshotOf(mine, others), c.job.spec);
    Result<scheduler::PlanSet> wider = Plan(SnapshotOf(mine, busy_now), c.job.spec);
    if (!current.ok() || !wider.ok() || current->plans.empty() || wider->plans.empty()) continue;
    const scheduler::Plan& best = wider->plans.front();
    std::vector<std::string> gained;
    for (const scheduler::DeviceId& d : best.Devices()) {
      const std::string key = DeviceKey(d.node, d.index);
      if (!c.devices.contains(key)) gained.push_back(key);
    }
    const double before = current->plans.front().predicted.step_s;
    const double after = best.predicted.step_s;
    if (gained.empty() || !(after > 0) || before < after * options_.grow_min_speedup) continue;
    // (4) Unless the attempt changed meanwhile.
    MutexLock lock(mu_);
    auto it = active_.find(c.job.id);
    if (it == active_.end() || it->second.launch.attempt != c.attempt ||
        NextReformGeneration(it->second.launch) != c.generation) {
      continue;
    }
    std::set<int64_t> running;
    for (const RankLaunch& r : it->second.launch.ranks) {
      if (!it->second.dropped.contains(r.launch.key.rank)) running.insert(r.launch.key.rank);
    }
    std::ostringstream head;
    head << "devices ";
    for (size_t i = 0; i < gained.size(); ++i) head << (i ? ", " : "") << gained[i];
    head << " are free: the job grows (predicted step " << std::fixed << std::setprecision(3)
         << before << " s -> " << after << " s)";
    std::string why;
    TESSERA_ASSIGN_OR_RETURN(bool grew, ApplyReformLocked(c.job, &it->second, best, mine, running,
                                                          {}, head.str(), &why));
    if (grew) {
      polls_.Notify();
    } else {
      spdlog::warn("job {}: could not grow: {}", c.job.id, why);
    }
  }
  return Status::Ok();
}

Result<bool> JobController::DropLostInferRanksLocked(
    const api::Job& job, Active* active, const std::map<std::string, std::vector<int64_t>>& lost) {
  const AttemptLaunch& launch = active->launch;
  if (!IndependentRanks(launch)) return false;
  size_t lost_ranks = 0;
  for (const auto& [node, ranks] : lost) lost_ranks += ranks.size();
  if (lost_ranks + active->dropped.size() >= launch.ranks.size()) return false;  // none left

  std::vector<int64_t> dropped;
  std::string reason = LostNodesText(lost);
  for (const auto& [node, ranks] : lost) dropped.insert(dropped.end(), ranks.begin(), ranks.end());
  const int64_t left =
      static_cast<int64_t>(launch.ranks.size() - active->dropped.size() - dropped.size());
  reason += ": the other " + std::to_string(left) + " rank" + (left == 1 ? "" : "s") +
            " go on, and the chunks the lost ranks held went back to the queue";
  TESSERA_RETURN_IF_ERROR(DropInferRanksLocked(job, active, dropped, reason));
  return true;
}

Status JobController::YieldInferToTraining(const std::vector<api::Node>& nodes,
                                           const std::set<std::string>& held) {
  // Steps: (1) once a second, list the devices running infer attempts could
  // give back (every independent rank but the lowest of each); (2) take the
  // waiting train jobs by priority, then age, skipping those their user's
  // limits hold; (3) plan the first on the free devices plus those; if its
  // best plan uses some, and no infer job it takes from has a higher
  // priority, (4) drop those ranks, and let the next pass place it.
  const auto now = clock_->SteadyNow();
  if (now - yield_checked_at_ < std::chrono::seconds(1)) return Status::Ok();
  yield_checked_at_ = now;
  struct Yieldable {
    api::JobId job;
    int64_t rank;
  };
  std::map<std::string, Yieldable> yieldable;  // (1) by device key
  {
    MutexLock lock(mu_);
    for (const auto& [id, active] : active_) {
      if (!IndependentRanks(active.launch)) continue;
      int64_t kept = 0;  // the lowest live ranks stay: min_devices, at least one
      for (const RankLaunch& r : active.launch.ranks) {
        if (active.dropped.contains(r.launch.key.rank)) continue;
        if (kept < std::max<int64_t>(1, active.min_devices)) {
          ++kept;
          continue;
        }
        yieldable[DeviceKey(r.node, r.device_index)] = {id, r.launch.key.rank};
      }
    }
  }
  if (yieldable.empty()) return Status::Ok();
  TESSERA_ASSIGN_OR_RETURN(std::vector<api::Job> pending, AllJobsIn(store_, JobState::kPending));
  std::erase_if(pending, [](const api::Job& j) { return j.spec.kind != api::JobKind::kTrain; });
  std::stable_sort(pending.begin(), pending.end(), [](const api::Job& a, const api::Job& b) {
    return a.spec.priority != b.spec.priority ? a.spec.priority > b.spec.priority : a.id < b.id;
  });
  const std::map<std::string, scheduler::UserUsage> usage = UsageByUser();
  std::set<std::string> busy = held;
  for (const auto& [device, y] : yieldable) busy.erase(device);
  // The agents report the devices the yielding ranks run on as busy.
  std::vector<api::Node> freed = nodes;
  for (api::Node& n : freed) {
    for (api::Device& d : n.devices) {
      if (yieldable.contains(DeviceKey(n.name, d.index))) d.busy = false;
    }
  }
  for (const api::Job& job : pending) {  // (2)
    auto held_by = usage.find(job.owner);
    if (!scheduler::LimitHolds(job.owner, options_.users.For(job.owner),
                               held_by == usage.end() ? scheduler::UserUsage{} : held_by->second,
                               job.spec.min_devices)
             .empty()) {
      continue;
    }
    Result<scheduler::PlanSet> plans = PlanCached(job, freed, busy);  // (3)
    if (!plans.ok() || plans->plans.empty()) continue;
    std::map<api::JobId, std::vector<int64_t>> take;
    std::map<api::JobId, std::vector<std::string>> devices;
    for (const scheduler::Replica& r : plans->plans.front().replicas) {
      for (const scheduler::Stage& st : r.stages) {
        for (const scheduler::DeviceId& d : st.devices) {
          auto y = yieldable.find(DeviceKey(d.node, d.index));
          if (y == yieldable.end()) continue;
          take[y->second.job].push_back(y->second.rank);
          devices[y->second.job].push_back(d.ToString());
        }
      }
    }
    if (take.empty()) continue;  // the free devices hold it: the pass places it
    bool outranked = false;
    std::map<api::JobId, api::Job> infer_jobs;
    for (const auto& [id, ranks] : take) {
      TESSERA_ASSIGN_OR_RETURN(api::Job infer, store_->GetJob(id));
      outranked = outranked || infer.spec.priority > job.spec.priority;
      infer_jobs.emplace(id, std::move(infer));
    }
    if (outranked) continue;
    {
      MutexLock lock(mu_);  // (4)
      for (const auto& [id, ranks] : take) {
        auto active = active_.find(id);
        if (active == active_.end() || infer_jobs.at(id).state != JobState::kRunning) continue;
        std::string list;
        for (const std::string& d : devices.at(id)) list += (list.empty() ? "" : ", ") + d;
        const int64_t left = static_cast<int64_t>(active->second.launch.ranks.size() -
                                                  active->second.dropped.size() - ranks.size());
        TESSERA_RETURN_IF_ERROR(DropInferRanksLocked(
            infer_jobs.at(id), &active->second, ranks,
            (ranks.size() == 1 ? "rank " + RankList(ranks) + " gives "
                               : "ranks " + RankList(ranks) + " give ") +
                list + " to job " + std::to_string(job.id) + " (train, " + job.owner +
                "): inference fills the gaps; the chunks " + (ranks.size() == 1 ? "it" : "they") +
                " held went back to the queue, the other " + std::to_string(left) + " rank" +
                (left == 1 ? "" : "s") + " go on"));
      }
    }
    polls_.Notify();
    SetWaiting(job.id, "infer jobs give back devices for it");
    break;
  }
  return Status::Ok();
}

std::optional<std::string> JobController::CrashLoopLocked(const api::Job& job, const Active& active,
                                                          const std::string& error) {
  const AttemptLaunch& launch = active.launch;
  // Progress: a step any rank reported, or (for a script that reports no
  // steps) a run longer than the crash-loop window.
  bool progressed = SteadyMs(active.launched_at) > options_.crash_loop_window_ms;
  for (const RankLaunch& r : launch.ranks) {
    const api::WorkerStatus* w = FindReportLocked(r.node, r.launch.key);
    if (w != nullptr && w->progress.is_object()) progressed = true;
  }
  if (error.empty() || progressed) {
    crash_history_.erase(job.id);
    return std::nullopt;
  }
  const std::string signature = CrashSignature(error);
  std::optional<std::string> loop;
  auto previous = crash_history_.find(job.id);
  if (previous != crash_history_.end() && previous->second.signature == signature &&
      previous->second.attempt + 1 == launch.attempt) {
    loop = "crash loop: attempts " + std::to_string(previous->second.attempt) + " and " +
           std::to_string(launch.attempt) + " failed the same way before any progress";
  }
  crash_history_[job.id] = {signature, launch.attempt};
  return loop;
}

bool JobController::JobHasLiveWorkersLocked(api::JobId job,
                                            const std::map<std::string, NodeHealth>& health) const {
  for (const auto& [node, report] : reports_) {
    auto h = health.find(node);
    if (h == health.end() || h->second == NodeHealth::kDead) continue;
    for (const api::WorkerStatus& w : report.workers) {
      if (w.key.job_id == job && w.state != api::WorkerState::kExited) return true;
    }
  }
  return false;
}

Status JobController::RetryRecoveringLocked(const std::map<std::string, NodeHealth>& health) {
  TESSERA_ASSIGN_OR_RETURN(std::vector<api::Job> jobs, AllJobsIn(store_, JobState::kRecovering));
  for (const api::Job& job : jobs) {
    auto [at, inserted] = retry_at_.try_emplace(job.id, clock_->SteadyNow());
    if (clock_->SteadyNow() < at->second) continue;
    // Wait until the old ranks stopped (their agents were told to stop them),
    // so the next attempt does not race them for devices or checkpoints.
    bool waited_enough = SteadyMs(at->second) > options_.stop_wait_ms;
    if (JobHasLiveWorkersLocked(job.id, health) && !waited_enough) continue;
    auto next = StepLocked(job, JobEvent::kRetry, job.reason.empty() ? "retry" : job.reason);
    if (!next.ok()) return next.status();
    retry_at_.erase(job.id);
  }
  return Status::Ok();
}

std::set<std::string> JobController::BusyDevicesLocked() const {
  std::set<std::string> busy;
  for (const auto& [id, active] : active_) {
    for (const RankLaunch& r : active.launch.ranks) {
      if (!active.dropped.contains(r.launch.key.rank)) {
        busy.insert(DeviceKey(r.node, r.device_index));
      }
    }
  }
  return busy;
}

void JobController::WarnAboutEmulationLocked(const std::vector<api::Node>& nodes) {
  std::vector<std::string> warnings = EmulationCapacityWarnings(nodes);
  if (warnings == emulation_warnings_) return;  // said once per change
  for (const std::string& w : warnings) spdlog::warn("{}", w);
  emulation_warnings_ = std::move(warnings);
}

Result<scheduler::PlanSet> JobController::PlanCached(const api::Job& job,
                                                     const std::vector<api::Node>& nodes,
                                                     const std::set<std::string>& busy) {
  uint64_t key = inventory_key_;
  for (const std::string& d : busy) key = key * 1099511628211ull ^ std::hash<std::string>{}(d);
  // A user's device limit may bound the job's max_devices differently each pass.
  key = key * 1099511628211ull ^ static_cast<uint64_t>(job.spec.max_devices);
  {
    // Corrected profiles plan again.
    MutexLock lock(corrections_mu_);
    key = key * 1099511628211ull ^ corrections_.generation();
  }
  std::vector<CachedPlan>& cached = plan_cache_[job.id];
  for (const CachedPlan& c : cached) {
    if (c.cluster_key == key) return c.plans;
  }
  ++plans_made_;
  Result<scheduler::PlanSet> plans = Plan(SnapshotOf(nodes, busy), job.spec);
  // A profile still being measured (or any passing failure) is asked again.
  const bool lasting = plans.ok() || plans.status().code() == StatusCode::kFailedPrecondition ||
                       plans.status().code() == StatusCode::kNotFound ||
                       plans.status().code() == StatusCode::kInvalidArgument;
  if (lasting) {
    constexpr size_t kPerJob = 4;  // the queue pass asks a job about a few cluster states
    if (cached.size() >= kPerJob) cached.erase(cached.begin());
    cached.push_back(CachedPlan{key, plans});
  }
  return plans;
}

Result<scheduler::PlanSet> JobController::Plan(const scheduler::ClusterSnapshot& snapshot,
                                               const api::JobSpec& spec) {
  // A model: entrypoint's train job is planned by its file's layers.
  std::string model_file;
  if (api::EntrypointKindOf(spec.entrypoint) == api::EntrypointKind::kModel &&
      spec.kind == api::JobKind::kTrain) {
    if (auto entry = store_->GetEntrypoint(spec.entrypoint); entry.ok()) {
      model_file = entry->command;
    }
  }
  scheduler::ClusterSnapshot corrected = snapshot;
  {
    MutexLock lock(corrections_mu_);
    corrections_.Apply(CorrectionKey(spec), &corrected);
  }
  return PlanJob(corrected, spec, options_.profiles, model_file);
}

void JobController::ObserveComputeLocked(const api::HeartbeatRequest& request) {
  // Steps: for each reporting rank of an active train attempt, (1) find its
  // stage in the attempt's plan (ranks are numbered replica by replica, stage
  // by stage; only single-stage replicas count) and its device's type; (2) take each progress line
  // newer than the last observed one, past the first two steps (warm-up); (3) set its compute_s
  // against the stage's prediction.
  for (const api::WorkerStatus& w : request.workers) {
    auto it = active_.find(w.key.job_id);
    if (it == active_.end() || it->second.correction_key.empty() ||
        w.key.attempt != it->second.launch.attempt || w.key.rank < 0 ||
        w.key.rank >= static_cast<int64_t>(it->second.launch.ranks.size())) {
      continue;
    }
    Active& active = it->second;
    double predicted = 0, scale = 1;  // (1)
    int64_t rank = 0;
    const api::Json& plan = active.launch.plan;
    if (plan.is_object() && plan.contains("replicas") && plan["replicas"].is_array()) {
      for (const api::Json& replica : plan["replicas"]) {
        if (!replica.is_object() || !replica.contains("stages") || !replica["stages"].is_array()) {
          continue;
        }
        const bool whole = replica["stages"].size() == 1;
        for (const api::Json& st : replica["stages"]) {
          // Only a replica that holds the whole model measures the device type
          // against the whole profile: a pipeline stage's few layers (a lone
          // activation) are dominated by per-call costs the ratio would blow up.
          if (rank++ != w.key.rank || !st.is_object() || !whole) continue;
          if (st.contains("compute_s") && st["compute_s"].is_number()) {
            predicted = st["compute_s"].get<double>();
          }
          if (st.contains("compute_scale") && st["compute_scale"].is_number()) {
            scale = st["compute_scale"].get<double>();
          }
        }
      }
    }
    const RankLaunch& r = active.launch.ranks[static_cast<size_t>(w.key.rank)];
    auto type = device_types_.find(DeviceKey(r.node, r.device_index));
    if (!(predicted > 0) || type == device_types_.end()) continue;
    int64_t& seen = active.observed_step[w.key.rank];
    std::vector<const api::Json*> lines;
    for (const api::Json& line : w.progress_lines) lines.push_back(&line);
    lines.push_back(&w.progress);
    for (const api::Json* line : lines) {  // (2)
      if (!line->is_object() || !line->contains("compute_s") || !line->contains("step") ||
          !(*line)["compute_s"].is_number() || !(*line)["step"].is_number_integer()) {
        continue;
      }
      const int64_t step = (*line)["step"].get<int64_t>();
      if (step <= seen || step <= 2) continue;
      seen = step;
      MutexLock lock(corrections_mu_);  // (3)
      const uint64_t before = corrections_.generation();
      corrections_.Observe(active.correction_key, type->second, predicted, scale,
                           (*line)["compute_s"].get<double>());
      if (corrections_.generation() != before) {
        // Said once when a factor is first known; its later moves at debug level.
        const bool first = corrections_.Samples(active.correction_key, type->second) ==
                           scheduler::ComputeCorrection::kMinSamples;
        spdlog::log(first ? spdlog::level::info : spdlog::level::debug,
                    "profile of {} on {}: compute observed at {:.2f}x the profile's ({} steps)",
                    active.correction_key, type->second,
                    corrections_.Factor(active.correction_key, type->second),
                    corrections_.Samples(active.correction_key, type->second));
      }
    }
  }
}

Status JobController::PlaceQueued(const std::vector<api::Node>& nodes,
                                  const std::set<std::string>& held) {
  // Nothing can be placed without a free device: skip reading the queue.
  bool any_free = false;
  for (const api::Node& n : nodes) {
    if (n.health != "healthy") continue;
    for (const api::Device& d : n.devices) {
      any_free = any_free || !held.contains(DeviceKey(n.name, d.index));
    }
  }
  if (!any_free) return ViewQueueWithoutFreeDevices();
  TESSERA_ASSIGN_OR_RETURN(std::vector<api::Job> pending, AllJobsIn(store_, JobState::kPending));
  queue_viewed_at_ = clock_->SteadyNow();
  // Forget the plans and listings of jobs that left the queue.
  std::set<api::JobId> queued;
  for (const api::Job& j : pending) queued.insert(j.id);
  std::erase_if(plan_cache_, [&](const auto& entry) { return !queued.contains(entry.first); });
  lister_.ForgetAllBut(queued);
  if (pending.empty()) {
    MutexLock lock(waiting_mu_);
    queue_.clear();
    return Status::Ok();
  }
  // Computed only while jobs wait (it costs a JSON text per node).
  inventory_key_ = InventoryKey(nodes);
  // The pass itself (order, user limits, plans on the free devices, the head
  // and backfill) is the scheduler's (scheduler/queue_pass.h); the store,
  // the input listings, the placements and the waiting reasons are here,
  // committed through its hooks as it decides, job by job.
  std::vector<scheduler::PassJob> queued_jobs;
  std::map<api::JobId, const api::Job*> by_id;
  for (const api::Job& j : pending) {
    queued_jobs.push_back(
        scheduler::PassJob{j.id, j.owner, j.spec.priority, j.spec.min_devices, j.spec.max_devices});
    by_id[j.id] = &j;
  }
  // The job as the pass planned it: its device bound lowered by its user's limit.
  auto job_of = [&](const scheduler::PassJob& p) {
    api::Job job = *by_id.at(p.id);
    job.spec.max_devices = p.max_devices;
    return job;
  };
  scheduler::QueuePassHooks hooks;
  hooks.plan = [&](const scheduler::PassJob& p, const scheduler::DeviceSet& busy) {
    return PlanCached(job_of(p), nodes, busy);
  };
  // An infer job is planned once its input is listed.
  hooks.ready = [&](const scheduler::PassJob& p) { return InferInputReady(job_of(p)); };
  hooks.commit = [&](const scheduler::PassDecision& d) -> Result<scheduler::DeviceSet> {
    std::set<std::string> placed;
    switch (d.action) {
      case scheduler::PassAction::kNotReady:
        break;  // InferInputReady said why
      case scheduler::PassAction::kWait:
        SetWaiting(d.job.id, d.reason);
        break;
      case scheduler::PassAction::kNever: {
        // Not a matter of waiting: the job can never be planned.
        MutexLock lock(mu_);
        TESSERA_RETURN_IF_ERROR(StepLocked(job_of(d.job), JobEvent::kFail, d.reason).status());
        break;
      }
      case scheduler::PassAction::kPlace: {
        {
          // Only this thread changes active_, so the devices planned on are
          // still free: commit under the lock.
          MutexLock lock(mu_);
          TESSERA_RETURN_IF_ERROR(PlaceLocked(job_of(d.job), nodes, *d.plan, &placed));
        }
        if (!placed.empty()) polls_.Notify();  // the nodes' parked polls carry the launch
        SetWaiting(d.job.id, "");
        break;
      }
    }
    return placed;
  };
  TESSERA_ASSIGN_OR_RETURN(std::vector<scheduler::PassDecision> decisions,
                           scheduler::RunQueuePass(queued_jobs, UsageByUser(), options_.users, held,
                                                   hooks, options_.ordering));
  // The queue as users see it: the jobs still waiting, in the pass's order.
  std::vector<api::QueueRow> rows =
      QueueRowsFromPass(decisions, [this](api::JobId id) { return WaitingReason(id); });
  MutexLock lock(waiting_mu_);
  queue_ = std::move(rows);
  return Status::Ok();
}

Status JobController::ViewQueueWithoutFreeDevices() {
  // Every device is busy, so no pass runs; the queue's order still changes as
  // jobs arrive and leave. Read it at most once a second (a tick is 100 ms).
  const auto now = clock_->SteadyNow();
  if (now - queue_viewed_at_ < std::chrono::seconds(1)) return Status::Ok();
  queue_viewed_at_ = now;
  TESSERA_ASSIGN_OR_RETURN(std::vector<api::Job> pending, AllJobsIn(store_, JobState::kPending));
  std::vector<api::QueueRow> rows =
      QueueRowsFromOrder(pending, UsageByUser(), options_.users, options_.ordering,
                         [this](api::JobId id) { return WaitingReason(id); });
  MutexLock lock(waiting_mu_);
  queue_ = std::move(rows);
  return Status::Ok();
}

std::vector<api::QueueRow> JobController::Queue() {
  MutexLock lock(waiting_mu_);
  return queue_;
}

std::map<std::string, scheduler::UserUsage> JobController::UsageByUser() {
  MutexLock lock(mu_);
  std::map<std::string, scheduler::UserUsage> usage;
  for (const auto& [id, active] : active_) {
    scheduler::UserUsage& u = usage[active.owner];
    u.running_jobs += 1;
    u.devices += static_cast<int64_t>(active.launch.ranks.size() - active.dropped.size());
  }
  return usage;
}

Result<bool> JobController::InferInputReady(const api::Job& job) {
  if (job.spec.kind != api::JobKind::kInfer) return true;
  // The whole input is listed once, before the first attempt, in the
  // background; later attempts lease what is left.
  InputPathCheck may_read = AnyPath;
  if (options_.admission != nullptr) {
    TESSERA_ASSIGN_OR_RETURN(may_read, options_.admission->InputCheckFor(store_, job.owner));
  }
  TESSERA_ASSIGN_OR_RETURN(InputLister::Progress listed, lister_.Poll(job, may_read));
  switch (listed.phase) {
    case InputLister::Phase::kDone:
      return true;
    case InputLister::Phase::kListing:
      SetWaiting(job.id, "listing input (" + std::to_string(listed.found) + " found)");
      return false;
    case InputLister::Phase::kFailed:
      break;
  }
  lister_.Forget(job.id);
  MutexLock lock(mu_);
  auto r = StepLocked(job, JobEvent::kFail, "cannot read the input: " + listed.error.message());
  if (!r.ok()) return r.status();
  return false;
}

Status JobController::PlaceLocked(const api::Job& job, const std::vector<api::Node>& nodes,
                                  const scheduler::Plan& best,
                                  std::set<std::string>* placed_devices) {
  api::Json plan_json = scheduler::ToJson(best);

  std::map<std::string, std::string> addresses;
  for (const api::Node& n : nodes) addresses[n.name] = n.address.empty() ? "127.0.0.1" : n.address;
  auto entry = store_->GetEntrypoint(job.spec.entrypoint);
  if (!entry.ok()) {
    auto r = StepLocked(job, JobEvent::kFail,
                        "entrypoint " + job.spec.entrypoint + " is no longer allowed");
    return r.ok() ? Status::Ok() : r.status();
  }
  const int64_t attempt = job.attempt + 1;
  // Live attempts keep their rendezvous ports, and so do ended attempts whose
  // rank 0 still runs (it is being stopped); the new master picks another.
  MasterPortsInUse ports;
  for (const auto& [id, active] : active_) AddMasterPort(active.launch, &ports);
  std::erase_if(stopping_masters_, [&](const StoppingMaster& m) REQUIRES(mu_) {
    const api::WorkerStatus* w = FindReportLocked(m.node, m.key);
    const bool stopped = w == nullptr || w->state == api::WorkerState::kExited;
    // A node that no longer reports keeps it for as long as a stop may take.
    const bool forgotten = SteadyMs(m.ended) > 6 * options_.stop_wait_ms;
    return stopped || forgotten;
  });
  for (const StoppingMaster& m : stopping_masters_) AddMasterPort(m.launch, &ports);
  auto launch = BuildAttemptLaunch(job, attempt, best, plan_json,
                                   EntrypointCommand{entry->name, entry->command}, addresses,
                                   options_.launch, ports);
  if (!launch.ok()) {
    auto r = StepLocked(job, JobEvent::kFail, "cannot launch: " + launch.status().message());
    return r.ok() ? Status::Ok() : r.status();
  }

  TESSERA_ASSIGN_OR_RETURN(api::Job planned, StepLocked(job, JobEvent::kPlan, best.why, plan_json));
  JobAttempt record;
  record.job_id = job.id;
  record.attempt = attempt;
  record.plan = ToJson(*launch);
  record.started_ms = clock_->NowUnixMillis();
  store_->DeleteAttempt(job.id, attempt).IgnoreError();  // left by a crash before launch
  TESSERA_RETURN_IF_ERROR(store_->InsertAttempt(record));
  TESSERA_RETURN_IF_ERROR(StepLocked(planned, JobEvent::kLaunch,
                                     "attempt " + std::to_string(attempt) + ": launching " +
                                         std::to_string(launch->ranks.size()) + " ranks (" +
                                         std::string(scheduler::LayoutName(best.layout)) + ")")
                              .status());
  for (const RankLaunch& r : launch->ranks)
    placed_devices->insert(DeviceKey(r.node, r.device_index));
  active_[job.id] = ActiveOf(job, *std::move(launch));
  ++generation_;
  return Status::Ok();
}

Result<api::Json> JobController::Preview(const api::JobSpec& spec) {
  std::set<std::string> busy;
  {
    MutexLock lock(mu_);
    busy = BusyDevicesLocked();
  }
  // Planned outside the lock, like Tick's plans.
  TESSERA_ASSIGN_OR_RETURN(std::vector<api::Node> nodes, store_->ListNodes());
  Result<scheduler::PlanSet> plans = Plan(SnapshotOf(nodes, busy), spec);
  if (!plans.ok() && IsMeasuringProfile(plans.status())) {
    return MeasuringProfileAnswer(plans.status());  // a state to wait for, not an error
  }
  if (!plans.ok()) return plans.status();
  return scheduler::ToJson(*plans);
}

void JobController::SetWaiting(api::JobId job, const std::string& why) {
  MutexLock lock(waiting_mu_);
  if (why.empty()) {
    waiting_.erase(job);
  } else {
    waiting_[job] = why;
  }
}

std::string JobController::WaitingReason(api::JobId job) {
  MutexLock lock(waiting_mu_);
  auto it = waiting_.find(job);
  return it == waiting_.end() ? std::string() : it->second;
}

}  // namespace tessera::daemon
