// RunTraining: the training loop of one worker rank for every layout.
//
// Setup: build the model; read and validate the plan (or make a
// single-process / even data-parallel one); rendezvous; create one c10d
// group per distinct layer owner set (in plan order); install a
// BatchNormSync on replicated layers; broadcast replica 0's parameters;
// resume from the newest complete checkpoint (only the tensors of the
// layers this rank owns).
// Each step: StageRunner forward/backward + bucketed gradient all-reduce,
// optimizer step with linearly scaled, warmed-up learning rate, one small
// world all-reduce carrying [loss, checkpoint-now, stop-requested] so every
// rank takes the same decisions, one progress line, periodic checkpoints
// (every K steps, every S seconds by rank 0's clock, on SIGTERM).
//
// Thread safety: call once per process.
#ifndef TESSERA_WORKER_RUNTIME_TRAINER_H_
#define TESSERA_WORKER_RUNTIME_TRAINER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "api/image_convention.h"
#include "common/status.h"
#include "worker/model/layered_model.h"
#include "worker/runtime/dist_env.h"
#include "worker/runtime/optimizer.h"
#include "worker/runtime/step_trace.h"

namespace tessera::worker {

struct TrainOptions {
  std::string model;           // a reference or tiny model's name, or
  std::string model_file;      // a TorchScript sequence of layers (worker/model/scripted_model.h)
  std::string loss = "mse";    // model_file: mse | l1 | cross_entropy
  api::ImageConvention image;  // model_file: its images, as for inference (api/image_convention.h)
  std::string data_dir;
  int64_t steps = 100;  // total optimizer steps (a resumed run continues to this)
  double lr = 0.01;
  uint64_t seed = 1;
  int64_t image_size = 64;
  int64_t width = 16;
  int64_t batch = 16;         // global batch without a plan
  int64_t micro_batches = 1;  // without a plan
  int64_t checkpoint_every_steps = 0;
  double checkpoint_every_s = 0;
  int64_t base_batch = 0;  // linear LR scaling reference; 0 = none
  int64_t warmup_steps = 0;
  OptimizerConfig optimizer;
  double bucket_mb = 25.0;
  int threads = 1;
  int loader_threads = 0;       // threads preparing a batch's images; 0: LoaderThreads' choice
  std::string dump_params_dir;  // test hook: replica 0 writes final params here
  StepTraceOptions trace;       // a profiler trace of a few steps (step_trace.h)
  // Mixed precision: autocast + dynamic loss scaling, only on CUDA devices of
  // a CUDA build ("auto" = on there). loss_scaling forces dynamic loss
  // scaling on any device (power-of-two scales: exact on float32).
  bool amp = true;
  bool loss_scaling = false;
};

struct TrainOutcome {
  int64_t final_step = 0;
  bool stopped = false;           // a stop (SIGTERM) was requested
  bool checkpoint_saved = false;  // the last action was a successful checkpoint
  // A planned re-form left this rank out (reform.h): it stops, its state kept
  // by the ranks that go on.
  std::optional<int64_t> left_out_of;  // the generation that has no place for it
};

// Errors: kInvalidArgument for bad options or plan (exit code 2), others are
// runtime failures (exit code 1).
// The layers of TorchScript module o.model_file (worker/model/scripted_model.h),
// checked to be its forward, with its image convention (o.image, then the
// module's tessera.json, then probe forwards) in *convention and its
// per-sample input shape in *in_shape. kInvalidArgument naming the field.
Result<std::shared_ptr<LayeredModel>> BuildScriptedModel(const TrainOptions& o,
                                                         api::ImageConvention* convention,
                                                         std::vector<int64_t>* in_shape);

Result<TrainOutcome> RunTraining(const TrainOptions& options, const DistEnv& env,
                                 const std::atomic<bool>& stop_requested);

// Model by name: the tiny test models (tiny_models.h) or MakeModel's.
Result<std::shared_ptr<LayeredModel>> BuildModel(const std::string& name,
                                                 const ModelConfig& config);

}  // namespace tessera::worker

#endif  // TESSERA_WORKER_RUNTIME_TRAINER_H_
