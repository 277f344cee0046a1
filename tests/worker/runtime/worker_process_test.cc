// Integration tests: real tessera-worker processes talking over Gloo on
// loopback, compared parameter by parameter with a single-process run.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <torch/script.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "api/agent_protocol.h"
#include "tests/worker/runtime/process_util.h"
#include "worker/runtime/checkpoint.h"

namespace tessera::worker {
namespace {
namespace fs = std::filesystem;
using testing::FreeLoopbackPort;
using testing::Spawn;

int WaitExit(pid_t pid, int timeout_s = 90) { return testing::WaitExit(pid, timeout_s); }

std::string ReadText(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int LastProgressStep(const fs::path& p) {
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

[[maybe_unused]] std::vector<double> ProgressLosses(const fs::path& p) {
  std::ifstream in(p);
  std::string line;
  std::vector<double> out;
  while (std::getline(in, line)) out.push_back(nlohmann::json::parse(line).at("loss"));
  return out;
}

// A plan-free model run: single process or a multi-rank job.
struct Job {
  std::string plan;  // JSON; empty = single process
  int world = 1;
  std::vector<std::string> args;
  std::string checkpoint_dir;
  std::string speed;                       // TESSERA_DEVICE_SPEED
  std::string memory;                      // TESSERA_DEVICE_MEMORY
  std::map<std::string, std::string> env;  // more variables, for every rank
};

class WorkerProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tessera-wrt-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
  }
  void TearDown() override {
    if (!HasFailure()) {
      std::error_code ec;
      fs::remove_all(dir_, ec);
    } else {
      std::fprintf(stderr, "kept %s for inspection\n", dir_.c_str());
    }
  }

  // Starts every rank; returns pids. Logs/progress go to <dir>/<tag>-<rank>.*
  std::vector<pid_t> Start(const Job& job, const std::string& tag) {
    std::vector<pid_t> pids;
    const std::string port = std::to_string(FreeLoopbackPort());
    std::string plan_path;
    if (!job.plan.empty()) {
      plan_path = (dir_ / (tag + "-plan.json")).string();
      std::ofstream(plan_path) << job.plan;
    }
    for (int r = 0; r < job.world; ++r) {
      std::map<std::string, std::string> env;
      if (!job.plan.empty() || job.world > 1) {
        env = {{"RANK", std::to_string(r)},       {"WORLD_SIZE", std::to_string(job.world)},
               {"LOCAL_RANK", std::to_string(r)}, {"LOCAL_WORLD_SIZE", std::to_string(job.world)},
               {"MASTER_ADDR", "127.0.0.1"},      {"MASTER_PORT", port}};
        if (!plan_path.empty()) env["TESSERA_PLAN"] = plan_path;
      }
      env["TESSERA_PROGRESS_FILE"] = Progress(tag, r).string();
      env["TESSERA_JOB_ID"] = tag;
      env["TESSERA_WORKER_TEST_HOOKS"] = "1";  // --dump-params
      if (!job.checkpoint_dir.empty()) env["TESSERA_CHECKPOINT_DIR"] = job.checkpoint_dir;
      if (!job.speed.empty()) env["TESSERA_DEVICE_SPEED"] = job.speed;
      if (!job.memory.empty()) env["TESSERA_DEVICE_MEMORY"] = job.memory;
      for (const auto& [k, v] : job.env) env[k] = v;
      std::vector<std::string> args{TESSERA_WORKER_BINARY, "train"};
      args.insert(args.end(), job.args.begin(), job.args.end());
      pids.push_back(Spawn(args, env, Log(tag, r).string()));
    }
    return pids;
  }

  std::vector<int> Run(const Job& job, const std::string& tag) {
    std::vector<int> codes;
    for (pid_t pid : Start(job, tag)) codes.push_back(WaitExit(pid));
    return codes;
  }

  void ExpectAllZero(const std::vector<int>& codes, const std::string& tag) {
    for (size_t r = 0; r < codes.size(); ++r) {
      EXPECT_EQ(codes[r], 0) << tag << " rank " << r << ":\n" << ReadText(Log(tag, r));
    }
  }

  fs::path Log(const std::string& tag, int r) const {
    return dir_ / (tag + "-" + std::to_string(r) + ".log");
  }
  fs::path Progress(const std::string& tag, int r) const {
    return dir_ / (tag + "-" + std::to_string(r) + ".progress");
  }
  std::string Dump(const std::string& tag) const { return (dir_ / (tag + "-params")).string(); }

  static std::map<std::string, torch::Tensor> ReadParams(const std::string& dir) {
    std::map<std::string, torch::Tensor> out;
    for (const auto& e : fs::directory_iterator(dir)) {
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

  // Single-process reference run of `steps` steps; returns its dump folder.
  std::string Reference(const std::string& model, int steps) {
    const std::string tag = "ref-" + model + "-" + std::to_string(steps);
    Job job;
    job.args = TrainArgs(model, steps, Dump(tag));
    ExpectAllZero(Run(job, tag), tag);
    return Dump(tag);
  }

  // `count` sample images of `size` px in <dir>/images (tessera-worker
  // gen-images); "" with a failure when it fails.
  std::string GenImages(int count, int size) {
    const std::string images = (dir_ / "images").string();
    pid_t gen = Spawn({TESSERA_WORKER_BINARY, "gen-images", "--out", images, "--count",
                       std::to_string(count), "--size", std::to_string(size)},
                      {}, (dir_ / "gen.log").string());
    const int code = WaitExit(gen);
    EXPECT_EQ(code, 0) << ReadText(dir_ / "gen.log");
    return code == 0 ? images : "";
  }

  fs::path dir_;
};

constexpr double kTolerance = 1e-5;

// tiny-skip has 6 layers: in(pushes carry) mid1 mid2 merge(pops) mid3 head.
std::string DataPlan(int a, int b, int micro) {
  return R"({"layout":"data","global_batch":16,"micro_batches":)" + std::to_string(micro) +
         R"(,"replicas":[{"batch":)" + std::to_string(a) +
         R"(,"stages":[{"rank":0,"layers":[0,6]}]},{"batch":)" + std::to_string(b) +
         R"(,"stages":[{"rank":1,"layers":[0,6]}]}]})";
}
std::string PipelinePlan(const std::string& schedule) {
  return R"({"layout":"pipeline","global_batch":16,"micro_batches":4,"schedule":")" + schedule +
         R"(","replicas":[{"batch":16,"stages":[{"rank":0,"layers":[0,2]},{"rank":1,"layers":[2,6]}]}]})";
}
constexpr char kHybridPlan[] = R"({"layout":"hybrid","global_batch":16,"micro_batches":2,
 "schedule":"1f1b","replicas":[
 {"batch":12,"stages":[{"rank":0,"layers":[0,2]},{"rank":1,"layers":[2,6]}]},
 {"batch":4, "stages":[{"rank":2,"layers":[0,4]},{"rank":3,"layers":[4,6]}]}]})";

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
  const std::string port = std::to_string(FreeLoopbackPort());
  std::vector<pid_t> pids;
  for (int r = 0; r < 2; ++r) {
    std::map<std::string, std::string> env = {
        {"RANK", std::to_string(r)},       {"WORLD_SIZE", "2"},
        {"LOCAL_RANK", std::to_string(r)}, {"LOCAL_WORLD_SIZE", "2"},
        {"MASTER_ADDR", "127.0.0.1"},      {"MASTER_PORT", port},
        {"TESSERA_DEVICE", "cpu"}};
    pids.push_back(
        Spawn({TESSERA_WORKER_BINARY, "collectives-check", "--size-mb", "1", "--iters", "3"}, env,
              Log("check", r).string()));
  }
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(WaitExit(pids[static_cast<size_t>(r)]), 0) << ReadText(Log("check", r));
    const std::string log = ReadText(Log("check", r));
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
    EXPECT_NE(ReadText(Log("check-gpu", 0)).find("CUDA sees no GPU"), std::string::npos)
        << ReadText(Log("check-gpu", 0));
  } else {
    EXPECT_EQ(WaitExit(gpu), 0) << ReadText(Log("check-gpu", 0));
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

TEST_F(WorkerProcessTest, KillNineThenResumeEqualsUninterruptedRun) {
  const int kSteps = 40;
  const std::string ref = Reference("tiny-skip", kSteps);
  const std::string ckpt = (dir_ / "ckpt").string();
  Job job;
  job.plan = DataPlan(12, 4, 1);
  job.world = 2;
  job.checkpoint_dir = ckpt;
  job.speed = "0.01";  // emulated slow device: each step takes ~100x its compute
  job.args = TrainArgs("tiny-skip", kSteps, Dump("resumed"));
  job.args.insert(job.args.end(), {"--checkpoint-every-steps", "5"});
  auto pids = Start(job, "first");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (LastProgressStep(Progress("first", 0)) < 17 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  for (pid_t p : pids) ::kill(p, SIGKILL);
  for (pid_t p : pids) EXPECT_EQ(WaitExit(p), 128 + SIGKILL);
  const int reached = LastProgressStep(Progress("first", 0));
  ASSERT_GE(reached, 17);
  ASSERT_LT(reached, kSteps) << "the run finished before it was killed";
  EXPECT_FALSE(fs::exists(Dump("resumed")));
  // An unfinished newer write (no manifest, short file) must be ignored.
  fs::create_directories(fs::path(ckpt) / "step-1000");
  std::ofstream(fs::path(ckpt) / "step-1000" / "layers-0-6.bin") << "partial";

  job.speed.clear();
  ExpectAllZero(Run(job, "second"), "second");
  const std::string log = ReadText(Log("second", 1));
  EXPECT_NE(log.find("resumed from step-"), std::string::npos) << log;
  EXPECT_EQ(log.find("resumed from step-1000"), std::string::npos) << log;
  EXPECT_LE(MaxDiff(ref, Dump("resumed")), kTolerance);
}

// A rank whose peer vanished (kill -9) exits with kPeerLostExitCode, not the
// generic failure code, so the controller checks the peer's node at once.
TEST_F(WorkerProcessTest, SurvivorOfAKilledPeerExitsWithThePeerLostCode) {
  Job job;
  job.plan = DataPlan(12, 4, 1);
  job.world = 2;
  job.speed = "0.01";
  job.args = TrainArgs("tiny-skip", 100000, Dump("never"));
  auto pids = Start(job, "peer");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (LastProgressStep(Progress("peer", 0)) < 2 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_GE(LastProgressStep(Progress("peer", 0)), 2);
  ::kill(pids[0], SIGKILL);
  EXPECT_EQ(WaitExit(pids[0]), 128 + SIGKILL);
  EXPECT_EQ(WaitExit(pids[1]), static_cast<int>(api::kPeerLostExitCode))
      << ReadText(Log("peer", 1));
}

// Re-forming (worker/runtime/reform.h): one rank is killed mid-run; the
// survivors keep their processes, are handed a new world (new port, new plan)
// through their reform files, agree on the newest completed step, fetch the
// layers their new stage lacks (parameters and momentum) from the survivors
// that hold them, and finish. The result equals an uninterrupted run: no
// completed step was redone or lost, and the state moved exactly.
TEST_F(WorkerProcessTest, SurvivorsOfAKillReformAndEqualAnUninterruptedRun) {
  const int kSteps = 14;
  const std::string ref = Reference("tiny-skip", kSteps);
  constexpr char kThreeReplicas[] = R"({"layout":"data","global_batch":16,"micro_batches":1,
   "replicas":[{"batch":6,"stages":[{"rank":0,"layers":[0,6]}]},
   {"batch":5,"stages":[{"rank":1,"layers":[0,6]}]},
   {"batch":5,"stages":[{"rank":2,"layers":[0,6]}]}]})";
  struct Case {
    const char* name;
    std::string plan;
    int world;
    int killed;
    std::vector<int> new_ranks;  // by old rank: its rank in the new world, -1: left out
    std::string new_plan;
  };
  const Case cases[] = {
      // Rank 0 (the old rendezvous host) dies; nobody needs a layer.
      {"data3_to_data2", kThreeReplicas, 3, 0, {-1, 0, 1}, DataPlan(10, 6, 1)},
      // Stage 2 of replica B dies; old rank 1 ([2,6]) needs layers 0-1 and old
      // rank 2 ([0,4]) layers 4-5, from the survivors; old rank 0 is left out.
      {"hybrid_to_data2", kHybridPlan, 4, 3, {-1, 0, 1, -1}, DataPlan(9, 7, 2)},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string tag = c.name;
    Job job;
    job.plan = c.plan;
    job.world = c.world;
    job.speed = "0.02";  // slow enough to kill mid-run
    job.args = TrainArgs("tiny-skip", kSteps, Dump(tag));
    auto reform_file = [&](int r) { return dir_ / (tag + "-reform-" + std::to_string(r)); };
    // Each rank's own file, as its agent gives it (the fixture's env is per job).
    std::vector<pid_t> pids;
    {
      const std::string port = std::to_string(FreeLoopbackPort());
      const std::string plan_path = (dir_ / (tag + "-plan.json")).string();
      std::ofstream(plan_path) << job.plan;
      for (int r = 0; r < c.world; ++r) {
        std::map<std::string, std::string> env = {
            {"RANK", std::to_string(r)},       {"WORLD_SIZE", std::to_string(c.world)},
            {"LOCAL_RANK", std::to_string(r)}, {"LOCAL_WORLD_SIZE", std::to_string(c.world)},
            {"MASTER_ADDR", "127.0.0.1"},      {"MASTER_PORT", port},
            {"TESSERA_PLAN", plan_path},       {"TESSERA_PROGRESS_FILE", Progress(tag, r).string()},
            {"TESSERA_DEVICE_SPEED", job.speed}, {"TESSERA_REFORM_FILE", reform_file(r).string()},
            {"TESSERA_COLLECTIVE_TIMEOUT_S", "60"},
            {"TESSERA_WORKER_TEST_HOOKS", "1"}};
        std::vector<std::string> args{TESSERA_WORKER_BINARY, "train"};
        args.insert(args.end(), job.args.begin(), job.args.end());
        pids.push_back(Spawn(args, env, Log(tag, r).string()));
      }
    }
    const int watch = c.killed == 0 ? 1 : 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (LastProgressStep(Progress(tag, watch)) < 4 &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ASSERT_GE(LastProgressStep(Progress(tag, watch)), 4);
    ::kill(pids[static_cast<size_t>(c.killed)], SIGKILL);
    EXPECT_EQ(WaitExit(pids[static_cast<size_t>(c.killed)]), 128 + SIGKILL);
    ASSERT_LT(LastProgressStep(Progress(tag, watch)), kSteps) << "finished before the kill";

    const int new_world = static_cast<int>(
        std::count_if(c.new_ranks.begin(), c.new_ranks.end(), [](int r) { return r >= 0; }));
    const std::string port = std::to_string(FreeLoopbackPort());
    for (int r = 0; r < c.world; ++r) {
      const int nr = c.new_ranks[static_cast<size_t>(r)];
      if (nr < 0) continue;
      nlohmann::json order = {
          {"generation", 1},
          {"env",
           {{"RANK", std::to_string(nr)},
            {"WORLD_SIZE", std::to_string(new_world)},
            {"LOCAL_RANK", std::to_string(nr)},
            {"LOCAL_WORLD_SIZE", std::to_string(new_world)},
            {"MASTER_ADDR", "127.0.0.1"},
            {"MASTER_PORT", port}}},
          {"plan", nlohmann::json::parse(c.new_plan)}};
      const fs::path tmp = reform_file(r).string() + ".tmp";
      std::ofstream(tmp) << order.dump();
      fs::rename(tmp, reform_file(r));
    }
    for (int r = 0; r < c.world; ++r) {
      if (r == c.killed) continue;
      const pid_t pid = pids[static_cast<size_t>(r)];
      if (c.new_ranks[static_cast<size_t>(r)] < 0) {
        // Left out: its agent stops it (it may be blocked in a collective
        // with a survivor that left, until the stop grace runs out).
        ::kill(pid, SIGKILL);
        EXPECT_EQ(WaitExit(pid), 128 + SIGKILL);
      } else {
        EXPECT_EQ(WaitExit(pid), 0) << ReadText(Log(tag, r));
        EXPECT_NE(ReadText(Log(tag, r)).find("re-formed world 1"), std::string::npos)
            << ReadText(Log(tag, r));
      }
    }
    EXPECT_LE(MaxDiff(ref, Dump(tag)), kTolerance);
  }
}

TEST_F(WorkerProcessTest, SigtermSavesCheckpointAndExitsZero) {
  const std::string ckpt = (dir_ / "ckpt").string();
  Job job;
  job.plan = PipelinePlan("1f1b");
  job.world = 2;
  job.checkpoint_dir = ckpt;
  job.speed = "0.01";
  job.args = TrainArgs("tiny-skip", 100000, Dump("unused"));
  auto pids = Start(job, "term");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (LastProgressStep(Progress("term", 1)) < 4 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  for (pid_t p : pids) ::kill(p, SIGTERM);
  for (size_t r = 0; r < pids.size(); ++r) {
    EXPECT_EQ(WaitExit(pids[r]), 0) << ReadText(Log("term", static_cast<int>(r)));
  }
  std::vector<std::string> skipped;
  auto m = FindNewestCheckpoint(ckpt, &skipped);
  ASSERT_TRUE(m.has_value());
  const int saved = static_cast<int>(m->step);
  EXPECT_GE(saved, 4);
  EXPECT_EQ(saved, LastProgressStep(Progress("term", 0)));
  // The saved state continues exactly like an uninterrupted run.
  Job resume;
  resume.checkpoint_dir = ckpt;
  resume.args = TrainArgs("tiny-skip", saved + 3, Dump("after-term"));
  ExpectAllZero(Run(resume, "after-term"), "after-term");
  EXPECT_LE(MaxDiff(Reference("tiny-skip", saved + 3), Dump("after-term")), kTolerance);
}

TEST_F(WorkerProcessTest, CheckpointResumesOntoAnotherLayout) {
  const std::string ref = Reference("tiny-skip", 10);
  struct Case {
    const char* name;
    std::string first_plan;
    std::string second_plan;
    int second_world;
  };
  const Case cases[] = {
      {"data_to_pipeline", DataPlan(12, 4, 1), PipelinePlan("gpipe"), 2},
      {"pipeline_to_data", PipelinePlan("1f1b"), DataPlan(8, 8, 2), 2},
      {"pipeline_to_hybrid", PipelinePlan("gpipe"), kHybridPlan, 4},
  };
  for (const Case& c : cases) {
    const std::string ckpt = (dir_ / (std::string(c.name) + "-ckpt")).string();
    Job first;
    first.plan = c.first_plan;
    first.world = 2;
    first.checkpoint_dir = ckpt;
    first.args = TrainArgs("tiny-skip", 5, Dump(std::string(c.name) + "-first"));
    ExpectAllZero(Run(first, std::string(c.name) + "-a"), c.name);
    Job second = first;
    second.plan = c.second_plan;
    second.world = c.second_world;
    second.args = TrainArgs("tiny-skip", 10, Dump(c.name));
    ExpectAllZero(Run(second, std::string(c.name) + "-b"), c.name);
    EXPECT_NE(ReadText(Log(std::string(c.name) + "-b", 0)).find("resumed from step-5"),
              std::string::npos);
    EXPECT_LE(MaxDiff(ref, Dump(c.name)), kTolerance) << c.name;
  }
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
  const std::string log = ReadText(Log("oom", 0)) + ReadText(Log("oom", 1));
  EXPECT_NE(log.find("resource_exhausted"), std::string::npos) << log;
  EXPECT_NE(log.find("emulated device out of memory"), std::string::npos) << log;
  EXPECT_NE(log.find("TESSERA_DEVICE_MEMORY"), std::string::npos) << log;
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
  EXPECT_NE(ReadText(Log("bad", 0)).find("global_batch"), std::string::npos)
      << ReadText(Log("bad", 0));
  Job unknown;
  unknown.args = {"--model", "no-such-model", "--steps", "1"};
  EXPECT_EQ(Run(unknown, "unknown")[0], 2);
}

#ifdef TESSERA_HAVE_WORKER_DATA
TEST_F(WorkerProcessTest, ColorizationLossFalls) {
  const std::string images = GenImages(32, 24);
  ASSERT_FALSE(images.empty());
  Job job;
  job.args = {
      "--model",     "colorize-unet", "--data", images,    "--image-size", "16",   "--width",
      "4",           "--batch",       "8",      "--steps", "30",           "--lr", "0.01",
      "--optimizer", "adam",          "--seed", "3"};
  ExpectAllZero(Run(job, "color"), "color");
  auto losses = ProgressLosses(Progress("color", 0));
  ASSERT_EQ(losses.size(), 30u);
  const double first = (losses[0] + losses[1] + losses[2]) / 3;
  const double last = (losses[27] + losses[28] + losses[29]) / 3;
  EXPECT_LT(last, first * 0.9) << "first " << first << " last " << last;
}

// denoiser-dncnn has batch norm in every middle layer: with the runtime's
// BatchNormSync, 2-rank data parallel (shares 5:3) and a 2x2 hybrid cut
// differently per replica both equal one process, running statistics included.
TEST_F(WorkerProcessTest, SyncBatchNormDataParallelAndHybridEqualSingleProcess) {
  const std::string images = GenImages(16, 20);
  ASSERT_FALSE(images.empty());
  auto args = [&](const std::string& dump) {
    return std::vector<std::string>{"--model",       "denoiser-dncnn",
                                    "--data",        images,
                                    "--image-size",  "16",
                                    "--width",       "4",
                                    "--batch",       "8",
                                    "--steps",       "3",
                                    "--lr",          "0.05",
                                    "--seed",        "3",
                                    "--dump-params", dump};
  };
  Job single;
  single.args = args(Dump("bn-single"));
  ExpectAllZero(Run(single, "bn-single"), "bn-single");
  Job dp;
  dp.world = 2;
  dp.plan = R"({"layout":"data","global_batch":8,"replicas":[
    {"batch":5,"stages":[{"rank":0,"layers":[0,10]}]},
    {"batch":3,"stages":[{"rank":1,"layers":[0,10]}]}]})";
  dp.args = args(Dump("bn-dp"));
  ExpectAllZero(Run(dp, "bn-dp"), "bn-dp");
  EXPECT_LE(MaxDiff(Dump("bn-single"), Dump("bn-dp")), kTolerance);
  Job hybrid;
  hybrid.world = 4;
  hybrid.plan = R"({"layout":"hybrid","global_batch":8,"schedule":"1f1b","replicas":[
    {"batch":5,"stages":[{"rank":0,"layers":[0,4]},{"rank":1,"layers":[4,10]}]},
    {"batch":3,"stages":[{"rank":2,"layers":[0,6]},{"rank":3,"layers":[6,10]}]}]})";
  hybrid.args = args(Dump("bn-hybrid"));
  ExpectAllZero(Run(hybrid, "bn-hybrid"), "bn-hybrid");
  EXPECT_LE(MaxDiff(Dump("bn-single"), Dump("bn-hybrid")), kTolerance);
}
// gan-pix2pix (13 layers: generator then discriminator; 48-pixel crops keep
// the discriminator's batch-norm statistics well conditioned) trains data parallel
// only: 2 ranks (even without a plan, 5:3 with one) equal one process on the
// full batch for both networks; a checkpoint of 2 steps written by one
// process resumes on 2 ranks to the same parameters.
TEST_F(WorkerProcessTest, GanDataParallelEqualsSingleProcess) {
  const std::string images = GenImages(16, 52);
  ASSERT_FALSE(images.empty());
  auto args = [&](int steps, const std::string& dump) {
    return std::vector<std::string>{
        "--model", "gan-pix2pix", "--data",  images, "--image-size",  "48",
        "--width", "4",           "--batch", "8",    "--steps",       std::to_string(steps),
        "--lr",    "0.01",        "--seed",  "3",    "--dump-params", dump};
  };
  Job single;
  single.args = args(3, Dump("gan-single"));
  ExpectAllZero(Run(single, "gan-single"), "gan-single");
  const auto params = ReadParams(Dump("gan-single"));
  bool has_g = false, has_d = false;
  for (const auto& [k, v] : params) {
    has_g = has_g || k.rfind("g_", 0) == 0;
    has_d = has_d || k.rfind("d_", 0) == 0;
  }
  EXPECT_TRUE(has_g && has_d);
  std::ifstream progress(Progress("gan-single", 0));
  std::string line;
  ASSERT_TRUE(std::getline(progress, line));
  auto j = nlohmann::json::parse(line);
  EXPECT_TRUE(j.contains("loss") && j.contains("d_loss")) << line;

  Job even;
  even.world = 2;
  even.args = args(3, Dump("gan-even"));
  ExpectAllZero(Run(even, "gan-even"), "gan-even");
  EXPECT_LE(MaxDiff(Dump("gan-single"), Dump("gan-even")), kTolerance);

  Job uneven;
  uneven.world = 2;
  uneven.plan = R"({"layout":"data","global_batch":8,"replicas":[
    {"batch":5,"stages":[{"rank":0,"layers":[0,13]}]},
    {"batch":3,"stages":[{"rank":1,"layers":[0,13]}]}]})";
  uneven.args = args(3, Dump("gan-uneven"));
  ExpectAllZero(Run(uneven, "gan-uneven"), "gan-uneven");
  EXPECT_LE(MaxDiff(Dump("gan-single"), Dump("gan-uneven")), kTolerance);

  const std::string ckpt = (dir_ / "gan-ckpt").string();
  Job first;
  first.checkpoint_dir = ckpt;
  first.args = args(2, Dump("gan-first"));
  ExpectAllZero(Run(first, "gan-first"), "gan-first");
  Job resumed;
  resumed.world = 2;
  resumed.checkpoint_dir = ckpt;
  resumed.args = args(3, Dump("gan-resumed"));
  ExpectAllZero(Run(resumed, "gan-resumed"), "gan-resumed");
  EXPECT_NE(ReadText(Log("gan-resumed", 0)).find("resumed from step-"), std::string::npos)
      << ReadText(Log("gan-resumed", 0));
  EXPECT_LE(MaxDiff(Dump("gan-single"), Dump("gan-resumed")), kTolerance);
}

TEST_F(WorkerProcessTest, GanPipelinePlanExitsTwo) {
  const std::string images = GenImages(8, 52);
  ASSERT_FALSE(images.empty());
  Job job;
  job.world = 2;
  job.plan = R"({"layout":"pipeline","global_batch":8,"micro_batches":2,"replicas":[
    {"batch":8,"stages":[{"rank":0,"layers":[0,7]},{"rank":1,"layers":[7,13]}]}]})";
  job.args = {"--model", "gan-pix2pix", "--data", images,    "--image-size",
              "48",      "--width",     "4",      "--steps", "1"};
  auto codes = Run(job, "gan-pipe");
  ASSERT_EQ(codes.size(), 2u);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(codes[static_cast<size_t>(r)], 2);
    EXPECT_NE(ReadText(Log("gan-pipe", r)).find("data parallel only"), std::string::npos)
        << ReadText(Log("gan-pipe", r));
  }
}
// A lab's own TorchScript sequence of layers (what torch.jit.script of an
// nn.Sequential gives; made here with the C++ API): its children are cut like
// a reference model's layers. Data (5:3), pipeline (GPipe, 1F1B), hybrid and a
// checkpoint resumed onto another layout all equal one process on the whole
// batch; a module whose forward is not its children in order exits 2.
fs::path SaveScriptedSequence(const fs::path& dir, bool sequential) {
  torch::manual_seed(5);
  torch::jit::Module net("net");
  const int64_t channels[] = {3, 8, 8, 8, 8, 3};
  std::string chain = "x";
  for (int i = 0; i < 5; ++i) {
    torch::jit::Module layer("layer" + std::to_string(i));
    layer.register_parameter("w", torch::randn({channels[i + 1], channels[i], 3, 3}) * 0.2, false);
    layer.register_parameter("b", torch::zeros({channels[i + 1]}), false);
    layer.define(i < 4 ? R"(
def forward(self, x):
    return torch.relu(torch.conv2d(x, self.w, self.b, [1, 1], [1, 1]))
)"
                       : R"(
def forward(self, x):
    return torch.conv2d(x, self.w, self.b, [1, 1], [1, 1])
)");
    net.register_module("c" + std::to_string(i), layer);
    chain = "self.c" + std::to_string(i) + ".forward(" + chain + ")";
  }
  // Not sequential: a residual around the layers (x - layers(x)).
  net.define("def forward(self, x):\n    return " + (sequential ? chain : "x - " + chain) + "\n");
  const fs::path path = dir / (sequential ? "sequence.pt" : "residual.pt");
  net.save(path.string());
  return path;
}

TEST_F(WorkerProcessTest, ScriptedSequenceTrainsInEveryLayoutAsOneProcess) {
  const std::string images = GenImages(16, 20);
  ASSERT_FALSE(images.empty());
  const std::string model = SaveScriptedSequence(dir_, true).string();
  auto args = [&](const std::string& dump, int steps) {
    return std::vector<std::string>{"--model-file", model,  "--loss",        "mse",
                                    "--data",       images, "--image-size",  "16",
                                    "--batch",      "8",    "--steps",       std::to_string(steps),
                                    "--lr",         "0.05", "--seed",        "3",
                                    "--momentum",   "0.9",  "--dump-params", dump};
  };
  Job single;
  single.args = args(Dump("seq-single"), 4);
  ExpectAllZero(Run(single, "seq-single"), "seq-single");
  EXPECT_NE(ReadParams(Dump("seq-single")).count("c0.w"), 0u) << "layer-named parameters";

  struct Case {
    std::string name;
    int world;
    std::string plan;
  };
  const std::vector<Case> cases = {
      {"seq-data", 2, R"({"layout":"data","global_batch":8,"replicas":[
        {"batch":5,"stages":[{"rank":0,"layers":[0,5]}]},
        {"batch":3,"stages":[{"rank":1,"layers":[0,5]}]}]})"},
      {"seq-gpipe", 2, R"({"layout":"pipeline","global_batch":8,"micro_batches":2,
        "schedule":"gpipe","replicas":[
        {"batch":8,"stages":[{"rank":0,"layers":[0,2]},{"rank":1,"layers":[2,5]}]}]})"},
      {"seq-1f1b", 2, R"({"layout":"pipeline","global_batch":8,"micro_batches":4,
        "schedule":"1f1b","replicas":[
        {"batch":8,"stages":[{"rank":0,"layers":[0,3]},{"rank":1,"layers":[3,5]}]}]})"},
      {"seq-hybrid", 4, R"({"layout":"hybrid","global_batch":8,"schedule":"1f1b","replicas":[
        {"batch":5,"stages":[{"rank":0,"layers":[0,1]},{"rank":1,"layers":[1,5]}]},
        {"batch":3,"stages":[{"rank":2,"layers":[0,4]},{"rank":3,"layers":[4,5]}]}]})"},
  };
  for (const Case& c : cases) {
    Job job;
    job.world = c.world;
    job.plan = c.plan;
    job.args = args(Dump(c.name), 4);
    ExpectAllZero(Run(job, c.name), c.name);
    EXPECT_LE(MaxDiff(Dump("seq-single"), Dump(c.name)), kTolerance) << c.name;
  }

  // Two steps as a pipeline with a checkpoint, the rest data parallel.
  const std::string ckpt = (dir_ / "seq-ckpt").string();
  Job first;
  first.world = 2;
  first.plan = cases[1].plan;
  first.checkpoint_dir = ckpt;
  first.args = args(Dump("seq-first"), 2);
  first.args.insert(first.args.end(), {"--checkpoint-every-steps", "1"});
  ExpectAllZero(Run(first, "seq-first"), "seq-first");
  Job second = first;
  second.plan = cases[0].plan;
  second.args = args(Dump("seq-resumed"), 4);
  ExpectAllZero(Run(second, "seq-resumed"), "seq-resumed");
  EXPECT_NE(ReadText(Log("seq-resumed", 0)).find("resumed from step-2"), std::string::npos)
      << ReadText(Log("seq-resumed", 0));
  EXPECT_LE(MaxDiff(Dump("seq-single"), Dump("seq-resumed")), kTolerance);

  Job residual;
  residual.args = args(Dump("seq-residual"), 1);
  residual.args[1] = SaveScriptedSequence(dir_, false).string();
  const std::vector<int> codes = Run(residual, "seq-residual");
  ASSERT_EQ(codes.size(), 1u);
  EXPECT_EQ(codes[0], 2);
  EXPECT_NE(ReadText(Log("seq-residual", 0)).find("is not its layers one after another"),
            std::string::npos)
      << ReadText(Log("seq-residual", 0));
}
#endif

}  // namespace
}  // namespace tessera::worker
