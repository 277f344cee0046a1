#include "daemon/controller/job_controller.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <future>
#include <iomanip>
#include <memory>
#include <optional>
#include <sstream>

#include "api/entrypoint_kind.h"
#include "daemon/controller/infer_input.h"
#include "daemon/controller/job_controller_util.h"
#include "daemon/controller/planning.h"
#include "daemon/controller/profile_cache.h"
#include "daemon/controller/rank_error.h"
#include "daemon/controller/train_reform.h"
#include "scheduler/plan_json.h"
#include "scheduler/queue_pass.h"

// The JobController's core: recovery from the store, heartbeats and the
// desired sets, the tick, node health, and what becomes of an active attempt
// (CheckActiveLocked: finished, failed, lost ranks, crash loops, recovery).
// Infer rank drops, training re-forms and placement live in the
// job_controller_*.cc files beside this one.

namespace tessera::daemon {

using api::JobState;
using Steady = std::chrono::steady_clock;

JobController::JobController(Store* store, const Clock* clock, JobControllerOptions options)
    : store_(store),
      clock_(clock),
      options_(std::move(options)),
      started_(clock->SteadyNow()),
      move_costs_(options_.move_cost_s),
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
      Result<std::set<int64_t>> dropped = launch.ok() ? DroppedRanksOf(attempt->plan, *launch)
                                                      : Result<std::set<int64_t>>(launch.status());
      if (!dropped.ok()) {
        auto st =
            StepLocked(job, JobEvent::kFail,
                       "cannot resume after controller restart: " + dropped.status().message());
        if (!st.ok()) return st.status();
        continue;
      }
      active_[job.id] = ActiveOf(job, *std::move(launch));
      active_[job.id].dropped = *std::move(dropped);
      RecoverMoveLocked(attempt->plan, &active_[job.id]);  // a move it was stopping for
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
      if (r.node != node || !active.Desired(r.launch.key.rank)) continue;
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

bool JobController::UnderSlurm(const std::string& node) const {
  return options_.node_up && options_.node_up(node).has_value();
}

JobController::LiveDevices JobController::LiveDevicesLocked(const Active& active) const {
  LiveDevices out;
  for (const RankLaunch& r : active.launch.ranks) {
    const api::WorkerStatus* w = FindReportLocked(r.node, r.launch.key);
    if (active.dropped.contains(r.launch.key.rank)) {
      if (w != nullptr && w->state != api::WorkerState::kExited) {
        out.releasing.insert(DeviceKey(r.node, r.device_index));
      }
      continue;
    }
    out.every_rank_runs = out.every_rank_runs && w != nullptr &&
                          w->state == api::WorkerState::kRunning && !UnderSlurm(r.node);
    out.devices.insert(DeviceKey(r.node, r.device_index));
  }
  return out;
}

void JobController::SaveAttemptLocked(const Active& active) {
  const AttemptLaunch& l = active.launch;
  Status saved = store_->SetAttemptPlan(l.job_id, l.attempt, StoredAttemptJson(l, active.dropped));
  if (!saved.ok()) {
    spdlog::warn("job {}: attempt {} not saved as it runs now: {}", l.job_id, l.attempt,
                 saved.ToString());
  }
}

std::map<api::JobId, api::Job> JobController::ActiveJobRecords() {
  std::vector<api::JobId> ids;
  {
    MutexLock lock(mu_);
    for (const auto& [id, active] : active_) ids.push_back(id);
  }
  std::map<api::JobId, api::Job> out;
  for (api::JobId id : ids) {
    if (auto job = store_->GetJob(id); job.ok()) out.emplace(id, std::move(*job));
  }
  return out;
}

std::optional<std::map<int64_t, std::string>> JobController::LiveRanks(api::JobId job,
                                                                       int64_t attempt) {
  MutexLock lock(mu_);
  auto it = active_.find(job);
  if (it == active_.end() || it->second.launch.attempt != attempt) return std::nullopt;
  std::map<int64_t, std::string> live;
  for (const RankLaunch& r : it->second.launch.ranks) {
    if (!it->second.dropped.contains(r.launch.key.rank)) {
      live[r.launch.key.rank] = DeviceKey(r.node, r.device_index);
    }
  }
  return live;
}

namespace {

// What a node is handed: each desired key with its re-formed generation (a
// running worker's new place changes no key, and must not wait out a hold).
std::map<api::WorkerKey, int64_t> HandedOf(const std::vector<api::WorkerLaunch>& launches) {
  std::map<api::WorkerKey, int64_t> out;
  for (const auto& l : launches) {
    out[l.key] = l.reform.is_object() ? l.reform.value("generation", int64_t{0}) : 0;
  }
  return out;
}

}  // namespace

api::HeartbeatResponse JobController::ResponseFor(const std::string& node) {
  api::HeartbeatResponse response;
  response.heartbeat_interval_ms = options_.detector.heartbeat_interval_ms;
  MutexLock lock(mu_);
  response.desired = DesiredForLocked(node);
  answered_with_[node] = HandedOf(response.desired);
  return response;
}

void JobController::OnHeartbeat(const api::HeartbeatRequest& request, HeartbeatDone done) {
  // Read before looking, so a change made after the look reaches the poll.
  const uint64_t seen_news = polls_.news_count();
  api::HeartbeatResponse response;
  response.heartbeat_interval_ms = options_.detector.heartbeat_interval_ms;
  std::map<api::WorkerKey, int64_t> parked_with;
  bool park = false;
  // The beat's arrival, taken before the lock: a tick that holds the lock
  // must not make a live node look silent for as long as it waits.
  const Steady::time_point arrived = clock_->SteadyNow();
  {
    MutexLock lock(mu_);
    reports_[request.node] = Report{arrived, request.workers, request.wait_ms};
    ObserveComputeLocked(request);
    ObserveStepsLocked(request, arrived);
    response.desired = DesiredForLocked(request.node);
    std::map<api::WorkerKey, int64_t> handed = HandedOf(response.desired);
    if (request.wait_ms > 0 && !shutting_down_) {
      std::set<api::WorkerKey> desired, reported;
      for (const auto& l : response.desired) desired.insert(l.key);
      for (const auto& w : request.workers) reported.insert(w.key);
      // Parked while the node runs what it should and was already told so
      // (a node not answered yet was told nothing).
      park = desired == reported && answered_with_[request.node] == handed;
    }
    if (park) {
      parked_with = std::move(handed);
    } else {
      answered_with_[request.node] = std::move(handed);
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
      [this, node, parked_with = std::move(parked_with)] {
        MutexLock lock(mu_);
        return HandedOf(DesiredForLocked(node)) != parked_with;
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
        for (const api::Device& d : n.devices) {
          const bool holds = d.emulated && d.relative_speed > 0 && d.relative_speed < 1;
          device_kinds_[DeviceKey(n.name, d.index)] = {d.name, holds ? d.relative_speed : 0.0};
        }
      }
      std::map<std::string, NodeHealth> health = UpdateNodeHealthLocked(&nodes, &health_changes);
      WarnAboutEmulationLocked(nodes);
      TESSERA_RETURN_IF_ERROR(CheckActiveLocked(health));
      ExpireMoveTargetsLocked();
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
  RecheckProfiles();
  // Planning happens outside the lock: heartbeats are answered meanwhile.
  // The pass plans a moved job on the devices reserved for it, and no other
  // job on them; the rounds after it see them as held.
  TESSERA_RETURN_IF_ERROR(PlaceQueued(nodes, held));
  auto held_now = [this] {
    MutexLock lock(mu_);
    std::set<std::string> busy = BusyDevicesLocked();
    busy.merge(ReservedDevicesLocked());
    return busy;
  };
  TESSERA_RETURN_IF_ERROR(YieldInferToTraining(nodes, held_now()));
  TESSERA_RETURN_IF_ERROR(ShareForWaiting(nodes, held_now()));
  TESSERA_RETURN_IF_ERROR(GrowTraining(nodes, held_now()));
  return GrowInference(nodes, held_now());
}

std::map<std::string, NodeHealth> JobController::UpdateNodeHealthLocked(
    std::vector<api::Node>* nodes, std::vector<std::pair<std::string, std::string>>* changes) {
  std::map<std::string, NodeHealth> out;
  for (api::Node& node : *nodes) {
    auto it = reports_.find(node.name);
    // A node not heard from since this controller started gets the full
    // timeout from the start, so a restart does not kill healthy jobs.
    Steady::time_point seen = it == reports_.end() ? started_ : it->second.seen;
    const int64_t hold_ms =
        it == reports_.end() ? options_.detector.heartbeat_interval_ms : it->second.hold_ms;
    NodeHealth h =
        peer_checks_.Classify(node.name, seen, hold_ms, clock_->SteadyNow(), options_.detector);
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
  // Attempts that ended in a move do not count against max_attempts.
  int64_t moved = 0;
  if (event == JobEvent::kLaunch || event == JobEvent::kRetry) {
    TESSERA_ASSIGN_OR_RETURN(moved, MovedAttempts(store_, job.id));
  }
  TESSERA_ASSIGN_OR_RETURN(
      JobStep step, NextJobState(job.state, event, job.attempt, job.spec.max_attempts, moved));
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
      move_costs_.Forget(it->first);
      move_targets_.erase(it->first);
      it = active_.erase(it);
      ++generation_;
      continue;
    }

    // Left-out ranks whose time to stay is up are no longer desired.
    for (auto l = it->second.leaving.begin(); l != it->second.leaving.end();) {
      if (clock_->SteadyNow() < l->second) {
        ++l;
        continue;
      }
      l = it->second.leaving.erase(l);
      ++generation_;
    }

    if (it->second.move) {  // a restart move: pending again once its ranks stopped
      TESSERA_ASSIGN_OR_RETURN(bool ended, EndMoveLocked(*job, it->second, health));
      if (!ended) {
        ++it;
        continue;
      }
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
    // A train rank that exited having made every step in a world older than
    // the newest re-form order (the order came while its last steps ran): the
    // job is done, and the ranks that were to join wait for a world that
    // never forms.
    const int64_t newest_generation = launch.infer ? 0 : NextReformGeneration(launch) - 1;
    std::optional<int64_t> done_before_reform;  // that world's generation
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
          if (const std::optional<int64_t> g = AllStepsDoneIn(*job, *w);
              g && *g < newest_generation) {
            done_before_reform = *g;
          }
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
    std::vector<std::string> waiting_ranks;  // of this world (RegroupLocked)
    for (const RankLaunch& r : launch.ranks) {
      if (it->second.dropped.contains(r.launch.key.rank)) continue;  // no longer of the attempt
      const api::WorkerStatus* w = FindReportLocked(r.node, r.launch.key);
      if (w == nullptr) continue;
      // A trainer that waits to re-form says so in its progress instead.
      const bool waiting = w->state == api::WorkerState::kRunning && w->progress.is_object() &&
                           w->progress.value("event", "") == "peer_lost";
      if (waiting ||
          (w->state == api::WorkerState::kExited && w->exit_code == api::kPeerLostExitCode)) {
        reporters.insert(r.node);
      }
      const auto world = waiting ? w->progress.find("generation") : w->progress.end();
      if (world != w->progress.end() && world->is_number_integer() &&
          world->get<int64_t>() == NextReformGeneration(launch) - 1) {
        waiting_ranks.push_back("rank " + std::to_string(r.launch.key.rank) + " on " + r.node);
      }
    }
    for (const RankLaunch& r : launch.ranks) {
      if (!reporters.empty() && !reporters.contains(r.node) &&
          !it->second.dropped.contains(r.launch.key.rank)) {
        peer_checks_.Begin(r.node, clock_->SteadyNow());
      }
    }

    if (lost.empty() && failed.empty() && vanished.empty()) {
      TESSERA_ASSIGN_OR_RETURN(bool regrouped, RegroupLocked(*job, &it->second, waiting_ranks));
      if (regrouped) {
        ++it;
        continue;
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
    } else if (done_before_reform && done < world) {
      event = JobEvent::kSucceed;
      std::vector<int64_t> left;
      for (const RankLaunch& r : launch.ranks) {
        const int64_t rank = r.launch.key.rank;
        const api::WorkerStatus* w = FindReportLocked(r.node, r.launch.key);
        if (!it->second.dropped.contains(rank) &&
            (w == nullptr || w->state != api::WorkerState::kExited || w->exit_code != 0)) {
          left.push_back(rank);
        }
      }
      reason = "all " + std::to_string(job->spec.steps) + " steps done in generation " +
               std::to_string(*done_before_reform) + ", before the re-form to generation " +
               std::to_string(newest_generation) + " took effect; " +
               (left.size() == 1 ? "rank " : "ranks ") + RankList(left) + " of generation " +
               std::to_string(newest_generation) + " stopped";
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
    move_costs_.Forget(it->first);
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
      if (active.Holds(r.launch.key.rank)) busy.insert(DeviceKey(r.node, r.device_index));
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

void JobController::ObserveStepsLocked(const api::HeartbeatRequest& request,
                                       Steady::time_point arrived) {
  for (const api::WorkerStatus& w : request.workers) {
    auto it = active_.find(w.key.job_id);
    if (it == active_.end() || it->second.launch.infer ||
        w.key.attempt != it->second.launch.attempt) {
      continue;
    }
    for (const api::Json* line : ProgressLinesOf(w)) {
      const std::optional<int64_t> step = ProgressInt(*line, "step");
      if (!step) continue;
      if (std::optional<double> cost =
              move_costs_.Stepped(w.key.job_id, *step, ProgressInt(*line, "generation"), arrived)) {
        spdlog::info("job {}: the re-formed ranks stepped on; the re-form cost {:.1f} s", it->first,
                     *cost);
      }
    }
  }
}

}  // namespace tessera::daemon
