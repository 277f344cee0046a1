// StepEnd: what the training loops (trainer.cc, gan_trainer.cc) share around
// each optimizer step: the learning-rate schedule, the one small all-reduce
// after the step by which every rank takes the same decisions (losses,
// checkpoint now?, stop now?), the progress line, acting on the decisions,
// and the parameters a test dumps after the last step.
//
// Thread safety: functions; AgreeOnStepEnd is a collective (every rank of
// `world` calls it after every step), and so is FinishStep when it saves.
#ifndef TESSERA_WORKER_RUNTIME_STEP_END_H_
#define TESSERA_WORKER_RUNTIME_STEP_END_H_

#include <torch/torch.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/status.h"
#include "worker/runtime/checkpoint.h"
#include "worker/runtime/collectives.h"
#include "worker/runtime/trainer.h"

namespace tessera::worker {

// o.lr, scaled by global_batch / o.base_batch when base_batch is set, with a
// linear warm-up over the first o.warmup_steps steps (`step` is 0-based).
double ScheduledLearningRate(const TrainOptions& o, int64_t global_batch, int64_t step);

struct StepEnd {
  std::vector<double> sums;  // each rank's `values`, summed over the world
  bool checkpoint = false;   // save now: every-N-steps, rank 0's timer, a stop, the last step
  bool stop = false;         // some rank was asked to stop (SIGTERM)
};

// After step `step` (1-based, already counted): sums `values` over the world
// together with rank 0's checkpoint timer (seconds_since_save against
// o.checkpoint_every_s) and every rank's stop request, in one all-reduce.
// Adds the time it took to *comm_s.
Result<StepEnd> AgreeOnStepEnd(Collectives& world, const TrainOptions& o, int64_t step,
                               const std::vector<double>& values, double seconds_since_save,
                               bool stop_requested, torch::Device comm_device, double* comm_s);

// The progress line of a step (the agent tails it; the API shows it).
nlohmann::json StepProgressLine(int64_t step, double loss, double samples_per_s, double compute_s,
                                double comm_s, double bubble_s, int rank);
// Adds the rank's memory to a progress line: "peak_memory_bytes" (on a GPU the
// CUDA allocator's peak of allocated bytes; on an emulated device the counted
// peak of its tensors, worker/runtime/device_memory.h; absent when nothing
// measures it) and "predicted_peak_memory_bytes" (the planner's, when the plan
// has it).
void AddMemoryFields(nlohmann::json& line, int64_t predicted_peak_bytes,
                     const torch::Device& device);

// Acts on `end` after step `step`: when the ranks agreed on a checkpoint and
// the job has a checkpoint folder, saves one with `save` (a collective; every
// rank calls it) and restarts *last_save. outcome->checkpoint_saved says
// whether this step saved one; outcome->stopped is set when the loop stops here.
Status FinishStep(const StepEnd& end, int64_t step, const std::string& checkpoint_dir,
                  const std::function<Status(int64_t)>& save,
                  std::chrono::steady_clock::time_point* last_save, TrainOutcome* outcome);

// --dump-params (a test hook): `tensors` as the tensor file <dir>/<file_name>,
// the folder created when missing.
Status DumpParams(const std::string& dir, const std::string& file_name,
                  const NamedTensors& tensors);

}  // namespace tessera::worker

#endif  // TESSERA_WORKER_RUNTIME_STEP_END_H_
