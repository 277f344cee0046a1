// LeaseKeeper: renews an inference rank's chunk leases from a background
// thread while its chunks are being processed. Every ChunkSource::Lease call
// renews all leases the rank holds, so the keeper calls Lease({}, 0) every
// lease_ms / 3 (at least every 100 ms). A failed renewal is logged once; the
// next one may succeed (the chunk source retries transport errors itself).
//
// Ownership: borrows the source (it must outlive the keeper). Thread safety:
// the source must be safe to call from several threads (every ChunkSource in
// chunk_source.h is); the destructor stops and joins the thread.
#ifndef TESSERA_WORKER_RUNTIME_LEASE_KEEPER_H_
#define TESSERA_WORKER_RUNTIME_LEASE_KEEPER_H_

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

#include "worker/runtime/chunk_source.h"

namespace tessera::worker {

class LeaseKeeper {
 public:
  // lease_ms <= 0: no renewals (the source's leases do not expire).
  LeaseKeeper(ChunkSource& source, int64_t lease_ms);
  ~LeaseKeeper();
  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;

 private:
  ChunkSource& source_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  bool warned_ = false;
  std::thread thread_;
};

}  // namespace tessera::worker

#endif  // TESSERA_WORKER_RUNTIME_LEASE_KEEPER_H_
