// tessera-slurm-launch: a Slurm task finds its rank and runs it as the agent would.
#include "slurm/launcher.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "common/fake_clock.h"
#include "common/faulty_file_system.h"
#include "common/faulty_process_launcher.h"
#include "tests/common/temp_dir.h"

namespace tessera::slurm {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using ::tessera::testing::Slurp;
using ::tessera::testing::TempDir;

api::Device Gpu(const std::string& node, int64_t index, const std::string& type, double speed,
                bool emulated) {
  api::Device d;
  d.node = node;
  d.index = index;
  d.name = type;
  d.type = "cuda";
  d.relative_speed = speed;
  d.memory_bytes = int64_t{1} << 30;
  d.emulated = emulated;
  return d;
}

api::Node NodeOf(const std::string& name, std::vector<api::Device> devices) {
  api::Node n;
  n.name = name;
  n.address = "127.0.0.1";
  n.cpu_cores = 2;
  n.devices = std::move(devices);
  return n;
}

// Job 7, attempt 2: ranks 0 and 1 on fa's two GPUs, rank 2 on fb's.
SlurmAttempt MakeAttempt(const std::string& root, std::vector<std::string> argv, bool real) {
  std::map<std::string, api::Node> nodes = {
      {"fa", NodeOf("fa", {Gpu("fa", 0, "a100", 0.5, !real), Gpu("fa", 1, "a100", 0.5, !real)})},
      {"fb", NodeOf("fb", {Gpu("fb", 0, "t4", 0.25, !real)})},
  };
  const std::vector<std::pair<std::string, int64_t>> where = {{"fa", 0}, {"fa", 1}, {"fb", 0}};
  std::vector<api::WorkerLaunch> launches;
  std::map<int64_t, std::string> rank_nodes;
  for (int64_t r = 0; r < 3; ++r) {
    api::WorkerLaunch l;
    l.key = {7, 2, r};
    l.argv = argv;
    l.device_indices = {where[r].second};
    l.env = {{"RANK", std::to_string(r)},
             {"WORLD_SIZE", "3"},
             {"LOCAL_RANK", std::to_string(r < 2 ? r : 0)},
             {"LOCAL_WORLD_SIZE", r < 2 ? "2" : "1"},
             {"MASTER_ADDR", "127.0.0.1"},
             {"MASTER_PORT", "29511"}};
    l.plan = {{"layout", "data_parallel"}, {"rank", r}};
    launches.push_back(l);
    rank_nodes[r] = where[r].first;
  }
  auto a = AttemptOf(launches, rank_nodes, nodes, root);
  EXPECT_TRUE(a.ok()) << a.status().ToString();
  return *a;
}

TEST(LauncherTest, EachTaskFindsItsRankAndTheAgentsEnvironment) {
  SlurmAttempt attempt = MakeAttempt("/shared/slurm", {"/bin/true"}, /*real=*/false);
  // The attempt file round-trips.
  auto back = SlurmAttemptFromJson(ToJson(attempt));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  struct Case {
    std::string node;
    std::string localid;
    int64_t rank;
    std::string speed;
    std::string omp;
  };
  const Case cases[] = {
      {"fa", "0", 0, "0.5", "1"},
      {"fa", "1", 1, "0.5", "1"},
      {"fb", "0", 2, "0.25", "2"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.node + "/" + c.localid);
    std::map<std::string, std::string> slurm = {
        {"SLURMD_NODENAME", c.node}, {"SLURM_LOCALID", c.localid},  {"SLURM_HET_SIZE", "2"},
        {"SLURM_JOB_ID", "55"},      {"CUDA_VISIBLE_DEVICES", "0"}, {"UNRELATED", "x"}};
    auto t = PrepareTask(*back, slurm, {{"PATH", "/usr/bin:/bin"}});
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    EXPECT_EQ(t->rank, c.rank);
    const auto& env = t->env;
    EXPECT_EQ(env.at("RANK"), std::to_string(c.rank));
    EXPECT_EQ(env.at("WORLD_SIZE"), "3");
    EXPECT_EQ(env.at("MASTER_PORT"), "29511");
    EXPECT_EQ(env.at("TESSERA_JOB_ID"), "7");
    EXPECT_EQ(env.at("TESSERA_ATTEMPT"), "2");
    EXPECT_EQ(env.at("TESSERA_DEVICE"), "cpu");  // emulated GPUs compute on the CPU
    EXPECT_EQ(env.at("TESSERA_DEVICE_SPEED"), c.speed);
    EXPECT_EQ(env.at("TESSERA_DEVICE_MEMORY"), std::to_string(int64_t{1} << 30));
    EXPECT_EQ(env.at("CUDA_VISIBLE_DEVICES"), "");
    EXPECT_EQ(env.at("OMP_NUM_THREADS"), c.omp);
    EXPECT_EQ(env.at("TESSERA_PLAN"),
              "/shared/slurm/jobs/7/2/rank-" + std::to_string(c.rank) + "/plan.json");
    EXPECT_EQ(env.at("TESSERA_PROGRESS_FILE"),
              "/shared/slurm/jobs/7/2/rank-" + std::to_string(c.rank) + "/progress.jsonl");
    EXPECT_EQ(env.at("SLURM_JOB_ID"), "55");
    EXPECT_EQ(env.at("PATH"), "/usr/bin:/bin");
    EXPECT_FALSE(env.contains("UNRELATED"));
    EXPECT_EQ(t->launch.plan["rank"], c.rank);
  }
}

TEST(LauncherTest, RealGpusKeepSlurmsBinding) {
  SlurmAttempt attempt = MakeAttempt("/shared/slurm", {"/bin/true"}, /*real=*/true);
  auto t = PrepareTask(
      attempt, {{"SLURMD_NODENAME", "fa"}, {"SLURM_LOCALID", "1"}, {"CUDA_VISIBLE_DEVICES", "4,5"}},
      {});
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->env.at("CUDA_VISIBLE_DEVICES"), "4,5");
  EXPECT_EQ(t->env.at("TESSERA_DEVICE"), "cuda:1");
}

TEST(LauncherTest, SlurmVariablesThatDoNotMatchAreRefused) {
  SlurmAttempt attempt = MakeAttempt("/shared/slurm", {"/bin/true"}, false);
  struct Case {
    std::map<std::string, std::string> env;
    std::string field;
  };
  const Case cases[] = {
      {{{"SLURM_LOCALID", "0"}}, "SLURMD_NODENAME"},
      {{{"SLURMD_NODENAME", "fa"}}, "SLURM_LOCALID"},
      {{{"SLURMD_NODENAME", "fa"}, {"SLURM_LOCALID", "x"}}, "SLURM_LOCALID"},
      {{{"SLURMD_NODENAME", "fa"}, {"SLURM_LOCALID", "2"}}, "SLURM_LOCALID"},
      {{{"SLURMD_NODENAME", "fz"}, {"SLURM_LOCALID", "0"}}, "SLURM_LOCALID"},
      {{{"SLURMD_NODENAME", "fa"}, {"SLURM_LOCALID", "0"}, {"SLURM_HET_SIZE", "3"}},
       "SLURM_HET_SIZE"},
  };
  for (const Case& c : cases) {
    auto t = PrepareTask(attempt, c.env, {});
    ASSERT_FALSE(t.ok()) << c.field;
    EXPECT_EQ(t.status().field(), c.field);
  }
}

class LauncherRunTest : public ::testing::Test {
 protected:
  // The rank that runs `argv` as local task `localid` of `node`, its files
  // under root_.
  Result<TaskLaunch> PrepareRank(std::vector<std::string> argv, const std::string& node = "fb",
                                 const std::string& localid = "0") {
    return PrepareTask(MakeAttempt(root_.string(), std::move(argv), /*real=*/false),
                       {{"SLURMD_NODENAME", node}, {"SLURM_LOCALID", localid}},
                       {{"PATH", "/usr/bin:/bin"}});
  }

  TempDir dir_;
  const fs::path root_ = dir_.path();
};

TEST_F(LauncherRunTest, RunsTheRankAndRecordsItsExit) {
  auto t =
      PrepareRank({"/bin/sh", "-c",
                   "echo \"rank $RANK on $SLURMD_NODENAME\"; test -f \"$TESSERA_PLAN\"; exit 3"},
                  "fa", "1");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  FakeClock clock;
  RunTaskOptions options;
  options.clock = &clock;
  auto code = RunTask(*t, options);
  ASSERT_TRUE(code.ok()) << code.status().ToString();
  EXPECT_EQ(*code, 3);
  EXPECT_NE(Slurp(t->paths.log).find("rank 1 on fa"), std::string::npos) << Slurp(t->paths.log);
  EXPECT_EQ(api::Json::parse(Slurp(t->paths.exit))["exit_code"], 3);
  EXPECT_EQ(api::Json::parse(Slurp(t->paths.exit))["ended_ms"], clock.NowUnixMillis());
  EXPECT_TRUE(fs::exists(t->paths.pid));
  EXPECT_TRUE(fs::exists(t->paths.progress));
  EXPECT_EQ(api::Json::parse(Slurp(t->paths.plan))["rank"], 1);
}

// A rank file whose fsync or rename fails is not swallowed: the plan's fails
// the task before the rank starts, exit.json's fails it after, worker.pid's
// is said in the rank's log (the rank still runs to its end).
TEST_F(LauncherRunTest, RankFilesThatCannotBeWrittenSurface) {
  struct Case {
    FileOp op;
    const char* file;
    int err;
  };
  const Case cases[] = {
      {FileOp::kSync, "plan.json", EIO},    {FileOp::kRename, "plan.json", EXDEV},
      {FileOp::kSync, "worker.pid", EIO},   {FileOp::kRename, "worker.pid", EROFS},
      {FileOp::kSync, "exit.json", ENOSPC}, {FileOp::kRename, "exit.json", EIO}};
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.file) + (c.op == FileOp::kSync ? " fsync" : " rename"));
    fs::remove_all(root_);
    auto t = PrepareRank({"/bin/sh", "-c", "echo ran; exit 5"});
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    FaultyFileSystem faulty;
    faulty.FailNext(c.op, c.file, c.err);
    RunTaskOptions options;
    options.fs = &faulty;
    Result<int> code = RunTask(*t, options);
    EXPECT_EQ(faulty.fired(), 1);
    const std::string file = (t->paths.dir / c.file).string();
    const std::string log = Slurp(t->paths.log);
    if (std::string(c.file) == "worker.pid") {
      ASSERT_TRUE(code.ok()) << code.status().ToString();
      EXPECT_EQ(*code, 5);
      EXPECT_NE(log.find("cannot record the pid of rank 2"), std::string::npos) << log;
      EXPECT_NE(log.find("cannot write " + file), std::string::npos) << log;
      EXPECT_NE(log.find(std::strerror(c.err)), std::string::npos) << log;
      EXPECT_EQ(api::Json::parse(Slurp(t->paths.exit))["exit_code"], 5);
      continue;
    }
    ASSERT_FALSE(code.ok());
    EXPECT_EQ(code.status().message().rfind("cannot write " + file + ": ", 0), 0u)
        << code.status().message();
    EXPECT_NE(code.status().message().find(std::strerror(c.err)), std::string::npos);
    EXPECT_FALSE(fs::exists(t->paths.dir / c.file));
    // The plan's failure stops the task before its rank runs.
    EXPECT_EQ(log.find("ran") != std::string::npos, std::string(c.file) == "exit.json") << log;
  }
}

// A rank that cannot be started (fork fails, injected) is RunTask's error
// (tessera-slurm-launch exits 127); nothing says it ran; a command that cannot
// be executed is a rank that exited 127, said in its log.
TEST_F(LauncherRunTest, StartFailuresSurface) {
  auto t = PrepareRank({"/bin/sh", "-c", "exit 0"});
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  FaultyProcessLauncher launcher;
  launcher.FailNextLaunch(EAGAIN);
  RunTaskOptions options;
  options.launcher = &launcher;
  Result<int> code = RunTask(*t, options);
  ASSERT_FALSE(code.ok());
  EXPECT_EQ(code.status().message(), "fork failed: " + std::string(std::strerror(EAGAIN)));
  EXPECT_FALSE(fs::exists(t->paths.pid));
  EXPECT_FALSE(fs::exists(t->paths.exit));

  t = PrepareRank({(root_ / "no-such-program").string()});
  ASSERT_TRUE(t.ok());
  code = RunTask(*t);
  ASSERT_TRUE(code.ok()) << code.status().ToString();
  EXPECT_EQ(*code, 127);
  EXPECT_EQ(api::Json::parse(Slurp(t->paths.exit))["exit_code"], 127);
  EXPECT_NE(Slurp(t->paths.log).find("cannot execute the rank's command"), std::string::npos);
}

// The real binary, as srun runs it: Slurm's cancel (SIGTERM) reaches the rank.
TEST_F(LauncherRunTest, BinaryForwardsSlurmsSignalToTheRank) {
  SlurmAttempt attempt =
      MakeAttempt(root_.string(),
                  {"/bin/sh", "-c",
                   "trap 'echo got TERM; exit 143' TERM; echo ready; while :; do sleep 0.05; done"},
                  false);
  fs::create_directories(root_);
  const fs::path file = root_ / "attempt.json";
  std::ofstream(file) << ToJson(attempt).dump();
  pid_t pid = ::fork();
  if (pid == 0) {
    ::setenv("SLURMD_NODENAME", "fb", 1);
    ::setenv("SLURM_LOCALID", "0", 1);
    ::execl(TESSERA_SLURM_LAUNCHER, TESSERA_SLURM_LAUNCHER, file.c_str(), nullptr);
    _exit(126);
  }
  ASSERT_GT(pid, 0);
  const launch::RankPaths paths = launch::RankPathsFor(root_, {7, 2, 2});
  auto deadline = std::chrono::steady_clock::now() + 20s;
  while (Slurp(paths.log).find("ready") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_NE(Slurp(paths.log).find("ready"), std::string::npos);
  ::kill(pid, SIGTERM);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 143);
  EXPECT_NE(Slurp(paths.log).find("got TERM"), std::string::npos) << Slurp(paths.log);
  EXPECT_EQ(api::Json::parse(Slurp(paths.exit))["exit_code"], 143);
}

}  // namespace
}  // namespace tessera::slurm
