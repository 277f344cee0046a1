// NamedOptimizer: gradients are dropped, not zeroed, after a step (the per-layer
// step profile has its own test, optimizer_profile_test.cc).
#include "worker/runtime/optimizer.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

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

}  // namespace
}  // namespace tessera::worker
