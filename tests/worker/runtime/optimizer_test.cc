// NamedOptimizer: its multi-tensor update equals torch.optim's per-parameter
// formulas, its state survives a save and load; gradients are dropped, not zeroed,
// after a step (the per-layer step profile has its own test,
// optimizer_profile_test.cc).
#include "worker/runtime/optimizer.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace tessera::worker {
namespace {

std::vector<std::pair<std::string, torch::Tensor>> Params() {
  return {{"w", torch::ones({4, 3}).requires_grad_(true)},
          {"b", torch::zeros({3}).requires_grad_(true)}};
}

TEST(NamedOptimizerTest, ZeroGradDropsTheGradientsSoTheNextBackwardHandsItsOwnOver) {
  for (const char* kind : {"sgd", "adam"}) {
    SCOPED_TRACE(kind);
    auto params = Params();
    OptimizerConfig config;
    config.kind = kind;
    auto opt = NamedOptimizer::Make(config, params);
    ASSERT_TRUE(opt.ok()) << opt.status().ToString();
    for (int step = 0; step < 2; ++step) {
      torch::Tensor x = torch::ones({2, 4});
      (x.matmul(params[0].second) + params[1].second).sum().backward();
      ASSERT_TRUE(params[0].second.grad().defined());
      // The first backward after a ZeroGrad sees no earlier gradient to add to.
      EXPECT_TRUE(torch::allclose(params[0].second.grad(), torch::full({4, 3}, 2.0)));
      opt->Step(0.1);
      opt->ZeroGrad();
      EXPECT_FALSE(params[0].second.grad().defined());
      EXPECT_FALSE(params[1].second.grad().defined());
    }
    // A parameter without a gradient is left alone by a step.
    const torch::Tensor before = params[1].second.detach().clone();
    opt->Step(0.1);
    EXPECT_TRUE(torch::equal(before, params[1].second.detach()));
  }
}

// The update of one parameter as torch.optim.SGD / Adam (foreach=False) write
// it, with its state in `state` (keys as NamedOptimizer's slots).
void ReferenceStep(const OptimizerConfig& c, double lr, torch::Tensor p, torch::Tensor g,
                   std::map<std::string, torch::Tensor>& state) {
  torch::NoGradGuard no_grad;
  if (c.weight_decay != 0) g = g + c.weight_decay * p;
  if (c.kind == "sgd") {
    if (c.momentum != 0) {
      torch::Tensor& buf = state["momentum"];
      buf = buf.defined() ? buf.mul_(c.momentum).add_(g) : g.clone();
      g = buf;
    }
    p.add_(g, -lr);
    return;
  }
  torch::Tensor& m = state["exp_avg"];
  torch::Tensor& v = state["exp_avg_sq"];
  if (!m.defined()) {
    m = torch::zeros_like(p);
    v = torch::zeros_like(p);
  }
  const double step =
      (state["step_count"] = torch::tensor(
           state["step_count"].defined() ? state["step_count"].item<double>() + 1 : 1.0))
          .item<double>();
  m.mul_(c.beta1).add_(g, 1 - c.beta1);
  v.mul_(c.beta2).addcmul_(g, g, 1 - c.beta2);
  const double bc1 = 1 - std::pow(c.beta1, step), bc2 = 1 - std::pow(c.beta2, step);
  p.addcdiv_(m, (v.sqrt() / std::sqrt(bc2)).add_(c.eps), -lr / bc1);
}

TEST(NamedOptimizerTest, TheMultiTensorUpdateEqualsThePerParameterFormulas) {
  struct Case {
    const char* name;
    OptimizerConfig config;
  };
  OptimizerConfig sgd, sgd_plain, sgd_decay, adam, adam_decay;
  sgd_plain.momentum = 0;
  sgd_decay.weight_decay = 1e-2;
  adam.kind = adam_decay.kind = "adam";
  adam_decay.weight_decay = 1e-2;
  const Case cases[] = {{"sgd momentum", sgd},
                        {"sgd", sgd_plain},
                        {"sgd momentum, weight decay", sgd_decay},
                        {"adam", adam},
                        {"adam, weight decay", adam_decay}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    torch::manual_seed(7);
    std::vector<std::pair<std::string, torch::Tensor>> params = {
        {"a", torch::randn({5, 3})}, {"b", torch::randn({3})}, {"c", torch::randn({2, 2, 2})}};
    std::vector<torch::Tensor> reference;
    for (const auto& [n, p] : params) reference.push_back(p.clone());
    std::map<std::string, std::map<std::string, torch::Tensor>> reference_state;
    auto opt = NamedOptimizer::Make(c.config, params);
    ASSERT_TRUE(opt.ok()) << opt.status().ToString();
    for (int step = 0; step < 4; ++step) {
      for (size_t i = 0; i < params.size(); ++i) {
        // "b" has no gradient on the second step: it keeps its value and state.
        if (params[i].first == "b" && step == 1) continue;
        torch::Tensor g = torch::randn(params[i].second.sizes());
        params[i].second.mutable_grad() = g.clone();
        ReferenceStep(c.config, 0.05, reference[i], g, reference_state[params[i].first]);
      }
      opt->Step(0.05);
      opt->ZeroGrad();
      for (size_t i = 0; i < params.size(); ++i) {
        // The same operations on the same values: equal to the bit on the CPU.
        EXPECT_TRUE(torch::equal(params[i].second, reference[i]))
            << params[i].first << " after step " << step << ":\n"
            << params[i].second << "\nexpected\n"
            << reference[i];
      }
    }
  }
}

TEST(NamedOptimizerTest, StateLoadedIntoAFreshOptimizerContinuesTheSameUpdates) {
  for (const char* kind : {"sgd", "adam"}) {
    SCOPED_TRACE(kind);
    OptimizerConfig config;
    config.kind = kind;
    torch::manual_seed(3);
    std::vector<std::pair<std::string, torch::Tensor>> a = {{"w", torch::randn({4, 3})}};
    std::vector<std::pair<std::string, torch::Tensor>> b = {{"w", a[0].second.clone()}};
    auto first = NamedOptimizer::Make(config, a);
    ASSERT_TRUE(first.ok());
    std::vector<torch::Tensor> grads;
    for (int i = 0; i < 4; ++i) grads.push_back(torch::randn({4, 3}));
    auto step = [&](NamedOptimizer& opt, torch::Tensor p, const torch::Tensor& g) {
      p.mutable_grad() = g.clone();
      opt.Step(0.1);
      opt.ZeroGrad();
    };
    for (int i = 0; i < 2; ++i) step(*first, a[0].second, grads[i]);
    // b: the same two steps, then its state goes through a save and load.
    auto second = NamedOptimizer::Make(config, b);
    ASSERT_TRUE(second.ok());
    for (int i = 0; i < 2; ++i) step(*second, b[0].second, grads[i]);
    std::map<std::string, torch::Tensor> saved;
    for (const auto& [name, t] : second->StateTensors()) saved[name] = t.clone();
    auto resumed = NamedOptimizer::Make(config, b);
    ASSERT_TRUE(resumed.ok());
    resumed->LoadState(saved);
    for (const auto& [name, t] : resumed->StateTensors()) {
      if (name.ends_with("#step")) {
        EXPECT_TRUE(t.device().is_cpu()) << name;
      }
    }
    for (int i = 2; i < 4; ++i) {
      step(*first, a[0].second, grads[i]);
      step(*resumed, b[0].second, grads[i]);
    }
    EXPECT_TRUE(torch::equal(a[0].second, b[0].second));
  }
}

}  // namespace
}  // namespace tessera::worker
