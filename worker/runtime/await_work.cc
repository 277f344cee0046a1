#include "worker/runtime/await_work.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <set>
#include <thread>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <vector>

namespace tessera::worker {
namespace {

std::atomic<bool> g_abandoned{false};
std::mutex g_waiting_mu;
std::set<c10d::Work*> g_waiting;  // GUARDED_BY(g_waiting_mu): works in AwaitWork

// Registers a work for AbandonCollectives while it is awaited.
class Waiting {
 public:
  explicit Waiting(c10d::Work* work) : work_(work) {
    std::lock_guard<std::mutex> lock(g_waiting_mu);
    g_waiting.insert(work_);
  }
  ~Waiting() {
    std::lock_guard<std::mutex> lock(g_waiting_mu);
    g_waiting.erase(work_);
  }
  Waiting(const Waiting&) = delete;
  Waiting& operator=(const Waiting&) = delete;

 private:
  c10d::Work* work_;
};

// An operation that did not complete stays registered with its group: a
// peer's late data for an abandoned receive still lands in its buffer. The
// work (and its tensors and buffers) is kept alive for the life of the
// process, so that write never hits freed memory; one per failed operation.
std::mutex g_buried_mu;
std::vector<c10::intrusive_ptr<c10d::Work>>* g_buried =
    new std::vector<c10::intrusive_ptr<c10d::Work>>();  // never freed: see above

void Bury(c10d::Work& work) {
  std::lock_guard<std::mutex> lock(g_buried_mu);
  g_buried->push_back(c10::intrusive_ptr<c10d::Work>::reclaim_copy(&work));
}

Status Abandoned(c10d::Work& work, const std::string& what) {
  Bury(work);
  return AbandonedStatus(what);
}

}  // namespace

void AbandonCollectives() {
  g_abandoned.store(true);
  std::lock_guard<std::mutex> lock(g_waiting_mu);
  for (c10d::Work* work : g_waiting) {
    try {
      work->abort();  // wakes Gloo's send and recv; other works have none
    } catch (const std::exception&) {
    }
  }
}

void ResumeCollectives() { g_abandoned.store(false); }

bool CollectivesAbandoned() { return g_abandoned.load(); }

Status AbandonedStatus(const std::string& what) {
  MarkPeerLost("");
  return Unavailable(what + " abandoned: the attempt re-forms without a lost peer");
}

Status AwaitWork(c10d::Work& work, std::chrono::milliseconds timeout, const std::string& what) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + timeout;
  if (CollectivesAbandoned()) return Abandoned(work, what);
  Waiting waiting(&work);
  try {
    if (dynamic_cast<c10d::ProcessGroupGloo::AsyncWork*>(&work) != nullptr) {
      // A Gloo collective: Work::wait(slice) throws when the slice passes and
      // leaves the operation running.
      while (true) {
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
        if (left.count() <= 0) break;
        try {
          work.wait(std::min<std::chrono::milliseconds>(left, std::chrono::milliseconds(100)));
          break;
        } catch (const std::exception&) {
          if (work.isCompleted()) throw;  // it failed
        }
        if (CollectivesAbandoned()) return Abandoned(work, what);
      }
    } else if (!work.wait(timeout)) {
      return Abandoned(work, what);  // Work::abort() woke it (false: aborted)
    }
    // Backs off from 50 us to 2 ms between polls: quick for short operations,
    // a few hundred wake-ups a second at most while a peer computes.
    std::chrono::microseconds pause{50};
    while (!work.isCompleted()) {
      if (CollectivesAbandoned()) return Abandoned(work, what);
      if (Clock::now() >= deadline) {
        Bury(work);
        MarkPeerLost("");
        return Unavailable(what + " did not complete within " +
                           std::to_string(timeout.count() / 1000) + " s (a peer is gone)");
      }
      std::this_thread::sleep_for(pause);
      pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::milliseconds(2));
    }
    if (auto error = work.exception()) std::rethrow_exception(error);
    // An aborted receive may also end "completed" without an error: its
    // buffer holds nothing of the peer's.
    if (CollectivesAbandoned()) return Abandoned(work, what);
    return Status::Ok();
  } catch (const std::exception& e) {
    if (CollectivesAbandoned()) return Abandoned(work, what);
    Bury(work);
    return Unavailable(what + " failed: " + MarkPeerLost(e.what()));
  }
}

}  // namespace tessera::worker
