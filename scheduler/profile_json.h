// ModelProfile from the JSON that `tessera-worker profile` prints.
//
// The worker measures its own layers (names, FLOPs, parameter, activation
// and output bytes per sample, milliseconds on the device it ran on), so a
// plan's layer ranges always match the model the worker builds. The measured
// milliseconds (per batch) become per-sample measured_forward_ms /
// measured_backward_ms keyed by the profile's "device" (the worker profiles
// on "cpu"): devices whose Device::measured_as names that type (CPU devices,
// emulated GPUs) use them; all other devices keep the FLOP-based estimate.
//
// Thread safety: pure function.
#ifndef TESSERA_SCHEDULER_PROFILE_JSON_H_
#define TESSERA_SCHEDULER_PROFILE_JSON_H_

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "scheduler/model_profile.h"

namespace tessera::scheduler {

// Input: {"model", "batch", "in_shape":[C,H,W], optional "device", "layers":[{"name",
// "fwd_flops_per_sample" | "fwd_flops", "param_bytes",
// "activation_bytes_per_sample", "output_bytes_per_sample", optional "fwd_ms" and
// "bwd_ms" (whole batch; used when "device" is present), optional "fwd_fixed_ms" and
// "bwd_fixed_ms" (the per-call part of fwd_ms / bwd_ms: per-sample = (ms - fixed) / batch,
// fixed becomes measured_*_fixed_ms per micro-batch)}], optional "data_parallel_only" (bool)
// and "max_micro_batches" (integer >= 0), see ModelProfile}.
// kInvalidArgument naming the field when a field is missing or malformed.
Result<ModelProfile> ModelProfileFromWorkerJson(const nlohmann::json& j);

}  // namespace tessera::scheduler

#endif  // TESSERA_SCHEDULER_PROFILE_JSON_H_
