// FailureDetector: decides a node's health from how long it has been silent.
//
// A node is healthy while its silence (time since its last heartbeat) is at
// most suspect_after_missed heartbeat intervals, suspect after that, and dead
// once the silence exceeds dead_after_ms. A node that beats again is healthy
// at once. Pure: the caller supplies the times.
//
// Thread safety: pure functions.
#ifndef TESSERA_DAEMON_FAILURE_DETECTOR_H_
#define TESSERA_DAEMON_FAILURE_DETECTOR_H_

#include <cstdint>
#include <string_view>

namespace tessera::daemon {

enum class NodeHealth { kHealthy, kSuspect, kDead };
std::string_view NodeHealthName(NodeHealth health);  // "healthy" | "suspect" | "dead"

struct FailureDetectorOptions {
  int64_t heartbeat_interval_ms = 1000;
  int64_t suspect_after_missed = 2;
  int64_t dead_after_ms = 3000;
};

// REQUIRES: silence_ms >= 0.
NodeHealth ClassifyNode(int64_t silence_ms, const FailureDetectorOptions& options);

}  // namespace tessera::daemon

#endif  // TESSERA_DAEMON_FAILURE_DETECTOR_H_
