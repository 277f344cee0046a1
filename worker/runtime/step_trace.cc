#include "worker/runtime/step_trace.h"

#include <torch/csrc/autograd/profiler_kineto.h>

#include <filesystem>
#include <set>
#include <utility>

namespace tessera::worker {
namespace {

namespace profiler = torch::autograd::profiler;
using torch::profiler::impl::ActivityType;
using torch::profiler::impl::ProfilerConfig;
using torch::profiler::impl::ProfilerState;

std::set<ActivityType> Activities(bool cuda) {
  std::set<ActivityType> out = {ActivityType::CPU};
  if (cuda) out.insert(ActivityType::CUDA);
  return out;
}

}  // namespace

Result<StepTrace> StepTrace::Make(StepTraceOptions options, const torch::Device& device) {
  if (!options.path.empty()) {
    if (options.first_step < 1) return InvalidArgument("must be at least 1", "trace-from");
    if (options.steps < 1) return InvalidArgument("must be at least 1", "trace-steps");
  }
  return StepTrace(std::move(options), device.is_cuda());
}

StepTrace::StepTrace(StepTrace&& other) noexcept
    : options_(std::move(other.options_)), cuda_(other.cuda_), recording_(other.recording_) {
  other.recording_ = false;
}

StepTrace::~StepTrace() {
  if (!recording_) return;
  try {
    (void)profiler::disableProfiler();
  } catch (const std::exception&) {
    // The process is leaving this rank's training; nothing to record.
  }
}

void StepTrace::BeforeStep(int64_t step) {
  if (options_.path.empty() || recording_ || step != options_.first_step) return;
  const ProfilerConfig config(ProfilerState::KINETO);
  profiler::prepareProfiler(config, Activities(cuda_));
  profiler::enableProfiler(config, Activities(cuda_));
  recording_ = true;
}

Status StepTrace::AfterStep(int64_t step) {
  if (!recording_ || step < options_.first_step + options_.steps - 1) return Status::Ok();
  return Finish();
}

Status StepTrace::Finish() {
  if (!recording_) return Status::Ok();
  recording_ = false;
  try {
    if (cuda_) torch::cuda::synchronize();
    std::unique_ptr<profiler::ProfilerResult> result = profiler::disableProfiler();
    const std::filesystem::path path(options_.path);
    if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
    result->save(options_.path);
  } catch (const std::exception& e) {
    return Internal("writing the step trace " + options_.path + ": " + e.what());
  }
  if (!std::filesystem::exists(options_.path)) {
    return Internal("the step trace " + options_.path + " was not written");
  }
  return Status::Ok();
}

}  // namespace tessera::worker
