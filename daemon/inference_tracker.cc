#include "daemon/inference_tracker.h"

#include <string>
#include <vector>

namespace tessera::daemon {
namespace {

// Device names in rank order from a scheduler plan's JSON.
std::vector<std::string> RankDevices(const api::Json& plan) {
  std::vector<std::string> out;
  if (!plan.is_object()) return out;
  auto replicas = plan.find("replicas");
  if (replicas == plan.end() || !replicas->is_array()) return out;
  for (const api::Json& replica : *replicas) {
    auto stages = replica.find("stages");
    if (stages == replica.end() || !stages->is_array()) continue;
    for (const api::Json& stage : *stages) {
      auto devices = stage.find("devices");
      bool named = devices != stage.end() && devices->is_array() && !devices->empty() &&
                   (*devices)[0].is_string();
      out.push_back(named ? (*devices)[0].get<std::string>() : std::string());
    }
  }
  return out;
}

}  // namespace

void InferenceTracker::Record(api::JobId job, int64_t attempt, int64_t rank, int64_t images,
                              double seconds) {
  MutexLock lock(mu_);
  JobWork& work = jobs_[job];
  if (attempt < work.attempt) return;  // a straggler of an ended attempt
  if (attempt > work.attempt) work = JobWork{attempt, {}};
  RankWork& r = work.ranks[rank];
  r.images += images;
  r.seconds += seconds;
}

api::InferenceProgress InferenceTracker::Progress(api::JobId job, int64_t attempt,
                                                  const ChunkCounts& counts, const api::Json& plan,
                                                  const std::optional<LiveRanks>& live) const {
  api::InferenceProgress p;
  p.images_total = counts.images_total;
  p.images_done = counts.images_done;
  p.chunks_total = counts.chunks_total;
  p.chunks_done = counts.chunks_done;
  p.chunks_leased = counts.chunks_leased;
  auto add = [&p](int64_t rank, std::string device, const RankWork& work) {
    api::DeviceThroughput t;
    t.rank = rank;
    t.device = std::move(device);
    t.images = work.images;
    t.images_per_s = work.seconds > 0 ? static_cast<double>(work.images) / work.seconds : 0;
    p.images_per_s += t.images_per_s;
    p.devices.push_back(std::move(t));
  };
  MutexLock lock(mu_);
  auto it = jobs_.find(job);
  const JobWork* work = it != jobs_.end() && it->second.attempt == attempt ? &it->second : nullptr;
  if (live) {
    // The live ranks only: one that left no longer works for the job.
    for (const auto& [rank, device] : *live) {
      RankWork done;  // nothing yet: a rank that just joined
      if (work != nullptr) {
        if (auto r = work->ranks.find(rank); r != work->ranks.end()) done = r->second;
      }
      add(rank, device, done);
    }
  } else if (work != nullptr) {
    const std::vector<std::string> devices = RankDevices(plan);
    for (const auto& [rank, done] : work->ranks) {
      const bool named = rank >= 0 && static_cast<size_t>(rank) < devices.size();
      add(rank, named ? devices[static_cast<size_t>(rank)] : std::string(), done);
    }
  }
  const int64_t left = p.images_total - p.images_done;
  if (left == 0 && p.images_total > 0) {
    p.eta_s = 0;
  } else if (p.images_per_s > 0) {
    p.eta_s = static_cast<double>(left) / p.images_per_s;
  }
  return p;
}

void InferenceTracker::Forget(api::JobId job) {
  MutexLock lock(mu_);
  jobs_.erase(job);
}

}  // namespace tessera::daemon
