// "gan-pix2pix": conditional GAN for colorization (pix2pix), as two
// LayeredModels so each can be pipelined or replicated like any other model.
//
//   generator      grayscale [N,1,H,W] in [-1,1] -> RGB [N,3,H,W] in [-1,1].
//                  A small U-Net (see unet.h), layer names prefixed "g_".
//   discriminator  PatchGAN: DiscriminatorInput(gray, rgb) [N,4,H,W] ->
//                  patch logits [N,1,H/8-2,W/8-2]; layer names prefixed "d_".
//
// Layer names of both models are disjoint, so one checkpoint can hold both.
// generator->Loss(out, real) is only the reconstruction term l1_weight * L1;
// discriminator->Loss(logits, label) is BCE with logits against a label
// tensor that broadcasts (e.g. torch::ones({N,1,1,1})).
// The full objectives are GeneratorLoss and DiscriminatorLoss below.
#ifndef TESSERA_WORKER_MODEL_GAN_H_
#define TESSERA_WORKER_MODEL_GAN_H_

#include <torch/torch.h>

#include <memory>
#include <string>

#include "common/status.h"
#include "worker/model/layered_model.h"

namespace tessera::worker {

struct Gan {
  std::shared_ptr<LayeredModel> generator;
  std::shared_ptr<LayeredModel> discriminator;
  double l1_weight = 100.0;  // lambda of the pix2pix objective
};

// name must be "gan-pix2pix"; kInvalidArgument otherwise or for a bad config.
// Deterministic: torch::manual_seed(config.seed) before construction.
Result<Gan> MakeGan(const std::string& name, const ModelConfig& config);

// Concatenates the condition and an image along channels: [N,1+3,H,W].
torch::Tensor DiscriminatorInput(const torch::Tensor& gray, const torch::Tensor& rgb);

struct GeneratorLossParts {
  torch::Tensor adversarial;  // BCE(D(gray, fake), real label)
  torch::Tensor l1;           // mean |fake - real|
  torch::Tensor total;        // adversarial + l1_weight * l1
};

// fake_logits: the discriminator's logits for the generated image (with the
// graph through the generator). fake, real: [N,3,H,W].
GeneratorLossParts GeneratorLoss(const torch::Tensor& fake_logits, const torch::Tensor& fake,
                                 const torch::Tensor& real, double l1_weight);

// 0.5 * (BCE(real_logits, 1) + BCE(fake_logits, 0)); fake_logits must come
// from a detached fake so the generator gets no gradient.
torch::Tensor DiscriminatorLoss(const torch::Tensor& real_logits, const torch::Tensor& fake_logits);

// The networks of `gan` run whole (every layer), and the two objectives of
// one pix2pix training step on them, as the trainer takes it
// (worker/runtime/gan_trainer.h) and the profile measures it:
//   Generate:              the generator's RGB image for `gray`.
//   Discriminate:          the discriminator's patch logits for `rgb` (real
//                          or generated) under the condition `gray`.
//   DiscriminatorStepLoss: DiscriminatorLoss(D(gray, real),
//                          D(gray, fake.detach())), real first (batch norm
//                          in training mode sees them in this order).
//   GeneratorStepLoss:     GeneratorLoss(D(gray, fake), fake, real,
//                          gan.l1_weight).
torch::Tensor Generate(const Gan& gan, const torch::Tensor& gray);
torch::Tensor Discriminate(const Gan& gan, const torch::Tensor& gray, const torch::Tensor& rgb);
torch::Tensor DiscriminatorStepLoss(const Gan& gan, const torch::Tensor& gray,
                                    const torch::Tensor& real, const torch::Tensor& fake);
GeneratorLossParts GeneratorStepLoss(const Gan& gan, const torch::Tensor& gray,
                                     const torch::Tensor& real, const torch::Tensor& fake);

}  // namespace tessera::worker

#endif  // TESSERA_WORKER_MODEL_GAN_H_
