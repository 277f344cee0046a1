#include "worker/runtime/step_end.h"

#include <chrono>
#include <filesystem>
#include <system_error>

#include "worker/runtime/device_memory.h"
#include "worker/runtime/emulated_memory.h"
#include "worker/runtime/seconds_since.h"

namespace tessera::worker {

double ScheduledLearningRate(const TrainOptions& o, int64_t global_batch, int64_t step) {
  double lr = o.lr;
  if (o.base_batch > 0) {
    lr *= static_cast<double>(global_batch) / static_cast<double>(o.base_batch);
  }
  if (o.warmup_steps > 0 && step < o.warmup_steps) {
    lr *= static_cast<double>(step + 1) / static_cast<double>(o.warmup_steps);
  }
  return lr;
}

Result<StepEnd> AgreeOnStepEnd(Collectives& world, const TrainOptions& o, int64_t step,
                               const std::vector<double>& values, double seconds_since_save,
                               bool stop_requested, torch::Device comm_device, double* comm_s) {
  const auto t0 = std::chrono::steady_clock::now();
  const bool time_due =
      world.rank() == 0 && o.checkpoint_every_s > 0 && seconds_since_save >= o.checkpoint_every_s;
  std::vector<double> flat = values;
  flat.push_back(time_due ? 1.0 : 0.0);
  flat.push_back(stop_requested ? 1.0 : 0.0);
  torch::Tensor flags =
      torch::tensor(flat, torch::TensorOptions(torch::kFloat64).device(comm_device));
  TESSERA_RETURN_IF_ERROR(world.AllReduceSum({flags}));
  *comm_s += SecondsSince(t0);
  flags = flags.to(torch::kCPU);
  StepEnd end;
  for (size_t i = 0; i < values.size(); ++i) {
    end.sums.push_back(flags[static_cast<int64_t>(i)].item<double>());
  }
  const auto n = static_cast<int64_t>(values.size());
  end.stop = flags[n + 1].item<double>() > 0;
  end.checkpoint = (o.checkpoint_every_steps > 0 && step % o.checkpoint_every_steps == 0) ||
                   flags[n].item<double>() > 0 || end.stop || step == o.steps;
  return end;
}

nlohmann::json StepProgressLine(int64_t step, double loss, double samples_per_s, double compute_s,
                                double comm_s, double bubble_s, int rank) {
  return {{"step", step},
          {"loss", loss},
          {"samples_per_s", samples_per_s},
          {"compute_s", compute_s},
          {"comm_s", comm_s},
          {"bubble_s", bubble_s},
          {"ts_ms", std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count()},
          {"rank", rank}};
}

void AddMemoryFields(nlohmann::json& line, int64_t predicted_peak_bytes,
                     const torch::Device& device) {
  if (const int64_t peak = PeakBytes(device); peak >= 0) line["peak_memory_bytes"] = peak;
  if (predicted_peak_bytes > 0) line["predicted_peak_memory_bytes"] = predicted_peak_bytes;
}

Status FinishStep(const StepEnd& end, int64_t step, const std::string& checkpoint_dir,
                  const std::function<Status(int64_t)>& save,
                  std::chrono::steady_clock::time_point* last_save, TrainOutcome* outcome) {
  outcome->checkpoint_saved = false;
  if (!checkpoint_dir.empty() && end.checkpoint) {
    TESSERA_RETURN_IF_ERROR(save(step));
    *last_save = std::chrono::steady_clock::now();
    outcome->checkpoint_saved = true;
  }
  if (end.stop) outcome->stopped = true;
  return Status::Ok();
}

Status DumpParams(const std::string& dir, const std::string& file_name,
                  const NamedTensors& tensors) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  return WriteTensorFile((std::filesystem::path(dir) / file_name).string(), tensors, nullptr);
}

}  // namespace tessera::worker
