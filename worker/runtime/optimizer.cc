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
  torch::NoGradGuard no_grad;
  for (auto& [name, p] : params_) {
    if (!p.grad().defined()) continue;
    torch::Tensor g = p.grad();
    if (config_.weight_decay != 0) g = g + config_.weight_decay * p;
    if (config_.kind == "sgd") {
      if (config_.momentum != 0) {
        auto it = state_.find(name + "#momentum");
        if (it == state_.end()) {
          it = state_.emplace(name + "#momentum", g.clone()).first;
        } else {
          it->second.mul_(config_.momentum).add_(g);
        }
        g = it->second;
      }
      p.add_(g, -lr);
    } else {
      auto& m = state_[name + "#exp_avg"];
      auto& v = state_[name + "#exp_avg_sq"];
      auto& t = state_[name + "#step"];
      if (!m.defined()) {
        m = torch::zeros_like(p);
        v = torch::zeros_like(p);
        t = torch::zeros({1}, torch::kFloat64);
      }
      t.add_(1);
      const double step = t.item<double>();
      m.mul_(config_.beta1).add_(g, 1 - config_.beta1);
      v.mul_(config_.beta2).addcmul_(g, g, 1 - config_.beta2);
      const double bc1 = 1 - std::pow(config_.beta1, step);
      const double bc2 = 1 - std::pow(config_.beta2, step);
      auto denom = (v.sqrt() / std::sqrt(bc2)).add_(config_.eps);
      p.addcdiv_(m, denom, -lr / bc1);
    }
  }
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
      state_[it->first] = it->second.clone().to(p.device());
    }
  }
}

}  // namespace tessera::worker
