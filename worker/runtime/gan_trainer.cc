#include "worker/runtime/gan_trainer.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "worker/model/gan.h"
#include "worker/runtime/batch_norm_sync.h"
#include "worker/runtime/checkpoint.h"
#include "worker/runtime/collectives.h"
#include "worker/runtime/data_source.h"
#include "worker/runtime/device_memory.h"
#include "worker/runtime/emulated_device.h"
#include "worker/runtime/emulated_memory.h"
#include "worker/runtime/grad_reducer.h"
#include "worker/runtime/image_source.h"
#include "worker/runtime/optimizer.h"
#include "worker/runtime/plan.h"
#include "worker/runtime/progress_writer.h"
#include "worker/runtime/rank_device.h"
#include "worker/runtime/resume.h"
#include "worker/runtime/seconds_since.h"
#include "worker/runtime/step_end.h"

namespace tessera::worker {
namespace {

using Clock = std::chrono::steady_clock;

constexpr char kCheckpointFile[] = "gan.bin";

Result<Plan> MakeGanPlan(const TrainOptions& o, const DistEnv& env, int64_t num_layers) {
  Plan plan;
  if (!env.plan_path.empty()) {
    std::ifstream in(env.plan_path);
    if (!in) return InvalidArgument("cannot read plan file " + env.plan_path, "TESSERA_PLAN");
    std::stringstream ss;
    ss << in.rdbuf();
    Result<Plan> parsed = ParsePlan(ss.str());
    if (!parsed.ok()) return parsed.status().WithPrefix("TESSERA_PLAN " + env.plan_path);
    plan = std::move(parsed).value();
    if (plan.layout != Layout::kData) {
      return InvalidArgument(std::string(kGanModelName) +
                                 " trains data parallel only: the plan's layout is \"" +
                                 std::string(LayoutName(plan.layout)) + "\", not \"data\"",
                             "TESSERA_PLAN");
    }
  } else if (env.world_size > 1) {
    if (o.batch < env.world_size) {
      return InvalidArgument("--batch must be at least WORLD_SIZE", "batch");
    }
    plan.layout = Layout::kData;
    plan.global_batch = o.batch;
    plan.micro_batches = 1;
    auto shares = SplitMicroBatches(o.batch, env.world_size);
    for (int r = 0; r < env.world_size; ++r) {
      plan.replicas.push_back(ReplicaPlan{shares[static_cast<size_t>(r)], {{r, 0, num_layers}}});
    }
  } else {
    if (o.batch <= 0) return InvalidArgument("must be positive", "batch");
    plan = SingleProcessPlan(o.batch, 1, num_layers);
  }
  Status v = ValidatePlan(plan, env.world_size, num_layers);
  if (!v.ok()) return v.WithPrefix("plan");
  for (const ReplicaPlan& r : plan.replicas) {
    if (r.stages.size() != 1) {
      return InvalidArgument(std::string(kGanModelName) + " trains data parallel only",
                             "TESSERA_PLAN");
    }
  }
  return plan;
}

NamedTensors AllParams(const LayeredModel& m) { return m.NamedParameters(0, m.num_layers()); }
NamedTensors AllBuffers(const LayeredModel& m) { return m.NamedBuffers(0, m.num_layers()); }

}  // namespace

Result<TrainOutcome> RunGanTraining(const TrainOptions& o, const DistEnv& env,
                                    const std::atomic<bool>& stop_requested) {
  TESSERA_ASSIGN_OR_RETURN(Backend backend, BackendForDevice(env.device));
  // The rank's own GPU becomes the current device before any CUDA work.
  TESSERA_ASSIGN_OR_RETURN(torch::Device device, SelectRankDevice(env.device, env.local_rank));
  const torch::Device comm_device = backend == Backend::kNccl ? device : torch::Device(torch::kCPU);

  ModelConfig mc;
  mc.width = o.width;
  mc.image_size = o.image_size;
  mc.seed = o.seed;
  Result<Gan> made = [&]() -> Result<Gan> {
    try {
      return MakeGan(o.model, mc);
    } catch (const std::exception& e) {
      return InvalidArgument(std::string("model construction failed: ") + e.what(), "model");
    }
  }();
  TESSERA_ASSIGN_OR_RETURN(Gan gan, std::move(made));
  LayeredModel& gen = *gan.generator;
  LayeredModel& disc = *gan.discriminator;
  const int64_t num_layers = static_cast<int64_t>(gen.num_layers() + disc.num_layers());
  TESSERA_ASSIGN_OR_RETURN(Plan plan, MakeGanPlan(o, env, num_layers));
  TESSERA_ASSIGN_OR_RETURN(RankRole role, RoleForRank(plan, env.rank));
  TESSERA_ASSIGN_OR_RETURN(
      auto images, MakeImageSource(o.data_dir, o.model, o.image_size, o.seed,
                                   LoaderThreads(o.loader_threads, device, env.local_world_size,
                                                 std::thread::hardware_concurrency())));
  // Each step's slice of the next step is loaded while this one computes.
  std::unique_ptr<BatchSource> source = MakePrefetchingSource(std::move(images), plan.global_batch);
  if (device.type() != torch::kCPU) {
    for (size_t i = 0; i < gen.num_layers(); ++i) gen.layer(i).layer->to(device);
    for (size_t i = 0; i < disc.num_layers(); ++i) disc.layer(i).layer->to(device);
  }
  gen.SetTraining(true);
  disc.SetTraining(true);

  std::unique_ptr<World> world_holder;
  if (env.world_size > 1) {
    ConnectOptions co;
    co.backend = backend;
    co.op_timeout = env.collective_timeout;
    TESSERA_ASSIGN_OR_RETURN(world_holder, ConnectWorld(env, co));
  } else {
    world_holder = MakeLocalWorld();
  }
  Collectives& world = world_holder->world();

  // One reducer per network over a group of all replicas; replicas start from
  // rank 0's parameters and buffers.
  const size_t bucket_bytes = static_cast<size_t>(std::max(0.001, o.bucket_mb) * 1024 * 1024);
  GradReducer g_reducer, d_reducer;
  std::vector<std::unique_ptr<Collectives>> groups;
  std::shared_ptr<BatchNormSync> sync;
  if (env.world_size > 1) {
    std::vector<int> ranks;
    for (int r = 0; r < env.world_size; ++r) ranks.push_back(r);
    TESSERA_ASSIGN_OR_RETURN(auto g_comm, world_holder->NewGroup("gan-generator", ranks));
    TESSERA_ASSIGN_OR_RETURN(auto d_comm, world_holder->NewGroup("gan-discriminator", ranks));
    std::vector<torch::Tensor> to_sync;
    for (const LayeredModel* m : {&gen, &disc}) {
      for (auto& [n, t] : AllParams(*m)) to_sync.push_back(t.detach());
      for (auto& [n, t] : AllBuffers(*m)) to_sync.push_back(t.detach());
    }
    TESSERA_RETURN_IF_ERROR(world.Broadcast(to_sync, 0));
    sync = std::make_shared<CollectivesBatchNormSync>(&world);
    gen.SetBatchNormSync(sync);
    disc.SetBatchNormSync(sync);
    g_reducer.AddGroup(g_comm.get(), AllParams(gen), bucket_bytes);
    d_reducer.AddGroup(d_comm.get(), AllParams(disc), bucket_bytes);
    groups.push_back(std::move(g_comm));
    groups.push_back(std::move(d_comm));
  }
  TESSERA_ASSIGN_OR_RETURN(NamedOptimizer g_opt, NamedOptimizer::Make(o.optimizer, AllParams(gen)));
  TESSERA_ASSIGN_OR_RETURN(NamedOptimizer d_opt,
                           NamedOptimizer::Make(o.optimizer, AllParams(disc)));

  auto state_tensors = [&]() {
    NamedTensors t;
    for (const LayeredModel* m : {&gen, &disc}) {
      for (auto& p : AllParams(*m)) t.push_back(p);
      for (auto& b : AllBuffers(*m)) t.push_back(b);
    }
    return t;
  };

  // Resume.
  int64_t step = 0;
  int64_t samples_seen = 0;
  if (!env.checkpoint_dir.empty()) {
    const NamedTensors state = state_tensors();
    std::vector<std::string> state_names;
    for (const auto& [n, t] : state) state_names.push_back(n);
    TESSERA_ASSIGN_OR_RETURN(
        std::optional<ResumePoint> resumed,
        ResumeFromCheckpoint(world, env.checkpoint_dir, o.model,
                             ReadNewestCheckpoint(env.checkpoint_dir, state_names), state,
                             {&g_opt, &d_opt}));
    if (resumed) {
      step = resumed->step;
      samples_seen = resumed->samples_seen;
    }
  }
  const int64_t base_step = step;
  const int64_t base_samples = samples_seen;

  auto save = [&](int64_t at_step) -> Status {
    CheckpointContent c;
    c.step = at_step;
    c.global_batch = plan.global_batch;
    c.samples_seen = base_samples + (at_step - base_step) * plan.global_batch;
    c.model = o.model;
    c.layout = std::string(LayoutName(plan.layout));
    if (role.replica == 0) {
      c.file_name = kCheckpointFile;
      c.tensors = state_tensors();
      for (auto& s : g_opt.StateTensors()) c.tensors.push_back(s);
      for (auto& s : d_opt.StateTensors()) c.tensors.push_back(s);
      c.tensors.emplace_back(kRngTensor, GetCpuRngState());
    }
    return SaveCheckpoint(world, env.checkpoint_dir, c);
  };

  ProgressWriter progress(env.progress_file);
  const EmulatedDevice emulated = SegmentClockFor(device, env.device_speed, o.threads);

  const double weight =
      static_cast<double>(role.replica_batch) / static_cast<double>(plan.global_batch);
  TrainOutcome outcome;
  auto last_save = Clock::now();
  while (step < o.steps) {
    const auto step_start = Clock::now();
    const double lr = ScheduledLearningRate(o, plan.global_batch, step);
    const int64_t first_id =
        base_samples + (step - base_step) * plan.global_batch + role.sample_offset;
    double compute_s = 0, comm_s = 0, g_loss = 0, d_loss = 0;
    try {
      TESSERA_ASSIGN_OR_RETURN(SampleBatch batch, source->Load(first_id, role.replica_batch));
      // Three compute segments of the (emulated) device, split where the rank waits
      // for its gradient all-reduces.
      EmulatedDevice::Segment seg = emulated.Begin();
      const torch::Tensor gray = ToDevice(batch.input, device);
      const torch::Tensor real = ToDevice(batch.target, device);
      torch::Tensor fake = Generate(gan, gray);

      // (a) discriminator on real vs detached fake.
      torch::Tensor dl_t = DiscriminatorStepLoss(gan, gray, real, fake);
      d_loss = dl_t.item<double>() * weight;
      d_reducer.Arm();
      (dl_t * weight).backward();
      compute_s += emulated.End(seg).busy_s;
      double waited = 0;
      TESSERA_RETURN_IF_ERROR(d_reducer.Finish(&waited));
      comm_s += waited;
      seg = emulated.Begin();
      d_opt.Step(lr);
      d_opt.ZeroGrad();

      // (b) generator: adversarial + l1_weight * L1 through the updated D.
      GeneratorLossParts parts = GeneratorStepLoss(gan, gray, real, fake);
      g_loss = parts.total.item<double>() * weight;
      g_reducer.Arm();
      (parts.total * weight).backward();
      compute_s += emulated.End(seg).busy_s;
      TESSERA_RETURN_IF_ERROR(g_reducer.Finish(&waited));
      comm_s += waited;
      seg = emulated.Begin();
      g_opt.Step(lr);
      g_opt.ZeroGrad();
      d_opt.ZeroGrad();  // gradients the generator's backward left in D
      compute_s += emulated.End(seg).busy_s;
    } catch (const std::exception& e) {
      return ComputeFailure("step " + std::to_string(step + 1) + " failed", e);
    }
    ++step;
    TESSERA_ASSIGN_OR_RETURN(
        StepEnd end, AgreeOnStepEnd(world, o, step, {g_loss, d_loss}, SecondsSince(last_save),
                                    stop_requested.load(), comm_device, &comm_s));
    const double wall = SecondsSince(step_start);
    nlohmann::json line =
        StepProgressLine(step, end.sums[0], wall > 0 ? plan.global_batch / wall : 0.0, compute_s,
                         comm_s, 0.0, env.rank);
    line["d_loss"] = end.sums[1];
    AddMemoryFields(line, role.predicted_peak_bytes, device);
    progress.Write(line);
    TESSERA_RETURN_IF_ERROR(FinishStep(end, step, env.checkpoint_dir, save, &last_save, &outcome));
    if (outcome.stopped) break;
  }
  outcome.final_step = step;
  if (!o.dump_params_dir.empty() && role.replica == 0) {
    TESSERA_RETURN_IF_ERROR(DumpParams(o.dump_params_dir, "params-gan.bin", state_tensors()));
  }
  TESSERA_RETURN_IF_ERROR(world.Barrier());
  return outcome;
}

}  // namespace tessera::worker
