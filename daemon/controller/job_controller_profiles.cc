// The JobController's profiles measured again (RecheckProfiles): a profile
// whose running jobs' steps contradict it (ObserveComputeLocked asks, once
// per correction key) is measured again through options_.remeasure_profile,
// and the key's corrections start afresh once the new profile is in use (they
// were ratios against the old one).
//
// Steps (RecheckProfiles, each Tick, outside the lock):
//   1. Take the profiles due and those being measured again.
//   2. For each due: its target from the job's spec (the builtin model, or a
//      model: train job's registered file), the profile in use, and the hook;
//      queued, it is being measured again.
//   3. For each being measured again: once the lookup answers a profile other
//      than the one in use when asked, reset the key's corrections.
#include <spdlog/spdlog.h>

#include <map>
#include <string>

#include "daemon/controller/job_controller.h"
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

}  // namespace tessera::daemon
