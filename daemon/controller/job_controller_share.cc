// The JobController's share of the lab (ShareForWaiting): while a job waits
// for devices, the share policy (scheduler/share_policy.h) decides over every
// running and waiting job, and running train jobs it shrinks re-form onto the
// devices it leaves them (the re-form path of
// daemon/controller/train_reform.h), so the waiting job starts without
// waiting for them to end: another user's train job, or an infer job, which
// gets its user's share as a train job does (its throughput is images/s on
// the devices). A running infer job that fills the lab (GrowInference) gives
// ranks back the same way, to another user's infer or train job (and to
// waiting train jobs also by JobController::YieldInferToTraining).
//
// Steps (ShareForWaiting):
//   1. At most once every grow_check_ms, only while a train job, or an infer
//      job whose input is listed, waits (one its user's limits do not hold:
//      PlaceableWaiting) and share_running_jobs is on.
//   2. The jobs: a running train attempt is movable when the job allows it
//      (JobSpec::elastic), it can re-form (ReformBlocker), it has run
//      unchanged for grow_settle_ms and every rank runs; so is an infer
//      attempt whose ranks lease independently (IndependentRanks), for
//      shrinks only; every other active attempt keeps its devices; waiting
//      jobs ask for devices, the first in the queue's order
//      (scheduler/queue_order.h), one per device at most (their work: a
//      train job's samples, an infer job's images left), but not one whose
//      devices are reserved (a restart move's, or the requeue's below): the
//      queue pass places it there.
//   3. The devices: the healthy nodes' devices that are free or held by an
//      active attempt, or that an attempt's dropped ranks still occupy while
//      they leave (a device an earlier round took from a job is the waiting
//      job's, not busy: seen as busy, the round would take another one for
//      the same job); devices busy with something else are left out; one
//      group per node and device type. A job with a rank on a node that is
//      not healthy keeps its devices (not movable), those there listed too.
//   4. Allocate (outside the lock): a job's throughput on a set of devices is
//      its global batch over the predicted step of its best plan there
//      (fastest_only; one plan per shape of alike nodes and devices, renamed:
//      scheduler/node_classes.h; then the plan of each running job the
//      allocation changes, on its own devices); a
//      move costs what the job's last re-form took (daemon/controller/
//      move_costs.h; before any, the mean of the re-forms measured, else
//      move_cost_s), a restart onto none of its devices at least
//      move_cost_s, gained back over share_horizon_s or the job's
//      predicted remaining time.
//   5. Each running train job the policy shrinks re-forms onto its plan on
//      the devices left to it, the policy's reason as the event ("shrinks to
//      a:0: job 2 of bob takes its devices; ..."), unless the attempt changed
//      meanwhile (an infer job it shrinks drops the ranks on the devices it
//      gives up, DropInferRanksLocked: their chunks go back to the queue);
//      then each it grows (a waiting job cannot use what it gains) re-forms
//      onto its plan there, its new ranks joining, when every device it gains
//      was free at the round's start (one another attempt held is left for a
//      later round: its rank may still run); so does each it moves to a set
//      that keeps at least one of its devices (the kept ranks keep their
//      state, the ones left out stop, new ones join). A move that keeps none
//      of its ranks (a world with no survivor cannot re-form in place)
//      restarts the job from its checkpoint (share_restart_moves): its ranks
//      are stopped (each saves a checkpoint as it stops), the devices it
//      moves to are reserved for it, and once none of its ranks runs the job
//      is pending again (a `moved` event; the attempt does not count against
//      max_attempts) and the next pass places it there (EndMoveLocked). A
//      train job the policy sends back to the queue (its Requeue: a gang job
//      that would wait longer than it runs, when restarts are allowed) stops
//      the same way with no devices of its own, and waits in the queue; the
//      devices the waiting job starts on are reserved for it (kRequeueHold)
//      until the queue pass places it there.
//      Growth while no job waits is GrowTraining's (job_controller_reform.cc).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "daemon/controller/job_controller.h"
#include "daemon/controller/job_controller_util.h"
#include "daemon/controller/planning.h"
#include "daemon/controller/train_reform.h"
#include "scheduler/node_classes.h"
#include "scheduler/share_policy.h"

namespace tessera::daemon {

using api::JobState;

namespace {

std::string SetKey(const scheduler::DeviceSet& devices) {
  std::string key;
  for (const std::string& d : devices) key += d + ",";
  return key;
}

// How long a moved job's devices stay reserved for it once its attempt ended.
constexpr std::chrono::milliseconds kMoveReservation{60'000};
// How long the devices a requeue frees stay reserved for the job it made room
// for: its ranks save a checkpoint as they stop.
constexpr std::chrono::milliseconds kRequeueHold{300'000};

}  // namespace

Result<bool> JobController::EndMoveLocked(const api::Job& job, const Active& active,
                                          const std::map<std::string, NodeHealth>& health) {
  std::string exits;  // ranks that stopped otherwise than with a saved checkpoint
  for (const RankLaunch& r : active.launch.ranks) {
    if (active.dropped.contains(r.launch.key.rank)) continue;
    auto h = health.find(r.node);
    if (h == health.end() || h->second == NodeHealth::kDead) continue;  // runs nothing now
    const api::WorkerStatus* w = FindReportLocked(r.node, r.launch.key);
    if (w == nullptr) continue;  // its agent no longer runs it
    if (w->state != api::WorkerState::kExited) return false;
    if (w->exit_code != 0) {
      exits += "; rank " + std::to_string(r.launch.key.rank) + " exited with code " +
               std::to_string(w->exit_code);
    }
  }
  if (!exits.empty()) exits += " (the newest complete checkpoint is resumed)";
  const std::string reason = active.move->reason + exits;
  // The attempt is marked moved first: a job pending again with its attempt
  // not so marked would be charged it.
  Status finished = store_->FinishAttempt(job.id, active.launch.attempt, clock_->NowUnixMillis(),
                                          std::string(kMovedAttemptResult) + reason);
  if (!finished.ok()) {
    spdlog::warn("job {}: attempt {} not recorded as moved: {}", job.id, active.launch.attempt,
                 finished.ToString());
  }
  TESSERA_RETURN_IF_ERROR(StepLocked(job, JobEvent::kMoved, reason).status());
  auto target = move_targets_.find(job.id);
  if (target != move_targets_.end()) target->second.until = clock_->SteadyNow() + kMoveReservation;
  return true;
}

void JobController::OrderMoveLocked(Active* active, const std::set<std::string>& to,
                                    const std::string& reason) {
  active->move = Active::Move{reason};
  move_targets_[active->launch.job_id] = MoveTarget{to, std::nullopt};
  ++generation_;  // its ranks leave every desired set: their agents stop them
  // Stored with the attempt, so a restarted controller ends it as a move
  // (ranks that stop with a saved checkpoint exit 0, as finished ones do).
  api::Json stored = StoredAttemptJson(active->launch, active->dropped);
  stored["move"] = {{"to", api::Json(to)}, {"reason", reason}};
  Status saved = store_->SetAttemptPlan(active->launch.job_id, active->launch.attempt, stored);
  if (!saved.ok()) {
    spdlog::warn("job {}: the move of attempt {} not stored: {}", active->launch.job_id,
                 active->launch.attempt, saved.ToString());
  }
  spdlog::info("job {}: stopping attempt {} to move: {}", active->launch.job_id,
               active->launch.attempt, reason);
}

void JobController::RecoverMoveLocked(const api::Json& stored, Active* active) {
  if (!stored.is_object() || !stored.contains("move")) return;
  const api::Json& move = stored["move"];
  std::set<std::string> to;
  if (move.is_object() && move.value("to", api::Json()).is_array()) {
    for (const api::Json& d : move["to"]) {
      if (d.is_string()) to.insert(d.get<std::string>());
    }
  }
  const std::string reason =
      move.is_object() ? move.value("reason", std::string("moved")) : std::string("moved");
  active->move = Active::Move{reason};
  move_targets_[active->launch.job_id] = MoveTarget{std::move(to), std::nullopt};
}

void JobController::ExpireMoveTargetsLocked() {
  const auto now = clock_->SteadyNow();
  std::erase_if(move_targets_, [&](const auto& entry) REQUIRES(mu_) {
    const MoveTarget& t = entry.second;
    // A job that left while moving (cancelled) has no attempt to end.
    return (t.until && now >= *t.until) || (!t.until && !active_.contains(entry.first));
  });
}

std::set<std::string> JobController::ReservedDevicesLocked() const {
  std::set<std::string> reserved;
  for (const auto& [id, target] : move_targets_) {
    reserved.insert(target.devices.begin(), target.devices.end());
  }
  return reserved;
}

Status JobController::ShareForWaiting(const std::vector<api::Node>& nodes,
                                      const std::set<std::string>& held) {
  const auto now = clock_->SteadyNow();  // (1)
  if (!options_.share_running_jobs ||
      now - share_checked_at_ < std::chrono::milliseconds(options_.grow_check_ms)) {
    return Status::Ok();
  }
  share_checked_at_ = now;
  TESSERA_ASSIGN_OR_RETURN(std::vector<api::Job> all_pending,
                           AllJobsIn(store_, JobState::kPending));
  std::set<api::JobId> targeted;  // (1) jobs with devices reserved: the queue pass places them
  {
    MutexLock lock(mu_);
    for (const auto& [id, target] : move_targets_) {
      if (!target.devices.empty()) targeted.insert(id);
    }
  }
  std::vector<api::Job> pending;             // (1) train jobs, and infer jobs whose input is listed
  std::map<api::JobId, double> images_left;  // of the infer jobs, for their work
  for (api::Job& j : all_pending) {
    if (targeted.contains(j.id)) continue;
    if (j.spec.kind == api::JobKind::kInfer) {
      TESSERA_ASSIGN_OR_RETURN(bool ready, InferInputReady(j));
      if (!ready) continue;
      TESSERA_ASSIGN_OR_RETURN(ChunkCounts counts, store_->CountChunks(j.id));
      images_left[j.id] = static_cast<double>(counts.images_total - counts.images_done);
    }
    pending.push_back(std::move(j));
  }
  // Jobs their users' limits hold take nothing now: growth serves the free
  // devices then (GrowTraining, GrowInference).
  if (!PlaceableWaiting(pending, UsageByUser())) return Status::Ok();

  struct Running {
    api::Job job;
    int64_t attempt = 0;
    int64_t generation = 0;
    scheduler::DeviceSet devices;
    bool movable = false;
    MoveCosts::Charge move;     // what a move of it costs
    MoveCosts::Charge restart;  // what a move onto none of its devices costs
  };
  std::vector<Running> running;    // (2)
  scheduler::DeviceSet releasing;  // (3) dropped ranks' devices, not reserved for a move
  const std::map<api::JobId, api::Job> records = ActiveJobRecords();
  {
    MutexLock lock(mu_);
    const std::set<std::string> reserved = ReservedDevicesLocked();
    for (const auto& [id, active] : active_) {
      auto job = records.find(id);
      if (job == records.end()) continue;  // it became active since: the next round
      LiveDevices live = LiveDevicesLocked(active);
      for (const std::string& d : live.releasing) {
        if (!reserved.contains(d)) releasing.insert(d);
      }
      Running r{job->second, active.launch.attempt, NextReformGeneration(active.launch),
                std::move(live.devices), false};
      const api::Job& j = job->second;
      // A train attempt re-forms; an infer attempt whose ranks lease
      // independently drops ranks (shrinks only: it grows by GrowInference).
      const bool can_change = j.spec.kind == api::JobKind::kTrain
                                  ? !ReformBlocker(j.spec, active.launch)
                                  : IndependentRanks(active.launch);
      r.movable = j.state == JobState::kRunning && !active.move && j.spec.elastic && can_change &&
                  SteadyMs(active.launched_at) >= options_.grow_settle_ms && live.every_rank_runs;
      r.move = move_costs_.For(id);
      r.restart = move_costs_.ForRestart(id);
      running.push_back(std::move(r));
    }
  }
  // (3) The devices, every one planned on as free.
  scheduler::DeviceSet attempts;
  for (const Running& r : running) attempts.insert(r.devices.begin(), r.devices.end());
  std::vector<scheduler::ShareDevice> devices;
  std::vector<api::Node> open = nodes;
  scheduler::DeviceSet all;
  std::map<std::string, std::string> group_of;  // every known device's group
  for (api::Node& n : open) {
    for (api::Device& d : n.devices) {
      const std::string key = DeviceKey(n.name, d.index);
      group_of[key] = n.name + "/" + d.name;
      if (n.health != "healthy") continue;
      if ((d.busy || held.contains(key)) && !attempts.contains(key) && !releasing.contains(key)) {
        continue;
      }
      d.busy = false;
      devices.push_back({key, group_of[key]});
      all.insert(key);
    }
  }
  // A job with a rank on a node that is not healthy keeps its devices (the
  // failure detector decides what becomes of it); those there are listed for
  // it alone, as the policy requires of every device a job holds.
  for (Running& r : running) {
    for (const std::string& d : r.devices) {
      if (all.contains(d)) continue;
      r.movable = false;
      auto group = group_of.find(d);
      devices.push_back({d, group == group_of.end() ? d : group->second});
      all.insert(d);
    }
  }
  bool any_movable = false;
  for (const Running& r : running) any_movable = any_movable || r.movable;
  if (!any_movable) return Status::Ok();

  // (4) Allocate.
  std::map<api::JobId, const api::Job*> by_id;
  for (const Running& r : running) by_id[r.job.id] = &r.job;
  for (const api::Job& j : pending) by_id[j.id] = &j;
  scheduler::DeviceSet outside;  // devices of the open nodes not given out: never planned on
  for (const api::Node& n : open) {
    for (const api::Device& d : n.devices) {
      if (!all.contains(DeviceKey(n.name, d.index))) outside.insert(DeviceKey(n.name, d.index));
    }
  }
  // The job's plans with `on` free and every other device busy; `nodes_free`:
  // the open nodes with every device free, for a shape's representative set.
  std::vector<api::Node> nodes_free = open;
  for (api::Node& n : nodes_free) {
    for (api::Device& d : n.devices) d.busy = false;
  }
  auto plan_on = [&](api::JobId id, int64_t max_devices, const scheduler::DeviceSet& on,
                     const std::vector<api::Node>& from,
                     const scheduler::DeviceSet& also_busy) -> Result<scheduler::PlanSet> {
    api::JobSpec spec = by_id.at(id)->spec;
    spec.max_devices = max_devices;
    scheduler::DeviceSet busy = also_busy;
    std::set_difference(all.begin(), all.end(), on.begin(), on.end(),
                        std::inserter(busy, busy.end()));
    ++share_plans_made_;
    // A rate, and the plan a decision applies, read the first plan only.
    return Plan(SnapshotOf(from, busy), spec, FirstPlanOnly());
  };
  // Rate questions by shape (scheduler/node_classes.h): sets of alike nodes
  // and devices are one question, planned once on the shape's representative
  // set (every other device busy) and renamed; a set with a device the
  // snapshot lacks (a node not healthy) is planned as asked. The plans of the
  // decisions are made on their own devices after the allocation.
  const scheduler::ClusterSnapshot whole = SnapshotOf(nodes_free, {});
  const scheduler::NodeClasses classes(whole);
  scheduler::DeviceSet every;  // of the snapshot
  for (const scheduler::Node& n : whole.nodes) {
    for (const scheduler::Device& d : n.devices) every.insert(DeviceKey(n.name, d.index));
  }
  struct Rated {
    double rate = 0;
    std::vector<scheduler::DeviceId> planned;  // on the representative set
  };
  std::map<std::string, Rated> rated;  // by job, its device bound and the shape
  // The first plan of `set`, when it has one with a step time; else nullptr.
  auto first_plan = [](const Result<scheduler::PlanSet>& set) -> const scheduler::Plan* {
    if (!set.ok() || set->plans.empty() || !(set->plans.front().predicted.step_s > 0)) {
      return nullptr;
    }
    return &set->plans.front();
  };
  auto rate_of = [&](const Result<scheduler::PlanSet>& set, api::JobId id) {
    Rated r;
    if (const scheduler::Plan* best = first_plan(set)) {
      r.rate = static_cast<double>(by_id.at(id)->spec.global_batch) / best->predicted.step_s;
      r.planned = best->Devices();
    }
    return r;
  };
  scheduler::ShareHooks hooks;
  hooks.rate = [&](const scheduler::AllocJob& job,
                   const scheduler::DeviceSet& on) -> Result<scheduler::RateOnDevices> {
    scheduler::RateOnDevices out;
    Result<scheduler::NodeClasses::Shape> shape = classes.Canonicalize(on);
    if (!shape.ok()) {
      const Rated r = rate_of(plan_on(job.id, job.max_devices, on, open, outside), job.id);
      out.rate = r.rate;
      for (const scheduler::DeviceId& d : r.planned) out.used.insert(d.ToString());
      return out;
    }
    const std::string key =
        std::to_string(job.id) + "|" + std::to_string(job.max_devices) + "|" + shape->key;
    auto it = rated.find(key);
    if (it == rated.end()) {
      scheduler::DeviceSet others;  // every device of the snapshot but the representative set
      std::set_difference(every.begin(), every.end(), shape->representative.begin(),
                          shape->representative.end(), std::inserter(others, others.end()));
      it = rated
               .emplace(key, rate_of(plan_on(job.id, job.max_devices, shape->representative,
                                             nodes_free, others),
                                     job.id))
               .first;
    }
    out.rate = it->second.rate;
    out.used = shape->ToQuery(it->second.planned);
    return out;
  };
  std::vector<scheduler::AllocJob> jobs;
  for (const Running& r : running) {
    scheduler::AllocJob a;
    a.id = r.job.id;
    a.user = r.job.owner;
    a.priority = r.job.spec.priority;
    a.min_devices = r.job.spec.min_devices;
    a.max_devices = r.job.spec.max_devices;
    a.held = r.devices;
    a.movable = r.movable;
    // (5): without restarts, moves re-form around the ranks they keep.
    a.move_keeps_a_device = !options_.share_restart_moves;
    // Back to the queue (the policy's Requeue) as a restart move onto no
    // devices: a train job that may restart from its checkpoint.
    a.requeueable =
        r.movable && options_.share_restart_moves && r.job.spec.kind == api::JobKind::kTrain;
    if (a.requeueable) {
      TESSERA_ASSIGN_OR_RETURN(a.restarts, MovedAttempts(store_, r.job.id));
    }
    // Remaining: the steps left at the throughput it has now (a reservation
    // for a waiting job reads it of every running job; a move's gain of a
    // movable one). A script's end is its own: unknown, as the queue pass
    // takes it (job_controller_placement.cc).
    if (const int64_t left = WorkerStepsLeft(r.job); left > 0) {
      TESSERA_ASSIGN_OR_RETURN(scheduler::RateOnDevices now_rate, hooks.rate(a, r.devices));
      const double samples =
          static_cast<double>(left) * static_cast<double>(r.job.spec.global_batch);
      a.remaining_s = now_rate.rate > 0 ? samples / now_rate.rate : 0;
      // Its age and work done, for step 4's catch-up (its projected
      // completion against its time alone on its fair share).
      a.age_s = static_cast<double>(clock_->NowUnixMillis() - r.job.created_ms) / 1000;
      a.work_done = static_cast<double>(std::max<int64_t>(r.job.spec.steps - left, 0)) *
                    static_cast<double>(r.job.spec.global_batch);
    }
    if (r.movable) {
      a.move_cost_s = r.move.seconds;
      a.restart_cost_s = r.restart.seconds;
    }
    jobs.push_back(std::move(a));
  }
  // The waiting jobs the queue offers devices first: at most one per device
  // (a user who queued thousands costs no more than one who queued a few).
  std::vector<scheduler::QueuedJob> queued;
  for (const api::Job& j : pending) {
    queued.push_back({j.id, j.owner, j.spec.priority, j.spec.min_devices});
  }
  std::set<api::JobId> first;
  for (const scheduler::QueueEntry& e :
       scheduler::OrderQueue(queued, UsageByUser(), options_.users, options_.ordering)) {
    if (e.position > 0 && first.size() < devices.size()) first.insert(e.id);
  }
  for (const api::Job& j : pending) {
    if (!first.contains(j.id)) continue;
    scheduler::AllocJob a;
    a.id = j.id;
    a.user = j.owner;
    a.priority = j.spec.priority;
    a.min_devices = j.spec.min_devices;
    a.max_devices = j.spec.max_devices;
    // Its samples (an infer job's images left), for the response ratio among
    // its user's waiting jobs.
    auto images = images_left.find(j.id);
    a.work = images != images_left.end() ? images->second
                                         : static_cast<double>(std::max<int64_t>(j.spec.steps, 0)) *
                                               static_cast<double>(j.spec.global_batch);
    a.waited_s = static_cast<double>(clock_->NowUnixMillis() - j.created_ms) / 1000;
    jobs.push_back(std::move(a));
  }
  scheduler::ShareOptions share;
  share.horizon_s = options_.share_horizon_s;
  share.catch_up_above = options_.share_catch_up_above;
  TESSERA_ASSIGN_OR_RETURN(scheduler::Allocation allocation,
                           scheduler::Allocate(jobs, devices, options_.users, hooks, share));
  // The plan of each running job the allocation changes, on its devices.
  std::map<std::pair<api::JobId, std::string>, scheduler::Plan> plans;
  for (const scheduler::AllocDecision& d : allocation.jobs) {
    auto r = std::find_if(running.begin(), running.end(),
                          [&](const Running& x) { return x.job.id == d.id; });
    if (r == running.end() || !r->movable || d.devices.empty() || d.devices == r->devices) {
      continue;
    }
    auto job = std::find_if(jobs.begin(), jobs.end(),
                            [&](const scheduler::AllocJob& j) { return j.id == d.id; });
    Result<scheduler::PlanSet> set = plan_on(d.id, job->max_devices, d.devices, open, outside);
    if (const scheduler::Plan* best = first_plan(set)) plans[{d.id, SetKey(d.devices)}] = *best;
  }

  // (5) Shrinks and requeues, then growth and moves onto devices free at the
  // round's start.
  bool changed = false;
  scheduler::DeviceSet requeued;  // the devices of the jobs sent back to the queue
  // The attempt `r` was read from, unless it changed since (another attempt,
  // a re-formed world, a move under way): nullptr.
  auto unchanged = [&](const Running& r) REQUIRES(mu_) -> Active* {
    auto it = active_.find(r.job.id);
    if (it == active_.end() || it->second.launch.attempt != r.attempt ||
        NextReformGeneration(it->second.launch) != r.generation || it->second.move) {
      return nullptr;
    }
    return &it->second;
  };
  // A restart move onto none of the job's devices: its ranks stop, and it
  // starts again on `d.devices` once they are free.
  auto restarts = [&](const Running& r, const scheduler::AllocDecision& d) {
    return d.action == scheduler::AllocAction::kMove &&
           std::none_of(d.devices.begin(), d.devices.end(),
                        [&](const std::string& dev) { return r.devices.contains(dev); });
  };
  // The devices of train jobs this round restarts elsewhere (the policy's
  // catch-up swaps two jobs' devices): another job's restart move may take
  // them, since it too starts only once their ranks stopped.
  scheduler::DeviceSet vacated;
  if (options_.share_restart_moves) {
    MutexLock lock(mu_);
    for (const scheduler::AllocDecision& d : allocation.jobs) {
      auto r = std::find_if(running.begin(), running.end(),
                            [&](const Running& x) { return x.job.id == d.id; });
      if (r == running.end() || !r->movable || r->job.spec.kind != api::JobKind::kTrain ||
          !restarts(*r, d) || !plans.contains({d.id, SetKey(d.devices)}) ||
          unchanged(*r) == nullptr) {
        continue;
      }
      vacated.insert(r->devices.begin(), r->devices.end());
    }
  }
  for (const std::vector<scheduler::AllocAction>& actions :
       {std::vector{scheduler::AllocAction::kShrink, scheduler::AllocAction::kRequeue},
        std::vector{scheduler::AllocAction::kGrow, scheduler::AllocAction::kMove}}) {
    for (const scheduler::AllocDecision& d : allocation.jobs) {
      if (std::find(actions.begin(), actions.end(), d.action) == actions.end()) continue;
      auto r = std::find_if(running.begin(), running.end(),
                            [&](const Running& x) { return x.job.id == d.id; });
      if (r == running.end() || !r->movable) continue;
      if (r->job.spec.kind == api::JobKind::kInfer) {
        // An infer job shrinks by dropping the ranks on the devices it gives
        // up (their chunks go back to the queue at once); it grows by
        // GrowInference, never here.
        if (d.action != scheduler::AllocAction::kShrink) continue;
        MutexLock lock(mu_);
        auto it = active_.find(d.id);
        if (it == active_.end() || it->second.launch.attempt != r->attempt || it->second.move) {
          continue;
        }
        std::vector<int64_t> ranks;
        std::vector<std::string> given;  // their devices
        for (const RankLaunch& rank : it->second.launch.ranks) {
          const std::string device = DeviceKey(rank.node, rank.device_index);
          if (it->second.dropped.contains(rank.launch.key.rank) || d.devices.contains(device)) {
            continue;
          }
          ranks.push_back(rank.launch.key.rank);
          given.push_back(device);
        }
        const size_t live = it->second.launch.ranks.size() - it->second.dropped.size();
        if (ranks.empty() || ranks.size() >= live) continue;  // it keeps a rank
        TESSERA_RETURN_IF_ERROR(DropInferRanksLocked(r->job, &it->second, ranks,
                                                     d.reason + " (" + RanksGive(ranks, given) +
                                                         " back; " + ChunksBackToQueue(ranks) +
                                                         ")"));
        changed = true;
        continue;
      }
      if (d.action == scheduler::AllocAction::kRequeue) {
        // Its ranks stop, each saving a checkpoint; once none runs it is
        // pending again (a `moved` event; the attempt does not count) and
        // waits in the queue, resuming from the checkpoint when placed.
        MutexLock lock(mu_);
        Active* active = unchanged(*r);
        if (active == nullptr) continue;
        OrderMoveLocked(active, {}, d.reason);
        requeued.insert(r->devices.begin(), r->devices.end());
        changed = true;
        continue;
      }
      // A move re-forms around the ranks it keeps; one that keeps none
      // restarts the job from its checkpoint, when restarts are allowed (else
      // the policy kept one: AllocJob::move_keeps_a_device).
      const bool restart = restarts(*r, d);
      if (restart && !options_.share_restart_moves) {
        spdlog::warn("job {}: not moved to {}: a move that keeps none of its ranks needs a restart",
                     d.id, SetKey(d.devices));
        continue;
      }
      // A device another attempt holds, or a leaving rank still occupies, is
      // in use until its agent stops that rank: growth and moves wait for a
      // later round (a restart onto a device another restart vacates starts
      // once both stopped).
      if (std::any_of(d.devices.begin(), d.devices.end(), [&](const std::string& dev) {
            return !r->devices.contains(dev) &&
                   ((attempts.contains(dev) && !(restart && vacated.contains(dev))) ||
                    releasing.contains(dev));
          })) {
        continue;
      }
      auto plan = plans.find({d.id, SetKey(d.devices)});
      if (plan == plans.end()) continue;
      MutexLock lock(mu_);
      Active* active = unchanged(*r);
      if (active == nullptr) continue;
      if (restart) {
        OrderMoveLocked(active, d.devices,
                        d.reason + " (restarts from its checkpoint; " + r->restart.basis + ")");
        changed = true;
        continue;
      }
      std::set<int64_t> ranks;
      for (const RankLaunch& rank : active->launch.ranks) {
        if (!active->dropped.contains(rank.launch.key.rank)) ranks.insert(rank.launch.key.rank);
      }
      std::string why;
      TESSERA_ASSIGN_OR_RETURN(bool applied,
                               ApplyReformLocked(r->job, active, plan->second, open, ranks, {},
                                                 d.reason + " (" + r->move.basis + ")", &why));
      if (applied) {
        changed = true;
      } else {
        spdlog::warn("job {}: could not {}: {}", d.id, scheduler::AllocActionName(d.action), why);
      }
    }
  }
  // The job each requeue made room for gets the devices it starts on
  // reserved, so the queue pass places it there once the requeued ranks
  // stopped (and no other job takes them meanwhile).
  if (!requeued.empty()) {
    MutexLock lock(mu_);
    for (const scheduler::AllocDecision& d : allocation.jobs) {
      if (d.action != scheduler::AllocAction::kStart ||
          std::none_of(d.devices.begin(), d.devices.end(),
                       [&](const std::string& dev) { return requeued.contains(dev); })) {
        continue;
      }
      move_targets_[d.id] = MoveTarget{d.devices, clock_->SteadyNow() + kRequeueHold};
    }
  }
  if (changed) polls_.Notify();
  return Status::Ok();
}

}  // namespace tessera::daemon
