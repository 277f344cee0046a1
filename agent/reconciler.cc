#include "agent/reconciler.h"

#include <map>
#include <set>

namespace tessera::agent {

ReconcileActions Reconcile(const std::vector<api::WorkerLaunch>& desired,
                           const std::vector<api::WorkerStatus>& actual) {
  ReconcileActions out;
  std::map<api::WorkerKey, api::WorkerState> known;
  for (const auto& w : actual) known[w.key] = w.state;
  std::set<api::WorkerKey> wanted;
  for (const auto& launch : desired) {
    if (!wanted.insert(launch.key).second) continue;  // listed twice: start once
    if (!known.count(launch.key)) out.start.push_back(launch);
  }
  for (const auto& [key, state] : known) {
    const bool is_wanted = wanted.count(key) > 0;
    if (is_wanted) {
      out.keep.push_back(key);
    } else if (state == api::WorkerState::kRunning) {
      out.stop.push_back(key);
    } else if (state == api::WorkerState::kExited) {
      out.forget.push_back(key);
    } else {
      out.keep.push_back(key);  // stopping: already on its way out
    }
  }
  return out;
}

}  // namespace tessera::agent
