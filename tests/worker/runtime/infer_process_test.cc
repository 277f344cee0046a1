// `tessera-worker infer` as real processes: a large image tiled across three
// ranks over Gloo equals the whole-image result; two ranks leasing from a
// real HTTP lease route write every output once; kill -9 in the middle of a
// run and a rerun leave every output exactly once, byte-equal, with no
// temporary file; setup errors exit with code 2.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "tests/worker/runtime/infer_test_util.h"
#include "tests/worker/runtime/lease_server_fixture.h"
#include "tests/worker/runtime/process_util.h"
#include "worker/runtime/atomic_output.h"

namespace tessera::worker {
namespace {

namespace fs = std::filesystem;
using testing::BuildTestNet;
using testing::FilesUnder;
using testing::FreeLoopbackPort;
using testing::Slurp;
using testing::Spawn;
using testing::TestImage;
using testing::TorchrunEnv;
using testing::WriteTestCheckpoint;

int WaitExit(pid_t pid, int timeout_s = 120) { return testing::WaitExit(pid, timeout_s); }

class InferProcessTest : public testing::TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    data_ = dir_ / "scans";
    fs::create_directories(data_);
  }

  void WriteImage(const std::string& name, int64_t w, int64_t h, int pattern) {
    ASSERT_TRUE(WritePng((data_ / name).string(), TestImage(w, h, pattern, 7)).ok());
  }
  std::string Checkpoint(const std::string& model) {
    const fs::path ck = dir_ / ("ck-" + model);
    auto built = BuildTestNet(model, 4, 21);
    EXPECT_TRUE(built.ok());
    EXPECT_TRUE(WriteTestCheckpoint(ck.string(), model, *built).ok());
    return ck.string();
  }
  std::vector<std::string> InferArgs(const std::string& model, const std::string& out,
                                     const std::string& ck,
                                     const std::vector<std::string>& extra = {}) {
    std::vector<std::string> a = {TESSERA_WORKER_BINARY,
                                  "infer",
                                  "--model",
                                  model,
                                  "--data",
                                  data_.string(),
                                  "--output",
                                  (dir_ / out).string(),
                                  "--checkpoint",
                                  ck};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
  fs::path Log(const std::string& tag, int r) const {
    return dir_ / (tag + "-" + std::to_string(r) + ".log");
  }
  // Starts `world` ranks with the torchrun environment (+ extra variables).
  std::vector<pid_t> StartRanks(const std::string& tag, int world,
                                const std::vector<std::string>& args, const std::string& plan,
                                std::map<std::string, std::string> extra = {}) {
    const int port = FreeLoopbackPort();
    const std::string plan_path = (dir_ / (tag + "-plan.json")).string();
    std::ofstream(plan_path) << plan;
    std::vector<pid_t> pids;
    for (int r = 0; r < world; ++r) {
      std::map<std::string, std::string> env = extra;
      const std::map<std::string, std::string> torchrun = TorchrunEnv(r, world, port);
      env.insert(torchrun.begin(), torchrun.end());
      env.insert(
          {{"TESSERA_PLAN", plan_path},
           {"TESSERA_JOB_ID", "42"},
           {"TESSERA_ATTEMPT", "3"},
           {"TESSERA_PROGRESS_FILE", (dir_ / (tag + "-progress-" + std::to_string(r))).string()}});
      pids.push_back(Spawn(args, env, Log(tag, r).string()));
    }
    return pids;
  }
  void ExpectExitZero(const std::vector<pid_t>& pids, const std::string& tag) {
    for (size_t r = 0; r < pids.size(); ++r) {
      EXPECT_EQ(WaitExit(pids[r]), 0) << tag << " rank " << r << ":\n"
                                      << Slurp(Log(tag, static_cast<int>(r)));
    }
  }
  int RunOne(const std::string& tag, const std::vector<std::string>& args,
             std::map<std::string, std::string> env = {}) {
    return WaitExit(Spawn(args, env, Log(tag, 0).string()));
  }

  fs::path data_;
};

Image DecodeOrDie(const std::string& bytes) {
  auto img = DecodePng(std::vector<uint8_t>(bytes.begin(), bytes.end()), "output");
  EXPECT_TRUE(img.ok()) << img.status().ToString();
  return img.ok() ? *img : Image{};
}

TEST_F(InferProcessTest, LargeImageTiledAcrossThreeRanksEqualsWholeImage) {
  WriteImage("big.png", 200, 150, 3);
  WriteImage("small.png", 40, 30, 1);
  const std::string ck = Checkpoint("colorize-unet");
  // Tiled plan: weights 3:2:1 by device speed; 128 px tiles (the worker
  // raises the overlap to 2 x 56 px): 18 tiles for the large image.
  const std::string plan = R"({"layout":"tiled","global_batch":6,"micro_batches":1,
    "replicas":[{"batch":3,"stages":[{"rank":0,"device":"a:0","layers":[0,8]}]},
                {"batch":2,"stages":[{"rank":1,"device":"b:0","layers":[0,8]}]},
                {"batch":1,"stages":[{"rank":2,"device":"c:0","layers":[0,8]}]}],
    "tiling":{"tile_px":128,"overlap_px":16,"tiles_per_image":18}})";
  ExpectExitZero(StartRanks("tiled", 3, InferArgs("colorize-unet", "tiled", ck, {"--local"}), plan),
                 "tiled");
  // 18 tiles of the large image shared 3:2:1; the small one is one tile (rank 0).
  EXPECT_NE(Slurp(Log("tiled", 1)).find("rank 1 computed 6 tiles of 2 images"), std::string::npos)
      << Slurp(Log("tiled", 1));
  EXPECT_NE(Slurp(Log("tiled", 2)).find("rank 2 computed 3 tiles of 2 images"), std::string::npos)
      << Slurp(Log("tiled", 2));

  ASSERT_EQ(
      RunOne("one", InferArgs("colorize-unet", "one", ck, {"--local", "--max-tile-px", "128"})), 0)
      << Slurp(Log("one", 0));
  ASSERT_EQ(RunOne("whole", InferArgs("colorize-unet", "whole", ck, {"--local"})), 0)
      << Slurp(Log("whole", 0));

  const auto tiled = FilesUnder(dir_ / "tiled");
  const auto one = FilesUnder(dir_ / "one");
  const auto whole = FilesUnder(dir_ / "whole");
  ASSERT_EQ(tiled.size(), 2u);
  // Which rank computed a tile does not change a byte.
  EXPECT_EQ(tiled, one);
  // Tiles equal the whole image up to float rounding (at most 1 of 255).
  const Image t = DecodeOrDie(tiled.at("big.png"));
  const Image w = DecodeOrDie(whole.at("big.png"));
  ASSERT_EQ(t.width, 200);
  ASSERT_EQ(t.height, 150);
  ASSERT_EQ(t.pixels.size(), w.pixels.size());
  int max_diff = 0;
  for (size_t i = 0; i < t.pixels.size(); ++i) {
    max_diff = std::max(max_diff, std::abs(int(t.pixels[i]) - int(w.pixels[i])));
  }
  EXPECT_LE(max_diff, 1);
  // Rank 0 reports progress in JSON lines.
  std::ifstream progress(dir_ / "tiled-progress-0");
  std::string line, last;
  while (std::getline(progress, line)) last = line;
  ASSERT_FALSE(last.empty());
  auto j = nlohmann::json::parse(last);
  EXPECT_EQ(j.at("images_done").get<int>(), 2);
  EXPECT_TRUE(j.contains("images_per_s"));
}

TEST_F(InferProcessTest, TwoRanksLeaseFromTheControllerOverHttp) {
  std::vector<std::string> items;
  for (int i = 0; i < 9; ++i) {
    const std::string name = "s" + std::to_string(i) + ".png";
    WriteImage(name, 32 + 8 * (i % 2), 24, i % 6);
    items.push_back(name);
  }
  const std::string ck = Checkpoint("denoiser-dncnn");
  auto queue = MemoryChunkQueue::Create(items, {.chunk_size = 2});
  testing::LeaseServer server(queue, "tok", "42", 3);
  ASSERT_TRUE(server.Start().ok());
  const std::string plan = R"({"layout":"data","global_batch":2,
    "replicas":[{"batch":1,"stages":[{"rank":0,"layers":[0,10]}]},
                {"batch":1,"stages":[{"rank":1,"layers":[0,10]}]}]})";
  ExpectExitZero(
      StartRanks("http", 2, InferArgs("denoiser-dncnn", "http", ck), plan,
                 {{"TESSERA_CONTROLLER_URL", server.url()}, {"TESSERA_LEASE_TOKEN", "tok"}}),
      "http");
  for (const auto& r : queue->Records()) {
    EXPECT_TRUE(r.done);
    EXPECT_EQ(r.times_completed, 1);
  }
  ASSERT_EQ(RunOne("ref", InferArgs("denoiser-dncnn", "ref", ck, {"--local"})), 0)
      << Slurp(Log("ref", 0));
  EXPECT_EQ(FilesUnder(dir_ / "http"), FilesUnder(dir_ / "ref"));
  EXPECT_EQ(FilesUnder(dir_ / "http").size(), 9u);
}

TEST_F(InferProcessTest, KillNineThenRerunLeavesEveryOutputOnceAndComplete) {
  for (int i = 0; i < 12; ++i) WriteImage("k" + std::to_string(i) + ".png", 64, 64, i % 6);
  const std::string ck = Checkpoint("colorize-unet");
  ASSERT_EQ(RunOne("ref", InferArgs("colorize-unet", "ref", ck, {"--local"})), 0)
      << Slurp(Log("ref", 0));
  const fs::path out = dir_ / "out";
  const pid_t pid = Spawn(InferArgs("colorize-unet", "out", ck, {"--local", "--chunk-size", "4"}),
                          {{"TESSERA_DEVICE_SPEED", "0.02"}}, Log("slow", 0).string());
  // Outputs at their final names (a chunk's outputs are temporary files
  // until the chunk commits them together).
  auto finals = [&out] {
    size_t n = 0;
    for (const auto& [name, bytes] : FilesUnder(out)) {
      n += !IsTempFileName(fs::path(name).filename().string());
    }
    return n;
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (finals() < 3 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ::kill(pid, SIGKILL);
  EXPECT_EQ(WaitExit(pid), 128 + SIGKILL);
  const size_t before = finals();
  ASSERT_GE(before, 3u);
  ASSERT_LT(before, 12u) << "the run finished before it was killed";
  ASSERT_EQ(
      RunOne("rerun", InferArgs("colorize-unet", "out", ck, {"--local", "--chunk-size", "4"})), 0)
      << Slurp(Log("rerun", 0));
  const auto files = FilesUnder(out);
  for (const auto& [name, bytes] : files) {
    EXPECT_FALSE(IsTempFileName(fs::path(name).filename().string())) << name;
  }
  EXPECT_EQ(files, FilesUnder(dir_ / "ref"));
  // Outputs finished before the kill were not computed again.
  std::smatch m;
  const std::string log = Slurp(Log("rerun", 0));
  ASSERT_TRUE(std::regex_search(log, m, std::regex("skipped (\\d+)"))) << log;
  EXPECT_GE(std::stoi(m[1].str()), 2) << log;
}

TEST_F(InferProcessTest, SetupErrorsExitWithCodeTwo) {
  WriteImage("a.png", 16, 16, 0);
  const std::string ck = Checkpoint("denoiser-dncnn");
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const Case cases[] = {
      {InferArgs("denoiser-dncnn", "o1", (dir_ / "nope").string(), {"--local"}), "nope"},
      {InferArgs("unet-9000", "o2", ck, {"--local"}), "unknown model"},
      {{TESSERA_WORKER_BINARY, "infer", "--model", "denoiser-dncnn", "--data",
        (dir_ / "missing").string(), "--output", (dir_ / "o3").string(), "--checkpoint", ck,
        "--local"},
       "missing"},
      {InferArgs("denoiser-dncnn", "o4", ck), "TESSERA_CONTROLLER_URL"},  // no --local
  };
  int i = 0;
  for (const Case& c : cases) {
    const std::string tag = "err" + std::to_string(i++);
    EXPECT_EQ(RunOne(tag, c.args), 2) << Slurp(Log(tag, 0));
    EXPECT_NE(Slurp(Log(tag, 0)).find(c.message), std::string::npos) << Slurp(Log(tag, 0));
  }
}

}  // namespace
}  // namespace tessera::worker
