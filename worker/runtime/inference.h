// Inference: `tessera-worker infer`, archive-scale inference of the image
// models with chunk leases, atomic outputs and tiling.
//
// Per item (an image path from a leased chunk):
//   1. the output path is OutputPathFor(...); if it exists the item is done
//      and skipped (outputs appear only complete, see atomic_output.h);
//   2. stale temporary files of the output are removed;
//   3. the image is read (worker/data), turned into the model input, padded
//      to the model's alignment (edge replicate), run whole or in tiles
//      (tiling.h) in eval mode without autograd, cropped back;
//   4. the output is written atomically; a stale "<output>.error.txt" is
//      removed. An unreadable image gets "<output>.error.txt" (atomically)
//      with the reason and counts as failed; the job goes on, a rerun retries it.
// A chunk is reported done (images processed, seconds) only after all its
// items are on disk; a crash leaves the chunk unreported, its lease
// expires, and whoever processes it again skips the items already written.
//
// Outputs by model (value ranges as in worker/model/README.md):
//   colorize-unet      L of the image -> ab; written as an RGB PNG (L + ab)
//   denoiser-dncnn     the denoised image, PNG (gray input -> gray output)
//   gan-pix2pix        the generator's RGB output, PNG
//   classifier-resnet  JSON {"item","model","class","scores":[softmax]} (+"label"
//                      when the classes are the sample-image patterns)
// Output name: <output>/<item path>, with ".png" / ".json" appended unless
// the item already ends so ("a/1.png" -> "a/1.png", "a/1.jpg" ->
// "a/1.jpg.png"), so different inputs never share an output.
//
// Layouts (TESSERA_PLAN "layout"):
//   any but "tiled"  every rank leases chunks on its own; images larger than
//                    --max-tile-px are tiled locally.
//   "tiled"          rank 0 leases; for each image it broadcasts the model
//                    input over c10d; every rank runs its share of the tiles
//                    (contiguous runs proportional to the replicas' `batch`,
//                    i.e. device speed) and sends the owned parts to rank 0,
//                    which assembles, writes and reports. Tile side from the
//                    plan's "tiling": {"tile_px", "overlap_px"} (overlap raised
//                    to 2 x halo if smaller), else --max-tile-px.
// Every output is byte-equal whichever rank computed it: images are processed
// one at a time, tiles one at a time, with the same thread count.
//
// Thread safety: RunInference is called once per process; InferenceModel is
// not thread-safe (like torch::nn::Module).
#ifndef TESSERA_WORKER_RUNTIME_INFERENCE_H_
#define TESSERA_WORKER_RUNTIME_INFERENCE_H_

#include <torch/torch.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "worker/data/image.h"
#include "worker/model/layered_model.h"
#include "worker/runtime/atomic_output.h"
#include "worker/runtime/chunk_source.h"
#include "worker/runtime/dist_env.h"
#include "worker/runtime/emulated_device.h"
#include "worker/runtime/tiling.h"

namespace tessera::worker {

// ---- the model ----

class InferenceModel {
 public:
  // The newest complete checkpoint in `checkpoint_dir` (see checkpoint.h),
  // all layers. width 0: read from the checkpoint's tensors. Errors are
  // kInvalidArgument (exit code 2): unknown model, no such directory, no
  // complete checkpoint, a checkpoint of another model, shapes that do not
  // match. device_speed < 1 makes each forward a compute segment of an emulated
  // device (worker/runtime/emulated_device.h).
  static Result<std::unique_ptr<InferenceModel>> Load(const std::string& model_name,
                                                      const std::string& checkpoint_dir,
                                                      int64_t width, const std::string& device,
                                                      double device_speed);
  // A model already built (tests). REQUIRES: net built by MakeModel, or the
  // generator of MakeGan for "gan-pix2pix".
  static Result<std::unique_ptr<InferenceModel>> FromNet(const std::string& model_name,
                                                         std::shared_ptr<LayeredModel> net);

  const std::string& name() const { return name_; }
  bool spatial() const { return spatial_; }                   // false for the classifier
  const TileGeometry& geometry() const { return geometry_; }  // align 1, halo 0 if !spatial
  int64_t checkpoint_step() const { return checkpoint_step_; }
  std::string output_extension() const { return spatial_ ? ".png" : ".json"; }

  // Image -> model input [C, H, W] (not padded). kInternal on a torch error.
  Result<torch::Tensor> Prepare(const Image& image) const;
  // One forward pass of [C, h, w]: [Co, h, w], or [K] logits for the
  // classifier. REQUIRES: h, w multiples of geometry().align_px.
  Result<torch::Tensor> Forward(const torch::Tensor& chw);
  // Writes the output file for `input` (from Prepare) and `output`
  // (RunImage) to `path` (a temporary path: use WriteAtomically).
  // source_channels: channels of the image read (1 gray, 3 RGB).
  Status WriteOutput(const std::string& path, const std::string& item, int64_t source_channels,
                     const torch::Tensor& input, const torch::Tensor& output) const;

 private:
  InferenceModel() = default;
  std::string name_;
  std::shared_ptr<LayeredModel> net_;
  bool spatial_ = true;
  TileGeometry geometry_;
  int64_t checkpoint_step_ = 0;
  torch::Device device_{torch::kCPU};
  EmulatedDevice emulated_;
};

// Runs one prepared input [C, H, W]: pads to the alignment, runs the whole
// image when `tiles` is nullopt or the padded image fits one tile, else
// every tile of the grid in order, assembles the owned parts, crops to H x W.
// The classifier always runs whole.
Result<torch::Tensor> RunImage(InferenceModel& model, const torch::Tensor& input,
                               const std::optional<TileSpec>& tiles);

// ---- items and outputs ----

// Folder `data` (recursive, *.png|*.jpg|*.jpeg in any case, sorted, '/'
// separated paths relative to it; hidden files and anything under
// `exclude_dir` skipped) or a list file (one path per line, blank lines and
// '#' comments skipped, kept as written). kInvalidArgument (field "data")
// when `data` is missing or unreadable, or holds no image.
Result<std::vector<std::string>> ListInputItems(const std::string& data,
                                                const std::string& exclude_dir = {});

// The folder relative items are resolved against: `data` itself when it is
// a folder, else the list file's folder.
std::string DataRoot(const std::string& data);

// Output path of `item` (see the file comment). Absolute items under
// `data_root` map as relative ones; other absolute items keep their whole
// path under `output_dir`. kInvalidArgument for an item that would leave
// `output_dir` ("../x") or is empty.
Result<std::string> OutputPathFor(const std::string& output_dir, const std::string& data_root,
                                  const std::string& item, const std::string& extension);

// ---- the rank plan of an inference attempt ----

struct InferPlan {
  std::string layout = "data";
  std::vector<int64_t> rank_weights;  // by rank: the batch of the replica it serves (0: none)
  std::optional<TileSpec> tiling;     // from "tiling": {"tile_px", "overlap_px"}
};
// Reads layout, replicas[].batch, replicas[].stages[].rank and tiling.
// kInvalidArgument naming the field for malformed JSON or a rank outside
// [0, world_size).
Result<InferPlan> ParseInferPlan(const std::string& json_text, int world_size);

// ---- the loop ----

struct InferOptions {
  std::string model;
  std::string data;         // folder or list file
  std::string output;       // folder
  std::string checkpoint;   // checkpoint directory (step-N/ folders)
  int64_t width = 0;        // 0: from the checkpoint
  int64_t max_tile_px = 0;  // 0: tile only when a tiled plan says so
  int threads = 1;          // intra-op threads (the same on every rank: byte-equal outputs)
  int64_t max_chunks = 1;   // chunks asked for per lease call
  // No controller: the ranks share out the items of --data (rank r takes
  // chunks r, r + W, ...; with a tiled plan rank 0 takes all).
  bool local = false;
  int64_t local_chunk_size = 16;
  std::string controller_url;  // TESSERA_CONTROLLER_URL
  std::string lease_token;     // TESSERA_LEASE_TOKEN
  // Test hooks: faults inside atomic writes, and a hook before each item is
  // processed (a non-OK Status aborts the run there, like a crash).
  AtomicWriteFaults write_faults;
  std::function<Status(const std::string& item)> before_item;
};

struct InferOutcome {
  int64_t written = 0;   // outputs this rank wrote (tiled: rank 0 counts all)
  int64_t skipped = 0;   // items whose output already existed
  int64_t failed = 0;    // unreadable items (error note written)
  int64_t chunks = 0;    // chunks this rank reported done
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
