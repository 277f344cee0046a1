#include "daemon/controller/failure_detector.h"

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

int64_t CheckDeadAfterMs(const FailureDetectorOptions& o) {
  return o.check_dead_after_ms > 0 ? o.check_dead_after_ms : o.heartbeat_interval_ms * 8 / 5;
}

void PeerLossChecks::Begin(const std::string& node, TimePoint now) {
  began_.try_emplace(node, now);
}

NodeHealth PeerLossChecks::Classify(const std::string& node, TimePoint seen, TimePoint now,
                                    const FailureDetectorOptions& o) {
  const int64_t silence_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now - seen).count();
  const NodeHealth plain = ClassifyNode(silence_ms, o);
  auto it = began_.find(node);
  if (it == began_.end()) return plain;
  if (seen > it->second || plain == NodeHealth::kDead) {
    began_.erase(it);  // it answered, or the plain timeout took over
    return plain;
  }
  return silence_ms > CheckDeadAfterMs(o) ? NodeHealth::kDead : plain;
}

}  // namespace tessera::daemon
