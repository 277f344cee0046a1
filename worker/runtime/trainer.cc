#include "worker/runtime/trainer.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "worker/runtime/await_work.h"
#include "worker/runtime/batch_norm_sync.h"
#include "worker/runtime/checkpoint.h"
#include "worker/runtime/collectives.h"
#include "worker/runtime/data_source.h"
#include "worker/runtime/emulated_memory.h"
#include "worker/runtime/grad_reducer.h"
#include "worker/runtime/loss_scaler.h"
#include "worker/runtime/plan.h"
#include "worker/runtime/progress_writer.h"
#include "worker/runtime/rank_device.h"
#include "worker/runtime/reform.h"
#include "worker/runtime/resume.h"
#include "worker/runtime/seconds_since.h"
#include "worker/runtime/stage_runner.h"
#include "worker/runtime/step_end.h"
#include "worker/runtime/tiny_models.h"

#ifdef TESSERA_HAVE_WORKER_DATA
#include "worker/model/scripted_model.h"
#include "worker/runtime/exported_model.h"
#include "worker/runtime/gan_trainer.h"
#include "worker/runtime/image_model_probe.h"
#include "worker/runtime/image_source.h"
#endif

namespace tessera::worker {
namespace {

using Clock = std::chrono::steady_clock;

Result<std::string> ReadTextFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return InvalidArgument("cannot read plan file " + path, "TESSERA_PLAN");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A rank plan from its JSON text, checked against the world and the model.
// tesserad plans an exported module it has not profiled as one opaque
// layer: a replica of one stage then runs every layer of the module.
Result<Plan> PlanFromText(const TrainOptions& o, const std::string& text, int world_size,
                          int64_t num_layers) {
  TESSERA_ASSIGN_OR_RETURN(Plan plan, ParsePlan(text));
  if (!o.model_file.empty()) {
    for (ReplicaPlan& r : plan.replicas) {
      if (r.stages.size() == 1 && r.stages[0].layer_begin == 0 && r.stages[0].layer_end == 1) {
        r.stages[0].layer_end = num_layers;
      }
    }
  }
  Status v = ValidatePlan(plan, world_size, num_layers);
  if (!v.ok()) return v.WithPrefix("plan");
  return plan;
}

Result<Plan> MakePlan(const TrainOptions& o, const DistEnv& env, int64_t num_layers) {
  Plan plan;
  if (!env.plan_path.empty()) {
    TESSERA_ASSIGN_OR_RETURN(std::string text, ReadTextFile(env.plan_path));
    Result<Plan> parsed = PlanFromText(o, text, env.world_size, num_layers);
    if (!parsed.ok()) return parsed.status().WithPrefix("TESSERA_PLAN " + env.plan_path);
    return parsed;
  } else if (env.world_size > 1) {
    // torchrun without a plan: even data parallel over the world.
    if (o.batch < env.world_size) {
      return InvalidArgument("--batch must be at least WORLD_SIZE", "batch");
    }
    plan.layout = Layout::kData;
    plan.global_batch = o.batch;
    plan.micro_batches = o.micro_batches;
    auto shares = SplitMicroBatches(o.batch, env.world_size);
    for (int r = 0; r < env.world_size; ++r) {
      plan.replicas.push_back(ReplicaPlan{shares[static_cast<size_t>(r)], {{r, 0, num_layers}}});
    }
  } else {
    if (o.batch <= 0) return InvalidArgument("must be positive", "batch");
    if (o.micro_batches <= 0) return InvalidArgument("must be positive", "micro-batches");
    plan = SingleProcessPlan(o.batch, o.micro_batches, num_layers);
  }
  Status v = ValidatePlan(plan, env.world_size, num_layers);
  if (!v.ok()) return v.WithPrefix("plan");
  return plan;
}

NamedTensors OwnedParams(const LayeredModel& m, const RankRole& role) {
  return m.NamedParameters(static_cast<size_t>(role.layer_begin),
                           static_cast<size_t>(role.layer_end));
}
NamedTensors OwnedBuffers(const LayeredModel& m, const RankRole& role) {
  return m.NamedBuffers(static_cast<size_t>(role.layer_begin), static_cast<size_t>(role.layer_end));
}
// What a checkpoint restores of this rank's layers: parameters, then buffers.
NamedTensors OwnedState(const LayeredModel& m, const RankRole& role) {
  NamedTensors state = OwnedParams(m, role);
  for (auto& b : OwnedBuffers(m, role)) state.push_back(b);
  return state;
}

std::string LayerFileName(const RankRole& role, const std::string& prefix) {
  return prefix + "layers-" + std::to_string(role.layer_begin) + "-" +
         std::to_string(role.layer_end) + ".bin";
}

}  // namespace

Result<std::shared_ptr<LayeredModel>> BuildModel(const std::string& name,
                                                 const ModelConfig& config) {
  if (IsTinyModelName(name)) return MakeTinyModel(name, config);
#ifdef TESSERA_HAVE_WORKER_MODEL
  try {
    return MakeModel(name, config);
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("model construction failed: ") + e.what(), "model");
  }
#else
  return InvalidArgument("unknown model \"" + name + "\" (this build has only tiny-mlp, tiny-skip)",
                         "model");
#endif
}

namespace {

// The name checkpoints carry: the model's, or an exported file's stem.
std::string ModelName(const TrainOptions& o) {
  return o.model_file.empty() ? o.model : std::filesystem::path(o.model_file).stem().string();
}

#ifdef TESSERA_HAVE_WORKER_DATA
// The layers of a TorchScript sequence, checked to be its forward, and its
// image convention: the job's, the module's tessera.json, then probe forwards
// on the CPU (channels, output; not the tile geometry). The file is loaded
// once for the probe and the check, once more for the layers.
Result<std::shared_ptr<LayeredModel>> BuildScripted(const TrainOptions& o,
                                                    api::ImageConvention* convention) {
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<ExportedModule> module,
                           ExportedModule::Load(o.model_file, torch::Device(torch::kCPU)));
  if (module->format() != "torchscript") {
    return InvalidArgument(
        "training needs a TorchScript module (an AOTInductor package has no "
        "backward)",
        "model-file");
  }
  const HostForward whole = [&module](const torch::Tensor& x) -> Result<torch::Tensor> {
    torch::NoGradGuard no_grad;
    return module->Forward(x);
  };
  api::ImageConvention stated = api::Overlay(o.image, module->stated());
  if (stated.align_px == 0) stated.align_px = 1;
  if (stated.halo_px < 0) stated.halo_px = 0;
  // At the training crop's size: a classifier's linear head takes no other.
  TESSERA_ASSIGN_OR_RETURN(
      ProbedImageModel probed,
      ProbeImageModel(whole, stated, torch::Device(torch::kCPU), o.image_size));
  *convention = probed.convention;

  TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<LayeredModel> model,
                           LoadScriptedModel(o.model_file, ModelName(o), o.loss));
  std::vector<int64_t> shape = ConventionInputShape(*convention, o.image_size);
  shape.insert(shape.begin(), 2);
  const auto range = convention->range.value_or(std::make_pair(0.0, 1.0));
  torch::Generator gen = at::detail::createCPUGenerator(o.seed);
  const torch::Tensor probe = torch::rand(shape, gen) * (range.second - range.first) + range.first;
  TESSERA_ASSIGN_OR_RETURN(torch::Tensor want, whole(probe));
  TESSERA_RETURN_IF_ERROR(CheckSequential(o.model_file, *model, probe, want));
  return model;
}
#endif

}  // namespace

Result<std::shared_ptr<LayeredModel>> BuildScriptedModel(const TrainOptions& o,
                                                         api::ImageConvention* convention,
                                                         std::vector<int64_t>* in_shape) {
#ifdef TESSERA_HAVE_WORKER_DATA
  TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<LayeredModel> model, BuildScripted(o, convention));
  *in_shape = ConventionInputShape(*convention, o.image_size);
  return model;
#else
  return InvalidArgument("this build has no image data library for --model-file", "model-file");
#endif
}

namespace {

Result<std::unique_ptr<BatchSource>> BuildSource(const TrainOptions& o, const LayeredModel& model,
                                                 const api::ImageConvention& convention,
                                                 int loader_threads) {
#ifdef TESSERA_HAVE_WORKER_DATA
  if (!o.model_file.empty()) {
    return MakeConventionSource(o.data_dir, convention, o.image_size, o.seed, loader_threads);
  }
#endif
  if (IsTinyModelName(o.model)) {
    return MakeSyntheticSource(kTinyInputFeatures, kTinyOutputs, o.seed);
  }
#ifdef TESSERA_HAVE_WORKER_DATA
  return MakeImageSource(o.data_dir, model.name(), o.image_size, o.seed, loader_threads);
#else
  return InvalidArgument("this build has no image data library; use a tiny-* model", "data");
#endif
}

struct Runtime {
  std::shared_ptr<LayeredModel> model;
  Plan plan;
  RankRole role;
  std::unique_ptr<World> world;
  std::vector<std::unique_ptr<Collectives>> groups;
  std::unique_ptr<Collectives> p2p_back;  // gradients between stages (stage_runner.h)
  std::vector<std::shared_ptr<CollectivesBatchNormSync>> syncs;
};

// The p2p test hooks of ConnectOptions, from TESSERA_P2P_TRACE (a path prefix:
// rank R traces into <prefix>.R) and TESSERA_P2P_IGNORE_TAGS, honoured only with
// TESSERA_WORKER_TEST_HOOKS=1.
void ApplyP2pTestHooks(int rank, ConnectOptions* co) {
  const char* hooks = std::getenv("TESSERA_WORKER_TEST_HOOKS");
  if (hooks == nullptr || std::string(hooks) != "1") return;
  if (const char* trace = std::getenv("TESSERA_P2P_TRACE")) {
    co->p2p_trace = std::string(trace) + "." + std::to_string(rank);
  }
  const char* ignore = std::getenv("TESSERA_P2P_IGNORE_TAGS");
  co->ignore_p2p_tags = ignore != nullptr && std::string(ignore) == "1";
}

}  // namespace

namespace {

// What stays with the rank from one generation of its world to the next
// (reform.h): the model (in the caller), the step, the optimizer and its
// loss scale, the outcome so far.
struct Carried {
  int64_t generation = 0;
  int64_t step = 0;
  int64_t base_step = 0;     // the step samples are counted from ...
  int64_t base_samples = 0;  // ... and the samples seen at it
  int64_t global_batch = 0;
  HeldLayers held;  // the layers of this generation's stage (step: `step`)
  std::optional<NamedOptimizer> optimizer;
  std::optional<LossScaler> scaler;
  Clock::time_point last_save = Clock::now();
  TrainOutcome outcome;
};

// What the rank built once: its model on its device.
struct Setup {
  std::shared_ptr<LayeredModel> model;
  api::ImageConvention convention;
  torch::Device device{torch::kCPU};
  Backend backend = Backend::kGloo;
  int64_t num_layers = 0;
};

// One generation of the rank's world: connect, agree on the state (a
// re-formed world) or resume from the checkpoint (the first), train until the
// last step, a stop, or an error. On a peer loss the groups are abandoned, not
// destroyed (reform.h step 3).
Result<TrainOutcome> RunGeneration(const TrainOptions& o, const DistEnv& env, Plan plan,
                                   Setup& setup, Carried& c, std::future<CheckpointRead>* preload,
                                   ProgressWriter& progress,
                                   const std::atomic<bool>& stop_requested) {
  const auto started = Clock::now();
  auto rt = std::make_unique<Runtime>();
  struct Abandon {
    std::unique_ptr<Runtime>& rt;
    ~Abandon() {
      if (PeerLost()) (void)rt.release();
    }
  } abandon{rt};
  rt->model = setup.model;
  rt->plan = std::move(plan);
  LayeredModel& model = *rt->model;
  const int64_t num_layers = setup.num_layers;
  TESSERA_ASSIGN_OR_RETURN(rt->role, RoleForRank(rt->plan, env.rank));
  const RankRole& role = rt->role;
  TESSERA_ASSIGN_OR_RETURN(
      auto built, BuildSource(o, model, setup.convention,
                              LoaderThreads(o.loader_threads, setup.device, env.local_world_size,
                                            std::thread::hardware_concurrency())));
  // Each step's slice of the next step is loaded while this one computes.
  std::unique_ptr<BatchSource> source =
      MakePrefetchingSource(std::move(built), rt->plan.global_batch);
  const torch::Device device = setup.device;
  const torch::Device comm_device =
      setup.backend == Backend::kNccl ? device : torch::Device(torch::kCPU);
  const auto setup_done = Clock::now();

  // Rendezvous.
  if (env.world_size > 1) {
    ConnectOptions co;
    co.backend = setup.backend;
    co.op_timeout = env.collective_timeout;
    ApplyP2pTestHooks(env.rank, &co);
    TESSERA_ASSIGN_OR_RETURN(rt->world, ConnectWorld(env, co));
  } else {
    rt->world = MakeLocalWorld();
  }
  Collectives& world = rt->world->world();

  // A re-formed world: the newest completed step any survivor holds, and the
  // layers this rank's new stage lacks, from the ranks that hold them.
  std::map<std::string, torch::Tensor> optimizer_state;
  if (c.optimizer) {
    for (auto& [n, t] : c.optimizer->StateTensors()) optimizer_state[n] = t;
  }
  if (c.generation > 0) {
    c.held.step = c.step;
    c.held.samples = c.base_samples + (c.step - c.base_step) * c.global_batch;
    TESSERA_ASSIGN_OR_RETURN(
        ReformAgreement agreed,
        SyncReformedState(world, c.held, {role.layer_begin, role.layer_end}, model,
                          &optimizer_state, comm_device, env.checkpoint_dir));
    c.base_samples = agreed.samples;
    c.base_step = agreed.step;
    c.step = agreed.step;
    std::fprintf(stderr,
                 "rank %d: re-formed world %lld: %d ranks, from step %lld, %zu layers sent "
                 "among them or read, in %.2f s\n",
                 env.rank, static_cast<long long>(c.generation), env.world_size,
                 static_cast<long long>(agreed.step), agreed.transfers.size(),
                 SecondsSince(started));
  }
  // Whatever a step in flight left in .grad is not this generation's.
  for (auto& [n, p] : model.NamedParameters(0, model.num_layers()))
    p.mutable_grad() = torch::Tensor();
  model.SetBatchNormSync(nullptr);

  const auto owner_groups = LayerOwnerGroups(rt->plan, num_layers);
  GradReducer reducer;
  const size_t bucket_bytes = static_cast<size_t>(std::max(0.001, o.bucket_mb) * 1024 * 1024);
  for (size_t gi = 0; gi < owner_groups.size(); ++gi) {
    const OwnerGroup& g = owner_groups[gi];
    if (std::find(g.ranks.begin(), g.ranks.end(), env.rank) == g.ranks.end()) continue;
    if (g.ranks.size() == 1) continue;
    TESSERA_ASSIGN_OR_RETURN(auto comm,
                             rt->world->NewGroup("owners-" + std::to_string(gi), g.ranks));
    NamedTensors params, state;
    for (int64_t l : g.layers) {
      for (auto& p : model.NamedParameters(static_cast<size_t>(l), static_cast<size_t>(l + 1))) {
        params.push_back(p);
        state.push_back(p);
      }
      for (auto& b : model.NamedBuffers(static_cast<size_t>(l), static_cast<size_t>(l + 1))) {
        state.push_back(b);
      }
    }
    if (c.generation == 0) {
      // Replicas start from replica 0's parameters, as DDP does.
      std::vector<torch::Tensor> to_sync;
      for (auto& [n, t] : state) to_sync.push_back(t.detach());
      TESSERA_RETURN_IF_ERROR(comm->Broadcast(to_sync, 0));
    }
    auto sync = std::make_shared<CollectivesBatchNormSync>(comm.get());
    for (int64_t l : g.layers) model.layer(static_cast<size_t>(l)).layer->SetBatchNormSync(sync);
    rt->syncs.push_back(sync);
    reducer.AddGroup(comm.get(), params, bucket_bytes);
    rt->groups.push_back(std::move(comm));
  }

  // Stages send gradients back over a group of their own (every rank makes it, in
  // the same order, when the plan has a pipeline).
  const bool staged = std::any_of(rt->plan.replicas.begin(), rt->plan.replicas.end(),
                                  [](const auto& r) { return r.stages.size() > 1; });
  if (staged && env.world_size > 1) {
    std::vector<int> all(static_cast<size_t>(env.world_size));
    for (int r = 0; r < env.world_size; ++r) all[static_cast<size_t>(r)] = r;
    TESSERA_ASSIGN_OR_RETURN(rt->p2p_back, rt->world->NewGroup("p2p-back", all));
  }

  TESSERA_ASSIGN_OR_RETURN(NamedOptimizer made,
                           NamedOptimizer::Make(o.optimizer, OwnedParams(model, role)));
  made.LoadState(optimizer_state);
  c.optimizer.emplace(std::move(made));
  NamedOptimizer& optimizer = *c.optimizer;
  c.held = {c.step, role.layer_begin, role.layer_end};
  c.global_batch = rt->plan.global_batch;

  // Resume (the first generation only: a re-formed one agreed above).
  const auto connected = Clock::now();
  if (preload != nullptr && preload->valid()) {
    TESSERA_ASSIGN_OR_RETURN(
        std::optional<ResumePoint> resumed,
        ResumeFromCheckpoint(world, env.checkpoint_dir, ModelName(o), preload->get(),
                             OwnedState(model, role), {&optimizer}));
    if (resumed) {
      c.step = resumed->step;
      c.base_step = resumed->step;
      c.base_samples = resumed->samples_seen;
      c.held.step = c.step;
    }
  }
  std::fprintf(
      stderr,
      "rank %d: start-up %.2f s (setup %.2f s, rendezvous and groups %.2f s, then "
      "checkpoint %.2f s)\n",
      env.rank, SecondsSince(started), std::chrono::duration<double>(setup_done - started).count(),
      std::chrono::duration<double>(connected - setup_done).count(), SecondsSince(connected));

  StageConfig sc;
  sc.model = &model;
  sc.role = role;
  sc.global_batch = rt->plan.global_batch;
  sc.micro_batches = EffectiveMicroBatches(rt->plan);
  sc.schedule = rt->plan.schedule;
  if (sc.schedule == Schedule::k1F1B && !model.NamedBuffers(0, model.num_layers()).empty() &&
      !OwnerGroupsShareStagePositions(rt->plan, num_layers)) {
    // Synchronized batch norm needs the same collective order on every owner.
    sc.schedule = Schedule::kGPipe;
    if (env.rank == 0) {
      std::fprintf(stderr,
                   "replicas are cut differently and the model has batch norm: "
                   "running GPipe instead of 1F1B\n");
    }
  }
  sc.p2p = &world;
  sc.p2p_back = rt->p2p_back.get();
  sc.data = source.get();
  sc.reducer = &reducer;
  sc.emulated = SegmentClockFor(device, env.device_speed, o.threads);
  sc.device = device;
  sc.comm_device = comm_device;
  const bool amp = o.amp && device.is_cuda();
  sc.autocast = amp;
  if ((amp || o.loss_scaling) && !c.scaler) c.scaler.emplace();
  std::optional<LossScaler>& scaler = c.scaler;
  StageRunner runner(sc);

  auto save = [&](int64_t at_step) -> Status {
    CheckpointContent content;
    content.step = at_step;
    content.global_batch = rt->plan.global_batch;
    content.samples_seen = c.base_samples + (at_step - c.base_step) * rt->plan.global_batch;
    content.model = ModelName(o);
    content.layout = std::string(LayoutName(rt->plan.layout));
    if (role.replica == 0) {
      content.file_name = LayerFileName(role, "");
      content.tensors = OwnedParams(model, role);
      for (auto& b : OwnedBuffers(model, role)) content.tensors.push_back(b);
      for (auto& s : optimizer.StateTensors()) content.tensors.push_back(s);
      if (role.stage == 0) content.tensors.emplace_back(kRngTensor, GetCpuRngState());
    }
    return SaveCheckpoint(world, env.checkpoint_dir, content);
  };

  TrainOutcome& outcome = c.outcome;
  int64_t& step = c.step;
  TESSERA_ASSIGN_OR_RETURN(StepTrace trace, StepTrace::Make(o.trace, device));
  while (step < o.steps) {
    trace.BeforeStep(step + 1);
    TraceScope step_scope(kStepScope);
    const auto step_start = Clock::now();
    const double lr = ScheduledLearningRate(o, rt->plan.global_batch, step);
    const int64_t first_id = c.base_samples + (step - c.base_step) * rt->plan.global_batch;
    StepStats stats;
    try {
      if (scaler) runner.set_loss_scale(scaler->scale());
      TraceScope forward_backward(kForwardBackwardScope);
      TESSERA_ASSIGN_OR_RETURN(stats, runner.RunStep(first_id));
      forward_backward.End();
      // The optimizer step is device work too: one compute segment.
      const EmulatedDevice::Segment t0 = sc.emulated.Begin();
      bool apply = true;
      if (scaler) {
        TraceScope unscale(kUnscaleScope);
        TESSERA_ASSIGN_OR_RETURN(
            apply, scaler->UnscaleAndCheck(OwnedParams(model, role), world, sc.comm_device));
      }
      TraceScope optimizer_scope(kOptimizerScope);
      if (apply) optimizer.Step(lr);
      optimizer.ZeroGrad();
      optimizer_scope.End();
      const EmulatedDevice::SegmentTimes opt = sc.emulated.End(t0);
      stats.compute_s += opt.busy_s;
      stats.compute_cpu_s += opt.cpu_s;
    } catch (const std::exception& e) {
      return ComputeFailure("step " + std::to_string(step + 1) + " failed", e);
    }
    // Every replica applied the same reduced gradients: the step is complete
    // here, whatever happens to the agreement below.
    ++step;
    c.held.step = step;
    TraceScope step_end_scope(kStepEndScope);
    TESSERA_ASSIGN_OR_RETURN(
        StepEnd end,
        AgreeOnStepEnd(world, o, step, {role.last_stage() ? stats.loss_contribution : 0.0},
                       SecondsSince(c.last_save), stop_requested.load(), sc.comm_device,
                       &stats.comm_s));
    step_end_scope.End();
    step_scope.End();
    const double wall = SecondsSince(step_start);
    nlohmann::json line =
        StepProgressLine(step, end.sums[0], wall > 0 ? rt->plan.global_batch / wall : 0.0,
                         stats.compute_s, stats.comm_s, stats.bubble_s, env.rank);
    line["compute_cpu_s"] = stats.compute_cpu_s;
    line["generation"] = c.generation;  // which world made the step (a re-form's cost)
    AddMemoryFields(line, role.predicted_peak_bytes, device);
    progress.Write(line);
    TESSERA_RETURN_IF_ERROR(
        FinishStep(end, step, env.checkpoint_dir, save, &c.last_save, &outcome));
    TESSERA_RETURN_IF_ERROR(trace.AfterStep(step));
    if (outcome.stopped) break;
  }
  TESSERA_RETURN_IF_ERROR(trace.Finish());
  outcome.final_step = step;
  if (!o.dump_params_dir.empty() && role.replica == 0) {
    NamedTensors t = OwnedParams(model, role);
    for (auto& b : OwnedBuffers(model, role)) t.push_back(b);
    TESSERA_RETURN_IF_ERROR(DumpParams(o.dump_params_dir, LayerFileName(role, "params-"), t));
  }
  TESSERA_RETURN_IF_ERROR(world.Barrier());
  return outcome;
}

}  // namespace

Result<TrainOutcome> RunTraining(const TrainOptions& o, const DistEnv& env,
                                 const std::atomic<bool>& stop_requested) {
  torch::set_num_threads(std::max(1, o.threads));
  if (o.steps < 0) return InvalidArgument("must not be negative", "steps");
  if (!(o.lr > 0)) return InvalidArgument("must be positive", "lr");
  if (o.base_batch < 0 || o.warmup_steps < 0) {
    return InvalidArgument("must not be negative", "base-batch");
  }
#ifdef TESSERA_HAVE_WORKER_DATA
  if (o.model == kGanModelName) {
    if (!o.trace.path.empty()) return InvalidArgument("is not for gan-pix2pix", "trace-out");
    return RunGanTraining(o, env, stop_requested);
  }
#endif
  Setup setup;
  TESSERA_ASSIGN_OR_RETURN(setup.backend, BackendForDevice(env.device));
  // The rank's own GPU becomes the current device before any CUDA work.
  TESSERA_ASSIGN_OR_RETURN(setup.device, SelectRankDevice(env.device, env.local_rank));

  ModelConfig mc;
  mc.width = o.width;
  mc.image_size = o.image_size;
  mc.seed = o.seed;
#ifdef TESSERA_HAVE_WORKER_DATA
  if (o.model == "classifier-resnet") mc.num_classes = SampleImageClasses();
#endif
  if (o.model_file.empty()) {
    TESSERA_ASSIGN_OR_RETURN(setup.model, BuildModel(o.model, mc));
  } else {
#ifdef TESSERA_HAVE_WORKER_DATA
    std::vector<int64_t> in_shape;
    TESSERA_ASSIGN_OR_RETURN(setup.model, BuildScriptedModel(o, &setup.convention, &in_shape));
#else
    return InvalidArgument("this build has no image data library for --model-file", "model-file");
#endif
  }
  LayeredModel& model = *setup.model;
  setup.num_layers = static_cast<int64_t>(model.num_layers());
  // Only a rank of a planned world re-forms: its agent writes the orders (a
  // rank alone too: it grows). A rank that finds an order at its start joins
  // a running world (reform.h): its state comes from its peers, not from the
  // checkpoint.
  const bool planned = !env.plan_path.empty() && !env.reform_path.empty();
  const std::optional<ReformOrder> joining =
      planned ? ReadReformOrder(env.reform_path) : std::nullopt;
  DistEnv now = env;
  Plan plan;
  if (joining) {
    TESSERA_ASSIGN_OR_RETURN(now, ReformedEnv(env, *joining));
    Result<Plan> parsed = PlanFromText(o, joining->plan_text, now.world_size, setup.num_layers);
    if (!parsed.ok()) return parsed.status().WithPrefix("joined plan");
    plan = *std::move(parsed);
  } else {
    TESSERA_ASSIGN_OR_RETURN(plan, MakePlan(o, env, setup.num_layers));
  }
  if (setup.device.type() != torch::kCPU) {
    for (size_t i = 0; i < model.num_layers(); ++i) model.layer(i).layer->to(setup.device);
  }
  model.SetTraining(true);

  // Start-up overlapped: the newest checkpoint is read while the ranks
  // rendezvous, build their groups and share replica 0's parameters.
  std::future<CheckpointRead> preload;
  if (!env.checkpoint_dir.empty() && !joining) {
    TESSERA_ASSIGN_OR_RETURN(RankRole role, RoleForRank(plan, env.rank));
    std::vector<std::string> state_names;
    for (auto& [n, t] : OwnedState(model, role)) state_names.push_back(n);
    preload = std::async(std::launch::async, [dir = env.checkpoint_dir, state_names] {
      return ReadNewestCheckpoint(dir, state_names);
    });
  }

  ProgressWriter progress(env.progress_file);
  Carried carried;
  // A joining rank's watcher starts at its generation: the order it joined by
  // is not a newer one (read before, it abandoned the joiner's first receive).
  ReformWatcher watcher(planned ? env.reform_path : "", joining ? joining->generation : 0);
  if (joining) {
    carried.generation = joining->generation;
    std::fprintf(stderr, "rank %d: joins the running world as generation %lld\n", now.rank,
                 static_cast<long long>(joining->generation));
  }
  while (true) {
    Result<TrainOutcome> ran =
        RunGeneration(o, now, std::move(plan), setup, carried,
                      carried.generation == 0 ? &preload : nullptr, progress, stop_requested);
    if (ran.ok() || !PeerLost() || !watcher.enabled() || stop_requested.load()) return ran;
    // Step 1 of reform.h: keep the state, say so, wait for the new world (a
    // rank told to re-form, rather than one that lost a peer, says that).
    const auto lost_at = Clock::now();
    const bool told = CollectivesAbandoned();
    std::fprintf(stderr, "rank %d: %s; waiting for the re-formed attempt (holding step %lld)\n",
                 now.rank, ran.status().ToString().c_str(), static_cast<long long>(carried.step));
    progress.Write({{"event", told ? "regrouping" : "peer_lost"},
                    {"held_step", carried.step},
                    {"generation", carried.generation},  // the world it lost a peer of
                    {"ts_ms", std::chrono::duration_cast<std::chrono::milliseconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count()},
                    {"rank", now.rank},
                    {"error", ran.status().message()}});
    std::optional<ReformOrder> order =
        watcher.Await(std::chrono::duration_cast<std::chrono::milliseconds>(now.collective_timeout),
                      stop_requested);
    if (!order) {
      return ran.status().WithPrefix(stop_requested.load()
                                         ? "stopped while waiting for the re-formed attempt"
                                         : "no re-formed attempt came");
    }
    if (order->left_out) {
      std::fprintf(stderr,
                   "rank %d: left out of generation %lld after %.2f s; its state lives on in the "
                   "kept ranks\n",
                   now.rank, static_cast<long long>(order->generation), SecondsSince(lost_at));
      TrainOutcome out;
      out.final_step = carried.step;
      out.left_out_of = order->generation;
      return out;
    }
    TESSERA_ASSIGN_OR_RETURN(DistEnv next, ReformedEnv(now, *order));
    Result<Plan> parsed = PlanFromText(o, order->plan_text, next.world_size, setup.num_layers);
    if (!parsed.ok()) return parsed.status().WithPrefix("re-formed plan");
    plan = *std::move(parsed);
    now = next;
    carried.generation = order->generation;
    watcher.SetCurrent(order->generation);
    ClearPeerLost();
    ResumeCollectives();
    std::fprintf(stderr, "rank %d: re-forming as generation %lld after %.2f s\n", now.rank,
                 static_cast<long long>(order->generation), SecondsSince(lost_at));
  }
}

}  // namespace tessera::worker
