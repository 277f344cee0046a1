#include "worker/runtime/inference.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <set>
#include <sstream>
#include <thread>
#include <utility>

#include "common/file_system.h"
#include "worker/runtime/checkpoint.h"
#include "worker/runtime/collectives.h"
#include "worker/runtime/device_memory.h"
#include "worker/runtime/image_model_probe.h"
#include "worker/runtime/infer_pipeline.h"
#include "worker/runtime/lease_keeper.h"
#include "worker/runtime/progress_writer.h"
#include "worker/runtime/rank_device.h"
#include "worker/runtime/seconds_since.h"
#include "worker/runtime/tiled_ranks.h"

namespace tessera::worker {
namespace fs = std::filesystem;
namespace {

using SteadyClock = std::chrono::steady_clock;

int64_t UnixMillis() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Chunks kept in the pipeline at least, so that the next chunk is leased
// and being read while the current one computes.
constexpr int64_t kChunksAhead = 2;

// Leases chunks into the pipeline until the source says finished (or a
// stop), reporting each chunk once the pipeline committed it.
Status LeaseLoop(const InferOptions& o, const DistEnv& env, InferPipeline& pipeline,
                 ChunkSource& source, const std::atomic<bool>& stop, InferOutcome* outcome) {
  ProgressWriter progress(env.progress_file, /*stdout_fallback=*/true);
  std::vector<api::CompletedChunk> completed;
  std::unique_ptr<LeaseKeeper> keeper;
  const auto start = SteadyClock::now();
  const int64_t ask = std::clamp<int64_t>(o.max_chunks, 1, 64);
  int64_t images_done = 0;
  std::set<int64_t> in_flight;         // chunks in the pipeline
  auto next_ask = SteadyClock::now();  // no lease asked before (the source said wait)
  // The pipeline's finished chunks: counted, a progress line each, and the
  // reportable ones queued for the next lease call.
  auto collect = [&] {
    for (const InferChunkDone& done : pipeline.TakeDone()) {
      in_flight.erase(done.chunk);
      outcome->written += done.written;
      outcome->skipped += done.skipped;
      outcome->failed += done.failed;
      outcome->forwards += done.forwards;
      if (!done.reportable) continue;
      completed.push_back({done.chunk, done.written, done.seconds});
      ++outcome->chunks;
      images_done += done.written;
      const double wall = SecondsSince(start);
      progress.Write({{"chunk", done.chunk},
                      {"chunks_done", outcome->chunks},
                      {"images_done", images_done},
                      {"images_skipped", outcome->skipped},
                      {"images_failed", outcome->failed},
                      {"images_per_s", wall > 0 ? static_cast<double>(images_done) / wall : 0.0},
                      {"chunk_s", done.seconds},
                      {"ts_ms", UnixMillis()},
                      {"rank", env.rank}});
    }
  };
  // Reports finished chunks without asking for more.
  auto report = [&]() -> Status {
    if (completed.empty()) return Status::Ok();
    Status s = source.Lease(completed, 0).status();
    completed.clear();
    return s;
  };
  while (true) {
    collect();
    if (Status s = pipeline.status(); !s.ok()) {
      report().IgnoreError();  // best effort; the failure wins
      return s;
    }
    if (stop.load()) {
      // The model takes no more items; what it computed is written, the
      // chunks finished are reported, a chunk cut short is left to its lease.
      pipeline.Drain();
      collect();
      outcome->stopped = true;
      if (Status s = pipeline.status(); !s.ok()) {
        report().IgnoreError();
        return s;
      }
      return report();
    }
    const int64_t held = static_cast<int64_t>(in_flight.size());
    const bool want = held < std::max(kChunksAhead, ask) && SteadyClock::now() >= next_ask;
    if (want) {
      // The controller sends the chunks the rank holds again first (an answer
      // lost in transit loses no work), so the call asks for those plus the
      // new ones, and the held ones are not queued twice.
      const int64_t n = std::min<int64_t>(ask, std::max(kChunksAhead, ask) - held);
      TESSERA_ASSIGN_OR_RETURN(api::LeaseResponse lease,
                               source.Lease(completed, std::min<int64_t>(64, held + n)));
      completed.clear();
      bool fresh = false;
      for (const api::LeasedChunk& chunk : lease.chunks) {
        if (!in_flight.insert(chunk.chunk).second) continue;
        if (!keeper) keeper = std::make_unique<LeaseKeeper>(source, lease.lease_ms);
        pipeline.Submit(chunk);
        fresh = true;
      }
      if (fresh) continue;
      if (lease.finished && pipeline.idle()) return Status::Ok();
      // Nothing new: other ranks hold the rest (or, finished, a chunk of ours
      // was done by another rank while this one still works on it).
      next_ask = SteadyClock::now() +
                 std::chrono::milliseconds(std::max<int64_t>(50, lease.retry_after_ms));
    } else if (!completed.empty()) {
      TESSERA_RETURN_IF_ERROR(report());
    }
    pipeline.Wait(std::chrono::milliseconds(50));
  }
}

// Items of --data for a local run: rank r of W takes chunks r, r + W, ...
std::vector<std::string> LocalShare(const std::vector<std::string>& items, int64_t chunk_size,
                                    int rank, int world) {
  if (world <= 1) return items;
  std::vector<std::string> out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (static_cast<int64_t>(i) / chunk_size % world == rank) out.push_back(items[i]);
  }
  return out;
}

Result<std::string> ReadText(const std::string& path) {
  Result<std::string> text = FileSystem::Default()->ReadFile(path);
  if (!text.ok()) return InvalidArgument("cannot read plan file " + path, "TESSERA_PLAN");
  return text;
}

}  // namespace

Result<InferOutcome> RunInference(const InferOptions& o, const DistEnv& env,
                                  const std::atomic<bool>& stop_requested, ChunkSource* source) {
  torch::set_num_threads(std::max(1, o.threads));
  if (o.output.empty()) return InvalidArgument("an output folder is required", "output");
  if (o.max_tile_px < 0) return InvalidArgument("must not be negative", "max-tile-px");
  if (o.local_chunk_size < 1) return InvalidArgument("must be positive", "chunk-size");
  if (o.batch < 1) return InvalidArgument("must be positive", "batch");
  if (o.batch_pixels < 1) return InvalidArgument("must be positive", "batch-pixels");
  if (o.decode_threads < 1) return InvalidArgument("must be positive", "decode-threads");
  if (o.encode_threads < 1) return InvalidArgument("must be positive", "encode-threads");

  InferPlan plan;
  plan.rank_weights.assign(static_cast<size_t>(std::max(1, env.world_size)), 1);
  if (!env.plan_path.empty()) {
    TESSERA_ASSIGN_OR_RETURN(std::string text, ReadText(env.plan_path));
    Result<InferPlan> parsed = ParseInferPlan(text, env.world_size);
    if (!parsed.ok()) return parsed.status().WithPrefix("TESSERA_PLAN " + env.plan_path);
    plan = std::move(parsed).value();
  }
  const bool tiled_layout = plan.layout == Layout::kTiled;
  const bool distributed_tiles = tiled_layout && env.world_size > 1;
  if (o.model.empty() == o.model_file.empty()) {
    return InvalidArgument("name a reference model (--model) or an exported one (--model-file)",
                           "model");
  }

  // Items are needed by whoever leases: every rank, or rank 0 of a tiled layout.
  const bool leases = !distributed_tiles || env.rank == 0;
  std::vector<std::string> items;
  if (leases && o.local && source == nullptr) {
    TESSERA_ASSIGN_OR_RETURN(items, ListInputItems(o.data, o.output));
  } else if (leases) {
    std::error_code ec;
    if (o.data.empty() || !fs::exists(o.data, ec)) {
      return InvalidArgument("input " + o.data + " does not exist", "data");
    }
  }
  // The rank's own GPU becomes the current device before any CUDA work.
  TESSERA_ASSIGN_OR_RETURN(torch::Device device, SelectRankDevice(env.device, env.local_rank));
  std::unique_ptr<InferenceModel> model;
  if (o.model_file.empty()) {
    TESSERA_ASSIGN_OR_RETURN(model, InferenceModel::Load(o.model, o.checkpoint, o.width,
                                                         device.str(), env.device_speed));
  } else {
    TESSERA_ASSIGN_OR_RETURN(
        model, InferenceModel::LoadExported(o.model_file, o.image, device.str(), env.device_speed));
  }
  if (distributed_tiles && !model->spatial()) {
    return InvalidArgument(model->name() + " cannot run a tiled layout (its output is scores)",
                           "TESSERA_PLAN");
  }
  // What one forward may hold on this device, where the probe measured it.
  const int64_t pixel_budget = PixelBudget(FreeBytes(device), model->bytes_per_pixel());
  std::optional<TileSpec> tiles;
  if (model->spatial()) {
    std::optional<TileSpec> requested = tiled_layout ? plan.tiling : std::nullopt;
    if (!requested && o.max_tile_px > 0) requested = TileSpec{o.max_tile_px, 0};
    if (!requested && pixel_budget > 0) {
      const int64_t align = model->geometry().align_px;
      const auto side = static_cast<int64_t>(std::sqrt(static_cast<double>(pixel_budget)));
      requested = TileSpec{side / align * align, 0};
    }
    if (requested) {
      Result<TileSpec> eff = EffectiveTileSpec(*requested, model->geometry());
      if (!eff.ok()) {
        if (pixel_budget > 0 && o.max_tile_px == 0 && !tiled_layout) {
          return ResourceExhausted(
              "the device's free memory holds a forward of " + std::to_string(pixel_budget) +
              " pixels at most (" + std::to_string(model->bytes_per_pixel()) +
              " bytes per pixel measured), too few for a tile with this model's halo of " +
              std::to_string(model->geometry().halo_px) + " px: " + eff.status().message());
        }
        return eff.status();
      }
      tiles = *eff;
      if (!model->halo_bounded() && env.rank == 0) {
        std::fprintf(stderr,
                     "tessera-worker: %s changes its whole output for one input pixel (a "
                     "receptive field beyond %lld px): tiled images may differ from whole ones "
                     "near tile seams; state image.halo_px to choose the overlap\n",
                     model->name().c_str(), static_cast<long long>(model->geometry().halo_px));
      }
    } else if (distributed_tiles) {
      return InvalidArgument("a tiled plan needs \"tiling\": {\"tile_px\", ...} or --max-tile-px",
                             "TESSERA_PLAN");
    }
  }
  std::error_code ec;
  fs::create_directories(o.output, ec);
  if (ec) return InvalidArgument("cannot create output folder " + o.output, "output");
  if (env.rank == 0) {
    const api::ImageConvention& c = model->convention();
    std::fprintf(stderr,
                 "tessera-worker: %s from %s (input %s, output %s, range [%g, %g], align %lld px, "
                 "halo %lld px), layout %s, %s\n",
                 model->name().c_str(), model->source().c_str(), c.input.c_str(), c.output.c_str(),
                 c.range->first, c.range->second, static_cast<long long>(c.align_px),
                 static_cast<long long>(c.halo_px), std::string(LayoutName(plan.layout)).c_str(),
                 tiles ? ("tiles of " + std::to_string(tiles->tile_px) + " px, overlap " +
                          std::to_string(tiles->overlap_px) + " px")
                             .c_str()
                       : "whole images");
  }

  InferOutcome outcome;
  InferPipelineOptions po;
  po.output_dir = o.output;
  po.data_root = DataRoot(o.data);
  po.decode_threads = o.decode_threads;
  po.encode_threads = o.encode_threads;
  po.batch = o.batch;
  po.batch_pixels = pixel_budget > 0 ? std::min(o.batch_pixels, pixel_budget) : o.batch_pixels;
  po.tiles = tiles;
  po.write_faults = o.write_faults;
  po.before_item = o.before_item;
  po.stop = &stop_requested;

  std::unique_ptr<World> world;
  std::unique_ptr<TiledRanks> ranks;
  if (distributed_tiles) {
    // Tiles travel as host tensors over Gloo on every device: ranks > 0 wait in a
    // receive while rank 0 leases, reads and writes, and a Gloo wait sleeps in the
    // host, where an NCCL one would keep the GPU spinning for as long. Images are
    // decoded and encoded on the host anyway; each rank moves its tiles to its GPU.
    ConnectOptions co;
    co.backend = Backend::kGloo;
    // TESSERA_COLLECTIVE_TIMEOUT_S may only lengthen that wait; the agents stop
    // the survivors of a lost node.
    co.op_timeout =
        std::max<std::chrono::milliseconds>(env.collective_timeout, std::chrono::minutes(15));
    TESSERA_ASSIGN_OR_RETURN(world, ConnectWorld(env, co));
    const torch::Device comm_device(torch::kCPU);
    std::vector<int64_t> weights = plan.rank_weights;
    if (std::all_of(weights.begin(), weights.end(), [](int64_t w) { return w <= 0; })) {
      weights.assign(weights.size(), 1);
    }
    ranks = std::make_unique<TiledRanks>(world->world(), *model, *tiles, weights, comm_device);
    if (env.rank != 0) {
      TESSERA_ASSIGN_OR_RETURN(int64_t served, ranks->Serve());
      std::fprintf(stderr, "tessera-worker: rank %d computed %lld tiles of %lld images\n", env.rank,
                   static_cast<long long>(ranks->tiles_computed()), static_cast<long long>(served));
      return outcome;
    }
    po.compute_one = [&ranks](const torch::Tensor& input) { return ranks->Run(input); };
    po.batches = false;
  }

  std::unique_ptr<ChunkSource> owned_source;
  if (source == nullptr) {
    if (o.local) {
      const int share_world = distributed_tiles ? 1 : env.world_size;
      MemoryChunkQueueOptions qo;
      qo.chunk_size = o.local_chunk_size;
      auto queue = MemoryChunkQueue::Create(
          LocalShare(items, o.local_chunk_size, env.rank, share_world), qo);
      owned_source = queue->ForRank(env.rank);
    } else {
      if (o.controller_url.empty()) {
        return InvalidArgument(
            "no controller: set TESSERA_CONTROLLER_URL, or use --local to process --data "
            "without one",
            "TESSERA_CONTROLLER_URL");
      }
      HttpChunkSourceOptions ho;
      ho.controller_url = o.controller_url;
      ho.token = o.lease_token;
      ho.job_id = env.job_id;
      ho.attempt = env.attempt;
      ho.rank = env.rank;
      TESSERA_ASSIGN_OR_RETURN(owned_source, MakeHttpChunkSource(std::move(ho)));
    }
    source = owned_source.get();
  }

  Status loop;
  {
    InferPipeline pipeline(*model, po);
    loop = LeaseLoop(o, env, pipeline, *source, stop_requested, &outcome);
  }
  if (ranks) {
    Status fin = ranks->Finish(/*abort=*/!loop.ok());
    if (loop.ok() && !fin.ok()) loop = fin;
  }
  if (!loop.ok()) return loop;
  std::fprintf(stderr,
               "tessera-worker: rank %d wrote %lld, skipped %lld, failed %lld images in %lld "
               "chunks, %lld forward passes%s\n",
               env.rank, static_cast<long long>(outcome.written),
               static_cast<long long>(outcome.skipped), static_cast<long long>(outcome.failed),
               static_cast<long long>(outcome.chunks), static_cast<long long>(outcome.forwards),
               outcome.stopped ? " (stopped)" : "");
  return outcome;
}

}  // namespace tessera::worker
