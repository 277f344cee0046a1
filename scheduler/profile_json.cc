#include "scheduler/profile_json.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>

#include "common/json_fields.h"

namespace tessera::scheduler {
namespace {

// A required member that is a number >= 0.
Result<double> Number(JsonFields& fields, const char* key) {
  double v = 0;
  TESSERA_RETURN_IF_ERROR(fields.Double(key, &v, Presence::kRequired));
  if (v < 0) return InvalidArgument("must not be negative", fields.Name(key));
  return v;
}

}  // namespace

Result<ModelProfile> ModelProfileFromWorkerJson(const nlohmann::json& j) {
  if (!j.is_object()) return InvalidArgument("profile must be a JSON object", "profile");
  ModelProfile p;
  JsonFields fields(j);
  TESSERA_RETURN_IF_ERROR(fields.String("model", &p.name, Presence::kRequired));
  TESSERA_ASSIGN_OR_RETURN(double batch, Number(fields, "batch"));
  if (batch < 1) return InvalidArgument("must be at least 1", "batch");

  auto shape = j.find("in_shape");
  if (shape == j.end() || !shape->is_array() || shape->empty()) {
    return InvalidArgument("must be a non-empty array", "in_shape");
  }
  int64_t elements = 1;
  for (const auto& d : *shape) {
    if (!d.is_number_integer() || d.get<int64_t>() < 1) {
      return InvalidArgument("must hold positive integers", "in_shape");
    }
    elements *= d.get<int64_t>();
  }
  p.input_bytes = elements * 4;
  if (shape->size() == 3) p.nominal_image_px = static_cast<int>((*shape)[1].get<int64_t>());

  std::string device;
  TESSERA_RETURN_IF_ERROR(fields.String("device", &device));
  if (j.contains("device") && !j["device"].is_null() && device.empty()) {
    return InvalidArgument("must be a non-empty string", "device");
  }

  auto layers = j.find("layers");
  if (layers == j.end() || !layers->is_array() || layers->empty()) {
    return InvalidArgument("must be a non-empty array", "layers");
  }
  for (size_t i = 0; i < layers->size(); ++i) {
    const nlohmann::json& l = (*layers)[i];
    JsonFields layer_fields(l, "layers[" + std::to_string(i) + "]");
    Layer layer;
    TESSERA_RETURN_IF_ERROR(layer_fields.String("name", &layer.name, Presence::kRequired));
    double flops = 0;
    if (l.contains("fwd_flops_per_sample")) {
      TESSERA_ASSIGN_OR_RETURN(flops, Number(layer_fields, "fwd_flops_per_sample"));
    } else {
      TESSERA_ASSIGN_OR_RETURN(double total, Number(layer_fields, "fwd_flops"));
      flops = total / batch;
    }
    // A layer with no arithmetic (a reshape, a pool) still costs a little.
    layer.forward_flops = std::max(flops, 1.0);
    TESSERA_ASSIGN_OR_RETURN(double params, Number(layer_fields, "param_bytes"));
    TESSERA_ASSIGN_OR_RETURN(double act, Number(layer_fields, "activation_bytes_per_sample"));
    TESSERA_ASSIGN_OR_RETURN(double out, Number(layer_fields, "output_bytes_per_sample"));
    layer.parameter_bytes = static_cast<int64_t>(params);
    layer.activation_bytes = static_cast<int64_t>(act);
    if (l.contains("batch_norms")) {
      TESSERA_ASSIGN_OR_RETURN(double bn, Number(layer_fields, "batch_norms"));
      layer.batch_norms = static_cast<int>(bn);
    }
    if (l.contains("backward_transient_bytes_per_sample")) {
      TESSERA_ASSIGN_OR_RETURN(double tr,
                               Number(layer_fields, "backward_transient_bytes_per_sample"));
      layer.backward_transient_bytes = static_cast<int64_t>(tr);
    }
    layer.output_bytes = static_cast<int64_t>(out);
    if (!device.empty() && l.contains("fwd_ms")) {
      TESSERA_ASSIGN_OR_RETURN(double fwd_ms, Number(layer_fields, "fwd_ms"));
      TESSERA_ASSIGN_OR_RETURN(double bwd_ms, Number(layer_fields, "bwd_ms"));
      // Optional per-call part (fitted by the worker from a second, smaller batch):
      // the batch's time is fixed + batch x per-sample.
      double fwd_fixed = 0, bwd_fixed = 0;
      if (l.contains("fwd_fixed_ms")) {
        TESSERA_ASSIGN_OR_RETURN(fwd_fixed, Number(layer_fields, "fwd_fixed_ms"));
        TESSERA_ASSIGN_OR_RETURN(bwd_fixed, Number(layer_fields, "bwd_fixed_ms"));
        if (fwd_fixed > fwd_ms)
          return InvalidArgument("must not exceed fwd_ms", layer_fields.Name("fwd_fixed_ms"));
        if (bwd_fixed > bwd_ms)
          return InvalidArgument("must not exceed bwd_ms", layer_fields.Name("bwd_fixed_ms"));
        layer.measured_forward_fixed_ms[device] = fwd_fixed;
        layer.measured_backward_fixed_ms[device] = bwd_fixed;
      }
      // Optional: one optimizer step over the layer's parameters (not per sample).
      if (l.contains("opt_ms")) {
        TESSERA_ASSIGN_OR_RETURN(double opt_ms, Number(layer_fields, "opt_ms"));
        layer.measured_optimizer_ms[device] = opt_ms;
      }
      if (l.contains("grad_copy_ms")) {
        TESSERA_ASSIGN_OR_RETURN(double copy_ms, Number(layer_fields, "grad_copy_ms"));
        layer.measured_gradient_copy_ms[device] = copy_ms;
      }
      layer.measured_forward_ms[device] = (fwd_ms - fwd_fixed) / batch;
      layer.measured_backward_ms[device] = (bwd_ms - bwd_fixed) / batch;
    }
    p.layers.push_back(std::move(layer));
  }
  // Receptive-field radius of an image-to-image model (tiling); null or
  // absent for a model that cannot be tiled.
  std::optional<int64_t> halo;
  TESSERA_RETURN_IF_ERROR(fields.Int("halo_px", &halo));
  if (halo) {
    if (*halo < 0) {
      return InvalidArgument("must be a non-negative integer", "halo_px");
    }
    p.halo_px = static_cast<int>(*halo);
  }
  // A model the worker cannot cut into stages (gan-pix2pix) and how many
  // micro-batches it trains a share in.
  TESSERA_RETURN_IF_ERROR(fields.Bool("data_parallel_only", &p.data_parallel_only));
  std::optional<int64_t> max_micro_batches;
  TESSERA_RETURN_IF_ERROR(fields.Int("max_micro_batches", &max_micro_batches));
  if (max_micro_batches) {
    if (*max_micro_batches < 0 || *max_micro_batches > 1000000) {
      return InvalidArgument("must be a non-negative integer", "max_micro_batches");
    }
    p.max_micro_batches = static_cast<int>(*max_micro_batches);
  }
  p.estimated = false;
  TESSERA_RETURN_IF_ERROR(p.Validate());
  return p;
}

}  // namespace tessera::scheduler
