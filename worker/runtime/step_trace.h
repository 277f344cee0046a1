// StepTrace: a PyTorch profiler (Kineto) trace of a few training steps of this
// rank, written as a Chrome trace JSON file (chrome://tracing, Perfetto, or
// scripts/gpu_check.py's summary), so that where a step's time goes can be read
// on a real GPU: its operators on the host and, on a CUDA device, its kernels
// and copies, i.e. how many kernels a step launches and how long the GPU idles.
// The trainer marks each step ("tessera::step") and its phases
// ("tessera::forward_backward", "tessera::unscale", "tessera::optimizer",
// "tessera::step_end") as user scopes (kStepScope ...), which the profiler
// records only while it runs.
//
// Steps are numbered as the progress lines number them (1 = the job's first
// step); a rank that resumed past the first traced step traces nothing, and a
// recording that a re-form interrupts (a new world, a new StepTrace) is dropped.
//
// Ownership: owns the profiler session while it records. Thread safety: one
// trainer thread; the profiler records the threads the operators run on.
#ifndef TESSERA_WORKER_RUNTIME_STEP_TRACE_H_
#define TESSERA_WORKER_RUNTIME_STEP_TRACE_H_

#include <ATen/record_function.h>
#include <torch/torch.h>

#include <cstdint>
#include <optional>
#include <string>

#include "common/status.h"

namespace tessera::worker {

inline constexpr char kStepScope[] = "tessera::step";
inline constexpr char kForwardBackwardScope[] = "tessera::forward_backward";
inline constexpr char kUnscaleScope[] = "tessera::unscale";
inline constexpr char kOptimizerScope[] = "tessera::optimizer";
inline constexpr char kStepEndScope[] = "tessera::step_end";

struct StepTraceOptions {
  std::string path;         // empty: no trace
  int64_t first_step = 10;  // the first step traced (>= 1)
  int64_t steps = 5;        // how many (>= 1)
};

// A user scope named `name` (a string literal) from construction to End() or
// destruction, recorded while a profiler runs (RECORD_USER_SCOPE, endable).
class TraceScope {
 public:
  explicit TraceScope(const char* name) : fn_(std::in_place, at::RecordScope::USER_SCOPE) {
    if (fn_->isActive()) fn_->before(name);
  }
  void End() { fn_.reset(); }

 private:
  std::optional<at::RecordFunction> fn_;
};

class StepTrace {
 public:
  // kInvalidArgument (naming the field) for a first step or count below 1.
  static Result<StepTrace> Make(StepTraceOptions options, const torch::Device& device);
  StepTrace(StepTrace&& other) noexcept;
  StepTrace& operator=(StepTrace&&) = delete;
  ~StepTrace();  // a recording still running is stopped and not written

  // Before step `step` runs: starts recording at the first traced step.
  void BeforeStep(int64_t step);
  // After step `step`: after the last traced one, stops and writes the file
  // (an error when it cannot be written).
  Status AfterStep(int64_t step);
  // After the last step this world makes: a recording still running (the job
  // ended before the last traced step) stops and is written.
  Status Finish();

 private:
  StepTrace(StepTraceOptions options, bool cuda) : options_(std::move(options)), cuda_(cuda) {}
  StepTraceOptions options_;
  bool cuda_ = false;
  bool recording_ = false;
};

}  // namespace tessera::worker

#endif  // TESSERA_WORKER_RUNTIME_STEP_TRACE_H_
