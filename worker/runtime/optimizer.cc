#include "worker/runtime/optimizer.h"

#include <cmath>

namespace tessera::worker {

Result<NamedOptimizer> NamedOptimizer::Make(
    const OptimizerConfig& config, std::vector<std::pair<std::string, torch::Tensor>> params) {
  if (config.kind != "sgd" && config.kind != "adam") {
    return InvalidArgument("must be \"sgd\" or \"adam\", got \"" + config.kind + "\"", "optimizer");
  }
  NamedOptimizer opt;
  opt.config_ = config;
  opt.params_ = std::move(params);
  return opt;
}

void NamedOptimizer::Step(double lr) {
  // Steps: (1) the parameters with a gradient, with their state (made on first
  // use); (2) the update as torch.optim's foreach implementation (its default on
  // a GPU) writes it: each operation once over every tensor, a multi-tensor
  // kernel on a GPU instead of one kernel a parameter (a CPU loops over them,
  // as the per-parameter update did). The arithmetic is the per-parameter one's.
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> params, grads;
  std::vector<const std::string*> names;
  for (auto& [name, p] : params_) {
    if (!p.grad().defined()) continue;
    params.push_back(p);
    grads.push_back(p.grad());
    names.push_back(&name);
  }
  if (params.empty()) return;
  if (config_.weight_decay != 0) {
    grads = at::_foreach_add(grads, at::_foreach_mul(params, config_.weight_decay));
  }
  if (config_.kind == "sgd") {
    if (config_.momentum != 0) {
      // A new buffer starts as the gradient; the others decay and add it.
      std::vector<torch::Tensor> old_bufs, old_grads;
      for (size_t i = 0; i < params.size(); ++i) {
        torch::Tensor& buf = state_[*names[i] + "#momentum"];
        if (!buf.defined()) {
          buf = grads[i].clone();
        } else {
          old_bufs.push_back(buf);
          old_grads.push_back(grads[i]);
        }
        grads[i] = buf;
      }
      if (!old_bufs.empty()) {
        at::_foreach_mul_(old_bufs, config_.momentum);
        at::_foreach_add_(old_bufs, old_grads);
      }
    }
    at::_foreach_add_(params, grads, -lr);
    return;
  }
  std::vector<torch::Tensor> exp_avg, exp_avg_sq;
  std::vector<at::Scalar> bias2_sqrt, step_size;
  for (size_t i = 0; i < params.size(); ++i) {
    torch::Tensor& m = state_[*names[i] + "#exp_avg"];
    torch::Tensor& v = state_[*names[i] + "#exp_avg_sq"];
    torch::Tensor& t = state_[*names[i] + "#step"];
    if (!m.defined()) {
      m = torch::zeros_like(params[i]);
      v = torch::zeros_like(params[i]);
      t = torch::zeros({1}, torch::kFloat64);
    }
    t.add_(1);  // on the host (LoadState keeps it there): no device sync
    const double step = t.item<double>();
    exp_avg.push_back(m);
    exp_avg_sq.push_back(v);
    bias2_sqrt.emplace_back(std::sqrt(1 - std::pow(config_.beta2, step)));
    step_size.emplace_back(-lr / (1 - std::pow(config_.beta1, step)));
  }
  at::_foreach_mul_(exp_avg, config_.beta1);
  at::_foreach_add_(exp_avg, grads, 1 - config_.beta1);
  at::_foreach_mul_(exp_avg_sq, config_.beta2);
  at::_foreach_addcmul_(exp_avg_sq, grads, grads, 1 - config_.beta2);
  std::vector<torch::Tensor> denom = at::_foreach_sqrt(exp_avg_sq);
  at::_foreach_div_(denom, bias2_sqrt);
  at::_foreach_add_(denom, config_.eps);
  at::_foreach_addcdiv_(params, exp_avg, denom, step_size);
}

void NamedOptimizer::ZeroGrad() {
  // Dropped, not zeroed (torch.optim's set_to_none): the next backward hands its
  // gradient over instead of adding it to zeros, and the data-parallel reducer copies
  // it into its bucket without first materialising the sum (grad_reducer.h).
  for (auto& [name, p] : params_) p.mutable_grad() = torch::Tensor();
}

std::vector<std::pair<std::string, torch::Tensor>> NamedOptimizer::StateTensors() const {
  return {state_.begin(), state_.end()};
}

void NamedOptimizer::LoadState(const std::map<std::string, torch::Tensor>& tensors) {
  state_.clear();
  for (const auto& [name, p] : params_) {
    const std::string prefix = name + "#";
    for (auto it = tensors.lower_bound(prefix); it != tensors.end(); ++it) {
      if (it->first.compare(0, prefix.size(), prefix) != 0) break;
      // The Adam step count stays on the host (Step reads it every step).
      const bool host = it->first.ends_with("#step");
      state_[it->first] = it->second.clone().to(host ? torch::Device(torch::kCPU) : p.device());
    }
  }
}

}  // namespace tessera::worker
