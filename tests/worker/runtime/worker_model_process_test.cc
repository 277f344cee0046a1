// Integration tests: real tessera-worker processes training the image models
// on generated images: the colorizer's loss falls; batch norm synchronized
// across data-parallel and hybrid ranks, the GAN's data parallel and a lab's
// TorchScript sequence of layers in every layout all equal one process; a GAN
// pipeline plan and a module that is not a sequence of layers exit 2.
// (Training runs of tiny-skip: worker_train_process_test.cc.)
#include <gtest/gtest.h>
#include <torch/script.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/worker/runtime/worker_process_fixture.h"

#ifdef TESSERA_HAVE_WORKER_DATA
namespace tessera::worker {
namespace {
namespace fs = std::filesystem;
using testing::WorkerProcessTest;

std::vector<double> ProgressLosses(const fs::path& p) {
  std::ifstream in(p);
  std::string line;
  std::vector<double> out;
  while (std::getline(in, line)) out.push_back(nlohmann::json::parse(line).at("loss"));
  return out;
}

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
  EXPECT_NE(LogText("gan-resumed", 0).find("resumed from step-"), std::string::npos)
      << LogText("gan-resumed", 0);
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
    EXPECT_NE(LogText("gan-pipe", r).find("data parallel only"), std::string::npos)
        << LogText("gan-pipe", r);
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
  EXPECT_NE(LogText("seq-resumed", 0).find("resumed from step-2"), std::string::npos)
      << LogText("seq-resumed", 0);
  EXPECT_LE(MaxDiff(Dump("seq-single"), Dump("seq-resumed")), kTolerance);

  Job residual;
  residual.args = args(Dump("seq-residual"), 1);
  residual.args[1] = SaveScriptedSequence(dir_, false).string();
  const std::vector<int> codes = Run(residual, "seq-residual");
  ASSERT_EQ(codes.size(), 1u);
  EXPECT_EQ(codes[0], 2);
  EXPECT_NE(LogText("seq-residual", 0).find("is not its layers one after another"),
            std::string::npos)
      << LogText("seq-residual", 0);
}

}  // namespace
}  // namespace tessera::worker
#endif  // TESSERA_HAVE_WORKER_DATA
