#include "daemon/controller/move_costs.h"

#include <algorithm>
#include <cstdio>

namespace tessera::daemon {

std::optional<double> MoveCosts::Stepped(api::JobId job, int64_t step,
                                         std::optional<int64_t> generation, TimePoint at) {
  auto [newest, inserted] = newest_.try_emplace(job, step);
  if (!inserted) newest->second = std::max(newest->second, step);
  auto open = open_.find(job);
  if (open == open_.end()) return std::nullopt;
  const bool by_new_world =
      generation ? *generation >= open->second.generation : step > open->second.step;
  if (!by_new_world) return std::nullopt;
  const double pause = std::chrono::duration<double>(at - open->second.at).count();
  const double cost = std::max(0.0, pause - open->second.step_s);
  open_.erase(open);
  measured_[job] = cost;
  total_s_ += cost;
  ++count_;
  return cost;
}

void MoveCosts::Begin(api::JobId job, int64_t generation, double step_s, TimePoint at) {
  auto newest = newest_.find(job);
  open_[job] = Open{newest == newest_.end() ? 0 : newest->second, generation, step_s, at};
}

void MoveCosts::Forget(api::JobId job) {
  newest_.erase(job);
  open_.erase(job);
  measured_.erase(job);
}

MoveCosts::Charge MoveCosts::For(api::JobId job) const {
  if (auto it = measured_.find(job); it != measured_.end()) {
    return {it->second, "measured at its last re-form"};
  }
  if (count_ > 0) {
    char basis[96];
    std::snprintf(basis, sizeof(basis), "the mean of %lld measured re-form%s",
                  static_cast<long long>(count_), count_ == 1 ? "" : "s");
    return {total_s_ / static_cast<double>(count_), basis};
  }
  return {configured_s_, "configured"};
}

MoveCosts::Charge MoveCosts::ForRestart(api::JobId job) const {
  Charge charge = For(job);
  if (charge.seconds >= configured_s_) return charge;
  return {configured_s_, "configured: a restart is not measured"};
}

}  // namespace tessera::daemon
