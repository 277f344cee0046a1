// Integration tests: real tessera-worker training processes talking over Gloo
// on loopback, each layout (data, pipeline, hybrid) compared parameter by
// parameter with a single-process run; the progress lines, an emulated
// device's memory, bad plans, and collectives-check over two ranks.
// (Failure and recovery: worker_recovery_process_test.cc; the image models
// and a lab's own model: worker_model_process_test.cc.)
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/worker/runtime/worker_process_fixture.h"

namespace tessera::worker {
namespace {
namespace fs = std::filesystem;
using testing::FreeLoopbackPort;
using testing::Spawn;
using testing::TorchrunEnv;
using testing::WorkerProcessTest;

TEST_F(WorkerProcessTest, DataParallelEqualsSingleProcess) {
  const std::string ref = Reference("tiny-skip", 6);
  struct Case {
    const char* name;
    int a, b, micro;
    bool loss_scaling;
  };
  for (const Case& c : {Case{"even", 8, 8, 1, false}, Case{"uneven_3_to_1", 12, 4, 2, false},
                        Case{"uneven_loss_scaled", 12, 4, 1, true}}) {
    Job job;
    job.plan = DataPlan(c.a, c.b, c.micro);
    job.world = 2;
    job.args = TrainArgs("tiny-skip", 6, Dump(c.name));
    job.args.push_back("--bucket-mb");
    job.args.push_back("0.001");  // several buckets
    if (c.loss_scaling) job.args.push_back("--loss-scaling");
    ExpectAllZero(Run(job, c.name), c.name);
    EXPECT_LE(MaxDiff(ref, Dump(c.name)), kTolerance) << c.name;
  }
}

TEST_F(WorkerProcessTest, PipelineEqualsSingleProcess) {
  const std::string ref = Reference("tiny-skip", 6);
  for (const std::string schedule : {"gpipe", "1f1b"}) {
    Job job;
    job.plan = PipelinePlan(schedule);
    job.world = 2;
    job.args = TrainArgs("tiny-skip", 6, Dump(schedule));
    ExpectAllZero(Run(job, schedule), schedule);
    EXPECT_LE(MaxDiff(ref, Dump(schedule)), kTolerance) << schedule;
    EXPECT_GT(LastProgressStep(Progress(schedule, 1)), 0);
  }
}

// NCCL matches the sends and receives between two ranks by issue order alone (it
// ignores tags) and runs a pair's operations of one group on one stream, so
// every layout must (a) stay correct with tags ignored and (b) issue, for every
// pair and group, rank a's operations toward b as the mirror of b's toward a
// (a send where the other receives, same size, same order), or it deadlocks
// on GPUs. Gloo runs the ranks here with every tag sent as 0 and each rank's
// point-to-point operations traced (test hooks).
struct P2pOp {
  std::string group, op;
  int peer = 0;
  long long elements = 0;
};

std::vector<P2pOp> ReadP2pTrace(const fs::path& path) {
  std::vector<P2pOp> ops;
  std::ifstream in(path);
  P2pOp op;
  while (in >> op.group >> op.op >> op.peer >> op.elements) ops.push_back(op);
  return ops;
}

// Returns "" when every pair's operations mirror each other, else the first mismatch.
std::string P2pOrderMismatch(const std::vector<std::vector<P2pOp>>& by_rank) {
  const int n = static_cast<int>(by_rank.size());
  for (int a = 0; a < n; ++a) {
    for (int b = a + 1; b < n; ++b) {
      std::map<std::string, std::vector<std::string>> from_a, from_b;  // group -> ops
      for (const P2pOp& op : by_rank[static_cast<size_t>(a)]) {
        if (op.peer == b) from_a[op.group].push_back(op.op + " " + std::to_string(op.elements));
      }
      for (const P2pOp& op : by_rank[static_cast<size_t>(b)]) {
        if (op.peer != a) continue;
        const std::string mirrored = op.op == "send" ? "recv" : "send";
        from_b[op.group].push_back(mirrored + " " + std::to_string(op.elements));
      }
      if (from_a == from_b) continue;
      for (const auto& [group, ops] : from_a) {
        const auto& other = from_b[group];
        for (size_t i = 0; i < std::max(ops.size(), other.size()); ++i) {
          const std::string x = i < ops.size() ? ops[i] : "(none)";
          const std::string y = i < other.size() ? other[i] : "(none)";
          if (x != y) {
            return "ranks " + std::to_string(a) + "," + std::to_string(b) + " group " + group +
                   " operation " + std::to_string(i) + ": rank " + std::to_string(a) + " " + x +
                   ", rank " + std::to_string(b) + " mirrored " + y;
          }
        }
      }
      return "ranks " + std::to_string(a) + "," + std::to_string(b) + ": groups differ";
    }
  }
  return "";
}

TEST_F(WorkerProcessTest, PipelinesWithTagsIgnoredEqualOneProcessAndMirrorTheirSendRecvOrder) {
  const std::string ref = Reference("tiny-skip", 6);
  struct Case {
    std::string name, plan;
    int world;
  };
  for (const Case& c :
       {Case{"nccl-gpipe", PipelinePlan("gpipe"), 2}, Case{"nccl-1f1b", PipelinePlan("1f1b"), 2},
        Case{"nccl-hybrid", kHybridPlan, 4}}) {
    Job job;
    job.plan = c.plan;
    job.world = c.world;
    job.args = TrainArgs("tiny-skip", 6, Dump(c.name));
    job.env = {{"TESSERA_P2P_IGNORE_TAGS", "1"},
               {"TESSERA_P2P_TRACE", (dir_ / (c.name + "-p2p")).string()}};
    ExpectAllZero(Run(job, c.name), c.name);
    EXPECT_LE(MaxDiff(ref, Dump(c.name)), kTolerance) << c.name;
    std::vector<std::vector<P2pOp>> traces;
    size_t ops = 0;
    for (int r = 0; r < c.world; ++r) {
      traces.push_back(ReadP2pTrace(dir_ / (c.name + "-p2p." + std::to_string(r))));
      ops += traces.back().size();
    }
    EXPECT_GT(ops, 0u) << c.name << ": no point-to-point operation traced";
    EXPECT_EQ(P2pOrderMismatch(traces), "") << c.name;
  }
}

TEST_F(WorkerProcessTest, HybridTwoByTwoEqualsSingleProcess) {
  const std::string ref = Reference("tiny-skip", 6);
  Job job;
  job.plan = kHybridPlan;
  job.world = 4;
  job.args = TrainArgs("tiny-skip", 6, Dump("hybrid"));
  ExpectAllZero(Run(job, "hybrid"), "hybrid");
  EXPECT_LE(MaxDiff(ref, Dump("hybrid")), kTolerance);
}

// collectives-check over two real ranks (Gloo on the CPU here; NCCL on GPUs): each
// rank checks the all-reduced sum and the broadcast, and prints one JSON line.
TEST_F(WorkerProcessTest, CollectivesCheckPassesOnTwoRanks) {
  const int port = FreeLoopbackPort();
  std::vector<pid_t> pids;
  for (int r = 0; r < 2; ++r) {
    std::map<std::string, std::string> env = TorchrunEnv(r, 2, port);
    env["TESSERA_DEVICE"] = "cpu";
    pids.push_back(
        Spawn({TESSERA_WORKER_BINARY, "collectives-check", "--size-mb", "1", "--iters", "3"}, env,
              Log("check", r).string()));
  }
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(WaitExit(pids[static_cast<size_t>(r)]), 0) << LogText("check", r);
    const std::string log = LogText("check", r);
    const std::string last = log.substr(log.rfind('{'));
    const nlohmann::json j = nlohmann::json::parse(last);
    EXPECT_EQ(j.at("backend"), "gloo");
    EXPECT_EQ(j.at("world_size"), 2);
    EXPECT_EQ(j.at("rank"), r);
    EXPECT_TRUE(j.at("allreduce_ok").get<bool>()) << log;
    EXPECT_TRUE(j.at("broadcast_ok").get<bool>()) << log;
    EXPECT_GT(j.at("allreduce_ms").get<double>(), 0.0);
  }
  // A GPU this machine lacks is a clear error (exit 1), not a crash.
  pid_t gpu = Spawn({TESSERA_WORKER_BINARY, "collectives-check", "--size-mb", "1"},
                    {{"TESSERA_DEVICE", "cuda:0"}}, Log("check-gpu", 0).string());
  if (!torch::cuda::is_available()) {
    EXPECT_EQ(WaitExit(gpu), 1);
    EXPECT_NE(LogText("check-gpu", 0).find("CUDA sees no GPU"), std::string::npos)
        << LogText("check-gpu", 0);
  } else {
    EXPECT_EQ(WaitExit(gpu), 0) << LogText("check-gpu", 0);
  }
}

TEST_F(WorkerProcessTest, ProgressLinesHaveTheContractFields) {
  Job job;
  job.plan = DataPlan(12, 4, 1);
  job.world = 2;
  job.args = TrainArgs("tiny-skip", 3, Dump("p"));
  ExpectAllZero(Run(job, "p"), "p");
  std::ifstream in(Progress("p", 1));
  std::string line;
  int lines = 0;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    for (const char* k :
         {"step", "loss", "samples_per_s", "compute_s", "comm_s", "bubble_s", "ts_ms", "rank"}) {
      EXPECT_TRUE(j.contains(k)) << k;
    }
    EXPECT_EQ(j["rank"], 1);
    ++lines;
  }
  EXPECT_EQ(lines, 3);
}

// An emulated device's declared memory: progress lines report the counted peak next
// to the planner's prediction; a rank whose tensors exceed the memory fails as a GPU
// out of memory does, with a message saying so.
TEST_F(WorkerProcessTest, EmulatedMemoryIsReportedAndEnforced) {
  Job job;
  job.plan = R"({"layout":"data","global_batch":16,"micro_batches":1,"replicas":[
    {"batch":8,"stages":[{"rank":0,"layers":[0,6],"peak_memory_bytes":3000000}]},
    {"batch":8,"stages":[{"rank":1,"layers":[0,6],"peak_memory_bytes":3000000}]}]})";
  job.world = 2;
  job.memory = std::to_string(int64_t{512} << 20);
  job.args = TrainArgs("tiny-skip", 2, Dump("fits"));
  ExpectAllZero(Run(job, "fits"), "fits");
  std::ifstream in(Progress("fits", 0));
  std::string line;
  ASSERT_TRUE(std::getline(in, line));
  auto j = nlohmann::json::parse(line);
  ASSERT_TRUE(j.contains("peak_memory_bytes")) << line;
  EXPECT_GT(j["peak_memory_bytes"].get<int64_t>(), 16 * 16 * 4) << "weights at least";
  EXPECT_LT(j["peak_memory_bytes"].get<int64_t>(), int64_t{512} << 20);
  EXPECT_EQ(j["predicted_peak_memory_bytes"].get<int64_t>(), 3000000);

  Job small = job;
  // Half of what the same run needed at its peak.
  small.memory = std::to_string(j["peak_memory_bytes"].get<int64_t>() / 2);
  small.args = TrainArgs("tiny-skip", 2, Dump("oom"));
  for (int code : Run(small, "oom")) EXPECT_NE(code, 0);
  const std::string log = LogText("oom", 0) + LogText("oom", 1);
  EXPECT_NE(log.find("resource_exhausted"), std::string::npos) << log;
  EXPECT_NE(log.find("emulated device out of memory"), std::string::npos) << log;
  EXPECT_NE(log.find("TESSERA_DEVICE_MEMORY"), std::string::npos) << log;
}

// `profile --device`: the CPU as before ("device": "cpu"); a GPU this machine lacks
// is a clear error naming the device, not a crash; on a machine with one, the
// profile is measured there ("device": "cuda:0", clock "cuda_wall").
TEST_F(WorkerProcessTest, ProfileMeasuresOnTheDeviceItNames) {
  const std::vector<std::string> args = {TESSERA_WORKER_BINARY,
                                         "profile",
                                         "--model",
                                         "colorize-unet",
                                         "--batch",
                                         "2",
                                         "--image-size",
                                         "32",
                                         "--width",
                                         "4",
                                         "--repeats",
                                         "1",
                                         "--optimizer",
                                         "sgd"};
  for (const std::string device : {"cpu", "cuda:0"}) {
    std::vector<std::string> with = args;
    with.insert(with.end(), {"--device", device});
    const std::string tag = "profile-" + device.substr(0, 3);
    const int code = WaitExit(Spawn(with, {}, Log(tag, 0).string()));
    const std::string log = LogText(tag, 0);
    if (device == "cpu" || torch::cuda::is_available()) {
      ASSERT_EQ(code, 0) << log;
      const nlohmann::json j = nlohmann::json::parse(log.substr(log.find('{')));
      EXPECT_EQ(j.at("device"), device);
      if (device != "cpu") {
        EXPECT_EQ(j.at("clock"), "cuda_wall");
      }
      EXPECT_TRUE(j.at("layers").at(0).contains("opt_ms")) << log;
    } else {
      EXPECT_EQ(code, 1) << log;
      EXPECT_NE(log.find("CUDA sees no GPU"), std::string::npos) << log;
      EXPECT_EQ(log.find("\"layers\""), std::string::npos) << log;
    }
  }
  // The GAN's whole-step profile has no GPU meter: refused on a GPU (exit 2).
  const int gan = WaitExit(
      Spawn({TESSERA_WORKER_BINARY, "profile", "--model", "gan-pix2pix", "--device", "cuda:0"}, {},
            Log("profile-gan", 0).string()));
  EXPECT_NE(gan, 0) << LogText("profile-gan", 0);
}

TEST_F(WorkerProcessTest, BadPlanExitsTwoWithMessage) {
  Job job;
  job.plan = R"({"layout":"data","global_batch":16,"replicas":[
    {"batch":12,"stages":[{"rank":0,"layers":[0,6]}]},
    {"batch":3,"stages":[{"rank":1,"layers":[0,6]}]}]})";
  job.world = 2;
  job.args = TrainArgs("tiny-skip", 2, Dump("bad"));
  auto codes = Run(job, "bad");
  ASSERT_EQ(codes.size(), 2u);
  EXPECT_EQ(codes[0], 2);
  EXPECT_NE(LogText("bad", 0).find("global_batch"), std::string::npos) << LogText("bad", 0);
  Job unknown;
  unknown.args = {"--model", "no-such-model", "--steps", "1"};
  EXPECT_EQ(Run(unknown, "unknown")[0], 2);
}

}  // namespace
}  // namespace tessera::worker
