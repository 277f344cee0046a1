#include "worker/runtime/lease_keeper.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

namespace tessera::worker {

LeaseKeeper::LeaseKeeper(ChunkSource& source, int64_t lease_ms) : source_(source) {
  if (lease_ms <= 0) return;
  const auto interval = std::chrono::milliseconds(std::max<int64_t>(100, lease_ms / 3));
  thread_ = std::thread([this, interval] {
    std::unique_lock<std::mutex> lock(mu_);
    while (!cv_.wait_for(lock, interval, [this] { return done_; })) {
      lock.unlock();
      Result<api::LeaseResponse> r = source_.Lease({}, 0);
      if (!r.ok() && !warned_) {
        warned_ = true;
        std::fprintf(stderr, "tessera-worker: renewing leases failed: %s\n",
                     r.status().ToString().c_str());
      }
      lock.lock();
    }
  });
}

LeaseKeeper::~LeaseKeeper() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace tessera::worker
