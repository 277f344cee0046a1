#include "worker/runtime/gan_profile.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "common/cpu_time.h"
#include "worker/model/gan.h"
#include "worker/model/profile.h"
#include "worker/runtime/gan_trainer.h"

namespace tessera::worker {
namespace {

// Steps are timed on the CPU clock ProfileModel and an emulated device use
// (common/cpu_time.h), so a busy host does not inflate them.
double MsSince(double cpu0) {
  return (CpuSeconds(CpuClockFor(torch::get_num_threads())) - cpu0) * 1e3;
}
double Now() { return CpuSeconds(CpuClockFor(torch::get_num_threads())); }

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// Shares `total` among entries in proportion to `weights` (evenly when they sum to 0).
std::vector<double> Shares(double total, const std::vector<double>& weights) {
  double sum = 0;
  for (double w : weights) sum += std::max(0.0, w);
  std::vector<double> out;
  for (double w : weights) {
    out.push_back(sum > 0 ? total * std::max(0.0, w) / sum
                          : total / static_cast<double>(weights.size()));
  }
  return out;
}

struct StepCost {
  double fwd_ms = 0;
  double bwd_ms = 0;
  int64_t extra_bytes = 0;  // peak over what was allocated before the step
};

// Whole training steps as gan_trainer.cc runs them on one rank (no all-reduce).
Result<StepCost> MeasureSteps(Gan& gan, const GanProfileOptions& o) {
  LayeredModel& gen = *gan.generator;
  LayeredModel& disc = *gan.discriminator;
  const size_t gl = gen.num_layers(), dl = disc.num_layers();
  TESSERA_ASSIGN_OR_RETURN(NamedOptimizer g_opt,
                           NamedOptimizer::Make(o.optimizer, gen.NamedParameters(0, gl)));
  TESSERA_ASSIGN_OR_RETURN(NamedOptimizer d_opt,
                           NamedOptimizer::Make(o.optimizer, disc.NamedParameters(0, dl)));
  gen.SetTraining(true);
  disc.SetTraining(true);
  constexpr double kLr = 1e-4;
  const int64_t b = o.batch, h = o.image_size;
  std::vector<double> fwd, bwd;
  int64_t extra = 0;
  AllocationCounter counter;
  for (int r = 0; r <= o.repeats; ++r) {  // r == 0 is the warm-up (it makes gradients and state)
    torch::Tensor gray = torch::rand({b, 1, h, h}) * 2 - 1;
    const int64_t before = counter.live_bytes();
    counter.ResetPeak();
    torch::Tensor real = torch::rand({b, 3, h, h}) * 2 - 1;  // the target counts: it is extra
    double t0 = Now();
    torch::Tensor fake = Generate(gan, gray);
    torch::Tensor d_loss = DiscriminatorStepLoss(gan, gray, real, fake);
    double f_ms = MsSince(t0);
    t0 = Now();
    d_loss.backward();
    d_opt.Step(kLr);
    d_opt.ZeroGrad();
    double b_ms = MsSince(t0);
    t0 = Now();
    GeneratorLossParts parts = GeneratorStepLoss(gan, gray, real, fake);
    f_ms += MsSince(t0);
    t0 = Now();
    parts.total.backward();
    g_opt.Step(kLr);
    g_opt.ZeroGrad();
    d_opt.ZeroGrad();
    b_ms += MsSince(t0);
    const int64_t peak = counter.peak_bytes() - before;
    if (r == 0) continue;
    fwd.push_back(f_ms);
    bwd.push_back(b_ms);
    extra = std::max(extra, peak);
  }
  return StepCost{Median(fwd), Median(bwd), extra};
}

}  // namespace

Result<nlohmann::json> ProfileGan(const GanProfileOptions& o) {
  if (o.batch < 1) return InvalidArgument("batch must be at least 1", "batch");
  if (o.repeats < 1) return InvalidArgument("repeats must be at least 1", "repeats");
  ModelConfig mc;
  mc.width = o.width;
  mc.image_size = o.image_size;
  TESSERA_ASSIGN_OR_RETURN(Gan gan, MakeGan(kGanModelName, mc));
  const int64_t h = o.image_size;
  // Each network on its own: what its layers hold and how their times compare.
  TESSERA_ASSIGN_OR_RETURN(nlohmann::json g,
                           ProfileModel(*gan.generator, o.batch, {1, h, h}, o.repeats));
  TESSERA_ASSIGN_OR_RETURN(nlohmann::json d,
                           ProfileModel(*gan.discriminator, o.batch, {4, h, h}, o.repeats));
  Result<StepCost> step = [&]() -> Result<StepCost> {
    try {
      return MeasureSteps(gan, o);
    } catch (const std::exception& e) {
      return InvalidArgument(std::string("profiling a gan-pix2pix step: ") + e.what(), "batch");
    }
  }();
  TESSERA_RETURN_IF_ERROR(step.status());

  nlohmann::json layers = nlohmann::json::array();
  for (const auto& l : g.at("layers")) layers.push_back(l);
  const size_t g_layers = layers.size();
  for (auto l : d.at("layers")) {
    // The discriminator runs three times a step: its batch norms synchronise three
    // times as often as the generator's.
    l["batch_norms"] = l.value("batch_norms", 0) * 3;
    layers.push_back(std::move(l));
  }
  std::vector<double> fwd_w, bwd_w, act_w;
  for (const auto& l : layers) {
    fwd_w.push_back(l.at("fwd_ms").get<double>());
    bwd_w.push_back(l.at("bwd_ms").get<double>());
    act_w.push_back(l.at("activation_bytes_per_sample").get<double>());
  }
  const double act_per_sample =
      std::ceil(static_cast<double>(step->extra_bytes) / static_cast<double>(o.batch));
  const std::vector<double> fwd = Shares(step->fwd_ms, fwd_w);
  const std::vector<double> bwd = Shares(step->bwd_ms, bwd_w);
  const std::vector<double> act = Shares(act_per_sample, act_w);
  for (size_t i = 0; i < layers.size(); ++i) {
    layers[i]["fwd_ms"] = fwd[i];
    layers[i]["bwd_ms"] = bwd[i];
    // Rounded up so the layers together never hold less than the step measured.
    layers[i]["activation_bytes_per_sample"] = static_cast<int64_t>(std::ceil(act[i]));
    layers[i]["backward_transient_bytes_per_sample"] = 0;
  }
  const size_t d_layers = layers.size() - g_layers;
  return nlohmann::json{{"model", kGanModelName},
                        {"device", "cpu"},
                        {"batch", o.batch},
                        {"in_shape", {1, h, h}},
                        {"repeats", o.repeats},
                        {"layers", std::move(layers)},
                        {"data_parallel_only", true},
                        {"max_micro_batches", 1},
                        {"step",
                         {{"fwd_ms", step->fwd_ms},
                          {"bwd_ms", step->bwd_ms},
                          {"activation_bytes_per_sample", static_cast<int64_t>(act_per_sample)},
                          {"generator_layers", g_layers},
                          {"discriminator_layers", d_layers}}}};
}

}  // namespace tessera::worker
