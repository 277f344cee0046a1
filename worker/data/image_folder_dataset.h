// ImageFolderDataset: the images of a folder (or of a list file) turned into
// training pairs for the reference models.
//
// Source: a directory (its *.png, *.jpg, *.jpeg files, not recursive, sorted
// by file name; ids are positions in that order, so stable for a given
// folder) or a text file with one image path per line (blank lines and lines
// starting with '#' skipped; relative paths are relative to the list file).
//
// Per sample, with an Rng seeded from (seed, epoch, id) (see rng.h), so the
// same sample of the same epoch is identical on every rank and every run:
// scale up if smaller than image_size, crop image_size x image_size (random
// offset when augmenting, centred otherwise), flip horizontally with
// probability 1/2 when augmenting, then by task:
//   kColorize  input L [1,S,S] (l_norm), target ab [2,S,S] (ab_norm); see color.h
//   kDenoise   target clean [C,S,S] in [0,1]; input = clean + N(0, sigma^2)
//   kClassify  input [C,S,S] in [0,1]; target int64 scalar label
//   kGan       input gray [1,S,S] in [-1,1]; target RGB [3,S,S] in [-1,1]
// C is options.channels (3: RGB, 1: gray; gray sources are replicated).
// Classification labels come from the file name: "...-<pattern>.<ext>" with
// a pattern of SamplePatternNames() (what GenerateSampleImages writes).
//
// Thread safety: after Open, all const methods may be called concurrently.
#ifndef TESSERA_WORKER_DATA_IMAGE_FOLDER_DATASET_H_
#define TESSERA_WORKER_DATA_IMAGE_FOLDER_DATASET_H_

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "worker/data/image.h"
#include "worker/data/prefetch_loader.h"

namespace tessera::worker {

enum class DataTask { kColorize, kDenoise, kClassify, kGan };

struct DatasetOptions {
  DataTask task = DataTask::kColorize;
  int64_t image_size = 64;
  uint64_t seed = 1;
  bool augment = true;       // random crop + flip; false: centre crop, no flip
  double noise_sigma = 0.1;  // kDenoise, on [0,1] pixel values
  int64_t channels = 3;      // kDenoise / kClassify: 3 (RGB) or 1 (gray)
  // kColorize, an image at least image_size on both sides: Lab straight from its
  // 8-bit pixels (the same values; no intermediate float images). false: always
  // through float tensors, the reference the tests compare with.
  bool direct_colorize = true;
};

struct Example {
  torch::Tensor input;
  torch::Tensor target;
  int64_t id = -1;
};

struct Batch {
  torch::Tensor input;   // [N, ...]
  torch::Tensor target;  // [N, ...] (int64 [N] for kClassify)
  std::vector<int64_t> ids;
};

// An RGB or gray Image as float [C,H,W] in [0,1].
torch::Tensor ImageToTensor(const Image& image);
// float [C,H,W] (C = 1 or 3) in [0,1] -> Image (clamped, rounded).
// kInvalidArgument for another shape.
Result<Image> TensorToImage(const torch::Tensor& chw);
// Colorizer output back to RGB: l_norm [1,H,W] and ab_norm [2,H,W] ->
// float [3,H,W] in [0,1].
torch::Tensor LabNormToRgb(const torch::Tensor& l_norm, const torch::Tensor& ab_norm);

class ImageFolderDataset {
 public:
  // kNotFound: source missing; kInvalidArgument: no images, bad options, a
  // list entry that does not exist, or (kClassify) a file name without a class.
  static Result<std::shared_ptr<const ImageFolderDataset>> Open(const std::string& source,
                                                                const DatasetOptions& options);

  int64_t size() const { return static_cast<int64_t>(paths_.size()); }
  const std::string& path(int64_t id) const { return paths_.at(static_cast<size_t>(id)); }
  // kClassify: class index; otherwise -1.
  int64_t label(int64_t id) const { return labels_.at(static_cast<size_t>(id)); }
  const DatasetOptions& options() const { return options_; }

  // kInvalidArgument for an id out of range or an undecodable image (naming its path).
  Result<Example> Get(int64_t id, int64_t epoch) const;
  // Stacked examples in the order of `ids`, prepared by `threads` threads (the
  // caller's and threads - 1 started for the call, each a contiguous run of
  // ids); the result does not depend on `threads`. The first failing id's
  // error, in batch order. REQUIRES: ids non-empty.
  Result<Batch> GetBatch(const std::vector<int64_t>& ids, int64_t epoch, int threads = 1) const;

 private:
  ImageFolderDataset(std::vector<std::string> paths, std::vector<int64_t> labels,
                     DatasetOptions options)
      : paths_(std::move(paths)), labels_(std::move(labels)), options_(options) {}

  std::vector<std::string> paths_;
  std::vector<int64_t> labels_;
  DatasetOptions options_;
};

// A loader that prepares GetBatch(batches[i], epoch) for i = 0.. in the
// background (see prefetch_loader.h). Typical `batches`: this rank's
// ShardForRank slice for each step of the epoch.
std::unique_ptr<PrefetchLoader<Batch>> MakeBatchLoader(
    std::shared_ptr<const ImageFolderDataset> dataset, std::vector<std::vector<int64_t>> batches,
    int64_t epoch, int threads, int64_t capacity);

}  // namespace tessera::worker

#endif  // TESSERA_WORKER_DATA_IMAGE_FOLDER_DATASET_H_
