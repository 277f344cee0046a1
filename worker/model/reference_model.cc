#include "worker/model/reference_model.h"

#include "common/enum_names.h"

namespace tessera::worker {

constexpr EnumName<LossKind> kLossKindNames[] = {
    {LossKind::kL1, "l1"},
    {LossKind::kMse, "mse"},
    {LossKind::kCrossEntropy, "cross_entropy"},
    {LossKind::kBceWithLogits, "bce_with_logits"},
};
static_assert(IsValidNameTable(kLossKindNames));

std::string_view LossKindName(LossKind kind) { return NameOf(kLossKindNames, kind); }

Status ValidateModelConfig(const ModelConfig& config) {
  if (config.width < 1 || config.width > 1024) {
    return InvalidArgument("width must be in [1, 1024]", "width");
  }
  if (config.image_size < 8 || config.image_size % 8 != 0) {
    return InvalidArgument("image_size must be a positive multiple of 8", "image_size");
  }
  if (config.num_classes < 1) {
    return InvalidArgument("num_classes must be at least 1", "num_classes");
  }
  return Status::Ok();
}

torch::Tensor ComputeLoss(LossKind kind, const torch::Tensor& out, const torch::Tensor& target,
                          double weight) {
  torch::Tensor loss;
  switch (kind) {
    case LossKind::kL1:
      loss = torch::l1_loss(out, target);
      break;
    case LossKind::kMse:
      loss = torch::mse_loss(out, target);
      break;
    case LossKind::kCrossEntropy:
      loss = torch::nn::functional::cross_entropy(out, target.to(torch::kLong).reshape({-1}));
      break;
    case LossKind::kBceWithLogits:
      loss = torch::binary_cross_entropy_with_logits(out, target.to(out.dtype()).expand_as(out));
      break;
  }
  return weight == 1.0 ? loss : loss * weight;
}

}  // namespace tessera::worker
