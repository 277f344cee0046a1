// Inference: `tessera-worker infer`, archive-scale inference of the image
// models with chunk leases, batches, overlapped I/O, atomic outputs and
// tiling. The parts, one concept each:
//   inference_model.h   the model from a checkpoint; one image or a batch
//   infer_items.h       input items (folder or list file) and output paths
//   infer_plan.h        the layout and rank weights of TESSERA_PLAN
//   infer_pipeline.h    decode -> compute (batched) -> encode threads, chunk commit
//   staged_outputs.h    a chunk's outputs made final together
//   tiled_ranks.h       the "tiled" layout across ranks over c10d
//   lease_keeper.h      lease renewals while chunks are processed
//
// The loop (RunInference): lease chunks from the source (the controller over
// HTTP, or --local's in-memory queue), keep up to max(2, --max-chunks) chunks
// in the pipeline so the device never waits for a lease, report each chunk
// done (images written, seconds) only after its outputs are committed, and
// write one progress line per chunk. A crash leaves the chunk unreported,
// its lease expires, and whoever processes it again skips the items already
// written (an output appears only complete).
//
// Thread safety: RunInference is called once per process.
#ifndef TESSERA_WORKER_RUNTIME_INFERENCE_H_
#define TESSERA_WORKER_RUNTIME_INFERENCE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "common/status.h"
#include "worker/runtime/atomic_output.h"
#include "worker/runtime/chunk_source.h"
#include "worker/runtime/dist_env.h"
#include "worker/runtime/infer_items.h"
#include "worker/runtime/infer_plan.h"
#include "worker/runtime/inference_model.h"

namespace tessera::worker {

// ---- the loop ----

struct InferOptions {
  std::string model;           // a reference model's name, or
  std::string model_file;      // an exported module (exported_model.h)
  api::ImageConvention image;  // model_file: what the spec states of its images
  std::string data;            // folder or list file
  std::string output;          // folder
  std::string checkpoint;      // model: its checkpoint directory (step-N/ folders)
  int64_t width = 0;           // 0: from the checkpoint
  // 0: tile only when a tiled plan says so, or (exported modules) when the
  // device's free memory cannot hold a larger forward (ProbeImageModel).
  int64_t max_tile_px = 0;
  int threads = 1;         // intra-op threads (the same on every rank: byte-equal outputs)
  int64_t max_chunks = 1;  // chunks asked for per lease call
  // The pipeline (infer_pipeline.h): images per forward at most, padded
  // pixels per forward at most, and threads reading and writing images.
  int64_t batch = 8;
  int64_t batch_pixels = int64_t{1} << 17;
  int decode_threads = 2;
  int encode_threads = 2;
  // No controller: the ranks share out the items of --data (rank r takes
  // chunks r, r + W, ...; with a tiled plan rank 0 takes all).
  bool local = false;
  int64_t local_chunk_size = 16;
  std::string controller_url;  // TESSERA_CONTROLLER_URL
  std::string lease_token;     // TESSERA_LEASE_TOKEN
  // Test hooks: faults inside the output writes, and a hook before each item
  // joins a forward (a non-OK Status aborts the run there, like a crash).
  AtomicWriteFaults write_faults;
  std::function<Status(const std::string& item)> before_item;
};

struct InferOutcome {
  int64_t written = 0;   // outputs this rank wrote (tiled: rank 0 counts all)
  int64_t skipped = 0;   // items whose output already existed
  int64_t failed = 0;    // unreadable items (error note written)
  int64_t chunks = 0;    // chunks this rank reported done
  int64_t forwards = 0;  // forward passes: batches of same-size images, or images run alone
  bool stopped = false;  // stop_requested ended the run early
};

// The whole infer command of one rank. `source`: where chunks come from;
// nullptr = from the options (--local queue, or the controller over HTTP).
// Errors: kInvalidArgument for bad options / plan / checkpoint (exit 2);
// others are runtime failures (exit 1).
Result<InferOutcome> RunInference(const InferOptions& options, const DistEnv& env,
                                  const std::atomic<bool>& stop_requested,
                                  ChunkSource* source = nullptr);

}  // namespace tessera::worker

#endif  // TESSERA_WORKER_RUNTIME_INFERENCE_H_
