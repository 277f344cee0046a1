#include "scheduler/profile_json.h"

#include <algorithm>
#include <string>

namespace tessera::scheduler {
namespace {

Result<double> Number(const nlohmann::json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return InvalidArgument("must be a number", where + key);
  double v = it->get<double>();
  if (v < 0) return InvalidArgument("must not be negative", where + key);
  return v;
}

}  // namespace

Result<ModelProfile> ModelProfileFromWorkerJson(const nlohmann::json& j) {
  if (!j.is_object()) return InvalidArgument("profile must be a JSON object", "profile");
  ModelProfile p;
  auto model = j.find("model");
  if (model == j.end() || !model->is_string()) return InvalidArgument("must be a string", "model");
  p.name = model->get<std::string>();
  TESSERA_ASSIGN_OR_RETURN(double batch, Number(j, "batch", ""));
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
  if (auto d = j.find("device"); d != j.end()) {
    if (!d->is_string() || d->get<std::string>().empty()) {
      return InvalidArgument("must be a non-empty string", "device");
    }
    device = d->get<std::string>();
  }

  auto layers = j.find("layers");
  if (layers == j.end() || !layers->is_array() || layers->empty()) {
    return InvalidArgument("must be a non-empty array", "layers");
  }
  for (size_t i = 0; i < layers->size(); ++i) {
    const nlohmann::json& l = (*layers)[i];
    const std::string where = "layers[" + std::to_string(i) + "].";
    if (!l.is_object() || !l.contains("name") || !l["name"].is_string()) {
      return InvalidArgument("must be a string", where + "name");
    }
    Layer layer;
    layer.name = l["name"].get<std::string>();
    double flops = 0;
    if (l.contains("fwd_flops_per_sample")) {
      TESSERA_ASSIGN_OR_RETURN(flops, Number(l, "fwd_flops_per_sample", where));
    } else {
      TESSERA_ASSIGN_OR_RETURN(double total, Number(l, "fwd_flops", where));
      flops = total / batch;
    }
    // A layer with no arithmetic (a reshape, a pool) still costs a little.
    layer.forward_flops = std::max(flops, 1.0);
    TESSERA_ASSIGN_OR_RETURN(double params, Number(l, "param_bytes", where));
    TESSERA_ASSIGN_OR_RETURN(double act, Number(l, "activation_bytes_per_sample", where));
    TESSERA_ASSIGN_OR_RETURN(double out, Number(l, "output_bytes_per_sample", where));
    layer.parameter_bytes = static_cast<int64_t>(params);
    layer.activation_bytes = static_cast<int64_t>(act);
    if (l.contains("batch_norms")) {
      TESSERA_ASSIGN_OR_RETURN(double bn, Number(l, "batch_norms", where));
      layer.batch_norms = static_cast<int>(bn);
    }
    if (l.contains("backward_transient_bytes_per_sample")) {
      TESSERA_ASSIGN_OR_RETURN(double tr, Number(l, "backward_transient_bytes_per_sample", where));
      layer.backward_transient_bytes = static_cast<int64_t>(tr);
    }
    layer.output_bytes = static_cast<int64_t>(out);
    if (!device.empty() && l.contains("fwd_ms")) {
      TESSERA_ASSIGN_OR_RETURN(double fwd_ms, Number(l, "fwd_ms", where));
      TESSERA_ASSIGN_OR_RETURN(double bwd_ms, Number(l, "bwd_ms", where));
      // Optional per-call part (fitted by the worker from a second, smaller batch):
      // the batch's time is fixed + batch x per-sample.
      double fwd_fixed = 0, bwd_fixed = 0;
      if (l.contains("fwd_fixed_ms")) {
        TESSERA_ASSIGN_OR_RETURN(fwd_fixed, Number(l, "fwd_fixed_ms", where));
        TESSERA_ASSIGN_OR_RETURN(bwd_fixed, Number(l, "bwd_fixed_ms", where));
        if (fwd_fixed > fwd_ms)
          return InvalidArgument("must not exceed fwd_ms", where + "fwd_fixed_ms");
        if (bwd_fixed > bwd_ms)
          return InvalidArgument("must not exceed bwd_ms", where + "bwd_fixed_ms");
        layer.measured_forward_fixed_ms[device] = fwd_fixed;
        layer.measured_backward_fixed_ms[device] = bwd_fixed;
      }
      // Optional: one optimizer step over the layer's parameters (not per sample).
      if (l.contains("opt_ms")) {
        TESSERA_ASSIGN_OR_RETURN(double opt_ms, Number(l, "opt_ms", where));
        layer.measured_optimizer_ms[device] = opt_ms;
      }
      if (l.contains("grad_copy_ms")) {
        TESSERA_ASSIGN_OR_RETURN(double copy_ms, Number(l, "grad_copy_ms", where));
        layer.measured_gradient_copy_ms[device] = copy_ms;
      }
      layer.measured_forward_ms[device] = (fwd_ms - fwd_fixed) / batch;
      layer.measured_backward_ms[device] = (bwd_ms - bwd_fixed) / batch;
    }
    p.layers.push_back(std::move(layer));
  }
  // Receptive-field radius of an image-to-image model (tiling); null or
  // absent for a model that cannot be tiled.
  if (auto halo = j.find("halo_px"); halo != j.end() && !halo->is_null()) {
    if (!halo->is_number_integer() || halo->get<int64_t>() < 0) {
      return InvalidArgument("must be a non-negative integer", "halo_px");
    }
    p.halo_px = static_cast<int>(halo->get<int64_t>());
  }
  // A model the worker cannot cut into stages (gan-pix2pix) and how many
  // micro-batches it trains a share in.
  if (auto dp = j.find("data_parallel_only"); dp != j.end() && !dp->is_null()) {
    if (!dp->is_boolean()) return InvalidArgument("must be a boolean", "data_parallel_only");
    p.data_parallel_only = dp->get<bool>();
  }
  if (auto mm = j.find("max_micro_batches"); mm != j.end() && !mm->is_null()) {
    if (!mm->is_number_integer() || mm->get<int64_t>() < 0 || mm->get<int64_t>() > 1000000) {
      return InvalidArgument("must be a non-negative integer", "max_micro_batches");
    }
    p.max_micro_batches = static_cast<int>(mm->get<int64_t>());
  }
  p.estimated = false;
  TESSERA_RETURN_IF_ERROR(p.Validate());
  return p;
}

}  // namespace tessera::scheduler
