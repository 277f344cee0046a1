// Step-end profile: how long one optimizer step takes over each layer's
// parameters ("opt_ms"), and how long a data-parallel replica spends copying the
// layer's gradients into a flat all-reduce bucket and the reduced sums back
// ("grad_copy_ms", as worker/runtime/grad_reducer.h does), added per layer to a
// model profile (ProfileModel, worker/model/profile.h), so the planner predicts a
// stage's step end from measurements rather than from memory bandwidth
// (scheduler/cost_model.h OptimizerSeconds, GradientCopySeconds).
//
// Timed like the layers (ProfileMeter: on the CPU, CPU milliseconds of the
// computing threads, the clock an emulated device's busy time is measured on,
// each step starting with the caches evicted; on a GPU, wall milliseconds); the
// median over `repeats` after one warm-up step, which also creates the
// optimizer's state. Steps run with learning rate 0 on random
// gradients, so the parameters are left as they were; gradients are cleared
// afterwards.
//
// Thread safety: one thread, no concurrent torch work (as ProfileModel).
#ifndef TESSERA_WORKER_RUNTIME_OPTIMIZER_PROFILE_H_
#define TESSERA_WORKER_RUNTIME_OPTIMIZER_PROFILE_H_

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "worker/model/layered_model.h"
#include "worker/model/profile.h"
#include "worker/runtime/optimizer.h"

namespace tessera::worker {

// Adds "opt_ms" and "grad_copy_ms" to every layer (and "optimizer": config.kind at
// the top) of `profile`.
// REQUIRES: `profile` is ProfileModel's output for `model` (same layers in order).
// Errors: kInvalidArgument when the layers differ or repeats < 1; the optimizer's
// error for an unknown kind.
// Timed on the CPU (MakeCpuProfileMeter).
Status AddOptimizerCosts(LayeredModel& model, const OptimizerConfig& config, int repeats,
                         nlohmann::json* profile);
// Timed by `meter` (worker/model/profile.h). REQUIRES: the model's parameters
// are on meter.device().
Status AddOptimizerCosts(ProfileMeter& meter, LayeredModel& model, const OptimizerConfig& config,
                         int repeats, nlohmann::json* profile);

}  // namespace tessera::worker

#endif  // TESSERA_WORKER_RUNTIME_OPTIMIZER_PROFILE_H_
