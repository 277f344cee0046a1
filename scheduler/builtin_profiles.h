// Builtin model profiles for the reference models tessera-worker implements.
//
// Purpose: rough per-layer FLOPs, parameter bytes and activation/output bytes per
// sample at the nominal 256 x 256 image, so the controller can plan "builtin:"
// entrypoints before any profile run. These are ESTIMATES computed from the layer
// shapes (convolution FLOPs = 2 x out_pixels x c_in x c_out x k^2; fp32; kept
// activations = 2 x the layer output for conv + norm/ReLU); ModelProfile::estimated
// is true. A profile run on real devices replaces them (measured_*_ms per layer).
// Output bytes include skip tensors that cross the boundary (U-Nets), so pipeline
// sends are priced honestly.
// Thread safety: pure functions.
#ifndef TESSERA_SCHEDULER_BUILTIN_PROFILES_H_
#define TESSERA_SCHEDULER_BUILTIN_PROFILES_H_

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "scheduler/model_profile.h"

namespace tessera::scheduler {

// Names: "colorize-unet", "denoiser-dncnn", "classifier-resnet", "gan-pix2pix".
std::vector<std::string> BuiltinProfileNames();

// The profile for a builtin name (with or without the "builtin:" prefix);
// NotFound for other names.
Result<ModelProfile> BuiltinProfile(std::string_view name);

}  // namespace tessera::scheduler

#endif  // TESSERA_SCHEDULER_BUILTIN_PROFILES_H_
