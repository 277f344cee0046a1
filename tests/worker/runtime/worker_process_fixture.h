// The fixture of the tests that run real tessera-worker training processes
// over Gloo on loopback (worker_*_process_test.cc): a job of one or more
// ranks, its logs and progress files, the parameters it dumps
// (--dump-params) compared with a single-process run, and the rank plans of
// tiny-skip the tests share.
#ifndef TESSERA_TESTS_WORKER_RUNTIME_WORKER_PROCESS_FIXTURE_H_
#define TESSERA_TESTS_WORKER_RUNTIME_WORKER_PROCESS_FIXTURE_H_

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "tests/worker/runtime/process_util.h"
#include "tests/worker/runtime/temp_dir_fixture.h"
#include "worker/runtime/checkpoint.h"

namespace tessera::worker::testing {

class WorkerProcessTest : public TempDirTest {
 protected:
  // A plan-free model run: single process or a multi-rank job.
  struct Job {
    std::string plan;  // JSON; empty = single process
    int world = 1;
    std::vector<std::string> args;
    std::string checkpoint_dir;
    std::string speed;                       // TESSERA_DEVICE_SPEED
    std::string memory;                      // TESSERA_DEVICE_MEMORY
    std::map<std::string, std::string> env;  // more variables, for every rank
    bool reform_files = false;               // TESSERA_REFORM_FILE: each rank's ReformFile
  };

  // Parameters of two runs that should be equal differ by this much at most.
  static constexpr double kTolerance = 1e-5;

  // tiny-skip has 6 layers: in(pushes carry) mid1 mid2 merge(pops) mid3 head.
  static std::string DataPlan(int a, int b, int micro) {
    return R"({"layout":"data","global_batch":16,"micro_batches":)" + std::to_string(micro) +
           R"(,"replicas":[{"batch":)" + std::to_string(a) +
           R"(,"stages":[{"rank":0,"layers":[0,6]}]},{"batch":)" + std::to_string(b) +
           R"(,"stages":[{"rank":1,"layers":[0,6]}]}]})";
  }
  static std::string PipelinePlan(const std::string& schedule) {
    return R"({"layout":"pipeline","global_batch":16,"micro_batches":4,"schedule":")" + schedule +
           R"(","replicas":[{"batch":16,"stages":[{"rank":0,"layers":[0,2]},{"rank":1,"layers":[2,6]}]}]})";
  }
  static constexpr char kHybridPlan[] = R"({"layout":"hybrid","global_batch":16,"micro_batches":2,
 "schedule":"1f1b","replicas":[
 {"batch":12,"stages":[{"rank":0,"layers":[0,2]},{"rank":1,"layers":[2,6]}]},
 {"batch":4, "stages":[{"rank":2,"layers":[0,4]},{"rank":3,"layers":[4,6]}]}]})";

  static int WaitExit(pid_t pid) { return testing::WaitExit(pid, 90); }

  // Starts every rank; returns pids. Logs/progress go to <dir>/<tag>-<rank>.*
  std::vector<pid_t> Start(const Job& job, const std::string& tag) {
    std::vector<pid_t> pids;
    const int port = FreeLoopbackPort();
    std::string plan_path;
    if (!job.plan.empty()) {
      plan_path = (dir_ / (tag + "-plan.json")).string();
      std::ofstream(plan_path) << job.plan;
    }
    for (int r = 0; r < job.world; ++r) {
      std::map<std::string, std::string> env;
      if (!job.plan.empty() || job.world > 1) env = TorchrunEnv(r, job.world, port);
      pids.push_back(StartRank(job, tag, r, plan_path, std::move(env)));
    }
    return pids;
  }

  // Starts rank `r` of `job` with `env` (its world's variables) and the
  // job's: the plan at plan_path (when not empty), its files by `tag` and `r`.
  pid_t StartRank(const Job& job, const std::string& tag, int r, const std::string& plan_path,
                  std::map<std::string, std::string> env) {
    if (!plan_path.empty()) env["TESSERA_PLAN"] = plan_path;
    env["TESSERA_PROGRESS_FILE"] = Progress(tag, r).string();
    env["TESSERA_JOB_ID"] = tag;
    env["TESSERA_WORKER_TEST_HOOKS"] = "1";  // --dump-params
    if (!job.checkpoint_dir.empty()) env["TESSERA_CHECKPOINT_DIR"] = job.checkpoint_dir;
    if (!job.speed.empty()) env["TESSERA_DEVICE_SPEED"] = job.speed;
    if (!job.memory.empty()) env["TESSERA_DEVICE_MEMORY"] = job.memory;
    if (job.reform_files) env["TESSERA_REFORM_FILE"] = ReformFile(tag, r).string();
    for (const auto& [k, v] : job.env) env[k] = v;
    std::vector<std::string> args{TESSERA_WORKER_BINARY, "train"};
    args.insert(args.end(), job.args.begin(), job.args.end());
    return Spawn(args, env, Log(tag, r).string());
  }

  std::vector<int> Run(const Job& job, const std::string& tag) {
    std::vector<int> codes;
    for (pid_t pid : Start(job, tag)) codes.push_back(WaitExit(pid));
    return codes;
  }

  void ExpectAllZero(const std::vector<int>& codes, const std::string& tag) {
    for (size_t r = 0; r < codes.size(); ++r) {
      EXPECT_EQ(codes[r], 0) << tag << " rank " << r << ":\n" << LogText(tag, static_cast<int>(r));
    }
  }

  // The last "step" of a progress file (0 when there is none yet).
  static int LastProgressStep(const std::filesystem::path& p) {
    std::ifstream in(p);
    std::string line;
    int step = 0;
    while (std::getline(in, line)) {
      try {
        step = nlohmann::json::parse(line).at("step").get<int>();
      } catch (...) {
      }
    }
    return step;
  }

  // Waits, 60 s at most, until rank `r` of `tag` has reported step `step`.
  void AwaitStep(const std::string& tag, int r, int step) const {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (LastProgressStep(Progress(tag, r)) < step &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }

  std::filesystem::path Log(const std::string& tag, int r) const {
    return dir_ / (tag + "-" + std::to_string(r) + ".log");
  }
  std::string LogText(const std::string& tag, int r) const { return Slurp(Log(tag, r)); }
  std::filesystem::path Progress(const std::string& tag, int r) const {
    return dir_ / (tag + "-" + std::to_string(r) + ".progress");
  }
  std::filesystem::path ReformFile(const std::string& tag, int r) const {
    return dir_ / (tag + "-reform-" + std::to_string(r));
  }
  // Hands rank r its re-form order as its agent does: a whole file, renamed
  // into place.
  void WriteReformOrder(const std::string& tag, int r, const nlohmann::json& order) const {
    const std::filesystem::path tmp = ReformFile(tag, r).string() + ".tmp";
    std::ofstream(tmp) << order.dump();
    std::filesystem::rename(tmp, ReformFile(tag, r));
  }
  // A tiny-skip training job of `world` ranks on `plan` that re-forms mid-run:
  // slow enough (emulated speed 0.02) to be told so while it runs, each rank
  // with its own reform file, as its agent gives it.
  Job ReformingJob(const std::string& plan, int world, int steps, const std::string& tag) const {
    Job job;
    job.plan = plan;
    job.world = world;
    job.speed = "0.02";
    job.reform_files = true;
    job.env = {{"TESSERA_COLLECTIVE_TIMEOUT_S", "60"}};
    job.args = TrainArgs("tiny-skip", steps, Dump(tag));
    return job;
  }
  std::string Dump(const std::string& tag) const { return (dir_ / (tag + "-params")).string(); }

  static std::map<std::string, torch::Tensor> ReadParams(const std::string& dir) {
    std::map<std::string, torch::Tensor> out;
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
      auto m = ReadTensorFile(e.path().string());
      EXPECT_TRUE(m.ok()) << m.status().ToString();
      if (!m.ok()) continue;
      for (auto& [k, v] : *m) out[k] = v;
    }
    return out;
  }

  // Max |a - b| over every tensor; fails if the name sets differ.
  static double MaxDiff(const std::string& a_dir, const std::string& b_dir) {
    auto a = ReadParams(a_dir);
    auto b = ReadParams(b_dir);
    EXPECT_EQ(a.size(), b.size());
    EXPECT_FALSE(a.empty());
    double worst = 0;
    for (auto& [k, v] : a) {
      auto it = b.find(k);
      EXPECT_NE(it, b.end()) << k;
      if (it == b.end()) return 1e9;
      worst = std::max(worst, (v - it->second).abs().max().item<double>());
    }
    return worst;
  }

  static std::vector<std::string> TrainArgs(const std::string& model, int steps,
                                            const std::string& dump) {
    return {"--model",    model,     "--steps", std::to_string(steps), "--lr", "0.1",     "--seed",
            "7",          "--width", "16",      "--dump-params",       dump,   "--batch", "16",
            "--momentum", "0.9"};
  }

  // `count` sample images of `size` px in <dir>/images (tessera-worker
  // gen-images); "" with a failure when it fails.
  std::string GenImages(int count, int size) {
    const std::string images = (dir_ / "images").string();
    pid_t gen = Spawn({TESSERA_WORKER_BINARY, "gen-images", "--out", images, "--count",
                       std::to_string(count), "--size", std::to_string(size)},
                      {}, (dir_ / "gen.log").string());
    const int code = WaitExit(gen);
    EXPECT_EQ(code, 0) << Slurp(dir_ / "gen.log");
    return code == 0 ? images : "";
  }

  // Single-process reference run of `steps` steps; returns its dump folder.
  std::string Reference(const std::string& model, int steps) {
    const std::string tag = "ref-" + model + "-" + std::to_string(steps);
    Job job;
    job.args = TrainArgs(model, steps, Dump(tag));
    ExpectAllZero(Run(job, tag), tag);
    return Dump(tag);
  }
};

}  // namespace tessera::worker::testing

#endif  // TESSERA_TESTS_WORKER_RUNTIME_WORKER_PROCESS_FIXTURE_H_
