// InferenceModel: an image model for archive inference (`tessera-worker
// infer`): a reference model loaded from a checkpoint, or a module the lab
// exported (exported_model.h); how one image or a batch of same-size images
// runs through it (whole, or in tiles: tiling.h).
//
// Images in and out follow the model's convention (api/image_convention.h).
// The reference models' (value ranges as in worker/model/README.md):
//   colorize-unet      input l, output ab: written as an RGB PNG (L + ab)
//   denoiser-dncnn     input rgb, output rgb in [0, 1]; a gray source image
//                      gives a gray PNG
//   gan-pix2pix        input gray, output rgb, both in [-1, 1]
//   classifier-resnet  output scores: JSON {"item","model","class","scores":
//                      [softmax]} (+"label" when the classes are the
//                      sample-image patterns)
// An exported module's convention is its spec's, then its tessera.json's,
// then what probe forwards find (image_model_probe.h), which also measure the
// device memory a forward takes per pixel.
//
// Every forward is one compute segment of the rank's device: on an emulated
// device (speed < 1) it lasts its CPU time over the speed
// (worker/runtime/emulated_device.h), measured on the calling thread.
//
// Thread safety: Forward / ForwardBatch / RunImage / RunBatch must not run
// concurrently on one model (like torch::nn::Module), and a model's forwards
// must all run on one thread (the emulated device's clock is that thread's).
// Prepare and WriteOutput only read the model: any thread may call them
// while another thread runs forwards.
#ifndef TESSERA_WORKER_RUNTIME_INFERENCE_MODEL_H_
#define TESSERA_WORKER_RUNTIME_INFERENCE_MODEL_H_

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/image_convention.h"
#include "common/status.h"
#include "worker/data/image.h"
#include "worker/model/layered_model.h"
#include "worker/runtime/emulated_device.h"
#include "worker/runtime/exported_model.h"
#include "worker/runtime/tiling.h"

namespace tessera::worker {

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
  // A module the lab exported (exported_model.h) at `path`, with what the
  // job's spec states of its images; the rest is read from the module or
  // probed. Errors: ExportedModule::Load's and ProbeImageModel's.
  static Result<std::unique_ptr<InferenceModel>> LoadExported(const std::string& path,
                                                              const api::ImageConvention& stated,
                                                              const std::string& device,
                                                              double device_speed);

  const std::string& name() const { return name_; }
  bool spatial() const { return spatial_; }                   // false for the classifier
  const TileGeometry& geometry() const { return geometry_; }  // align 1, halo 0 if !spatial
  int64_t checkpoint_step() const { return checkpoint_step_; }
  int64_t input_channels() const { return input_channels_; }  // channels of Prepare's result
  std::string output_extension() const { return spatial_ ? ".png" : ".json"; }
  // Every member set (range, align, halo).
  const api::ImageConvention& convention() const { return convention_; }
  // Device bytes a forward takes per input pixel (exported modules on a
  // device whose memory is measured), else -1.
  int64_t bytes_per_pixel() const { return bytes_per_pixel_; }
  // False when the probe found the receptive field wider than it looked
  // (tiles may then differ from the whole image near their seams).
  bool halo_bounded() const { return halo_bounded_; }
  // How the model was loaded, for the log: "checkpoint <dir>/step-N" or
  // "<format> module <path>".
  const std::string& source() const { return source_; }

  // Image -> model input [C, H, W] (not padded). kInternal on a torch error.
  Result<torch::Tensor> Prepare(const Image& image) const;
  // One forward pass of [C, h, w]: [Co, h, w], or [K] logits for the
  // classifier. REQUIRES: h, w multiples of geometry().align_px.
  Result<torch::Tensor> Forward(const torch::Tensor& chw);
  // One forward pass of a batch [B, C, h, w] of same-size inputs: [B, Co, h, w]
  // (or [B, K]), one compute segment. REQUIRES: as Forward, B >= 1. In eval
  // mode every sample is computed on its own statistics, so an image's output
  // does not depend on the others in the batch (up to the float rounding of
  // the kernels a batch size selects: see worker/runtime/README.md).
  Result<torch::Tensor> ForwardBatch(const torch::Tensor& bchw);
  // Writes the output file for `input` (from Prepare) and `output`
  // (RunImage) to `path` (a temporary path: StagedOutputs::Stage).
  // source_channels: channels of the image read (1 gray, 3 RGB).
  Status WriteOutput(const std::string& path, const std::string& item, int64_t source_channels,
                     const torch::Tensor& input, const torch::Tensor& output) const;

 private:
  InferenceModel() = default;
  // One forward of a batch already on the device.
  Result<torch::Tensor> RawForward(const torch::Tensor& bchw);

  std::string name_;
  std::shared_ptr<LayeredModel> net_;         // a reference model, or
  std::unique_ptr<ExportedModule> exported_;  // an exported one
  api::ImageConvention convention_;
  bool gray_source_stays_gray_ = false;  // denoiser-dncnn: gray in, gray out
  int64_t input_channels_ = 3;
  int64_t bytes_per_pixel_ = -1;
  bool halo_bounded_ = true;
  std::string source_;
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

// True when RunImage would run `input` whole, in one forward.
bool RunsWhole(const InferenceModel& model, const torch::Tensor& input,
               const std::optional<TileSpec>& tiles);

// Runs same-size prepared inputs that each run whole (RunsWhole) in one
// forward: the outputs, in order, each as RunImage gives it.
// REQUIRES: inputs non-empty, all of one shape, RunsWhole for each.
Result<std::vector<torch::Tensor>> RunBatch(InferenceModel& model,
                                            const std::vector<torch::Tensor>& inputs);

}  // namespace tessera::worker

#endif  // TESSERA_WORKER_RUNTIME_INFERENCE_MODEL_H_
