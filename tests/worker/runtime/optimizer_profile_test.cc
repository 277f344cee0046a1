// The step-end profile: one optimizer step and a data-parallel replica's gradient
// copies timed per layer, added to ProfileModel's output, the model left as it was.
#include "worker/runtime/optimizer_profile.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "worker/model/profile.h"
#include "worker/runtime/tiny_models.h"
#include "worker/runtime/trainer.h"

namespace tessera::worker {
namespace {

TEST(OptimizerProfileTest, EveryLayerGetsItsStepAndCopyTimesAndTheModelIsUnchanged) {
  ModelConfig mc;
  mc.width = 64;
  auto model = BuildModel("tiny-skip", mc);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  LayeredModel& m = **model;
  auto profile = ProfileModel(m, 4, {kTinyInputFeatures}, 2);
  ASSERT_TRUE(profile.ok()) << profile.status().ToString();
  std::vector<torch::Tensor> before;
  for (const auto& [name, p] : m.NamedParameters(0, m.num_layers())) {
    before.push_back(p.detach().clone());
  }
  for (const char* kind : {"sgd", "adam"}) {
    SCOPED_TRACE(kind);
    OptimizerConfig config;
    config.kind = kind;
    nlohmann::json j = *profile;
    ASSERT_TRUE(AddOptimizerCosts(m, config, 3, &j).ok());
    EXPECT_EQ(j["optimizer"], kind);
    for (size_t i = 0; i < m.num_layers(); ++i) {
      const nlohmann::json& l = j["layers"][i];
      SCOPED_TRACE(l.dump());
      ASSERT_TRUE(l.contains("opt_ms"));
      ASSERT_TRUE(l.contains("grad_copy_ms"));
      EXPECT_GE(l["opt_ms"].get<double>(), 0.0);
      EXPECT_GE(l["grad_copy_ms"].get<double>(), 0.0);
      if (m.NamedParameters(i, i + 1).empty()) {
        EXPECT_EQ(l["opt_ms"].get<double>(), 0.0) << "no parameters, no step";
        EXPECT_EQ(l["grad_copy_ms"].get<double>(), 0.0);
      }
    }
  }
  // Learning rate 0: parameters as they were; gradients cleared.
  size_t k = 0;
  for (const auto& [name, p] : m.NamedParameters(0, m.num_layers())) {
    EXPECT_TRUE(torch::equal(before[k++], p.detach())) << name;
    EXPECT_FALSE(p.grad().defined()) << name;
  }
}

TEST(OptimizerProfileTest, RefusesAProfileOfOtherLayers) {
  auto model = BuildModel("tiny-skip", ModelConfig{});
  ASSERT_TRUE(model.ok());
  nlohmann::json empty = {{"layers", nlohmann::json::array()}};
  auto st = AddOptimizerCosts(**model, OptimizerConfig{}, 1, &empty);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.field(), "layers");
  auto profile = ProfileModel(**model, 2, {kTinyInputFeatures}, 1);
  ASSERT_TRUE(profile.ok());
  (*profile)["layers"][0]["name"] = "other";
  EXPECT_EQ(AddOptimizerCosts(**model, OptimizerConfig{}, 1, &*profile).field(), "layers");
  EXPECT_EQ(AddOptimizerCosts(**model, OptimizerConfig{}, 0, &*profile).field(), "repeats");
}

}  // namespace
}  // namespace tessera::worker
