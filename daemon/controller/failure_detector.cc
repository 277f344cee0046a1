#include "daemon/controller/failure_detector.h"

#include <algorithm>

#include "common/enum_names.h"

namespace tessera::daemon {

constexpr EnumName<NodeHealth> kNodeHealthNames[] = {
    {NodeHealth::kHealthy, "healthy"},
    {NodeHealth::kSuspect, "suspect"},
    {NodeHealth::kDead, "dead"},
};
static_assert(IsValidNameTable(kNodeHealthNames));

std::string_view NodeHealthName(NodeHealth health) {
  return NameOf(kNodeHealthNames, health, "dead");
}

NodeHealth ClassifyNode(int64_t silence_ms, const FailureDetectorOptions& o) {
  if (silence_ms > o.dead_after_ms) return NodeHealth::kDead;
  if (silence_ms > o.suspect_after_missed * o.heartbeat_interval_ms) return NodeHealth::kSuspect;
  return NodeHealth::kHealthy;
}

int64_t CheckDeadAfterMs(const FailureDetectorOptions& o, int64_t hold_ms) {
  if (o.check_dead_after_ms > 0) return o.check_dead_after_ms;
  return std::clamp<int64_t>(hold_ms, 0, o.heartbeat_interval_ms) +
         std::max<int64_t>(o.heartbeat_interval_ms * 3 / 5, kMinCheckReturnMs);
}

void PeerLossChecks::Begin(const std::string& node, TimePoint now) {
  began_.try_emplace(node, now);
}

NodeHealth PeerLossChecks::Classify(const std::string& node, TimePoint seen, int64_t hold_ms,
                                    TimePoint now, const FailureDetectorOptions& o) {
  const int64_t silence_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now - seen).count();
  const NodeHealth plain = ClassifyNode(silence_ms, o);
  auto it = began_.find(node);
  if (it == began_.end()) return plain;
  if (seen > it->second || plain == NodeHealth::kDead) {
    began_.erase(it);  // it answered, or the plain timeout took over
    return plain;
  }
  return silence_ms > CheckDeadAfterMs(o, hold_ms) ? NodeHealth::kDead : plain;
}

}  // namespace tessera::daemon
