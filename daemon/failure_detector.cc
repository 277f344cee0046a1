#include "daemon/failure_detector.h"

namespace tessera::daemon {

std::string_view NodeHealthName(NodeHealth health) {
  switch (health) {
    case NodeHealth::kHealthy:
      return "healthy";
    case NodeHealth::kSuspect:
      return "suspect";
    case NodeHealth::kDead:
      return "dead";
  }
  return "dead";
}

NodeHealth ClassifyNode(int64_t silence_ms, const FailureDetectorOptions& o) {
  if (silence_ms > o.dead_after_ms) return NodeHealth::kDead;
  if (silence_ms > o.suspect_after_missed * o.heartbeat_interval_ms) return NodeHealth::kSuspect;
  return NodeHealth::kHealthy;
}

}  // namespace tessera::daemon
