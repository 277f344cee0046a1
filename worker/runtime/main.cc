// tessera-worker: the reference LibTorch worker.
//
//   tessera-worker train --model NAME --data DIR [--steps N] [--lr F] ...
//   tessera-worker profile --model NAME [--batch B] [--threads T] [--device cpu|cuda:N]
//   tessera-worker gen-images --out DIR --count N --size S
//   tessera-worker infer --model NAME --data DIR|LIST --output DIR --checkpoint DIR
//                        [--local] [--max-tile-px N] [--width W] [--threads T]
//                        [--batch B] [--batch-pixels P] [--decode-threads D]
//                        [--encode-threads E]
//
// infer: chunks come from the controller (TESSERA_CONTROLLER_URL,
// TESSERA_LEASE_TOKEN, TESSERA_JOB_ID, TESSERA_ATTEMPT) or, with --local,
// from --data itself (no controller; see worker/runtime/inference.h).
//
// Exit codes: 0 success (also after SIGTERM when a checkpoint was saved, and
// for a rank a planned re-form left out),
// 2 bad arguments or plan (message on stderr), 1 runtime failure, 75
// (api::kPeerLostExitCode) a collective failed because a peer vanished.
#include <malloc.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <memory>
#include <string_view>

#include "api/agent_protocol.h"
#include "worker/runtime/collectives.h"
#include "worker/runtime/collectives_check.h"
#include "worker/runtime/dist_env.h"
#include "worker/runtime/emulated_memory.h"
#include "worker/runtime/rank_device.h"
#include "worker/runtime/tiny_models.h"
#include "worker/runtime/trainer.h"
#include "worker/runtime/transport_guard.h"

#ifdef TESSERA_HAVE_WORKER_MODEL
#include "worker/model/profile.h"
#endif
#ifdef TESSERA_HAVE_WORKER_DATA
#include "worker/runtime/device_profile.h"
#include "worker/runtime/gan_profile.h"
#include "worker/runtime/gan_trainer.h"
#include "worker/runtime/image_source.h"
#include "worker/runtime/inference.h"
#include "worker/runtime/optimizer_profile.h"
#include "worker/runtime/tiling.h"
#endif

namespace {

std::atomic<bool> g_stop{false};

extern "C" void OnSigterm(int) { g_stop.store(true); }

int ExitCodeFor(const tessera::Status& s) {
  return s.code() == tessera::StatusCode::kInvalidArgument ? 2 : 1;
}

// --value-range=lo,hi into `c` (nothing when the flag was not given).
tessera::Status SetValueRange(const std::string& text, tessera::api::ImageConvention* c) {
  if (text.empty()) return tessera::Status::Ok();
  auto range = tessera::api::ParseValueRange(text, "value-range");
  if (!range.ok()) return range.status();
  c->range = *range;
  return tessera::Status::Ok();
}

int Fail(const tessera::Status& s) {
  std::fprintf(stderr, "tessera-worker: %s\n", s.ToString().c_str());
  // A peer vanished: a status of its own, so the controller checks its node at once.
  if (tessera::worker::PeerLost()) return static_cast<int>(tessera::api::kPeerLostExitCode);
  return ExitCodeFor(s);
}

// run(), with an exception that compute threw (LibTorch, c10d) as the Status
// that names it (tessera::worker::ComputeFailure).
template <typename Run>
auto CatchComputeFailure(std::string_view what, const Run& run) -> decltype(run()) {
  try {
    return run();
  } catch (const std::exception& e) {
    return tessera::worker::ComputeFailure(what, e);
  }
}

// Counts the rank's CPU tensors; on an emulated device (TESSERA_DEVICE cpu with
// TESSERA_DEVICE_MEMORY) they may not exceed the device's declared memory.
void InstallDeviceMemory(const tessera::worker::DistEnv& env) {
  tessera::worker::EmulatedMemory::Install(env.device == "cpu" ? env.device_memory_bytes : 0);
}

}  // namespace

int main(int argc, char** argv) {
  // Keep freed tensor memory in the process: glibc would otherwise return large
  // blocks to the kernel every step and fault them back in (19% of a DnCNN step in
  // the kernel, bench/worker/pytorch_compare.py).
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
  // A reset connection fails the rank's collectives instead of killing the
  // rank (SIGPIPE, or Gloo's transport thread throwing: transport_guard.h).
  tessera::worker::InstallTransportGuard();
  using namespace tessera;
  using namespace tessera::worker;
  CLI::App app{"tessera-worker: reference LibTorch worker"};
  app.require_subcommand(1);

  TrainOptions opt;
  auto* train = app.add_subcommand("train", "train a model (torchrun environment, TESSERA_PLAN)");
  auto* train_model = train->add_option("--model", opt.model, "reference or tiny model name");
  auto* train_file = train->add_option(
      "--model-file", opt.model_file,
      "a TorchScript module whose top-level children are its layers (a scripted nn.Sequential)");
  train_model->excludes(train_file);
  train->add_option("--loss", opt.loss, "--model-file: mse | l1 | cross_entropy")
      ->check(CLI::IsMember({"mse", "l1", "cross_entropy"}));
  std::string train_range;
  train->add_option("--image-input", opt.image.input, "--model-file: rgb | gray | l")
      ->check(CLI::IsMember({"rgb", "gray", "l"}));
  train->add_option("--image-output", opt.image.output, "--model-file: rgb | gray | ab | scores")
      ->check(CLI::IsMember({"rgb", "gray", "ab", "scores"}));
  train->add_option("--value-range", train_range, "--model-file: black,white (default 0,1)");
  train
      ->add_option("--align-px", opt.image.align_px,
                   "--model-file: sides must be multiples of this (training crops are "
                   "--image-size)")
      ->check(CLI::Range(int64_t{1}, tessera::api::kMaxAlignPx));
  train->add_option("--halo-px", opt.image.halo_px, "--model-file: accepted, for inference")
      ->check(CLI::Range(int64_t{0}, tessera::api::kMaxHaloPx));
  train->add_option("--data", opt.data_dir, "image folder (unused by tiny-* models)");
  train->add_option("--steps", opt.steps, "total optimizer steps")->check(CLI::NonNegativeNumber);
  train->add_option("--lr", opt.lr, "learning rate (at --base-batch when given)")
      ->check(CLI::PositiveNumber);
  train->add_option("--seed", opt.seed, "seed for parameters and data order");
  train->add_option("--image-size", opt.image_size, "square crop size")->check(CLI::PositiveNumber);
  train->add_option("--width", opt.width, "base channel count")->check(CLI::PositiveNumber);
  train->add_option("--batch", opt.batch, "global batch without TESSERA_PLAN")
      ->check(CLI::PositiveNumber);
  train->add_option("--micro-batches", opt.micro_batches, "micro-batches without TESSERA_PLAN")
      ->check(CLI::PositiveNumber);
  train->add_option("--checkpoint-every-steps", opt.checkpoint_every_steps)
      ->check(CLI::NonNegativeNumber);
  train->add_option("--checkpoint-every-s", opt.checkpoint_every_s)->check(CLI::NonNegativeNumber);
  train->add_option("--base-batch", opt.base_batch, "batch at which --lr is given")
      ->check(CLI::NonNegativeNumber);
  train->add_option("--warmup-steps", opt.warmup_steps)->check(CLI::NonNegativeNumber);
  train->add_option("--optimizer", opt.optimizer.kind, "sgd | adam")
      ->check(CLI::IsMember({"sgd", "adam"}));
  train->add_option("--momentum", opt.optimizer.momentum)->check(CLI::Range(0.0, 1.0));
  train->add_option("--weight-decay", opt.optimizer.weight_decay)->check(CLI::NonNegativeNumber);
  train->add_option("--bucket-mb", opt.bucket_mb, "gradient all-reduce bucket size")
      ->check(CLI::PositiveNumber);
  train->add_option("--threads", opt.threads, "intra-op threads")->check(CLI::PositiveNumber);
  train
      ->add_option(
          "--loader-threads", opt.loader_threads,
          "threads decoding and preparing each batch's images (default: on a CUDA device the "
          "rank's share of the host's threads less one, at most 16; else 1)")
      ->check(CLI::PositiveNumber);
  train->add_option("--trace-out", opt.trace.path,
                    "write a PyTorch profiler trace (Chrome trace JSON) of a few steps to this "
                    "file: their host operators and, on a GPU, kernels and copies");
  train->add_option("--trace-from", opt.trace.first_step, "the first step traced")
      ->check(CLI::PositiveNumber);
  train->add_option("--trace-steps", opt.trace.steps, "how many steps are traced")
      ->check(CLI::PositiveNumber);
  train->add_flag("!--no-amp", opt.amp, "CUDA: no autocast / loss scaling");
  train->add_flag("--loss-scaling", opt.loss_scaling,
                  "dynamic loss scaling on any device (always on with CUDA autocast)");
  train->add_option("--dump-params", opt.dump_params_dir,
                    "test hook: write final parameters (by name) into this folder (only with "
                    "TESSERA_WORKER_TEST_HOOKS=1)");

  std::string profile_model;
  int64_t profile_batch = 8;
  int64_t profile_size = 64;
  int64_t profile_width = 16;
  int profile_repeats = 3;
  int profile_threads = 1;
  int64_t profile_fixed_batch = 0;
  tessera::worker::OptimizerConfig profile_optimizer;
  auto* profile = app.add_subcommand("profile", "print the model's per-layer profile as JSON");
  std::string profile_file, profile_loss = "mse", profile_input, profile_output, profile_range;
  auto* profile_model_opt = profile->add_option("--model", profile_model);
  profile_model_opt->excludes(profile->add_option(
      "--model-file", profile_file, "a TorchScript sequence of layers (as train --model-file)"));
  profile->add_option("--loss", profile_loss, "--model-file: mse | l1 | cross_entropy");
  profile->add_option("--image-input", profile_input, "--model-file: rgb | gray | l");
  profile->add_option("--image-output", profile_output, "--model-file: rgb | gray | ab | scores");
  profile->add_option("--value-range", profile_range, "--model-file: black,white");
  profile->add_option("--batch", profile_batch)->check(CLI::PositiveNumber);
  profile->add_option("--image-size", profile_size)->check(CLI::PositiveNumber);
  profile->add_option("--width", profile_width)->check(CLI::PositiveNumber);
  profile->add_option("--repeats", profile_repeats)->check(CLI::PositiveNumber);
  profile
      ->add_option("--threads", profile_threads,
                   "intra-op threads (default 1, as a rank of `train` and `infer` computes by "
                   "default: its CPU times are then one thread's, which a busy host does not "
                   "stretch)")
      ->check(CLI::PositiveNumber);
  std::string profile_device = "cpu";
  profile->add_option("--device", profile_device,
                      "where to measure: cpu, cuda or cuda:N (a GPU: wall milliseconds and the "
                      "CUDA allocator's bytes)");
  profile
      ->add_option("--fixed-batch", profile_fixed_batch,
                   "also profile at this smaller batch (and one between it and --batch) and "
                   "split each layer's time into fwd_fixed_ms/bwd_fixed_ms per call + per "
                   "sample, fitted through every batch")
      ->check(CLI::PositiveNumber);
  profile
      ->add_option("--optimizer", profile_optimizer.kind,
                   "also time one step of this optimizer over each layer (opt_ms): sgd | adam")
      ->check(CLI::IsMember({"sgd", "adam"}));

  std::string gen_out;
  int64_t gen_count = 16;
  int64_t gen_size = 64;
  uint64_t gen_seed = 1;
  auto* gen = app.add_subcommand("gen-images", "write generated sample images");
  gen->add_option("--out", gen_out)->required();
  gen->add_option("--count", gen_count)->check(CLI::PositiveNumber);
  gen->add_option("--size", gen_size)->check(CLI::PositiveNumber);
  gen->add_option("--seed", gen_seed);

  tessera::worker::CollectivesCheckOptions check_opt;
  auto* check = app.add_subcommand(
      "collectives-check",
      "all-reduce, broadcast and barrier over the world (torchrun environment, TESSERA_DEVICE: "
      "NCCL on cuda, Gloo on cpu); prints one JSON line per rank");
  check->add_option("--size-mb", check_opt.size_mb, "all-reduced tensor size")
      ->check(CLI::PositiveNumber);
  check->add_option("--iters", check_opt.iters, "timed all-reduces")->check(CLI::PositiveNumber);

  CLI::App* infer = nullptr;
#ifdef TESSERA_HAVE_WORKER_DATA
  InferOptions infer_opt;
  infer = app.add_subcommand(
      "infer", "run a trained model over a folder or list file (chunk leases, atomic outputs)");
  auto* infer_model = infer->add_option("--model", infer_opt.model, "reference model name");
  auto* infer_file =
      infer->add_option("--model-file", infer_opt.model_file,
                        "an exported module: TorchScript file or AOTInductor package (.pt2)");
  infer_model->excludes(infer_file);
  infer->add_option("--data", infer_opt.data, "input folder or list file")->required();
  infer->add_option("--output", infer_opt.output, "output folder")->required();
  auto* infer_checkpoint =
      infer->add_option("--checkpoint", infer_opt.checkpoint,
                        "--model: checkpoint directory (newest complete step-N is loaded)");
  infer_checkpoint->excludes(infer_file);
  std::string value_range;
  infer
      ->add_option("--image-input", infer_opt.image.input,
                   "--model-file: rgb | gray | l (default: the module's tessera.json, or probed)")
      ->check(CLI::IsMember({"rgb", "gray", "l"}));
  infer
      ->add_option("--image-output", infer_opt.image.output,
                   "--model-file: rgb | gray | ab | scores (default: as --image-input)")
      ->check(CLI::IsMember({"rgb", "gray", "ab", "scores"}));
  infer->add_option("--value-range", value_range,
                    "--model-file: black,white of rgb/gray tensors (default 0,1)");
  infer
      ->add_option("--align-px", infer_opt.image.align_px,
                   "--model-file: sides must be multiples of this (default: probed)")
      ->check(CLI::Range(int64_t{1}, tessera::api::kMaxAlignPx));
  infer
      ->add_option("--halo-px", infer_opt.image.halo_px,
                   "--model-file: receptive-field radius for tiles (default: probed)")
      ->check(CLI::Range(int64_t{0}, tessera::api::kMaxHaloPx));
  infer->add_option("--width", infer_opt.width, "base channel count (default: from checkpoint)")
      ->check(CLI::NonNegativeNumber);
  infer
      ->add_option("--max-tile-px", infer_opt.max_tile_px,
                   "tile images larger than this side (default: whole images)")
      ->check(CLI::NonNegativeNumber);
  infer->add_option("--threads", infer_opt.threads, "intra-op threads")->check(CLI::PositiveNumber);
  infer->add_option("--max-chunks", infer_opt.max_chunks, "chunks asked for per lease")
      ->check(CLI::Range(1, 64));
  infer->add_option("--batch", infer_opt.batch, "images of one size per forward at most")
      ->check(CLI::PositiveNumber);
  infer
      ->add_option("--batch-pixels", infer_opt.batch_pixels,
                   "padded pixels per forward at most (default 131072)")
      ->check(CLI::PositiveNumber);
  infer->add_option("--decode-threads", infer_opt.decode_threads, "threads reading images")
      ->check(CLI::Range(1, 64));
  infer->add_option("--encode-threads", infer_opt.encode_threads, "threads writing outputs")
      ->check(CLI::Range(1, 64));
  infer->add_flag("--local", infer_opt.local,
                  "no controller: process every image of --data (ranks share it out)");
  infer->add_option("--chunk-size", infer_opt.local_chunk_size, "--local: images per chunk")
      ->check(CLI::PositiveNumber);
#endif

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }

  if (*train) {
    // Test hooks write wherever they are told. Jobs cannot reach them: the API
    // refuses their options, and TESSERA_* env keys are Tessera's own.
    const char* hooks = std::getenv("TESSERA_WORKER_TEST_HOOKS");
    if (!opt.dump_params_dir.empty() && (hooks == nullptr || std::string(hooks) != "1")) {
      std::fprintf(stderr,
                   "tessera-worker: --dump-params is a test hook (TESSERA_WORKER_TEST_HOOKS=1)\n");
      return 2;
    }
    if (opt.model.empty() == opt.model_file.empty()) {
      return Fail(
          InvalidArgument("name a model (--model) or a TorchScript file (--model-file)", "model"));
    }
    if (Status r = SetValueRange(train_range, &opt.image); !r.ok()) return Fail(r);
    std::signal(SIGTERM, OnSigterm);
    auto env = ReadDistEnv(ProcessEnv());
    if (!env.ok()) return Fail(env.status());
    InstallDeviceMemory(*env);
    Result<TrainOutcome> out =
        CatchComputeFailure("training", [&] { return RunTraining(opt, *env, g_stop); });
    if (!out.ok()) return Fail(out.status());
    if (out->left_out_of) {
      std::fprintf(stderr,
                   "tessera-worker: left out of the re-formed attempt (generation %lld) at step "
                   "%lld\n",
                   static_cast<long long>(*out->left_out_of),
                   static_cast<long long>(out->final_step));
      return 0;
    }
    if (out->stopped) {
      if (out->checkpoint_saved) {
        std::fprintf(stderr, "tessera-worker: stopped at step %lld after saving a checkpoint\n",
                     static_cast<long long>(out->final_step));
        return 0;
      }
      std::fprintf(stderr,
                   "tessera-worker: stopped at step %lld without a checkpoint "
                   "(no TESSERA_CHECKPOINT_DIR)\n",
                   static_cast<long long>(out->final_step));
      return 1;
    }
    return 0;
  }
  if (*check) {
    auto env = ReadDistEnv(ProcessEnv());
    if (!env.ok()) return Fail(env.status());
    Result<nlohmann::json> report = CatchComputeFailure(
        "collectives-check", [&] { return RunCollectivesCheck(*env, check_opt); });
    if (!report.ok()) return Fail(report.status());
    std::cout << report->dump() << "\n";
    const bool ok = (*report)["allreduce_ok"].get<bool>() && (*report)["broadcast_ok"].get<bool>();
    return ok ? 0 : 1;
  }
  if (*profile) {
#ifdef TESSERA_HAVE_WORKER_MODEL
    torch::set_num_threads(profile_threads);
    ModelConfig mc;
    mc.image_size = profile_size;
    mc.width = profile_width;
#ifdef TESSERA_HAVE_WORKER_DATA
    if (profile_model == "classifier-resnet") mc.num_classes = SampleImageClasses();
#endif
    std::function<Result<nlohmann::json>(int64_t)> profile_at;
    std::shared_ptr<LayeredModel> profiled;  // the model profile_at measures, when layered
    auto device = tessera::worker::SelectRankDevice(profile_device, /*local_rank=*/0);
    if (!device.ok()) {
      return Fail(Status(device.status().code(), device.status().message(), "device"));
    }
    // A GPU's meter; the CPU's (and its counting allocator) lives for each call.
    std::unique_ptr<tessera::worker::ProfileMeter> gpu_meter;
    if (!device->is_cpu()) gpu_meter = tessera::worker::MakeDeviceProfileMeter(*device);
    // The layered model's parameters on the measured device, then profile_at.
    auto measure_on_device = [&](const std::shared_ptr<LayeredModel>& net,
                                 std::vector<int64_t> in_shape) {
      for (size_t i = 0; i < net->num_layers(); ++i) net->layer(i).layer->to(*device);
      profiled = net;
      profile_at = [&, net, in = std::move(in_shape)](int64_t batch) {
        return gpu_meter ? ProfileModel(*gpu_meter, *net, batch, in, profile_repeats)
                         : ProfileModel(*net, batch, in, profile_repeats);
      };
    };
#ifdef TESSERA_HAVE_WORKER_DATA
    if (profile_model == tessera::worker::kGanModelName) {
      if (!device->is_cpu()) {
        return Fail(InvalidArgument("gan-pix2pix is profiled on the CPU only", "device"));
      }
      // Generator and discriminator train together (data parallel only): whole steps.
      profile_at = [&](int64_t batch) {
        tessera::worker::GanProfileOptions go;
        go.batch = batch;
        go.image_size = profile_size;
        go.width = profile_width;
        go.repeats = profile_repeats;
        return tessera::worker::ProfileGan(go);
      };
    }
#endif
    if (!profile_at && !profile_file.empty()) {
      TrainOptions so;
      so.model_file = profile_file;
      so.loss = profile_loss;
      so.image_size = profile_size;
      so.image.input = profile_input;
      so.image.output = profile_output;
      if (Status r = SetValueRange(profile_range, &so.image); !r.ok()) return Fail(r);
      tessera::api::ImageConvention convention;
      std::vector<int64_t> shape;
      auto model = BuildScriptedModel(so, &convention, &shape);
      if (!model.ok()) return Fail(model.status());
      measure_on_device(*model, shape);
    } else if (profile_model.empty() && profile_file.empty()) {
      return Fail(
          InvalidArgument("name a model (--model) or a TorchScript file (--model-file)", "model"));
    }
    if (!profile_at) {
      auto model = BuildModel(profile_model, mc);
      if (!model.ok()) return Fail(model.status());
      auto shape = IsTinyModelName(profile_model)
                       ? Result<std::vector<int64_t>>(std::vector<int64_t>{kTinyInputFeatures})
                       : ModelInputShape(profile_model, profile_size);
      if (!shape.ok()) return Fail(shape.status());
      measure_on_device(*model, *shape);
    }
    auto json = profile_at(profile_batch);
    if (!json.ok()) return Fail(json.status());
    if (profile_fixed_batch > 0) {
      if (profile_fixed_batch >= profile_batch) {
        return Fail(InvalidArgument("--fixed-batch must be smaller than --batch", "fixed_batch"));
      }
      std::vector<nlohmann::json> smaller;
      for (int64_t b : FixedCostBatches(profile_fixed_batch, profile_batch)) {
        auto small = profile_at(b);
        if (!small.ok()) return Fail(small.status());
        smaller.push_back(*std::move(small));
      }
      json = WithFixedCosts(std::move(*json), smaller);
      if (!json.ok()) return Fail(json.status());
    }
#ifdef TESSERA_HAVE_WORKER_DATA
    // The GAN's whole-step times include its optimizer steps already.
    if (profiled) {
      Status opt = gpu_meter
                       ? tessera::worker::AddOptimizerCosts(
                             *gpu_meter, *profiled, profile_optimizer, profile_repeats, &*json)
                       : tessera::worker::AddOptimizerCosts(*profiled, profile_optimizer,
                                                            profile_repeats, &*json);
      if (!opt.ok()) return Fail(opt);
    }
#endif
#ifdef TESSERA_HAVE_WORKER_DATA
    // Tiled inference: receptive-field radius and stride (null: not tileable).
    auto geometry = profile_file.empty() ? TileGeometryForModel(profile_model)
                                         : Result<TileGeometry>(InvalidArgument("not known", ""));
    (*json)["halo_px"] = geometry.ok() ? nlohmann::json(geometry->halo_px) : nlohmann::json();
    (*json)["align_px"] = geometry.ok() ? nlohmann::json(geometry->align_px) : nlohmann::json();
#endif
    std::cout << json->dump(1) << "\n";
    return 0;
#else
    return Fail(Unimplemented("profile needs worker/model (not in this build)"));
#endif
  }
  if (infer != nullptr && *infer) {
#ifdef TESSERA_HAVE_WORKER_DATA
    std::signal(SIGTERM, OnSigterm);
    auto env = ReadDistEnv(ProcessEnv());
    if (!env.ok()) return Fail(env.status());
    if (infer_opt.model.empty() == infer_opt.model_file.empty()) {
      return Fail(
          InvalidArgument("name a reference model (--model) or an exported one "
                          "(--model-file)",
                          "model"));
    }
    if (!infer_opt.model.empty() && infer_opt.checkpoint.empty()) {
      return Fail(InvalidArgument("--model needs --checkpoint", "checkpoint"));
    }
    const bool image_flags = !infer_opt.image.empty() || !value_range.empty();
    if (image_flags && infer_opt.model_file.empty()) {
      return Fail(InvalidArgument("the image convention flags are for --model-file", "model-file"));
    }
    if (Status r = SetValueRange(value_range, &infer_opt.image); !r.ok()) return Fail(r);
    if (const char* url = std::getenv("TESSERA_CONTROLLER_URL")) infer_opt.controller_url = url;
    if (const char* token = std::getenv("TESSERA_LEASE_TOKEN")) infer_opt.lease_token = token;
    InstallDeviceMemory(*env);
    Result<InferOutcome> out =
        CatchComputeFailure("inference", [&] { return RunInference(infer_opt, *env, g_stop); });
    if (!out.ok()) return Fail(out.status());
    return 0;
#else
    return Fail(Unimplemented("infer needs worker/model and worker/data (not in this build)"));
#endif
  }
  if (*gen) {
#ifdef TESSERA_HAVE_WORKER_DATA
    Status s = WriteSampleImages(gen_out, gen_count, gen_size, gen_seed);
    if (!s.ok()) return Fail(s);
    return 0;
#else
    return Fail(Unimplemented("gen-images needs worker/data (not in this build)"));
#endif
  }
  return 2;
}
