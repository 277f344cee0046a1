// ReferenceModel: a LayeredModel whose loss is one of a few standard
// criteria. The reference models (MakeModel, MakeGan) are all of this type.
//
// Thread safety: like torch::nn::Module, not thread-safe.
#ifndef TESSERA_WORKER_MODEL_REFERENCE_MODEL_H_
#define TESSERA_WORKER_MODEL_REFERENCE_MODEL_H_

#include <torch/torch.h>

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "worker/model/layered_model.h"

namespace tessera::worker {

enum class LossKind {
  kL1,            // mean |out - target|
  kMse,           // mean (out - target)^2
  kCrossEntropy,  // out: logits [N, K]; target: class indices [N] (int64)
  kBceWithLogits  // out: logits; target: same shape, or broadcastable (e.g. [N,1,1,1] labels)
};

std::string_view LossKindName(LossKind kind);

// Checks a ModelConfig: width in [1, 1024], image_size positive and a
// multiple of 8 (three 2x downsamplings), num_classes >= 1.
// kInvalidArgument naming the field otherwise.
Status ValidateModelConfig(const ModelConfig& config);

// Loss of `out` against `target`, mean over the batch; `weight` scales it.
torch::Tensor ComputeLoss(LossKind kind, const torch::Tensor& out, const torch::Tensor& target,
                          double weight = 1.0);

class ReferenceModel : public LayeredModel {
 public:
  ReferenceModel(std::string name, TaskKind task, std::vector<NamedLayer> layers, LossKind loss,
                 double loss_weight = 1.0)
      : LayeredModel(std::move(name), task, std::move(layers)),
        loss_(loss),
        loss_weight_(loss_weight) {}

  torch::Tensor Loss(const Activation& out, const torch::Tensor& target) const override {
    return ComputeLoss(loss_, out.main, target, loss_weight_);
  }
  LossKind loss_kind() const { return loss_; }
  double loss_weight() const { return loss_weight_; }

 private:
  LossKind loss_;
  double loss_weight_;
};

}  // namespace tessera::worker

#endif  // TESSERA_WORKER_MODEL_REFERENCE_MODEL_H_
