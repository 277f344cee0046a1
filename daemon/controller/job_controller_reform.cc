#include <spdlog/spdlog.h>

#include <algorithm>
#include <future>
#include <iomanip>
#include <memory>
#include <optional>
#include <sstream>

#include "api/entrypoint_kind.h"
#include "daemon/controller/infer_input.h"
#include "daemon/controller/job_controller.h"
#include "daemon/controller/job_controller_util.h"
#include "daemon/controller/planning.h"
#include "daemon/controller/profile_cache.h"
#include "daemon/controller/rank_error.h"
#include "daemon/controller/train_reform.h"
#include "scheduler/plan_json.h"
#include "scheduler/queue_pass.h"

// The JobController's training re-forms: survivors of a node loss re-form
// a smaller group in place (ReformTrainLocked, ApplyReformLocked; steps in
// daemon/controller/train_reform.h), and a running job grows onto devices
// that came free (GrowTraining).

namespace tessera::daemon {

using api::JobState;
using Steady = std::chrono::steady_clock;

Result<bool> JobController::ReformTrainLocked(
    const api::Job& job, Active* active, const std::map<std::string, std::vector<int64_t>>& lost,
    std::string* why, const std::string& cause) {
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
    if (UnderSlurm(r.node)) {
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
      } else if (!pending.empty() || busy.contains(key) || lost.empty()) {
        others.insert(key);  // a regroup in place keeps to its own devices
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
  std::string head = lost.empty() ? cause : LostNodesText(lost);
  if (auto orphans = OrphanLayers(old, gone)) {
    head += " (layers " + *orphans +
            " were held only by the lost ranks: the ranks that take them load them from the "
            "newest checkpoint)";
  }
  return ApplyReformLocked(job, active, plans->plans.front(), nodes, survivors, gone, head, why);
}

Result<bool> JobController::RegroupLocked(const api::Job& job, Active* active,
                                          const std::vector<std::string>& waiting) {
  // Steps: (1) no rank of the newest world waits: forget; (2) first seen now: wait for every node
  // of the attempt to beat after it (a lost node is found by the checks the waiting rank began, and
  // goes the node-loss way); (3) re-form in place.
  if (waiting.empty()) {  // (1)
    active->peer_lost_seen.reset();
    return false;
  }
  if (job.state != JobState::kRunning || active->launch.infer || active->regroups >= kMaxRegroups) {
    return false;
  }
  const auto now = clock_->SteadyNow();
  if (!active->peer_lost_seen) {  // (2)
    active->peer_lost_seen = now;
    return false;
  }
  for (const RankLaunch& r : active->launch.ranks) {
    if (active->dropped.contains(r.launch.key.rank)) continue;
    auto report = reports_.find(r.node);
    if (report == reports_.end() || report->second.seen <= *active->peer_lost_seen) return false;
  }
  std::string cause;  // (3)
  for (const std::string& w : waiting) cause += (cause.empty() ? "" : ", ") + w;
  cause += (waiting.size() == 1 ? " lost a peer" : " lost peers") +
           std::string(
               " while every node of the attempt still answers (a connection that "
               "failed, not a node; regroup ") +
           std::to_string(active->regroups + 1) + " of at most " + std::to_string(kMaxRegroups) +
           ")";
  std::string why;
  TESSERA_ASSIGN_OR_RETURN(bool reformed, ReformTrainLocked(job, active, {}, &why, cause));
  if (!reformed) {
    spdlog::warn("job {}: {}; its ranks cannot re-form in place: {}", job.id, cause, why);
    active->regroups = kMaxRegroups;  // the waiting rank's timeout decides
    return false;
  }
  ++active->regroups;
  active->peer_lost_seen.reset();
  return true;
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
  std::string reason =
      head + (one ? ": the running rank" : ": the " + std::to_string(kept) + " running ranks") +
      (gone.empty() ? (one ? " keeps its state" : " keep their state")
                    : (one ? " re-forms without it" : " re-form without it")) +
      (one ? " and trains on from its" : " and train on from their") + " last completed step";
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
    reason += reformed->unused.size() == 1
                  ? "; rank " + RankList(reformed->unused) + " is left out of the new plan"
                  : "; ranks " + RankList(reformed->unused) + " are left out of the new plan";
  }
  active->launch = std::move(reformed->launch);
  for (int64_t r : reformed->joined) active->joining[r] = clock_->SteadyNow();
  for (int64_t r : gone) active->dropped.insert(r);
  for (int64_t r : reformed->unused) {
    active->dropped.insert(r);
    // A planned re-form's left-out rank still runs: it is stopped a while
    // after the kept ranks got their order (see Active::leaving).
    if (gone.empty()) {
      active->leaving[r] =
          clock_->SteadyNow() + std::chrono::milliseconds(std::max<int64_t>(
                                    1000, 2 * options_.detector.heartbeat_interval_ms));
    }
  }
  active->launched_at = clock_->SteadyNow();
  move_costs_.Begin(job.id, generation, std::max(0.0, best.predicted.step_s), active->launched_at);
  // Observations map ranks to stages by the first plan's numbering.
  active->correction_key.clear();
  SaveAttemptLocked(*active);
  TESSERA_ASSIGN_OR_RETURN(api::Job next, StepLocked(job, JobEvent::kReformed, reason, plan_json));
  (void)next;
  ++generation_;
  return true;
}

Status JobController::GrowTraining(const std::vector<api::Node>& nodes,
                                   const std::set<std::string>& held) {
  // Steps: (1) at most once every grow_check_ms, and only while no job waits
  // (free devices go to waiting jobs first; one its user's limits hold does
  // not count: PlaceableWaiting); (2) take the running train
  // attempts that could re-form, unchanged for grow_settle_ms, every rank
  // running; (3) where a device is free, plan each on its own devices and on
  // its own plus the free ones (outside the lock); (4) when the second uses
  // devices the attempt lacks and predicts a step at least grow_min_speedup
  // faster, and the time it saves over the job's remaining steps pays for the
  // re-form (its move cost, daemon/controller/move_costs.h, and one step: a job
  // about to end does not grow), it keeps one of the attempt's devices and its
  // user's device limit (users: max_devices) holds,
  // re-form onto it: the running ranks keep their state, the new ones join and
  // take theirs from them; (5) log why a job did not grow, when that changed.
  const auto now = clock_->SteadyNow();
  if (options_.grow_min_speedup <= 0 ||
      now - grow_checked_at_ < std::chrono::milliseconds(options_.grow_check_ms)) {
    return Status::Ok();
  }
  grow_checked_at_ = now;
  TESSERA_ASSIGN_OR_RETURN(std::vector<api::Job> pending, AllJobsIn(store_, JobState::kPending));
  std::map<std::string, scheduler::UserUsage> usage = UsageByUser();
  if (PlaceableWaiting(pending, usage)) return Status::Ok();
  struct Candidate {
    api::Job job;
    int64_t attempt = 0;
    int64_t generation = 0;
    std::set<std::string> devices;
    int64_t step = 0;        // the newest step a rank completed
    double move_cost_s = 0;  // what a re-form costs it
  };
  std::vector<Candidate> candidates;
  std::map<api::JobId, std::string> verdicts;  // this check's, by job
  const std::map<api::JobId, api::Job> records = ActiveJobRecords();
  {
    MutexLock lock(mu_);
    for (const auto& [id, active] : active_) {
      if (SteadyMs(active.launched_at) < options_.grow_settle_ms) continue;
      auto job = records.find(id);
      if (job == records.end()) continue;
      const api::Job& j = job->second;
      if (j.state != JobState::kRunning || !j.spec.elastic || active.move) continue;
      if (ReformBlocker(j.spec, active.launch)) continue;
      LiveDevices live = LiveDevicesLocked(active);
      if (!live.every_rank_runs) {
        verdicts[id] = "not every rank of it reports running";
      } else {
        int64_t step = 0;  // from the ranks' latest progress lines
        for (const RankLaunch& r : active.launch.ranks) {
          const api::WorkerStatus* w = FindReportLocked(r.node, r.launch.key);
          if (w != nullptr) step = std::max(step, ProgressInt(w->progress, "step").value_or(0));
        }
        candidates.push_back({j, active.launch.attempt, NextReformGeneration(active.launch),
                              std::move(live.devices), step, move_costs_.For(id).seconds});
      }
    }
  }
  // The devices taken so far: held ones, and what each candidate grew onto
  // (a free device goes to one job only).
  std::set<std::string> taken = held;
  for (Candidate& c : candidates) {
    // Its user's device limit bounds what it may grow to.
    const int64_t own = static_cast<int64_t>(c.devices.size());
    const scheduler::UserPolicy& policy = options_.users.For(c.job.owner);
    const std::optional<int64_t> bound = scheduler::GrowthBound(
        policy, usage[c.job.owner].devices - own, own, c.job.spec.max_devices);
    if (!bound) {
      verdicts[c.job.id] = c.job.owner + " holds " + std::to_string(usage[c.job.owner].devices) +
                           " devices of the " + std::to_string(policy.max_devices) +
                           " allowed (users: max_devices): it does not grow";
      continue;
    }
    c.job.spec.max_devices = *bound;
    // (3) Its own devices count as free to both plans.
    std::vector<api::Node> mine = nodes;
    std::set<std::string> busy_now = taken, others;
    for (const std::string& d : c.devices) busy_now.erase(d);
    bool any_free = false;  // a device neither the job's nor busy: else nothing to plan
    for (api::Node& n : mine) {
      for (api::Device& d : n.devices) {
        const std::string key = DeviceKey(n.name, d.index);
        if (c.devices.contains(key)) d.busy = false;
        any_free = any_free || (!d.busy && !busy_now.contains(key) && !c.devices.contains(key));
        others.insert(key);
      }
    }
    for (const std::string& d : c.devices) others.erase(d);
    if (!any_free) {
      verdicts[c.job.id].clear();
      continue;
    }
    Result<scheduler::PlanSet> current = Plan(SnapshotOf(mine, others), c.job.spec);
    Result<scheduler::PlanSet> wider = Plan(SnapshotOf(mine, busy_now), c.job.spec);
    std::string& verdict = verdicts[c.job.id];
    if (!current.ok() || !wider.ok() || current->plans.empty() || wider->plans.empty()) {
      verdict = "no plan: " + (!current.ok() ? current.status().ToString()
                               : !wider.ok() ? wider.status().ToString()
                                             : std::string("the planner found none"));
      continue;
    }
    const scheduler::Plan& best = wider->plans.front();
    std::vector<std::string> gained;
    for (const scheduler::DeviceId& d : best.Devices()) {
      const std::string key = DeviceKey(d.node, d.index);
      if (!c.devices.contains(key)) gained.push_back(key);
    }
    // A re-form keeps at least one running rank: a plan on free devices only
    // would have its ranks read the last checkpoint and redo the steps since.
    if (gained.size() == best.Devices().size()) {
      verdict = "its best plan with the free devices keeps none of its running ranks";
      continue;
    }
    const double before = current->plans.front().predicted.step_s;
    const double after = best.predicted.step_s;
    if (gained.empty()) {
      verdict = "its best plan uses no free device";
      continue;
    }
    std::ostringstream steps;
    steps << std::fixed << std::setprecision(3) << "predicted step " << before << " s -> " << after
          << " s";
    if (!(after > 0) || before < after * options_.grow_min_speedup) {
      steps << " with the free devices, under grow_min_speedup " << options_.grow_min_speedup;
      verdict = steps.str();
      continue;
    }
    const double saved_s =
        static_cast<double>(std::max<int64_t>(c.job.spec.steps - c.step, 0)) * (before - after);
    if (c.job.spec.steps > 0 && saved_s <= c.move_cost_s + after) {
      steps << ": its remaining steps would save " << saved_s
            << " s, not more than the re-form's cost " << c.move_cost_s << " s and a step";
      verdict = steps.str();
      continue;
    }
    verdict.clear();
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
      taken.insert(gained.begin(), gained.end());
      usage[c.job.owner].devices += static_cast<int64_t>(gained.size());
      polls_.Notify();
    } else {
      spdlog::warn("job {}: could not grow: {}", c.job.id, why);
    }
  }
  for (auto it = grow_verdicts_.begin(); it != grow_verdicts_.end();) {
    it = verdicts.contains(it->first) ? std::next(it) : grow_verdicts_.erase(it);
  }
  for (auto& [id, verdict] : verdicts) NoteGrowVerdict(id, std::move(verdict));
  return Status::Ok();
}

void JobController::NoteGrowVerdict(api::JobId job, std::string verdict) {
  std::string& last = grow_verdicts_[job];
  if (verdict == last) return;
  if (!verdict.empty()) spdlog::info("job {}: does not grow: {}", job, verdict);
  last = std::move(verdict);
}

}  // namespace tessera::daemon
