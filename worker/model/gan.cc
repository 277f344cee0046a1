#include "worker/model/gan.h"

#include <exception>
#include <utility>
#include <vector>

#include "worker/model/conv_blocks.h"
#include "worker/model/reference_model.h"
#include "worker/model/unet.h"

namespace tessera::worker {
namespace {

std::vector<NamedLayer> BuildPatchGan(int64_t width) {
  const int64_t w = width;
  auto spec = [](int64_t in, int64_t out, int64_t stride, bool bn, Act act) {
    return ConvSpec{.in = in,
                    .out = out,
                    .kernel = 4,
                    .stride = stride,
                    .padding = 1,
                    .batch_norm = bn,
                    .act = act};
  };
  std::vector<NamedLayer> layers;
  layers.push_back({"d_conv1", std::make_shared<ConvLayer>(spec(4, w, 2, false, Act::kLeakyRelu))});
  layers.push_back(
      {"d_conv2", std::make_shared<ConvLayer>(spec(w, 2 * w, 2, true, Act::kLeakyRelu))});
  layers.push_back(
      {"d_conv3", std::make_shared<ConvLayer>(spec(2 * w, 4 * w, 2, true, Act::kLeakyRelu))});
  layers.push_back(
      {"d_conv4", std::make_shared<ConvLayer>(spec(4 * w, 8 * w, 1, true, Act::kLeakyRelu))});
  layers.push_back({"d_out", std::make_shared<ConvLayer>(spec(8 * w, 1, 1, false, Act::kNone))});
  return layers;
}

}  // namespace

Result<Gan> MakeGan(const std::string& name, const ModelConfig& config) {
  if (name != "gan-pix2pix") {
    return InvalidArgument("unknown GAN '" + name + "' (known: gan-pix2pix)", "model");
  }
  TESSERA_RETURN_IF_ERROR(ValidateModelConfig(config));
  try {
    torch::manual_seed(config.seed);
    Gan gan;
    UnetOptions g{
        .in_channels = 1, .out_channels = 3, .width = config.width, .depth = 3, .prefix = "g_"};
    gan.generator = std::make_shared<ReferenceModel>(
        "gan-pix2pix-generator", TaskKind::kGan, BuildUnetLayers(g), LossKind::kL1, gan.l1_weight);
    gan.discriminator =
        std::make_shared<ReferenceModel>("gan-pix2pix-discriminator", TaskKind::kGan,
                                         BuildPatchGan(config.width), LossKind::kBceWithLogits);
    return gan;
  } catch (const std::exception& e) {
    return Internal("building " + name + ": " + e.what());
  }
}

torch::Tensor DiscriminatorInput(const torch::Tensor& gray, const torch::Tensor& rgb) {
  return torch::cat({gray, rgb}, 1);
}

GeneratorLossParts GeneratorLoss(const torch::Tensor& fake_logits, const torch::Tensor& fake,
                                 const torch::Tensor& real, double l1_weight) {
  GeneratorLossParts parts;
  parts.adversarial =
      torch::binary_cross_entropy_with_logits(fake_logits, torch::ones_like(fake_logits));
  parts.l1 = torch::l1_loss(fake, real);
  parts.total = parts.adversarial + l1_weight * parts.l1;
  return parts;
}

torch::Tensor DiscriminatorLoss(const torch::Tensor& real_logits,
                                const torch::Tensor& fake_logits) {
  const torch::Tensor real =
      torch::binary_cross_entropy_with_logits(real_logits, torch::ones_like(real_logits));
  const torch::Tensor fake =
      torch::binary_cross_entropy_with_logits(fake_logits, torch::zeros_like(fake_logits));
  return 0.5 * (real + fake);
}

torch::Tensor Generate(const Gan& gan, const torch::Tensor& gray) {
  LayeredModel& g = *gan.generator;
  return g.Forward(Activation{gray, {}}, 0, g.num_layers()).main;
}

torch::Tensor Discriminate(const Gan& gan, const torch::Tensor& gray, const torch::Tensor& rgb) {
  LayeredModel& d = *gan.discriminator;
  return d.Forward(Activation{DiscriminatorInput(gray, rgb), {}}, 0, d.num_layers()).main;
}

torch::Tensor DiscriminatorStepLoss(const Gan& gan, const torch::Tensor& gray,
                                    const torch::Tensor& real, const torch::Tensor& fake) {
  const torch::Tensor real_logits = Discriminate(gan, gray, real);
  const torch::Tensor fake_logits = Discriminate(gan, gray, fake.detach());
  return DiscriminatorLoss(real_logits, fake_logits);
}

GeneratorLossParts GeneratorStepLoss(const Gan& gan, const torch::Tensor& gray,
                                     const torch::Tensor& real, const torch::Tensor& fake) {
  return GeneratorLoss(Discriminate(gan, gray, fake), fake, real, gan.l1_weight);
}

}  // namespace tessera::worker
