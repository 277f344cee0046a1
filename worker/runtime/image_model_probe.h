// ImageModelProbe: what an exported image model (exported_model.h) needs,
// found by running it: the convention members its spec and its tessera.json
// leave unset, and the device memory a forward takes per input pixel.
//
// The steps (each a few forwards of small random images, in `range`):
//  1. Channels in: the stated input's (rgb 3, gray and l 1), else 3, then 1:
//     the first a `side` x `side` image (128 unless told: a training job's crop
//     size, for a classifier whose linear head fixes it) runs through. Neither: "does not take
//     images", with the module's messages.
//  2. Out: [1, C, side, side] is an image (C 3 rgb, 1 gray, 2 ab); [1, K]
//     scores; another size, rank or channel count is a shape mismatch. A
//     stated output must agree. An unset input with an ab output is l; with
//     another 1-channel output, gray.
//  3. Align (images only, unless stated): the least a in 1, 2, 4, ... 128 for
//     which a (128 + a)-pixel side runs and keeps its size.
//  4. Halo (images only, unless stated): one pixel in the middle of a random
//     image is changed (by ten times the range); the farthest output pixel that changes is the
//     radius. Sides 96, 192, 384 (rounded up to align) until the change stays inside; if it never
//     does, the radius is half the largest side and `halo_bounded` is false (tiles then differ from
//     whole images near seams).
//  5. Memory (only where the device's memory is measured: device_memory.h):
//     the peak a forward adds over what is in use, at two sides (128, 256,
//     rounded up to align), gives bytes per input pixel.
// Errors: kInvalidArgument naming "model-file" (what the module does) or
// "image.<member>" (a stated member the module contradicts);
// kResourceExhausted when even a probe forward runs out of memory.
//
// Thread safety: runs `forward` on the calling thread only.
#ifndef TESSERA_WORKER_RUNTIME_IMAGE_MODEL_PROBE_H_
#define TESSERA_WORKER_RUNTIME_IMAGE_MODEL_PROBE_H_

#include <torch/torch.h>

#include <cstdint>
#include <functional>

#include "api/image_convention.h"
#include "common/status.h"

namespace tessera::worker {

// One forward of a host tensor [B, C, H, W]: the output as a host float tensor.
using HostForward = std::function<Result<torch::Tensor>(const torch::Tensor&)>;

struct ProbedImageModel {
  api::ImageConvention convention;  // every member set (range, align_px >= 1, halo_px >= 0)
  bool spatial = true;              // false for scores
  int64_t input_channels = 3;
  bool halo_bounded = true;
  int64_t bytes_per_pixel = -1;  // -1: the device's memory is not measured
};

// REQUIRES: side >= 1.
Result<ProbedImageModel> ProbeImageModel(const HostForward& forward,
                                         const api::ImageConvention& stated,
                                         const torch::Device& device, int64_t side = 128);

// Pixels one forward may hold within `free_bytes` at `bytes_per_pixel`,
// keeping a fifth free for what the probe did not see. -1 when either is
// unknown (< 0).
int64_t PixelBudget(int64_t free_bytes, int64_t bytes_per_pixel);

}  // namespace tessera::worker

#endif  // TESSERA_WORKER_RUNTIME_IMAGE_MODEL_PROBE_H_
