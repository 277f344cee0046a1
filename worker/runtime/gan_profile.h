// ProfileGan: the planner's profile of "gan-pix2pix" (`tessera-worker profile
// --model gan-pix2pix`).
//
// The GAN trains data parallel only (gan_trainer.h), one micro-batch per share,
// so the planner needs what one whole training step costs, not what each layer
// costs on its own. The profile lists the generator's layers then the
// discriminator's (G + D layers, the ranges a data plan's stage covers) with each
// layer's parameter, output bytes, FLOPs and batch norms from ProfileModel, and:
//   fwd_ms / bwd_ms   the measured forward / backward part of whole training steps
//                     (forward: generator, discriminator on real and on the
//                     detached fake, discriminator on the fake for the generator
//                     loss; backward: both backward passes, both optimizer steps),
//                     median over `repeats` after a warm-up step, shared among the
//                     layers in proportion to their own ProfileModel times, so the
//                     sum over the layers is the step;
//   activation_bytes_per_sample
//                     the step's peak over what was allocated before it (counting
//                     allocator: activations of all passes, backward working
//                     memory, the target images) divided by batch, shared among
//                     the layers in proportion to what each keeps on its own;
//                     backward_transient_bytes_per_sample is 0 (inside the above);
//   batch_norms       the discriminator's x 3 (it runs three times a step).
// Top level as ProfileModel's ("model": "gan-pix2pix", "device": "cpu", "in_shape":
// the generator's [1, H, W]) plus "data_parallel_only": true, "max_micro_batches": 1
// and "step": {"fwd_ms", "bwd_ms", "activation_bytes_per_sample",
// "generator_layers", "discriminator_layers"}.
//
// Thread safety: as ProfileModel (one thread, no concurrent torch work).
// Errors: kInvalidArgument for batch < 1, repeats < 1 or a bad model config.
#ifndef TESSERA_WORKER_RUNTIME_GAN_PROFILE_H_
#define TESSERA_WORKER_RUNTIME_GAN_PROFILE_H_

#include <cstdint>
#include <nlohmann/json.hpp>

#include "common/status.h"
#include "worker/runtime/optimizer.h"

namespace tessera::worker {

struct GanProfileOptions {
  int64_t batch = 8;
  int64_t image_size = 64;
  int64_t width = 16;
  int repeats = 3;
  OptimizerConfig optimizer;  // the trainer's default
};

Result<nlohmann::json> ProfileGan(const GanProfileOptions& options);

}  // namespace tessera::worker

#endif  // TESSERA_WORKER_RUNTIME_GAN_PROFILE_H_
