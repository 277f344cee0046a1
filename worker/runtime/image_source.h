// Adapters from worker/model + worker/data to the runtime: image batches by
// global sample id, the per-sample input shape of a reference model, and the
// sample-image generator. Built only when both libraries are present.
//
// Sample id -> (epoch = id / n, position = id % n) -> image
// EpochPermutation(seed, epoch, n)[position], loaded with the dataset's
// deterministic per-(seed, epoch, image) augmentation, so every layout and
// every resume sees the same samples for the same step.
#ifndef TESSERA_WORKER_RUNTIME_IMAGE_SOURCE_H_
#define TESSERA_WORKER_RUNTIME_IMAGE_SOURCE_H_

#include <memory>
#include <string>
#include <vector>

#include "api/image_convention.h"
#include "common/status.h"
#include "worker/model/layered_model.h"
#include "worker/runtime/data_source.h"

namespace tessera::worker {

// Each batch's images are decoded and prepared by `loader_threads` threads
// (ImageFolderDataset::GetBatch); batches do not depend on that number.
// kInvalidArgument for a model without an image task or a bad folder.
Result<std::unique_ptr<BatchSource>> MakeImageSource(const std::string& dir,
                                                     const std::string& model_name,
                                                     int64_t image_size, uint64_t seed,
                                                     int loader_threads = 1);

// Training pairs for an exported module of image convention `c` (input,
// output and range set: api/image_convention.h), by what it maps:
//   l -> ab             colorization pairs (colorize-unet's)
//   gray -> rgb         gray image -> the colour image (gan-pix2pix's pairs)
//   rgb -> rgb, gray -> gray   denoising: the image plus N(0, 0.1^2) -> the image
//   rgb|gray -> scores  classification by the file name's pattern
// with image values mapped to `range` (gray -> rgb from [-1, 1], the rest
// from [0, 1]). kInvalidArgument naming "image.output" for another pairing.
Result<std::unique_ptr<BatchSource>> MakeConventionSource(const std::string& dir,
                                                          const api::ImageConvention& c,
                                                          int64_t image_size, uint64_t seed,
                                                          int loader_threads = 1);
// Per-sample input shape of such a module: {channels, S, S}.
std::vector<int64_t> ConventionInputShape(const api::ImageConvention& c, int64_t image_size);
// Per-sample input shape of a reference model, e.g. {1, S, S} for colorize-unet.
Result<std::vector<int64_t>> ModelInputShape(const std::string& model_name, int64_t image_size);

// Classes of the generated sample images (classifier num_classes).
int64_t SampleImageClasses();

Status WriteSampleImages(const std::string& dir, int64_t count, int64_t size, uint64_t seed);

}  // namespace tessera::worker

#endif  // TESSERA_WORKER_RUNTIME_IMAGE_SOURCE_H_
