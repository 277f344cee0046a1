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

Status AddMeasuredTimes(const ModelProfile& from, const std::string& from_key,
                        const std::string& as_type, ModelProfile* into) {
  if (from.layers.size() != into->layers.size()) {
    return InvalidArgument("the profiles have " + std::to_string(from.layers.size()) + " and " +
                               std::to_string(into->layers.size()) + " layers",
                           "layers");
  }
  for (size_t i = 0; i < from.layers.size(); ++i) {
    if (from.layers[i].name != into->layers[i].name) {
      return InvalidArgument("layer " + std::to_string(i) + " is " + from.layers[i].name +
                                 " in one profile and " + into->layers[i].name + " in the other",
                             "layers");
    }
  }
  using Times = std::map<std::string, double> Layer::*;
  for (size_t i = 0; i < from.layers.size(); ++i) {
    for (Times times : {&Layer::measured_forward_ms, &Layer::measured_backward_ms,
                        &Layer::measured_forward_fixed_ms, &Layer::measured_backward_fixed_ms,
                        &Layer::measured_optimizer_ms, &Layer::measured_gradient_copy_ms}) {
      const auto& source = from.layers[i].*times;
      if (auto it = source.find(from_key); it != source.end()) {
        (into->layers[i].*times)[as_type] = it->second;
      }
    }
  }
  return Status::Ok();
}

}  // namespace tessera::scheduler
