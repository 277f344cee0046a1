#include "worker/runtime/await_work.h"

#include <algorithm>
#include <exception>
#include <thread>

namespace tessera::worker {

Status AwaitWork(c10d::Work& work, std::chrono::milliseconds timeout, const std::string& what) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + timeout;
  try {
    work.wait(timeout);
    // Backs off from 50 us to 2 ms between polls: quick for short operations,
    // a few hundred wake-ups a second at most while a peer computes.
    std::chrono::microseconds pause{50};
    while (!work.isCompleted()) {
      if (Clock::now() >= deadline) {
        MarkPeerLost("");
        return Unavailable(what + " did not complete within " +
                           std::to_string(timeout.count() / 1000) + " s (a peer is gone)");
      }
      std::this_thread::sleep_for(pause);
      pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::milliseconds(2));
    }
    if (auto error = work.exception()) std::rethrow_exception(error);
    return Status::Ok();
  } catch (const std::exception& e) {
    return Unavailable(what + " failed: " + MarkPeerLost(e.what()));
  }
}

}  // namespace tessera::worker
