// LayeredModel: a network written as an ordered list of named layers, so the
// planner can cut it anywhere (pipeline stages own contiguous ranges) and a
// checkpoint can name every tensor by "<layer name>.<parameter name>".
//
// Between layers flows an Activation: the main tensor plus any tensors kept
// for later layers (a U-Net's skip connections ride along in `carry`), so a
// cut between any two layers is valid and a pipeline stage sends the whole
// Activation to the next stage.
//
// Ownership: the model owns its layers (shared_ptr because torch modules are
// reference-counted). Thread safety: like torch::nn::Module, not thread-safe.
#ifndef TESSERA_WORKER_MODEL_LAYERED_MODEL_H_
#define TESSERA_WORKER_MODEL_LAYERED_MODEL_H_

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"

namespace tessera::worker {

struct Activation {
  torch::Tensor main;                // [N, C, H, W] or [N, F]
  std::vector<torch::Tensor> carry;  // tensors kept for later layers, in push order
};

// Synchronizes batch-norm statistics across data-parallel replicas
// (SyncBatchNorm behaviour). The runtime installs one when the model runs
// data parallel; without one, batch norm uses local statistics.
class BatchNormSync {
 public:
  virtual ~BatchNormSync() = default;
  // In place: sum over replicas of per-channel sum, sum of squares and count.
  virtual void AllReduceSum(std::vector<torch::Tensor>& tensors) = 0;
};

// One layer. Implementations register their parameters/buffers with
// torch::nn::Module as usual.
class Layer : public torch::nn::Module {
 public:
  virtual Activation Forward(Activation in) = 0;
  // Estimated forward FLOPs per sample for a given input shape (C, H, W of
  // the main tensor); used by the profile command when no measurement exists.
  virtual double ForwardFlopsPerSample(const std::vector<int64_t>& in_shape) const { return 0.0; }
  void SetBatchNormSync(std::shared_ptr<BatchNormSync> sync) { bn_sync_ = std::move(sync); }

 protected:
  std::shared_ptr<BatchNormSync> bn_sync_;
};

struct NamedLayer {
  std::string name;  // unique within the model, e.g. "enc1", "dec2", "head"
  std::shared_ptr<Layer> layer;
};

// What the loss compares against and how: supervised image-to-image
// (colorize, denoise) or classification.
enum class TaskKind { kImageToImage, kClassification, kGan };

struct ModelConfig {
  int64_t width = 16;        // base channel count
  int64_t image_size = 64;   // square crops fed to the model
  int64_t num_classes = 10;  // classifier only
  uint64_t seed = 1;         // parameter initialisation seed
};

class LayeredModel {
 public:
  LayeredModel(std::string name, TaskKind task, std::vector<NamedLayer> layers)
      : name_(std::move(name)), task_(task), layers_(std::move(layers)) {}
  virtual ~LayeredModel() = default;

  const std::string& name() const { return name_; }
  TaskKind task() const { return task_; }
  size_t num_layers() const { return layers_.size(); }
  const NamedLayer& layer(size_t i) const { return layers_.at(i); }

  // Runs layers [begin, end). REQUIRES: begin <= end <= num_layers().
  Activation Forward(Activation in, size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) in = layers_[i].layer->Forward(std::move(in));
    return in;
  }

  // "<layer>.<param>" -> tensor, for layers [begin, end), in a stable order.
  std::vector<std::pair<std::string, torch::Tensor>> NamedParameters(size_t begin,
                                                                     size_t end) const {
    std::vector<std::pair<std::string, torch::Tensor>> out;
    for (size_t i = begin; i < end; ++i) {
      for (const auto& p : layers_[i].layer->named_parameters(/*recurse=*/true)) {
        out.emplace_back(layers_[i].name + "." + p.key(), p.value());
      }
    }
    return out;
  }
  // Same for buffers (batch-norm running statistics).
  std::vector<std::pair<std::string, torch::Tensor>> NamedBuffers(size_t begin, size_t end) const {
    std::vector<std::pair<std::string, torch::Tensor>> out;
    for (size_t i = begin; i < end; ++i) {
      for (const auto& b : layers_[i].layer->named_buffers(/*recurse=*/true)) {
        out.emplace_back(layers_[i].name + "." + b.key(), b.value());
      }
    }
    return out;
  }

  void SetTraining(bool on) {
    for (auto& l : layers_) l.layer->train(on);
  }
  void SetBatchNormSync(const std::shared_ptr<BatchNormSync>& sync) {
    for (auto& l : layers_) l.layer->SetBatchNormSync(sync);
  }

  // Mean loss over the batch of the final activation against the target.
  virtual torch::Tensor Loss(const Activation& out, const torch::Tensor& target) const = 0;

 private:
  std::string name_;
  TaskKind task_;
  std::vector<NamedLayer> layers_;
};

// Builds a reference model by name: "colorize-unet", "denoiser-dncnn",
// "classifier-resnet" ("gan-pix2pix" is built by MakeGan in gan.h).
// kInvalidArgument for an unknown name.
Result<std::shared_ptr<LayeredModel>> MakeModel(const std::string& name, const ModelConfig& config);

}  // namespace tessera::worker

#endif  // TESSERA_WORKER_MODEL_LAYERED_MODEL_H_
