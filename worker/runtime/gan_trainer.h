// RunGanTraining: the "gan-pix2pix" training loop (data parallel only).
//
// Generator and discriminator (worker/model/gan.h) are trained in lockstep on
// every rank. Each step, on this rank's batch share (one micro-batch):
//   (a) discriminator: DiscriminatorLoss(D(gray, real), D(gray, fake.detach())),
//       scaled by share / global_batch, gradients all-reduced (SUM, GradReducer
//       over the world), optimizer step;
//   (b) generator: GeneratorLoss(D(gray, fake), fake, real, l1_weight), scaled
//       the same way, gradients all-reduced, optimizer step. The gradients this
//       backward leaves in the discriminator are discarded.
// A plan must have layout "data" (pipeline / hybrid: kInvalidArgument); its
// stages cover layers [0, G + D) where G and D are the two networks' layer
// counts (the generator's layers first). Without a plan: one process, or even
// data parallel over WORLD_SIZE, as for other models.
// Checkpoints hold both networks' parameters and buffers (layer names g_*,
// d_*), both optimizers' state and the CPU RNG state in one file written by
// rank 0. Progress lines are those of other models ("loss" = generator total
// loss, global mean) plus "d_loss" (discriminator loss, global mean).
//
// Thread safety: call once per process.
#ifndef TESSERA_WORKER_RUNTIME_GAN_TRAINER_H_
#define TESSERA_WORKER_RUNTIME_GAN_TRAINER_H_

#include <atomic>

#include "common/status.h"
#include "worker/runtime/dist_env.h"
#include "worker/runtime/trainer.h"

namespace tessera::worker {

inline constexpr char kGanModelName[] = "gan-pix2pix";

// Errors as RunTraining's (kInvalidArgument: exit code 2).
Result<TrainOutcome> RunGanTraining(const TrainOptions& options, const DistEnv& env,
                                    const std::atomic<bool>& stop_requested);

}  // namespace tessera::worker

#endif  // TESSERA_WORKER_RUNTIME_GAN_TRAINER_H_
