#include "scheduler/model_profile.h"

#include "common/enum_names.h"

namespace tessera::scheduler {

constexpr EnumName<Precision> kPrecisionNames[] = {
    {Precision::kFp32, "fp32"},
    {Precision::kFp16, "fp16"},
    {Precision::kBf16, "bf16"},
};
static_assert(IsValidNameTable(kPrecisionNames));

std::string_view PrecisionName(Precision p) { return NameOf(kPrecisionNames, p, "fp32"); }

Status ModelProfile::Validate() const {
  if (layers.empty()) return InvalidArgument("model has no layers", "layers");
  if (input_bytes < 0) return InvalidArgument("must be non-negative", "input_bytes");
  if (optimizer_state_multiplier < 0) {
    return InvalidArgument("must be non-negative", "optimizer_state_multiplier");
  }
  if (nominal_image_px <= 0) return InvalidArgument("must be positive", "nominal_image_px");
  if (halo_px < 0) return InvalidArgument("must be non-negative", "halo_px");
  if (max_micro_batches < 0) return InvalidArgument("must be non-negative", "max_micro_batches");
  for (size_t i = 0; i < layers.size(); ++i) {
    const Layer& l = layers[i];
    const std::string f = "layers[" + std::to_string(i) + "]";
    if (l.forward_flops < 0 || l.backward_flops < 0) {
      return InvalidArgument("FLOPs must be non-negative", f + ".forward_flops");
    }
    if (l.parameter_bytes < 0 || l.activation_bytes < 0 || l.output_bytes < 0) {
      return InvalidArgument("byte counts must be non-negative", f + ".parameter_bytes");
    }
    for (const auto& [type, ms] : l.measured_forward_ms) {
      if (ms < 0) return InvalidArgument("must be non-negative", f + ".measured_forward_ms");
    }
    for (const auto& [type, ms] : l.measured_backward_ms) {
      if (ms < 0) return InvalidArgument("must be non-negative", f + ".measured_backward_ms");
    }
    for (const auto& [type, ms] : l.measured_forward_fixed_ms) {
      if (ms < 0) return InvalidArgument("must be non-negative", f + ".measured_forward_fixed_ms");
    }
    for (const auto& [type, ms] : l.measured_backward_fixed_ms) {
      if (ms < 0) return InvalidArgument("must be non-negative", f + ".measured_backward_fixed_ms");
    }
  }
  return Status::Ok();
}

}  // namespace tessera::scheduler
