// ResumeFromCheckpoint: the one resume path of the trainer (a rank's own
// layers, one optimizer) and the GAN trainer (two models, two optimizers),
// against real checkpoints written by SaveCheckpoint in a one-rank world.
#include "worker/runtime/resume.h"

#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "worker/runtime/checkpoint.h"
#include "worker/runtime/collectives.h"
#include "worker/runtime/optimizer.h"

namespace tessera::worker {
namespace {

namespace fs = std::filesystem;

constexpr char kModel[] = "tiny-mlp";
constexpr int64_t kStep = 12;
constexpr int64_t kGlobalBatch = 8;

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() /
            ("tessera-resume-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++));
    fs::remove_all(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string str() const { return path_.string(); }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

// Tensors named as a trainer writes them, with recognisable values.
NamedTensors SavedState(const std::vector<std::pair<std::string, std::vector<int64_t>>>& shapes) {
  NamedTensors out;
  float fill = 1;
  for (const auto& [name, shape] : shapes) {
    out.emplace_back(name, torch::full(shape, fill));
    out.emplace_back(name + "#momentum", torch::full(shape, fill + 0.5f));
    fill += 1;
  }
  return out;
}

// Writes step kStep of model `model` holding `tensors` and the CPU RNG state
// `rng` into `dir`.
void WriteCheckpoint(Collectives& world, const std::string& dir, const std::string& model,
                     NamedTensors tensors, const torch::Tensor& rng) {
  CheckpointContent c;
  c.step = kStep;
  c.global_batch = kGlobalBatch;
  c.samples_seen = kStep * kGlobalBatch;
  c.model = model;
  c.layout = "data";
  c.file_name = "state.bin";
  c.tensors = std::move(tensors);
  c.tensors.emplace_back(kRngTensor, rng);
  ASSERT_TRUE(SaveCheckpoint(world, dir, c).ok());
}

// A rank's state: the named tensors the model would own, zero-filled.
NamedTensors ModelState(const std::vector<std::pair<std::string, std::vector<int64_t>>>& shapes) {
  NamedTensors out;
  for (const auto& [name, shape] : shapes) {
    out.emplace_back(name, torch::zeros(shape).requires_grad_(true));
  }
  return out;
}

std::vector<std::string> NamesOf(const NamedTensors& tensors) {
  std::vector<std::string> names;
  for (const auto& [n, t] : tensors) names.push_back(n);
  return names;
}

struct ResumeRow {
  const char* name;
  // What the checkpoint holds, by name and shape.
  std::vector<std::pair<std::string, std::vector<int64_t>>> saved;
  // The model whose state is restored: its optimizers own one group each.
  std::vector<std::vector<std::pair<std::string, std::vector<int64_t>>>> optimizer_groups;
  const char* checkpoint_model;
  StatusCode want;           // kOk: resumed
  const char* message_part;  // in the error's message
};

class ResumeTest : public ::testing::TestWithParam<ResumeRow> {};

TEST_P(ResumeTest, RestoresOrRefusesByOneConvention) {
  const ResumeRow& row = GetParam();
  TempDir dir;
  std::unique_ptr<World> world = MakeLocalWorld();
  const torch::Tensor rng = GetCpuRngState();
  const torch::Tensor first_draw = torch::rand({4});
  WriteCheckpoint(world->world(), dir.str(), row.checkpoint_model, SavedState(row.saved), rng);
  torch::rand({16});  // the RNG moves on after the save

  NamedTensors state;
  std::vector<NamedOptimizer> optimizers;
  for (const auto& group : row.optimizer_groups) {
    NamedTensors params = ModelState(group);
    for (auto& p : params) state.push_back(p);
    OptimizerConfig sgd;
    auto made = NamedOptimizer::Make(sgd, params);
    ASSERT_TRUE(made.ok());
    optimizers.push_back(*std::move(made));
  }
  std::vector<NamedOptimizer*> opt_ptrs;
  for (auto& o : optimizers) opt_ptrs.push_back(&o);

  auto resumed =
      ResumeFromCheckpoint(world->world(), dir.str(), kModel,
                           ReadNewestCheckpoint(dir.str(), NamesOf(state)), state, opt_ptrs);
  if (row.want != StatusCode::kOk) {
    ASSERT_FALSE(resumed.ok()) << row.name;
    EXPECT_EQ(resumed.status().code(), row.want) << resumed.status().ToString();
    EXPECT_NE(resumed.status().message().find(row.message_part), std::string::npos)
        << resumed.status().message();
    return;
  }
  ASSERT_TRUE(resumed.ok()) << resumed.status().ToString();
  ASSERT_TRUE(resumed->has_value());
  EXPECT_EQ((*resumed)->step, kStep);
  EXPECT_EQ((*resumed)->samples_seen, kStep * kGlobalBatch);
  // Parameters hold the saved values, in place.
  std::map<std::string, torch::Tensor> saved;
  for (auto& [n, t] : SavedState(row.saved)) saved[n] = t;
  for (const auto& [name, tensor] : state) {
    EXPECT_TRUE(torch::equal(tensor.detach(), saved.at(name))) << name;
  }
  // Every optimizer holds the state of its own parameters.
  for (size_t i = 0; i < optimizers.size(); ++i) {
    auto tensors = optimizers[i].StateTensors();
    ASSERT_EQ(tensors.size(), row.optimizer_groups[i].size()) << i;
    for (const auto& [name, t] : tensors) EXPECT_TRUE(torch::equal(t, saved.at(name))) << name;
  }
  // The RNG continues from the saved state.
  EXPECT_TRUE(torch::equal(torch::rand({4}), first_draw));
}

const std::vector<std::pair<std::string, std::vector<int64_t>>> kLayers = {
    {"0.weight", {2, 3}}, {"0.bias", {2}}, {"1.weight", {1, 2}}};

INSTANTIATE_TEST_SUITE_P(
    BothTrainers, ResumeTest,
    ::testing::Values(
        // trainer.cc: a rank owns some layers and has one optimizer.
        ResumeRow{"trainer_whole_model", kLayers, {kLayers}, kModel, StatusCode::kOk, ""},
        ResumeRow{"trainer_one_stage",
                  kLayers,
                  {{{"0.weight", {2, 3}}, {"0.bias", {2}}}},
                  kModel,
                  StatusCode::kOk,
                  ""},
        // gan_trainer.cc: generator and discriminator, an optimizer each.
        ResumeRow{"gan",
                  {{"gen.0.weight", {2, 3}}, {"gen.0.bias", {2}}, {"disc.0.weight", {1, 2}}},
                  {{{"gen.0.weight", {2, 3}}, {"gen.0.bias", {2}}}, {{"disc.0.weight", {1, 2}}}},
                  kModel,
                  StatusCode::kOk,
                  ""},
        // A tensor of the rank's state the checkpoint lacks.
        ResumeRow{"trainer_missing_tensor",
                  {{"0.weight", {2, 3}}},
                  {kLayers},
                  kModel,
                  StatusCode::kFailedPrecondition,
                  "has no tensor 0.bias"},
        ResumeRow{"gan_missing_tensor",
                  {{"gen.0.weight", {2, 3}}},
                  {{{"gen.0.weight", {2, 3}}}, {{"disc.0.weight", {1, 2}}}},
                  kModel,
                  StatusCode::kFailedPrecondition,
                  "has no tensor disc.0.weight"},
        // A tensor of another shape.
        ResumeRow{"trainer_shape_mismatch",
                  kLayers,
                  {{{"0.weight", {3, 3}}, {"0.bias", {2}}}},
                  kModel,
                  StatusCode::kFailedPrecondition,
                  "checkpoint tensor 0.weight has another shape"},
        ResumeRow{"gan_shape_mismatch",
                  {{"gen.0.weight", {2, 3}}, {"disc.0.weight", {1, 2}}},
                  {{{"gen.0.weight", {2, 3}}}, {{"disc.0.weight", {2, 2}}}},
                  kModel,
                  StatusCode::kFailedPrecondition,
                  "checkpoint tensor disc.0.weight has another shape"},
        // A checkpoint of another model.
        ResumeRow{"another_model",
                  kLayers,
                  {kLayers},
                  "tiny-skip",
                  StatusCode::kFailedPrecondition,
                  "is of model \"tiny-skip\""}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(ResumePathTest, NoCheckpointIsAFreshStart) {
  TempDir dir;
  std::unique_ptr<World> world = MakeLocalWorld();
  NamedTensors state = ModelState({{"0.weight", {2, 3}}});
  auto resumed = ResumeFromCheckpoint(world->world(), dir.str(), kModel,
                                      ReadNewestCheckpoint(dir.str(), NamesOf(state)), state, {});
  ASSERT_TRUE(resumed.ok()) << resumed.status().ToString();
  EXPECT_FALSE(resumed->has_value());
  EXPECT_TRUE(fs::is_directory(dir.str())) << "the directory is made for later saves";
}

TEST(ResumePathTest, ARankReadsOnlyItsTensorsTheirOptimizerStateAndTheRng) {
  TempDir dir;
  std::unique_ptr<World> world = MakeLocalWorld();
  WriteCheckpoint(world->world(), dir.str(), kModel, SavedState(kLayers), GetCpuRngState());
  std::vector<std::string> skipped;
  auto manifest = FindNewestCheckpoint(dir.str(), &skipped);
  ASSERT_TRUE(manifest.has_value());
  auto names = ResumeTensorNames(*manifest, {"0.bias", "9.absent"});
  ASSERT_TRUE(names.ok()) << names.status().ToString();
  EXPECT_EQ(*names, (std::vector<std::string>{"0.bias", "0.bias#momentum", kRngTensor}));
}

}  // namespace
}  // namespace tessera::worker
