#include <spdlog/spdlog.h>

#include <algorithm>
#include <future>
#include <iomanip>
#include <memory>
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

// The JobController's placement: planning with the profile cache and the
// observed corrections, the queue pass that places waiting jobs on free
// devices, the queue view, and dry-run previews.

namespace tessera::daemon {

using api::JobState;
using Steady = std::chrono::steady_clock;

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
  // The queue pass and the infer jobs' hand-over read the first plan only.
  Result<scheduler::PlanSet> plans = Plan(SnapshotOf(nodes, busy), job.spec, FirstPlanOnly());
  // A profile still being measured (or any passing failure) is asked again.
  const bool lasting = plans.ok() || plans.status().code() == StatusCode::kFailedPrecondition ||
                       plans.status().code() == StatusCode::kNotFound ||
                       plans.status().code() == StatusCode::kInvalidArgument;
  if (lasting) {
    // The queue pass asks a job about a few cluster states; the head about a
    // few more (its start at the running jobs' predicted ends, each backfill).
    constexpr size_t kPerJob = 12;
    if (cached.size() >= kPerJob) cached.erase(cached.begin());
    cached.push_back(CachedPlan{key, plans});
  }
  return plans;
}

Result<scheduler::PlanSet> JobController::Plan(const scheduler::ClusterSnapshot& snapshot,
                                               const api::JobSpec& spec,
                                               const scheduler::PlannerOptions& options) {
  // A model: entrypoint's train job is planned by its file's layers.
  const std::string model_file = ModelFileOf(spec);
  scheduler::ClusterSnapshot corrected = snapshot;
  {
    MutexLock lock(corrections_mu_);
    corrections_.Apply(CorrectionKey(spec), &corrected);
  }
  return PlanJob(corrected, spec, options_.profiles, model_file, options);
}

std::string JobController::ModelFileOf(const api::JobSpec& spec) {
  if (api::EntrypointKindOf(spec.entrypoint) != api::EntrypointKind::kModel ||
      spec.kind != api::JobKind::kTrain) {
    return "";
  }
  auto entry = store_->GetEntrypoint(spec.entrypoint);
  return entry.ok() ? entry->command : "";
}

Status JobController::PlaceQueued(const std::vector<api::Node>& nodes,
                                  const std::set<std::string>& held) {
  // Without a free device nothing can be placed, yet the queue's order, each
  // job's reason (the head's predicted start among them) and the infer
  // inputs being listed change as jobs come, go and progress: the pass then
  // runs at most once a second (a tick is 100 ms), its plans on the busy
  // cluster cached.
  bool any_free = false;
  for (const api::Node& n : nodes) {
    if (n.health != "healthy") continue;
    for (const api::Device& d : n.devices) {
      any_free = any_free || !held.contains(DeviceKey(n.name, d.index));
    }
  }
  const auto now = clock_->SteadyNow();
  if (!any_free && now - passed_at_ < std::chrono::seconds(1)) return Status::Ok();
  passed_at_ = now;
  TESSERA_ASSIGN_OR_RETURN(std::vector<api::Job> pending, AllJobsIn(store_, JobState::kPending));
  // Forget the plans and listings of jobs that left the queue.
  std::set<api::JobId> queued;
  for (const api::Job& j : pending) queued.insert(j.id);
  std::erase_if(plan_cache_, [&](const auto& entry) { return !queued.contains(entry.first); });
  lister_.ForgetAllBut(queued);
  {
    // A job that left the queue unplaced (cancelled) keeps no devices
    // reserved (a requeue's hand-off, ShareForWaiting).
    MutexLock lock(mu_);
    std::erase_if(move_targets_, [&](const auto& entry) REQUIRES(mu_) {
      return !queued.contains(entry.first) && !active_.contains(entry.first);
    });
  }
  if (pending.empty()) {
    MutexLock lock(waiting_mu_);
    queue_.clear();
    return Status::Ok();
  }
  // The pass plans on the controller's view of who holds what: a device an
  // attempt holds is busy through `held` (which the pass empties of a running
  // job's devices at its predicted end, for the head's start), not through its
  // agent's report, which says busy while any process runs there.
  std::vector<api::Node> planned = nodes;
  for (api::Node& n : planned) {
    for (api::Device& d : n.devices) {
      if (held.contains(DeviceKey(n.name, d.index))) d.busy = false;
    }
  }
  // Computed only while jobs wait (it costs a JSON text per node).
  inventory_key_ = InventoryKey(planned);
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
  // A moved job is planned on the devices reserved for it (the ones the share
  // round moved it to) while it can be, and no other job on them.
  std::map<api::JobId, MoveTarget> targets;
  {
    MutexLock lock(mu_);
    targets = move_targets_;
  }
  scheduler::QueuePassHooks hooks;
  hooks.plan = [&](const scheduler::PassJob& p,
                   const scheduler::DeviceSet& busy) -> Result<scheduler::PlanSet> {
    scheduler::DeviceSet others = busy;
    for (const auto& [id, target] : targets) {
      if (id != p.id) others.insert(target.devices.begin(), target.devices.end());
    }
    if (auto mine = targets.find(p.id); mine != targets.end()) {
      scheduler::DeviceSet outside = others;  // every device but its reserved ones
      for (const api::Node& n : planned) {
        for (const api::Device& d : n.devices) {
          std::string key = DeviceKey(n.name, d.index);
          if (!mine->second.devices.contains(key)) outside.insert(std::move(key));
        }
      }
      Result<scheduler::PlanSet> there = PlanCached(job_of(p), planned, outside);
      if (there.ok() && !there->plans.empty()) return there;
    }
    return PlanCached(job_of(p), planned, others);
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
  // The head's predicted start (the pass's step 2e): a train job of Tessera's
  // worker runs the steps it has left (WorkerStepsLeft) at its plan's step
  // time; a running one at its observed rate (its newest step's), else its
  // plan's. Other ends (a script's, an infer job's) are unknown.
  hooks.run_s = [&](const scheduler::PassJob& p, const scheduler::Plan& plan) {
    return static_cast<double>(WorkerStepsLeft(*by_id.at(p.id))) *
           std::max(plan.predicted.step_s, 0.0);
  };
  hooks.running = [&]() -> Result<std::vector<scheduler::RunningHold>> {
    TESSERA_ASSIGN_OR_RETURN(std::vector<api::Job> running, AllJobsIn(store_, JobState::kRunning));
    std::map<api::JobId, const api::Job*> records;
    for (const api::Job& j : running) records[j.id] = &j;
    std::vector<scheduler::RunningHold> out;
    MutexLock lock(mu_);
    for (const auto& [id, active] : active_) {
      scheduler::RunningHold hold{LiveDevicesLocked(active).devices, 0};
      auto r = records.find(id);
      const int64_t left = r != records.end() ? WorkerStepsLeft(*r->second) : 0;
      if (left > 0) {
        double rate = ProgressDouble(r->second->progress, "samples_per_s").value_or(0);
        if (!(rate > 0)) {
          rate = ProgressDouble(active.launch.plan.value("predicted", api::Json::object()),
                                "samples_per_s")
                     .value_or(0);
        }
        if (rate > 0) {
          hold.ends_in_s =
              static_cast<double>(left) * static_cast<double>(r->second->spec.global_batch) / rate;
        }
      }
      out.push_back(std::move(hold));
    }
    return out;
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

bool JobController::PlaceableWaiting(
    const std::vector<api::Job>& pending,
    const std::map<std::string, scheduler::UserUsage>& usage) const {
  return std::any_of(pending.begin(), pending.end(), [&](const api::Job& j) {
    const auto held = usage.find(j.owner);
    return scheduler::LimitHolds(j.owner, options_.users.For(j.owner),
                                 held == usage.end() ? scheduler::UserUsage{} : held->second,
                                 j.spec.min_devices)
        .empty();
  });
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
    // A node that no longer reports keeps it for as long as a stop may take;
    // one that reports the process running keeps it while it runs (a
    // re-formed world's rank 0 hosts the store of the world it left).
    auto report = reports_.find(m.node);
    const bool silent =
        report == reports_.end() || SteadyMs(report->second.seen) > 2 * options_.stop_wait_ms;
    const bool forgotten = silent && SteadyMs(m.ended) > 6 * options_.stop_wait_ms;
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
  move_targets_.erase(job.id);  // placed: a moved job's reservation has served
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
