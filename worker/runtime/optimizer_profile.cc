#include "worker/runtime/optimizer_profile.h"

#include <algorithm>
#include <exception>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "worker/model/profile.h"

namespace tessera::worker {
namespace {

// Median milliseconds on `meter` of `repeats` calls of `fn`, each readied by the
// meter (the CPU: caches evicted), after one untimed warm-up call.
template <typename F>
double MedianColdMs(ProfileMeter& meter, int repeats, F&& fn) {
  fn();
  std::vector<double> ms;
  for (int r = 0; r < repeats; ++r) {
    const double t0 = meter.Start();
    fn();
    ms.push_back(meter.ElapsedMs(t0));
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

Status AddOptimizerCosts(LayeredModel& model, const OptimizerConfig& config, int repeats,
                         nlohmann::json* profile) {
  std::unique_ptr<ProfileMeter> meter = MakeCpuProfileMeter(/*count_memory=*/false);
  return AddOptimizerCosts(*meter, model, config, repeats, profile);
}

Status AddOptimizerCosts(ProfileMeter& meter, LayeredModel& model, const OptimizerConfig& config,
                         int repeats, nlohmann::json* profile) {
  if (repeats < 1) return InvalidArgument("repeats must be at least 1", "repeats");
  const size_t n = model.num_layers();
  nlohmann::json* layers = nullptr;
  if (profile->contains("layers")) layers = &(*profile)["layers"];
  if (layers == nullptr || !layers->is_array() || layers->size() != n) {
    return InvalidArgument("the profile's layers are not the model's", "layers");
  }
  try {
    for (size_t i = 0; i < n; ++i) {
      if ((*layers)[i].value("name", "") != model.layer(i).name) {
        return InvalidArgument("the profile's layers are not the model's", "layers");
      }
      std::vector<std::pair<std::string, torch::Tensor>> params = model.NamedParameters(i, i + 1);
      double median_ms = 0, copy_ms = 0;
      if (!params.empty()) {
        for (auto& [name, p] : params) p.mutable_grad() = torch::randn_like(p);
        TESSERA_ASSIGN_OR_RETURN(NamedOptimizer opt, NamedOptimizer::Make(config, params));
        // The warm-up step creates the optimizer's state.
        median_ms = MedianColdMs(meter, repeats, [&] { opt.Step(0.0); });
        // Data parallel: the gradients into one flat bucket and the sums back.
        int64_t numel = 0;
        for (const auto& [name, p] : params) numel += p.numel();
        torch::Tensor flat = torch::empty({numel}, params.front().second.options());
        copy_ms = MedianColdMs(meter, repeats, [&] {
          torch::NoGradGuard no_grad;
          int64_t offset = 0;
          for (const auto& [name, p] : params) {
            flat.narrow(0, offset, p.numel()).copy_(p.grad().reshape({-1}));
            offset += p.numel();
          }
          offset = 0;
          for (auto& [name, p] : params) {
            p.mutable_grad().copy_(flat.narrow(0, offset, p.numel()).view(p.sizes()));
            offset += p.numel();
          }
        });
        for (auto& [name, p] : params) p.mutable_grad() = torch::Tensor();
      }
      (*layers)[i]["opt_ms"] = median_ms;
      (*layers)[i]["grad_copy_ms"] = copy_ms;
    }
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("profiling the optimizer step: ") + e.what(), "optimizer");
  }
  (*profile)["optimizer"] = config.kind;
  return Status::Ok();
}

}  // namespace tessera::worker
