#include "worker/runtime/loss_scaler.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace tessera::worker {

torch::Tensor UnscaleAndFlagNonFinite(const NamedTensors& params, double factor) {
  torch::NoGradGuard no_grad;
  // torch.amp.GradScaler's kernel: one multi-tensor pass over a device's
  // gradients (a loop on the CPU) that flags a non-finite value and multiplies
  // each by `factor`, instead of three kernels a parameter. It takes the
  // gradients of one device (a rank's are), with a float32 flag and factor
  // there; a gradient of another dtype gets a kernel of its own inside it.
  std::vector<std::pair<torch::Device, std::vector<torch::Tensor>>> by_device;
  for (const auto& [n, p] : params) {
    if (!p.grad().defined()) continue;
    const torch::Device device = p.grad().device();
    auto it = std::find_if(by_device.begin(), by_device.end(),
                           [&](const auto& group) { return group.first == device; });
    if (it == by_device.end()) it = by_device.insert(by_device.end(), {device, {}});
    it->second.push_back(p.mutable_grad());
  }
  if (by_device.empty()) return torch::Tensor();
  torch::Tensor flag;
  for (auto& [device, grads] : by_device) {
    const auto options = torch::TensorOptions(torch::kFloat32).device(device);
    torch::Tensor found = torch::zeros({1}, options);
    at::_amp_foreach_non_finite_check_and_unscale_(grads, found, torch::full({1}, factor, options));
    found = found.to(by_device.front().first);
    flag = flag.defined() ? flag.add_(found) : found;
  }
  return flag.clamp_max_(1).to(torch::kFloat64);
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
