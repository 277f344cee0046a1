// The JobController's profiles that learn: the compute running train ranks
// report corrects their profiles (ObserveComputeLocked, scheduler/
// compute_correction.h), and a profile whose ranks' own work contradicts it
// (ObserveComputeLocked asks, once per correction key) is measured again
// (RecheckProfiles) through options_.remeasure_profile; the key's corrections
// start afresh once the new profile is in use (they were ratios against the
// old one).
//
// Steps (RecheckProfiles, each Tick, outside the lock):
//   1. Take the profiles due and those being measured again.
//   2. For each due: its target from the job's spec (the builtin model, or a
//      model: train job's registered file), the profile in use, and the hook;
//      queued, it is being measured again.
//   3. For each being measured again: once the lookup answers a profile other
//      than the one in use when asked, reset the key's corrections.
#include <spdlog/spdlog.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <string>

#include "daemon/controller/job_controller.h"
#include "daemon/controller/job_controller_util.h"
#include "daemon/controller/planning.h"

namespace tessera::daemon {

void JobController::RecheckProfiles() {
  std::map<std::string, ProfileRecheck> due;  // (1)
  std::map<std::string, Remeasuring> measuring;
  {
    MutexLock lock(mu_);
    if (recheck_due_.empty() && remeasuring_.empty()) return;
    due.swap(recheck_due_);
    measuring = remeasuring_;
  }
  for (const auto& [key, recheck] : due) {  // (2)
    auto job = store_->GetJob(recheck.job);
    if (!job.ok() || !options_.profiles || !options_.remeasure_profile) continue;
    const std::optional<ProfileTarget> target =
        LayeredProfileTarget(job->spec, ModelFileOf(job->spec));
    if (!target) continue;
    Result<scheduler::ModelProfile> in_use = options_.profiles(*target);
    if (!in_use.ok()) continue;
    if (options_.remeasure_profile(*target, recheck.why)) {
      measuring.insert_or_assign(key, Remeasuring{*target, std::move(*in_use)});
    }
  }
  for (auto it = measuring.begin(); it != measuring.end();) {  // (3)
    Result<scheduler::ModelProfile> now = options_.profiles(it->second.target);
    if (!now.ok() || *now == it->second.old) {
      ++it;
      continue;
    }
    {
      MutexLock lock(corrections_mu_);
      corrections_.Reset(it->first);
      work_corrections_.Reset(it->first);
    }
    spdlog::info("profile of {} measured again: the corrections of {} start afresh",
                 it->second.target.Describe(), it->first);
    it = measuring.erase(it);
  }
  MutexLock lock(mu_);
  remeasuring_ = std::move(measuring);
}

void JobController::ObserveComputeLocked(const api::HeartbeatRequest& request) {
  // Steps: for each reporting rank of an active train attempt, (1) find its
  // stage in the attempt's plan (ranks are numbered replica by replica, stage
  // by stage; only single-stage replicas count) and its device's type; (2) take each progress line
  // newer than the last observed one, past the first two steps (warm-up); (3) set its compute_s
  // against the stage's prediction (the corrections plans use), and its own work (work_s) too;
  // (4) a full window of work_s beyond kContradictedFactor asks for the profile again.
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
    auto kind = device_kinds_.find(DeviceKey(r.node, r.device_index));
    if (!(predicted > 0) || kind == device_kinds_.end()) continue;
    const std::string& type = kind->second.type;
    const double hold_speed = kind->second.hold_speed;
    int64_t& seen = active.observed_step[w.key.rank];
    for (const api::Json* line : ProgressLinesOf(w)) {  // (2)
      if (!line->is_object() || !line->contains("compute_s") || !line->contains("step") ||
          !(*line)["compute_s"].is_number() || !(*line)["step"].is_number_integer()) {
        continue;
      }
      const int64_t step = (*line)["step"].get<int64_t>();
      if (step <= seen || step <= 2) continue;
      seen = step;
      const double compute_s = (*line)["compute_s"].get<double>();
      // The rank's own work: what an emulated device that holds would have
      // taken for its CPU seconds, without the time it waited for a core.
      double work_s = compute_s;
      if (hold_speed > 0) {
        if (const std::optional<double> cpu = ProgressDouble(*line, "compute_cpu_s");
            cpu && *cpu > 0) {
          work_s = *cpu / hold_speed;
        }
      }
      MutexLock lock(corrections_mu_);  // (3)
      const uint64_t before = corrections_.generation();
      corrections_.Observe(active.correction_key, type, predicted, scale, compute_s);
      work_corrections_.Observe(active.correction_key, type, predicted, scale, work_s);
      // (4) The profile is contradicted by the work, not by a busy host:
      // measured again on that host, it would measure the contention.
      const double factor = work_corrections_.Factor(active.correction_key, type);
      if (options_.remeasure_profile &&
          work_corrections_.Samples(active.correction_key, type) >=
              scheduler::ComputeCorrection::kWindow &&
          (factor > kContradictedFactor || factor * kContradictedFactor < 1) &&
          recheck_asked_.insert(active.correction_key).second) {
        char why[160];
        std::snprintf(why, sizeof(why),
                      "job %lld's steps on %s compute at %.2fx its prediction over %d steps",
                      static_cast<long long>(it->first), type.c_str(), factor,
                      scheduler::ComputeCorrection::kWindow);
        recheck_due_[active.correction_key] = {it->first, why};
      }
      if (corrections_.generation() != before) {
        // Said once when a factor is first known; its later moves at debug level.
        const bool first = corrections_.Samples(active.correction_key, type) ==
                           scheduler::ComputeCorrection::kMinSamples;
        const double observed = corrections_.Factor(active.correction_key, type);
        const double work = work_corrections_.Factor(active.correction_key, type);
        spdlog::log(first ? spdlog::level::info : spdlog::level::debug,
                    "profile of {} on {}: compute observed at {:.2f}x the profile's ({} steps){}",
                    active.correction_key, type, observed,
                    corrections_.Samples(active.correction_key, type),
                    std::abs(observed / work - 1) > scheduler::ComputeCorrection::kNotable
                        ? fmt::format(", the ranks' own work at {:.2f}x: they waited for host "
                                      "cores the emulated devices declare",
                                      work)
                        : std::string());
      }
    }
  }
}

}  // namespace tessera::daemon
