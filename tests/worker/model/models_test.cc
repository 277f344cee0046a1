#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "worker/model/gan.h"
#include "worker/model/layered_model.h"
#include "worker/model/reference_model.h"

namespace tessera::worker {
namespace {

ModelConfig SmallConfig(uint64_t seed = 7) {
  ModelConfig c;
  c.width = 8;
  c.image_size = 32;
  c.num_classes = 5;
  c.seed = seed;
  return c;
}

struct ModelCase {
  std::string name;
  std::vector<int64_t> in_shape;   // per sample
  std::vector<int64_t> out_shape;  // per sample
  size_t num_layers;
  TaskKind task;
};

const std::vector<ModelCase>& Cases() {
  static const std::vector<ModelCase> cases = {
      {"colorize-unet", {1, 32, 32}, {2, 32, 32}, 8, TaskKind::kImageToImage},
      {"denoiser-dncnn", {3, 32, 32}, {3, 32, 32}, 10, TaskKind::kImageToImage},
      {"classifier-resnet", {3, 32, 32}, {5}, 8, TaskKind::kClassification},
  };
  return cases;
}

std::shared_ptr<LayeredModel> Build(const std::string& name, const ModelConfig& config) {
  auto m = MakeModel(name, config);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? *m : nullptr;
}

torch::Tensor Input(int64_t batch, const std::vector<int64_t>& shape, uint64_t seed = 3) {
  std::vector<int64_t> s = {batch};
  s.insert(s.end(), shape.begin(), shape.end());
  torch::manual_seed(seed);
  return torch::randn(s);
}

TEST(MakeModelTest, ForwardShapesAndLoss) {
  for (const auto& c : Cases()) {
    SCOPED_TRACE(c.name);
    auto model = Build(c.name, SmallConfig());
    ASSERT_NE(model, nullptr);
    EXPECT_EQ(model->name(), c.name);
    EXPECT_EQ(model->task(), c.task);
    EXPECT_EQ(model->num_layers(), c.num_layers);
    Activation out = model->Forward({Input(4, c.in_shape), {}}, 0, model->num_layers());
    std::vector<int64_t> want = {4};
    want.insert(want.end(), c.out_shape.begin(), c.out_shape.end());
    EXPECT_EQ(out.main.sizes().vec(), want);
    EXPECT_TRUE(out.carry.empty()) << "every pushed tensor is popped";
    torch::Tensor target = c.task == TaskKind::kClassification
                               ? torch::tensor({0, 1, 2, 4}, torch::kLong)
                               : torch::zeros_like(out.main);
    torch::Tensor loss = model->Loss(out, target);
    EXPECT_EQ(loss.dim(), 0);
    EXPECT_TRUE(std::isfinite(loss.item<double>()));
    EXPECT_GT(loss.item<double>(), 0.0);
  }
}

TEST(MakeModelTest, ColorizerOutputIsBoundedAbAndDenoiserIsResidual) {
  auto unet = Build("colorize-unet", SmallConfig());
  Activation out = unet->Forward({Input(2, {1, 32, 32}), {}}, 0, unet->num_layers());
  EXPECT_LE(out.main.abs().max().item<float>(), 1.0f);  // tanh head

  // A DnCNN whose noise branch is zero returns its input unchanged.
  auto dn = Build("denoiser-dncnn", SmallConfig());
  {
    torch::NoGradGuard g;
    for (auto& [name, p] : dn->NamedParameters(dn->num_layers() - 1, dn->num_layers())) {
      p.zero_();
    }
  }
  torch::Tensor x = Input(2, {3, 32, 32});
  Activation y = dn->Forward({x, {}}, 0, dn->num_layers());
  EXPECT_TRUE(torch::allclose(y.main, x));
}

TEST(MakeModelTest, RejectsUnknownNameAndBadConfig) {
  auto unknown = MakeModel("resnet-9000", SmallConfig());
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(unknown.status().field(), "model");

  struct Bad {
    ModelConfig config;
    std::string field;
  };
  ModelConfig w0 = SmallConfig(), odd = SmallConfig(), k0 = SmallConfig();
  w0.width = 0;
  odd.image_size = 30;
  k0.num_classes = 0;
  for (const Bad& b : {Bad{w0, "width"}, Bad{odd, "image_size"}, Bad{k0, "num_classes"}}) {
    auto m = MakeModel("colorize-unet", b.config);
    ASSERT_FALSE(m.ok());
    EXPECT_EQ(m.status().field(), b.field);
  }
  auto gan = MakeGan("gan-unknown", SmallConfig());
  EXPECT_FALSE(gan.ok());
}

// The second part of the cut runs on a different instance (same seed), so any
// state that crossed the cut outside the Activation would be missing.
TEST(MakeModelTest, CutAtEveryBoundaryMatchesUncutForward) {
  for (const auto& c : Cases()) {
    auto a = Build(c.name, SmallConfig());
    auto b = Build(c.name, SmallConfig());
    a->SetTraining(false);
    b->SetTraining(false);
    torch::NoGradGuard no_grad;
    const torch::Tensor x = Input(3, c.in_shape);
    const torch::Tensor whole = a->Forward({x, {}}, 0, a->num_layers()).main;
    for (size_t k = 0; k <= a->num_layers(); ++k) {
      SCOPED_TRACE(c.name + " cut at " + std::to_string(k));
      Activation first = a->Forward({x, {}}, 0, k);
      // "Send" the Activation: fresh copies, as a pipeline stage receives them.
      Activation sent{first.main.clone(), {}};
      for (const auto& t : first.carry) sent.carry.push_back(t.clone());
      Activation second = b->Forward(std::move(sent), k, b->num_layers());
      EXPECT_TRUE(torch::allclose(second.main, whole, 1e-5, 1e-6));
    }
  }
}

TEST(MakeModelTest, UnetCarriesSkipsAcrossCuts) {
  auto m = Build("colorize-unet", SmallConfig());
  torch::NoGradGuard no_grad;
  Activation mid = m->Forward({Input(1, {1, 32, 32}), {}}, 0, 4);  // after the bottleneck
  ASSERT_EQ(mid.carry.size(), 3u);
  EXPECT_EQ(mid.carry[0].size(1), 8);   // enc0
  EXPECT_EQ(mid.carry[1].size(1), 16);  // down1
  EXPECT_EQ(mid.carry[2].size(1), 32);  // down2
  // Without its skip the decoder cannot run.
  Activation missing{mid.main, {}};
  EXPECT_THROW(m->Forward(std::move(missing), 4, 5), std::exception);
}

TEST(MakeModelTest, NamedParametersAreUniqueStableAndSeeded) {
  for (const auto& c : Cases()) {
    SCOPED_TRACE(c.name);
    auto a = Build(c.name, SmallConfig(7));
    auto b = Build(c.name, SmallConfig(7));
    auto other = Build(c.name, SmallConfig(8));
    const auto pa = a->NamedParameters(0, a->num_layers());
    const auto pb = b->NamedParameters(0, b->num_layers());
    const auto po = other->NamedParameters(0, other->num_layers());
    ASSERT_EQ(pa.size(), pb.size());
    ASSERT_FALSE(pa.empty());
    std::set<std::string> names;
    bool any_differs = false;
    for (size_t i = 0; i < pa.size(); ++i) {
      EXPECT_TRUE(names.insert(pa[i].first).second) << "duplicate " << pa[i].first;
      EXPECT_EQ(pa[i].first, pb[i].first);
      EXPECT_TRUE(torch::equal(pa[i].second, pb[i].second)) << pa[i].first;
      if (!torch::equal(pa[i].second, po[i].second)) any_differs = true;
    }
    EXPECT_TRUE(any_differs) << "seed must change the initialisation";
    // Every name starts with its layer's name; ranges partition the list.
    size_t total = 0;
    std::set<std::string> layer_names;
    for (size_t l = 0; l < a->num_layers(); ++l) {
      EXPECT_TRUE(layer_names.insert(a->layer(l).name).second);
      for (const auto& [name, t] : a->NamedParameters(l, l + 1)) {
        EXPECT_EQ(name.rfind(a->layer(l).name + ".", 0), 0u) << name;
        ++total;
      }
    }
    EXPECT_EQ(total, pa.size());
    // Batch-norm buffers are named too.
    bool has_running = false;
    for (const auto& [name, t] : a->NamedBuffers(0, a->num_layers())) {
      if (name.find("running_mean") != std::string::npos) has_running = true;
    }
    EXPECT_TRUE(has_running);
  }
}

// Ten Adam steps on the parameters of `net` lower `loss`.
void ExpectAdamStepsLowerLoss(LayeredModel& net, const std::function<torch::Tensor()>& loss) {
  std::vector<torch::Tensor> params;
  for (const auto& [n, p] : net.NamedParameters(0, net.num_layers())) params.push_back(p);
  torch::optim::Adam opt(params, torch::optim::AdamOptions(2e-3));
  const double first = loss().item<double>();
  for (int i = 0; i < 10; ++i) {
    opt.zero_grad();
    loss().backward();
    opt.step();
  }
  EXPECT_LT(loss().item<double>(), first);
}

TEST(GanTest, ShapesNamesAndLosses) {
  auto gan = MakeGan("gan-pix2pix", SmallConfig());
  ASSERT_TRUE(gan.ok()) << gan.status().ToString();
  std::set<std::string> names;
  for (auto* m : {gan->generator.get(), gan->discriminator.get()}) {
    for (const auto& [name, t] : m->NamedParameters(0, m->num_layers())) {
      EXPECT_TRUE(names.insert(name).second) << "duplicate across G and D: " << name;
    }
  }
  const torch::Tensor gray = torch::rand({2, 1, 32, 32}) * 2 - 1;
  const torch::Tensor real = torch::rand({2, 3, 32, 32}) * 2 - 1;
  Activation fake = gan->generator->Forward({gray, {}}, 0, gan->generator->num_layers());
  ASSERT_EQ(fake.main.sizes().vec(), (std::vector<int64_t>{2, 3, 32, 32}));
  const torch::Tensor fake_logits = Discriminate(*gan, gray, fake.main);
  EXPECT_EQ(fake_logits.sizes().vec(), (std::vector<int64_t>{2, 1, 2, 2}));
  GeneratorLossParts g = GeneratorLoss(fake_logits, fake.main, real, gan->l1_weight);
  EXPECT_NEAR(g.total.item<double>(), g.adversarial.item<double>() + 100.0 * g.l1.item<double>(),
              1e-3);
  EXPECT_NEAR(gan->generator->Loss(fake, real).item<double>(), 100.0 * g.l1.item<double>(), 1e-3);

  // A few discriminator steps on fixed real/fake pairs lower its loss.
  ExpectAdamStepsLowerLoss(*gan->discriminator,
                           [&] { return DiscriminatorStepLoss(*gan, gray, real, fake.main); });

  // A few generator steps against the fixed discriminator lower the pix2pix
  // objective (adversarial + lambda * L1).
  ExpectAdamStepsLowerLoss(*gan->generator, [&] {
    return GeneratorStepLoss(*gan, gray, real, Generate(*gan, gray)).total;
  });
}

}  // namespace
}  // namespace tessera::worker
