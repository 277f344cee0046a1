// The worker <-> controller protocol of inference jobs: chunk leases.
//
// An infer job's input (a folder, or a list file of paths) is split by the
// controller into chunks of image paths kept in SQLite. Each rank of the
// running attempt asks for chunks, processes them, and reports them done:
//
//   POST /api/v1/jobs/{id}/leases
//   Authorization: Bearer <TESSERA_LEASE_TOKEN>   (scoped to job + attempt)
//   {"attempt": 2, "rank": 0, "max_chunks": 1,
//    "completed": [{"chunk": 7, "images": 32, "seconds": 1.9}]}
//   -> 200 {"chunks": [{"chunk": 9, "items": ["a/0001.png", ...]}],
//           "lease_ms": 30000, "finished": false, "retry_after_ms": 0}
//
// One call reports what was finished (recorded durably before the answer)
// and asks for more; a call with max_chunks 0 only reports and renews. Every
// call renews all leases the rank holds. A call asking for chunks says the
// rank holds nothing but what it reports: chunks still leased to it are sent
// again first, so an answer lost in transit (and the call retried) loses no
// work. A report repeated by a retry is harmless. A lease not renewed within lease_ms,
// or held by an attempt that ended, goes back to the queue. `finished` is
// true when every chunk of the job is done: the rank then exits 0. An empty
// `chunks` with finished false means other ranks hold the rest: ask again
// after retry_after_ms (a lease may expire and come back).
//
// Items are paths relative to the job's dataset folder (or absolute, for a
// list file). A worker writes each output atomically (temporary file, fsync,
// rename) before it reports the chunk, and skips an item whose output
// already exists, so a chunk processed again after a crash is not redone.
//
// Thread safety: plain values.
#ifndef TESSERA_API_LEASE_PROTOCOL_H_
#define TESSERA_API_LEASE_PROTOCOL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "api/types.h"
#include "common/status.h"

namespace tessera::api {

struct CompletedChunk {
  int64_t chunk = 0;
  int64_t images = 0;  // images of the chunk this rank processed (skipped ones excluded)
  double seconds = 0;  // wall seconds the rank spent on the chunk
};

// Ok when `c` is a report the controller takes: chunk and images >= 0,
// seconds a number >= 0; otherwise kInvalidArgument naming the field.
Status CheckCompletedChunk(const CompletedChunk& c);

struct LeaseRequest {
  int64_t attempt = 0;
  int64_t rank = 0;
  int64_t max_chunks = 1;  // 0..64
  std::vector<CompletedChunk> completed;
};

struct LeasedChunk {
  int64_t chunk = 0;
  std::vector<std::string> items;
};

struct LeaseResponse {
  std::vector<LeasedChunk> chunks;
  int64_t lease_ms = 0;
  bool finished = false;
  int64_t retry_after_ms = 0;
};

// Inference progress of one job, as the API, CLI and metrics show it.
struct DeviceThroughput {
  int64_t rank = 0;
  std::string device;  // "node:index"
  int64_t images = 0;  // done by this rank in the current attempt
  double images_per_s = 0;
};

struct InferenceProgress {
  int64_t images_total = 0;
  int64_t images_done = 0;
  int64_t chunks_total = 0;
  int64_t chunks_done = 0;
  int64_t chunks_leased = 0;
  double images_per_s = 0;  // all ranks of the current attempt together
  double eta_s = -1;        // -1: unknown (no rate yet)
  std::vector<DeviceThroughput> devices;
};

Json ToJson(const LeaseRequest& r);
Json ToJson(const LeaseResponse& r);
Json ToJson(const InferenceProgress& p);
// Errors are kInvalidArgument naming the offending field.
Result<LeaseRequest> LeaseRequestFromJson(const Json& j);
Result<LeaseResponse> LeaseResponseFromJson(const Json& j);
Result<InferenceProgress> InferenceProgressFromJson(const Json& j);

}  // namespace tessera::api

#endif  // TESSERA_API_LEASE_PROTOCOL_H_
