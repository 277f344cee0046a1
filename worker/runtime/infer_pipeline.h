// InferPipeline: runs the items of an inference rank's leased chunks through
// three overlapped stages, so the device computes while the host reads and
// writes images:
//
//   decode  (decode_threads)  per item: skip it when its output exists; read
//                             the image and turn it into the model input
//                             (InferenceModel::Prepare). An unreadable image
//                             gets "<output>.error.txt" (written atomically)
//                             and counts as failed.
//   compute (one thread, the  items in submission order; consecutive items of
//           model's owner)    one chunk with inputs of one shape that run
//                             whole go through the model together, up to
//                             `batch` images and `batch_pixels` pixels per
//                             forward (RunBatch); others one at a time
//                             (`compute_one`: tiles, or the ranks of a tiled
//                             layout).
//   encode  (encode_threads)  writes each output to a temporary file of its
//                             chunk's StagedOutputs; when every item of a
//                             chunk is written, skipped or failed, commits the
//                             chunk (one round of fsyncs, renames, directory
//                             fsyncs: staged_outputs.h) and hands it back done.
//
// Which images share a forward depends only on the chunk's items and which of
// them are already done, never on timing, so every rank writes the same bytes
// for the same chunk. At most `decode_threads + encode_threads + 2 x batch`
// items are in memory at once (decoded, computing or waiting to be written).
//
// Stop: Drain() stops feeding the model; items already computed are written,
// and a chunk cut short commits what it wrote (so a later run skips those
// images) but is handed back as not reportable. A failure (a forward or a
// write failed, before_item or an injected fault returned an error) stops
// every stage at once and leaves temporary files as a crash would; status()
// says why.
//
// Ownership: borrows the model (it must outlive the pipeline; only the
// compute thread runs it). Thread safety: Submit, TakeDone, Wait, Drain and
// the accessors are for one owner thread; the stages run on the pipeline's
// own threads. The destructor stops the stages and joins them.
#ifndef TESSERA_WORKER_RUNTIME_INFER_PIPELINE_H_
#define TESSERA_WORKER_RUNTIME_INFER_PIPELINE_H_

#include <torch/torch.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "api/lease_protocol.h"
#include "common/status.h"
#include "worker/runtime/atomic_output.h"
#include "worker/runtime/inference_model.h"
#include "worker/runtime/staged_outputs.h"
#include "worker/runtime/tiling.h"

namespace tessera::worker {

struct InferPipelineOptions {
  std::string output_dir;                   // outputs go under it (infer_items.h OutputPathFor)
  std::string data_root;                    // relative items are read from here (DataRoot)
  int decode_threads = 2;                   // >= 1
  int encode_threads = 2;                   // >= 1
  int64_t batch = 8;                        // images per forward at most (>= 1; 1: one at a time)
  int64_t batch_pixels = int64_t{1} << 17;  // padded pixels per forward at most
  // Local tiling (images larger than a tile run alone through compute_one).
  std::optional<TileSpec> tiles;
  // Runs one prepared input that does not join a batch; empty: RunImage with
  // `tiles`.
  std::function<Result<torch::Tensor>(const torch::Tensor&)> compute_one;
  // false: every item goes through compute_one (a tiled layout across ranks).
  bool batches = true;
  // Test hooks: faults inside the writes, and a hook on the compute thread
  // before each item joins a forward (a non-OK Status fails the pipeline
  // there, like a crash).
  AtomicWriteFaults write_faults;
  std::function<Status(const std::string& item)> before_item;
  // The caller's stop flag (may be null): once set, the model takes no more
  // items, as after Drain().
  const std::atomic<bool>* stop = nullptr;
};

// A chunk the pipeline finished.
struct InferChunkDone {
  int64_t chunk = 0;
  int64_t written = 0;  // outputs committed
  int64_t skipped = 0;  // items whose output already existed
  int64_t failed = 0;   // unreadable items (error note written) or bad item paths
  // This chunk's share of the rank's time: from when the rank started on it
  // or finished the chunk before, whichever is later, to its commit.
  double seconds = 0;
  int64_t forwards = 0;  // forward passes (batches, or images run alone) its items took
  // false: cut short by a stop, or outputs lost to another writer (see
  // staged_outputs.h); the chunk must not be reported done.
  bool reportable = true;
};

class InferPipeline {
 public:
  // REQUIRES: options as documented; model outlives the pipeline.
  InferPipeline(InferenceModel& model, InferPipelineOptions options);
  ~InferPipeline();
  InferPipeline(const InferPipeline&) = delete;
  InferPipeline& operator=(const InferPipeline&) = delete;

  // Queues every item of `chunk` behind the items queued before. Stale
  // temporary files of the chunk's outputs are removed first.
  void Submit(const api::LeasedChunk& chunk);

  // The chunks finished since the last call, in the order they finished.
  std::vector<InferChunkDone> TakeDone();

  // Waits until a chunk is done, the pipeline fails or is idle, or `timeout`.
  void Wait(std::chrono::milliseconds timeout);

  // Stops feeding the model and waits until the stages are idle (see the
  // file comment); the chunks finished or cut short are in TakeDone.
  void Drain();

  // Chunks submitted and not yet handed back by TakeDone's producer.
  int64_t chunks_in_flight() const;
  // No chunk in flight.
  bool idle() const { return chunks_in_flight() == 0; }
  // OK, or the first failure of a stage.
  Status status() const;

 private:
  struct Chunk;
  struct Item;

  void DecodeLoop();
  void ComputeLoop();
  void EncodeLoop();
  void Decode(Item& item);
  // Compute thread: the next item in order once decoded; nullptr when
  // stopping, failed or shut down, and (same_chunk set) when the next item
  // is not of that chunk or not submitted yet.
  Item* PeekDecoded(const Chunk* same_chunk);
  // Whether a decoded item to run may share a forward at all.
  bool Batchable(const Item& item) const;
  // Whether `next` may join a forward of `count` items led by `first`.
  bool Joins(const Item& first, const Item& next, int64_t count) const;
  bool StoppingLocked() const;
  Status RunForward(std::vector<Item*>& group);
  // Marks an item finished (written/skipped/failed/dropped); the last item
  // of a chunk queues its commit. REQUIRES: mu_ held.
  void ResolveLocked(Item& item);
  void Commit(Chunk& chunk);
  void Fail(Status s);

  InferenceModel& model_;
  InferPipelineOptions options_;
  const int64_t window_;  // items in memory at most

  mutable std::mutex mu_;
  std::condition_variable cv_;  // any change of the state below
  Status status_;
  bool stopping_ = false;  // Drain: feed no more items to the model
  bool shutdown_ = false;  // destructor: threads exit
  int64_t next_seq_ = 0;   // sequence number of the next submitted item
  int64_t next_decode_ = 0;
  int64_t next_compute_ = 0;
  int64_t in_memory_ = 0;                           // items taken for decoding and not yet resolved
  std::map<int64_t, std::unique_ptr<Item>> items_;  // by sequence number, until resolved
  std::deque<Item*> encode_queue_;
  std::deque<Chunk*> commit_queue_;
  std::map<int64_t, std::unique_ptr<Chunk>> chunks_;  // by submission order
  int64_t next_chunk_ = 0;
  std::vector<InferChunkDone> done_;
  std::chrono::steady_clock::time_point last_done_;
  int64_t decoding_ = 0;         // items being decoded right now
  bool compute_parked_ = false;  // the compute thread takes no more items

  std::vector<std::thread> threads_;
};

}  // namespace tessera::worker

#endif  // TESSERA_WORKER_RUNTIME_INFER_PIPELINE_H_
