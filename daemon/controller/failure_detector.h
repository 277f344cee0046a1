// FailureDetector: decides a node's health from how long it has been silent.
//
// A node is healthy while its silence (time since its last heartbeat) is at
// most suspect_after_missed heartbeat intervals, suspect after that, and dead
// once the silence exceeds dead_after_ms. A node that beats again is healthy
// at once. Pure: the caller supplies the times.
//
// PeerLossChecks shortens the wait where a rank has already seen a node go:
// a rank whose collective failed because a peer vanished exits with
// api::kPeerLostExitCode, and the controller checks every other node of that
// attempt at once. A node under check is dead as soon as its silence exceeds
// the check window, not dead_after_ms; a beat that arrives after the check
// began ends the check. The window is longer than the longest gap between a
// live agent's beats: its last beat's hold (the wait_ms it asked for, at most
// an interval; an agent whose held answer comes beats again at once) plus
// time for the answer, the agent's own work and the way back: 0.6 of an
// interval, and never less than kMinCheckReturnMs, since a loaded host delays
// a process by the same absolute time whatever the interval (an agent that
// had just been answered at once, on a host running several jobs' workers,
// was once 120 ms late and killed: hold 0 plus 0.6 of a 200 ms interval).
// A node running workers asks for short holds (agent busy_hold), so it is
// found dead sooner than an idle one.
//
// Thread safety: ClassifyNode is pure; PeerLossChecks is a value the caller
// guards (the controller's mutex).
#ifndef TESSERA_DAEMON_CONTROLLER_FAILURE_DETECTOR_H_
#define TESSERA_DAEMON_CONTROLLER_FAILURE_DETECTOR_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

namespace tessera::daemon {

enum class NodeHealth { kHealthy, kSuspect, kDead };
std::string_view NodeHealthName(NodeHealth health);  // "healthy" | "suspect" | "dead"

// The least time a checked node gets, past its hold, to beat again.
inline constexpr int64_t kMinCheckReturnMs = 500;

struct FailureDetectorOptions {
  int64_t heartbeat_interval_ms = 1000;
  int64_t suspect_after_missed = 2;
  int64_t dead_after_ms = 3000;
  // Silence after which a node under a peer-loss check is dead; 0: the
  // node's last hold plus 0.6 intervals, at least kMinCheckReturnMs (see the
  // file comment).
  int64_t check_dead_after_ms = 0;
};

// REQUIRES: silence_ms >= 0.
NodeHealth ClassifyNode(int64_t silence_ms, const FailureDetectorOptions& options);

// The silence that kills a node under check whose last beat asked for a hold
// of `hold_ms` (see the file comment). REQUIRES: hold_ms >= 0.
int64_t CheckDeadAfterMs(const FailureDetectorOptions& options, int64_t hold_ms);

class PeerLossChecks {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  // Puts `node` under check from `now` (an earlier check of it stays).
  void Begin(const std::string& node, TimePoint now);
  // The health of `node`, last heard from at `seen` by a beat that asked for
  // a hold of `hold_ms`: ClassifyNode of its silence, or kDead while it is
  // under check and silent for more than CheckDeadAfterMs. A beat after the
  // check began ends the check, and so does ClassifyNode calling it dead.
  // REQUIRES: seen <= now; hold_ms >= 0.
  NodeHealth Classify(const std::string& node, TimePoint seen, int64_t hold_ms, TimePoint now,
                      const FailureDetectorOptions& options);
  bool UnderCheck(const std::string& node) const { return began_.contains(node); }

 private:
  std::map<std::string, TimePoint> began_;
};

}  // namespace tessera::daemon

#endif  // TESSERA_DAEMON_CONTROLLER_FAILURE_DETECTOR_H_
