#include "worker/runtime/loss_scaler.h"

#include <vector>

namespace tessera::worker {

torch::Tensor UnscaleAndFlagNonFinite(const NamedTensors& params, double factor) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> finite;
  for (const auto& [n, p] : params) {
    if (!p.grad().defined()) continue;
    p.mutable_grad().mul_(factor);
    finite.push_back(torch::isfinite(p.grad()).all().reshape({1}));
  }
  if (finite.empty()) return torch::Tensor();
  // One reduction on the gradients' device; the caller reads it once.
  return torch::cat(finite).logical_not().any().to(torch::kFloat64).reshape({1});
}

Result<bool> LossScaler::UnscaleAndCheck(const NamedTensors& params, Collectives& world,
                                         torch::Device comm_device) {
  torch::Tensor bad = UnscaleAndFlagNonFinite(params, 1.0 / scale_);
  torch::Tensor flag =
      bad.defined() ? bad.to(comm_device)
                    : torch::zeros({1}, torch::TensorOptions(torch::kFloat64).device(comm_device));
  TESSERA_RETURN_IF_ERROR(world.AllReduceSum({flag}));
  if (flag.item<double>() > 0) {  // the one host sync of the step
    scale_ *= 0.5;
    good_steps_ = 0;
    return false;
  }
  if (++good_steps_ >= 2000) {
    scale_ *= 2.0;
    good_steps_ = 0;
  }
  return true;
}

}  // namespace tessera::worker
