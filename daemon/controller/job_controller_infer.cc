#include <spdlog/spdlog.h>

#include <algorithm>
#include <future>
#include <iomanip>
#include <limits>
#include <memory>
#include <sstream>

#include "api/entrypoint_kind.h"
#include "daemon/controller/infer_growth.h"
#include "daemon/controller/infer_input.h"
#include "daemon/controller/job_controller.h"
#include "daemon/controller/job_controller_util.h"
#include "daemon/controller/planning.h"
#include "daemon/controller/profile_cache.h"
#include "daemon/controller/rank_error.h"
#include "daemon/controller/train_reform.h"
#include "scheduler/plan_json.h"
#include "scheduler/queue_pass.h"

// The JobController's inference side: dropping the ranks of a lost node
// (their chunks go back to the queue), yielding an infer job's devices to
// waiting training, growing a running infer job onto devices that became
// free, and listing an infer job's input before it is placed.

namespace tessera::daemon {

using api::JobState;
using Steady = std::chrono::steady_clock;

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
  SaveAttemptLocked(*active);  // a restarted controller hands them no more
  TESSERA_ASSIGN_OR_RETURN(api::Job next, StepLocked(job, JobEvent::kRanksDropped, why));
  (void)next;
  ++generation_;
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
  // give back (every independent rank but the lowest of each), and those
  // they are giving back (dropped ranks not yet gone); (2) take the waiting
  // train jobs by priority, then age, skipping those their user's limits
  // hold; (3) plan the first on the free devices plus both, within its
  // user's device limit (as the queue pass will place it); if its best plan
  // uses some it could give back, and no infer job it takes from has a
  // higher priority, (4) drop those ranks, and let the next pass place it.
  // A job whose plan needs only free devices and those being given back
  // waits for them: a device whose rank is still stopping is not a reason to
  // take another.
  const auto now = clock_->SteadyNow();
  if (now - yield_checked_at_ < std::chrono::seconds(1)) return Status::Ok();
  yield_checked_at_ = now;
  struct Yieldable {
    api::JobId job;
    int64_t rank;
  };
  std::map<std::string, Yieldable> yieldable;  // (1) by device key
  std::set<std::string> giving_back;
  {
    MutexLock lock(mu_);
    for (const auto& [id, active] : active_) {
      if (!IndependentRanks(active.launch)) continue;
      giving_back.merge(LiveDevicesLocked(active).releasing);
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
  for (const std::string& device : giving_back) busy.erase(device);
  // The agents report the devices the yielding ranks run on as busy.
  std::vector<api::Node> freed = nodes;
  for (api::Node& n : freed) {
    for (api::Device& d : n.devices) {
      const std::string key = DeviceKey(n.name, d.index);
      if (yieldable.contains(key) || giving_back.contains(key)) d.busy = false;
    }
  }
  for (const api::Job& pending_job : pending) {  // (2)
    auto held_by = usage.find(pending_job.owner);
    const scheduler::UserUsage holds =
        held_by == usage.end() ? scheduler::UserUsage{} : held_by->second;
    const scheduler::UserPolicy& policy = options_.users.For(pending_job.owner);
    if (!scheduler::LimitHolds(pending_job.owner, policy, holds, pending_job.spec.min_devices)
             .empty()) {
      continue;
    }
    // Planned within its user's device limit, as the queue pass places it.
    api::Job job = pending_job;
    job.spec.max_devices =
        scheduler::DeviceBound(policy, holds.devices, job.spec.max_devices).value_or(0);
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
        const int64_t left = static_cast<int64_t>(active->second.launch.ranks.size() -
                                                  active->second.dropped.size() - ranks.size());
        TESSERA_RETURN_IF_ERROR(DropInferRanksLocked(
            infer_jobs.at(id), &active->second, ranks,
            RanksGive(ranks, devices.at(id)) + " to job " + std::to_string(job.id) + " (train, " +
                job.owner + "): inference fills the gaps; " + ChunksBackToQueue(ranks) +
                ", the other " + std::to_string(left) + " rank" + (left == 1 ? "" : "s") +
                " go on"));
      }
    }
    polls_.Notify();
    SetWaiting(job.id, "infer jobs give back devices for it");
    break;
  }
  return Status::Ok();
}

Status JobController::GrowInference(const std::vector<api::Node>& nodes,
                                    const std::set<std::string>& held) {
  // Steps: (1) at most once every grow_check_ms, only while a device is free
  // (healthy, held by no attempt, not reported busy, not under Slurm, whose
  // attempts are submitted once) and no job waits (free devices go to waiting
  // jobs first; one its user's limits hold does not count: PlaceableWaiting);
  // (2) take the running infer attempts with independent ranks,
  // grow_settle_ms after their launch, every live rank running, of jobs that
  // allow it (JobSpec::elastic), the user holding the fewest devices per unit
  // of weight first (none while that one is still settling); (3) each with
  // room (fewer live ranks than its max_devices and its user's device limit)
  // and chunks no rank leased yet; (4) plan it on its own devices plus the
  // free ones (outside the lock) and take, from the best plan whose replicas
  // are one stage each, the free devices the attempt lacks, as many as the
  // room allows; (5) unless the attempt changed meanwhile, new ranks join on
  // them (infer_growth.h): a ranks_joined event with the job's new plan, the
  // ranks desired at once, the stored attempt rewritten.
  const auto now = clock_->SteadyNow();
  if (now - infer_grow_checked_at_ < std::chrono::milliseconds(options_.grow_check_ms)) {
    return Status::Ok();
  }
  infer_grow_checked_at_ = now;
  std::set<std::string> free;  // (1)
  for (const api::Node& n : nodes) {
    if (n.health != "healthy" || UnderSlurm(n.name)) continue;
    for (const api::Device& d : n.devices) {
      const std::string key = DeviceKey(n.name, d.index);
      if (!d.busy && !held.contains(key)) free.insert(key);
    }
  }
  if (free.empty()) return Status::Ok();
  TESSERA_ASSIGN_OR_RETURN(std::vector<api::Job> pending, AllJobsIn(store_, JobState::kPending));
  std::map<std::string, scheduler::UserUsage> usage = UsageByUser();
  if (PlaceableWaiting(pending, usage)) return Status::Ok();
  struct Candidate {
    api::JobId id = 0;
    int64_t attempt = 0;
    size_t ranks = 0;               // the attempt's ranks and dropped ones when seen: a change
    size_t dropped = 0;             // meanwhile cancels the growth
    std::set<std::string> devices;  // of its live ranks
    bool settling = false;          // launched less than grow_settle_ms ago
    double share = 0;               // its user's devices per unit of weight
    std::optional<api::Job> job;    // its record, read once
  };
  std::vector<Candidate> candidates;
  {
    MutexLock lock(mu_);  // (2)
    for (const auto& [id, active] : active_) {
      if (!IndependentRanks(active.launch)) continue;
      const bool settling = SteadyMs(active.launched_at) < options_.grow_settle_ms;
      LiveDevices live = LiveDevicesLocked(active);
      if (settling || (live.every_rank_runs && !live.devices.empty())) {
        candidates.push_back({id, active.launch.attempt, active.launch.ranks.size(),
                              active.dropped.size(), std::move(live.devices), settling});
      }
    }
  }
  if (candidates.empty()) return Status::Ok();
  // (2) The user holding the fewest devices per unit of weight grows first,
  // then a job still settling (just placed, often on what another job gave
  // up in the share round), then the job with the fewest ranks: the devices
  // a job gave up to another user's go to that user's job, not back to it.
  // While the first is still settling nothing grows (it waits at most
  // grow_settle_ms).
  for (Candidate& c : candidates) {
    auto job = store_->GetJob(c.id);
    if (!job.ok()) continue;
    c.share =
        static_cast<double>(usage[job->owner].devices) / options_.users.For(job->owner).weight;
    c.job = *std::move(job);
  }
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const Candidate& a, const Candidate& b) {
                     if (a.share != b.share) return a.share < b.share;
                     if (a.settling != b.settling)
                       return a.settling;  // the one just placed; the other gave
                     return a.devices.size() < b.devices.size();
                   });
  if (candidates.front().settling) return Status::Ok();
  std::erase_if(candidates, [](const Candidate& c) { return c.settling; });
  std::map<std::string, std::string> addresses;
  for (const api::Node& n : nodes) addresses[n.name] = n.address.empty() ? "127.0.0.1" : n.address;
  bool grew = false;
  for (const Candidate& c : candidates) {
    if (free.empty()) break;
    const std::optional<api::Job>& job = c.job;
    if (!job || job->state != JobState::kRunning || job->attempt != c.attempt ||
        !job->spec.elastic) {
      continue;
    }
    // (3) Room, and work to share.
    const auto live = static_cast<int64_t>(c.devices.size());
    int64_t room = std::numeric_limits<int64_t>::max();
    if (job->spec.max_devices > 0) room = job->spec.max_devices - live;
    if (const scheduler::UserPolicy policy = options_.users.For(job->owner);
        policy.max_devices > 0) {
      room = std::min(room, policy.max_devices - usage[job->owner].devices);
    }
    if (room <= 0) continue;
    auto counts = store_->CountChunks(c.id);
    if (!counts.ok()) continue;
    const int64_t unleased = counts->chunks_total - counts->chunks_done - counts->chunks_leased;
    if (unleased <= 0) continue;
    // (4) Its own devices and the free ones; planned afresh, not PlanCached,
    // whose cluster key is refreshed only while jobs wait.
    std::vector<api::Node> mine = nodes;
    std::set<std::string> others;
    for (api::Node& n : mine) {
      for (api::Device& d : n.devices) {
        const std::string key = DeviceKey(n.name, d.index);
        if (c.devices.contains(key)) {
          d.busy = false;  // ours
        } else if (!free.contains(key)) {
          others.insert(key);
        }
      }
    }
    Result<scheduler::PlanSet> plans = Plan(SnapshotOf(mine, others), job->spec);
    if (!plans.ok()) continue;
    const scheduler::Plan* best = nullptr;
    for (const scheduler::Plan& p : plans->plans) {
      const bool independent =
          !p.tiling && std::all_of(p.replicas.begin(), p.replicas.end(), [](const auto& r) {
            return r.stages.size() == 1 && r.stages[0].devices.size() == 1;
          });
      if (independent) {
        best = &p;
        break;
      }
    }
    if (best == nullptr) continue;
    std::vector<std::string> gained;
    for (const scheduler::DeviceId& d : best->Devices()) {
      const std::string key = DeviceKey(d.node, d.index);
      if (free.contains(key) && static_cast<int64_t>(gained.size()) < room) gained.push_back(key);
    }
    if (gained.empty()) continue;
    auto entry = store_->GetEntrypoint(job->spec.entrypoint);
    if (!entry.ok()) continue;
    // The new ranks as a fresh launch of the wider plan launches them.
    auto fresh = BuildAttemptLaunch(*job, c.attempt, *best, scheduler::ToJson(*best),
                                    EntrypointCommand{entry->name, entry->command}, addresses,
                                    options_.launch);
    if (!fresh.ok()) {
      spdlog::warn("job {}: cannot grow: {}", c.id, fresh.status().ToString());
      continue;
    }
    MutexLock lock(mu_);  // (5) Unless the attempt changed meanwhile.
    auto it = active_.find(c.id);
    if (it == active_.end() || it->second.launch.attempt != c.attempt ||
        it->second.launch.ranks.size() != c.ranks || it->second.dropped.size() != c.dropped) {
      continue;
    }
    Active& active = it->second;
    auto grown = JoinInferRanks(active.launch, active.dropped, *fresh, gained);
    if (!grown.ok()) {
      spdlog::warn("job {}: cannot grow: {}", c.id, grown.status().ToString());
      continue;
    }
    const int64_t ranks = live + static_cast<int64_t>(grown->joined.size());
    std::string devices;
    for (const std::string& d : gained) devices += (devices.empty() ? "" : ", ") + d;
    const bool one = grown->joined.size() == 1;
    const std::string reason =
        "devices " + devices + " are free: the inference grows to " + std::to_string(ranks) +
        " ranks (" + (one ? "rank " : "ranks ") + RankList(grown->joined) +
        (one ? " joins and leases" : " join and lease") + " chunks like the others; " +
        std::to_string(unleased) + " chunk" + (unleased == 1 ? "" : "s") + " not leased yet)";
    auto stepped = StepLocked(*job, JobEvent::kRanksJoined, reason, grown->launch.plan);
    if (!stepped.ok()) {
      spdlog::warn("job {}: cannot grow: {}", c.id, stepped.status().ToString());
      continue;
    }
    active.launch = std::move(grown->launch);
    for (int64_t r : grown->joined) active.joining[r] = clock_->SteadyNow();
    SaveAttemptLocked(active);  // a restarted controller hands the new ranks too
    ++generation_;
    grew = true;
    usage[job->owner].devices += static_cast<int64_t>(gained.size());
    for (const std::string& d : gained) free.erase(d);
  }
  if (grew) polls_.Notify();
  return Status::Ok();
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

}  // namespace tessera::daemon
