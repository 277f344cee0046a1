// ModelProfile: what the planner knows about a model's layers.
//
// Purpose: an ordered list of layers, each with its forward/backward cost per
// sample (FLOPs, or measured milliseconds per device type once a profile run
// exists), parameter bytes, activation bytes kept per sample for the backward
// pass, and bytes sent to the next layer per sample. Plus the optimizer-state
// multiplier and the precision. Costs are for one sample at the nominal image
// size (nominal_image_px x nominal_image_px); the planner scales FLOPs and
// activation/output bytes by pixel count for other image sizes.
// Ownership: a plain value. Thread safety: a value.
#ifndef TESSERA_SCHEDULER_MODEL_PROFILE_H_
#define TESSERA_SCHEDULER_MODEL_PROFILE_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace tessera::scheduler {

enum class Precision { kFp32, kFp16, kBf16 };
std::string_view PrecisionName(Precision p);

struct Layer {
  std::string name;
  double forward_flops = 0;   // per sample
  double backward_flops = 0;  // per sample; 0 means 2 x forward_flops
  // Measured per-sample milliseconds keyed by Device::type; when present for a
  // device's type they replace the FLOP-based estimate for that device.
  std::map<std::string, double> measured_forward_ms;
  std::map<std::string, double> measured_backward_ms;
  // Measured milliseconds per micro-batch (per call) on top of the per-sample times
  // above, keyed like them: what a small micro-batch costs beyond its samples
  // (kernel launches, small-matrix inefficiency). Absent: 0.
  std::map<std::string, double> measured_forward_fixed_ms;
  std::map<std::string, double> measured_backward_fixed_ms;
  // Measured milliseconds of one optimizer step over the layer's parameters, keyed
  // like them; when present for a device's type it replaces the memory-bandwidth
  // estimate of the step (CostModelOptions::optimizer_weight_passes).
  std::map<std::string, double> measured_optimizer_ms;
  // Measured milliseconds a data-parallel replica spends copying the layer's
  // gradients into its all-reduce bucket and the reduced sums back, keyed like them;
  // absent: estimated from memory bandwidth (CostModel::GradientCopySeconds).
  std::map<std::string, double> measured_gradient_copy_ms;
  int64_t parameter_bytes = 0;   // at the profile's precision
  int64_t activation_bytes = 0;  // kept per sample until the backward pass
  // Working memory per sample while the layer's backward runs, on top of what it
  // keeps (gradients of its input and output, temporaries); 0: unknown.
  int64_t backward_transient_bytes = 0;
  // Synchronised batch norms in the layer: with several data-parallel replicas each
  // all-reduces its statistics once in the forward and once in the backward.
  int batch_norms = 0;
  int64_t output_bytes = 0;  // crossing to the next layer per sample (incl. skips)

  friend bool operator==(const Layer&, const Layer&) = default;
};

struct ModelProfile {
  std::string name;
  std::vector<Layer> layers;
  int64_t input_bytes = 0;  // one input sample, as fed to layer 0
  // Optimizer state bytes = multiplier x parameter bytes (Adam with fp32 state: 2).
  double optimizer_state_multiplier = 2.0;
  Precision precision = Precision::kFp32;
  int nominal_image_px = 256;  // costs above are for a square image of this side
  int halo_px = 0;             // receptive-field radius: tiles overlap by 2 x halo_px
  bool estimated = false;      // true until a profile run replaced the estimates
  // The model cannot be cut into pipeline stages (gan-pix2pix: generator and
  // discriminator train together on every rank): every replica holds all layers on one
  // device, so only data-parallel plans (and tiled inference) are made; pipeline and
  // hybrid are rejected with a reason.
  bool data_parallel_only = false;
  // Most micro-batches a training replica may cut its share into; 0: no limit (1: the
  // worker runs each share as one micro-batch, as the GAN does).
  int max_micro_batches = 0;

  // OK, or InvalidArgument naming the field (no layers, negative sizes, ...).
  Status Validate() const;

  friend bool operator==(const ModelProfile&, const ModelProfile&) = default;
};

// Copies the times `from` measured under key `from_key` (its profile's "device",
// e.g. "cuda:0") into `into` under `as_type` (a Device::type, e.g. "NVIDIA H100
// 80GB HBM3"): per layer the forward and backward per-sample times, their per-call
// parts, the optimizer step and the gradient copy, whichever `from` has. The rest of
// `into` (FLOPs, bytes, other types' times) stays. So a model profiled on the CPU
// plans a GPU type by that GPU's own measurements. kInvalidArgument naming "layers"
// when the layers differ (count or names; `into` unchanged then).
Status AddMeasuredTimes(const ModelProfile& from, const std::string& from_key,
                        const std::string& as_type, ModelProfile* into);

}  // namespace tessera::scheduler

#endif  // TESSERA_SCHEDULER_MODEL_PROFILE_H_
