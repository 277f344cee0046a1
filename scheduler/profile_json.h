// ModelProfile from the JSON that `tessera-worker profile` prints.
//
// The worker measures its own layers (names, FLOPs, parameter, activation
// and output bytes per sample), so a plan's layer ranges always match the
// model the worker builds. Costs are FLOP-based: the worker's CPU
// milliseconds are not keyed to the planned devices' types, so they are not
// used as measured times.
//
// Thread safety: pure function.
#ifndef TESSERA_SCHEDULER_PROFILE_JSON_H_
#define TESSERA_SCHEDULER_PROFILE_JSON_H_

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "scheduler/model_profile.h"

namespace tessera::scheduler {

// Input: {"model", "batch", "in_shape":[C,H,W], "layers":[{"name",
// "fwd_flops_per_sample" | "fwd_flops", "param_bytes",
// "activation_bytes_per_sample", "output_bytes_per_sample"}]}.
// kInvalidArgument naming the field when a field is missing or malformed.
Result<ModelProfile> ModelProfileFromWorkerJson(const nlohmann::json& j);

}  // namespace tessera::scheduler

#endif  // TESSERA_SCHEDULER_PROFILE_JSON_H_
