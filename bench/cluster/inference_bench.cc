// inference_bench: archive inference throughput of the real cluster for 1,
// 2 and 3 ranks. One cluster (tesserad + three agents, one emulated device
// of speed 1.0 each, default settings) runs the same infer job of a trained
// colorize-unet over the same generated images with max_devices = N.
//
// Measured:
//   images/s         images / (the job's "succeeded" event - its first
//                    "running" event): start-up and model loading count
//   per-rank images/s  the controller's rates (images / seconds each rank
//                    reported for its chunks)
//   efficiency       images/s at N ranks / (N x images/s at 1 rank)
// Usage: inference_bench [--images 2000] [--size 32] [--width 8] [--threads 1]
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/harness.h"

using namespace std::chrono_literals;
using tessera::testing::BinaryPath;
using tessera::testing::Cluster;
using tessera::testing::Process;
using tessera::testing::WaitFor;
namespace fs = std::filesystem;

namespace {

bool RunTool(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
             const fs::path& log) {
  Process p(argv, env, log);
  auto code = p.Wait(std::chrono::minutes(20));
  if (!code || *code != 0) {
    std::fprintf(stderr, "%s failed:\n%s\n", argv[1].c_str(), p.Log().c_str());
    return false;
  }
  return true;
}

struct Result {
  int ranks = 0;
  double images_per_s = -1;
  std::vector<double> per_rank;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"inference_bench"};
  int images = 2000, size = 32, width = 8, threads = 1;
  app.add_option("--images", images)->check(CLI::PositiveNumber);
  app.add_option("--size", size)->check(CLI::PositiveNumber);
  app.add_option("--width", width)->check(CLI::PositiveNumber);
  app.add_option("--threads", threads)->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  Cluster cluster("inference-bench", /*fast=*/false);
  const std::string worker = BinaryPath("tessera-worker");
  const fs::path in = cluster.dir() / "scans", ckpt = cluster.dir() / "model";
  if (!RunTool({worker, "gen-images", "--out", in.string(), "--count", std::to_string(images),
                "--size", std::to_string(size)},
               {}, cluster.dir() / "gen.log") ||
      !RunTool({worker, "train", "--model", "colorize-unet", "--data", in.string(), "--steps", "1",
                "--width", std::to_string(width), "--image-size", std::to_string(size), "--batch",
                "4", "--checkpoint-every-steps", "1"},
               {{"TESSERA_CHECKPOINT_DIR", ckpt.string()}}, cluster.dir() / "train.log")) {
    return 1;
  }
  cluster.StartController("worker_binary: " + worker + "\n");
  const char* one = "devices:\n  - {name: \"T4 (emulated)\", memory: 16GiB, relative_speed: 0.6}\n";
  for (const char* node : {"boxa", "boxb", "boxc"}) cluster.StartAgent(node, one);
  if (!WaitFor([&] { return cluster.HealthyNodes() == 3; }, 60s)) return 1;

  std::vector<Result> results;
  for (int ranks = 1; ranks <= 3; ++ranks) {
    int status = 0;
    auto job =
        cluster.PostJson("/api/v1/jobs",
                         {{"name", "bench-" + std::to_string(ranks)},
                          {"kind", "infer"},
                          {"entrypoint", "builtin:colorize-unet"},
                          {"dataset", in.string()},
                          {"output", (cluster.dir() / ("out-" + std::to_string(ranks))).string()},
                          {"checkpoint", ckpt.string()},
                          {"args", {"--threads", std::to_string(threads)}},
                          {"global_batch", ranks},
                          {"min_devices", ranks},
                          {"max_devices", ranks},
                          {"layout", "data"}},
                         &status);
    if (status != 201) return 1;
    const int64_t id = job["id"].get<int64_t>();
    if (!WaitFor(
            [&] { return cluster.JobState(id) == "succeeded" || cluster.JobState(id) == "failed"; },
            std::chrono::minutes(30)) ||
        cluster.JobState(id) != "succeeded") {
      std::fprintf(stderr, "job %lld did not succeed\n", static_cast<long long>(id));
      return 1;
    }
    int64_t running_ms = -1, done_ms = -1;
    for (const auto& e : cluster.Events(id)) {
      if (e.to_state == "running" && running_ms < 0) running_ms = e.ts_ms;
      if (e.to_state == "succeeded") done_ms = e.ts_ms;
    }
    Result r;
    r.ranks = ranks;
    if (running_ms > 0 && done_ms > running_ms) {
      r.images_per_s = images / ((done_ms - running_ms) / 1000.0);
    }
    auto info = cluster.GetJson("/api/v1/jobs/" + std::to_string(id))["inference"];
    for (const auto& d : info["devices"]) r.per_rank.push_back(d["images_per_s"].get<double>());
    results.push_back(r);
    std::fprintf(stderr, "%d rank(s): %.1f images/s\n", ranks, r.images_per_s);
  }

  std::printf("colorize-unet width %d, %d images of %d px, %d thread(s)/rank, %u CPU cores\n",
              width, images, size, threads, std::thread::hardware_concurrency());
  std::printf("| ranks | images/s | per-rank images/s | efficiency |\n| --- | --- | --- | --- |\n");
  const double one_rank = results.empty() ? 0 : results[0].images_per_s;
  for (const Result& r : results) {
    std::string per;
    for (double v : r.per_rank) per += (per.empty() ? "" : ", ") + std::to_string(v).substr(0, 6);
    std::printf("| %d | %.1f | %s | %.0f%% |\n", r.ranks, r.images_per_s, per.c_str(),
                one_rank > 0 ? 100.0 * r.images_per_s / (r.ranks * one_rank) : 0.0);
  }
  return 0;
}
