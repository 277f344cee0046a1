// ChunkSource: where an inference rank gets its work (chunks of image paths)
// and reports it done, following api/lease_protocol.h.
//
// One call, Lease(completed, max_chunks), reports finished chunks (durably,
// before the answer) and asks for up to max_chunks more; every call also
// renews the leases the rank holds. The answer says `finished` when every
// chunk of the job is done, or asks to come back after retry_after_ms.
//
// Implementations:
//   HttpChunkSource   the controller's lease route, POST
//                     <controller>/api/v1/jobs/<job>/leases with a bearer
//                     token. Transport failures and 429 / 5xx answers are
//                     retried with exponential backoff for a bounded time
//                     (retry_for), then the call fails with kUnavailable; a
//                     4xx answer fails at once (kFailedPrecondition for 409 /
//                     410: the attempt is over; kUnauthenticated /
//                     kPermissionDenied for 401 / 403).
//   MemoryChunkQueue  the whole controller side in memory (chunks, leases
//                     that expire by a Clock, completion records), shared by
//                     ranks through ForRank(rank). The fake for tests, and the
//                     queue of `tessera-worker infer --local`.
//
// Ownership: MakeHttpChunkSource returns an owned source. ForRank's sources
// share the queue (shared_ptr). Thread safety: every ChunkSource here is
// safe to call from several threads (the infer loop renews leases from a
// background thread while the main thread works).
#ifndef TESSERA_WORKER_RUNTIME_CHUNK_SOURCE_H_
#define TESSERA_WORKER_RUNTIME_CHUNK_SOURCE_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "api/lease_protocol.h"
#include "api/tls_context.h"
#include "common/clock.h"
#include "common/status.h"

namespace tessera::worker {

class ChunkSource {
 public:
  virtual ~ChunkSource() = default;
  // REQUIRES: 0 <= max_chunks <= 64.
  virtual Result<api::LeaseResponse> Lease(const std::vector<api::CompletedChunk>& completed,
                                           int64_t max_chunks) = 0;
};

// ---- controller over HTTP ----

struct HttpChunkSourceOptions {
  std::string controller_url;  // "http(s)://127.0.0.1:7070" (TESSERA_CONTROLLER_URL)
  // How an https controller is verified; when empty, from the agent's
  // TESSERA_CONTROLLER_CA_FILE / TESSERA_CONTROLLER_CA_SHA256.
  api::TlsClientOptions tls;
  std::string token;    // bearer token (TESSERA_LEASE_TOKEN)
  std::string job_id;   // TESSERA_JOB_ID
  int64_t attempt = 0;  // TESSERA_ATTEMPT (>= 1)
  int64_t rank = 0;
  std::chrono::milliseconds request_timeout{10'000};
  // Transport errors and 429 / 5xx answers are retried for this long.
  std::chrono::milliseconds retry_for{120'000};
  std::chrono::milliseconds first_backoff{200};
  std::chrono::milliseconds max_backoff{5'000};
  Clock* clock = nullptr;  // nullptr: SystemClock::Default()
  // How to wait between retries; nullptr: std::this_thread::sleep_for.
  std::function<void(std::chrono::milliseconds)> sleep;
};

// kInvalidArgument (field "TESSERA_CONTROLLER_URL" / "TESSERA_JOB_ID" /
// "TESSERA_ATTEMPT") for a URL that is not http(s)://host[:port][/prefix], an
// empty job id or an attempt < 1.
Result<std::unique_ptr<ChunkSource>> MakeHttpChunkSource(HttpChunkSourceOptions options);

// ---- in memory ----

struct MemoryChunkQueueOptions {
  int64_t chunk_size = 16;  // items per chunk (the last chunk may be shorter)
  int64_t lease_ms = 30'000;
  int64_t retry_after_ms = 50;
  Clock* clock = nullptr;  // nullptr: SystemClock::Default()
};

class MemoryChunkQueue : public std::enable_shared_from_this<MemoryChunkQueue> {
 public:
  // Items are split in order into chunks 0, 1, ... of chunk_size.
  // REQUIRES: options.chunk_size >= 1.
  static std::shared_ptr<MemoryChunkQueue> Create(const std::vector<std::string>& items,
                                                  MemoryChunkQueueOptions options = {});

  // The protocol call of one rank (see api/lease_protocol.h): chunks still
  // leased to the rank are sent again first, as the controller does. Completing a
  // chunk not leased to `rank` is recorded too (a slow rank finishing a
  // chunk whose lease expired). kInvalidArgument for an unknown chunk or
  // max_chunks outside [0, 64].
  Result<api::LeaseResponse> Lease(int64_t rank, const std::vector<api::CompletedChunk>& completed,
                                   int64_t max_chunks);

  // A ChunkSource for `rank` over this queue.
  std::unique_ptr<ChunkSource> ForRank(int64_t rank);

  // Simulates a crashed rank: its leases go back to the queue now.
  void ReleaseRank(int64_t rank);

  struct ChunkRecord {
    std::vector<std::string> items;
    int64_t times_leased = 0;
    int64_t times_completed = 0;
    int64_t images_reported = 0;  // sum of `images` over completions
    bool done = false;
  };
  // A copy of every chunk's record, by chunk number.
  std::vector<ChunkRecord> Records() const;
  int64_t num_chunks() const;

 private:
  explicit MemoryChunkQueue(MemoryChunkQueueOptions options);
  void ExpireLocked(std::chrono::steady_clock::time_point now);

  struct Holder {
    int64_t rank = -1;
    std::chrono::steady_clock::time_point deadline;
  };
  MemoryChunkQueueOptions options_;
  Clock* clock_;
  mutable std::mutex mu_;
  std::vector<ChunkRecord> chunks_;
  std::map<int64_t, Holder> leases_;  // chunk -> holder
};

}  // namespace tessera::worker

#endif  // TESSERA_WORKER_RUNTIME_CHUNK_SOURCE_H_
